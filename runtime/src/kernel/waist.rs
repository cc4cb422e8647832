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
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ObjectWriter, Payload, ToJson};
use crate::text::QualifiedName;
use super::segment::Segment;
use super::segment_record::{self, RecordSink};
use std::sync::Arc;

/// A strategy-owned state: `kind` names the strategy, `payload` is opaque normalized JSON (the
/// small, mutable part), `segments` the append-only part in order (see [`super::segment`]).
///
/// Two wire forms, identical for a state without segments (`segments` is omitted when empty):
/// * **value form** (`ToJson`/`FromJson`, [`ExecutionState::write_canonical`]): the segments
///   inline, `{"kind":K,"payload":P,"segments"?:[[..],..]}`: a state on its own;
/// * **record form** (inside a Process record of a cut, [`ExecutionState::write_record`]):
///   `{"kind":K,"payload":P,"segments"?:{"count":N,"last":D}}`, naming the state's chain of
///   segment records ([`super::segment_record`]) in O(1) bytes; the segments travel as records
///   of their own and decoding resolves them ([`ExecutionState::decode_record`]).
///
/// The kernel never interprets segments; the strategy's payload names them (a chain digest)
/// and its `restore` checks that.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecutionState {
    pub kind: QualifiedName,
    pub payload: Payload,
    pub segments: Vec<Arc<Segment>>,
}

impl ExecutionState {
    /// A state without segments.
    pub fn new(kind: QualifiedName, payload: Payload) -> ExecutionState {
        ExecutionState { kind, payload, segments: Vec::new() }
    }

    /// Canonical bytes of the payload and every segment.
    pub fn byte_len(&self) -> usize {
        self.segments.iter().fold(self.payload.len(), |sum, s| sum.saturating_add(s.len()))
    }
}

impl ToJson for ExecutionState {
    fn to_json(&self) -> Json {
        let b = ObjectBuilder::new().field("kind", &self.kind).value("payload", self.payload.value().clone());
        if self.segments.is_empty() {
            return b.build();
        }
        let segments = self.segments.iter().map(|s| crate::json::parse_with(s.text().as_bytes(), &unbounded()));
        let segments: Vec<Json> = segments.map(|v| v.unwrap_or(Json::Null)).collect();
        b.value("segments", Json::Array(segments)).build()
    }
}

fn unbounded() -> crate::json::ParseLimits {
    crate::json::ParseLimits { max_bytes: usize::MAX, ..Default::default() }
}

impl ExecutionState {
    /// Appends the canonical value form, copying the payload's and the segments' stored
    /// canonical text verbatim (byte-identical to encoding `to_json()`, without cloning or
    /// re-encoding any value).
    pub fn write_canonical(&self, out: &mut String) {
        let mut w = ObjectWriter::new(out);
        w.write("kind", &self.kind).write("payload", &self.payload);
        if !self.segments.is_empty() {
            let items = w.key("segments");
            items.push('[');
            for (i, s) in self.segments.iter().enumerate() {
                if i > 0 {
                    items.push(',');
                }
                items.push_str(s.text());
            }
            items.push(']');
        }
        w.finish();
    }

    /// Appends the record form: the segments as a reference to their chain, whose records
    /// `sink` collects. No segment bytes are copied or hashed (a segment's record is cached).
    pub fn write_record(&self, out: &mut String, sink: &mut RecordSink) {
        let mut w = ObjectWriter::new(out);
        w.write("kind", &self.kind).write("payload", &self.payload);
        if let Some((count, last)) = sink.chain(&self.segments) {
            // `reference_json`'s bytes: {"count":N,"last":D}.
            let mut r = ObjectWriter::new(w.key("segments"));
            r.u64("count", count as u64).write("last", &last);
            r.finish();
        }
        w.finish();
    }

    /// The record form as a JSON value (byte-identical to [`ExecutionState::write_record`]).
    pub fn to_record_json(&self) -> Json {
        let b = ObjectBuilder::new().field("kind", &self.kind).value("payload", self.payload.value().clone());
        match RecordSink::default().chain(&self.segments) {
            None => b.build(),
            Some((count, last)) => b.value("segments", segment_record::reference_json(count, last)).build(),
        }
    }

    /// Decodes the record form, resolving the segment reference through `segments`.
    pub fn decode_record(
        value: &Json,
        segments: &mut dyn FnMut(&Json) -> Result<Vec<Arc<Segment>>, DecodeError>,
    ) -> Result<ExecutionState, DecodeError> {
        ExecutionState::decode_with(value, segments)
    }

    /// [`ExecutionState::decode_record`] of a state whose payload was decoded apart (from its
    /// canonical text, `kernel::record_decoder`): the `payload` member must be present, and
    /// its value in `value` is not read.
    pub(crate) fn decode_record_with_payload(
        value: &Json,
        payload: Payload,
        segments: &mut dyn FnMut(&Json) -> Result<Vec<Arc<Segment>>, DecodeError>,
    ) -> Result<ExecutionState, DecodeError> {
        ExecutionState::decode_parts(value, Some(payload), segments)
    }

    fn decode_with(
        value: &Json,
        segments: &mut dyn FnMut(&Json) -> Result<Vec<Arc<Segment>>, DecodeError>,
    ) -> Result<ExecutionState, DecodeError> {
        ExecutionState::decode_parts(value, None, segments)
    }

    fn decode_parts(
        value: &Json,
        payload: Option<Payload>,
        segments: &mut dyn FnMut(&Json) -> Result<Vec<Arc<Segment>>, DecodeError>,
    ) -> Result<ExecutionState, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let kind = r.required("kind")?;
        let payload = match payload {
            None => crate::kernel::signal::required_payload(&mut r, "payload")?,
            Some(p) => {
                r.nullable_value("payload").map_err(|e| e.in_member("payload"))?;
                p
            }
        };
        let segments = match r.optional_value("segments")? {
            None => Vec::new(),
            Some(v) => segments(v).map_err(|e| e.in_member("segments"))?,
        };
        r.finish()?;
        Ok(ExecutionState { kind, payload, segments })
    }
}

impl FromJson for ExecutionState {
    /// Decodes the value form (segments inline).
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        ExecutionState::decode_with(value, &mut |v| match v {
            Json::Array(items) if !items.is_empty() && items.len() <= crate::limits::MAX_STATE_SEGMENTS => items
                .iter()
                .enumerate()
                .map(|(i, v)| Segment::from_json(v).map_err(|e| e.in_index(i)))
                .collect::<Result<Vec<_>, _>>(),
            _ => Err(DecodeError::invalid("a non-empty list of at most MAX_STATE_SEGMENTS segments")),
        })
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
            (StepError::Classified(f), Stage::Step | Stage::Start) => f,
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
