//! The host's view of each run, projected from acknowledged heads.
//!
//! The Engine hands every acknowledged head to the runtime's listener (on the tree's owner
//! task, in commit order). The projection turns what is new in it into [`RunEvent`]s; because
//! only acknowledged heads are projected, an event never describes state a crash could undo.
//! Model deltas arrive beside it from the model dispatcher (attempt facts, not durable) into a
//! bounded queue that drops oldest-first.

use super::builder::RefPolicy;
use super::events::RunEvent;
use super::input::InputRequest;
use super::policy::UnknownPolicy;
use super::recovery::{kind_of, UnknownEffect};
use super::result::RunResult;
use super::events::UnknownKind;
use super::trace::{RunTrace, TraceConfig};
use crate::interaction::pending_inputs::pending_tool_inputs;
use crate::interaction::state::{ModelRecord, ParentState};
use super::model_switch::recorded_model;
use crate::interaction::protocol::{ModelCallEffect, ModelResult, ToolCallSettlement};
use crate::interaction::wire::Wire;
use crate::kernel::effect::{Effect, EffectPhase};
use crate::kernel::ids::{EffectId, ProcessId, WaitId};
use crate::kernel::process::Process;
use crate::kernel::result::ProcessResult;
use crate::kernel::snapshot::TreeSnapshot;
use crate::chat::{ToolCall, Usage};
use crate::interaction::ids::delegate_child_key;
use crate::interaction::budget::Spending;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::Waker;

/// Durable events kept per run for streams that lag; older ones are dropped.
pub const MAX_RUN_EVENTS: usize = 4096;
/// Model deltas queued per run; beyond it the oldest is dropped and counted.
pub const MAX_RUN_DELTAS: usize = 1024;
/// Runs tracked per agent; beyond it finished runs are forgotten, oldest first.
pub const MAX_TRACKED_RUNS: usize = 1024;
/// Wakers kept per run (one per waiting stream or call); beyond it the oldest is woken and
/// dropped, which only costs that waiter a spurious poll.
const MAX_WAKERS: usize = 64;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Every run of one agent the host knows about, by root Process.
#[derive(Default)]
pub(crate) struct Hub {
    runs: Mutex<BTreeMap<ProcessId, Arc<RunShared>>>,
    /// The environment of the runtime running this agent (its clock paces model retries).
    env: Mutex<Option<crate::env::Env>>,
    /// What this agent's spans say about it (`trace`).
    trace: TraceConfig,
    /// The hubs of the agents that delegate to this one (weak: a delegate does not keep its
    /// parents alive): a delegate's model calls belong to runs they track.
    delegators: Mutex<Vec<Weak<Hub>>>,
}

impl Hub {
    pub(crate) fn traced(trace: TraceConfig) -> Hub {
        Hub { trace, ..Hub::default() }
    }

    pub(crate) fn trace_config(&self) -> &TraceConfig {
        &self.trace
    }

    pub(crate) fn set_env(&self, env: crate::env::Env) {
        *lock(&self.env) = Some(env);
    }

    pub(crate) fn env(&self) -> Option<crate::env::Env> {
        lock(&self.env).clone()
    }

    pub(crate) fn get_or_create(&self, root: &ProcessId) -> Arc<RunShared> {
        let mut runs = lock(&self.runs);
        if let Some(r) = runs.get(root) {
            return r.clone();
        }
        if runs.len() >= MAX_TRACKED_RUNS {
            let finished: Vec<ProcessId> = runs.iter().filter(|(_, r)| r.is_over()).map(|(k, _)| k.clone()).collect();
            for k in finished.into_iter().take(runs.len() + 1 - MAX_TRACKED_RUNS) {
                runs.remove(&k);
            }
        }
        let shared = Arc::new(RunShared::new(root.clone(), RunTrace::open(self.trace.clone(), root, false)));
        runs.insert(root.clone(), shared.clone());
        shared
    }

    pub(crate) fn get(&self, root: &ProcessId) -> Option<Arc<RunShared>> {
        lock(&self.runs).get(root).cloned()
    }

    /// Records that the agent of `parent` delegates to this one.
    pub(crate) fn add_delegator(&self, parent: &Arc<Hub>) {
        let mut delegators = lock(&self.delegators);
        delegators.retain(|hub| hub.strong_count() > 0);
        delegators.push(Arc::downgrade(parent));
    }

    /// The run of the tree `root` that a model call of this agent belongs to: one of this
    /// agent's runs or, for a call this agent makes as a delegate, the run a delegating agent
    /// (at any depth) tracks. Spans, deltas and retry notices read it; durable events never
    /// come through here.
    pub(crate) fn tree_run(&self, root: &ProcessId) -> Option<Arc<RunShared>> {
        if let Some(run) = self.get(root) {
            return Some(run);
        }
        let delegators: Vec<Arc<Hub>> = lock(&self.delegators).iter().filter_map(Weak::upgrade).collect();
        delegators.iter().find_map(|hub| hub.tree_run(root))
    }

    /// Forgets what the host saw of `root` (before it is restored by a new writer).
    pub(crate) fn reset(&self, root: &ProcessId) -> Arc<RunShared> {
        let shared = Arc::new(RunShared::new(root.clone(), RunTrace::open(self.trace.clone(), root, true)));
        if let Some(old) = lock(&self.runs).insert(root.clone(), shared.clone()) {
            old.wake_all();
        }
        shared
    }
}

/// One run's projected state and its queues.
pub(crate) struct RunShared {
    pub(crate) root: ProcessId,
    state: Mutex<RunState>,
}

#[derive(Default)]
pub(crate) struct RunState {
    seen: BTreeSet<String>,
    events: VecDeque<(u64, RunEvent)>,
    deltas: VecDeque<(u64, RunEvent)>,
    next_seq: u64,
    dropped_unreported: u64,
    pub(crate) dropped_total: u64,
    pub(crate) head: Option<Arc<TreeSnapshot>>,
    pub(crate) result: Option<ProcessResult>,
    pub(crate) stopped: Option<String>,
    /// Unknowns in the head, not yet settled.
    pub(crate) unknowns: BTreeMap<EffectId, UnknownEffect>,
    /// Unknowns whose policy the host is applying now.
    pub(crate) resolving: BTreeSet<EffectId>,
    /// Dispatcher Effects pending in the head.
    pub(crate) pending: BTreeSet<EffectId>,
    pub(crate) inputs: Vec<InputRequest>,
    /// Model calls this runtime re-issued after an Unknown, per calling Process: each counts
    /// against that Process's `max_model_calls` like the call it repeats.
    pub(crate) model_reissues: BTreeMap<ProcessId, u32>,
    /// Answers delivered by this runtime: wait → answer canonical text. Consulted only once
    /// the answered tool child has left the head (the head itself decides while it is there).
    pub(crate) answered: BTreeMap<WaitId, String>,
    /// The run's open spans (observation only: never read back).
    pub(crate) trace: RunTrace,
    /// Model switches already reported (or recorded before this writer), per Process.
    switches_reported: BTreeMap<ProcessId, usize>,
    /// The root's model record in the last head (the result lists its switches).
    pub(crate) root_model: Option<ModelRecord>,
    /// A hand-over the host asked for, made at the root's next model call (`handover`).
    pub(crate) handover: Option<super::handover::HandoverRequest>,
    /// Whether this runtime already started (or tried) the successor of a run that handed over.
    pub(crate) successor_started: bool,
    /// Each live Interaction Process's own total (its calls and the delegates it folded), as
    /// last projected: a change is a `UsageUpdated` event.
    usage: BTreeMap<ProcessId, Usage>,
    /// The root's total and spending in the latest head (what a [`RunResult`] of any ending
    /// reports).
    pub(crate) root_spent: (Usage, Spending),
    /// The run's running total in the latest head: every live Interaction Process's own total
    /// (a delegate's is folded into its parent's when the parent consumes its result, and the
    /// delegate leaves the head in the same commit, so nothing counts twice).
    pub(crate) run_usage: Usage,
    wakers: Vec<Waker>,
}

impl RunShared {
    fn new(root: ProcessId, trace: RunTrace) -> RunShared {
        RunShared { root, state: Mutex::new(RunState { trace, ..RunState::default() }) }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, RunState> {
        lock(&self.state)
    }

    pub(crate) fn is_over(&self) -> bool {
        let s = self.lock();
        s.result.is_some() || s.stopped.is_some()
    }

    pub(crate) fn wake_all(&self) {
        let wakers = std::mem::take(&mut self.lock().wakers);
        for w in wakers {
            w.wake();
        }
    }

    /// Queues a model delta (not durable): the oldest is dropped when the queue is full.
    pub(crate) fn push_delta(&self, event: RunEvent) {
        {
            let mut s = self.lock();
            if s.deltas.len() >= MAX_RUN_DELTAS {
                s.deltas.pop_front();
                s.dropped_unreported = s.dropped_unreported.saturating_add(1);
                s.dropped_total = s.dropped_total.saturating_add(1);
            }
            let seq = s.bump();
            s.deltas.push_back((seq, event));
        }
        self.wake_all();
    }

    /// The next event after `cursor` for one stream, earliest first; `None` registers the
    /// waker.
    pub(crate) fn next_event(&self, cursor: u64, waker: &Waker) -> Option<(u64, RunEvent)> {
        let mut s = self.lock();
        let durable = s.events.iter().find(|(seq, _)| *seq >= cursor).map(|(seq, e)| (*seq, e.clone()));
        let delta_seq = s.deltas.front().map(|(seq, _)| *seq);
        let take_delta = match (&durable, delta_seq) {
            (Some((d, _)), Some(q)) => q < *d,
            (None, Some(_)) => true,
            _ => false,
        };
        if take_delta {
            if s.dropped_unreported > 0 {
                let dropped = std::mem::take(&mut s.dropped_unreported);
                return Some((cursor, RunEvent::DeltasDropped { dropped }));
            }
            let (_, event) = s.deltas.pop_front()?;
            return Some((cursor, event));
        }
        if let Some((seq, event)) = durable {
            return Some((seq + 1, event));
        }
        s.register_waker(waker);
        None
    }

    /// Projects one acknowledged head; returns the Unknowns the host must act on now.
    pub(crate) fn project(&self, head: &Arc<TreeSnapshot>, policies: &BTreeMap<String, RefPolicy>) -> Vec<UnknownEffect> {
        let act = {
            let mut s = self.lock();
            let act = s.project(head, policies);
            s.head = Some(head.clone());
            act
        };
        self.wake_all();
        act
    }

    pub(crate) fn stop(&self, reason: String) {
        {
            let mut s = self.lock();
            if s.stopped.is_some() || s.result.is_some() {
                return;
            }
            s.stopped = Some(reason.clone());
            s.trace.stopped(&reason);
            s.push(RunEvent::Stopped { reason });
        }
        self.wake_all();
    }

    /// A policy could not settle `unknown`: it is held for the host, who is told why.
    pub(crate) fn hold(&self, unknown: UnknownEffect, reason: String) {
        let mut s = self.lock();
        if s.first(format!("held:{}", unknown.effect)) {
            s.trace.resolution_needed(&unknown.effect, &reason);
            s.push(RunEvent::ResolutionNeeded { effect: unknown.clone(), reason });
        }
        s.unknowns.insert(unknown.effect.clone(), unknown);
    }

    /// The host finished applying a policy to `effect` (settled or, on `held`, kept).
    pub(crate) fn done_resolving(&self, effect: &EffectId) {
        self.lock().resolving.remove(effect);
        self.wake_all();
    }
}

impl RunState {
    fn bump(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq = self.next_seq.saturating_add(1);
        seq
    }

    /// Registers `waker` to be woken on the next change.
    pub(crate) fn register_waker(&mut self, waker: &Waker) {
        if self.wakers.iter().any(|w| w.will_wake(waker)) {
            return;
        }
        if self.wakers.len() >= MAX_WAKERS {
            self.wakers.remove(0).wake();
        }
        self.wakers.push(waker.clone());
    }

    pub(crate) fn push(&mut self, event: RunEvent) {
        let seq = self.bump();
        if self.events.len() >= MAX_RUN_EVENTS {
            self.events.pop_front();
        }
        self.events.push_back((seq, event));
    }

    fn first(&mut self, key: String) -> bool {
        self.seen.insert(key)
    }

    /// Marks the switches `snapshot` records as reported (a resumed run's earlier writers
    /// reported them).
    pub(crate) fn note_switches(&mut self, snapshot: &TreeSnapshot) {
        for p in snapshot.processes() {
            if let Some(record) = recorded_model(p) {
                self.switches_reported.insert(p.id.clone(), record.switches.len());
            }
        }
    }

    /// Reports the switches each Process recorded since the last report.
    fn project_switches(&mut self, head: &TreeSnapshot) {
        for p in head.processes() {
            let Some(record) = recorded_model(p) else { continue };
            let reported = self.switches_reported.get(&p.id).copied().unwrap_or(0);
            for switch in record.switches.iter().skip(reported) {
                self.push(RunEvent::ModelSwitched {
                    process: p.id.clone(),
                    from: switch.from.clone(),
                    to: switch.to.clone(),
                    model_calls: switch.model_calls,
                });
            }
            self.switches_reported.insert(p.id.clone(), record.switches.len().max(reported));
            if p.relation.is_root() {
                self.root_model = Some(record);
            }
        }
    }

    fn project(&mut self, head: &TreeSnapshot, policies: &BTreeMap<String, RefPolicy>) -> Vec<UnknownEffect> {
        let mut act = Vec::new();
        let mut unknown_now = BTreeSet::new();
        self.trace.committed(head);
        self.pending.clear();
        // Before the calls: a switch is recorded by the first Step under the new model.
        self.project_switches(head);
        // Before the calls too: a delegate's calls nest under its span.
        self.trace_delegates_started(head);
        for p in head.processes() {
            let Some(prepared) = &p.prepared else { continue };
            for (index, e) in prepared.effects.iter().enumerate() {
                let Effect::Dispatcher(payload) = &e.effect else { continue };
                let (kind, tool) = kind_of(payload);
                match &e.phase {
                    EffectPhase::Planned => {}
                    EffectPhase::Pending => {
                        self.pending.insert(e.id.clone());
                        if !self.first(format!("started:{}", e.id)) {
                            continue;
                        }
                        if let Ok(call) = ModelCallEffect::from_payload(payload) {
                            if !call.applied_steer_signal_ids.is_empty() {
                                self.push(RunEvent::SteerApplied { signals: call.applied_steer_signal_ids });
                            }
                        }
                        // A tool call that asked the host for input is dispatched again with the
                        // answer (a new Effect of the same tool-child Process): one call, one event.
                        if let Some((tool, call_id)) = tool {
                            if self.first(format!("tool-started:{}:{call_id}", p.id)) {
                                self.trace.tool_started(&p.id, p.relation.parent_id.as_ref(), &tool, &call_id, payload, &head.root_id);
                                self.push(RunEvent::ToolStarted { process: p.id.clone(), tool, call_id });
                            }
                        }
                    }
                    EffectPhase::Settled(settlement) => {
                        if !self.first(format!("settled:{}", e.id)) {
                            continue;
                        }
                        self.trace.settled(&e.id, settlement.status == crate::kernel::signal::SettlementStatus::Succeeded);
                        if kind == UnknownKind::Model {
                            match ModelResult::from_payload(&settlement.payload) {
                                Ok(ModelResult::Response { response, .. }) => {
                                    let text = response.message.as_ref().map(|m| m.text()).unwrap_or_default();
                                    let tool_calls = response.tool_calls().iter().map(|c| c.name.clone()).collect();
                                    let usage = response.usage;
                                    self.push(RunEvent::ModelResponse { process: p.id.clone(), call: e.id.clone(), text, tool_calls, usage });
                                }
                                Ok(ModelResult::Error(error) | ModelResult::HostError(error)) => {
                                    self.push(RunEvent::ModelFailed { process: p.id.clone(), call: e.id.clone(), error });
                                }
                                Ok(ModelResult::OutOfTime { at_ms, deadline_ms }) => {
                                    let error = format!("not called: the time budget ended at {deadline_ms} ms, the clock read {at_ms} ms");
                                    self.push(RunEvent::ModelFailed { process: p.id.clone(), call: e.id.clone(), error });
                                }
                                Err(_) => {}
                            }
                        } else if let Some((tool, call_id)) = tool {
                            if let Ok(ToolCallSettlement::Result(settled)) = ToolCallSettlement::from_payload(&settlement.payload) {
                                let result = &settled.result;
                                self.trace.tool_settled(&p.id, &call_id, result.is_error, &result.output.content);
                                self.push(RunEvent::ToolSettled {
                                    process: p.id.clone(),
                                    tool,
                                    call_id,
                                    is_error: settled.result.is_error,
                                    text: settled.result.output.content,
                                });
                            }
                        }
                    }
                    EffectPhase::Unknown => {
                        unknown_now.insert(e.id.clone());
                        if self.unknowns.contains_key(&e.id) || self.resolving.contains(&e.id) {
                            continue;
                        }
                        let (mut policy, max_calls) = policy_of(policies, &p.deployment_ref.to_string(), &kind);
                        let mut held_because = "its Unknown policy is hold: settle it with `Run::resolve`".to_owned();
                        if kind == UnknownKind::Model && policy == UnknownPolicy::Retry {
                            // A re-issue is one more model call: it counts against the limit.
                            let made = ParentState::from_execution_state(&prepared.candidate_state).map(|s| s.model_call_count).unwrap_or(u32::MAX);
                            let reissued = self.model_reissues.get(&p.id).copied().unwrap_or(0);
                            if made.saturating_add(reissued) >= max_calls {
                                policy = UnknownPolicy::Hold;
                                held_because = format!(
                                    "re-issuing this model call would exceed max_model_calls ({max_calls}): settle it with `Run::resolve`"
                                );
                            } else {
                                self.model_reissues.insert(p.id.clone(), reissued + 1);
                            }
                        }
                        let unknown = UnknownEffect {
                            process: p.id.clone(),
                            effect: e.id.clone(),
                            kind,
                            policy,
                            deployment_ref: p.deployment_ref.clone(),
                            relation: p.relation.clone(),
                            step_sequence: prepared.sequence,
                            batch_index: u32::try_from(index).unwrap_or(u32::MAX),
                            payload: payload.clone(),
                            segments: prepared.candidate_state.segments.clone(),
                            incarnation: head.incarnation.clone(),
                        };
                        if self.first(format!("unknown:{}", e.id)) {
                            self.trace.unknown(&unknown);
                            self.push(RunEvent::Unknown(unknown.clone()));
                        }
                        if policy == UnknownPolicy::Hold {
                            if self.first(format!("held:{}", e.id)) {
                                self.trace.resolution_needed(&e.id, &held_because);
                                self.push(RunEvent::ResolutionNeeded { effect: unknown.clone(), reason: held_because });
                            }
                            self.unknowns.insert(e.id.clone(), unknown);
                        } else {
                            self.resolving.insert(e.id.clone());
                            act.push(unknown);
                        }
                    }
                }
            }
        }
        self.unknowns.retain(|id, _| unknown_now.contains(id));
        self.project_usage(head);
        self.trace_delegates_ended(head);
        self.inputs = pending_tool_inputs(head)
            .unwrap_or_default()
            .into_iter()
            .map(|i| InputRequest {
                process: i.process_id().clone(),
                wait: i.wait_id().clone(),
                prompt: i.prompt().value().clone(),
                response_schema: i.response_schema().value().clone(),
            })
            .collect();
        self.trace.inputs_open(&self.inputs);
        for input in self.inputs.clone() {
            if self.first(format!("input:{}", input.wait.as_str())) {
                self.trace.input_requested(&input);
                self.push(RunEvent::InputRequested(input));
            }
        }
        let root = head.root();
        if let Some(finish) = &root.finish {
            if self.result.is_none() {
                let result = ProcessResult {
                    process_id: root.id.clone(),
                    deployment_ref: root.deployment_ref.clone(),
                    termination: finish.termination.clone(),
                    output: finish.output.clone(),
                };
                self.result = Some(result.clone());
                let result = RunResult::new(result, self.root_model.clone(), self.root_spent);
                self.trace.finished(&result);
                self.push(RunEvent::Finished(result));
            }
        }
        act
    }
}

impl RunState {
    /// Reports every Interaction Process whose total changed, with the run's running total.
    fn project_usage(&mut self, head: &TreeSnapshot) {
        let mut now = BTreeMap::new();
        let mut run = Usage::default();
        for p in head.processes() {
            if p.committed_state.kind.as_str() != ParentState::KIND {
                continue;
            }
            let Ok(state) = ParentState::from_execution_state(&p.committed_state) else { continue };
            run = run.saturating_add(state.usage);
            if p.id == head.root().id {
                self.root_spent = (state.usage, state.spending);
            }
            now.insert(p.id.clone(), state.usage);
        }
        self.run_usage = run;
        for (process, usage) in &now {
            // A Process appears with zero tokens: only a change is news.
            if self.usage.get(process).copied().unwrap_or_default() != *usage {
                self.push(RunEvent::UsageUpdated { process: process.clone(), usage: *usage, run });
            }
        }
        self.usage = now;
    }
}

impl RunState {
    /// Opens the spans of the delegate runs new in `head`, outer ones first (a nested
    /// delegate's span is a child of its parent's); nothing is decoded for an untraced run.
    fn trace_delegates_started(&mut self, head: &TreeSnapshot) {
        if !self.trace.is_enabled() {
            return;
        }
        let mut new: Vec<&Process> = head
            .processes()
            .iter()
            .filter(|p| !p.relation.is_root() && p.committed_state.kind.as_str() == ParentState::KIND)
            .filter(|p| !self.seen.contains(&format!("delegate:{}", p.id)))
            .map(|p| &**p)
            .collect();
        new.sort_by_key(|p| p.relation.depth);
        for delegate in new {
            self.seen.insert(format!("delegate:{}", delegate.id));
            let call = delegate.relation.parent_id.as_ref().and_then(|parent| head.process(parent)).and_then(|parent| delegate_call(parent, delegate));
            let model = recorded_model(delegate).map(|record| record.current);
            self.trace.delegate_started(delegate, call.as_ref(), model.as_ref());
        }
    }

    /// Closes the spans of the delegate runs that ended in `head` (with their outcome) or left it.
    fn trace_delegates_ended(&mut self, head: &TreeSnapshot) {
        if !self.trace.is_enabled() {
            return;
        }
        for p in head.processes() {
            let Some(finish) = &p.finish else { continue };
            if p.relation.is_root() || !self.trace.has_delegate(&p.id) {
                continue;
            }
            let result = ProcessResult {
                process_id: p.id.clone(),
                deployment_ref: p.deployment_ref.clone(),
                termination: finish.termination.clone(),
                output: finish.output.clone(),
            };
            let spent = (self.usage.get(&p.id).copied().unwrap_or_default(), Spending::default());
            self.trace.delegate_finished(&p.id, &RunResult::new(result, recorded_model(p), spent));
        }
        self.trace.delegates_open(|id| head.process(id).is_some());
    }
}

/// The model's call of `delegate` in its parent's current tool round: the call whose derived
/// child key is the delegate's (the parent's prepared state first: the Step that starts the
/// delegate is adopted only when its batch settles).
fn delegate_call(parent: &Process, delegate: &Process) -> Option<ToolCall> {
    let key = delegate.relation.child_key.as_ref()?;
    let states = parent.prepared.iter().map(|p| &p.candidate_state).chain(std::iter::once(&parent.committed_state));
    for state in states {
        let Ok(state) = ParentState::from_execution_state(state) else { continue };
        let Some(round) = &state.tool_round else { continue };
        let found = round.calls().into_iter().find(|call| delegate_child_key(state.model_call_count, call).is_ok_and(|k| &k == key));
        if let Some(call) = found {
            return Some(call.clone());
        }
    }
    None
}

/// The policy for an Unknown of `kind` in a Process of `reference`, with that Process's
/// model-call limit (`u32::MAX` where it has none).
fn policy_of(policies: &BTreeMap<String, RefPolicy>, reference: &str, kind: &UnknownKind) -> (UnknownPolicy, u32) {
    match (policies.get(reference), kind) {
        (Some(RefPolicy::Model { unknown, max_model_calls }), UnknownKind::Model) => (*unknown, *max_model_calls),
        (Some(RefPolicy::Tools(tools)), UnknownKind::Tool(name)) => (tools.get(name).copied().unwrap_or_default(), u32::MAX),
        _ => (UnknownPolicy::Hold, u32::MAX),
    }
}
