//! A small scripted strategy for exercising the kernel without Interaction: kernel tests, the
//! crash matrix and the simulator's kernel-level scenarios run it.
//!
//! A script is a list of [`Op`]s the Execution performs in order, one kernel round trip
//! each: dispatch an Effect, open an external wait (parking at once, or after a dispatch so
//! its answer can arrive early), start a child (and wait for it to drain), start several
//! children and wait for them under a boundary and condition, checkpoint, then complete with
//! the log of everything it observed (or fail). The Execution
//! is a real, strict strategy: its state round-trips byte-stably and it rejects Signals it
//! does not expect.

use super::binding::Deployment;
use super::capability::CapabilitySet;
use super::child::{Boundary, ChildSpec, ChildWaitSpec, Condition};
use super::deployment::DeploymentRef;
use super::descriptor::Descriptor;
use super::dispatcher::{DispatchContext, DispatchError, DispatchPolicy, Dispatcher, EffectRequest};
use super::effect::{Effect, FrameworkEffect, Settlement};
use super::engine_signal::{ChildStartResult, ChildWaitOpened, ChildWaitSatisfied, WaitOpened};
use super::failure::{codes, Failure};
use super::ids::{ChildKey, WaitId, WaitKey};
use super::resource::Budget;
use super::signal::{SettlementStatus, Signal};
use super::transition::Transition;
use super::waist::{Definition, Execution, ExecutionState, StepContext, StepError};
use crate::env::BoxFuture;
use crate::json::{DecodeError, Digest, FromJson, Json, ObjectBuilder, ObjectReader, Payload, ToJson};
use crate::text::QualifiedName;
use std::sync::Arc;

/// One operation of a script.
// Scripts are tiny test inputs; boxing the large `Child` variant would only add noise.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Dispatch an Effect with this payload and log its settlement.
    Dispatch(Json),
    /// Open an external wait with this key, park, and log the answer.
    Wait(String),
    /// Start a child of this deployment running this script, wait for it to drain, log its
    /// status.
    Child { deployment: DeploymentRef, script: Vec<Op>, key: String, budget: Budget },
    /// Open an external wait with this key, dispatch `then` before parking on it (so the
    /// wait's answer may arrive early), log the settlement, park, and log the answer. An
    /// answer that arrived before the settlement is logged first.
    WaitAfter { key: String, then: Json },
    /// Start every child in one batch, wait for the started ones under `boundary` and
    /// `condition`, and log `{key, child: status}` per outcome (failed starts log
    /// `{key, child_start_failed: code}` and are not waited for).
    Children { children: Vec<ChildPlan>, boundary: Boundary, condition: Condition },
    /// A `checkpoint` Transition.
    Checkpoint,
    /// Fail with this message.
    Fail(String),
}

/// One child of [`Op::Children`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildPlan {
    pub key: String,
    pub deployment: DeploymentRef,
    pub script: Vec<Op>,
    pub budget: Budget,
    pub capabilities: CapabilitySet,
}

impl ChildPlan {
    /// A child with no capabilities.
    pub fn new(key: &str, deployment: &DeploymentRef, script: Vec<Op>, budget: Budget) -> ChildPlan {
        ChildPlan { key: key.to_owned(), deployment: deployment.clone(), script, budget, capabilities: CapabilitySet::empty() }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Awaiting {
    Nothing,
    Settlement,
    WaitOpening,
    WaitAnswer(WaitId),
    ChildStart,
    ChildWaitOpening,
    ChildWaitAnswer(WaitId),
    /// `WaitAfter`: the opening, then dispatch this payload.
    WaitOpeningThenDispatch(Json),
    /// `WaitAfter`: the settlement (or an early answer), then park on this wait.
    SettlementThenWait(WaitId),
    /// `WaitAfter`: parked with the answer already queued before the settlement.
    EarlyAnswer(WaitId),
    /// `Children`: this many start results, then wait under boundary and condition.
    ChildrenStart { count: u32, boundary: Boundary, condition: Condition },
    ChildrenWaitOpening,
    ChildrenAnswer(WaitId),
}

/// The Execution state (also its snapshot).
#[derive(Clone, Debug, PartialEq, Eq)]
struct State {
    script: Vec<Op>,
    pc: u32,
    awaiting: Awaiting,
    child: Option<super::ids::ProcessId>,
    log: Vec<Json>,
}

const KIND: &str = "keel.testkit.script";

impl ToJson for Op {
    fn to_json(&self) -> Json {
        match self {
            Op::Dispatch(p) => ObjectBuilder::new().field("op", "dispatch").value("payload", p.clone()).build(),
            Op::Wait(k) => ObjectBuilder::new().field("op", "wait").field("key", k).build(),
            Op::Child { deployment, script, key, budget } => ObjectBuilder::new()
                .field("op", "child")
                .field("deployment", deployment)
                .field("script", script)
                .field("key", key)
                .field("budget", budget)
                .build(),
            Op::WaitAfter { key, then } => {
                ObjectBuilder::new().field("op", "wait_after").field("key", key).value("then", then.clone()).build()
            }
            Op::Children { children, boundary, condition } => ObjectBuilder::new()
                .field("op", "children")
                .field("children", children)
                .field("boundary", boundary)
                .field("condition", condition)
                .build(),
            Op::Checkpoint => ObjectBuilder::new().field("op", "checkpoint").build(),
            Op::Fail(m) => ObjectBuilder::new().field("op", "fail").field("message", m).build(),
        }
    }
}

impl ToJson for ChildPlan {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .field("key", &self.key)
            .field("deployment", &self.deployment)
            .field("script", &self.script)
            .field("budget", &self.budget)
            .field("capabilities", &self.capabilities)
            .build()
    }
}

impl FromJson for ChildPlan {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let plan = ChildPlan {
            key: r.required("key")?,
            deployment: r.required("deployment")?,
            script: r.required("script")?,
            budget: r.required("budget")?,
            capabilities: r.required("capabilities")?,
        };
        r.finish()?;
        Ok(plan)
    }
}

impl FromJson for Op {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let op: String = r.required("op")?;
        let o = match op.as_str() {
            // Any payload, `null` included: `Op::Dispatch(Json::Null)` must round-trip.
            "dispatch" => Op::Dispatch(r.nullable_value("payload")?.clone()),
            "wait" => Op::Wait(r.required("key")?),
            "child" => Op::Child {
                deployment: r.required("deployment")?,
                script: r.required("script")?,
                key: r.required("key")?,
                budget: r.required("budget")?,
            },
            "wait_after" => Op::WaitAfter { key: r.required("key")?, then: r.required("then")? },
            "children" => {
                let children: Vec<ChildPlan> = r.required("children")?;
                if children.is_empty() || u32::try_from(children.len()).is_err() {
                    return Err(DecodeError::invalid("children needs at least one child"));
                }
                Op::Children { children, boundary: r.required("boundary")?, condition: r.required("condition")? }
            }
            "checkpoint" => Op::Checkpoint,
            "fail" => Op::Fail(r.required("message")?),
            other => return Err(DecodeError::invalid(format!("unknown op `{other}`"))),
        };
        r.finish()?;
        Ok(o)
    }
}

impl ToJson for Awaiting {
    fn to_json(&self) -> Json {
        let (name, wait) = match self {
            Awaiting::Nothing => ("nothing", None),
            Awaiting::Settlement => ("settlement", None),
            Awaiting::WaitOpening => ("wait_opening", None),
            Awaiting::WaitAnswer(w) => ("wait_answer", Some(w)),
            Awaiting::ChildStart => ("child_start", None),
            Awaiting::ChildWaitOpening => ("child_wait_opening", None),
            Awaiting::ChildWaitAnswer(w) => ("child_wait_answer", Some(w)),
            Awaiting::WaitOpeningThenDispatch(then) => {
                return ObjectBuilder::new().field("name", "wait_opening_then_dispatch").value("then", then.clone()).build()
            }
            Awaiting::SettlementThenWait(w) => ("settlement_then_wait", Some(w)),
            Awaiting::EarlyAnswer(w) => ("early_answer", Some(w)),
            Awaiting::ChildrenStart { count, boundary, condition } => {
                return ObjectBuilder::new()
                    .field("name", "children_start")
                    .field("count", count)
                    .field("boundary", boundary)
                    .field("condition", condition)
                    .build()
            }
            Awaiting::ChildrenWaitOpening => ("children_wait_opening", None),
            Awaiting::ChildrenAnswer(w) => ("children_answer", Some(w)),
        };
        ObjectBuilder::new().field("name", name).opt_field("wait_id", wait).build()
    }
}

impl FromJson for Awaiting {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let name: String = r.required("name")?;
        let a = match name.as_str() {
            "nothing" => Awaiting::Nothing,
            "settlement" => Awaiting::Settlement,
            "wait_opening" => Awaiting::WaitOpening,
            "wait_answer" => Awaiting::WaitAnswer(r.required("wait_id")?),
            "child_start" => Awaiting::ChildStart,
            "child_wait_opening" => Awaiting::ChildWaitOpening,
            "child_wait_answer" => Awaiting::ChildWaitAnswer(r.required("wait_id")?),
            "wait_opening_then_dispatch" => Awaiting::WaitOpeningThenDispatch(r.required("then")?),
            "settlement_then_wait" => Awaiting::SettlementThenWait(r.required("wait_id")?),
            "early_answer" => Awaiting::EarlyAnswer(r.required("wait_id")?),
            "children_start" => Awaiting::ChildrenStart {
                count: r.required("count")?,
                boundary: r.required("boundary")?,
                condition: r.required("condition")?,
            },
            "children_wait_opening" => Awaiting::ChildrenWaitOpening,
            "children_answer" => Awaiting::ChildrenAnswer(r.required("wait_id")?),
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
            .opt_field("child", self.child.as_ref())
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
            child: r.optional("child")?,
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

struct ScriptExecution {
    state: State,
}

fn signal_json(s: &Signal) -> Json {
    ObjectBuilder::new()
        .value("payload", s.payload().value().clone())
        .opt_field("status", s.status().map(|st| st.as_str()))
        .build()
}

impl Execution for ScriptExecution {
    fn step(&mut self, cx: &StepContext, signals: &[Signal]) -> Result<Transition, StepError> {
        if cx.cancel.is_cancelled() {
            return Err(StepError::Canceled);
        }
        // Work on a copy: a failed Step leaves the state untouched.
        let mut s = self.state.clone();
        let mut consumed = 0u32;
        match s.awaiting.clone() {
            Awaiting::Nothing => {}
            Awaiting::Settlement => {
                let sig = signals.first().ok_or_else(|| bad("expected a settlement"))?;
                s.log.push(signal_json(sig));
                consumed = 1;
            }
            Awaiting::WaitOpening => {
                let sig = signals.first().ok_or_else(|| bad("expected a wait opening"))?;
                let opened = WaitOpened::parse(sig).map_err(|e| bad(e.to_string()))?;
                s.awaiting = Awaiting::WaitAnswer(opened.wait_id.clone());
                self.state = s;
                // Consume only the opening: an early answer stays for the next Step.
                return Ok(Transition::Wait { consumed: 1, wait_id: opened.wait_id });
            }
            Awaiting::WaitAnswer(w) => {
                let sig = signals.first().ok_or_else(|| bad("expected a wait answer"))?;
                if sig.wait_id() != Some(&w) {
                    return Err(bad("answer addresses another wait"));
                }
                s.log.push(signal_json(sig));
                consumed = 1;
            }
            Awaiting::ChildStart => {
                let sig = signals.first().ok_or_else(|| bad("expected a child start result"))?;
                let res = ChildStartResult::parse(sig).map_err(|e| bad(e.to_string()))?;
                match res.outcome {
                    Ok(pid) => {
                        let key = WaitKey::parse(&format!("child-wait-{}", s.pc)).map_err(|e| bad(e.to_string()))?;
                        let spec = ChildWaitSpec {
                            key,
                            children: vec![pid.clone()],
                            boundary: Boundary::SubtreeDrained,
                            condition: Condition::All,
                        };
                        s.child = Some(pid);
                        s.awaiting = Awaiting::ChildWaitOpening;
                        self.state = s;
                        return Ok(Transition::Continue {
                            consumed: 1,
                            effects: vec![Effect::Framework(FrameworkEffect::WaitChildren(spec))],
                        });
                    }
                    Err(f) => {
                        s.log.push(ObjectBuilder::new().field("child_start_failed", f.code.as_str()).build());
                        consumed = 1;
                    }
                }
            }
            Awaiting::ChildWaitOpening => {
                let sig = signals.first().ok_or_else(|| bad("expected a child wait opening"))?;
                let opened = ChildWaitOpened::parse(sig).map_err(|e| bad(e.to_string()))?;
                s.awaiting = Awaiting::ChildWaitAnswer(opened.wait_id.clone());
                self.state = s;
                return Ok(Transition::Wait { consumed: 1, wait_id: opened.wait_id });
            }
            Awaiting::ChildWaitAnswer(w) => {
                let sig = signals.first().ok_or_else(|| bad("expected a child wait answer"))?;
                let sat = ChildWaitSatisfied::parse(sig).map_err(|e| bad(e.to_string()))?;
                if sat.wait_id != w {
                    return Err(bad("satisfaction for another wait"));
                }
                for o in &sat.outcomes {
                    s.log.push(ObjectBuilder::new().field("child", o.result.status().as_str()).build());
                }
                s.child = None;
                consumed = 1;
            }
            Awaiting::WaitOpeningThenDispatch(then) => {
                let sig = signals.first().ok_or_else(|| bad("expected a wait opening"))?;
                let opened = WaitOpened::parse(sig).map_err(|e| bad(e.to_string()))?;
                let p = Payload::from_json(then).map_err(|e| bad(e.to_string()))?;
                s.awaiting = Awaiting::SettlementThenWait(opened.wait_id);
                self.state = s;
                return Ok(Transition::Continue { consumed: 1, effects: vec![Effect::Dispatcher(p)] });
            }
            Awaiting::SettlementThenWait(w) => {
                let sig = signals.first().ok_or_else(|| bad("expected a settlement"))?;
                if sig.wait_id() == Some(&w) {
                    // The answer arrived during the dispatch, ahead of the settlement: park
                    // anyway, consuming nothing (the kernel keeps an early-answered wait Running).
                    s.awaiting = Awaiting::EarlyAnswer(w.clone());
                    self.state = s;
                    return Ok(Transition::Wait { consumed: 0, wait_id: w });
                }
                if sig.status().is_none() {
                    return Err(bad("expected a dispatcher settlement"));
                }
                s.log.push(signal_json(sig));
                s.awaiting = Awaiting::WaitAnswer(w.clone());
                self.state = s;
                // Only the settlement is consumed: a later answer belongs to the next window.
                return Ok(Transition::Wait { consumed: 1, wait_id: w });
            }
            Awaiting::EarlyAnswer(w) => {
                let (Some(answer), Some(settlement)) = (signals.first(), signals.get(1)) else {
                    return Err(bad("expected the early answer and the settlement"));
                };
                if answer.wait_id() != Some(&w) || settlement.status().is_none() {
                    return Err(bad("expected the early answer, then the settlement"));
                }
                s.log.push(signal_json(answer));
                s.log.push(signal_json(settlement));
                consumed = 2;
            }
            Awaiting::ChildrenStart { count, boundary, condition } => {
                let window = signals.get(..count as usize).ok_or_else(|| bad("expected every child start result"))?;
                let mut started = Vec::new();
                for sig in window {
                    let res = ChildStartResult::parse(sig).map_err(|e| bad(e.to_string()))?;
                    match res.outcome {
                        Ok(pid) => started.push(pid),
                        Err(f) => s.log.push(
                            ObjectBuilder::new().field("key", &res.key).field("child_start_failed", f.code.as_str()).build(),
                        ),
                    }
                }
                consumed = count;
                if !started.is_empty() {
                    let key = WaitKey::parse(&format!("children-wait-{}", s.pc)).map_err(|e| bad(e.to_string()))?;
                    // A quorum larger than the started set cannot be met; wait for all of them.
                    let condition = match condition {
                        Condition::Quorum(n) if n as usize > started.len() => Condition::All,
                        c => c,
                    };
                    let spec = ChildWaitSpec { key, children: started, boundary, condition };
                    s.awaiting = Awaiting::ChildrenWaitOpening;
                    self.state = s;
                    return Ok(Transition::Continue {
                        consumed,
                        effects: vec![Effect::Framework(FrameworkEffect::WaitChildren(spec))],
                    });
                }
            }
            Awaiting::ChildrenWaitOpening => {
                let sig = signals.first().ok_or_else(|| bad("expected a child wait opening"))?;
                let opened = ChildWaitOpened::parse(sig).map_err(|e| bad(e.to_string()))?;
                s.awaiting = Awaiting::ChildrenAnswer(opened.wait_id.clone());
                self.state = s;
                return Ok(Transition::Wait { consumed: 1, wait_id: opened.wait_id });
            }
            Awaiting::ChildrenAnswer(w) => {
                let sig = signals.first().ok_or_else(|| bad("expected a child wait answer"))?;
                let sat = ChildWaitSatisfied::parse(sig).map_err(|e| bad(e.to_string()))?;
                if sat.wait_id != w {
                    return Err(bad("satisfaction for another wait"));
                }
                for o in &sat.outcomes {
                    s.log.push(ObjectBuilder::new().field("key", &o.key).field("child", o.result.status().as_str()).build());
                }
                consumed = 1;
            }
        }
        s.awaiting = Awaiting::Nothing;
        let Some(op) = s.script.get(s.pc as usize).cloned() else {
            let output = Payload::from_json(Json::Array(s.log.clone())).map_err(|e| bad(e.to_string()))?;
            self.state = s;
            return Ok(Transition::Complete { consumed, output });
        };
        s.pc += 1;
        let t = match op {
            Op::Dispatch(payload) => {
                s.awaiting = Awaiting::Settlement;
                let p = Payload::from_json(payload).map_err(|e| bad(e.to_string()))?;
                Transition::Continue { consumed, effects: vec![Effect::Dispatcher(p)] }
            }
            Op::Wait(key) => {
                s.awaiting = Awaiting::WaitOpening;
                let key = WaitKey::parse(&key).map_err(|e| bad(e.to_string()))?;
                Transition::Continue { consumed, effects: vec![Effect::Framework(FrameworkEffect::Wait { key, payload: None })] }
            }
            Op::Child { deployment, script, key, budget } => {
                s.awaiting = Awaiting::ChildStart;
                let input = Payload::from_json(Json::Array(script.iter().map(ToJson::to_json).collect()))
                    .map_err(|e| bad(e.to_string()))?;
                let spec = ChildSpec {
                    key: ChildKey::parse(&key).map_err(|e| bad(e.to_string()))?,
                    deployment_ref: deployment,
                    input,
                    budget,
                    capabilities: CapabilitySet::empty(),
                };
                Transition::Continue { consumed, effects: vec![Effect::Framework(FrameworkEffect::StartChild(spec))] }
            }
            Op::WaitAfter { key, then } => {
                s.awaiting = Awaiting::WaitOpeningThenDispatch(then);
                let key = WaitKey::parse(&key).map_err(|e| bad(e.to_string()))?;
                Transition::Continue { consumed, effects: vec![Effect::Framework(FrameworkEffect::Wait { key, payload: None })] }
            }
            Op::Children { children, boundary, condition } => {
                let mut effects = Vec::with_capacity(children.len());
                for plan in &children {
                    let input = Payload::from_json(Json::Array(plan.script.iter().map(ToJson::to_json).collect()))
                        .map_err(|e| bad(e.to_string()))?;
                    effects.push(Effect::Framework(FrameworkEffect::StartChild(ChildSpec {
                        key: ChildKey::parse(&plan.key).map_err(|e| bad(e.to_string()))?,
                        deployment_ref: plan.deployment.clone(),
                        input,
                        budget: plan.budget,
                        capabilities: plan.capabilities.clone(),
                    })));
                }
                let count = u32::try_from(effects.len()).map_err(|_| bad("too many children"))?;
                s.awaiting = Awaiting::ChildrenStart { count, boundary, condition };
                Transition::Continue { consumed, effects }
            }
            Op::Checkpoint => Transition::Checkpoint { consumed },
            Op::Fail(message) => Transition::Fail {
                consumed,
                failure: Failure::new(codes::STEP_FAILED, &message),
            },
        };
        self.state = s;
        Ok(t)
    }

    fn snapshot(&self) -> Result<ExecutionState, StepError> {
        Ok(ExecutionState {
            kind: QualifiedName::parse(KIND).map_err(|e| bad(e.to_string()))?,
            payload: Payload::from_json(self.state.to_json()).map_err(|e| bad(e.to_string()))?,
            segments: Vec::new(),
        })
    }
}

/// The scripted Definition. Input: a JSON array of ops.
pub struct ScriptDefinition {
    descriptor: Descriptor,
    children: Vec<DeploymentRef>,
}

impl ScriptDefinition {
    pub fn new(name: &str, children: Vec<DeploymentRef>) -> ScriptDefinition {
        let descriptor = Descriptor::new(
            name,
            "Runs a scripted sequence of kernel round trips (test strategy).",
            crate::json::parse(br#"{"type":"array"}"#).expect("static schema"),
            crate::json::parse(br#"{"type":"array"}"#).expect("static schema"),
            None,
        )
        .expect("static descriptor");
        ScriptDefinition { descriptor, children }
    }
}

impl Definition for ScriptDefinition {
    fn descriptor(&self) -> &Descriptor {
        &self.descriptor
    }
    fn child_deployments(&self) -> Vec<DeploymentRef> {
        self.children.clone()
    }
    fn start(&self, input: &Payload) -> Result<Box<dyn Execution>, StepError> {
        let script = Vec::<Op>::from_json(input.value()).map_err(|e| bad(e.to_string()))?;
        Ok(Box::new(ScriptExecution {
            state: State { script, pc: 0, awaiting: Awaiting::Nothing, child: None, log: Vec::new() },
        }))
    }
    fn restore(&self, _cx: &StepContext, state: &ExecutionState) -> Result<Box<dyn Execution>, StepError> {
        if state.kind.as_str() != KIND {
            return Err(bad(format!("state kind `{}` is not `{KIND}`", state.kind)));
        }
        let state = State::from_json(state.payload.value()).map_err(|e| bad(e.to_string()))?;
        Ok(Box::new(ScriptExecution { state }))
    }
}

/// A dispatcher that answers with a host-supplied function (the simulator's world).
pub type DispatchFn = Arc<dyn Fn(&EffectRequest, &DispatchContext) -> Result<Settlement, DispatchError> + Send + Sync>;

pub struct FnDispatcher {
    handler: DispatchFn,
    policy: DispatchPolicy,
}

impl FnDispatcher {
    pub fn new(handler: DispatchFn) -> FnDispatcher {
        FnDispatcher { handler, policy: DispatchPolicy::never() }
    }
    /// Echoes the Effect payload back as a succeeded settlement.
    pub fn echo() -> FnDispatcher {
        FnDispatcher::new(Arc::new(|r, _| Ok(Settlement { status: SettlementStatus::Succeeded, payload: r.payload.clone() })))
    }
}

impl Dispatcher for FnDispatcher {
    fn policy(&self, _effect: &Payload) -> DispatchPolicy {
        self.policy.clone()
    }
    fn dispatch<'a>(&'a self, request: EffectRequest, cx: DispatchContext) -> BoxFuture<'a, Result<Settlement, DispatchError>> {
        let result = (self.handler)(&request, &cx);
        Box::pin(async move { result })
    }
}

/// A script Deployment with the given dispatcher.
pub fn script_deployment(name: &str, dispatcher: Option<Arc<dyn Dispatcher>>, children: Vec<DeploymentRef>) -> Deployment {
    Deployment::new(
        Arc::new(ScriptDefinition::new(name, children)),
        dispatcher,
        Digest::of(b"keel.testkit.implementation"),
        Digest::of(name.as_bytes()),
    )
}

/// Encodes a script as the Start input.
pub fn script_input(ops: &[Op]) -> Payload {
    Payload::from_json(Json::Array(ops.iter().map(ToJson::to_json).collect())).expect("scripts are small")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::child::{Boundary, Condition};

    fn deployment() -> DeploymentRef {
        script_deployment("keel.test.codec", None, vec![]).reference().clone()
    }

    #[test]
    fn ops_round_trip_strictly() {
        let mut plan = ChildPlan::new("k", &deployment(), vec![Op::Checkpoint], Budget::finite(1, 2, 3));
        plan.capabilities = CapabilitySet::from_names(&["net.fetch"]).unwrap();
        let ops = vec![
            Op::WaitAfter { key: "w".into(), then: Json::str("x") },
            Op::Children { children: vec![plan], boundary: Boundary::TerminalResult, condition: Condition::Quorum(1) },
        ];
        for op in &ops {
            assert_eq!(&Op::from_json(&op.to_json()).unwrap(), op);
        }
        let empty = ObjectBuilder::new()
            .field("op", "children")
            .value("children", Json::Array(vec![]))
            .field("boundary", &Boundary::SubtreeDrained)
            .field("condition", &Condition::All)
            .build();
        assert!(Op::from_json(&empty).is_err(), "children needs at least one child");
        let mut extra = ops[0].to_json();
        if let Json::Object(o) = &mut extra {
            o.insert("extra".into(), Json::u64(1));
        }
        assert!(Op::from_json(&extra).is_err(), "unknown members are rejected");
    }

    #[test]
    fn awaiting_states_round_trip() {
        let w = WaitId::parse("wait:w").unwrap();
        for a in [
            Awaiting::WaitOpeningThenDispatch(Json::str("x")),
            Awaiting::SettlementThenWait(w.clone()),
            Awaiting::EarlyAnswer(w.clone()),
            Awaiting::ChildrenStart { count: 2, boundary: Boundary::SubtreeDrained, condition: Condition::Any },
            Awaiting::ChildrenWaitOpening,
            Awaiting::ChildrenAnswer(w),
        ] {
            assert_eq!(Awaiting::from_json(&a.to_json()).unwrap(), a);
        }
    }
}
