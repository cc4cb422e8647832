//! The completion validator contract: an optional callback that accepts or rejects each
//! completion candidate (a final model response, or a round of direct tool results) before the
//! Interaction completes. A rejection's feedback reaches the model as a user message and the
//! loop calls the model again, still bounded by the model-call limit.
//!
//! ```
//! use std::sync::Arc;
//! use keel::interaction::completion::{CompletionDecision, CompletionValidator};
//!
//! // Accept only answers that mention a source.
//! let validator: CompletionValidator = Arc::new(|candidate| {
//!     let text = candidate.output().response().and_then(|r| r.message.as_ref()).map(|m| m.text());
//!     Ok(match text {
//!         Some(t) if t.contains("source:") => CompletionDecision::accept(),
//!         _ => CompletionDecision::reject("Cite a source as `source: <url>`."),
//!     })
//! });
//! # let _ = validator;
//! ```

use super::artifact::Artifacts;
use super::output::Output;
use crate::chat::Request;
use crate::limits::MAX_COMPLETION_FEEDBACK_BYTES;
use std::sync::Arc;

/// What a validator sees: a copy of the WorkingContext *preceding* the candidate (it does not
/// contain the candidate), the candidate Output, and every Artifact so far. Owned values: the
/// validator cannot reach Execution state through them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompletionCandidate {
    working_context: Request,
    output: Output,
    artifacts: Artifacts,
}

impl CompletionCandidate {
    pub fn new(working_context: Request, output: Output, artifacts: Artifacts) -> CompletionCandidate {
        CompletionCandidate { working_context, output, artifacts }
    }
    /// The model context before the candidate (Interaction state, not host history).
    pub fn working_context(&self) -> &Request {
        &self.working_context
    }
    pub fn output(&self) -> &Output {
        &self.output
    }
    pub fn artifacts(&self) -> &Artifacts {
        &self.artifacts
    }
}

/// A validator's explicit decision. The zero value (`Default`) is a rejection without
/// feedback, which is invalid (`interaction.completion.decision_invalid`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompletionDecision {
    /// Completion with the candidate is permitted.
    pub accepted: bool,
    /// Why the candidate was rejected; appended as a user message before the next model call.
    /// Empty when accepted.
    pub feedback: String,
}

impl CompletionDecision {
    pub fn accept() -> CompletionDecision {
        CompletionDecision { accepted: true, feedback: String::new() }
    }

    /// A rejection; `feedback` is used as given (an invalid one makes the decision invalid).
    pub fn reject(feedback: impl Into<String>) -> CompletionDecision {
        CompletionDecision { accepted: false, feedback: feedback.into() }
    }

    /// Valid when accepted with empty feedback, or rejected with feedback that is non-empty,
    /// trimmed and at most [`MAX_COMPLETION_FEEDBACK_BYTES`] bytes (a `String` is always valid
    /// UTF-8). Returns the broken rule.
    pub fn validate(&self) -> Result<(), &'static str> {
        match (self.accepted, self.feedback.as_str()) {
            (true, "") => Ok(()),
            (true, _) => Err("an accepted decision must not carry feedback"),
            (false, "") => Err("a rejected decision needs feedback"),
            (false, f) if f.trim() != f => Err("feedback must not begin or end with whitespace"),
            (false, f) if f.len() > MAX_COMPLETION_FEEDBACK_BYTES => Err("feedback is longer than 4096 bytes"),
            (false, _) => Ok(()),
        }
    }

    pub fn is_valid(&self) -> bool {
        self.validate().is_ok()
    }
}

/// An optional, pure, deterministic, bounded callback deciding whether a candidate completes
/// the Interaction. It must not do I/O or use clocks, randomness or threads; its identity
/// belongs in the Deployment's configuration digest. `Err(text)` fails the Process with
/// `interaction.completion.validator_failed` (text normalized); a panic fails it with kind
/// `panic`, code `execution.step.failed`.
pub type CompletionValidator = Arc<dyn Fn(&CompletionCandidate) -> Result<CompletionDecision, String> + Send + Sync>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::{FinishReason, Message, Response, Usage};

    #[test]
    fn decision_rules() {
        assert!(CompletionDecision::accept().is_valid());
        assert!(CompletionDecision::reject("Cite a source.").is_valid());
        assert!(CompletionDecision::reject("x".repeat(MAX_COMPLETION_FEEDBACK_BYTES)).is_valid());
        let invalid = [
            CompletionDecision::default(),
            CompletionDecision { accepted: true, feedback: "but".into() },
            CompletionDecision::reject(""),
            CompletionDecision::reject(" padded"),
            CompletionDecision::reject("padded\n"),
            CompletionDecision::reject("x".repeat(MAX_COMPLETION_FEEDBACK_BYTES + 1)),
        ];
        for d in invalid {
            assert!(!d.is_valid(), "{d:?}");
        }
    }

    #[test]
    fn validator_sees_the_candidate() {
        let output =
            Output::model_response(Response::new(Message::assistant("done"), FinishReason::Stop, Usage::default()), 1);
        let context = Request::new(vec![Message::user("q")]);
        let candidate = CompletionCandidate::new(context.clone(), output.clone(), Artifacts::default());
        let validator: CompletionValidator = Arc::new(|c: &CompletionCandidate| {
            if c.working_context().messages.len() == 1 && c.artifacts().is_empty() {
                Ok(CompletionDecision::accept())
            } else {
                Err("unexpected".into())
            }
        });
        assert_eq!(validator(&candidate), Ok(CompletionDecision::accept()));
        assert_eq!(candidate.output(), &output);
        assert_eq!(candidate.working_context(), &context);
    }
}
