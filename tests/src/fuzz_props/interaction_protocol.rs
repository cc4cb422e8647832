//! Fuzz target `interaction_protocol`: every Interaction payload a Dispatcher, a tool child, a
//! host or a store can hand the strategy, and the classification of incoming Signals
//! (`interaction::signals`).
//!
//! Properties (a panic means one broke): decoding never panics; an accepted value re-encodes
//! canonically and decodes to an equal value with identical bytes; and each accepted value
//! agrees with the code that consumes it:
//! * Effects go through the real Dispatchers of [`super::interaction_world`]: a model call
//!   settles with a model result whose status agrees, a tool call with a succeeded tool
//!   settlement that answers the call or pauses one step further (or the Effect is Unknown);
//! * settlements and answers survive Signal classification as the same value;
//! * host builders (steer, input response) produce exactly the accepted payload;
//! * inputs and outputs satisfy the descriptor schemas the kernel checks them against, and a
//!   Start input starts the Definitions at the documented state.

use super::interaction_world::{fuzz_world, InteractionWorld};
use super::round_trip;
use keel::chat::Accumulator;
use keel::interaction::artifact::Artifact;
use keel::interaction::output::Output;
use keel::interaction::protocol::{
    InputResponse, InteractionInput, ModelCallEffect, ModelResponseDelta, ModelResult, SettledToolResult, Steer,
    ToolCallEffect, ToolCallInput, ToolCallSettlement, ToolCheckpoint, WaitOpenedPayload,
};
use keel::interaction::signals::{classify_signal, envelope_operation, steer_signal, tool_input_response_signal, IncomingSignal};
use keel::interaction::state::{ParentState, ToolCallState};
use keel::interaction::tool_child::decode_tool_child_output;
use keel::interaction::wire::Wire;
use keel::json::{self, Payload, ToJson};
use keel::kernel::binding::Deployment;
use keel::kernel::dispatcher::{DispatchContext, DispatchError, EffectRequest};
use keel::kernel::effect::Settlement;
use keel::kernel::engine_signal::WaitOpened;
use keel::kernel::ids::{EffectId, IncarnationId, ProcessId, SignalId, WaitId, WaitKey};
use keel::kernel::relation::Relation;
use keel::kernel::signal::{SettlementStatus, Signal};
use keel::kernel::waist::StepContext;
use keel::limits::MAX_TOOL_INPUT_PAUSES;

/// The selector byte of [`interaction_protocol`] (modulo the length): what the JSON is.
pub const PROTOCOL_TYPES: &[&str] = &[
    "ModelCallEffect",
    "ModelResult",
    "ToolCallEffect",
    "ToolCallSettlement",
    "SettledToolResult",
    "ToolCallInput",
    "ToolCheckpoint",
    "WaitOpenedPayload",
    "InputResponse",
    "Steer",
    "ModelResponseDelta",
    "InteractionInput",
    "Output",
    "Artifact",
    // A whole kernel Signal, classified as an Interaction Execution receives it.
    "Signal",
];

/// First byte selects a [`PROTOCOL_TYPES`] entry, the rest is JSON for it.
pub fn interaction_protocol(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else { return };
    let Ok(value) = json::parse(rest) else { return };
    let world = fuzz_world();
    match usize::from(selector) % PROTOCOL_TYPES.len() {
        0 => {
            if let Some(effect) = round_trip::<ModelCallEffect>(&value) {
                dispatch_model_call(world, &effect);
            }
        }
        1 => {
            if let Some(result) = round_trip::<ModelResult>(&value) {
                let signal = settlement_signal(&result.to_payload().expect("a decoded result encodes"), result.status());
                assert_eq!(classify_signal(&signal).ok(), Some(IncomingSignal::ModelResult(result.clone())));
                let wrong = match result.status() {
                    SettlementStatus::Succeeded => SettlementStatus::Failed,
                    SettlementStatus::Failed => SettlementStatus::Succeeded,
                };
                assert!(ModelResult::from_signal(&settlement_signal(signal.payload(), wrong)).is_err(), "status must agree");
            }
        }
        2 => {
            if let Some(effect) = round_trip::<ToolCallEffect>(&value) {
                dispatch_tool_call(world, &effect);
            }
        }
        3 => {
            if let Some(settlement) = round_trip::<ToolCallSettlement>(&value) {
                let signal = settlement_signal(&settlement.to_payload().expect("encodes"), SettlementStatus::Succeeded);
                assert_eq!(classify_signal(&signal).ok(), Some(IncomingSignal::ToolResult(settlement)));
            }
        }
        4 => {
            if let Some(settled) = round_trip::<SettledToolResult>(&value) {
                let payload = settled.to_payload().expect("encodes");
                assert_eq!(decode_tool_child_output(&payload).ok().as_ref(), Some(&settled));
                // The tool child completes with it, so it satisfies the child's output schema.
                let schema = world.tool_child.definition().descriptor().output_schema();
                assert!(schema.validate(payload.value()).is_ok(), "a tool call result satisfies TOOL_CALL_RESULT_SCHEMA");
            }
        }
        5 => {
            if let Some(input) = round_trip::<ToolCallInput>(&value) {
                start_tool_child(world, &input);
            }
        }
        6 => {
            if let Some(checkpoint) = round_trip::<ToolCheckpoint>(&value) {
                let next = ToolCheckpoint::next(Some(&checkpoint), checkpoint.input_request.clone());
                match next {
                    Some(n) => assert_eq!(n.pause_count, checkpoint.pause_count + 1),
                    None => assert_eq!(checkpoint.pause_count, MAX_TOOL_INPUT_PAUSES, "only the last pause has no next"),
                }
            }
        }
        7 => {
            if let Some(payload) = round_trip::<WaitOpenedPayload>(&value) {
                let echoed = payload.to_payload().expect("encodes");
                let key = WaitKey::parse("interaction.input.fuzz").expect("static key");
                let wait = WaitId::of_effect(&effect_id());
                let opening = Payload::from_json(WaitOpened::payload_json(&key, Some(&echoed)));
                let Ok(opening) = opening else { return }; // the echo can exceed the payload limit
                let signal = Signal::new(SignalId::wait_opening(&wait), Some(wait.clone()), opening, None)
                    .expect("a wait opening signal");
                let opened = WaitOpenedPayload::from_signal(&signal).unwrap_or_else(|e| panic!("the kernel's opening parses: {e}"));
                assert_eq!((opened.wait_id, opened.key, opened.payload), (wait, key, payload));
                // Inside the kernel's opening it is a kernel Signal, never an Interaction one.
                assert!(matches!(classify_signal(&signal), Ok(IncomingSignal::Kernel(_))));
            }
        }
        8 => {
            if let Some(answer) = round_trip::<InputResponse>(&value) {
                let wait = WaitId::of_effect(&effect_id());
                let id = SignalId::external("signal:answer").expect("static id");
                let request = tool_input_response_signal(id.clone(), wait.clone(), answer.response.value())
                    .unwrap_or_else(|e| panic!("an accepted answer can be sent: {e}"));
                assert_eq!(request.payload().canonical(), answer.to_payload().expect("encodes").canonical());
                let signal = Signal::new(id, Some(wait.clone()), request.payload().clone(), None).expect("an answer signal");
                assert_eq!(classify_signal(&signal).ok(), Some(IncomingSignal::InputResponse { wait_id: wait, response: answer }));
            }
        }
        9 => {
            if let Some(steer) = round_trip::<Steer>(&value) {
                let id = SignalId::external("signal:steer").expect("static id");
                let request = steer_signal(id.clone(), steer.messages.clone()).unwrap_or_else(|e| panic!("an accepted steer can be sent: {e}"));
                assert_eq!(request.payload().canonical(), steer.to_payload().expect("encodes").canonical());
                let signal = Signal::new(id, None, request.payload().clone(), None).expect("a steer signal");
                match classify_signal(&signal) {
                    Ok(IncomingSignal::Steer(s)) => assert_eq!(s.messages, steer.messages),
                    other => panic!("a steer classifies as a steer: {other:?}"),
                }
            }
        }
        10 => {
            if let Some(delta) = round_trip::<ModelResponseDelta>(&value) {
                let mut acc = Accumulator::new();
                if acc.push(&delta.response_delta).is_ok() {
                    let _ = acc.finish();
                }
            }
        }
        11 => {
            if let Some(input) = round_trip::<InteractionInput>(&value) {
                start_interaction(world, &input);
            }
        }
        12 => {
            if let Some(output) = round_trip::<Output>(&value) {
                let schema = world.complete.definition().descriptor().output_schema();
                assert!(schema.validate(&output.to_json()).is_ok(), "an Output satisfies the descriptor's output schema");
            }
        }
        13 => drop(round_trip::<Artifact>(&value)),
        _ => {
            if let Some(signal) = round_trip::<Signal>(&value) {
                classify(&signal);
            }
        }
    }
}

fn root() -> ProcessId {
    ProcessId::root_from_hex(&format!("{:032x}", 7)).expect("fixed root")
}

fn effect_id() -> EffectId {
    EffectId::derive(&root(), 3, 0)
}

/// The settlement Signal of [`effect_id`].
fn settlement_signal(payload: &Payload, status: SettlementStatus) -> Signal {
    Signal::new(SignalId::settlement(&effect_id()), None, payload.clone(), Some(status)).expect("a settlement signal")
}

fn request(deployment: &Deployment, payload: Payload) -> EffectRequest {
    EffectRequest {
        incarnation: IncarnationId::from_hex(&format!("{:032x}", 9)).expect("fixed incarnation"),
        deployment_ref: deployment.reference().clone(),
        process_id: root(),
        relation: Relation::root(root()),
        step_sequence: 3,
        batch_index: 0,
        effect_id: effect_id(),
        attempt_id: None,
        payload,
        // A decoded effect names its context by digest only; without the declaring Step's
        // segments the model Dispatcher leaves it Unknown.
        segments: Vec::new(),
    }
}

fn dispatch(deployment: &Deployment, payload: Payload) -> Result<Settlement, DispatchError> {
    let Some(dispatcher) = deployment.dispatcher() else { panic!("the world's deployments have dispatchers") };
    let cx = DispatchContext { cancel: Default::default(), deltas: None };
    futures::executor::block_on(dispatcher.dispatch(request(deployment, payload), cx))
}

/// A model call through both roots' model Dispatchers: a definite outcome is a model result
/// whose status is the settlement's; anything else leaves the Effect Unknown.
fn dispatch_model_call(world: &InteractionWorld, effect: &ModelCallEffect) {
    let payload = effect.to_payload().expect("a decoded effect encodes");
    for root in [&world.complete, &world.stream] {
        let Ok(settlement) = dispatch(root, payload.clone()) else { continue };
        let result = ModelResult::from_signal(&settlement_signal(&settlement.payload, settlement.status))
            .unwrap_or_else(|e| panic!("the model Dispatcher settles with a model result: {e}"));
        if let ModelResult::Response { replacement_messages: Some(messages), .. } = &result {
            assert!(!messages.is_empty());
        }
    }
}

/// A tool call through the ToolSet's Dispatcher: a succeeded settlement that answers the call,
/// or a checkpoint one pause further; anything else leaves the Effect Unknown.
fn dispatch_tool_call(world: &InteractionWorld, effect: &ToolCallEffect) {
    let Ok(settlement) = dispatch(&world.tool_child, effect.to_payload().expect("a decoded effect encodes")) else { return };
    assert_eq!(settlement.status, SettlementStatus::Succeeded, "tool settlements always succeed");
    match ToolCallSettlement::from_payload(&settlement.payload) {
        Ok(ToolCallSettlement::Result(settled)) => {
            assert!(settled.result.answers(&effect.input.call), "the result answers the call");
        }
        Ok(ToolCallSettlement::Checkpoint(checkpoint)) => {
            let previous = effect.resume.as_ref().map_or(0, |r| r.checkpoint.pause_count);
            assert_eq!(checkpoint.pause_count, previous + 1, "each pause counts one further");
        }
        Err(e) => panic!("the tool Dispatcher settles with a tool settlement: {e}"),
    }
}

/// A tool call input satisfies the child's input schema (the kernel checks it before start)
/// and starts the tool child in `ready`.
fn start_tool_child(world: &InteractionWorld, input: &ToolCallInput) {
    let payload = input.to_payload().expect("a decoded input encodes");
    let definition = world.tool_child.definition();
    assert!(definition.descriptor().input_schema().validate(payload.value()).is_ok(), "satisfies TOOL_CALL_INPUT_SCHEMA");
    let started = definition.start(&payload).unwrap_or_else(|e| panic!("a valid tool call starts a tool child: {e}"));
    let state = started.snapshot().unwrap_or_else(|e| panic!("a started tool child snapshots: {e}"));
    let expected = ToolCallState::start(input.clone()).to_execution_state().expect("the start state encodes");
    assert_eq!(state.to_json().to_canonical_bytes(), expected.to_json().to_canonical_bytes());
}

/// A Start input satisfies the descriptor's input schema and starts both roots in
/// `ready_model` with the input as the WorkingContext.
fn start_interaction(world: &InteractionWorld, input: &InteractionInput) {
    let payload = input.to_payload().expect("a decoded input encodes");
    for root in [&world.complete, &world.stream] {
        let definition = root.definition();
        assert!(definition.descriptor().input_schema().validate(payload.value()).is_ok(), "satisfies the input schema");
        let started = definition.start(&payload).unwrap_or_else(|e| panic!("a valid input starts the Interaction: {e}"));
        let state = started.snapshot().unwrap_or_else(|e| panic!("a started Interaction snapshots: {e}"));
        let expected = ParentState::start(input).to_execution_state().expect("the start state encodes");
        assert_eq!(state.to_json().to_canonical_bytes(), expected.to_json().to_canonical_bytes());
        let restored = definition.restore(&StepContext::default(), &state);
        assert!(restored.is_ok(), "the start state restores");
    }
}

/// Classification: a recognized envelope is exactly the Signal's payload; anything else is
/// left to the kernel; and every typed parser agrees with the classifier.
fn classify(signal: &Signal) {
    let payload = signal.payload();
    let same = |encoded: Result<Payload, _>| {
        let encoded: Payload = encoded.unwrap_or_else(|e: keel::interaction::InteractionError| panic!("a classified value encodes: {e}"));
        assert_eq!(encoded.canonical(), payload.canonical(), "the classified value is the payload");
    };
    match classify_signal(signal) {
        Ok(IncomingSignal::Steer(steer)) => {
            same(Steer { messages: steer.messages }.to_payload());
            assert_eq!(&steer.id, signal.id());
            assert!(signal.wait_id().is_none() && signal.status().is_none() && !signal.engine_owned());
        }
        Ok(IncomingSignal::ModelResult(result)) => {
            same(result.to_payload());
            assert_eq!(signal.status(), Some(result.status()));
        }
        Ok(IncomingSignal::ToolResult(settlement)) => {
            same(settlement.to_payload());
            assert_eq!(signal.status(), Some(SettlementStatus::Succeeded));
        }
        Ok(IncomingSignal::InputResponse { wait_id, response }) => {
            same(response.to_payload());
            assert_eq!(signal.wait_id(), Some(&wait_id));
        }
        Ok(IncomingSignal::Kernel(kernel)) => {
            assert_eq!(kernel, signal);
            assert!(envelope_operation(payload.value()).is_none(), "an Interaction envelope is never a kernel Signal");
        }
        Err(_) => assert!(envelope_operation(payload.value()).is_some(), "only Interaction envelopes are refused"),
    }
    // The tool child parses its wait openings directly.
    if let Ok(opened) = WaitOpenedPayload::from_signal(signal) {
        assert_eq!(signal.wait_id(), Some(&opened.wait_id));
        let echoed = opened.payload.to_payload().expect("encodes");
        let rendered = WaitOpened::payload_json(&opened.key, Some(&echoed));
        assert_eq!(rendered.to_canonical_string(), payload.canonical(), "the opening re-renders");
    }
}
