//! Everything a tool call can return instead of a plain output.

use super::{AdvertiseError, InvalidToolInputRequest, ToolInputRequest};
use crate::chat::ToolOutput;

/// A tool call that did not simply produce an output. [`super::classify_outcome`] maps each
/// variant to what the model sees:
///
/// | variant | outcome |
/// |---|---|
/// | `Failed { output: None }` | error result `error: tool "<n>" failed: <message>` |
/// | `Failed { output: Some(o) }` ("complete failure") | error result carrying `o` |
/// | `AuthorizationDenied` | error result `error: tool "<n>" is not authorized` |
/// | `InputRequired` | the call pauses for input |
/// | `InvalidInputRequest`, `HostFailure`, `Canceled`, `DeadlineExceeded` | unknown |
///
/// "Unknown" means no definite result: the call's Effect stays unknown until the host resolves
/// it. It does not prove that the external work failed.
///
/// # One classification per error
/// A host failure, cancellation or deadline must never be mistaken for an input request: the
/// former leave the call unknown, the latter pauses it. A `ToolError` is one enum value with
/// exactly one classification, so that rule holds by construction: an error that is a host
/// failure is not also an input request. A tool that
/// hits a host failure while building an input request returns `HostFailure`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// An ordinary tool error; the model sees `message` (bounded). With `output`, a "complete
    /// failure": the model sees that output as an error result instead of the message.
    #[error("tool failed: {message}")]
    Failed {
        message: String,
        output: Option<ToolOutput>,
    },
    /// A policy refused the call. `reason` is for the host only; the model never sees it.
    #[error("authorization denied: {reason}")]
    AuthorizationDenied { reason: String },
    /// The tool needs external input before it can finish (control flow, not a failure).
    #[error("tool input required")]
    InputRequired(ToolInputRequest),
    /// The tool asked for input with a request that failed validation.
    #[error("{0}")]
    InvalidInputRequest(InvalidToolInputRequest),
    /// Host infrastructure failed; the tool's own outcome is not known.
    #[error("host failure: {message}")]
    HostFailure { message: String },
    /// The call observed its cancellation.
    #[error("tool call canceled")]
    Canceled,
    /// The call ran out of time.
    #[error("tool call deadline exceeded")]
    DeadlineExceeded,
}

impl ToolError {
    /// An ordinary tool error.
    pub fn failed(message: impl Into<String>) -> ToolError {
        ToolError::Failed {
            message: message.into(),
            output: None,
        }
    }

    /// A "complete failure": an error together with the output the tool produced.
    pub fn failed_with_output(message: impl Into<String>, output: ToolOutput) -> ToolError {
        ToolError::Failed {
            message: message.into(),
            output: Some(output),
        }
    }

    /// A host infrastructure failure (leaves the call unknown).
    pub fn host_failure(message: impl Into<String>) -> ToolError {
        ToolError::HostFailure {
            message: message.into(),
        }
    }

    pub fn authorization_denied(reason: impl Into<String>) -> ToolError {
        ToolError::AuthorizationDenied {
            reason: reason.into(),
        }
    }

    /// Whether the outcome stays unknown (no result, no checkpoint).
    pub fn leaves_unknown(&self) -> bool {
        matches!(
            self,
            ToolError::InvalidInputRequest(_)
                | ToolError::HostFailure { .. }
                | ToolError::Canceled
                | ToolError::DeadlineExceeded
        )
    }
}

/// A refused advertisement returned with `?` is the tool's own ordinary error.
impl From<AdvertiseError> for ToolError {
    fn from(e: AdvertiseError) -> ToolError {
        ToolError::failed(e.to_string())
    }
}

impl From<InvalidToolInputRequest> for ToolError {
    fn from(e: InvalidToolInputRequest) -> ToolError {
        ToolError::InvalidInputRequest(e)
    }
}
