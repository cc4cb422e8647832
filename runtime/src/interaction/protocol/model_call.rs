//! The model call Effect: parent → model Dispatcher.

use super::names::{validate_advertised_names, validate_signal_ids};
use super::{envelope, open, Operation};
use crate::chat::Request;
use crate::interaction::state::{ContextHead, WorkingContext};
use crate::kernel::segment::Segment;
use std::sync::Arc;
use crate::interaction::error::{ErrorKind, InteractionError};
use crate::interaction::wire::{read_nonempty_list, Wire};
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ToJson};
use crate::kernel::ids::SignalId;

/// One model request, declared as a dispatcher Effect.
///
/// Wire form: `{"operation":"model_call","model_call":{"model_call_sequence":u32,
/// "context":ContextHead,"advertised_tool_names"?:[S],"applied_steer_signal_ids"?:[SignalId],
/// "time"?:CallTime}}`; `time` is present exactly when the run has a time budget.
/// Both lists are omitted when empty; an explicit `[]` is rejected (absent and empty are one
/// value, so only one encoding of it is accepted).
///
/// The call *names* the working context instead of copying it: `context` is the head of the
/// declaring Step's context (chain digest over its segments, message count, options), and
/// the kernel hands the Dispatcher that Step's segments with the request
/// ([`crate::kernel::dispatcher::EffectRequest::segments`]); [`ModelCallEffect::request`]
/// rebuilds the request from them and refuses segments the head does not name.
///
/// Valid when: the sequence is ≥ 1; the context names ≥ 1 message with valid options;
/// advertised names follow [`validate_advertised_names`]; applied ids are unique.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelCallEffect {
    /// One-based position of this call in the Interaction.
    pub model_call_sequence: u32,
    /// The head of the WorkingContext the call sends (its messages are the Step's segments).
    pub context: ContextHead,
    /// Deferred tools made visible so far, in commit order.
    pub advertised_tool_names: Vec<String>,
    /// Steers whose messages become visible for the first time in this request, in order.
    pub applied_steer_signal_ids: Vec<SignalId>,
    /// Under a time budget: the Dispatcher reads its clock, refuses a call at or past the
    /// deadline and records its readings ([`crate::interaction::run_clock`]).
    pub time: Option<crate::interaction::run_clock::CallTime>,
}

impl Wire for ModelCallEffect {
    const INVALID: ErrorKind = ErrorKind::InvalidExecutionState;
    const WHAT: &'static str = "model_call effect";

    fn validate(&self) -> Result<(), InteractionError> {
        let invalid = |detail: String| InteractionError::invalid_state(format!("model_call effect: {detail}"));
        if self.model_call_sequence == 0 {
            return Err(invalid("model_call_sequence must be ≥ 1".into()));
        }
        if self.context.messages == 0 {
            return Err(invalid("context must name at least one message".into()));
        }
        self.context.options.validate().map_err(|e| invalid(format!("context: {e}")))?;
        validate_advertised_names(&self.advertised_tool_names).map_err(invalid)?;
        validate_signal_ids(&self.applied_steer_signal_ids).map_err(invalid)
    }
}

impl ToJson for ModelCallEffect {
    fn to_json(&self) -> Json {
        let body = ObjectBuilder::new()
            .field("model_call_sequence", &self.model_call_sequence)
            .field("context", &self.context)
            .nonempty_field("advertised_tool_names", &self.advertised_tool_names)
            .nonempty_field("applied_steer_signal_ids", &self.applied_steer_signal_ids)
            .opt_field("time", self.time.as_ref())
            .build();
        envelope(Operation::ModelCall, "model_call", body)
    }
}

impl FromJson for ModelCallEffect {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let body = open(value, Operation::ModelCall, "model_call")?;
        decode_body(body).map_err(|e| e.in_member("model_call"))
    }
}

fn decode_body(body: &Json) -> Result<ModelCallEffect, DecodeError> {
    let mut r = ObjectReader::new(body)?;
    let effect = ModelCallEffect {
        model_call_sequence: r.required("model_call_sequence")?,
        context: r.required("context")?,
        advertised_tool_names: read_nonempty_list(&mut r, "advertised_tool_names")?,
        applied_steer_signal_ids: read_nonempty_list(&mut r, "applied_steer_signal_ids")?,
        time: r.optional("time")?,
    };
    r.finish()?;
    effect.validate()?;
    Ok(effect)
}

impl ModelCallEffect {
    /// The call that sends `request`'s messages and options (its tools are never part of a
    /// context), with the segments a dispatched request must carry for it.
    pub fn naming(
        model_call_sequence: u32,
        request: &Request,
        advertised_tool_names: Vec<String>,
        applied_steer_signal_ids: Vec<SignalId>,
    ) -> Result<(ModelCallEffect, Vec<Arc<Segment>>), InteractionError> {
        let mut context = WorkingContext::from_request(request);
        context.seal().map_err(|e| InteractionError::invalid_state(format!("model_call effect: context: {e}")))?;
        let effect =
            ModelCallEffect { model_call_sequence, context: context.head(), advertised_tool_names, applied_steer_signal_ids, time: None };
        Ok((effect, context.segments()))
    }

    /// The request this call sends (no tools: the Dispatcher adds the manifest), rebuilt from
    /// the declaring Step's segments; segments the context head does not name are refused.
    pub fn request(&self, segments: &[Arc<Segment>]) -> Result<Request, InteractionError> {
        let context = WorkingContext::attach(&self.context, segments).map_err(|e| {
            InteractionError::decode(ErrorKind::InvalidExecutionState, "model_call effect: context", e)
        })?;
        // The context's own check: the request's rules, with sealed segments' messages
        // validated once when sealed or read rather than once per call.
        context.validate().map_err(|e| InteractionError::invalid_state(format!("model_call effect: request: {e}")))?;
        Ok(context.to_request())
    }
}
