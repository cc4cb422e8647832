//! The typed errors of the Interaction boundary.
//!
//! One error type, [`InteractionError`], carries a [`ErrorKind`] (the family: what kind of
//! input or state was refused, the level a caller branches on) and a bounded detail. A single
//! struct instead of one enum per family keeps every constructor uniform and lets a caller
//! re-classify an error at a boundary ([`InteractionError::with_kind`]): the same protocol
//! decode failure is `InvalidExecutionState` inside a Step but `InvalidInput` when it is a
//! child's input.
//!
//! Every kind becomes a kernel [`StepError::Other`] (recorded as `execution.step.failed`, or
//! the stage's code for snapshot/restore). Classified Process failures with an Interaction code
//! are built with [`super::codes::failure`] and returned as a `Fail` transition, or as
//! [`StepError::Classified`] through [`super::codes::classified`].

use super::diagnostic::normalize;
use crate::json::DecodeError;
use crate::kernel::waist::StepError;

/// The error families of the Interaction boundary. Host failures and "tool input required" are
/// absent on purpose: they are variants of [`crate::tool::ToolError`] (control flow and outcome
/// classification), not errors of this boundary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ErrorKind {
    /// Definition construction, or Start/Restore on an invalid Definition.
    InvalidDefinitionConfig,
    /// Model Dispatcher construction, or Dispatch on an unusable Dispatcher.
    InvalidDispatcherConfig,
    /// ToolSet construction.
    InvalidToolSet,
    /// Delegate construction; `delegate_child_key` with sequence 0 or an invalid call.
    InvalidDelegate,
    /// A zero or invalid Artifact; a typed decode mismatch.
    InvalidArtifact,
    /// Start input (or a tool child's input) that does not decode or validate.
    InvalidInput,
    /// Every Restore/Step/Snapshot consistency violation, and every malformed protocol payload.
    InvalidExecutionState,
    /// Invalid input request, checkpoint, wait opening, or input response.
    InvalidToolInputRequest,
    /// Pending tool input discovery over an inconsistent snapshot.
    InvalidPendingToolInput,
    /// A steer that is empty, holds non-user or invalid messages, or is wait-addressed.
    InvalidSteer,
    /// Advertising outside an active tool call.
    ToolAdvertisementUnavailable,
    /// An advertisement with no names, a blank or padded name, or a name that is not a deferred
    /// tool of this ToolSet.
    InvalidToolAdvertisement,
}

impl ErrorKind {
    pub const ALL: [ErrorKind; 12] = [
        ErrorKind::InvalidDefinitionConfig,
        ErrorKind::InvalidDispatcherConfig,
        ErrorKind::InvalidToolSet,
        ErrorKind::InvalidDelegate,
        ErrorKind::InvalidArtifact,
        ErrorKind::InvalidInput,
        ErrorKind::InvalidExecutionState,
        ErrorKind::InvalidToolInputRequest,
        ErrorKind::InvalidPendingToolInput,
        ErrorKind::InvalidSteer,
        ErrorKind::ToolAdvertisementUnavailable,
        ErrorKind::InvalidToolAdvertisement,
    ];

    /// The family text, shown after the `interaction: ` prefix of every message.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::InvalidDefinitionConfig => "invalid definition configuration",
            ErrorKind::InvalidDispatcherConfig => "invalid dispatcher configuration",
            ErrorKind::InvalidToolSet => "invalid tool set",
            ErrorKind::InvalidDelegate => "invalid delegate",
            ErrorKind::InvalidArtifact => "invalid artifact",
            ErrorKind::InvalidInput => "invalid input",
            ErrorKind::InvalidExecutionState => "invalid execution state",
            ErrorKind::InvalidToolInputRequest => "invalid tool input request",
            ErrorKind::InvalidPendingToolInput => "invalid pending tool input",
            ErrorKind::InvalidSteer => "invalid steer",
            ErrorKind::ToolAdvertisementUnavailable => "tool advertisement unavailable",
            ErrorKind::InvalidToolAdvertisement => "invalid tool advertisement",
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An Interaction error: a family plus a bounded, normalized detail ([`super::diagnostic`], so
/// a hostile payload can never make an error message unbounded). Decode failures keep the
/// underlying [`DecodeError`] for callers and tests that need the exact path and reason.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("interaction: {kind}: {detail}")]
pub struct InteractionError {
    kind: ErrorKind,
    detail: String,
    decode: Option<DecodeError>,
}

impl InteractionError {
    /// An error of `kind`; `detail` is normalized (trimmed, ≤ 2048 bytes, never empty).
    pub fn new(kind: ErrorKind, detail: impl AsRef<str>) -> InteractionError {
        InteractionError { kind, detail: normalize(detail.as_ref().as_bytes()), decode: None }
    }

    /// A strict-decoding failure of `what` (for example "model_call effect").
    pub fn decode(kind: ErrorKind, what: &str, error: DecodeError) -> InteractionError {
        InteractionError { kind, detail: normalize(format!("{what}: {error}").as_bytes()), decode: Some(error) }
    }

    /// Shorthand for [`ErrorKind::InvalidExecutionState`].
    pub fn invalid_state(detail: impl AsRef<str>) -> InteractionError {
        InteractionError::new(ErrorKind::InvalidExecutionState, detail)
    }

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }
    pub fn is(&self, kind: ErrorKind) -> bool {
        self.kind == kind
    }
    /// The bounded detail, without the `interaction: <kind>: ` prefix.
    pub fn detail(&self) -> &str {
        &self.detail
    }
    /// The strict-decoding failure underneath, if this error came from decoding.
    pub fn decode_error(&self) -> Option<&DecodeError> {
        self.decode.as_ref()
    }

    /// The same error under another family (a boundary decides what a failure means there).
    pub fn with_kind(mut self, kind: ErrorKind) -> InteractionError {
        self.kind = kind;
        self
    }

    /// Prefixes the detail with where it happened (`"tool_round: <detail>"`).
    pub fn context(mut self, prefix: &str) -> InteractionError {
        self.detail = normalize(format!("{prefix}: {}", self.detail).as_bytes());
        self
    }
}

/// Every Interaction error fails the Step as an unclassified strategy error
/// (`execution.step.failed`, or the snapshot/restore stage's code).
impl From<InteractionError> for StepError {
    fn from(e: InteractionError) -> StepError {
        StepError::Other(e.to_string())
    }
}

/// Used by codecs: a validation failure found while decoding becomes an `Invalid` decode error
/// whose text is the detail (the family is re-applied by whoever decodes).
impl From<InteractionError> for DecodeError {
    fn from(e: InteractionError) -> DecodeError {
        match e.decode {
            Some(d) => d,
            None => DecodeError::invalid(e.detail),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::codec::DecodeErrorKind;
    use crate::limits::MAX_DIAGNOSTIC_BYTES;

    #[test]
    fn display_names_the_family() {
        let e = InteractionError::invalid_state("phase ready_model holds a tool round");
        assert_eq!(e.to_string(), "interaction: invalid execution state: phase ready_model holds a tool round");
        assert!(e.is(ErrorKind::InvalidExecutionState));
        assert_eq!(e.kind(), ErrorKind::InvalidExecutionState);
        assert_eq!(e.detail(), "phase ready_model holds a tool round");
        for kind in ErrorKind::ALL {
            assert!(InteractionError::new(kind, "x").to_string().starts_with("interaction: "));
        }
        let texts: std::collections::BTreeSet<_> = ErrorKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(texts.len(), ErrorKind::ALL.len(), "family texts are distinct");
    }

    #[test]
    fn detail_is_bounded_and_never_empty() {
        assert_eq!(InteractionError::invalid_state("   ").detail(), "Interaction operation failed");
        let long = InteractionError::invalid_state("x".repeat(10_000));
        assert_eq!(long.detail().len(), MAX_DIAGNOSTIC_BYTES);
        let ctx = InteractionError::invalid_state("bad").context("tool_round");
        assert_eq!(ctx.detail(), "tool_round: bad");
    }

    #[test]
    fn reclassification_keeps_detail() {
        let e = InteractionError::invalid_state("d").with_kind(ErrorKind::InvalidInput);
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
        assert_eq!(e.detail(), "d");
    }

    #[test]
    fn converts_to_step_error_other() {
        let e = InteractionError::new(ErrorKind::InvalidSteer, "no messages");
        assert_eq!(StepError::from(e), StepError::Other("interaction: invalid steer: no messages".into()));
    }

    #[test]
    fn decode_errors_keep_their_source() {
        let d = DecodeError::new(DecodeErrorKind::UnknownMember("x".into())).in_member("steer");
        let e = InteractionError::decode(ErrorKind::InvalidSteer, "steer signal", d.clone());
        assert_eq!(e.decode_error(), Some(&d));
        assert!(e.detail().starts_with("steer signal: invalid value at $.steer"));
        assert_eq!(DecodeError::from(e), d);
        let plain = DecodeError::from(InteractionError::invalid_state("r"));
        assert_eq!(plain.kind, DecodeErrorKind::Invalid("r".into()));
    }
}
