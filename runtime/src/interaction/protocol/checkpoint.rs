//! A tool input checkpoint: the paused call's pause counter and request.

use crate::interaction::error::{ErrorKind, InteractionError};
use crate::interaction::wire::Wire;
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ToJson};
use crate::limits::MAX_TOOL_INPUT_PAUSES;
use crate::tool::ToolInputRequest;

/// One input pause of a tool call.
///
/// Wire form: `{"pause_count":u32,"input_request":{"prompt":J,"response_schema":J,
/// "continuation_state":J}}`.
///
/// Valid when `1 ≤ pause_count ≤` [`MAX_TOOL_INPUT_PAUSES`] (`u32::MAX - 1`: a checkpoint at
/// `u32::MAX` is rejected everywhere, so the counter can never wrap and a resume can never be
/// asked to pause past the maximum) and the request is valid (its codec re-validates it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolCheckpoint {
    pub pause_count: u32,
    pub input_request: ToolInputRequest,
}

impl ToolCheckpoint {
    /// The checkpoint of the first pause (`previous = None`) or the one after `previous`;
    /// `None` once the maximum is reached.
    pub fn next(previous: Option<&ToolCheckpoint>, input_request: ToolInputRequest) -> Option<ToolCheckpoint> {
        let pause_count = match previous {
            None => 1,
            Some(p) => p.pause_count.checked_add(1)?,
        };
        (pause_count <= MAX_TOOL_INPUT_PAUSES).then_some(ToolCheckpoint { pause_count, input_request })
    }
}

impl Wire for ToolCheckpoint {
    const INVALID: ErrorKind = ErrorKind::InvalidToolInputRequest;
    const WHAT: &'static str = "tool checkpoint";

    fn validate(&self) -> Result<(), InteractionError> {
        if self.pause_count == 0 || self.pause_count > MAX_TOOL_INPUT_PAUSES {
            return Err(InteractionError::new(
                ErrorKind::InvalidToolInputRequest,
                format!("checkpoint pause_count must be within 1..={MAX_TOOL_INPUT_PAUSES}"),
            ));
        }
        Ok(())
    }
}

impl ToJson for ToolCheckpoint {
    fn to_json(&self) -> Json {
        ObjectBuilder::new().field("pause_count", &self.pause_count).field("input_request", &self.input_request).build()
    }
}

impl FromJson for ToolCheckpoint {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let checkpoint =
            ToolCheckpoint { pause_count: r.required("pause_count")?, input_request: r.required("input_request")? };
        r.finish()?;
        checkpoint.validate()?;
        Ok(checkpoint)
    }
}
