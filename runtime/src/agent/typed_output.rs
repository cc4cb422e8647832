//! A structured final answer: the schema of a Rust type, checked before the run completes, and
//! read back as that type.
//!
//! [`AgentBuilder::output`](super::AgentBuilder::output) derives `T`'s JSON Schema with
//! `schemars`. The model is told (in the system message) to answer with one JSON value of that
//! schema, and model clients that support structured output receive the schema with each call
//! ([`ModelCallContext::output_schema`](crate::interaction::model::ModelCallContext)). Each
//! final answer is checked before the run may complete: an answer that is not JSON, or does
//! not match, is sent back to the model as feedback and the model is called again (bounded by
//! `max_model_calls`). [`RunResult::output`](super::RunResult::output) decodes the accepted
//! answer.

use super::json_schema::json_text;
use crate::interaction::completion::{CompletionCandidate, CompletionDecision, CompletionValidator};
use crate::interaction::output::Output;
use crate::json::Json;
use crate::schema::Schema;
use std::sync::Arc;

/// The declared output type of an agent: its schema and the name shown in errors.
#[derive(Clone, Debug)]
pub(crate) struct OutputSpec {
    pub(crate) type_name: &'static str,
    pub(crate) schema: Result<Json, String>,
}

impl OutputSpec {
    pub(crate) fn of<T: schemars::JsonSchema>() -> OutputSpec {
        OutputSpec { type_name: std::any::type_name::<T>(), schema: super::json_schema::schema_of::<T>() }
    }
}

/// The system-message paragraph that asks for the structured answer.
pub(crate) fn output_instructions(schema: &Json) -> String {
    format!(
        "Give your final answer as one JSON value that matches this JSON Schema, with no other text:\n{}",
        schema.to_canonical_string()
    )
}

/// The text of a completion candidate: the model's final message, or the direct tool
/// results' texts (one per line), as `RunResult::text` reads it.
pub(crate) fn candidate_text(output: &Output) -> String {
    if let Some(response) = output.response() {
        return response.message.as_ref().map(|m| m.text()).unwrap_or_default();
    }
    output
        .tool_results()
        .map(|results| results.iter().map(|r| r.output.content.clone()).collect::<Vec<_>>().join("\n"))
        .unwrap_or_default()
}

/// The validator that accepts only answers matching `schema`, then asks `then` (the user's
/// own validator, if any).
pub(crate) fn output_validator(schema: Schema, then: Option<CompletionValidator>) -> CompletionValidator {
    Arc::new(move |candidate: &CompletionCandidate| {
        let text = candidate_text(candidate.output());
        let feedback = match crate::json::parse(json_text(&text).as_bytes()) {
            Err(e) => Some(format!(
                "Your final answer is not JSON ({e}). Answer with one JSON value that matches the schema given in the instructions, and nothing else."
            )),
            Ok(value) => schema.validate(&value).err().map(|v| {
                format!("Your final answer does not match the required JSON Schema: {}. Answer again with one JSON value that matches it.", v.diagnostic().trim())
            }),
        };
        match (feedback, &then) {
            (Some(feedback), _) => Ok(CompletionDecision::reject(bounded(feedback))),
            (None, Some(user)) => user(candidate),
            (None, None) => Ok(CompletionDecision::accept()),
        }
    })
}

/// Feedback within the decision's bound, cut on a character boundary.
fn bounded(mut text: String) -> String {
    let limit = crate::limits::MAX_COMPLETION_FEEDBACK_BYTES;
    if text.len() > limit {
        let mut end = limit;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text.trim().to_owned()
}

/// Why a run's answer could not be read as the requested type.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OutputError {
    /// The run has no answer: it did not complete.
    #[error("the run did not complete, so it has no answer to read as `{type_name}`")]
    NotCompleted {
        /// The requested type.
        type_name: &'static str,
    },
    /// The answer is not JSON.
    #[error("the answer is not JSON, so it cannot be read as `{type_name}`: {detail} (declare the type with `Agent::builder(..).output::<T>()` so the answer is checked before the run completes)")]
    NotJson {
        /// The requested type.
        type_name: &'static str,
        /// The parser's message.
        detail: String,
    },
    /// The answer is JSON but does not decode into the type.
    #[error("the answer does not decode into `{type_name}`: {detail} (is `{type_name}` the type given to `Agent::builder(..).output::<T>()`?)")]
    Mismatch {
        /// The requested type.
        type_name: &'static str,
        /// serde's message.
        detail: String,
    },
}

/// Decodes a final answer's text into `T`.
pub(crate) fn decode_output<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, OutputError> {
    let type_name = std::any::type_name::<T>();
    let json = crate::json::parse(json_text(text).as_bytes())
        .map_err(|e| OutputError::NotJson { type_name, detail: e.to_string() })?;
    let value = json.to_serde_value().map_err(|e| OutputError::NotJson { type_name, detail: e.to_string() })?;
    serde_json::from_value(value).map_err(|e| OutputError::Mismatch { type_name, detail: e.to_string() })
}
