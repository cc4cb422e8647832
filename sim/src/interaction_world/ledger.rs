//! Ground truth of physical calls: every model and tool dispatch per EffectId (who made it,
//! when it ended, what it produced), the tool calls in flight (for the concurrency checks),
//! the requests each simulated model received, and the truth a tool knew when it failed.
//!
//! Violations found while a call starts (pending before dispatch, double dispatch,
//! concurrency) are recorded here as they happen and collected by the oracle.

use super::spec::ConcurrencySpec;
use crate::world::Violation;
use keel::chat::Request;
use keel::kernel::effect::Settlement;
use keel::kernel::ids::{EffectId, SignalId};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// Who performed a physical call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Caller {
    /// An engine writer, by incarnation number (0 = the first engine).
    Engine(u64),
    /// The host, settling a never-started Unknown from truth.
    Host,
}

/// How a physical call ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ended {
    Settled(Settlement),
    /// The dispatcher reported an uncertain outcome.
    Unknown(String),
    /// The dispatch future was dropped before it finished.
    Dropped,
}

/// One physical call.
#[derive(Clone, Debug)]
pub struct Dispatch {
    pub caller: Caller,
    pub kind: &'static str,
    pub ended: Option<Ended>,
}

/// The class of a tool call in flight.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolClass {
    Exclusive,
    Shared,
    Keyed(String),
}

impl ToolClass {
    /// The class a tool spec gives a call with these arguments (an empty key is no key).
    pub fn of(spec: &ConcurrencySpec, arguments: &keel::json::Json) -> ToolClass {
        match spec {
            ConcurrencySpec::Exclusive => ToolClass::Exclusive,
            ConcurrencySpec::Shared => ToolClass::Shared,
            ConcurrencySpec::Keyed(arg) => match arguments.get(arg).and_then(keel::json::Json::as_str) {
                Some(k) if !k.is_empty() => ToolClass::Keyed(k.to_owned()),
                _ => ToolClass::Shared,
            },
        }
    }
}

/// One request a simulated model received.
#[derive(Clone, Debug)]
pub struct ModelCallRecord {
    /// `root` or the delegate's name.
    pub model: String,
    /// The calling Process's child key (`root` for the root): sequences count per Process.
    pub process: String,
    pub sequence: u32,
    pub request: Request,
    pub applied_steers: Vec<SignalId>,
    pub caller: Caller,
}

#[derive(Default)]
struct State {
    dispatches: BTreeMap<EffectId, Vec<Dispatch>>,
    in_flight: u64,
    tools_in_flight: Vec<(EffectId, ToolClass)>,
    max_tools_in_flight: u64,
    host_performing: BTreeSet<EffectId>,
    truths: BTreeMap<EffectId, Settlement>,
    /// Shared: the oracle reads them several times, and each holds a whole model request.
    model_calls: Vec<Arc<ModelCallRecord>>,
    violations: Vec<Violation>,
    checks: u64,
}

/// The ledger. Shared by every dispatcher wrapper, simulated tool and the host.
#[derive(Default)]
pub struct Ledger {
    state: Mutex<State>,
}

impl Ledger {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records the start of a physical call. `tool`: its class and the concurrency limit.
    pub fn begin(&self, effect: &EffectId, caller: Caller, kind: &'static str, tool: Option<(ToolClass, u64)>) {
        let mut s = self.lock();
        s.checks += 2;
        let previous = s.dispatches.get(effect).map_or(0, Vec::len);
        if previous > 0 {
            s.violations.push(Violation::new(
                "no_double_dispatch",
                format!("{kind} effect {effect} physically dispatched {} times (now by {caller:?})", previous + 1),
            ));
        }
        s.dispatches.entry(effect.clone()).or_default().push(Dispatch { caller, kind, ended: None });
        s.in_flight += 1;
        if let Some((class, limit)) = tool {
            let running: Vec<ToolClass> = s.tools_in_flight.iter().map(|(_, c)| c.clone()).collect();
            let mut problems = Vec::new();
            if running.len() as u64 >= limit {
                problems.push(format!("{} tool calls already in flight (limit {limit})", running.len()));
            }
            if class == ToolClass::Exclusive && !running.is_empty() {
                problems.push("an exclusive call started beside others".to_owned());
            }
            if running.contains(&ToolClass::Exclusive) {
                problems.push("a call started beside an exclusive one".to_owned());
            }
            if let ToolClass::Keyed(k) = &class {
                if running.contains(&class) {
                    problems.push(format!("two calls with key `{k}` overlap"));
                }
            }
            for p in problems {
                s.violations.push(Violation::new("tool_concurrency", format!("{effect}: {p}")));
            }
            s.tools_in_flight.push((effect.clone(), class));
            s.max_tools_in_flight = s.max_tools_in_flight.max(s.tools_in_flight.len() as u64);
        }
    }

    /// Records how the latest call of `effect` ended.
    pub fn end(&self, effect: &EffectId, ended: Ended) {
        let mut s = self.lock();
        if let Some(d) = s.dispatches.get_mut(effect).and_then(|v| v.last_mut()) {
            if d.ended.is_none() {
                d.ended = Some(ended);
            }
        }
        s.in_flight = s.in_flight.saturating_sub(1);
        s.tools_in_flight.retain(|(e, _)| e != effect);
    }

    pub fn in_flight(&self) -> u64 {
        self.lock().in_flight
    }

    pub fn max_tools_in_flight(&self) -> u64 {
        self.lock().max_tools_in_flight
    }

    /// The physical calls of `effect`.
    pub fn dispatches(&self, effect: &EffectId) -> Vec<Dispatch> {
        self.lock().dispatches.get(effect).cloned().unwrap_or_default()
    }

    /// Every effect that was physically dispatched, with its calls.
    pub fn all(&self) -> BTreeMap<EffectId, Vec<Dispatch>> {
        self.lock().dispatches.clone()
    }

    pub fn set_host_performing(&self, effect: &EffectId, on: bool) {
        let mut s = self.lock();
        if on {
            s.host_performing.insert(effect.clone());
        } else {
            s.host_performing.remove(effect);
        }
    }

    /// Whether the host is performing this effect itself (hooks stay silent then).
    pub fn is_host_performing(&self, effect: &EffectId) -> bool {
        self.lock().host_performing.contains(effect)
    }

    /// The settlement a tool would have produced, recorded when it failed uncertainly.
    pub fn record_truth(&self, effect: &EffectId, settlement: Settlement) {
        self.lock().truths.insert(effect.clone(), settlement);
    }

    pub fn truth(&self, effect: &EffectId) -> Option<Settlement> {
        self.lock().truths.get(effect).cloned()
    }

    pub fn record_model_call(&self, record: ModelCallRecord) {
        self.lock().model_calls.push(Arc::new(record));
    }

    pub fn model_calls(&self) -> Vec<Arc<ModelCallRecord>> {
        self.lock().model_calls.clone()
    }

    pub fn violation(&self, v: Violation) {
        self.lock().violations.push(v);
    }

    pub fn count_check(&self) {
        self.lock().checks += 1;
    }

    /// The violations and checks recorded so far.
    pub fn findings(&self) -> (Vec<Violation>, u64) {
        let s = self.lock();
        (s.violations.clone(), s.checks)
    }
}
