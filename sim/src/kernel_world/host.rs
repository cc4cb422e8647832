//! The simulated host: commands injected between owner turns (kills, cancels, wait answers
//! early, on time, premature and late, duplicate and conflicting deliveries, captures, stale
//! writers, machine crashes) and the adjudication of Unknowns from the ledger's ground truth.
//! The host knows only what a real host could: the head acknowledged to the instance it talks
//! to, and (for adjudication) what the world really did.

use super::swarm::{below, chance, weighted, HostAction, UnknownPolicy};
use super::dispatcher::effect_number;
use super::trace::short;
use super::world::{dispatcher_payload, settlement, Sent, World};
use keel::json::{ObjectBuilder, Payload};
use keel::kernel::effect::EffectPhase;
use keel::kernel::ids::{EffectId, ProcessId, SignalId, WaitId};
use keel::kernel::mailbox::WaitKind;
use keel::kernel::owner::Command;
use keel::kernel::signal::{SettlementStatus, SignalRequest};
use keel::kernel::snapshot::TreeSnapshot;
use keel::kernel::status::Status;

fn pick<T: Clone>(w: &World, items: &[T]) -> Option<T> {
    if items.is_empty() {
        None
    } else {
        Some(items[below(&w.rng, items.len() as u64) as usize].clone())
    }
}

/// Open external waits no answer has been admitted for: (process, wait, process is Waiting).
fn open_waits(head: &TreeSnapshot) -> Vec<(ProcessId, WaitId, bool)> {
    let mut out = Vec::new();
    for p in head.processes().iter().filter(|p| !p.is_terminal()) {
        for (w, state) in p.mailbox.open_waits() {
            if state.kind == WaitKind::External && state.answered_by.is_none() {
                out.push((p.id.clone(), w.clone(), p.status == Status::Waiting));
            }
        }
    }
    out
}

/// The current Unknown frontier of every Process that could accept a resolution.
fn unknown_frontiers(head: &TreeSnapshot) -> Vec<(ProcessId, EffectId)> {
    let mut out = Vec::new();
    for p in head.processes().iter().filter(|p| !p.is_terminal() && !p.pending_control.has_terminal_intent()) {
        if let Some(s) = &p.prepared {
            if let Some(i) = s.frontier() {
                if s.effects[i].phase == EffectPhase::Unknown {
                    out.push((p.id.clone(), s.effects[i].id.clone()));
                }
            }
        }
    }
    out
}

fn live_processes(head: &TreeSnapshot) -> Vec<ProcessId> {
    head.processes().iter().filter(|p| !p.is_terminal()).map(|p| p.id.clone()).collect()
}

impl World {
    fn signal_id(&mut self) -> Option<SignalId> {
        self.next_signal += 1;
        SignalId::external(&format!("signal:host:{}", self.next_signal)).ok()
    }

    fn body(&self, key: &str) -> Payload {
        Payload::from_json(ObjectBuilder::new().field(key, &self.next_signal).build()).unwrap_or_else(|_| Payload::null())
    }

    /// The instance the host talks to: usually the newest live one, sometimes an older one
    /// (a host still holding a handle of a stale writer).
    fn host_target(&self) -> Option<usize> {
        let newest = self.newest_live()?;
        let live: Vec<usize> = (0..self.instances.len()).filter(|i| !self.instances[*i].stopped).collect();
        if live.len() > 1 && chance(&self.rng, 150) {
            return pick(self, &live);
        }
        Some(newest)
    }

    fn deliver(&mut self, i: usize, process: ProcessId, request: SignalRequest, sent: Sent, remember: bool) {
        if remember {
            self.delivered.push((process.clone(), request.clone()));
        }
        self.command(i, Command::Deliver { process, requests: vec![request] }, sent);
    }

    /// One spontaneous host action; `false` if the drawn action had nothing to act on.
    pub fn host_action(&mut self) -> Result<bool, String> {
        let actions: Vec<HostAction> = self.swarm.host_weights.keys().copied().collect();
        let weights: Vec<u32> = self.swarm.host_weights.values().copied().collect();
        let Some(k) = weighted(&self.rng, &weights) else { return Ok(false) };
        let action = actions[k];
        let Some(i) = self.host_target() else { return Ok(false) };
        let Some(head) = self.head_of(i) else { return Ok(false) };
        match action {
            HostAction::Kill | HostAction::Cancel => {
                let Some(p) = pick(self, &live_processes(&head)) else { return Ok(false) };
                let kill = action == HostAction::Kill;
                self.fire(if kill { "host.kill" } else { "host.cancel" });
                let reason = if kill { "host kill" } else { "host cancel" }.to_owned();
                let command = if kill { Command::Kill { process: p, reason } } else { Command::Cancel { process: p, reason } };
                self.command(i, command, Sent::Intent);
            }
            HostAction::AnswerWait => return Ok(self.answer_wait(i, &head)),
            HostAction::PrematureAnswer => {
                // The wait the next Step would open if its first Effect is a wait: not open yet.
                let candidates: Vec<(ProcessId, WaitId)> = head
                    .processes()
                    .iter()
                    .filter(|p| !p.is_terminal())
                    .map(|p| (p.id.clone(), WaitId::of_effect(&EffectId::derive(&p.id, p.committed_steps + 1, 0))))
                    .filter(|(pid, w)| head.process(pid).is_some_and(|p| p.mailbox.wait(w).is_none()))
                    .collect();
                let Some((p, w)) = pick(self, &candidates) else { return Ok(false) };
                self.fire("host.wait_answer.premature");
                let Some(id) = self.signal_id() else { return Ok(false) };
                let Ok(request) = SignalRequest::new(id.clone(), Some(w), self.body("premature")) else { return Ok(false) };
                self.deliver(i, p.clone(), request, Sent::Premature { process: p, ids: vec![id] }, true);
            }
            HostAction::LateAnswer => {
                // External answers are never compacted away, so they name every answered
                // external wait, closed ones included (their openings may be gone).
                let mut answered = Vec::new();
                for p in head.processes() {
                    let mut waits: Vec<&WaitId> =
                        p.mailbox.records().iter().filter(|r| !r.id().is_engine_owned()).filter_map(|r| r.wait_id()).collect();
                    waits.sort();
                    answered.extend(waits.into_iter().map(|w| (p.id.clone(), w.clone())));
                }
                let Some((p, w)) = pick(self, &answered) else { return Ok(false) };
                self.fire("host.wait_answer.late");
                let Some(id) = self.signal_id() else { return Ok(false) };
                let Ok(request) = SignalRequest::new(id, Some(w), self.body("late")) else { return Ok(false) };
                self.deliver(i, p, request, Sent::NotAccepted { what: "a second answer to a wait" }, false);
            }
            HostAction::Duplicate | HostAction::Conflict => return Ok(self.redeliver(i, &head, action == HostAction::Duplicate)),
            HostAction::Unaddressed => {
                let Some(p) = pick(self, &live_processes(&head)) else { return Ok(false) };
                self.fire("host.signal.unaddressed");
                let Some(id) = self.signal_id() else { return Ok(false) };
                let Ok(request) = SignalRequest::new(id, None, self.body("unaddressed")) else { return Ok(false) };
                self.deliver(i, p, request, Sent::NotAccepted { what: "unaddressed input the schema refuses" }, false);
            }
            HostAction::StaleWriter => {
                if self.crashes >= self.swarm.max_crashes {
                    return Ok(false);
                }
                self.crashes += 1;
                self.fire("host.stale_writer");
                self.log("host restores a second writer while the first is alive".into());
                self.restore()?;
            }
            HostAction::HostCrash => {
                if self.crashes >= self.swarm.max_crashes {
                    return Ok(false);
                }
                self.crashes += 1;
                self.fire("host.crash");
                let ord = self.instances[i].ordinal;
                self.log(format!("host machine of i{ord} dies"));
                self.drop_instance(i)?;
            }
            HostAction::Capture => {
                self.fire("host.capture");
                self.command(i, Command::Capture, Sent::Capture);
            }
            HostAction::BogusResolve => {
                // A definitely settled Effect, or the id of an Effect that was never prepared.
                // (Pending or planned ones could be the Unknown frontier by the time the
                // command is applied: it may wait behind an in-flight commit.)
                let mut candidates: Vec<(ProcessId, EffectId)> = Vec::new();
                for p in head.processes() {
                    for e in p.prepared.iter().flat_map(|s| &s.effects) {
                        if e.phase.is_definite() {
                            candidates.push((p.id.clone(), e.id.clone()));
                        }
                    }
                    candidates.push((p.id.clone(), EffectId::derive(&p.id, p.committed_steps + 7, 3)));
                }
                let Some((p, e)) = pick(self, &candidates) else { return Ok(false) };
                self.fire("host.resolve.bogus");
                let s = settlement(SettlementStatus::Succeeded, ObjectBuilder::new().field("bogus", &true).build());
                self.command(i, Command::Resolve { process: p, effect: e, settlement: s }, Sent::NotResolved);
            }
            HostAction::Adjudicate => {
                let Some((p, e)) = pick(self, &unknown_frontiers(&head)) else { return Ok(false) };
                return Ok(self.adjudicate(i, p, e));
            }
        }
        Ok(true)
    }

    /// Re-delivers an admitted Signal: byte-identical (`duplicate`, a no-op) or with other
    /// content under its id (a conflict). `false` when nothing was admitted yet.
    fn redeliver(&mut self, i: usize, head: &TreeSnapshot, duplicate: bool) -> bool {
        let admitted: Vec<(ProcessId, SignalRequest)> = self
            .delivered
            .iter()
            .filter(|(p, r)| head.process(p).is_some_and(|proc| proc.mailbox.contains(r.id())))
            .cloned()
            .collect();
        let Some((p, r)) = pick(self, &admitted) else { return false };
        if duplicate {
            self.fire("host.signal.duplicate");
            self.deliver(i, p, r, Sent::NotAccepted { what: "a byte-identical re-delivery" }, false);
        } else {
            self.fire("host.signal.conflict");
            self.next_signal += 1;
            let Ok(request) = SignalRequest::new(r.id().clone(), r.wait_id().cloned(), self.body("conflict")) else {
                return false;
            };
            self.deliver(i, p, request, Sent::Conflict, false);
        }
        true
    }

    fn answer_wait(&mut self, i: usize, head: &TreeSnapshot) -> bool {
        self.answer_wait_where(i, head, |_| true)
    }

    /// Answers a lazy wait the acknowledged head shows open while its Process still runs.
    pub fn answer_ahead(&mut self, i: usize) -> bool {
        let Some(head) = self.acked_head(i) else { return false };
        self.answer_wait_where(i, &head, |waiting| !waiting)
    }

    fn answer_wait_where(&mut self, i: usize, head: &TreeSnapshot, want: impl Fn(bool) -> bool) -> bool {
        let waits: Vec<(ProcessId, WaitId, bool)> = open_waits(head)
            .into_iter()
            .filter(|(p, _, waiting)| !self.unanswerable.contains(p) && want(*waiting))
            .collect();
        let Some((p, w, waiting)) = pick(self, &waits) else { return false };
        self.fire(if waiting { "host.wait_answer.on_time" } else { "host.wait_answer.ahead" });
        let Some(id) = self.signal_id() else { return false };
        let Ok(request) = SignalRequest::new(id.clone(), Some(w), self.body("answer")) else { return false };
        self.deliver(i, p.clone(), request, Sent::Answer { process: p, ids: vec![id] }, true);
        true
    }

    /// Answers a wait that is open in `cut` while its Process still runs.
    pub fn answer_early(&mut self, i: usize, cut: &TreeSnapshot) {
        let waits: Vec<(ProcessId, WaitId, bool)> = open_waits(cut).into_iter().filter(|(_, _, waiting)| !waiting).collect();
        let Some((p, w, _)) = pick(self, &waits) else { return };
        self.fire("host.wait_answer.early");
        self.log(format!("host answers {} early", short(w.as_str())));
        let Some(id) = self.signal_id() else { return };
        let Ok(request) = SignalRequest::new(id.clone(), Some(w), self.body("early")) else { return };
        self.deliver(i, p.clone(), request, Sent::Answer { process: p, ids: vec![id] }, true);
    }

    /// Decides (once per EffectId) and applies the seed's policy for an Unknown.
    fn adjudicate(&mut self, i: usize, process: ProcessId, effect: EffectId) -> bool {
        let policy = match self.unknown_policy.get(&effect) {
            Some(p) => *p,
            None => {
                let p = match weighted(&self.rng, &self.swarm.unknown_weights) {
                    Some(1) => UnknownPolicy::Kill,
                    Some(2) => UnknownPolicy::Leave,
                    _ => UnknownPolicy::Truth,
                };
                self.unknown_policy.insert(effect.clone(), p);
                p
            }
        };
        match policy {
            UnknownPolicy::Truth => {
                // A writer that still holds the dispatch unstarted could run it yet: the world
                // cannot claim either way until that writer is gone or has run it.
                let undecided = self.instances.iter().any(|inst| inst.queue.iter().any(|q| q.effect == effect && !q.started));
                if undecided {
                    return false;
                }
                let s = match self.ledger.truth(&effect).cloned() {
                    Some(t) => {
                        self.fire("unknown.resolve_ran");
                        t
                    }
                    None => {
                        self.fire("unknown.resolve_never_ran");
                        let number = self.head_of(i).and_then(|h| dispatcher_payload(&h, &process, &effect)).and_then(|p| effect_number(&p));
                        settlement(SettlementStatus::Failed, ObjectBuilder::new().opt_field("effect", number.as_ref()).field("never_ran", &true).build())
                    }
                };
                self.oracle.submitted(&effect, &s);
                self.log(format!("host resolves {} from the ledger", short(effect.as_str())));
                self.command(i, Command::Resolve { process: process.clone(), effect: effect.clone(), settlement: s }, Sent::Resolve { process, effect });
                true
            }
            UnknownPolicy::Kill => {
                self.fire("unknown.kill");
                self.command(i, Command::Kill { process, reason: "unknown effect".into() }, Sent::Intent);
                true
            }
            UnknownPolicy::Leave => {
                if self.left.insert(effect) {
                    self.fire("unknown.leave");
                }
                false
            }
        }
    }

    /// At quiescence: adjudicate Unknowns and answer open waits so the run can finish.
    pub fn finishing_action(&mut self) -> Result<bool, String> {
        let Some(i) = self.newest_live() else { return Ok(false) };
        let Some(head) = self.head_of(i) else { return Ok(false) };
        for (p, e) in unknown_frontiers(&head) {
            if self.adjudicate(i, p, e) {
                return Ok(true);
            }
        }
        if self.answer_wait(i, &head) {
            return Ok(true);
        }
        // A Process that can never take its answer is killed (once; a refusal ends it too).
        let give_up: Vec<ProcessId> = self
            .unanswerable
            .iter()
            .filter(|p| head.process(p).is_some_and(|proc| !proc.is_terminal() && !proc.pending_control.has_terminal_intent()))
            .cloned()
            .collect();
        if let Some(p) = give_up.into_iter().next() {
            self.unanswerable.remove(&p);
            self.fire("host.kill");
            self.command(i, Command::Kill { process: p, reason: "answer cannot be admitted".into() }, Sent::Intent);
            return Ok(true);
        }
        // Once at the end, a seed that re-delivers repeats an admitted Signal: answers are
        // admitted late in a run, so mid-run re-deliveries rarely find one.
        if !self.closing_redelivery {
            self.closing_redelivery = true;
            let kinds: Vec<bool> = [(HostAction::Duplicate, true), (HostAction::Conflict, false)]
                .into_iter()
                .filter(|(a, _)| self.swarm.host_weights.contains_key(a))
                .map(|(_, duplicate)| duplicate)
                .collect();
            if let Some(duplicate) = pick(self, &kinds) {
                return Ok(self.redeliver(i, &head, duplicate));
            }
        }
        Ok(false)
    }
}
