//! What every simulated part of one run shares: the environment, the spec, the ledger, the
//! store, the host hooks and the trace.

use super::ledger::Ledger;
use super::spec::{Spec, Trigger};
use super::store::Store;
use crate::limits::HOOK_TIMEOUT;
use crate::timeline::Recorder;
use crate::trace::Trace;
use futures::channel::oneshot;
use keel::env::Env;
use keel::kernel::ids::ProcessId;
use keel::kernel::snapshot::TreeSnapshot;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// A triggered call waiting for the host to act.
pub struct HookEvent {
    pub trigger: Trigger,
    pub release: oneshot::Sender<()>,
}

pub struct Context {
    pub env: Env,
    pub spec: Spec,
    pub ledger: Ledger,
    pub store: Arc<Store>,
    /// The structured events `replay --html` draws (kept only with the trace).
    pub timeline: Arc<Recorder>,
    trace: Mutex<Trace>,
    hooks: Mutex<Vec<HookEvent>>,
    fired: Mutex<BTreeSet<String>>,
    root: Mutex<Option<ProcessId>>,
    /// Incarnation number of the current engine (0 = first).
    incarnation: Mutex<u64>,
    faults: Mutex<std::collections::BTreeMap<String, u64>>,
    /// The first head each restored writer acknowledged, as its owner holds it (typed
    /// records, partly taken from the stopped writer's head): the oracle compares them with
    /// its own strict decoding of the same stored bytes (`restore_decodes_alike`).
    restored: Mutex<Vec<Arc<TreeSnapshot>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A stable text key of a trigger.
pub fn trigger_key(t: &Trigger) -> String {
    match t {
        Trigger::ModelCall(n) => format!("model_call:{n}"),
        Trigger::ToolCall(id) => format!("tool_call:{id}"),
        Trigger::InputWait(n) => format!("input_wait:{n}"),
    }
}

impl Context {
    pub fn new(env: Env, spec: Spec, store: Arc<Store>, timeline: Arc<Recorder>, keep_trace: bool) -> Arc<Context> {
        Arc::new(Context {
            env,
            spec,
            ledger: Ledger::default(),
            store,
            timeline,
            trace: Mutex::new(Trace::new(keep_trace)),
            hooks: Mutex::new(Vec::new()),
            fired: Mutex::new(BTreeSet::new()),
            root: Mutex::new(None),
            incarnation: Mutex::new(0),
            faults: Mutex::new(std::collections::BTreeMap::new()),
            restored: Mutex::new(Vec::new()),
        })
    }

    pub fn trace(&self, line: impl Into<String>) {
        lock(&self.trace).push(line);
    }

    pub fn take_trace(&self) -> Trace {
        std::mem::replace(&mut *lock(&self.trace), Trace::new(false))
    }

    /// Counts one fired fault or host action kind.
    pub fn fired(&self, kind: &str) {
        *lock(&self.faults).entry(kind.to_owned()).or_insert(0) += 1;
    }

    pub fn fired_kinds(&self) -> std::collections::BTreeMap<String, u64> {
        lock(&self.faults).clone()
    }

    pub fn set_root(&self, root: ProcessId) {
        *lock(&self.root) = Some(root);
    }

    pub fn root(&self) -> Option<ProcessId> {
        lock(&self.root).clone()
    }

    /// Keeps a restored writer's first acknowledged head for the oracle.
    pub fn restored(&self, head: Arc<TreeSnapshot>) {
        lock(&self.restored).push(head);
    }

    pub fn restored_heads(&self) -> Vec<Arc<TreeSnapshot>> {
        lock(&self.restored).clone()
    }

    pub fn incarnation(&self) -> u64 {
        *lock(&self.incarnation)
    }

    pub fn next_incarnation(&self) {
        *lock(&self.incarnation) += 1;
    }

    /// Whether a host action waits on `trigger` and has not fired yet; marks it fired.
    fn claim(&self, trigger: &Trigger) -> bool {
        if !self.spec.host.iter().any(|a| &a.trigger == trigger) {
            return false;
        }
        lock(&self.fired).insert(trigger_key(trigger))
    }

    /// Whether `trigger` already fired (or is being handled).
    pub fn has_fired(&self, trigger: &Trigger) -> bool {
        lock(&self.fired).contains(&trigger_key(trigger))
    }

    /// Claims `trigger` for the host itself (it acts without a waiting call).
    pub fn claim_for_host(&self, trigger: &Trigger) -> bool {
        self.claim(trigger)
    }

    /// Called by a model or tool call at a trigger point: if a host action waits on it, hand
    /// the host an event and wait (bounded, in simulated time) until it has acted.
    pub async fn hook(&self, trigger: Trigger) {
        if !self.claim(&trigger) {
            return;
        }
        let (release, released) = oneshot::channel();
        lock(&self.hooks).push(HookEvent { trigger, release });
        let timeout = self.env.clock.sleep(HOOK_TIMEOUT);
        let _ = futures::future::select(released, timeout).await;
    }

    /// The hook events waiting for the host.
    pub fn take_hook_events(&self) -> Vec<HookEvent> {
        std::mem::take(&mut *lock(&self.hooks))
    }
}
