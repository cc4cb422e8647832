//! Execution attribution of one actual model call ([`ModelInvocation`]) or tool call
//! ([`ToolInvocation`]). Immutable values: no Engine handle, no host metadata.
//!
//! # How Dispatchers install them
//! * **Model**: the model Dispatcher builds a [`ModelInvocation`] with
//!   [`ModelInvocation::from_effect`] from the kernel's [`EffectRequest`] and the decoded
//!   [`ModelCallEffect`], and passes it by reference to the model client, the context reducer
//!   and the observer for the duration of that call (Rust has no ambient context; an explicit
//!   argument is the "context" here, and there is nothing to query outside a call).
//! * **Tool**: the tool Dispatcher builds a [`ToolInvocation`] with
//!   [`ToolInvocation::from_effect`] (the request is the *tool child's*: its relation, the
//!   ToolSet deployment ref, the child's effect id and step) and installs it into the call's
//!   [`ToolContext`] extensions with [`ToolInvocation::install`]. A tool reads it with
//!   [`ToolInvocation::from_context`]; a context without one (a detached context, a call not
//!   run by the Interaction) yields `None`.

use super::protocol::{ModelCallEffect, ToolCallEffect};
use crate::chat::ToolCall;
use crate::kernel::deployment::DeploymentRef;
use crate::kernel::dispatcher::EffectRequest;
use crate::kernel::ids::{EffectId, SignalId};
use crate::kernel::relation::Relation;
use crate::tool::ToolContext;

/// The attribution of one model call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelInvocation {
    relation: Relation,
    deployment_ref: DeploymentRef,
    effect_id: EffectId,
    step_sequence: u64,
    model_call_sequence: u32,
    applied_steer_signal_ids: Vec<SignalId>,
}

impl ModelInvocation {
    pub fn new(
        relation: Relation,
        deployment_ref: DeploymentRef,
        effect_id: EffectId,
        step_sequence: u64,
        model_call_sequence: u32,
        applied_steer_signal_ids: Vec<SignalId>,
    ) -> ModelInvocation {
        ModelInvocation {
            relation,
            deployment_ref,
            effect_id,
            step_sequence,
            model_call_sequence,
            applied_steer_signal_ids,
        }
    }

    /// From the dispatched request and its decoded effect.
    pub fn from_effect(request: &EffectRequest, effect: &ModelCallEffect) -> ModelInvocation {
        ModelInvocation::new(
            request.relation.clone(),
            request.deployment_ref.clone(),
            request.effect_id.clone(),
            request.step_sequence,
            effect.model_call_sequence,
            effect.applied_steer_signal_ids.clone(),
        )
    }

    /// The Process tree location that owns the call.
    pub fn relation(&self) -> &Relation {
        &self.relation
    }
    /// The exact Interaction binding that owns the call.
    pub fn deployment_ref(&self) -> &DeploymentRef {
        &self.deployment_ref
    }
    /// The stable model Effect identity.
    pub fn effect_id(&self) -> &EffectId {
        &self.effect_id
    }
    /// The one-based Step that declared the Effect.
    pub fn step_sequence(&self) -> u64 {
        self.step_sequence
    }
    /// The one-based position of the call in the Interaction.
    pub fn model_call_sequence(&self) -> u32 {
        self.model_call_sequence
    }
    /// An owned copy of the ids of the steers first made visible in this request, in order.
    /// Empty means no new steer (older steer messages may still be in the context).
    pub fn applied_steer_signal_ids(&self) -> Vec<SignalId> {
        self.applied_steer_signal_ids.clone()
    }

    /// Sequences are one-based and applied ids are unique.
    pub fn is_valid(&self) -> bool {
        self.step_sequence >= 1
            && self.model_call_sequence >= 1
            && super::protocol::validate_signal_ids(&self.applied_steer_signal_ids).is_ok()
    }
}

/// The attribution of one actual tool call, as seen from inside the tool child.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolInvocation {
    relation: Relation,
    deployment_ref: DeploymentRef,
    effect_id: EffectId,
    step_sequence: u64,
    model_call_sequence: u32,
    tool_call_index: u32,
    call: ToolCall,
}

impl ToolInvocation {
    pub fn new(
        relation: Relation,
        deployment_ref: DeploymentRef,
        effect_id: EffectId,
        step_sequence: u64,
        model_call_sequence: u32,
        tool_call_index: u32,
        call: ToolCall,
    ) -> ToolInvocation {
        ToolInvocation {
            relation,
            deployment_ref,
            effect_id,
            step_sequence,
            model_call_sequence,
            tool_call_index,
            call,
        }
    }

    /// From the tool child's dispatched request and its decoded effect.
    pub fn from_effect(request: &EffectRequest, effect: &ToolCallEffect) -> ToolInvocation {
        ToolInvocation::new(
            request.relation.clone(),
            request.deployment_ref.clone(),
            request.effect_id.clone(),
            request.step_sequence,
            effect.input.model_call_sequence,
            effect.input.tool_call_index,
            effect.input.call.clone(),
        )
    }

    /// `cx` with this attribution attached (replacing any previous one).
    pub fn install(self, cx: ToolContext) -> ToolContext {
        cx.with_extension(self)
    }

    /// The attribution of the call `cx` belongs to, if the Interaction runs it.
    pub fn from_context(cx: &ToolContext) -> Option<&ToolInvocation> {
        cx.extension::<ToolInvocation>()
    }

    /// The tool child's tree location.
    pub fn relation(&self) -> &Relation {
        &self.relation
    }
    /// The ToolSet deployment ref (the tool child's binding).
    pub fn deployment_ref(&self) -> &DeploymentRef {
        &self.deployment_ref
    }
    /// The tool child's Effect for this attempt.
    pub fn effect_id(&self) -> &EffectId {
        &self.effect_id
    }
    /// The tool child's Step that declared the attempt.
    pub fn step_sequence(&self) -> u64 {
        self.step_sequence
    }
    /// The one-based model call that requested the tool.
    pub fn model_call_sequence(&self) -> u32 {
        self.model_call_sequence
    }
    /// The zero-based position of the call in the model response.
    pub fn tool_call_index(&self) -> u32 {
        self.tool_call_index
    }
    /// An owned copy of the exact model ToolCall being executed.
    pub fn tool_call(&self) -> ToolCall {
        self.call.clone()
    }

    /// Sequences are one-based and the call is valid.
    pub fn is_valid(&self) -> bool {
        self.step_sequence >= 1 && self.model_call_sequence >= 1 && self.call.validate().is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::CancelToken;
    use crate::interaction::protocol::ToolCallInput;
    use crate::json::{Digest, Payload};
    use crate::kernel::ids::{ChildKey, IncarnationId, ProcessId};
    use crate::text::QualifiedName;

    fn request(relation: Relation) -> EffectRequest {
        let process_id = ProcessId::parse("process:child").unwrap();
        let d = Digest::of(b"x");
        EffectRequest {
            incarnation: IncarnationId::from_hex("0123456789abcdef0123456789abcdef").unwrap(),
            deployment_ref: DeploymentRef::from_parts(QualifiedName::parse("tools").unwrap(), d, d, d, d),
            effect_id: EffectId::derive(&process_id, 1, 0),
            process_id,
            relation,
            step_sequence: 1,
            batch_index: 0,
            attempt_id: None,
            payload: Payload::null(),
            segments: Vec::new(),
        }
    }

    fn child_relation() -> Relation {
        Relation {
            parent_id: Some(ProcessId::parse("process:root").unwrap()),
            root_id: ProcessId::parse("process:root").unwrap(),
            child_key: Some(ChildKey::parse("tool_x").unwrap()),
            depth: 1,
        }
    }

    #[test]
    fn tool_invocation_travels_in_the_context() {
        let req = request(child_relation());
        let effect = ToolCallEffect {
            input: ToolCallInput { model_call_sequence: 3, tool_call_index: 1, call: ToolCall::new("c", "t", "{}") },
            resume: None,
        };
        let inv = ToolInvocation::from_effect(&req, &effect);
        assert!(inv.is_valid());
        assert_eq!(inv.model_call_sequence(), 3);
        assert_eq!(inv.tool_call_index(), 1);
        assert_eq!(inv.tool_call(), effect.input.call);
        assert_eq!(inv.step_sequence(), 1);
        assert_eq!(inv.effect_id(), &req.effect_id);
        assert_eq!(inv.relation(), &child_relation());
        assert_eq!(inv.deployment_ref(), &req.deployment_ref);

        let detached = ToolContext::detached(CancelToken::new());
        assert!(ToolInvocation::from_context(&detached).is_none());
        let cx = inv.clone().install(detached);
        assert_eq!(ToolInvocation::from_context(&cx), Some(&inv));
    }

    #[test]
    fn model_invocation_copies_applied_ids() {
        let req = request(Relation::root(ProcessId::parse("process:root").unwrap()));
        let effect = ModelCallEffect::naming(
            2,
            &crate::chat::Request::new(vec![crate::chat::Message::user("q")]),
            vec![],
            vec![SignalId::parse("s1").unwrap()],
        )
        .unwrap()
        .0;
        let inv = ModelInvocation::from_effect(&req, &effect);
        assert!(inv.is_valid());
        let mut ids = inv.applied_steer_signal_ids();
        ids.clear();
        assert_eq!(inv.applied_steer_signal_ids().len(), 1, "the accessor returns a copy");
        assert_eq!(inv.model_call_sequence(), 2);
        assert!(inv.relation().is_root());
        let bad = ModelInvocation::new(
            inv.relation().clone(),
            inv.deployment_ref().clone(),
            inv.effect_id().clone(),
            0,
            1,
            vec![],
        );
        assert!(!bad.is_valid());
    }
}
