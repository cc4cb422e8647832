//! The execution waist: the only two abstractions a strategy implements.
//!
//! * [`Definition`]: immutable behavior (descriptor, static child bindings, start, restore).
//! * [`Execution`]: the strategy-owned state machine inside one Process (step, snapshot).
//!
//! Restore-before-adopt: the kernel never keeps a live Execution across a committed Step.
//! Every Step runs `step → snapshot → restore`, and only the *restored* instance becomes live.

use super::deployment::DeploymentRef;
use super::descriptor::Descriptor;
use super::failure::{codes, Failure, FailureCode};
use super::signal::Signal;
use super::transition::Transition;
use crate::env::CancelToken;
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, Payload, ToJson};
use crate::text::QualifiedName;

/// A strategy-owned state: `kind` names the strategy, `payload` is opaque normalized JSON.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecutionState {
    pub kind: QualifiedName,
    pub payload: Payload,
}

impl ToJson for ExecutionState {
    fn to_json(&self) -> Json {
        ObjectBuilder::new().field("kind", &self.kind).value("payload", self.payload.value().clone()).build()
    }
}

impl ExecutionState {
    /// Appends the canonical encoding, copying the payload's stored canonical text verbatim
    /// (byte-identical to encoding `to_json()`, without cloning the payload's value).
    pub fn write_canonical(&self, out: &mut String) {
        let kind = self.kind.to_json();
        crate::json::write_object(
            out,
            vec![("kind", crate::json::Member::Value(&kind)), ("payload", crate::json::Member::Canonical(self.payload.canonical()))],
        );
    }
}

impl FromJson for ExecutionState {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let s = ExecutionState {
            kind: r.required("kind")?,
            payload: crate::kernel::signal::required_payload(&mut r, "payload")?,
        };
        r.finish()?;
        Ok(s)
    }
}

/// What strategy code may see while it runs: cancellation only. Host values are deliberately
/// absent so they cannot become unrecorded inputs.
#[derive(Clone, Debug, Default)]
pub struct StepContext {
    pub cancel: CancelToken,
}

/// A strategy error. `Classified` carries the exact Failure to record; `Other` becomes
/// `execution.step.failed` (or the stage's code for snapshot/restore).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StepError {
    #[error("{0}")]
    Classified(Failure),
    #[error("{0}")]
    Other(String),
    #[error("step canceled")]
    Canceled,
}

impl StepError {
    pub fn other(message: impl Into<String>) -> StepError {
        StepError::Other(message.into())
    }
    /// The Failure this error records when it comes from stage `stage`.
    pub fn into_failure(self, stage: Stage) -> Failure {
        match (self, stage) {
            (StepError::Classified(f), Stage::Step) => f,
            (StepError::Classified(f), s) => Failure::new(s.code(), f.message.as_str()),
            (StepError::Other(m), s) => Failure::new(s.code(), &m),
            (StepError::Canceled, s) => Failure::new(s.code(), "step canceled"),
        }
    }
}

/// The seam at which strategy code failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    Start,
    Step,
    Snapshot,
    Restore,
}

impl Stage {
    pub fn code(self) -> FailureCode {
        match self {
            Stage::Start | Stage::Step => codes::STEP_FAILED,
            Stage::Snapshot => codes::SNAPSHOT_FAILED,
            Stage::Restore => codes::SNAPSHOT_UNRESTORABLE,
        }
    }
    /// A panic at a seam is kind `panic`.
    pub fn panic_code(self) -> FailureCode {
        // Interaction pins `execution.step.failed` with kind panic for panics in strategy code.
        let _ = self;
        codes::STEP_PANICKED
    }
}

/// Immutable strategy behavior; safe to share between Processes and threads.
pub trait Definition: Send + Sync + 'static {
    /// The immutable, portable contract. Must be equal on every call.
    fn descriptor(&self) -> &Descriptor;

    /// Every DeploymentRef this Definition binds statically as a child (a stable set).
    fn child_deployments(&self) -> Vec<DeploymentRef> {
        Vec::new()
    }

    /// Builds a fresh, isolated Execution from input already validated against the
    /// descriptor's input schema. No I/O; must return promptly.
    fn start(&self, input: &Payload) -> Result<Box<dyn Execution>, StepError>;

    /// Rebuilds an Execution from a state this exact Definition produced. Validates the state;
    /// never replays external work. Runs on every Step (restore-before-adopt).
    fn restore(&self, cx: &StepContext, state: &ExecutionState) -> Result<Box<dyn Execution>, StepError>;
}

/// The strategy-owned state machine inside one Process.
pub trait Execution: Send {
    /// One bounded, deterministic reduction over the current state plus the ordered Signal
    /// window. Pure: no I/O, clock, randomness or threads.
    fn step(&mut self, cx: &StepContext, signals: &[Signal]) -> Result<Transition, StepError>;

    /// A complete, independently owned state from which `restore` reproduces this Execution.
    fn snapshot(&self) -> Result<ExecutionState, StepError>;
}
