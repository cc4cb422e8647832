//! Observation events (spec kernel.md §10.1). Committed-phase events are published only after
//! the commit that makes them true is acknowledged; attempt-phase events describe work as it
//! happens and assert no state change.

use super::deployment::DeploymentRef;
use super::ids::{EffectId, IncarnationId, ProcessId};
use super::process::Process;
use super::relation::Relation;
use crate::env::Timestamp;
use crate::json::Json;

/// Event names (fixed phase and identity scope each).
pub mod names {
    pub const PROCESS_STARTED: &str = "agent.process.started";
    pub const PROCESS_RESTORED: &str = "agent.process.restored";
    pub const PROCESS_PAUSED: &str = "agent.process.paused";
    pub const PROCESS_RESUMED: &str = "agent.process.resumed";
    pub const PROCESS_FINISHED: &str = "agent.process.finished";
    pub const RUNTIME_STOPPED: &str = "agent.runtime.stopped";
    pub const SIGNAL_ACCEPTED: &str = "agent.signal.accepted";
    pub const STEP_STARTED: &str = "agent.step.started";
    pub const STEP_PREPARED: &str = "agent.step.prepared";
    pub const STEP_FINISHED: &str = "agent.step.finished";
    pub const STEP_COMMITTED: &str = "agent.step.committed";
    pub const EFFECT_STARTED: &str = "agent.effect.started";
    pub const EFFECT_FINISHED: &str = "agent.effect.finished";
    pub const DELTA_DROPPED: &str = "agent.delta.dropped";
    pub const EFFECT_RESOLVED: &str = "agent.effect.resolved";
}

/// Whether an event asserts committed state or describes an attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventPhase {
    Committed,
    Attempt,
}

/// The phase of an event name.
pub fn phase_of(name: &str) -> EventPhase {
    use names::*;
    match name {
        RUNTIME_STOPPED | STEP_STARTED | STEP_PREPARED | STEP_FINISHED | EFFECT_STARTED | EFFECT_FINISHED
        | DELTA_DROPPED => EventPhase::Attempt,
        _ => EventPhase::Committed,
    }
}

/// One observation fact.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// 1-based per Process per runtime activation; assigned by the publisher.
    pub process_sequence: u64,
    pub process_id: ProcessId,
    pub deployment_ref: DeploymentRef,
    pub relation: Relation,
    pub tree_incarnation_id: Option<IncarnationId>,
    pub step_sequence: Option<u64>,
    pub effect_id: Option<EffectId>,
    pub name: &'static str,
    pub phase: EventPhase,
    pub occurred_at: Timestamp,
    pub payload: Json,
}

impl Event {
    pub fn new(
        p: &Process,
        incarnation: &IncarnationId,
        name: &'static str,
        step: Option<u64>,
        effect: Option<EffectId>,
        now: Timestamp,
    ) -> Event {
        Event {
            process_sequence: 0,
            process_id: p.id.clone(),
            deployment_ref: p.deployment_ref.clone(),
            relation: p.relation.clone(),
            tree_incarnation_id: Some(incarnation.clone()),
            step_sequence: step,
            effect_id: effect,
            name,
            phase: phase_of(name),
            occurred_at: now,
            payload: Json::object(),
        }
    }
}
