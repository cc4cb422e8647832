//! The model call Effect: parent → model Dispatcher.

use super::names::{validate_advertised_names, validate_signal_ids};
use super::{envelope, open, Operation};
use crate::chat::Request;
use crate::interaction::error::{ErrorKind, InteractionError};
use crate::interaction::wire::{read_nonempty_list, Wire};
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ToJson};
use crate::kernel::ids::SignalId;

/// One model request, declared as a dispatcher Effect.
///
/// Wire form: `{"operation":"model_call","model_call":{"model_call_sequence":u32,
/// "request":Request,"advertised_tool_names"?:[S],"applied_steer_signal_ids"?:[SignalId]}}`.
/// Both lists are omitted when empty; an explicit `[]` is rejected (absent and empty are one
/// value, so only one encoding of it is accepted).
///
/// Valid when: the sequence is ≥ 1; the request is a valid request with **no tools** (the
/// Dispatcher adds the manifest per call); advertised names follow
/// [`validate_advertised_names`]; applied ids are unique.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelCallEffect {
    /// One-based position of this call in the Interaction.
    pub model_call_sequence: u32,
    /// A clone of the WorkingContext.
    pub request: Request,
    /// Deferred tools made visible so far, in commit order.
    pub advertised_tool_names: Vec<String>,
    /// Steers whose messages become visible for the first time in this request, in order.
    pub applied_steer_signal_ids: Vec<SignalId>,
}

impl Wire for ModelCallEffect {
    const INVALID: ErrorKind = ErrorKind::InvalidExecutionState;
    const WHAT: &'static str = "model_call effect";

    fn validate(&self) -> Result<(), InteractionError> {
        let invalid = |detail: String| InteractionError::invalid_state(format!("model_call effect: {detail}"));
        if self.model_call_sequence == 0 {
            return Err(invalid("model_call_sequence must be ≥ 1".into()));
        }
        self.request.validate().map_err(|e| invalid(format!("request: {e}")))?;
        if !self.request.tools.is_empty() {
            return Err(invalid("request must not carry tool definitions".into()));
        }
        validate_advertised_names(&self.advertised_tool_names).map_err(invalid)?;
        validate_signal_ids(&self.applied_steer_signal_ids).map_err(invalid)
    }
}

impl ToJson for ModelCallEffect {
    fn to_json(&self) -> Json {
        let body = ObjectBuilder::new()
            .field("model_call_sequence", &self.model_call_sequence)
            .field("request", &self.request)
            .nonempty_field("advertised_tool_names", &self.advertised_tool_names)
            .nonempty_field("applied_steer_signal_ids", &self.applied_steer_signal_ids)
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
        request: r.required("request")?,
        advertised_tool_names: read_nonempty_list(&mut r, "advertised_tool_names")?,
        applied_steer_signal_ids: read_nonempty_list(&mut r, "applied_steer_signal_ids")?,
    };
    r.finish()?;
    effect.validate()?;
    Ok(effect)
}
