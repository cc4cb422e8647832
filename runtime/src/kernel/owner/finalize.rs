//! Adopting a fully settled batch atomically.

use super::{AfterCommit, Owner};
use crate::kernel::effect::{Effect, EffectPhase, FrameworkEffect};
use crate::kernel::engine_signal::{ChildWaitOpened, WaitOpened};
use crate::kernel::failure::Failure;
use crate::kernel::ids::{ProcessId, SignalId, WaitId};
use crate::kernel::mailbox::{Admission, WaitOpening};
use crate::kernel::status::Status;
use crate::kernel::transition::Transition;
use crate::json::{Payload, ToJson};

impl Owner {
    pub(super) fn finalize(&mut self, pid: &ProcessId) {
        let Some(p) = self.processes.get(pid) else { return };
        let Some(prepared) = p.prepared.clone() else { return };
        // Work on a candidate copy: on any failure nothing is adopted.
        let mut candidate = p.clone_without_prepared();
        let consumed = usize::try_from(prepared.intent.consumed()).unwrap_or(usize::MAX);
        let delivered = super::compact::delivered_children(
            candidate.mailbox.pending_records().get(..consumed).unwrap_or(&[]),
        );
        if candidate.mailbox.consume(u64::from(prepared.intent.consumed())).is_err() {
            return self.finalize_failed(pid, crate::kernel::failure::codes::FINALIZE_INVALID, "consumption exceeds the pending window");
        }
        let mut batch = Vec::with_capacity(prepared.effects.len());
        for e in &prepared.effects {
            let EffectPhase::Settled(settlement) = &e.phase else {
                return self.stop(format!("finalizing {pid} with an unsettled effect"), None);
            };
            let record = match &e.effect {
                Effect::Dispatcher(_) => Admission {
                    id: SignalId::settlement(&e.id),
                    wait_id: None,
                    payload: settlement.payload.clone(),
                    status: Some(settlement.status),
                    opens: None,
                },
                Effect::Framework(FrameworkEffect::StartChild(_)) => Admission {
                    id: SignalId::settlement(&e.id),
                    wait_id: None,
                    payload: settlement.payload.clone(),
                    status: None,
                    opens: None,
                },
                Effect::Framework(FrameworkEffect::Wait { key, payload }) => {
                    let wait_id = WaitId::of_effect(&e.id);
                    let Ok(body) = Payload::from_json(WaitOpened::payload_json(key, payload.as_ref())) else {
                        return self.finalize_failed(pid, crate::kernel::failure::codes::LIMIT_SNAPSHOT, "wait opening payload too large");
                    };
                    Admission {
                        id: SignalId::wait_opening(&wait_id),
                        wait_id: Some(wait_id),
                        payload: body,
                        status: None,
                        opens: Some(WaitOpening::External { key: key.clone() }),
                    }
                }
                Effect::Framework(FrameworkEffect::WaitChildren(spec)) => {
                    let wait_id = WaitId::of_effect(&e.id);
                    let Ok(body) = Payload::from_json(ChildWaitOpened::payload_json(spec)) else {
                        return self.finalize_failed(pid, crate::kernel::failure::codes::LIMIT_SNAPSHOT, "child wait opening too large");
                    };
                    Admission {
                        id: SignalId::wait_opening(&wait_id),
                        wait_id: Some(wait_id),
                        payload: body,
                        status: None,
                        opens: Some(WaitOpening::Children { key: spec.key.clone(), spec: spec.to_json() }),
                    }
                }
            };
            batch.push(record);
        }
        if !batch.is_empty() {
            if let Err(e) = super::append_engine(&mut candidate, &batch, self.limits.max_pending_signals()) {
                return self.finalize_failed(pid, crate::kernel::failure::codes::FINALIZE_INVALID, &e.to_string());
            }
        }
        // Apply the Transition.
        let mut terminal_outcome: Option<Option<Failure>> = None;
        let mut output = None;
        match &prepared.intent {
            Transition::Continue { .. } | Transition::Checkpoint { .. } => {}
            Transition::Wait { wait_id, .. } => match candidate.mailbox.wait(wait_id) {
                Some(w) if !w.closed => {
                    if w.answered_by.is_none() {
                        candidate.status = Status::Waiting;
                        candidate.current_wait_id = Some(wait_id.clone());
                    }
                }
                _ => return self.finalize_failed(pid, crate::kernel::failure::codes::FINALIZE_INVALID, "wait transition names no open wait"),
            },
            Transition::Pause { .. } => {
                return self.finalize_failed(pid, crate::kernel::failure::codes::FINALIZE_INVALID, "pause is not supported")
            }
            Transition::Complete { output: o, .. } => {
                terminal_outcome = Some(None);
                output = Some(o.clone());
            }
            Transition::Fail { failure, .. } => terminal_outcome = Some(Some(failure.clone())),
        }
        // Consumed Engine records no open wait needs leave the mailbox (compaction).
        self.compact_mailbox(&mut candidate);
        // Adopt: committed state, cursor and step counter advance together.
        // `prepared` is this call's own copy: its candidate state moves, nothing is cloned.
        let checkpoint = matches!(prepared.intent, Transition::Checkpoint { .. });
        let sequence = prepared.sequence;
        candidate.committed_state = prepared.candidate_state;
        candidate.committed_steps = sequence;
        self.processes.insert(pid.clone(), candidate);
        if let Some(live) = self.live.get_mut(pid) {
            live.execution = live.candidate.take();
        }
        self.stage_event(pid, crate::kernel::event::names::STEP_COMMITTED, Some(sequence), None);
        // The children whose Results this Step consumed leave the cut (compaction).
        self.retire_delivered(pid, delivered);
        // A freshly registered child wait may already be satisfied.
        self.evaluate_child_waits();
        if let Some(step_failure) = terminal_outcome {
            self.terminate_with(pid, Some(step_failure), output);
        } else if checkpoint {
            let kind = self.cut_class();
            self.commit_checkpoint(kind, AfterCommit::Nothing);
        }
    }

    /// Finalization failed: roll back (nothing was adopted) and fail the Process.
    fn finalize_failed(&mut self, pid: &ProcessId, code: crate::kernel::failure::FailureCode, message: &str) {
        self.rebuild_live(pid);
        let failure = Failure::new(code, message);
        // The batch stays as evidence; terminate without adopting the candidate.
        self.fail_now(pid, failure);
    }
}
