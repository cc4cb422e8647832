//! Failure: the classified, bounded reason a Process or an Effect failed.
//!
//! * `Failure {kind, code, message}`; wire `{"kind", "code", "message"}`, all required.
//! * `kind` is `execution | contract | external | panic`; it decides the termination cause.
//! * `code` is a qualified name; `message` is non-empty trimmed UTF-8 ≤ 4096 bytes.
//! * Kernel codes are [`FailureCode`] constants in [`codes`]: a code and its kind travel together
//!   so a caller cannot pair a code with the wrong kind. Strategies define their own constants
//!   the same way.

use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ToJson};
use crate::limits::MAX_QUALIFIED_NAME_BYTES;
use crate::text::{BoundedText, QualifiedName, TextError};

/// The message used when a failure is built from empty text.
pub const DEFAULT_FAILURE_MESSAGE: &str = "operation failed";

/// Who is to blame for a failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FailureKind {
    /// The Execution (strategy logic) failed or ran out of a limit.
    Execution,
    /// A contract between the kernel and a strategy, Dispatcher or Host was broken.
    Contract,
    /// The outside world (a Dispatcher's work, a Host decision) failed.
    External,
    /// Strategy or Dispatcher code panicked.
    Panic,
}

impl FailureKind {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Execution => "execution",
            FailureKind::Contract => "contract",
            FailureKind::External => "external",
            FailureKind::Panic => "panic",
        }
    }
    /// Parses the wire name.
    pub fn parse(text: &str) -> Option<FailureKind> {
        match text {
            "execution" => Some(FailureKind::Execution),
            "contract" => Some(FailureKind::Contract),
            "external" => Some(FailureKind::External),
            "panic" => Some(FailureKind::Panic),
            _ => None,
        }
    }
}

impl std::fmt::Display for FailureKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
impl ToJson for FailureKind {
    fn to_json(&self) -> Json {
        Json::str(self.as_str())
    }
}
impl FromJson for FailureKind {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let text = value.as_str().ok_or_else(|| DecodeError::wrong_type("string", value))?;
        FailureKind::parse(text).ok_or_else(|| {
            DecodeError::invalid("failure kind must be execution, contract, external or panic")
        })
    }
}

/// The qualified-name grammar, usable in `const` context so code constants are checked at
/// compile time. Must agree with [`QualifiedName::parse`] (a test checks every kernel code).
const fn is_qualified_name(text: &str) -> bool {
    let bytes = text.as_bytes();
    if bytes.is_empty() || bytes.len() > MAX_QUALIFIED_NAME_BYTES || !bytes[0].is_ascii_lowercase() {
        return false;
    }
    let mut i = 1;
    while i < bytes.len() {
        let b = bytes[i];
        if !(b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'_' || b == b'-') {
            return false;
        }
        i += 1;
    }
    true
}

/// A failure code with its kind, fixed at compile time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FailureCode {
    name: &'static str,
    kind: FailureKind,
}

impl FailureCode {
    /// Declares a code. Meant for `const` items, where an invalid name is a compile error.
    ///
    /// # Panics
    /// When evaluated at run time with a name that is not a qualified name (a programming
    /// error: codes are compile-time constants, never input).
    pub const fn new(name: &'static str, kind: FailureKind) -> FailureCode {
        assert!(is_qualified_name(name), "failure code must be a qualified name");
        FailureCode { name, kind }
    }
    pub fn name(self) -> &'static str {
        self.name
    }
    pub fn kind(self) -> FailureKind {
        self.kind
    }
}

impl std::fmt::Display for FailureCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// Why [`Failure::try_new`] rejected its parts.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FailureError {
    #[error("failure code: {0}")]
    Code(TextError),
    #[error("failure message: {0}")]
    Message(TextError),
}

/// A classified failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub kind: FailureKind,
    pub code: QualifiedName,
    pub message: BoundedText,
}

impl Failure {
    /// A failure for a known code. The message is normalized (trimmed, cut to 4096 bytes on a
    /// char boundary, [`DEFAULT_FAILURE_MESSAGE`] when empty), so this never fails.
    pub fn new(code: FailureCode, message: &str) -> Failure {
        Failure {
            kind: code.kind,
            code: code_name(code),
            message: BoundedText::normalize(message, DEFAULT_FAILURE_MESSAGE),
        }
    }
    /// A failure from untrusted parts; both code and message must already be valid.
    pub fn try_new(kind: FailureKind, code: &str, message: &str) -> Result<Failure, FailureError> {
        Ok(Failure {
            kind,
            code: QualifiedName::parse(code).map_err(FailureError::Code)?,
            message: BoundedText::parse(message).map_err(FailureError::Message)?,
        })
    }
    /// Whether this failure carries `code` (name and kind).
    pub fn is(&self, code: FailureCode) -> bool {
        self.kind == code.kind && self.code.as_str() == code.name
    }
}

/// `FailureCode::new` enforces the grammar `QualifiedName::parse` checks (a test proves they
/// agree and parses every kernel code), so this cannot fail for any `FailureCode` value.
fn code_name(code: FailureCode) -> QualifiedName {
    QualifiedName::parse(code.name).expect("FailureCode names are validated qualified names")
}

impl ToJson for Failure {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .field("kind", &self.kind)
            .field("code", &self.code)
            .field("message", &self.message)
            .build()
    }
}
impl FromJson for Failure {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let failure =
            Failure { kind: r.required("kind")?, code: r.required("code")?, message: r.required("message")? };
        r.finish()?;
        Ok(failure)
    }
}

/// Every failure code the kernel itself produces, with its kind.
///
/// Kinds hosts and strategies may rely on: `execution.step.failed` (execution),
/// `execution.transition.invalid`, `engine.capability.denied`, `engine.dispatch.settlement.invalid`
/// (contract), `engine.limit.effects` (execution), `engine.dispatch.panicked` (panic),
/// `engine.dispatch.failed` (external). The rest are our classification: limits are
/// `execution` (the work outgrew its grant), broken strategy/Dispatcher/Host obligations are
/// `contract`, and outcomes decided outside the kernel (resolver, Host admission, interrupted
/// or cancelled work) are `external`.
pub mod codes {
    use super::{FailureCode, FailureKind::*};

    // Step stages: step, snapshot, restore.
    pub const STEP_FAILED: FailureCode = FailureCode::new("execution.step.failed", Execution);
    /// A panic inside `step`: kind `panic`, with the code of an ordinary step failure.
    pub const STEP_PANICKED: FailureCode = FailureCode::new("execution.step.failed", Panic);
    pub const SNAPSHOT_FAILED: FailureCode = FailureCode::new("execution.snapshot.failed", Execution);
    pub const SNAPSHOT_UNRESTORABLE: FailureCode =
        FailureCode::new("execution.snapshot.unrestorable", Execution);

    // Preparation (checks before a Step's candidate is adopted) and finalization.
    pub const TRANSITION_INVALID: FailureCode = FailureCode::new("execution.transition.invalid", Contract);
    pub const EFFECT_INVALID: FailureCode = FailureCode::new("execution.effect.invalid", Contract);
    pub const OUTPUT_INVALID: FailureCode = FailureCode::new("execution.output.invalid", Contract);
    pub const FINALIZE_INVALID: FailureCode = FailureCode::new("engine.finalize.invalid", Contract);
    pub const CAPABILITY_DENIED: FailureCode = FailureCode::new("engine.capability.denied", Contract);

    // Limits: budgets, pending capacity, snapshot size and counters.
    pub const LIMIT_EFFECTS: FailureCode = FailureCode::new("engine.limit.effects", Execution);
    pub const LIMIT_SIGNALS: FailureCode = FailureCode::new("engine.limit.signals", Execution);
    pub const LIMIT_STEPS: FailureCode = FailureCode::new("engine.limit.steps", Execution);
    pub const LIMIT_SNAPSHOT: FailureCode = FailureCode::new("engine.limit.snapshot", Execution);
    pub const LIMIT_CHILD_WAIT_SIGNAL: FailureCode =
        FailureCode::new("engine.limit.child_wait_signal", Execution);
    pub const COUNTER_EXHAUSTED: FailureCode = FailureCode::new("engine.counter.exhausted", Execution);

    // Diagnostics of Unknown dispatch settlements, and recovery of pending Effects.
    pub const DISPATCH_PANICKED: FailureCode = FailureCode::new("engine.dispatch.panicked", Panic);
    pub const DISPATCH_SETTLEMENT_INVALID: FailureCode =
        FailureCode::new("engine.dispatch.settlement.invalid", Contract);
    pub const DISPATCH_DEADLINE: FailureCode = FailureCode::new("engine.dispatch.deadline", External);
    pub const DISPATCH_CANCELED: FailureCode = FailureCode::new("engine.dispatch.canceled", External);
    pub const DISPATCH_FAILED: FailureCode = FailureCode::new("engine.dispatch.failed", External);
    pub const EFFECT_RECOVERY_INVALID: FailureCode =
        FailureCode::new("engine.effect.recovery.invalid", Contract);

    // Child start: definite failed settlements of `start_child` (a start never ends Unknown).
    pub const CHILD_START_INTERRUPTED: FailureCode =
        FailureCode::new("engine.child.start.interrupted", External);
    pub const CHILD_IDENTITY_CONFLICT: FailureCode =
        FailureCode::new("engine.child.identity_conflict", Contract);
    pub const CHILD_CAPABILITY_ESCALATION: FailureCode =
        FailureCode::new("engine.child.capability_escalation", Contract);
    pub const CHILD_TREE_LIMIT: FailureCode = FailureCode::new("engine.child.tree_limit", Execution);
    pub const CHILD_BUDGET_EXHAUSTED: FailureCode =
        FailureCode::new("engine.child.budget_exhausted", Execution);
    pub const CHILD_DEPLOYMENT_UNAVAILABLE: FailureCode =
        FailureCode::new("engine.child.deployment_unavailable", External);
    pub const CHILD_INITIALIZATION_FAILED: FailureCode =
        FailureCode::new("engine.child.initialization_failed", Execution);
    pub const CHILD_INPUT_INVALID: FailureCode = FailureCode::new("engine.child.input.invalid", Contract);
    pub const CHILD_ADMISSION_REJECTED: FailureCode =
        FailureCode::new("engine.child.admission.rejected", External);
    pub const CHILD_INITIALIZATION_OUTCOME_UNACKNOWLEDGED: FailureCode =
        FailureCode::new("engine.child.initialization_outcome.unacknowledged", External);

    // Child waits and controls.
    pub const CHILD_WAIT_SATISFACTION_ENCODING_FAILED: FailureCode =
        FailureCode::new("engine.child.wait.satisfaction.encoding_failed", Contract);
    pub const CHILD_CONTROL_NOT_OWNED: FailureCode =
        FailureCode::new("engine.child.control.not_owned", Contract);
    pub const CHILD_SIGNAL_REJECTED: FailureCode = FailureCode::new("engine.child.signal.rejected", Contract);

    /// Every constant above, for exhaustive tests and documentation.
    pub const ALL: &[FailureCode] = &[
        CHILD_INITIALIZATION_FAILED,
        STEP_FAILED,
        STEP_PANICKED,
        SNAPSHOT_FAILED,
        SNAPSHOT_UNRESTORABLE,
        TRANSITION_INVALID,
        EFFECT_INVALID,
        OUTPUT_INVALID,
        FINALIZE_INVALID,
        CAPABILITY_DENIED,
        LIMIT_EFFECTS,
        LIMIT_SIGNALS,
        LIMIT_STEPS,
        LIMIT_SNAPSHOT,
        LIMIT_CHILD_WAIT_SIGNAL,
        COUNTER_EXHAUSTED,
        DISPATCH_PANICKED,
        DISPATCH_SETTLEMENT_INVALID,
        DISPATCH_DEADLINE,
        DISPATCH_CANCELED,
        DISPATCH_FAILED,
        EFFECT_RECOVERY_INVALID,
        CHILD_START_INTERRUPTED,
        CHILD_IDENTITY_CONFLICT,
        CHILD_CAPABILITY_ESCALATION,
        CHILD_TREE_LIMIT,
        CHILD_BUDGET_EXHAUSTED,
        CHILD_DEPLOYMENT_UNAVAILABLE,
        CHILD_INPUT_INVALID,
        CHILD_ADMISSION_REJECTED,
        CHILD_INITIALIZATION_OUTCOME_UNACKNOWLEDGED,
        CHILD_WAIT_SATISFACTION_ENCODING_FAILED,
        CHILD_CONTROL_NOT_OWNED,
        CHILD_SIGNAL_REJECTED,
    ];
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.code.as_str(), self.kind.as_str(), self.message.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::{Json, Object};
    use crate::limits::MAX_TEXT_BYTES;

    fn obj(members: &[(&str, Json)]) -> Json {
        Json::Object(members.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect::<Object>())
    }

    #[test]
    fn every_kernel_code_is_a_valid_unique_qualified_name() {
        let mut seen = std::collections::BTreeSet::new();
        for code in codes::ALL {
            let parsed = QualifiedName::parse(code.name()).unwrap();
            assert_eq!(parsed.as_str(), code.name());
            // (name, kind) pairs are unique; `execution.step.failed` exists with kind execution
            // and with kind panic (Interaction pins the panic pairing).
            assert!(seen.insert((code.name(), code.kind().as_str())), "duplicate code {code}");
            let f = Failure::new(*code, "x");
            assert_eq!(f.code.as_str(), code.name());
            assert_eq!(f.kind, code.kind());
            assert!(f.is(*code));
        }
        assert_eq!(seen.len(), codes::ALL.len());
    }

    #[test]
    fn const_grammar_agrees_with_qualified_name() {
        let long_ok = format!("a{}", "b".repeat(MAX_QUALIFIED_NAME_BYTES - 1));
        let long_bad = format!("a{}", "b".repeat(MAX_QUALIFIED_NAME_BYTES));
        for text in
            ["a", "a.b_c-9", "", "A", "9a", ".a", "a b", "a/b", "aé", long_ok.as_str(), long_bad.as_str()]
        {
            assert_eq!(is_qualified_name(text), QualifiedName::parse(text).is_ok(), "{text:?}");
        }
    }

    #[test]
    fn spec_stated_kinds() {
        assert_eq!(codes::STEP_FAILED.kind(), FailureKind::Execution);
        assert_eq!(codes::TRANSITION_INVALID.kind(), FailureKind::Contract);
        assert_eq!(codes::CAPABILITY_DENIED.kind(), FailureKind::Contract);
        assert_eq!(codes::LIMIT_EFFECTS.kind(), FailureKind::Execution);
        assert_eq!(codes::DISPATCH_PANICKED.kind(), FailureKind::Panic);
        assert_eq!(codes::DISPATCH_SETTLEMENT_INVALID.kind(), FailureKind::Contract);
        assert_eq!(codes::DISPATCH_FAILED.kind(), FailureKind::External);
    }

    #[test]
    fn new_normalizes_the_message() {
        assert_eq!(Failure::new(codes::STEP_FAILED, "  boom \n").message.as_str(), "boom");
        assert_eq!(Failure::new(codes::STEP_FAILED, "   ").message.as_str(), DEFAULT_FAILURE_MESSAGE);
        let long = "é".repeat(MAX_TEXT_BYTES); // 2 bytes each
        let m = Failure::new(codes::STEP_FAILED, &long).message;
        assert!(m.as_str().len() <= MAX_TEXT_BYTES && !m.as_str().is_empty());
    }

    #[test]
    fn try_new_validates_both_parts() {
        assert!(Failure::try_new(FailureKind::External, "tool.http.failed", "503").is_ok());
        assert!(matches!(
            Failure::try_new(FailureKind::External, "Tool.Failed", "x"),
            Err(FailureError::Code(_))
        ));
        assert!(matches!(Failure::try_new(FailureKind::External, "", "x"), Err(FailureError::Code(_))));
        assert!(matches!(Failure::try_new(FailureKind::External, "a", ""), Err(FailureError::Message(_))));
        assert!(matches!(Failure::try_new(FailureKind::External, "a", " x"), Err(FailureError::Message(_))));
        let long = "a".repeat(MAX_TEXT_BYTES + 1);
        assert!(matches!(Failure::try_new(FailureKind::External, "a", &long), Err(FailureError::Message(_))));
    }

    #[test]
    fn is_compares_kind_too() {
        let f = Failure::try_new(FailureKind::External, "engine.step.failed", "x").unwrap();
        assert!(!f.is(codes::STEP_FAILED));
    }

    #[test]
    fn kind_wire_names() {
        for kind in [FailureKind::Execution, FailureKind::Contract, FailureKind::External, FailureKind::Panic]
        {
            assert_eq!(FailureKind::from_json(&kind.to_json()).unwrap(), kind);
        }
        assert_eq!(FailureKind::Panic.to_json(), Json::str("panic"));
        assert!(FailureKind::from_json(&Json::str("Panic")).is_err());
        assert!(FailureKind::from_json(&Json::str("other")).is_err());
        assert!(FailureKind::from_json(&Json::u64(1)).is_err());
    }

    #[test]
    fn codec_round_trip() {
        let f = Failure::new(codes::DISPATCH_FAILED, "connection reset");
        let json = f.to_json();
        assert_eq!(
            json,
            obj(&[
                ("kind", Json::str("external")),
                ("code", Json::str("engine.dispatch.failed")),
                ("message", Json::str("connection reset")),
            ])
        );
        assert_eq!(Failure::from_json(&json).unwrap(), f);
    }

    #[test]
    fn codec_strict_rejections() {
        let good = [("kind", Json::str("contract")), ("code", Json::str("a.b")), ("message", Json::str("m"))];
        assert!(Failure::from_json(&obj(&good)).is_ok());
        // Missing, null, unknown members.
        for skip in 0..3 {
            let members: Vec<_> =
                good.iter().enumerate().filter(|(i, _)| *i != skip).map(|(_, m)| m.clone()).collect();
            assert!(Failure::from_json(&obj(&members)).is_err());
            let mut nulled = good.to_vec();
            nulled[skip].1 = Json::Null;
            assert!(Failure::from_json(&obj(&nulled)).is_err());
        }
        let mut extra = good.to_vec();
        extra.push(("detail", Json::str("x")));
        assert!(Failure::from_json(&obj(&extra)).is_err());
        // Invalid parts.
        let mut bad_code = good.to_vec();
        bad_code[1].1 = Json::str("A.B");
        assert!(Failure::from_json(&obj(&bad_code)).is_err());
        let mut bad_message = good.to_vec();
        bad_message[2].1 = Json::str(" padded ");
        assert!(Failure::from_json(&obj(&bad_message)).is_err());
        let mut empty_message = good.to_vec();
        empty_message[2].1 = Json::str("");
        assert!(Failure::from_json(&obj(&empty_message)).is_err());
        assert!(Failure::from_json(&Json::Array(vec![])).is_err());
    }
}
