//! The model settlement: model Dispatcher → parent.

use super::{envelope, open, Operation};
use crate::chat::{Message, Response};
use crate::interaction::run_clock::CallClock;
use crate::interaction::diagnostic::{is_normalized, normalize_str};
use crate::interaction::error::{ErrorKind, InteractionError};
use crate::interaction::wire::Wire;
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, Payload, ToJson};
use crate::kernel::effect::Settlement;
use crate::kernel::signal::{SettlementStatus, Signal};

/// The definite outcome of one model call.
///
/// Wire form: `{"operation":"model_call","model_result":{..}}` whose body holds exactly one of
/// `"response":Response`, `"error":S` (provider failure), `"host_error":S` (host failure,
/// reducer failure, invalid reduced context) or `"out_of_time":{"at_ms":u64,"deadline_ms":u64}`
/// (a call under a time budget not made: the Dispatcher's clock read `at_ms` ≥ `deadline_ms`),
/// plus `"replacement_messages":[Message]` and `"clock":CallClock` (the Dispatcher's readings
/// of a call under a time budget) only beside a response.
///
/// Valid when: the response is valid; replacement messages, when present, are non-empty
/// (present-but-empty is rejected) and each valid; error texts are already normalized
/// diagnostics (non-empty, trimmed, ≤ 2048 bytes: use [`ModelResult::provider_error`] and
/// [`ModelResult::host_error`], which normalize).
///
/// Settlement status: `succeeded` for a response, `failed` for the others.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelResult {
    Response {
        response: Response,
        /// The complete reduced message list, present only when a reducer changed the
        /// context; the parent then replaces its WorkingContext messages with it.
        replacement_messages: Option<Vec<Message>>,
        /// When the call started and settled on the Dispatcher's clock, for a call made under
        /// a time budget.
        clock: Option<CallClock>,
    },
    /// A provider failure (`interaction.model.failed`).
    Error(String),
    /// A host failure (`interaction.host.failed`).
    HostError(String),
    /// The call's deadline had passed when the Dispatcher was to make it
    /// (`interaction.budget.time`); the model was not called.
    OutOfTime { at_ms: u64, deadline_ms: u64 },
}

impl ModelResult {
    /// A response with no context replacement.
    pub fn response(response: Response) -> ModelResult {
        ModelResult::Response { response, replacement_messages: None, clock: None }
    }

    /// A provider failure; `raw` is normalized.
    pub fn provider_error(raw: &str) -> ModelResult {
        ModelResult::Error(normalize_str(raw))
    }

    /// A host failure; `raw` is normalized.
    pub fn host_error(raw: &str) -> ModelResult {
        ModelResult::HostError(normalize_str(raw))
    }

    /// The settlement status this result travels with.
    pub fn status(&self) -> SettlementStatus {
        match self {
            ModelResult::Response { .. } => SettlementStatus::Succeeded,
            ModelResult::Error(_) | ModelResult::HostError(_) | ModelResult::OutOfTime { .. } => SettlementStatus::Failed,
        }
    }

    /// The Dispatcher's settlement for this result.
    pub fn to_settlement(&self) -> Result<Settlement, InteractionError> {
        // The parent decodes this payload on its next Step: it takes the value back instead.
        Ok(Settlement { status: self.status(), payload: self.to_payload_remembered()? })
    }

    /// The encoding of the response in a settlement payload that remembers the
    /// [`ModelResult`] it encodes ([`ModelResult::to_settlement`]) when that is a response
    /// alone: the payload's tree was built from that value and its text is exactly
    /// `{"model_result":{"response":R},"operation":"model_call"}` (its members are known, and
    /// canonical order puts them so), so the member and R are the encodings of the response
    /// decoded from it (`ModelResult::from_signal`). An Output holding that response copies
    /// them instead of encoding the response again. `None` for a payload read from bytes, or
    /// one with more members.
    pub(crate) fn remembered_response(payload: &Payload) -> Option<EncodedResponse<'_>> {
        let remembered = payload.decoded::<ModelResult>()?;
        let ModelResult::Response { replacement_messages: None, clock: None, .. } = remembered.as_ref() else {
            return None;
        };
        let text = payload.canonical().strip_prefix(r#"{"model_result":{"response":"#)?.strip_suffix(r#"},"operation":"model_call"}"#)?;
        Some(EncodedResponse { value: payload.value().get("model_result")?.get("response")?, text })
    }

    /// Parses the parent's settlement Signal: unaddressed, carrying a settlement status that
    /// agrees with the result.
    pub fn from_signal(signal: &Signal) -> Result<ModelResult, InteractionError> {
        if signal.wait_id().is_some() {
            return Err(InteractionError::invalid_state(format!(
                "model_call settlement {} must not be wait-addressed",
                signal.id()
            )));
        }
        let result = ModelResult::from_payload_reusing(signal.payload())?;
        match signal.status() {
            Some(status) if status == result.status() => Ok(result),
            Some(status) => Err(InteractionError::invalid_state(format!(
                "model_call settlement {} has status {} but carries a {} result",
                signal.id(),
                status.as_str(),
                result.status().as_str()
            ))),
            None => Err(InteractionError::invalid_state(format!(
                "signal {} carries a model_call result but is not a settlement",
                signal.id()
            ))),
        }
    }
}

/// A response's encoding, held by the settlement that carried it: its value and canonical text.
#[derive(Clone, Copy)]
pub(crate) struct EncodedResponse<'a> {
    pub(crate) value: &'a Json,
    pub(crate) text: &'a str,
}

impl Wire for ModelResult {
    const INVALID: ErrorKind = ErrorKind::InvalidExecutionState;
    const WHAT: &'static str = "model_call result";

    fn validate(&self) -> Result<(), InteractionError> {
        let invalid = |detail: String| InteractionError::invalid_state(format!("model_call result: {detail}"));
        match self {
            ModelResult::Response { response, replacement_messages, .. } => {
                response.validate().map_err(|e| invalid(format!("response: {e}")))?;
                if let Some(messages) = replacement_messages {
                    if messages.is_empty() {
                        return Err(invalid("replacement_messages must not be empty".into()));
                    }
                    for (index, message) in messages.iter().enumerate() {
                        message.validate().map_err(|e| invalid(format!("replacement message {index}: {e}")))?;
                    }
                }
                Ok(())
            }
            ModelResult::Error(text) | ModelResult::HostError(text) if !is_normalized(text) => {
                Err(invalid("error text must be a normalized, non-empty diagnostic".into()))
            }
            ModelResult::Error(_) | ModelResult::HostError(_) => Ok(()),
            ModelResult::OutOfTime { at_ms, deadline_ms } if at_ms < deadline_ms => {
                Err(invalid("out_of_time before its deadline".into()))
            }
            ModelResult::OutOfTime { .. } => Ok(()),
        }
    }
}

impl ToJson for ModelResult {
    fn to_json(&self) -> Json {
        let body = match self {
            ModelResult::Response { response, replacement_messages, clock } => ObjectBuilder::new()
                .field("response", response)
                .opt_field("replacement_messages", replacement_messages.as_ref())
                .opt_field("clock", clock.as_ref()),
            ModelResult::Error(text) => ObjectBuilder::new().field("error", text),
            ModelResult::HostError(text) => ObjectBuilder::new().field("host_error", text),
            ModelResult::OutOfTime { at_ms, deadline_ms } => ObjectBuilder::new().value(
                "out_of_time",
                ObjectBuilder::new().field("at_ms", at_ms).field("deadline_ms", deadline_ms).build(),
            ),
        }
        .build();
        envelope(Operation::ModelCall, "model_result", body)
    }
}

impl FromJson for ModelResult {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let body = open(value, Operation::ModelCall, "model_result")?;
        decode_body(body).map_err(|e| e.in_member("model_result"))
    }
}

fn decode_body(body: &Json) -> Result<ModelResult, DecodeError> {
    let mut r = ObjectReader::new(body)?;
    let response: Option<Response> = r.optional("response")?;
    let replacement_messages: Option<Vec<Message>> = r.optional("replacement_messages")?;
    let error: Option<String> = r.optional("error")?;
    let host_error: Option<String> = r.optional("host_error")?;
    let clock: Option<CallClock> = r.optional("clock")?;
    let out_of_time = match r.optional_value("out_of_time")? {
        Some(v) => Some(out_of_time(v).map_err(|e| e.in_member("out_of_time"))?),
        None => None,
    };
    r.finish()?;
    let beside = replacement_messages.is_some() || clock.is_some();
    let result = match (response, error, host_error, out_of_time) {
        (Some(response), None, None, None) => ModelResult::Response { response, replacement_messages, clock },
        (None, Some(text), None, None) => ModelResult::Error(text),
        (None, None, Some(text), None) => ModelResult::HostError(text),
        (None, None, None, Some((at_ms, deadline_ms))) => ModelResult::OutOfTime { at_ms, deadline_ms },
        _ => {
            return Err(DecodeError::invalid("exactly one of response, error, host_error and out_of_time is required"))
        }
    };
    if beside && !matches!(result, ModelResult::Response { .. }) {
        return Err(DecodeError::invalid("replacement_messages and clock are allowed only with a response"));
    }
    result.validate()?;
    Ok(result)
}

fn out_of_time(v: &Json) -> Result<(u64, u64), DecodeError> {
    let mut r = ObjectReader::new(v)?;
    let at = r.required("at_ms")?;
    let deadline = r.required("deadline_ms")?;
    r.finish()?;
    Ok((at, deadline))
}
