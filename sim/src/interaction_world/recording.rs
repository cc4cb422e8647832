//! The dispatcher wrapper that turns the real Dispatchers (the ModelDispatcher, the ToolSet's
//! tool dispatcher) into ledger entries, and checks *pending before dispatch*: when a physical
//! call starts, the store holds its writer's acknowledged `pending` boundary of the Effect.

use super::context::Context;
use super::ledger::{Caller, Ended, ToolClass};
use crate::world::Violation;
use keel::env::BoxFuture;
use keel::interaction::protocol::{ToolCallEffect, ToolCallSettlement};
use keel::interaction::wire::Wire;
use keel::json::Payload;
use keel::kernel::dispatcher::{DispatchContext, DispatchError, DispatchPolicy, Dispatcher, EffectRequest};
use keel::kernel::effect::Settlement;
use keel::kernel::ids::EffectId;
use crate::timeline::{MarkKind, SpanKind};
use std::sync::Arc;

pub struct Recording {
    pub inner: Arc<dyn Dispatcher>,
    pub cx: Arc<Context>,
    /// `model` or `tool`.
    pub kind: &'static str,
}

/// Marks the call ended as dropped if its future goes away first.
struct Guard<'a> {
    cx: &'a Context,
    effect: EffectId,
    done: bool,
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.cx.ledger.end(&self.effect, Ended::Dropped);
            self.cx.trace(format!("dispatch {} dropped", short(&self.effect)));
        }
    }
}

/// The timeline span of an Effect's Unknown, from the moment it is known to be Unknown until a
/// host settles it.
pub fn unknown_span(effect: &EffectId) -> String {
    format!("unknown:{}", effect.as_str())
}

/// The timeline span of a Process's input wait, until the host's answer is delivered.
pub fn wait_span(process: &str) -> String {
    format!("wait:{process}")
}

/// The last 8 characters of an id (trace lines stay short and stable).
pub fn short(effect: &EffectId) -> String {
    let s = effect.as_str();
    s[s.len().saturating_sub(8)..].to_owned()
}

impl Recording {
    /// The concurrency class and limit of a tool effect; `None` for model calls and for calls
    /// the tool never runs (unknown name, arguments that do not prepare).
    fn tool_class(&self, payload: &Payload) -> Option<(ToolClass, u64)> {
        if self.kind != "tool" {
            return None;
        }
        let effect = ToolCallEffect::from_payload(payload).ok()?;
        let call = &effect.input.call;
        let spec = self.cx.spec.tool(&call.name)?;
        let args = keel::json::parse(call.arguments.as_bytes()).ok()?;
        if spec.strict_arguments && args.get("q").and_then(keel::json::Json::as_str).is_none() {
            return None;
        }
        let limit = u64::from(self.cx.spec.max_concurrent_tool_calls.max(1));
        Some((ToolClass::of(&spec.concurrency, &args), limit))
    }

    /// Names the timeline lane of the calling Process; returns what the call is (`model`,
    /// `tool search c1`).
    fn name_lane(&self, request: &EffectRequest) -> String {
        let lane = request.process_id.as_str();
        if self.kind == "tool" {
            if let Ok(effect) = ToolCallEffect::from_payload(&request.payload) {
                let call = &effect.input.call;
                self.cx.timeline.name_lane(lane, &format!("tool {} · {}", call.id, call.name));
                return format!("tool {}", call.name);
            }
            return "tool".to_owned();
        }
        if request.relation.parent_id.is_none() {
            self.cx.timeline.name_lane(lane, "root");
        } else {
            let key = request.relation.child_key.as_ref().map_or("?", |k| k.as_str());
            self.cx.timeline.name_lane(lane, &format!("delegate {}", key.chars().take(24).collect::<String>()));
        }
        "model".to_owned()
    }

    /// *Pending before dispatch*: the writer that issued this call had its `pending` boundary
    /// acknowledged by the store. Judged against that writer's own acknowledged commits, not
    /// the current head: a stopped writer's call may start late, after a newer writer has
    /// already recovered the Effect as Unknown (which is why it is Unknown).
    fn check_pending(&self, request: &EffectRequest) {
        self.cx.ledger.count_check();
        if !self.cx.store.pending_acknowledged(&request.incarnation, &request.effect_id) {
            let root = self.cx.store.memory().roots().first().cloned();
            let phase = root.and_then(|root| self.cx.store.head_snapshot(&root)).and_then(|head| {
                head.process(&request.process_id)
                    .and_then(|p| p.prepared.as_ref())
                    .and_then(|s| s.effects.iter().find(|e| e.id == request.effect_id))
                    .map(|e| e.phase.name())
            });
            self.cx.timeline.mark(request.process_id.as_str(), MarkKind::Violation, format!("pending_before_dispatch: {} effect {}", self.kind, short(&request.effect_id)));
            self.cx.ledger.violation(Violation::new(
                "pending_before_dispatch",
                format!(
                    "{} effect {} dispatched by {} without its acknowledged pending boundary (store head: {phase:?})",
                    self.kind, request.effect_id, request.incarnation
                ),
            ));
        }
    }

    /// One physical call, by `caller`.
    pub async fn perform(&self, request: EffectRequest, dcx: DispatchContext, caller: Caller) -> Result<Settlement, DispatchError> {
        let effect = request.effect_id.clone();
        if caller != Caller::Host {
            self.check_pending(&request);
        }
        self.cx.trace(format!("dispatch {} {} start by {caller:?}", self.kind, short(&effect)));
        // Labels are built only when the timeline is kept (replay), not on every campaign run.
        let keeps = self.cx.timeline.keeps();
        let lane = if keeps { request.process_id.as_str().to_owned() } else { String::new() };
        let what = if keeps { self.name_lane(&request) } else { String::new() };
        let span = if keeps { format!("call:{}:{}", effect.as_str(), self.cx.ledger.dispatches(&effect).len()) } else { String::new() };
        if keeps {
            self.cx.timeline.begin(&lane, &span, if self.kind == "model" { SpanKind::Model } else { SpanKind::Tool }, format!("{what} {} by {caller:?}", short(&effect)));
        }
        self.cx.ledger.begin(&effect, caller, self.kind, self.tool_class(&request.payload));
        let mut guard = Guard { cx: &self.cx, effect: effect.clone(), done: false };
        let cancel = dcx.cancel.clone();
        let outcome = self.inner.dispatch(request, dcx).await;
        guard.done = true;
        let ended = match &outcome {
            // The ModelDispatcher settles a cancelled call (a kill, or its writer stopping) as
            // a provider failure: not what the model did. Its truth is the ledger's record.
            // (Simulated tools ignore cancellation, so their settlement is what they did.)
            Ok(_) if self.kind == "model" && cancel.is_cancelled() => Ended::Unknown("cut off by cancellation".into()),
            Ok(s) => Ended::Settled(s.clone()),
            Err(e) => Ended::Unknown(e.to_string()),
        };
        self.cx.trace(format!("dispatch {} {} end {}", self.kind, short(&effect), if outcome.is_ok() { "settled" } else { "unknown" }));
        // The timeline alone reads the settlement here: a run that keeps none skips decoding it.
        match &outcome {
            _ if !keeps => {}
            Ok(s) => {
                self.cx.timeline.end(&span, "settled", format!("{what} {} settled", short(&effect)));
                if let Ok(ToolCallSettlement::Checkpoint(_)) = ToolCallSettlement::from_payload(&s.payload) {
                    self.cx.timeline.begin(&lane, &wait_span(&lane), SpanKind::Wait, format!("{what} waits for input"));
                }
            }
            Err(e) => {
                self.cx.timeline.end(&span, "unknown", format!("{what} {} unknown: {e}", short(&effect)));
                self.cx.timeline.begin(&lane, &unknown_span(&effect), SpanKind::Unknown, format!("{what} {} Unknown", short(&effect)));
            }
        }
        self.cx.ledger.end(&effect, ended);
        outcome
    }
}

impl Dispatcher for Recording {
    fn policy(&self, effect: &Payload) -> DispatchPolicy {
        self.inner.policy(effect)
    }

    fn dispatch<'a>(&'a self, request: EffectRequest, cx: DispatchContext) -> BoxFuture<'a, Result<Settlement, DispatchError>> {
        // The writer that issued the call (a stopped one's call may start after a restore).
        let writer = self.cx.store.writer_ordinal(&request.incarnation).unwrap_or_else(|| self.cx.incarnation());
        Box::pin(self.perform(request, cx, Caller::Engine(writer)))
    }
}
