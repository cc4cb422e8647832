//! The tool input wait payload: the request echoed by the wait opening.

use super::{envelope, open, Operation};
use crate::interaction::error::{ErrorKind, InteractionError};
use crate::interaction::wire::Wire;
use crate::json::{DecodeError, FromJson, Json, ToJson};
use crate::kernel::engine_signal::WaitOpened;
use crate::kernel::ids::{WaitId, WaitKey};
use crate::kernel::signal::Signal;
use crate::tool::ToolInputRequest;

/// The payload of a tool child's `wait` Effect; the kernel echoes it inside the wait's opening
/// Signal, and the child checks that it is identical to its checkpoint's request.
///
/// Wire form: `{"operation":"wait_opened","input_request":ToolInputRequest}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WaitOpenedPayload {
    pub input_request: ToolInputRequest,
}

/// A parsed tool input wait opening: the kernel's opening facts plus the echoed request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenedInputWait {
    pub wait_id: WaitId,
    pub key: WaitKey,
    pub payload: WaitOpenedPayload,
}

impl WaitOpenedPayload {
    /// Parses a kernel wait opening Signal (engine-owned, addressed to its own WaitId) whose
    /// echoed payload must be a [`WaitOpenedPayload`].
    pub fn from_signal(signal: &Signal) -> Result<OpenedInputWait, InteractionError> {
        let opened = WaitOpened::parse(signal).map_err(|e| InteractionError::invalid_state(e.to_string()))?;
        let echoed = opened.payload.ok_or_else(|| {
            InteractionError::new(
                ErrorKind::InvalidToolInputRequest,
                format!("wait opening {} carries no input request", signal.id()),
            )
        })?;
        let payload = WaitOpenedPayload::from_payload(&echoed)?;
        Ok(OpenedInputWait { wait_id: opened.wait_id, key: opened.key, payload })
    }
}

impl Wire for WaitOpenedPayload {
    const INVALID: ErrorKind = ErrorKind::InvalidToolInputRequest;
    const WHAT: &'static str = "wait_opened payload";

    /// The request validated itself when it was built or decoded.
    fn validate(&self) -> Result<(), InteractionError> {
        Ok(())
    }
}

impl ToJson for WaitOpenedPayload {
    fn to_json(&self) -> Json {
        envelope(Operation::WaitOpened, "input_request", self.input_request.to_json())
    }
}

impl FromJson for WaitOpenedPayload {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let body = open(value, Operation::WaitOpened, "input_request")?;
        let input_request = ToolInputRequest::from_json(body).map_err(|e| e.in_member("input_request"))?;
        Ok(WaitOpenedPayload { input_request })
    }
}
