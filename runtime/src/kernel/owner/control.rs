//! Terminal intents, termination, propagation to descendants, and child-wait satisfaction
//! (terminal precedence: kill > deadline > cancel > failure > completion).

use super::{Owner, Publication};
use crate::kernel::child::{Boundary, ChildWaitSpec};
use crate::kernel::engine_signal::{ChildOutcome, ChildWaitSatisfied};
use crate::kernel::failure::Failure;
use crate::kernel::ids::{EffectId, ProcessId, SignalId, WaitId};
use crate::kernel::mailbox::Admission;
use crate::kernel::process::{Finish, Process};
use crate::kernel::result::ProcessResult;
use crate::kernel::status::{IntentOwner, Status, Termination};
use crate::json::{FromJson, Payload};

/// The published Result of a terminal Process.
pub(super) fn result_of(p: &Process) -> Option<ProcessResult> {
    let finish = p.finish.as_ref()?;
    Some(ProcessResult {
        process_id: p.id.clone(),
        deployment_ref: p.deployment_ref.clone(),
        termination: finish.termination.clone(),
        output: finish.output.clone(),
    })
}

impl Owner {
    /// Terminates `pid` from its recorded intents (no Step outcome).
    pub(super) fn terminate(&mut self, pid: &ProcessId, step_outcome: Option<Option<Failure>>) {
        self.terminate_with(pid, step_outcome, None)
    }

    /// Installs the termination decided by precedence (first terminal wins), keeping any
    /// prepared batch as evidence, then propagates to descendants and re-evaluates waits.
    pub(super) fn terminate_with(
        &mut self,
        pid: &ProcessId,
        step_outcome: Option<Option<Failure>>,
        output: Option<Payload>,
    ) {
        let now = self.now;
        let Some(p) = self.processes.get_mut(pid) else { return };
        if p.is_terminal() {
            return;
        }
        let Some((cause, reason, failure)) = p.pending_control.resolve(step_outcome.as_ref().map(|o| o.as_ref())) else {
            return;
        };
        let unresolved = p.prepared.as_ref().map(|s| s.unknown_ids()).unwrap_or_default();
        let termination = Termination { cause, reason, failure, unresolved_effect_ids: unresolved };
        let status = termination.status();
        // A completed Process holds no prepared Step; an interrupted one keeps it as evidence.
        if status == Status::Completed {
            p.prepared = None;
        }
        p.finish = Some(Finish {
            finished_at: now,
            output: if status == Status::Completed { output } else { None },
            termination,
        });
        p.status = status;
        p.current_wait_id = None;
        p.pending_control = Default::default();
        self.live.remove(pid);
        self.stage_event(pid, crate::kernel::event::names::PROCESS_FINISHED, None, None);
        if let Some(result) = self.processes.get(pid).and_then(result_of) {
            self.staged.push(Publication::Finished { result });
        }
        self.propagate_intent(pid);
        self.evaluate_child_waits();
    }

    /// Records a terminal intent on `pid` (first of each kind wins) and on its descendants.
    pub(super) fn record_intent(&mut self, pid: &ProcessId, kill: bool, owner: IntentOwner, reason: &str) {
        let Some(p) = self.processes.get_mut(pid) else { return };
        if p.is_terminal() {
            return;
        }
        if kill {
            p.pending_control.kill.get_or_insert_with(|| reason.to_owned());
        } else {
            p.pending_control.cancellation.get_or_insert_with(|| (owner, reason.to_owned()));
        }
        self.cancel_jobs_of(pid);
        self.propagate_intent(pid);
    }

    /// Each non-terminal child records a parent intent: a deadline if the parent's effective
    /// status is timed_out, otherwise a cancellation naming the parent's status — recursively.
    fn propagate_intent(&mut self, pid: &ProcessId) {
        let Some(p) = self.processes.get(pid) else { return };
        let effective = if p.is_terminal() {
            p.status
        } else {
            match p.pending_control.resolve(None) {
                Some((cause, _, _)) => cause.status(),
                None => return,
            }
        };
        let children: Vec<ProcessId> = self
            .processes
            .values()
            .filter(|c| c.relation.parent_id.as_ref() == Some(pid) && !c.is_terminal())
            .map(|c| c.id.clone())
            .collect();
        let reason = format!("parent {}", effective.as_str());
        for child in children {
            let Some(c) = self.processes.get_mut(&child) else { continue };
            if effective == Status::TimedOut {
                c.pending_control.deadline.get_or_insert_with(|| (IntentOwner::Parent, reason.clone()));
            } else {
                c.pending_control.cancellation.get_or_insert_with(|| (IntentOwner::Parent, reason.clone()));
            }
            self.cancel_jobs_of(&child);
            self.propagate_intent(&child);
        }
    }

    /// Cancels the dispatch context of every job of `pid` (its outcome is still collected).
    fn cancel_jobs_of(&self, pid: &ProcessId) {
        for job in self.jobs.values().filter(|j| &j.process == pid) {
            job.cancel.cancel();
        }
    }

    /// Whether `pid` and its whole subtree are terminal with no owned work in this runtime.
    fn is_drained(&self, pid: &ProcessId) -> bool {
        let Some(p) = self.processes.get(pid) else { return false };
        if !p.is_terminal() || self.has_job(pid) {
            return false;
        }
        self.processes
            .values()
            .filter(|c| c.relation.parent_id.as_ref() == Some(pid))
            .all(|c| self.is_drained(&c.id))
    }

    /// Unresolved Effects of the subtree rooted at `pid`, sorted by (ProcessId, EffectId).
    fn subtree_unresolved(&self, pid: &ProcessId, out: &mut Vec<(ProcessId, EffectId)>) {
        if let Some(p) = self.processes.get(pid) {
            if let Some(f) = &p.finish {
                out.extend(f.termination.unresolved_effect_ids.iter().map(|e| (pid.clone(), e.clone())));
            }
        }
        let children: Vec<ProcessId> = self
            .processes
            .values()
            .filter(|c| c.relation.parent_id.as_ref() == Some(pid))
            .map(|c| c.id.clone())
            .collect();
        for c in children {
            self.subtree_unresolved(&c, out);
        }
    }

    /// Delivers the satisfaction Signal of every live child wait whose condition holds.
    /// Registrations are evaluated in WaitId order for determinism.
    pub(super) fn evaluate_child_waits(&mut self) {
        let mut registrations: Vec<(WaitId, ProcessId, ChildWaitSpec)> = Vec::new();
        for p in self.processes.values() {
            if p.is_terminal() || p.pending_control.has_terminal_intent() {
                continue;
            }
            for (wait_id, state) in p.mailbox.open_waits() {
                if state.answered_by.is_some() {
                    continue;
                }
                if let Some(crate::kernel::mailbox::WaitOpening::Children { spec, .. }) = p.mailbox.wait_opening(wait_id) {
                    if let Ok(spec) = ChildWaitSpec::from_json(spec) {
                        registrations.push((wait_id.clone(), p.id.clone(), spec));
                    }
                }
            }
        }
        registrations.sort_by(|a, b| a.0.cmp(&b.0));
        for (wait_id, parent, spec) in registrations {
            let at_boundary: Vec<&ProcessId> = spec
                .children
                .iter()
                .filter(|c| match spec.boundary {
                    Boundary::TerminalResult => self.processes.get(*c).is_some_and(Process::is_terminal),
                    Boundary::SubtreeDrained => self.is_drained(c),
                })
                .collect();
            if at_boundary.len() < spec.condition.required(spec.children.len()) {
                continue;
            }
            let mut outcomes = Vec::with_capacity(at_boundary.len());
            for c in at_boundary {
                let Some(child) = self.processes.get(c) else { continue };
                let (Some(key), Some(result)) = (child.relation.child_key.clone(), result_of(child)) else { continue };
                let mut unresolved = Vec::new();
                if spec.boundary == Boundary::SubtreeDrained {
                    self.subtree_unresolved(c, &mut unresolved);
                    unresolved.sort();
                }
                outcomes.push(ChildOutcome { key, result, boundary: spec.boundary, subtree_unresolved_effects: unresolved });
            }
            let satisfied = ChildWaitSatisfied { wait_id: wait_id.clone(), key: spec.key.clone(), boundary: spec.boundary, outcomes };
            let admission = match Payload::from_json(satisfied.payload_json()) {
                Ok(payload) => Admission {
                    id: SignalId::child_wait_satisfied(&wait_id),
                    wait_id: Some(wait_id.clone()),
                    payload,
                    status: None,
                    opens: None,
                },
                Err(e) => {
                    let f = Failure::new(crate::kernel::failure::codes::CHILD_WAIT_SATISFACTION_ENCODING_FAILED,
                        &e.to_string(),
                    );
                    self.fail_now(&parent, f);
                    continue;
                }
            };
            let Some(p) = self.processes.get_mut(&parent) else { continue };
            // A prepared batch keeps its reservations (one settlement Signal per Effect, taken
            // at preparation): the satisfaction must fit beside them, as external input must.
            let (consumption, reserved) = p
                .prepared
                .as_ref()
                .map(|s| (u64::from(s.intent.consumed()), s.effects.len() as u64))
                .unwrap_or((0, 0));
            let max_pending = u64::from(self.limits.max_pending_signals());
            let pending = p.mailbox.pending_count();
            let pending_ok = pending < max_pending
                && pending.saturating_sub(consumption).saturating_add(reserved) < max_pending;
            let charged = p.mailbox.len().saturating_add(p.allocated.signals).saturating_add(reserved);
            let quota_ok = p.budget.signals.admits(charged, 1);
            if !pending_ok || !quota_ok {
                let f = Failure::new(crate::kernel::failure::codes::LIMIT_CHILD_WAIT_SIGNAL,
                    "no capacity for the child wait satisfaction signal",
                );
                self.fail_now(&parent, f);
                continue;
            }
            let max = self.limits.max_pending_signals();
            if super::append_engine(p, &[admission], max).is_ok() && p.current_wait_id.as_ref() == Some(&wait_id) {
                p.current_wait_id = None;
                if p.status == Status::Waiting {
                    p.status = Status::Running;
                }
            }
        }
    }
}
