//! The streaming delta payload: observational only.

use crate::chat::ResponseDelta;
use crate::interaction::error::{ErrorKind, InteractionError};
use crate::interaction::wire::Wire;
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ToJson};

/// One streamed increment of a model response, emitted by the model Dispatcher as a kernel
/// delta. Never a source of the final Output or of restoration.
///
/// Wire form: `{"response_delta":ResponseDelta}`; decoded strictly at every level (delta,
/// tool call fragments, usage).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelResponseDelta {
    pub response_delta: ResponseDelta,
}

impl Wire for ModelResponseDelta {
    /// Hosts parse deltas; a malformed one is a protocol violation.
    const INVALID: ErrorKind = ErrorKind::InvalidExecutionState;
    const WHAT: &'static str = "model response delta";

    fn validate(&self) -> Result<(), InteractionError> {
        self.response_delta
            .validate()
            .map_err(|e| InteractionError::invalid_state(format!("model response delta: {e}")))
    }
}

impl ToJson for ModelResponseDelta {
    fn to_json(&self) -> Json {
        ObjectBuilder::new().field("response_delta", &self.response_delta).build()
    }
}

impl FromJson for ModelResponseDelta {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let delta = ModelResponseDelta { response_delta: r.required("response_delta")? };
        r.finish()?;
        Ok(delta)
    }
}
