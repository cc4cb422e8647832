//! The world as executor: it performs each Dispatch action itself — the physical call goes
//! into the ledger with the world's real answer — and decides what the kernel hears back
//! (the answer, or an error that hides it).

use super::dispatcher::{effect_number, replay_of};
use super::ledger::PhysicalCall;
use super::swarm::{chance, weighted};
use super::trace::short;
use super::world::{process_payload, settlement, DriverFlaw, Queued, World};
use keel::env::CancelToken;
use keel::json::{ObjectBuilder, Payload};
use keel::kernel::dispatcher::{DispatchError, EffectRequest};
use keel::kernel::owner::CommitRequest;
use keel::kernel::effect::{EffectPhase, Settlement};
use keel::kernel::ids::{EffectId, ProcessId};
use keel::kernel::signal::SettlementStatus;

impl World {
    pub(super) fn on_dispatch_request(&mut self, i: usize, request: EffectRequest, cancel: CancelToken) {
        let ord = self.instances[i].ordinal;
        let pending = self.acked_head(i).is_some_and(|h| {
            h.process(&request.process_id)
                .and_then(|p| p.prepared.as_ref())
                .and_then(|s| s.effects.iter().find(|e| e.id == request.effect_id))
                .is_some_and(|e| e.phase == EffectPhase::Pending)
        });
        self.oracle.check(pending, "a.pending_before_dispatch", || {
            format!("instance {ord} was asked to dispatch {} which is not pending in its acknowledged head", request.effect_id)
        });
        let started = self.instances[i].pre_dispatched.remove(&request.effect_id);
        self.log(format!("i{ord} dispatch {}", short(request.effect_id.as_str())));
        self.instances[i].queue.push(Queued {
            effect: request.effect_id,
            process: request.process_id,
            payload: request.payload,
            cancel,
            started,
        });
    }

    /// DriverFlaw::DispatchBeforePending: performs the Effect of a pending boundary before
    /// the boundary is sent.
    pub(super) fn pre_dispatch(&mut self, i: usize, request: &CommitRequest) {
        let CommitRequest::Effect(b) = request else { return };
        // The boundary's Process changed (its Effect became pending), so the delta carries its
        // record: decode that one record.
        let record = b.cut.entries().iter().find(|e| e.key() == b.process_id.as_str()).and_then(|e| e.bytes());
        let Some(record) = record else { return };
        let limits = keel::json::ParseLimits { max_bytes: usize::MAX, ..Default::default() };
        let Ok(value) = keel::json::parse_with(record, &limits) else { return };
        let Ok(process) = <keel::kernel::process::Process as keel::json::FromJson>::from_json(&value) else { return };
        let Some(payload) = process_payload(&process, &b.effect_id) else { return };
        self.physical(Some(i), &b.effect_id, &b.process_id, &payload, false);
        self.instances[i].pre_dispatched.insert(b.effect_id.clone());
    }

    /// The world physically performs a dispatch (ground truth).
    pub(super) fn physical(&mut self, i: Option<usize>, effect: &EffectId, process: &ProcessId, payload: &Payload, restored: bool) {
        let policy = replay_of(payload);
        let (ordinal, acknowledged) = match i {
            Some(i) => {
                let inst = &self.instances[i];
                (inst.ordinal, inst.acked_pending.contains(effect) || inst.restored_pending.contains(effect))
            }
            None => (self.instances_created + 1, restored),
        };
        let answer = match self.ledger.truth(effect) {
            Some(a) => a.clone(),
            None => self.draw_answer(effect_number(payload)),
        };
        let call = PhysicalCall { effect: effect.clone(), process: process.clone(), instance: ordinal, time: self.time, policy };
        let count = self.ledger.record(call, answer);
        self.log(format!("i{ordinal} physical {} #{count}", short(effect.as_str())));
        if count > 1 {
            self.fire("seen.redispatch");
        }
        self.oracle.on_physical_dispatch(effect, acknowledged, count, policy);
    }

    /// The world's real answer; it names the Effect it answers (`effect`), so the strategy
    /// can tell whether settlements reach it in declaration order.
    pub(super) fn draw_answer(&mut self, number: Option<u64>) -> Settlement {
        let n = self.ledger.total() + 1;
        let (status, key) = if chance(&self.rng, self.swarm.definite_failure) {
            (SettlementStatus::Failed, "refused")
        } else {
            (SettlementStatus::Succeeded, "answer")
        };
        settlement(status, ObjectBuilder::new().opt_field("effect", number.as_ref()).field(key, &n).build())
    }

    /// What the world reports for a completed dispatch (its real answer may be hidden).
    pub(super) fn report(&mut self, q: &Queued) -> Result<Settlement, DispatchError> {
        let truth = self.ledger.truth(&q.effect).cloned();
        if q.cancel.is_cancelled() && chance(&self.rng, self.swarm.honor_cancel) {
            self.fire("dispatch.canceled");
            return Err(DispatchError::Canceled);
        }
        let s = &self.swarm;
        let ok = 1000u32.saturating_sub(s.dispatch_error + s.dispatch_panic + s.dispatch_deadline + s.dispatch_invalid);
        let weights = [ok, s.dispatch_error, s.dispatch_panic, s.dispatch_deadline, s.dispatch_invalid];
        match weighted(&self.rng, &weights) {
            Some(1) => {
                self.fire("dispatch.error");
                Err(DispatchError::Failed("connection reset".into()))
            }
            Some(2) => {
                self.fire("dispatch.panic");
                Err(DispatchError::Panicked("panicked: tool bug".into()))
            }
            Some(3) => {
                self.fire("dispatch.deadline");
                Err(DispatchError::DeadlineExceeded)
            }
            Some(4) => {
                self.fire("dispatch.invalid_settlement");
                Err(DispatchError::InvalidSettlement("payload is not normalized".into()))
            }
            _ => match truth {
                Some(t) if self.flaw == DriverFlaw::MisreportAnswer => {
                    Ok(settlement(t.status, ObjectBuilder::new().field("forged", &self.time).build()))
                }
                Some(t) => {
                    if t.status == SettlementStatus::Failed {
                        self.fire("dispatch.definite_failure");
                    }
                    Ok(t)
                }
                None => Err(DispatchError::Failed("the world has no record of this call".into())),
            },
        }
    }
}
