//! Host-side Signal builders (answering a tool input wait, steering) and the classification
//! of the Signals an Interaction Execution receives.
//!
//! # Classification rule
//! A Signal payload is an **Interaction envelope** when it is an object whose `operation` is
//! an Interaction operation and which has at least one Interaction body member
//! (`model_call`, `model_result`, `tool_call`, `tool_result`, `input_request`,
//! `input_response`, `steer`). Anything else is a **kernel** Signal and is left to the
//! kernel's parsers ([`crate::kernel::engine_signal`]). The body-member test is what separates
//! the kernel's own `{"operation":"wait_opened","key":..}` opening from the Interaction's
//! `wait_opened` payload, which only ever travels *inside* such an opening.
//!
//! A recognized envelope is decoded strictly; a malformed one is an error, never a kernel
//! Signal. An envelope that is not a Signal the Execution can receive (an Effect payload, a
//! top-level `wait_opened`) is an error too. The caller decides what is expected in its phase:
//! for example an Interaction envelope where a kernel Signal was expected is an error.

use super::error::{ErrorKind, InteractionError};
use super::protocol::{InputResponse, ModelResult, Operation, Steer, ToolCallSettlement, BODY_MEMBERS};
use super::wire::Wire;
use crate::chat::Message;
use crate::json::Json;
use crate::kernel::ids::{SignalId, WaitId};
use crate::kernel::signal::{Signal, SignalRequest};

/// Builds a steer: at least one valid **user** message, unaddressed. Otherwise
/// [`ErrorKind::InvalidSteer`] (including an id in the reserved Engine namespace).
pub fn steer_signal(id: SignalId, messages: Vec<Message>) -> Result<SignalRequest, InteractionError> {
    let payload = Steer { messages }.to_payload()?;
    SignalRequest::new(id, None, payload).map_err(|e| InteractionError::new(ErrorKind::InvalidSteer, e.to_string()))
}

/// Builds the answer to the tool input wait `wait_id`. Checks only that `response` fits the
/// payload limits; the tool child validates it against its response schema. Deliver it to
/// the *tool child* Process that owns the wait. Errors are
/// [`ErrorKind::InvalidToolInputRequest`].
pub fn tool_input_response_signal(
    id: SignalId,
    wait_id: WaitId,
    response: &Json,
) -> Result<SignalRequest, InteractionError> {
    let payload = InputResponse::new(response)?.to_payload()?;
    SignalRequest::new(id, Some(wait_id), payload)
        .map_err(|e| InteractionError::new(ErrorKind::InvalidToolInputRequest, e.to_string()))
}

/// An admitted steer: its messages and the id that deduplicates it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SteerSignal {
    pub id: SignalId,
    pub messages: Vec<Message>,
}

/// What one incoming Signal is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IncomingSignal<'a> {
    /// A host steer (unaddressed, external).
    Steer(SteerSignal),
    /// The parent's model settlement (unaddressed, status agrees with the result).
    ModelResult(ModelResult),
    /// A tool child's settlement (unaddressed, status `succeeded`).
    ToolResult(ToolCallSettlement),
    /// A host answer to a tool input wait.
    InputResponse { wait_id: WaitId, response: InputResponse },
    /// Not an Interaction envelope: parse it with the kernel's Engine Signal parsers.
    Kernel(&'a Signal),
}

impl IncomingSignal<'_> {
    pub fn is_steer(&self) -> bool {
        matches!(self, IncomingSignal::Steer(_))
    }
}

/// The operation of an Interaction envelope payload, or `None` for a kernel payload.
pub fn envelope_operation(payload: &Json) -> Option<Operation> {
    let object = payload.as_object()?;
    let op = Operation::from_name(object.get("operation")?.as_str()?)?;
    BODY_MEMBERS.iter().any(|m| object.contains_key(*m)).then_some(op)
}

/// Classifies `signal` (see the module docs for the rule).
pub fn classify_signal(signal: &Signal) -> Result<IncomingSignal<'_>, InteractionError> {
    let payload = signal.payload().value();
    let Some(op) = envelope_operation(payload) else {
        return Ok(IncomingSignal::Kernel(signal));
    };
    let has = |member: &str| payload.get(member).is_some();
    match op {
        Operation::Steer => parse_steer(signal).map(IncomingSignal::Steer),
        Operation::ModelCall if has("model_result") => {
            ModelResult::from_signal(signal).map(IncomingSignal::ModelResult)
        }
        Operation::ToolCall if has("tool_result") => {
            ToolCallSettlement::from_signal(signal).map(IncomingSignal::ToolResult)
        }
        Operation::InputResponse => InputResponse::from_signal(signal)
            .map(|(wait_id, response)| IncomingSignal::InputResponse { wait_id, response }),
        Operation::ModelCall | Operation::ToolCall => {
            Err(InteractionError::invalid_state(format!("signal {} carries a {op} Effect payload", signal.id())))
        }
        Operation::WaitOpened => Err(InteractionError::invalid_state(format!(
            "signal {} carries a wait_opened payload outside a kernel wait opening",
            signal.id()
        ))),
    }
}

fn parse_steer(signal: &Signal) -> Result<SteerSignal, InteractionError> {
    let invalid = |detail: String| InteractionError::new(ErrorKind::InvalidSteer, detail);
    if signal.wait_id().is_some() {
        return Err(invalid(format!("steer {} must not be wait-addressed", signal.id())));
    }
    if signal.engine_owned() || signal.status().is_some() {
        return Err(invalid(format!("steer {} must be an external signal", signal.id())));
    }
    let steer = Steer::from_payload(signal.payload())?;
    Ok(SteerSignal { id: signal.id().clone(), messages: steer.messages })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::{FinishReason, Response, Usage};
    use crate::json::{parse, Payload};
    use crate::kernel::child::{Boundary, ChildWaitSpec, Condition};
    use crate::kernel::engine_signal::{ChildWaitOpened, WaitOpened};
    use crate::kernel::ids::{EffectId, ProcessId, WaitKey};
    use crate::kernel::signal::SettlementStatus;

    fn sid(text: &str) -> SignalId {
        SignalId::parse(text).unwrap()
    }
    fn effect() -> EffectId {
        EffectId::derive(&ProcessId::parse("process:p").unwrap(), 1, 0)
    }
    fn wait() -> WaitId {
        WaitId::of_effect(&effect())
    }
    fn external(id: &str, wait_id: Option<WaitId>, payload: Payload) -> Signal {
        Signal::new(sid(id), wait_id, payload, None).unwrap()
    }
    fn settlement(payload: Payload, status: SettlementStatus) -> Signal {
        Signal::new(SignalId::settlement(&effect()), None, payload, Some(status)).unwrap()
    }
    fn steer_payload() -> Payload {
        Steer { messages: vec![Message::user("stop")] }.to_payload().unwrap()
    }

    #[test]
    fn steer_builder() {
        let r =
            steer_signal(sid("signal:user-correction"), vec![Message::user("Use the newer requirements.")]).unwrap();
        assert_eq!(r.id().as_str(), "signal:user-correction");
        assert!(r.wait_id().is_none());
        assert_eq!(
            r.payload().canonical(),
            r#"{"operation":"steer","steer":{"messages":[{"parts":[{"text":"Use the newer requirements.","type":"text"}],"role":"user"}]}}"#
        );
        let invalid = [
            (sid("s"), vec![]),
            (sid("s"), vec![Message::assistant("a")]),
            (sid("s"), vec![Message::user("a"), Message::system("b")]),
            (sid("s"), vec![Message::user("")]),
            (SignalId::settlement(&effect()), vec![Message::user("a")]),
        ];
        for (id, messages) in invalid {
            assert_eq!(steer_signal(id, messages).unwrap_err().kind(), ErrorKind::InvalidSteer);
        }
    }

    #[test]
    fn input_response_builder() {
        let response = parse(br#"{"approved":true,"n":9007199254740993}"#).unwrap();
        let r = tool_input_response_signal(sid("answer-1"), wait(), &response).unwrap();
        assert_eq!(r.wait_id(), Some(&wait()));
        let decoded = InputResponse::from_payload(r.payload()).unwrap();
        assert_eq!(decoded.response.value(), &response);
        // `null` is a JSON value like any other; the schema decides.
        assert!(tool_input_response_signal(sid("answer-2"), wait(), &Json::Null).is_ok());
        let e = tool_input_response_signal(SignalId::settlement(&effect()), wait(), &response).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidToolInputRequest);
        let huge = Json::str("x".repeat(crate::limits::MAX_PAYLOAD_BYTES));
        let e = tool_input_response_signal(sid("answer-3"), wait(), &huge).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidToolInputRequest);
    }

    #[test]
    fn classifies_steers() {
        let s = external("s1", None, steer_payload());
        match classify_signal(&s).unwrap() {
            IncomingSignal::Steer(steer) => {
                assert_eq!(steer.id, sid("s1"));
                assert_eq!(steer.messages, vec![Message::user("stop")]);
            }
            other => panic!("{other:?}"),
        }
        assert!(classify_signal(&s).unwrap().is_steer());
        // Wait-addressed steer.
        let e = classify_signal(&external("s1", Some(wait()), steer_payload())).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidSteer);
        // A steer payload settled as an Effect result is not a host steer.
        let e = classify_signal(&settlement(steer_payload(), SettlementStatus::Succeeded)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidSteer);
        // A malformed steer envelope is an error, not a kernel signal.
        let bad = Payload::from_bytes(br#"{"operation":"steer","steer":{"messages":[]}}"#).unwrap();
        assert_eq!(classify_signal(&external("s1", None, bad)).unwrap_err().kind(), ErrorKind::InvalidSteer);
        let extra = Payload::from_bytes(
            br#"{"operation":"steer","steer":{"messages":[{"role":"user","parts":[{"type":"text","text":"a"}]}]},"x":1}"#,
        )
        .unwrap();
        assert_eq!(classify_signal(&external("s1", None, extra)).unwrap_err().kind(), ErrorKind::InvalidSteer);
    }

    #[test]
    fn classifies_model_results() {
        let ok = ModelResult::response(Response::new(Message::assistant("hi"), FinishReason::Stop, Usage::default()));
        let s = settlement(ok.to_payload().unwrap(), SettlementStatus::Succeeded);
        assert_eq!(classify_signal(&s).unwrap(), IncomingSignal::ModelResult(ok.clone()));
        // Status must agree with the result.
        assert!(classify_signal(&settlement(ok.to_payload().unwrap(), SettlementStatus::Failed)).is_err());
        let failed = ModelResult::provider_error("boom");
        assert!(classify_signal(&settlement(failed.to_payload().unwrap(), SettlementStatus::Succeeded)).is_err());
        assert!(classify_signal(&settlement(failed.to_payload().unwrap(), SettlementStatus::Failed)).is_ok());
        // A host cannot forge a settlement: no status.
        let e = classify_signal(&external("s1", None, ok.to_payload().unwrap())).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidExecutionState);
        // A wait-addressed settlement.
        assert!(classify_signal(&external("s1", Some(wait()), ok.to_payload().unwrap())).is_err());
    }

    #[test]
    fn classifies_tool_results_and_input_responses() {
        let settled = ToolCallSettlement::Result(super::super::protocol::SettledToolResult::new(
            crate::chat::ToolResult::error("c", "t", "boom"),
            false,
        ));
        let s = settlement(settled.to_payload().unwrap(), SettlementStatus::Succeeded);
        assert_eq!(classify_signal(&s).unwrap(), IncomingSignal::ToolResult(settled.clone()));
        assert!(classify_signal(&settlement(settled.to_payload().unwrap(), SettlementStatus::Failed)).is_err());

        let answer = InputResponse::new(&Json::Bool(true)).unwrap();
        let s = external("a1", Some(wait()), answer.to_payload().unwrap());
        assert_eq!(
            classify_signal(&s).unwrap(),
            IncomingSignal::InputResponse { wait_id: wait(), response: answer.clone() }
        );
        let e = classify_signal(&external("a1", None, answer.to_payload().unwrap())).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidToolInputRequest);
    }

    #[test]
    fn effect_payloads_and_bare_wait_openings_are_errors() {
        let effect_payload =
            Payload::from_bytes(br#"{"operation":"model_call","model_call":{"model_call_sequence":1}}"#).unwrap();
        assert!(classify_signal(&settlement(effect_payload, SettlementStatus::Succeeded)).is_err());
        let tool_effect = Payload::from_bytes(br#"{"operation":"tool_call","tool_call":{}}"#).unwrap();
        assert!(classify_signal(&settlement(tool_effect, SettlementStatus::Succeeded)).is_err());
        let bare = Payload::from_bytes(br#"{"operation":"wait_opened","input_request":{}}"#).unwrap();
        assert!(classify_signal(&external("s", Some(wait()), bare)).is_err());
    }

    #[test]
    fn kernel_signals_pass_through() {
        // The kernel's own wait opening shares the `wait_opened` operation name.
        let key = WaitKey::parse("interaction.input.x").unwrap();
        let opening_payload = Payload::from_json(WaitOpened::payload_json(&key, Some(&steer_payload()))).unwrap();
        let opening = Signal::new(SignalId::wait_opening(&wait()), Some(wait()), opening_payload, None).unwrap();
        assert_eq!(classify_signal(&opening).unwrap(), IncomingSignal::Kernel(&opening));
        let spec = ChildWaitSpec {
            key,
            children: vec![ProcessId::parse("process:c").unwrap()],
            boundary: Boundary::SubtreeDrained,
            condition: Condition::Any,
        };
        let child_opening = Signal::new(
            SignalId::wait_opening(&wait()),
            Some(wait()),
            Payload::from_json(ChildWaitOpened::payload_json(&spec)).unwrap(),
            None,
        )
        .unwrap();
        assert!(matches!(classify_signal(&child_opening).unwrap(), IncomingSignal::Kernel(_)));
        // Arbitrary payloads (a host resolving an unknown Effect with junk) are kernel-side too.
        for junk in [&b"null"[..], b"[1]", br#"{"operation":"steer"}"#, br#"{"operation":7,"steer":{}}"#] {
            let s = settlement(Payload::from_bytes(junk).unwrap(), SettlementStatus::Succeeded);
            assert!(matches!(classify_signal(&s).unwrap(), IncomingSignal::Kernel(_)), "{junk:?}");
        }
        assert_eq!(envelope_operation(&parse(br#"{"operation":"steer","steer":1}"#).unwrap()), Some(Operation::Steer));
    }
}
