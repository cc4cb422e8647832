//! The answer to a tool input wait: host → tool child.

use super::{envelope, open_any, Operation};
use crate::interaction::error::{ErrorKind, InteractionError};
use crate::interaction::wire::{payload_of, Wire};
use crate::json::{DecodeError, FromJson, Json, Payload, ToJson};
use crate::kernel::ids::WaitId;
use crate::kernel::signal::Signal;

/// One answer, addressed by its Signal to the exact WaitId that asked for it.
///
/// Wire form: `{"operation":"input_response","input_response":J}`; `J` is any JSON value
/// (`null` included) within the payload limits. It is not schema-checked here: the tool child
/// re-validates it against its checkpoint's response schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputResponse {
    pub response: Payload,
}

impl InputResponse {
    /// Normalizes `response` (size and depth limits).
    pub fn new(response: &Json) -> Result<InputResponse, InteractionError> {
        Ok(InputResponse { response: payload_of(ErrorKind::InvalidToolInputRequest, "input response", response)? })
    }

    /// Parses a wait-addressed host Signal; returns the WaitId it answers.
    pub fn from_signal(signal: &Signal) -> Result<(WaitId, InputResponse), InteractionError> {
        let invalid = |detail: String| InteractionError::new(ErrorKind::InvalidToolInputRequest, detail);
        let Some(wait_id) = signal.wait_id() else {
            return Err(invalid(format!("input_response {} is not wait-addressed", signal.id())));
        };
        if signal.status().is_some() {
            return Err(invalid(format!("input_response {} must not be a settlement", signal.id())));
        }
        Ok((wait_id.clone(), InputResponse::from_payload(signal.payload())?))
    }
}

impl Wire for InputResponse {
    const INVALID: ErrorKind = ErrorKind::InvalidToolInputRequest;
    const WHAT: &'static str = "input_response";

    /// A [`Payload`] is valid JSON within the limits by construction.
    fn validate(&self) -> Result<(), InteractionError> {
        Ok(())
    }
}

impl ToJson for InputResponse {
    fn to_json(&self) -> Json {
        envelope(Operation::InputResponse, "input_response", self.response.value().clone())
    }
}

impl FromJson for InputResponse {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let body = open_any(value, Operation::InputResponse, "input_response")?;
        let response =
            Payload::from_json(body.clone()).map_err(|e| DecodeError::from(e).in_member("input_response"))?;
        Ok(InputResponse { response })
    }
}
