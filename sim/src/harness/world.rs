//! What every part of one harness run shares: the environment, the seed's fault plan, the
//! ledger of the user's tool invocations and of the requests the model received, the
//! triggers waiting for the host, and the trace.

use super::faults::SeedPlan;
use crate::trace::Trace;
use crate::world::Violation;
use futures::channel::oneshot;
use keel::agent::UnknownPolicy;
use keel::chat::Request;
use keel::env::Env;
use keel::kernel::ids::EffectId;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// One run of the user's tool code at the dispatch boundary.
#[derive(Clone, Debug)]
pub(crate) struct ToolRun {
    pub tool: String,
    pub policy: UnknownPolicy,
    /// What the user's code returned (`ok: TEXT` / `error: TEXT` / `input requested`), once it
    /// returned.
    pub outcome: Option<String>,
    /// This run is the harness's own repeat probe of an idempotent tool.
    pub probe: bool,
}

/// One request the model received.
#[derive(Clone, Debug)]
pub(crate) struct ModelRequest {
    pub sequence: u32,
    pub request: Request,
}

/// A tool call inside the dispatch boundary (see [`World::enter_dispatch`]).
pub(crate) struct DispatchGuard<'a>(&'a World);

impl Drop for DispatchGuard<'_> {
    fn drop(&mut self) {
        let mut s = lock(&self.0.state);
        s.dispatching = s.dispatching.saturating_sub(1);
    }
}

/// A model call waiting for the host to act on a trigger.
pub(crate) struct Hook {
    /// Index of the scripted host action.
    pub action: usize,
    pub release: oneshot::Sender<()>,
}

#[derive(Default)]
struct State {
    /// Every run of user tool code per Effect, in start order.
    runs: BTreeMap<EffectId, Vec<ToolRun>>,
    in_flight: u64,
    model: Vec<ModelRequest>,
    violations: Vec<Violation>,
    checks: u64,
    fired: BTreeMap<String, u64>,
    hooks: Vec<Hook>,
    /// Host actions already triggered (each fires once per run).
    triggered: Vec<usize>,
    /// Agent states the run reached (see `states`) → times.
    states: BTreeMap<String, u64>,
    /// Tool calls (by call id) whose input request has not been answered yet.
    waiting: BTreeSet<String>,
    /// Tool calls inside the dispatch boundary now (faults included, not only the user's code).
    dispatching: u64,
}

pub(crate) struct World {
    pub env: Env,
    pub seed: u64,
    pub plan: SeedPlan,
    /// `(model call sequence, action index)` of each scripted host action.
    pub triggers: Vec<(u32, usize)>,
    /// `(tool name, action index)` of each host action performed while that tool runs.
    pub tool_triggers: Vec<(String, usize)>,
    state: Mutex<State>,
    trace: Mutex<Trace>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl World {
    pub fn new(
        env: Env,
        seed: u64,
        plan: SeedPlan,
        triggers: Vec<(u32, usize)>,
        tool_triggers: Vec<(String, usize)>,
        keep_trace: bool,
    ) -> World {
        World {
            env,
            seed,
            plan,
            triggers,
            tool_triggers,
            state: Mutex::new(State::default()),
            trace: Mutex::new(Trace::new(keep_trace)),
        }
    }

    pub fn trace(&self, line: impl Into<String>) {
        lock(&self.trace).push(line);
    }

    pub fn take_trace(&self) -> Trace {
        std::mem::replace(&mut *lock(&self.trace), Trace::new(false))
    }

    pub fn fired(&self, kind: &str) {
        *lock(&self.state).fired.entry(kind.to_owned()).or_insert(0) += 1;
    }

    pub fn fired_kinds(&self) -> BTreeMap<String, u64> {
        lock(&self.state).fired.clone()
    }

    /// The run reached agent state `state` (a coverage count, see `states`).
    pub fn reached(&self, state: &str) {
        *lock(&self.state).states.entry(state.to_owned()).or_insert(0) += 1;
    }

    pub fn states(&self) -> BTreeMap<String, u64> {
        lock(&self.state).states.clone()
    }

    /// A tool call entered the dispatch boundary; it leaves when the guard drops. Two calls
    /// inside at once reach `tools.overlap`.
    pub fn enter_dispatch(&self) -> DispatchGuard<'_> {
        let mut s = lock(&self.state);
        if s.dispatching > 0 {
            *s.states.entry(super::states::TOOLS_OVERLAP.to_owned()).or_insert(0) += 1;
        }
        s.dispatching += 1;
        DispatchGuard(self)
    }

    /// Tool call `call` asked for input (`true`) or was answered (`false`).
    pub fn input_waits(&self, call: &str, waits: bool) {
        let mut s = lock(&self.state);
        if waits {
            s.waiting.insert(call.to_owned());
        } else {
            s.waiting.remove(call);
        }
    }

    /// Whether a tool call other than `call` waits for input.
    pub fn other_input_waits(&self, call: &str) -> bool {
        lock(&self.state).waiting.iter().any(|c| c != call)
    }

    pub fn violation(&self, v: Violation) {
        lock(&self.state).violations.push(v);
    }

    pub fn check(&self) {
        lock(&self.state).checks += 1;
    }

    pub fn findings(&self) -> (Vec<Violation>, u64) {
        let s = lock(&self.state);
        (s.violations.clone(), s.checks)
    }

    /// Records the start of a run of user code; returns its index among the Effect's runs.
    pub fn begin_run(&self, effect: &EffectId, run: ToolRun) -> usize {
        let mut s = lock(&self.state);
        s.in_flight += 1;
        let runs = s.runs.entry(effect.clone()).or_default();
        runs.push(run);
        runs.len() - 1
    }

    pub fn end_run(&self, effect: &EffectId, index: usize, outcome: String) {
        let mut s = lock(&self.state);
        s.in_flight = s.in_flight.saturating_sub(1);
        if let Some(r) = s.runs.get_mut(effect).and_then(|v| v.get_mut(index)) {
            r.outcome = Some(outcome);
        }
    }

    /// A run whose future was dropped before the user's code returned.
    pub fn drop_run(&self) {
        let mut s = lock(&self.state);
        s.in_flight = s.in_flight.saturating_sub(1);
    }

    /// How many times the dispatch boundary was entered for `effect` so far.
    pub fn runs_of(&self, effect: &EffectId) -> Vec<ToolRun> {
        lock(&self.state)
            .runs
            .get(effect)
            .cloned()
            .unwrap_or_default()
    }

    pub fn all_runs(&self) -> BTreeMap<EffectId, Vec<ToolRun>> {
        lock(&self.state).runs.clone()
    }

    pub fn in_flight(&self) -> u64 {
        lock(&self.state).in_flight
    }

    pub fn record_model(&self, request: ModelRequest) {
        lock(&self.state).model.push(request);
    }

    pub fn model_requests(&self) -> Vec<ModelRequest> {
        lock(&self.state).model.clone()
    }

    /// Called by the model at call `sequence`: if this seed performs a host action there,
    /// hands the host a hook and waits (bounded, simulated time) until it acted.
    pub async fn hook(&self, sequence: u32) {
        let due: Vec<usize> = self.triggers.iter().filter(|(at, _)| *at == sequence).map(|(_, i)| *i).collect();
        self.wait_for_host(due).await;
    }

    /// Called at the dispatch boundary while the code of tool `tool` runs: the host actions
    /// this seed performs during it.
    pub async fn hook_tool(&self, tool: &str) {
        let due: Vec<usize> = self.tool_triggers.iter().filter(|(name, _)| name == tool).map(|(_, i)| *i).collect();
        self.wait_for_host(due).await;
    }

    async fn wait_for_host(&self, due: Vec<usize>) {
        if due.is_empty() {
            return;
        }
        let actions: Vec<usize> = {
            let mut s = lock(&self.state);
            let due: Vec<usize> = due
                .into_iter()
                .filter(|i| self.plan.actions.get(*i).copied().unwrap_or(false) && !s.triggered.contains(i))
                .collect();
            s.triggered.extend(due.iter().copied());
            due
        };
        for action in actions {
            let (release, released) = oneshot::channel();
            lock(&self.state).hooks.push(Hook { action, release });
            let timeout = self.env.clock.sleep(crate::limits::HOOK_TIMEOUT);
            let _ = futures::future::select(released, timeout).await;
        }
    }

    pub fn take_hooks(&self) -> Vec<Hook> {
        std::mem::take(&mut lock(&self.state).hooks)
    }
}
