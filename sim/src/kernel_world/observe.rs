//! What the owner tells the world — publications and command replies — checked against the
//! head last acknowledged to that owner (published ⊆ acknowledged, durable acks, admission
//! answers).

use super::trace::{publication_name, reply_name, short};
use super::world::{Sent, World};
use keel::kernel::event::EventPhase;
use keel::kernel::mailbox::AdmissionError;
use keel::kernel::owner::{CommandError, CommandId, Publication, Reply};

impl World {
    pub(super) fn on_publish(&mut self, i: usize, p: Publication) {
        let ord = self.instances[i].ordinal;
        if self.instances[i].stopped {
            self.oracle.violate("e.published_acknowledged", format!("instance {ord} published after it stopped: {}", publication_name(&p)));
            return;
        }
        let head = self.acked_head(i);
        match p {
            Publication::Started { process, restored } => {
                self.log(format!("i{ord} published started {} restored={restored}", short(process.id.as_str())));
                let known = head.as_ref().is_some_and(|h| h.process(&process.id).is_some());
                self.oracle.check(known, "e.published_acknowledged", || {
                    format!("instance {ord} published {} which is not in its acknowledged head", process.id)
                });
                self.instances[i].published.insert(process.id);
            }
            Publication::Finished { result } => {
                self.log(format!("i{ord} published finished {} {}", short(result.process_id.as_str()), result.status().as_str()));
                let matches = head.as_ref().and_then(|h| h.process(&result.process_id)).is_some_and(|p| {
                    p.finish.as_ref().is_some_and(|f| f.termination == result.termination && f.output == result.output)
                });
                self.oracle.check(matches, "e.published_acknowledged", || {
                    format!("instance {ord} published a result for {} that its acknowledged head does not hold", result.process_id)
                });
            }
            Publication::Stopped { error } => {
                self.log(format!("i{ord} published stopped"));
                let own = &error.incarnation == self.instances[i].owner.incarnation();
                self.oracle.check(own, "e.published_acknowledged", || "a RuntimeError names another incarnation".into());
                let acked = self.instances[i].acked;
                self.oracle.check(error.head_digest == acked, "runtime_error", || {
                    format!("instance {ord}'s RuntimeError names head {:?}, its last acknowledged head is {acked:?}", error.head_digest)
                });
                self.instances[i].stopped = true;
                self.instances[i].stop_unresolved = Some(error.unresolved_effect_ids);
            }
            Publication::Event(e) => {
                if e.phase == EventPhase::Committed {
                    let known = head.as_ref().is_some_and(|h| h.process(&e.process_id).is_some());
                    self.oracle.check(known, "e.published_acknowledged", || {
                        format!("committed event {} for {} is not backed by an acknowledged head", e.name, e.process_id)
                    });
                    if e.name == keel::kernel::event::names::PROCESS_FINISHED {
                        let terminal = head.as_ref().and_then(|h| h.process(&e.process_id)).is_some_and(|p| p.is_terminal());
                        self.oracle.check(terminal, "e.published_acknowledged", || {
                            format!("process.finished for {} before its terminal cut was acknowledged", e.process_id)
                        });
                    }
                }
            }
        }
    }

    pub(super) fn on_reply(&mut self, i: usize, id: CommandId, result: Result<Reply, CommandError>) {
        let ord = self.instances[i].ordinal;
        let Some(sent) = self.instances[i].commands.remove(&id) else {
            self.oracle.violate("kernel_contract", format!("instance {ord} replied to unknown command {id}"));
            return;
        };
        self.log(format!("i{ord} reply {id} {}", reply_name(&result)));
        let head = self.acked_head(i);
        let accepted = matches!(result, Ok(Reply::Delivered { accepted: true }));
        match sent {
            Sent::Answer { process, ids } | Sent::Premature { process, ids } => {
                if accepted {
                    let durable = head.as_ref().and_then(|h| h.process(&process)).is_some_and(|p| ids.iter().all(|s| p.mailbox.contains(s)));
                    self.oracle.check(durable, "durable_ack", || format!("accepted signal for {process} is not in the acknowledged head"));
                }
                self.oracle.check(!matches!(result, Ok(Reply::Delivered { accepted: false })), "signal_admission", || {
                    "a fresh SignalId was reported as a duplicate".into()
                });
                if let Err(CommandError::Signal(AdmissionError::LimitExceeded { .. })) = &result {
                    // The Process can never take this answer: the host gives up on it.
                    self.unanswerable.insert(process);
                }
            }
            Sent::NotAccepted { what } => {
                self.oracle.check(!accepted, "signal_admission", || format!("{what} was accepted"));
            }
            Sent::Conflict => {
                self.oracle.check(result.is_err(), "signal_admission", || "conflicting content under an admitted SignalId was not refused".into());
            }
            Sent::Resolve { process, effect } => {
                if matches!(result, Ok(Reply::Resolved)) {
                    let settled = head.as_ref().and_then(|h| h.process(&process)).is_some_and(|p| {
                        p.prepared.as_ref().and_then(|s| s.effects.iter().find(|e| e.id == effect)).is_none_or(|e| e.phase.is_definite())
                    });
                    self.oracle.check(settled, "durable_ack", || format!("resolution of {effect} acknowledged but not in the head"));
                }
            }
            Sent::NotResolved => {
                self.oracle.check(result.is_err(), "kernel_contract", || "a resolution of a non-Unknown Effect was accepted".into());
            }
            Sent::Capture => {
                if let Ok(Reply::Captured(snap)) = &result {
                    let acked = self.instances[i].acked;
                    self.oracle.check(acked == Some(snap.digest()), "durable_ack", || "a capture returned a cut that is not the acknowledged head".into());
                }
            }
            Sent::Intent => {}
        }
    }
}
