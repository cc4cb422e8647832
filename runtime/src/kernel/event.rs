//! Observation events. Committed-phase events are published only after
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

/// Receives observation events. Listeners run synchronously on the tree's owner task, in
/// publication order: they must be bounded and must not await their own tree.
pub trait EventListener: Send + Sync {
    fn on_event(&self, event: &Event);

    /// Called with every newly acknowledged head of a tree, in commit order, before the
    /// events that commit made true are published. Hosts that project state from the head
    /// (pending inputs, Unknown Effects, finished results) see each acknowledged cut exactly
    /// once this way instead of polling. Same rules as `on_event`: bounded, never awaits.
    fn on_head(&self, _head: &std::sync::Arc<super::snapshot::TreeSnapshot>) {}
}

/// Contained listener failures: counted with the latest bounded diagnostic.
/// Observers cannot veto and their failures never alter execution.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObservationFailures {
    /// Event-listener calls that panicked (saturating).
    pub event_listener_panics: u64,
    /// The diagnostic of the latest panic, at most `MAX_DIAGNOSTIC_BYTES`.
    pub last_event_listener_diagnostic: Option<String>,
}

impl ObservationFailures {
    fn record_event_listener_panic(&mut self, diagnostic: String) {
        self.event_listener_panics = self.event_listener_panics.saturating_add(1);
        self.last_event_listener_diagnostic = Some(diagnostic);
    }
}

/// Delivers events to every listener, containing and counting their panics.
pub struct EventFanout {
    listeners: Vec<std::sync::Arc<dyn EventListener>>,
    failures: std::sync::Mutex<ObservationFailures>,
}

impl EventFanout {
    pub fn new(listeners: Vec<std::sync::Arc<dyn EventListener>>) -> EventFanout {
        EventFanout {
            listeners,
            failures: std::sync::Mutex::new(ObservationFailures::default()),
        }
    }

    /// Calls every listener once, in registration order. A panicking listener does not stop
    /// the others.
    pub fn publish(&self, event: &Event) {
        self.each_listener(|listener| listener.on_event(event));
    }

    /// Calls every listener's `on_head` once, in registration order, containing panics.
    pub fn publish_head(&self, head: &std::sync::Arc<super::snapshot::TreeSnapshot>) {
        self.each_listener(|listener| listener.on_head(head));
    }

    /// Runs `call` on every listener in registration order; a panic is counted, not propagated.
    fn each_listener(&self, call: impl Fn(&dyn EventListener)) {
        for listener in &self.listeners {
            // AssertUnwindSafe: the argument is only borrowed, and a listener that panics is
            // not trusted with anything else of ours; its own state is its business.
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| call(listener.as_ref())));
            if let Err(panic) = outcome {
                let text = crate::kernel::owner::panic_text(&panic);
                let diagnostic = crate::text::normalize_diagnostic(
                    text.as_bytes(),
                    crate::limits::MAX_DIAGNOSTIC_BYTES,
                    "event listener panicked",
                );
                self.failures
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .record_event_listener_panic(diagnostic);
            }
        }
    }

    /// The current failure counters.
    pub fn failures(&self) -> ObservationFailures {
        self.failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

impl std::fmt::Debug for EventFanout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventFanout")
            .field("listeners", &self.listeners.len())
            .finish_non_exhaustive()
    }
}

/// Every event name: process, runtime, signal, step, effect and delta events.
pub const ALL_EVENT_NAMES: [&str; 15] = [
    names::PROCESS_STARTED,
    names::PROCESS_RESTORED,
    names::PROCESS_PAUSED,
    names::PROCESS_RESUMED,
    names::PROCESS_FINISHED,
    names::RUNTIME_STOPPED,
    names::SIGNAL_ACCEPTED,
    names::STEP_STARTED,
    names::STEP_PREPARED,
    names::STEP_FINISHED,
    names::STEP_COMMITTED,
    names::EFFECT_STARTED,
    names::EFFECT_FINISHED,
    names::DELTA_DROPPED,
    names::EFFECT_RESOLVED,
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::testkit::script_deployment;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    fn event(name: &'static str) -> Event {
        let root = ProcessId::root_from_hex(&format!("{:032x}", 1)).unwrap();
        Event {
            process_sequence: 1,
            process_id: root.clone(),
            deployment_ref: script_deployment("keel.test.event", None, vec![])
                .reference()
                .clone(),
            relation: Relation::root(root),
            tree_incarnation_id: None,
            step_sequence: None,
            effect_id: None,
            name,
            phase: phase_of(name),
            occurred_at: Timestamp::from_millis(0).unwrap(),
            payload: Json::object(),
        }
    }

    #[test]
    fn every_name_has_the_phase_of_the_table() {
        let attempt = [
            names::RUNTIME_STOPPED,
            names::STEP_STARTED,
            names::STEP_PREPARED,
            names::STEP_FINISHED,
            names::EFFECT_STARTED,
            names::EFFECT_FINISHED,
            names::DELTA_DROPPED,
        ];
        for name in ALL_EVENT_NAMES {
            let expected = if attempt.contains(&name) {
                EventPhase::Attempt
            } else {
                EventPhase::Committed
            };
            assert_eq!(phase_of(name), expected, "{name}");
            assert!(name.starts_with("agent."), "{name}");
        }
        let mut distinct = ALL_EVENT_NAMES.to_vec();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), ALL_EVENT_NAMES.len(), "names are distinct");
    }

    struct Counting(AtomicU64);
    impl EventListener for Counting {
        fn on_event(&self, _: &Event) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    struct Panicking(String);
    impl EventListener for Panicking {
        fn on_event(&self, _: &Event) {
            panic!("{}", self.0);
        }
    }

    #[test]
    fn a_panicking_listener_is_counted_and_does_not_starve_the_others() {
        let counting = Arc::new(Counting(AtomicU64::new(0)));
        let fanout = EventFanout::new(vec![
            Arc::new(Panicking("first".into())),
            counting.clone(),
            Arc::new(Panicking("x".repeat(10 * crate::limits::MAX_DIAGNOSTIC_BYTES))),
        ]);
        assert_eq!(fanout.failures(), ObservationFailures::default());
        fanout.publish(&event(names::PROCESS_STARTED));
        fanout.publish(&event(names::STEP_STARTED));
        assert_eq!(
            counting.0.load(Ordering::SeqCst),
            2,
            "the healthy listener saw every event"
        );
        let failures = fanout.failures();
        assert_eq!(failures.event_listener_panics, 4);
        let last = failures.last_event_listener_diagnostic.expect("diagnostic kept");
        assert!(
            last.len() <= crate::limits::MAX_DIAGNOSTIC_BYTES,
            "diagnostic is bounded"
        );
        assert!(last.contains("xxx"), "the latest panic wins: {last:.40}");
    }

    #[test]
    fn the_panic_counter_saturates() {
        let mut f = ObservationFailures {
            event_listener_panics: u64::MAX,
            last_event_listener_diagnostic: None,
        };
        f.record_event_listener_panic("again".into());
        assert_eq!(f.event_listener_panics, u64::MAX);
        assert_eq!(f.last_event_listener_diagnostic.as_deref(), Some("again"));
    }
}
