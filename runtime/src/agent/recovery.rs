//! Unknown Effects seen by the host, and how they are settled.
//!
//! The kernel never converts an Unknown by itself. The facade settles one only through the
//! kernel's `resolve_unknown_effect`, per the policy the tool (or the agent, for model calls)
//! declared; held Unknowns wait for [`Run::resolve`](super::Run::resolve).

use super::events::UnknownKind;
use super::policy::UnknownPolicy;
use crate::chat::{FinishReason, Message, Response, ToolOutput, ToolResult, Usage};
use crate::env::CancelToken;
use crate::interaction::protocol::{ModelCallEffect, ModelResult, SettledToolResult, ToolCallEffect, ToolCallSettlement};
use crate::interaction::wire::Wire;
use crate::json::Payload;
use crate::kernel::binding::Deployment;
use crate::kernel::deployment::DeploymentRef;
use crate::kernel::dispatcher::{DispatchContext, EffectRequest};
use crate::kernel::effect::Settlement;
use crate::kernel::ids::{EffectId, IncarnationId, ProcessId};
use crate::kernel::relation::Relation;

/// The text a model sees for a tool call settled by [`UnknownPolicy::ReportToModel`].
pub const UNKNOWN_TOOL_TEXT: &str =
    "error: the outcome of this call is unknown (the run stopped while it was in flight); it may or may not have taken effect";
/// The error recorded for a model call settled by [`UnknownPolicy::ReportToModel`].
pub const UNKNOWN_MODEL_TEXT: &str = "the outcome of this model call is unknown (the run stopped while it was in flight)";

/// An Effect whose outcome cannot be proven, as the host sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownEffect {
    /// The Process whose batch holds it.
    pub process: ProcessId,
    /// The Effect.
    pub effect: EffectId,
    /// What kind of call it was.
    pub kind: UnknownKind,
    /// The policy the host applies.
    pub policy: UnknownPolicy,
    pub(crate) deployment_ref: DeploymentRef,
    pub(crate) relation: Relation,
    pub(crate) step_sequence: u64,
    pub(crate) batch_index: u32,
    pub(crate) payload: Payload,
    /// The segments the Effect names (a model call's working context).
    pub(crate) segments: Vec<std::sync::Arc<crate::kernel::segment::Segment>>,
    pub(crate) incarnation: IncarnationId,
}

/// How the host settles a held Unknown with [`Run::resolve`](super::Run::resolve).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resolution {
    /// It succeeded with this result text (a tool result, or the model's answer text).
    Succeeded(String),
    /// It failed with this error text (shown to the model).
    Failed(String),
    /// Perform the call again now and settle with that outcome (only for idempotent calls).
    Retry,
}

impl UnknownEffect {
    pub(crate) fn request(&self) -> EffectRequest {
        EffectRequest {
            incarnation: self.incarnation.clone(),
            deployment_ref: self.deployment_ref.clone(),
            process_id: self.process.clone(),
            relation: self.relation.clone(),
            step_sequence: self.step_sequence,
            batch_index: self.batch_index,
            effect_id: self.effect.clone(),
            attempt_id: None,
            payload: self.payload.clone(),
            segments: self.segments.clone(),
        }
    }

    /// The settlement for a definite text outcome, in the shape the Effect's owner reads.
    pub(crate) fn settlement(&self, ok: bool, text: &str) -> Result<Settlement, String> {
        if let Ok(tool) = ToolCallEffect::from_payload(&self.payload) {
            let call = &tool.input.call;
            let result = if ok {
                ToolResult::ok(&call.id, &call.name, ToolOutput::text(text))
            } else {
                ToolResult::error(&call.id, &call.name, text)
            };
            return ToolCallSettlement::Result(SettledToolResult::new(result, false)).to_settlement().map_err(|e| e.to_string());
        }
        if ModelCallEffect::from_payload(&self.payload).is_ok() {
            let result = if ok {
                ModelResult::response(Response::new(Message::assistant(text), FinishReason::Stop, Usage::new(0, 0)))
            } else {
                ModelResult::provider_error(text)
            };
            return result.to_settlement().map_err(|e| e.to_string());
        }
        Err("the effect is neither a model nor a tool call; resolve it through the kernel API".into())
    }

    /// The settlement that tells the model the outcome is unknown.
    pub(crate) fn report_settlement(&self) -> Result<Settlement, String> {
        match self.kind {
            UnknownKind::Model => self.settlement(false, UNKNOWN_MODEL_TEXT),
            _ => self.settlement(false, UNKNOWN_TOOL_TEXT),
        }
    }

    /// Performs the call again through its deployment's dispatcher.
    pub(crate) async fn retry(&self, deployment: &Deployment) -> Result<Settlement, String> {
        let dispatcher = deployment.dispatcher().cloned().ok_or("the deployment has no dispatcher")?;
        let cx = DispatchContext { cancel: CancelToken::new(), deltas: None };
        dispatcher.dispatch(self.request(), cx).await.map_err(|e| e.to_string())
    }
}

/// The kind of call a dispatcher payload is.
pub(crate) fn kind_of(payload: &Payload) -> (UnknownKind, Option<(String, String)>) {
    if let Ok(tool) = ToolCallEffect::from_payload(payload) {
        let call = tool.input.call;
        return (UnknownKind::Tool(call.name.clone()), Some((call.name, call.id)));
    }
    if ModelCallEffect::from_payload(payload).is_ok() {
        return (UnknownKind::Model, None);
    }
    (UnknownKind::Other, None)
}
