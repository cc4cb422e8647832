//! Typed payloads of Engine-minted Signals and their parsers.
//!
//! Strategies learn Engine facts (child ids, wait ids, child outcomes) only from these
//! Signals. Parsers verify engine ownership and addressing before decoding.

use super::child::{Boundary, ChildWaitSpec};
use super::deployment::DeploymentRef;
use super::failure::Failure;
use super::ids::{ChildKey, EffectId, ProcessId, SignalId, WaitId, WaitKey};
use super::result::ProcessResult;
use super::signal::Signal;
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, Payload, ToJson};

/// Why a Signal is not the expected Engine Signal.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EngineSignalError {
    #[error("signal {0} is not engine-owned")]
    NotEngineOwned(SignalId),
    #[error("signal {0} has the wrong addressing for this kind")]
    Addressing(SignalId),
    #[error("signal {id} payload is not a {kind}: {error}")]
    Payload { id: SignalId, kind: &'static str, error: DecodeError },
}

fn decode<T: FromJson>(s: &Signal, kind: &'static str) -> Result<T, EngineSignalError> {
    if !s.id().is_engine_owned() {
        return Err(EngineSignalError::NotEngineOwned(s.id().clone()));
    }
    T::from_json(s.payload().value()).map_err(|error| EngineSignalError::Payload { id: s.id().clone(), kind, error })
}

fn op_check(r: &mut ObjectReader<'_>, expected: &'static str) -> Result<(), DecodeError> {
    let op: String = r.required("operation")?;
    if op != expected {
        return Err(DecodeError::invalid(format!("operation `{op}`, expected `{expected}`")));
    }
    Ok(())
}

/// Outcome of a `start_child` Effect: exactly one of `process_id` / `failure`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildStartResult {
    pub key: ChildKey,
    pub deployment_ref: DeploymentRef,
    pub outcome: Result<ProcessId, Failure>,
}

impl ChildStartResult {
    /// Parses an unaddressed Engine settlement Signal.
    pub fn parse(s: &Signal) -> Result<ChildStartResult, EngineSignalError> {
        if s.wait_id().is_some() {
            return Err(EngineSignalError::Addressing(s.id().clone()));
        }
        decode(s, "child start result")
    }
}

impl ToJson for ChildStartResult {
    fn to_json(&self) -> Json {
        let b = ObjectBuilder::new()
            .field("operation", "start_child")
            .field("key", &self.key)
            .field("deployment_ref", &self.deployment_ref);
        match &self.outcome {
            Ok(pid) => b.field("process_id", pid),
            Err(f) => b.field("failure", f),
        }
        .build()
    }
}

impl FromJson for ChildStartResult {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        op_check(&mut r, "start_child")?;
        let key = r.required("key")?;
        let deployment_ref = r.required("deployment_ref")?;
        let pid: Option<ProcessId> = r.optional("process_id")?;
        let failure: Option<Failure> = r.optional("failure")?;
        r.finish()?;
        let outcome = match (pid, failure) {
            (Some(p), None) => Ok(p),
            (None, Some(f)) => Err(f),
            _ => return Err(DecodeError::invalid("exactly one of process_id and failure")),
        };
        Ok(ChildStartResult { key, deployment_ref, outcome })
    }
}

/// The opening of an external wait, addressed to its WaitId.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WaitOpened {
    pub wait_id: WaitId,
    pub key: WaitKey,
    /// The strategy payload of the `wait` Effect, echoed back.
    pub payload: Option<Payload>,
}

impl WaitOpened {
    pub fn parse(s: &Signal) -> Result<WaitOpened, EngineSignalError> {
        let wait_id = s.wait_id().cloned().ok_or_else(|| EngineSignalError::Addressing(s.id().clone()))?;
        if *s.id() != SignalId::wait_opening(&wait_id) {
            return Err(EngineSignalError::Addressing(s.id().clone()));
        }
        let (key, payload) = decode::<WaitOpenedBody>(s, "wait opening")?.0;
        Ok(WaitOpened { wait_id, key, payload })
    }
    /// The opening payload the kernel appends.
    pub fn payload_json(key: &WaitKey, payload: Option<&Payload>) -> Json {
        ObjectBuilder::new()
            .field("operation", "wait_opened")
            .field("key", key)
            .opt_field("payload", payload.map(Payload::value))
            .build()
    }
}

struct WaitOpenedBody((WaitKey, Option<Payload>));

impl FromJson for WaitOpenedBody {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        op_check(&mut r, "wait_opened")?;
        let key = r.required("key")?;
        let payload = super::signal::optional_payload(&mut r, "payload")?;
        r.finish()?;
        Ok(WaitOpenedBody((key, payload)))
    }
}

/// The opening of a child wait, addressed to its WaitId.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildWaitOpened {
    pub wait_id: WaitId,
    pub spec: ChildWaitSpec,
}

impl ChildWaitOpened {
    pub fn parse(s: &Signal) -> Result<ChildWaitOpened, EngineSignalError> {
        let wait_id = s.wait_id().cloned().ok_or_else(|| EngineSignalError::Addressing(s.id().clone()))?;
        if *s.id() != SignalId::wait_opening(&wait_id) {
            return Err(EngineSignalError::Addressing(s.id().clone()));
        }
        let spec = decode::<ChildWaitOpenedBody>(s, "child wait opening")?.0;
        Ok(ChildWaitOpened { wait_id, spec })
    }
    pub fn payload_json(spec: &ChildWaitSpec) -> Json {
        ObjectBuilder::new().field("operation", "child_wait_opened").field("spec", spec).build()
    }
}

struct ChildWaitOpenedBody(ChildWaitSpec);

impl FromJson for ChildWaitOpenedBody {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        op_check(&mut r, "child_wait_opened")?;
        let spec = r.required("spec")?;
        r.finish()?;
        Ok(ChildWaitOpenedBody(spec))
    }
}

/// One child at the boundary of a satisfied child wait.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildOutcome {
    pub key: ChildKey,
    pub result: ProcessResult,
    pub boundary: Boundary,
    /// Drained only: unresolved Effects of the whole subtree, sorted by (ProcessId, EffectId).
    pub subtree_unresolved_effects: Vec<(ProcessId, EffectId)>,
}

impl ChildOutcome {
    /// True only for drained outcomes with no unresolved Effects.
    pub fn subtree_resolved(&self) -> bool {
        self.boundary == Boundary::SubtreeDrained && self.subtree_unresolved_effects.is_empty()
    }
}

impl ToJson for ChildOutcome {
    fn to_json(&self) -> Json {
        let unresolved: Vec<Json> = self
            .subtree_unresolved_effects
            .iter()
            .map(|(p, e)| ObjectBuilder::new().field("process_id", p).field("effect_id", e).build())
            .collect();
        ObjectBuilder::new()
            .field("key", &self.key)
            .field("result", &self.result)
            .field("boundary", &self.boundary)
            .value("subtree_unresolved_effects", Json::Array(unresolved))
            .build()
    }
}

impl FromJson for ChildOutcome {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let key = r.required("key")?;
        let result = r.required("result")?;
        let boundary = r.required("boundary")?;
        let unresolved = r.required_with("subtree_unresolved_effects", |v| {
            let items = v.as_array().ok_or_else(|| DecodeError::wrong_type("array", v))?;
            items
                .iter()
                .map(|item| {
                    let mut ir = ObjectReader::new(item)?;
                    let pair = (ir.required("process_id")?, ir.required("effect_id")?);
                    ir.finish()?;
                    Ok(pair)
                })
                .collect::<Result<Vec<(ProcessId, EffectId)>, DecodeError>>()
        })?;
        r.finish()?;
        if unresolved.windows(2).any(|w| w[0] >= w[1]) {
            return Err(DecodeError::invalid("subtree unresolved effects must be sorted and distinct"));
        }
        if boundary != Boundary::SubtreeDrained && !unresolved.is_empty() {
            return Err(DecodeError::invalid("only drained outcomes list unresolved effects"));
        }
        Ok(ChildOutcome { key, result, boundary, subtree_unresolved_effects: unresolved })
    }
}

/// The answer to a child wait, addressed to its WaitId.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildWaitSatisfied {
    pub wait_id: WaitId,
    pub key: WaitKey,
    pub boundary: Boundary,
    /// Every child at the boundary at the atomic check, in request order.
    pub outcomes: Vec<ChildOutcome>,
}

impl ChildWaitSatisfied {
    pub fn parse(s: &Signal) -> Result<ChildWaitSatisfied, EngineSignalError> {
        let wait_id = s.wait_id().cloned().ok_or_else(|| EngineSignalError::Addressing(s.id().clone()))?;
        if *s.id() != SignalId::child_wait_satisfied(&wait_id) {
            return Err(EngineSignalError::Addressing(s.id().clone()));
        }
        let body = decode::<ChildWaitSatisfiedBody>(s, "child wait satisfaction")?;
        Ok(ChildWaitSatisfied { wait_id, key: body.key, boundary: body.boundary, outcomes: body.outcomes })
    }
    pub fn payload_json(&self) -> Json {
        ObjectBuilder::new()
            .field("operation", "child_wait_satisfied")
            .field("key", &self.key)
            .field("boundary", &self.boundary)
            .field("outcomes", &self.outcomes)
            .build()
    }
}

struct ChildWaitSatisfiedBody {
    key: WaitKey,
    boundary: Boundary,
    outcomes: Vec<ChildOutcome>,
}

impl FromJson for ChildWaitSatisfiedBody {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        op_check(&mut r, "child_wait_satisfied")?;
        let b = ChildWaitSatisfiedBody {
            key: r.required("key")?,
            boundary: r.required("boundary")?,
            outcomes: r.required("outcomes")?,
        };
        r.finish()?;
        Ok(b)
    }
}

