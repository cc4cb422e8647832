//! The tool call: a tool child's input and its Effect.

use super::checkpoint::ToolCheckpoint;
use super::{envelope, open, Operation};
use crate::chat::ToolCall;
use crate::interaction::error::{ErrorKind, InteractionError};
use crate::interaction::wire::{read_any_payload, Wire};
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, Payload, ToJson};

/// One model tool call as a tool child's input document (`toolCall`), also the call stored in
/// the tool child's state. It never carries a continuation.
///
/// Wire form: `{"model_call_sequence":u32,"tool_call_index":u32,"call":ToolCall}`.
///
/// Valid when the sequence is ≥ 1 and the call is valid (id and name syntax; the arguments are
/// the model's raw text and are checked by the tool child).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolCallInput {
    /// The model call whose response requested this call.
    pub model_call_sequence: u32,
    /// Absolute zero-based position of the call in that response.
    pub tool_call_index: u32,
    pub call: ToolCall,
}

impl ToolCallInput {
    fn write_members(&self, b: ObjectBuilder) -> ObjectBuilder {
        b.field("model_call_sequence", &self.model_call_sequence)
            .field("tool_call_index", &self.tool_call_index)
            .field("call", &self.call)
    }

    fn read_members(r: &mut ObjectReader<'_>) -> Result<ToolCallInput, DecodeError> {
        Ok(ToolCallInput {
            model_call_sequence: r.required("model_call_sequence")?,
            tool_call_index: r.required("tool_call_index")?,
            call: r.required("call")?,
        })
    }

    fn check(&self) -> Result<(), String> {
        if self.model_call_sequence == 0 {
            return Err("model_call_sequence must be ≥ 1".into());
        }
        self.call.validate().map_err(|e| format!("call: {e}"))
    }
}

impl Wire for ToolCallInput {
    const INVALID: ErrorKind = ErrorKind::InvalidInput;
    const WHAT: &'static str = "tool call input";

    fn validate(&self) -> Result<(), InteractionError> {
        self.check().map_err(|d| InteractionError::new(ErrorKind::InvalidInput, format!("tool call input: {d}")))
    }
}

impl ToJson for ToolCallInput {
    fn to_json(&self) -> Json {
        self.write_members(ObjectBuilder::new()).build()
    }
}

impl FromJson for ToolCallInput {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let input = ToolCallInput::read_members(&mut r)?;
        r.finish()?;
        input.validate()?;
        Ok(input)
    }
}

/// The continuation of a resumed call: the checkpoint it paused at and the answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolResume {
    pub checkpoint: ToolCheckpoint,
    /// The normalized answer; it satisfies the checkpoint's response schema.
    pub response: Payload,
}

/// One tool call attempt, declared by the tool child as a dispatcher Effect.
///
/// Wire form: `{"operation":"tool_call","tool_call":{"model_call_sequence":u32,
/// "tool_call_index":u32,"call":ToolCall,"checkpoint"?:ToolCheckpoint,"input_response"?:J}}`.
/// `input_response` may be any JSON value, `null` included (the schema decides).
///
/// Valid when the input is valid and, on resume, the checkpoint is valid and the response
/// satisfies its response schema. The wire form makes the pairing explicit on decode: a
/// checkpoint requires `input_response`, and `input_response` without a checkpoint is rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolCallEffect {
    pub input: ToolCallInput,
    /// `None` on a first attempt.
    pub resume: Option<ToolResume>,
}

impl Wire for ToolCallEffect {
    const INVALID: ErrorKind = ErrorKind::InvalidExecutionState;
    const WHAT: &'static str = "tool_call effect";

    fn validate(&self) -> Result<(), InteractionError> {
        let invalid = |detail: String| InteractionError::invalid_state(format!("tool_call effect: {detail}"));
        self.input.check().map_err(invalid)?;
        if let Some(resume) = &self.resume {
            resume.checkpoint.validate().map_err(|e| invalid(e.detail().to_owned()))?;
            resume
                .checkpoint
                .input_request
                .validate_response(resume.response.value())
                .map_err(|e| invalid(e.to_string()))?;
        }
        Ok(())
    }
}

impl ToJson for ToolCallEffect {
    fn to_json(&self) -> Json {
        let mut b = self.input.write_members(ObjectBuilder::new());
        if let Some(resume) = &self.resume {
            b = b.field("checkpoint", &resume.checkpoint).value("input_response", resume.response.value().clone());
        }
        envelope(Operation::ToolCall, "tool_call", b.build())
    }
}

impl FromJson for ToolCallEffect {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let body = open(value, Operation::ToolCall, "tool_call")?;
        decode_body(body).map_err(|e| e.in_member("tool_call"))
    }
}

fn decode_body(body: &Json) -> Result<ToolCallEffect, DecodeError> {
    let mut r = ObjectReader::new(body)?;
    let input = ToolCallInput::read_members(&mut r)?;
    let checkpoint: Option<ToolCheckpoint> = r.optional("checkpoint")?;
    let response = if r.has("input_response") { Some(read_any_payload(&mut r, "input_response")?) } else { None };
    r.finish()?;
    let resume = match (checkpoint, response) {
        (None, None) => None,
        (Some(checkpoint), Some(response)) => Some(ToolResume { checkpoint, response }),
        (Some(_), None) => return Err(DecodeError::invalid("a checkpoint requires an input_response")),
        (None, Some(_)) => return Err(DecodeError::invalid("an input_response requires a checkpoint")),
    };
    let effect = ToolCallEffect { input, resume };
    effect.validate()?;
    Ok(effect)
}
