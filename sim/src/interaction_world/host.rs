//! The simulated host: performs the scenario's actions at their triggers (steers, duplicate
//! and conflicting steers, stale answers, kills, cancellations), answers tool input waits in
//! the chosen order, settles Unknown Effects per the policy from ground truth, and re-delivers
//! every signal whose delivery was not acknowledged before a crash.

use super::context::{Context, HookEvent};
use super::delegate::Deployments;
use super::ledger::{Caller, Ended};
use super::recording::{short, unknown_span, wait_span};
use super::spec::{Action, AnswerOrder, Trigger, UnknownPolicy};
use crate::timeline::{MarkKind, SpanKind, HOST_LANE};
use crate::world::Violation;
use keel::chat::{Message, ToolResult};
use keel::env::CancelToken;
use keel::interaction::pending_inputs::pending_tool_inputs;
use keel::interaction::protocol::{ModelCallEffect, ModelResult, SettledToolResult, ToolCallEffect, ToolCallSettlement};
use keel::interaction::signals::steer_signal;
use keel::interaction::wire::Wire;
use keel::json::Json;
use keel::kernel::dispatcher::{DispatchContext, EffectRequest};
use keel::kernel::effect::{Effect, EffectPhase, Settlement};
use keel::kernel::engine::{Engine, EngineError, ProcessHandle};
use keel::kernel::ids::{derive, EffectId, ProcessId, SignalId, WaitId};
use keel::kernel::signal::SignalRequest;
use keel::kernel::snapshot::TreeSnapshot;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// What a host command ran into.
pub enum HostError {
    /// The writer stopped: the driver restores.
    Stopped,
}

/// A delivery the host must repeat after a restore (same signal id).
#[derive(Clone)]
struct Delivery {
    process: ProcessId,
    request: SignalRequest,
    what: String,
}

pub struct Host {
    cx: Arc<Context>,
    performers: BTreeMap<String, Arc<super::recording::Recording>>,
    /// Steer ids in acceptance order (accepted = a new Signal committed).
    pub accepted_steers: Vec<SignalId>,
    steers: BTreeMap<String, SignalRequest>,
    unacked: Vec<Delivery>,
    answered: BTreeSet<WaitId>,
    /// Answered waits, oldest first (stale answers use them).
    answered_order: Vec<(ProcessId, WaitId)>,
    parked_seen: u32,
    decided: BTreeSet<EffectId>,
    /// Unknowns left unknown by policy (checked by the oracle).
    pub left: BTreeSet<EffectId>,
    pub terminated_by_host: bool,
    /// Kill (`true`) / cancel intents issued so far: re-issued after a restore, since the
    /// commit that recorded them may be lost.
    intents: Vec<bool>,
    pub checks: u64,
    pub violations: Vec<Violation>,
}

fn stopped_or(e: &EngineError) -> bool {
    matches!(e, EngineError::Stopped(_) | EngineError::Command(keel::kernel::owner::CommandError::Stopped(_)))
}

impl Host {
    pub fn new(cx: Arc<Context>, deployments: &Deployments) -> Host {
        Host {
            cx,
            performers: deployments.performers.clone(),
            accepted_steers: Vec::new(),
            steers: BTreeMap::new(),
            unacked: Vec::new(),
            answered: BTreeSet::new(),
            answered_order: Vec::new(),
            parked_seen: 0,
            decided: BTreeSet::new(),
            left: BTreeSet::new(),
            terminated_by_host: false,
            intents: Vec::new(),
            checks: 0,
            violations: Vec::new(),
        }
    }

    fn expect(&mut self, ok: bool, invariant: &str, detail: impl FnOnce() -> String) {
        self.checks += 1;
        if !ok {
            let v = Violation::new(invariant, detail());
            self.cx.timeline.mark(HOST_LANE, MarkKind::Violation, format!("{}: {}", v.invariant, v.detail));
            self.violations.push(v);
        }
    }

    /// Delivers one request; `Ok(Some(accepted))`, `Ok(None)` when refused, `Err` when the
    /// writer stopped (the delivery is kept for re-delivery).
    async fn deliver(&mut self, engine: &Engine, d: Delivery) -> Result<Option<bool>, HostError> {
        let Some(handle) = engine.lookup(&d.process) else {
            self.cx.trace(format!("host deliver {} to a process this engine does not know", d.what));
            return Ok(None);
        };
        match handle.deliver_signals(vec![d.request.clone()]).await {
            Ok(accepted) => {
                self.cx.trace(format!("host deliver {} accepted={accepted}", d.what));
                let lane = d.process.as_str();
                self.cx.timeline.mark(lane, MarkKind::Deliver, format!("host delivers {} (accepted={accepted})", d.what));
                if d.what.starts_with("answer") {
                    self.cx.timeline.end(&wait_span(lane), "answered", format!("{} delivered", d.what));
                }
                if d.what.starts_with("steer") && accepted {
                    self.cx.timeline.begin(lane, &format!("steer:{}", d.request.id().as_str()), SpanKind::Steer, d.what.clone());
                }
                Ok(Some(accepted))
            }
            Err(e) if stopped_or(&e) || self.cx.root().and_then(|r| engine.runtime_error(&r)).is_some() => {
                self.cx.trace(format!("host deliver {} lost: writer stopped", d.what));
                self.unacked.push(d);
                Err(HostError::Stopped)
            }
            Err(e) => {
                self.cx.trace(format!("host deliver {} refused: {e}", d.what));
                Ok(None)
            }
        }
    }

    /// After a writer stopped: Unknowns it was deciding are decided again on the restored
    /// head (a kill may be lost; a resolution the store holds is no longer Unknown there).
    pub fn after_stop(&mut self) {
        let left = self.left.clone();
        self.decided.retain(|e| left.contains(e));
    }

    /// After a restore: every delivery not acknowledged before the crash, again, and every
    /// termination intent.
    pub async fn redeliver(&mut self, engine: &Engine, handle: &ProcessHandle) -> Result<(), HostError> {
        for kill in self.intents.clone() {
            self.cx.fired("host.redeliver");
            let result = if kill { handle.kill("host kill").await } else { handle.request_cancellation("host cancel").await };
            if let Err(e) = result {
                if stopped_or(&e) {
                    return Err(HostError::Stopped);
                }
            }
        }
        for d in std::mem::take(&mut self.unacked) {
            self.cx.fired("host.redeliver");
            let steer = self.steers.values().any(|r| r == &d.request);
            let id = d.request.id().clone();
            // Deduplicated (`false`) means the lost delivery was committed after all.
            if self.deliver(engine, d).await?.is_some() && steer && !self.accepted_steers.contains(&id) {
                self.accepted_steers.push(id);
            }
        }
        Ok(())
    }

    fn steer_request(&self, id: &str, text: &str) -> Option<SignalRequest> {
        let sid = SignalId::external(&format!("steer:{id}")).ok()?;
        steer_signal(sid, vec![Message::user(text)]).ok()
    }

    /// Performs every action waiting on `trigger`.
    pub async fn act(&mut self, engine: &Engine, handle: &ProcessHandle, trigger: &Trigger) -> Result<(), HostError> {
        let actions: Vec<Action> = self.cx.spec.host.iter().filter(|a| &a.trigger == trigger).map(|a| a.action.clone()).collect();
        for action in actions {
            self.cx.trace(format!("host at {} does {action:?}", super::context::trigger_key(trigger)));
            match action {
                Action::Steer { id, text } => {
                    self.cx.fired("host.steer");
                    let Some(request) = self.steer_request(&id, &text) else { continue };
                    self.steers.insert(id.clone(), request.clone());
                    let d = Delivery { process: handle.id().clone(), request: request.clone(), what: format!("steer {id}") };
                    if self.deliver(engine, d).await? == Some(true) {
                        self.accepted_steers.push(request.id().clone());
                    }
                }
                Action::DuplicateSteer { id } => {
                    self.cx.fired("host.steer.duplicate");
                    let Some(request) = self.steers.get(&id).cloned() else { continue };
                    let d = Delivery { process: handle.id().clone(), request, what: format!("duplicate steer {id}") };
                    let got = self.deliver(engine, d).await?;
                    // A live tree dedupes (no new signal); a finished one refuses.
                    self.expect(got != Some(true), "signal_dedupe", || format!("duplicate steer {id} was admitted again"));
                }
                Action::ConflictSteer { id, text } => {
                    self.cx.fired("host.steer.conflict");
                    if !self.steers.contains_key(&id) {
                        continue;
                    }
                    let Some(request) = self.steer_request(&id, &text) else { continue };
                    let d = Delivery { process: handle.id().clone(), request, what: format!("conflicting steer {id}") };
                    let got = self.deliver(engine, d).await?;
                    self.expect(got.is_none(), "signal_conflict_refused", || format!("conflicting steer {id} was not refused: {got:?}"));
                }
                Action::StaleAnswer => {
                    let head = engine.inspect_head(handle.id());
                    let stale = self.answered_order.iter().find(|(p, w)| {
                        head.as_ref().is_some_and(|h| h.process(p).is_none_or(|p| p.current_wait_id.as_ref() != Some(w)))
                    });
                    let Some((process, wait)) = stale.cloned() else { continue };
                    self.cx.fired("host.input.stale");
                    let Ok(sid) = SignalId::external(&derive("stale:", "stale", &[wait.as_str()])) else { continue };
                    let Ok(request) = keel::interaction::signals::tool_input_response_signal(sid, wait.clone(), &Json::str("late")) else {
                        continue;
                    };
                    let d = Delivery { process, request, what: format!("stale answer to {}", wait.as_str()) };
                    let got = self.deliver(engine, d).await?;
                    self.expect(got.is_none(), "stale_answer_refused", || format!("an answer to the old wait {} was admitted", wait.as_str()));
                }
                Action::Kill => {
                    self.cx.fired("host.kill");
                    self.terminated_by_host = true;
                    self.intents.push(true);
                    if let Err(e) = handle.kill("host kill").await {
                        if stopped_or(&e) {
                            return Err(HostError::Stopped);
                        }
                    }
                }
                Action::Cancel => {
                    self.cx.fired("host.cancel");
                    self.terminated_by_host = true;
                    self.intents.push(false);
                    if let Err(e) = handle.request_cancellation("host cancel").await {
                        if stopped_or(&e) {
                            return Err(HostError::Stopped);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Handles the triggered calls waiting on the host, then releases them.
    pub async fn on_hooks(&mut self, engine: &Engine, handle: &ProcessHandle, events: Vec<HookEvent>) -> Result<(), HostError> {
        let mut result = Ok(());
        for HookEvent { trigger, release } in events {
            if result.is_ok() {
                result = self.act(engine, handle, &trigger).await;
            }
            let _ = release.send(());
        }
        result
    }

    /// Answers the tool input waits of a parked head (and fires `InputWait` actions first).
    pub async fn answer_inputs(&mut self, engine: &Engine, handle: &ProcessHandle, head: &TreeSnapshot) -> Result<bool, HostError> {
        let all_parked = head.processes().iter().filter(|p| !p.is_terminal()).all(|p| p.is_parked());
        if !all_parked || self.cx.ledger.in_flight() > 0 {
            return Ok(false);
        }
        let pending = match pending_tool_inputs(head) {
            Ok(p) => p,
            Err(e) => {
                self.expect(false, "pending_inputs_readable", || format!("pending_tool_inputs failed on an acknowledged head: {e}"));
                return Ok(false);
            }
        };
        let mut fresh: Vec<_> = pending.into_iter().filter(|p| !self.answered.contains(p.wait_id())).collect();
        if fresh.is_empty() {
            return Ok(false);
        }
        self.parked_seen += 1;
        let trigger = Trigger::InputWait(self.parked_seen);
        if self.cx.claim_for_host(&trigger) {
            self.act(engine, handle, &trigger).await?;
        }
        if self.cx.spec.answer_order == AnswerOrder::Reverse {
            fresh.reverse();
            if fresh.len() > 1 {
                self.cx.fired("host.input.reverse");
            }
        }
        for p in fresh {
            let prompt = p.prompt().value().as_str().unwrap_or_default().to_owned();
            let answer = if p.is_budget_question() {
                self.budget_answer(head, p.process_id())
            } else {
                Json::str(format!("answer to {prompt}"))
            };
            let Ok(sid) = SignalId::external(&derive("answer:", "answer", &[p.wait_id().as_str()])) else { continue };
            let request = match p.response_signal(sid, &answer) {
                Ok(r) => r,
                Err(e) => {
                    self.expect(false, "input_answer_valid", || format!("the host's answer was refused locally: {e}"));
                    continue;
                }
            };
            self.cx.fired("host.input.answer");
            let d = Delivery { process: p.process_id().clone(), request, what: format!("answer `{prompt}`") };
            if self.deliver(engine, d).await?.is_some() {
                self.answered.insert(p.wait_id().clone());
                self.answered_order.push((p.process_id().clone(), p.wait_id().clone()));
            }
        }
        Ok(true)
    }

    /// The answer to the budget question `process` asks in `head`: the spec's answer with the
    /// question's number (read from the durable state, so a restored host answers alike), a
    /// decline past the list.
    fn budget_answer(&self, head: &TreeSnapshot, process: &ProcessId) -> Json {
        use keel::interaction::budget_question::BudgetAnswer;
        let number = head
            .process(process)
            .and_then(|p| p.committed_state.payload.value().get("budget_questions").and_then(Json::as_u64))
            .unwrap_or(0);
        let index = usize::try_from(number).unwrap_or(usize::MAX).saturating_sub(1);
        self.cx.spec.budget_answers.get(index).copied().unwrap_or(BudgetAnswer::Decline).to_json()
    }

    /// Settles every new Unknown dispatcher Effect of `head` per the policy.
    pub async fn settle_unknowns(&mut self, engine: &Engine, handle: &ProcessHandle, head: &TreeSnapshot) -> Result<bool, HostError> {
        let mut acted = false;
        let mut unknowns = Vec::new();
        for p in head.processes() {
            let Some(prepared) = &p.prepared else { continue };
            for (index, e) in prepared.effects.iter().enumerate() {
                if e.phase == EffectPhase::Unknown && !self.decided.contains(&e.id) {
                    if let Effect::Dispatcher(payload) = &e.effect {
                        unknowns.push((p.clone(), prepared.sequence, index, e.id.clone(), payload.clone()));
                    }
                }
            }
        }
        for (process, step_sequence, index, effect, payload) in unknowns {
            if self.cx.ledger.in_flight() > 0 && self.cx.ledger.dispatches(&effect).iter().any(|d| d.ended.is_none()) {
                continue;
            }
            self.decided.insert(effect.clone());
            acted = true;
            let policy = self.cx.spec.unknown_policy;
            self.cx.trace(format!("host unknown {} policy {}", short(&effect), policy.as_str()));
            // An Unknown found on a restored head (a crash while it was pending) opens here.
            self.cx.timeline.begin(process.id.as_str(), &unknown_span(&effect), SpanKind::Unknown, format!("{} Unknown", short(&effect)));
            let settlement = match policy {
                UnknownPolicy::Leave => {
                    self.cx.fired("unknown.leave");
                    self.left.insert(effect);
                    continue;
                }
                UnknownPolicy::Kill => {
                    self.cx.fired("unknown.kill");
                    self.terminated_by_host = true;
                    self.intents.push(true);
                    if let Err(e) = handle.kill("unknown effect").await {
                        if stopped_or(&e) {
                            return Err(HostError::Stopped);
                        }
                    }
                    continue;
                }
                UnknownPolicy::Fail => {
                    self.cx.fired("unknown.fail");
                    failed_settlement(&payload)
                }
                UnknownPolicy::Truth => {
                    let request = EffectRequest {
                        incarnation: head.incarnation.clone(),
                        deployment_ref: process.deployment_ref.clone(),
                        process_id: process.id.clone(),
                        relation: process.relation.clone(),
                        step_sequence,
                        batch_index: u32::try_from(index).unwrap_or(u32::MAX),
                        effect_id: effect.clone(),
                        attempt_id: None,
                        payload: payload.clone(),
                        segments: process.prepared.as_ref().map(|p| p.candidate_state.segments.clone()).unwrap_or_default(),
                    };
                    self.truth(engine, handle, request).await?
                }
            };
            let Some(settlement) = settlement else {
                self.expect(false, "unknown_settlement_built", || format!("no settlement could be built for {effect}"));
                continue;
            };
            let Some(target) = engine.lookup(&process.id) else { continue };
            match target.resolve_unknown_effect(effect.clone(), settlement).await {
                Ok(()) => {
                    self.cx.trace(format!("host resolved {}", short(&effect)));
                    self.cx.timeline.end(&unknown_span(&effect), "settled", format!("host settled {}", short(&effect)));
                    self.cx.timeline.mark(process.id.as_str(), MarkKind::Settle, format!("host settled Unknown {}", short(&effect)));
                }
                Err(e) if stopped_or(&e) => {
                    // The resolution may or may not be in the store; the restored head tells.
                    self.decided.remove(&effect);
                    return Err(HostError::Stopped);
                }
                Err(e) => {
                    let terminated = self.terminated_by_host;
                    self.cx.trace(format!("host resolve {} refused: {e}", short(&effect)));
                    self.expect(terminated, "resolve_accepted", || format!("resolving {effect} was refused: {e}"));
                }
            }
        }
        Ok(acted)
    }

    /// The truth of an Unknown: what the call produced, or the call performed now, once.
    async fn truth(&mut self, engine: &Engine, handle: &ProcessHandle, request: EffectRequest) -> Result<Option<Settlement>, HostError> {
        let effect = request.effect_id.clone();
        let dispatches = self.cx.ledger.dispatches(&effect);
        if let Some(s) = dispatches.iter().find_map(|d| match &d.ended {
            Some(Ended::Settled(s)) => Some(s.clone()),
            _ => None,
        }) {
            self.cx.fired("unknown.truth_ran");
            return Ok(Some(s));
        }
        if !dispatches.is_empty() {
            self.cx.fired("unknown.truth_ran");
            return Ok(self.cx.ledger.truth(&effect).or_else(|| failed_settlement(&request.payload)));
        }
        let Some(performer) = self.performers.get(&request.deployment_ref.to_string()).cloned() else {
            return Ok(None);
        };
        // Actions meant for a call the engine never made happen before the host makes it.
        let trigger = if performer.kind == "model" && request.deployment_ref == *handle.deployment_ref() {
            ModelCallEffect::from_payload(&request.payload).ok().map(|m| Trigger::ModelCall(m.model_call_sequence))
        } else if performer.kind == "tool" {
            // Only a first attempt is the `tool_call` trigger (as in the tool itself).
            ToolCallEffect::from_payload(&request.payload).ok().filter(|t| t.resume.is_none()).map(|t| Trigger::ToolCall(t.input.call.id))
        } else {
            None
        };
        if let Some(trigger) = trigger {
            if self.cx.claim_for_host(&trigger) {
                self.act(engine, handle, &trigger).await?;
            }
        }
        self.cx.fired("unknown.truth_performed");
        self.cx.ledger.set_host_performing(&effect, true);
        let dcx = DispatchContext { cancel: CancelToken::new(), deltas: None };
        let outcome = performer.perform(request.clone(), dcx, Caller::Host).await;
        self.cx.ledger.set_host_performing(&effect, false);
        Ok(match outcome {
            Ok(s) => Some(s),
            Err(_) => self.cx.ledger.truth(&effect).or_else(|| failed_settlement(&request.payload)),
        })
    }
}

/// A definite failure in the shape the Effect's owner understands.
pub fn failed_settlement(payload: &keel::json::Payload) -> Option<Settlement> {
    if let Ok(tool) = ToolCallEffect::from_payload(payload) {
        let call = &tool.input.call;
        let result = ToolResult::error(&call.id, &call.name, "error: the host settled this call as failed");
        return ToolCallSettlement::Result(SettledToolResult::new(result, false)).to_settlement().ok();
    }
    if ModelCallEffect::from_payload(payload).is_ok() {
        return ModelResult::provider_error("the host settled this model call as failed").to_settlement().ok();
    }
    None
}
