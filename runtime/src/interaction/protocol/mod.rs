//! The Effect/Signal protocol: every payload the Interaction exchanges with its
//! Dispatchers, its tool children and its host.
//!
//! Every operation payload is an envelope `{"operation": <op>, <member>: <body>}` with exactly
//! those two members (an extra or a missing member is rejected):
//!
//! | type | direction | operation | member |
//! |---|---|---|---|
//! | [`ModelCallEffect`] | parent → model Dispatcher (Effect) | `model_call` | `model_call` |
//! | [`ModelResult`] | model Dispatcher → parent (settlement) | `model_call` | `model_result` |
//! | [`ToolCallEffect`] | tool child → tool Dispatcher (Effect) | `tool_call` | `tool_call` |
//! | [`ToolCallSettlement`] | tool Dispatcher → tool child (settlement) | `tool_call` | `tool_result` |
//! | [`WaitOpenedPayload`] | tool child → kernel `wait` Effect payload, echoed in the opening | `wait_opened` | `input_request` |
//! | [`InputResponse`] | host → tool child (wait-addressed Signal) | `input_response` | `input_response` |
//! | [`Steer`] | host → parent (unaddressed Signal) | `steer` | `steer` |
//!
//! Not envelopes: [`InteractionInput`] (the Interaction's Start input), [`ToolCallInput`] (a
//! tool child's input, also embedded in the effect), [`SettledToolResult`] (`toolCallResult`:
//! the tool child's Output, also the settlement body), [`ToolCheckpoint`], and
//! [`ModelResponseDelta`] (`{"response_delta": ...}`, observational only).
//!
//! The kernel wraps a `wait` Effect's payload in its own opening Signal
//! (`{"operation":"wait_opened","key":..,"payload":<ours>}`), so a [`WaitOpenedPayload`] never
//! travels as a top-level Signal payload; the kernel's envelope has no `input_request` member,
//! which keeps the two `wait_opened` shapes apart (see [`super::signals::classify_signal`]).
//!
//! Accepted payloads re-encode canonically; decode → encode → decode → encode is idempotent.

mod checkpoint;
mod delta;
mod input;
mod input_response;
mod lineage;
mod model_call;
mod model_result;
mod names;
mod steer;
mod tool_call;
mod tool_result;
mod wait_opened;

#[cfg(test)]
mod tests;

pub use checkpoint::ToolCheckpoint;
pub use delta::ModelResponseDelta;
pub use input::InteractionInput;
pub use input_response::InputResponse;
pub use lineage::{Lineage, MAX_LINEAGE_TEXT_BYTES};
pub use model_call::ModelCallEffect;
pub(crate) use model_result::EncodedResponse;
pub use model_result::ModelResult;
pub use names::{validate_advertised_names, validate_signal_ids};
pub(crate) use steer::check_user_messages;
pub use steer::Steer;
pub use tool_call::{ToolCallEffect, ToolCallInput, ToolResume};
pub use tool_result::{SettledToolResult, ToolCallSettlement};
pub use wait_opened::{OpenedInputWait, WaitOpenedPayload};

use crate::json::{DecodeError, Json, ObjectBuilder, ObjectReader};

/// The operation of an Interaction envelope.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operation {
    ModelCall,
    ToolCall,
    WaitOpened,
    InputResponse,
    Steer,
}

impl Operation {
    pub const ALL: [Operation; 5] =
        [Operation::ModelCall, Operation::ToolCall, Operation::WaitOpened, Operation::InputResponse, Operation::Steer];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::ModelCall => "model_call",
            Operation::ToolCall => "tool_call",
            Operation::WaitOpened => "wait_opened",
            Operation::InputResponse => "input_response",
            Operation::Steer => "steer",
        }
    }

    pub fn from_name(name: &str) -> Option<Operation> {
        Operation::ALL.into_iter().find(|op| op.as_str() == name)
    }
}

impl std::fmt::Display for Operation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Every member name that carries an Interaction envelope body.
pub(crate) const BODY_MEMBERS: [&str; 7] =
    ["model_call", "model_result", "tool_call", "tool_result", "input_request", "input_response", "steer"];

/// `{"operation": op, member: body}`.
pub(crate) fn envelope(op: Operation, member: &str, body: Json) -> Json {
    ObjectBuilder::new().field("operation", op.as_str()).value(member, body).build()
}

/// Opens an envelope that must be exactly `{"operation": op, member: <non-null body>}`.
pub(crate) fn open<'a>(value: &'a Json, op: Operation, member: &'static str) -> Result<&'a Json, DecodeError> {
    let mut r = ObjectReader::new(value)?;
    check_operation(&mut r, op)?;
    let body = r.required_value(member).map_err(|e| e.in_member(member))?;
    r.finish()?;
    Ok(body)
}

/// Like [`open`], but the body may be any JSON value including `null` (input responses).
pub(crate) fn open_any<'a>(value: &'a Json, op: Operation, member: &'static str) -> Result<&'a Json, DecodeError> {
    let mut r = ObjectReader::new(value)?;
    check_operation(&mut r, op)?;
    let body = r.nullable_value(member).map_err(|e| e.in_member(member))?;
    r.finish()?;
    Ok(body)
}

fn check_operation(r: &mut ObjectReader<'_>, op: Operation) -> Result<(), DecodeError> {
    let name: String = r.required("operation")?;
    if name != op.as_str() {
        let shown = crate::interaction::diagnostic::normalize_str(&name);
        return Err(
            DecodeError::invalid(format!("operation `{}`, expected `{op}`", excerpt(&shown))).in_member("operation")
        );
    }
    Ok(())
}

/// A short copy of untrusted text for an error message.
pub(crate) fn excerpt(text: &str) -> String {
    const MAX: usize = 80;
    if text.len() <= MAX {
        return text.to_owned();
    }
    let mut end = MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}
