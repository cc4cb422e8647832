//! A fan-out scripted strategy: the testkit script's round trips plus the two shapes that make
//! completion order matter — a batch of several dispatcher Effects in one Step, and a spawn of
//! several sibling children in one Step (they then run, and dispatch, concurrently).
//!
//! The Execution also checks delivery-order facts the kernel promises: a batch's
//! settlements arrive in declaration order and child-wait outcomes in request order. A broken
//! promise fails the Step with a message starting with [`STRATEGY_INVARIANT`], which the oracle
//! looks for in terminations.

use keel::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, Payload, ToJson};
use keel::kernel::capability::CapabilitySet;
use keel::kernel::child::{Boundary, ChildSpec, ChildWaitSpec, Condition};
use keel::kernel::deployment::DeploymentRef;
use keel::kernel::descriptor::Descriptor;
use keel::kernel::effect::{Effect, FrameworkEffect};
use keel::kernel::engine_signal::{ChildStartResult, ChildWaitOpened, ChildWaitSatisfied, WaitOpened};
use keel::kernel::failure::{codes, Failure};
use keel::kernel::ids::{ChildKey, ProcessId, WaitId, WaitKey};
use keel::kernel::resource::Budget;
use keel::kernel::signal::Signal;
use keel::kernel::transition::Transition;
use keel::kernel::waist::{Definition, Execution, ExecutionState, StepContext, StepError};
use keel::text::QualifiedName;
use std::sync::Arc;

/// Prefix of the Step failure a strategy-level delivery-order check produces.
pub const STRATEGY_INVARIANT: &str = "strategy invariant:";

const KIND: &str = "keel.sim.fanout";

/// One operation of a fan-out script.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FanOp {
    /// One dispatcher Effect.
    Dispatch(Json),
    /// Several dispatcher Effects in one batch (settled one at a time, in order).
    Batch(Vec<Json>),
    /// Open an external wait with this key, park, log the answer.
    Wait(String),
    /// Like `Wait`, but the opening is consumed by a checkpoint Step and the Process parks
    /// one Step later (an answer admitted in between is early: parking then does not block).
    LazyWait(String),
    /// Start these children in one batch, then wait for all of them at `boundary`.
    Spawn { children: Vec<ChildPlan>, boundary: Boundary },
    Checkpoint,
    Fail(String),
}

/// One child of a spawn: its deployment (an index into the Definition's child deployments,
/// which keeps scripts and states small), its input (a script), key and budget grant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildPlan {
    pub deployment: u32,
    pub input: Json,
    pub key: String,
    pub budget: Budget,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Awaiting {
    Nothing,
    /// The settlements of a batch, with the `effect` number each dispatched payload carried.
    Settlements(Vec<Option<u64>>),
    WaitOpening,
    /// Lazy wait: the opening arrives; checkpoint first.
    LazyOpening,
    /// Lazy wait: park on this (already open) wait now.
    Park(WaitId),
    WaitAnswer(WaitId),
    ChildStarts { keys: Vec<String>, boundary: Boundary },
    ChildWaitOpening(Vec<ProcessId>),
    ChildWaitAnswer { wait_id: WaitId, children: Vec<ProcessId> },
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct State {
    script: Vec<FanOp>,
    pc: u32,
    awaiting: Awaiting,
    log: Vec<Json>,
}

impl ToJson for ChildPlan {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .field("deployment", &self.deployment)
            .value("input", self.input.clone())
            .field("key", &self.key)
            .field("budget", &self.budget)
            .build()
    }
}

impl FromJson for ChildPlan {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let c = ChildPlan {
            deployment: r.required("deployment")?,
            input: r.required("input")?,
            key: r.required("key")?,
            budget: r.required("budget")?,
        };
        r.finish()?;
        Ok(c)
    }
}

impl ToJson for FanOp {
    fn to_json(&self) -> Json {
        match self {
            FanOp::Dispatch(p) => ObjectBuilder::new().field("op", "dispatch").value("payload", p.clone()).build(),
            FanOp::Batch(ps) => ObjectBuilder::new().field("op", "batch").value("payloads", Json::Array(ps.clone())).build(),
            FanOp::Wait(k) => ObjectBuilder::new().field("op", "wait").field("key", k).build(),
            FanOp::LazyWait(k) => ObjectBuilder::new().field("op", "lazy_wait").field("key", k).build(),
            FanOp::Spawn { children, boundary } => ObjectBuilder::new()
                .field("op", "spawn")
                .field("children", children)
                .field("boundary", boundary)
                .build(),
            FanOp::Checkpoint => ObjectBuilder::new().field("op", "checkpoint").build(),
            FanOp::Fail(m) => ObjectBuilder::new().field("op", "fail").field("message", m).build(),
        }
    }
}

impl FromJson for FanOp {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let op: String = r.required("op")?;
        let o = match op.as_str() {
            "dispatch" => FanOp::Dispatch(r.required("payload")?),
            "batch" => {
                let payloads: Vec<Json> = r.required("payloads")?;
                if payloads.is_empty() {
                    return Err(DecodeError::invalid("a batch holds at least one payload"));
                }
                FanOp::Batch(payloads)
            }
            "wait" => FanOp::Wait(r.required("key")?),
            "lazy_wait" => FanOp::LazyWait(r.required("key")?),
            "spawn" => {
                let children: Vec<ChildPlan> = r.required("children")?;
                if children.is_empty() {
                    return Err(DecodeError::invalid("a spawn starts at least one child"));
                }
                FanOp::Spawn { children, boundary: r.required("boundary")? }
            }
            "checkpoint" => FanOp::Checkpoint,
            "fail" => FanOp::Fail(r.required("message")?),
            other => return Err(DecodeError::invalid(format!("unknown op `{other}`"))),
        };
        r.finish()?;
        Ok(o)
    }
}

impl ToJson for Awaiting {
    fn to_json(&self) -> Json {
        let b = ObjectBuilder::new();
        match self {
            Awaiting::Nothing => b.field("name", "nothing").build(),
            Awaiting::Settlements(numbers) => {
                let numbers: Vec<Json> = numbers.iter().map(|n| n.map_or(Json::Null, Json::u64)).collect();
                b.field("name", "settlements").value("effects", Json::Array(numbers)).build()
            }
            Awaiting::WaitOpening => b.field("name", "wait_opening").build(),
            Awaiting::LazyOpening => b.field("name", "lazy_opening").build(),
            Awaiting::Park(w) => b.field("name", "park").field("wait_id", w).build(),
            Awaiting::WaitAnswer(w) => b.field("name", "wait_answer").field("wait_id", w).build(),
            Awaiting::ChildStarts { keys, boundary } => {
                b.field("name", "child_starts").field("keys", keys).field("boundary", boundary).build()
            }
            Awaiting::ChildWaitOpening(children) => {
                b.field("name", "child_wait_opening").field("children", children).build()
            }
            Awaiting::ChildWaitAnswer { wait_id, children } => b
                .field("name", "child_wait_answer")
                .field("wait_id", wait_id)
                .field("children", children)
                .build(),
        }
    }
}

impl FromJson for Awaiting {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let name: String = r.required("name")?;
        let a = match name.as_str() {
            "nothing" => Awaiting::Nothing,
            "settlements" => {
                let numbers: Vec<Json> = r.required("effects")?;
                let numbers = numbers
                    .iter()
                    .map(|n| if n.is_null() { Ok(None) } else { u64::from_json(n).map(Some) })
                    .collect::<Result<_, _>>()?;
                Awaiting::Settlements(numbers)
            }
            "wait_opening" => Awaiting::WaitOpening,
            "lazy_opening" => Awaiting::LazyOpening,
            "park" => Awaiting::Park(r.required("wait_id")?),
            "wait_answer" => Awaiting::WaitAnswer(r.required("wait_id")?),
            "child_starts" => Awaiting::ChildStarts { keys: r.required("keys")?, boundary: r.required("boundary")? },
            "child_wait_opening" => Awaiting::ChildWaitOpening(r.required("children")?),
            "child_wait_answer" => {
                Awaiting::ChildWaitAnswer { wait_id: r.required("wait_id")?, children: r.required("children")? }
            }
            other => return Err(DecodeError::invalid(format!("unknown awaiting `{other}`"))),
        };
        r.finish()?;
        Ok(a)
    }
}

impl ToJson for State {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .field("script", &self.script)
            .field("pc", &self.pc)
            .field("awaiting", &self.awaiting)
            .field("log", &self.log)
            .build()
    }
}

impl FromJson for State {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let s = State {
            script: r.required("script")?,
            pc: r.required("pc")?,
            awaiting: r.required("awaiting")?,
            log: r.required("log")?,
        };
        r.finish()?;
        if s.pc as usize > s.script.len() {
            return Err(DecodeError::invalid("pc beyond the script"));
        }
        Ok(s)
    }
}

fn bad(message: impl Into<String>) -> StepError {
    StepError::Other(message.into())
}

fn broken(message: &str) -> StepError {
    StepError::Other(format!("{STRATEGY_INVARIANT} {message}"))
}

fn signal_json(s: &Signal) -> Json {
    ObjectBuilder::new()
        .value("payload", s.payload().value().clone())
        .opt_field("status", s.status().map(|st| st.as_str()))
        .build()
}

fn payload(value: Json) -> Result<Payload, StepError> {
    Payload::from_json(value).map_err(|e| bad(e.to_string()))
}

struct FanoutExecution {
    state: State,
    children: Arc<Vec<DeploymentRef>>,
}

impl FanoutExecution {
    /// Consumes what the previous Step asked for. `Ok(Some(t))` ends this Step early (an
    /// intermediate round trip); `Ok(None)` means the script may move to its next op.
    fn receive(&self, s: &mut State, signals: &[Signal], consumed: &mut u32) -> Result<Option<Transition>, StepError> {
        match s.awaiting.clone() {
            Awaiting::Nothing => {}
            Awaiting::Settlements(numbers) => {
                let batch = signals.get(..numbers.len()).ok_or_else(|| bad("expected the batch's settlements"))?;
                for (sig, number) in batch.iter().zip(&numbers) {
                    // Only dispatcher settlements carry a status; anything else here means the
                    // kernel delivered out of declaration order or interleaved other input.
                    if sig.status().is_none() || !sig.engine_owned() {
                        return Err(broken("a batch's settlements are not delivered together in order"));
                    }
                    // The world's answers name the Effect they answer.
                    let answers = sig.payload().value().get("effect").and_then(Json::as_u64);
                    if answers.is_some() && number.is_some() && answers != *number {
                        return Err(broken("a settlement reached the Execution in another Effect's place"));
                    }
                    s.log.push(signal_json(sig));
                }
                *consumed = numbers.len() as u32;
            }
            Awaiting::WaitOpening => {
                let sig = signals.first().ok_or_else(|| bad("expected a wait opening"))?;
                let opened = WaitOpened::parse(sig).map_err(|e| bad(e.to_string()))?;
                s.awaiting = Awaiting::WaitAnswer(opened.wait_id.clone());
                // Consume only the opening: an early answer stays for the next Step.
                return Ok(Some(Transition::Wait { consumed: 1, wait_id: opened.wait_id }));
            }
            Awaiting::LazyOpening => {
                let sig = signals.first().ok_or_else(|| bad("expected a wait opening"))?;
                let opened = WaitOpened::parse(sig).map_err(|e| bad(e.to_string()))?;
                s.awaiting = Awaiting::Park(opened.wait_id);
                return Ok(Some(Transition::Checkpoint { consumed: 1 }));
            }
            Awaiting::Park(w) => {
                // An early answer may already be in the window: it stays for the next Step.
                s.awaiting = Awaiting::WaitAnswer(w.clone());
                return Ok(Some(Transition::Wait { consumed: 0, wait_id: w }));
            }
            Awaiting::WaitAnswer(w) => {
                let sig = signals.first().ok_or_else(|| bad("expected a wait answer"))?;
                if sig.wait_id() != Some(&w) {
                    return Err(bad("answer addresses another wait"));
                }
                s.log.push(signal_json(sig));
                *consumed = 1;
            }
            Awaiting::ChildStarts { keys, boundary } => {
                let batch = signals.get(..keys.len()).ok_or_else(|| bad("expected the child start results"))?;
                let mut started = Vec::new();
                for (sig, key) in batch.iter().zip(&keys) {
                    let res = ChildStartResult::parse(sig).map_err(|e| bad(e.to_string()))?;
                    if res.key.as_str() != key {
                        return Err(broken("child start results are not in declaration order"));
                    }
                    match res.outcome {
                        Ok(pid) => started.push(pid),
                        Err(f) => s.log.push(ObjectBuilder::new().field("child_start_failed", f.code.as_str()).build()),
                    }
                }
                *consumed = keys.len() as u32;
                if !started.is_empty() {
                    let key = WaitKey::parse(&format!("spawn-wait-{}", s.pc)).map_err(|e| bad(e.to_string()))?;
                    let spec = ChildWaitSpec { key, children: started.clone(), boundary, condition: Condition::All };
                    s.awaiting = Awaiting::ChildWaitOpening(started);
                    return Ok(Some(Transition::Continue {
                        consumed: *consumed,
                        effects: vec![Effect::Framework(FrameworkEffect::WaitChildren(spec))],
                    }));
                }
            }
            Awaiting::ChildWaitOpening(children) => {
                let sig = signals.first().ok_or_else(|| bad("expected a child wait opening"))?;
                let opened = ChildWaitOpened::parse(sig).map_err(|e| bad(e.to_string()))?;
                s.awaiting = Awaiting::ChildWaitAnswer { wait_id: opened.wait_id.clone(), children };
                return Ok(Some(Transition::Wait { consumed: 1, wait_id: opened.wait_id }));
            }
            Awaiting::ChildWaitAnswer { wait_id, children } => {
                let sig = signals.first().ok_or_else(|| bad("expected a child wait answer"))?;
                let sat = ChildWaitSatisfied::parse(sig).map_err(|e| bad(e.to_string()))?;
                if sat.wait_id != wait_id {
                    return Err(bad("satisfaction for another wait"));
                }
                let order: Vec<&ProcessId> = sat.outcomes.iter().map(|o| &o.result.process_id).collect();
                if order != children.iter().collect::<Vec<_>>() {
                    return Err(broken("child-wait outcomes are not in request order"));
                }
                for o in &sat.outcomes {
                    s.log.push(ObjectBuilder::new().field("child", o.result.status().as_str()).build());
                }
                *consumed = 1;
            }
        }
        Ok(None)
    }
}

impl Execution for FanoutExecution {
    fn step(&mut self, cx: &StepContext, signals: &[Signal]) -> Result<Transition, StepError> {
        if cx.cancel.is_cancelled() {
            return Err(StepError::Canceled);
        }
        // Work on a copy: a failed Step leaves the state untouched.
        let mut s = self.state.clone();
        let mut consumed = 0u32;
        if let Some(t) = self.receive(&mut s, signals, &mut consumed)? {
            self.state = s;
            return Ok(t);
        }
        s.awaiting = Awaiting::Nothing;
        let Some(op) = s.script.get(s.pc as usize).cloned() else {
            let output = payload(Json::Array(s.log.clone()))?;
            self.state = s;
            return Ok(Transition::Complete { consumed, output });
        };
        s.pc += 1;
        let t = match op {
            FanOp::Dispatch(p) => {
                s.awaiting = Awaiting::Settlements(vec![p.get("effect").and_then(Json::as_u64)]);
                Transition::Continue { consumed, effects: vec![Effect::Dispatcher(payload(p)?)] }
            }
            FanOp::Batch(ps) => {
                s.awaiting = Awaiting::Settlements(ps.iter().map(|p| p.get("effect").and_then(Json::as_u64)).collect());
                let effects = ps.into_iter().map(|p| payload(p).map(Effect::Dispatcher)).collect::<Result<_, _>>()?;
                Transition::Continue { consumed, effects }
            }
            FanOp::Wait(ref key) | FanOp::LazyWait(ref key) => {
                s.awaiting = if matches!(op, FanOp::LazyWait(_)) { Awaiting::LazyOpening } else { Awaiting::WaitOpening };
                let key = WaitKey::parse(key).map_err(|e| bad(e.to_string()))?;
                Transition::Continue { consumed, effects: vec![Effect::Framework(FrameworkEffect::Wait { key, payload: None })] }
            }
            FanOp::Spawn { children, boundary } => {
                let mut effects = Vec::with_capacity(children.len());
                for c in &children {
                    let deployment = self.children.get(c.deployment as usize).ok_or_else(|| bad("no such child deployment"))?;
                    let spec = ChildSpec {
                        key: ChildKey::parse(&c.key).map_err(|e| bad(e.to_string()))?,
                        deployment_ref: deployment.clone(),
                        input: payload(c.input.clone())?,
                        budget: c.budget,
                        capabilities: CapabilitySet::empty(),
                    };
                    effects.push(Effect::Framework(FrameworkEffect::StartChild(spec)));
                }
                s.awaiting = Awaiting::ChildStarts { keys: children.iter().map(|c| c.key.clone()).collect(), boundary };
                Transition::Continue { consumed, effects }
            }
            FanOp::Checkpoint => Transition::Checkpoint { consumed },
            FanOp::Fail(message) => Transition::Fail { consumed, failure: Failure::new(codes::STEP_FAILED, &message) },
        };
        self.state = s;
        Ok(t)
    }

    fn snapshot(&self) -> Result<ExecutionState, StepError> {
        Ok(ExecutionState {
            kind: QualifiedName::parse(KIND).map_err(|e| bad(e.to_string()))?,
            payload: payload(self.state.to_json())?,
            segments: Vec::new(),
        })
    }
}

/// The fan-out Definition. Input: a JSON array of [`FanOp`]s.
pub struct FanoutDefinition {
    descriptor: Descriptor,
    children: Arc<Vec<DeploymentRef>>,
}

impl FanoutDefinition {
    /// `children`: the deployments its spawns may start (part of its binding).
    pub fn new(name: &str, children: Vec<DeploymentRef>) -> Result<FanoutDefinition, keel::kernel::descriptor::DescriptorError> {
        let array = ObjectBuilder::new().field("type", "array").build();
        let descriptor = Descriptor::new(
            name,
            "Runs a scripted sequence of kernel round trips with batches and concurrent children (simulator strategy).",
            array.clone(),
            array,
            None,
        )?;
        Ok(FanoutDefinition { descriptor, children: Arc::new(children) })
    }
}

impl Definition for FanoutDefinition {
    fn descriptor(&self) -> &Descriptor {
        &self.descriptor
    }
    fn child_deployments(&self) -> Vec<DeploymentRef> {
        self.children.as_ref().clone()
    }
    fn start(&self, input: &Payload) -> Result<Box<dyn Execution>, StepError> {
        let script = Vec::<FanOp>::from_json(input.value()).map_err(|e| bad(e.to_string()))?;
        let state = State { script, pc: 0, awaiting: Awaiting::Nothing, log: Vec::new() };
        Ok(Box::new(FanoutExecution { state, children: self.children.clone() }))
    }
    fn restore(&self, _cx: &StepContext, state: &ExecutionState) -> Result<Box<dyn Execution>, StepError> {
        if state.kind.as_str() != KIND {
            return Err(bad(format!("state kind `{}` is not `{KIND}`", state.kind)));
        }
        let state = State::from_json(state.payload.value()).map_err(|e| bad(e.to_string()))?;
        Ok(Box::new(FanoutExecution { state, children: self.children.clone() }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_round_trip_through_json() {
        let ops = vec![
            FanOp::Dispatch(Json::str("a")),
            FanOp::Batch(vec![Json::str("b"), Json::str("c")]),
            FanOp::Wait("w".into()),
            FanOp::Checkpoint,
            FanOp::Fail("no".into()),
        ];
        let json = Json::Array(ops.iter().map(ToJson::to_json).collect());
        assert_eq!(Vec::<FanOp>::from_json(&json).unwrap(), ops);
    }

    #[test]
    fn empty_batches_and_spawns_are_rejected() {
        let batch = ObjectBuilder::new().field("op", "batch").value("payloads", Json::Array(vec![])).build();
        assert!(FanOp::from_json(&batch).is_err());
        let spawn = ObjectBuilder::new()
            .field("op", "spawn")
            .value("children", Json::Array(vec![]))
            .field("boundary", &Boundary::SubtreeDrained)
            .build();
        assert!(FanOp::from_json(&spawn).is_err());
    }
}
