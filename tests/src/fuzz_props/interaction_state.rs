//! Fuzz target `interaction_state`: the Interaction's serialized states as a store hands them
//! back on restore — the parent state (`"interaction"`) and the tool-child state
//! (`"interaction.tool_call"`) — decoded, put through the restore checks of the real
//! Definitions of [`super::interaction_world`], and stepped over a Signal window.
//!
//! Properties (a panic means one broke):
//! * decoding never panics; an accepted state re-encodes canonically and decodes to an equal
//!   value with identical bytes;
//! * the Definition's `restore` accepts exactly what `restore_state` (decode + the restore rules
//!   against its configuration) accepts, and restore → snapshot is byte-stable: the snapshot is the
//!   canonical re-encoding, and restoring it gives that snapshot again;
//! * a Step never panics and is deterministic (a twin restored from the same state steps to
//!   the same Transition and state); a failed Step (error or `fail`) leaves the state
//!   untouched; a successful one consumes at most its window, its Transition round-trips, every
//!   Effect it declares is a valid payload of its kind, a completion's output satisfies the
//!   output schema, and its new state restores byte-stably.

use super::interaction_world::{fuzz_world, InteractionWorld};
use super::round_trip;
use keel::interaction::definition::Definition;
use keel::interaction::output::Output;
use keel::interaction::protocol::{ModelCallEffect, SettledToolResult, ToolCallEffect, ToolCallInput, WaitOpenedPayload};
use keel::interaction::state::{ParentState, ToolCallState};
use keel::interaction::wire::Wire;
use keel::json::{self, Json, ObjectReader, ToJson};
use keel::kernel::effect::{Effect, FrameworkEffect};
use keel::kernel::signal::Signal;
use keel::kernel::transition::Transition;
use keel::kernel::waist::{self, ExecutionState, StepContext};
use std::sync::Arc;

/// The selector byte of [`interaction_state`] (modulo the length): what the JSON is.
pub const STATE_SELECTORS: &[&str] = &[
    // The payload of a parent state.
    "ParentState",
    // The payload of a tool-child state.
    "ToolCallState",
    // A whole `{kind, payload}` execution state, offered to every Definition.
    "ExecutionState",
    // `{"state":ExecutionState,"signals":[Signal]}`: restore, then one Step over the window.
    "Step",
];

/// First byte selects a [`STATE_SELECTORS`] entry, the rest is JSON for it.
pub fn interaction_state(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else { return };
    let Ok(value) = json::parse(rest) else { return };
    let world = fuzz_world();
    match usize::from(selector) % STATE_SELECTORS.len() {
        0 => {
            if let Some(state) = round_trip::<ParentState>(&value) {
                let encoded = state.to_execution_state().unwrap_or_else(|e| panic!("a decoded parent state encodes: {e}"));
                // As a stored state the messages are segments named by the payload's head.
                check_restores(world, &encoded);
            }
            // Offered as stored (not re-encoded), so non-canonical spellings reach restore too.
            if let Some(stored) = stored_state(ParentState::KIND, &value) {
                check_restores(world, &stored);
            }
        }
        1 => {
            if let Some(state) = round_trip::<ToolCallState>(&value) {
                state.to_execution_state().unwrap_or_else(|e| panic!("a decoded tool call state encodes: {e}"));
                if state.checkpoint.is_some() {
                    // Derived keys hash the model-supplied call id: always valid identity text.
                    state.input_wait_key().unwrap_or_else(|e| panic!("a checkpointed state has an input wait key: {e}"));
                }
            }
            if let Some(stored) = stored_state(ToolCallState::KIND, &value) {
                check_restores(world, &stored);
            }
        }
        2 => {
            if let Some(state) = round_trip::<ExecutionState>(&value) {
                check_restores(world, &state);
            }
        }
        _ => {
            let Some((state, window)) = step_input(&value) else { return };
            for definition in definitions(world) {
                step_once(world, definition.as_ref(), &state, &window);
            }
        }
    }
}

/// `value` as the payload of a stored state of `kind` (`None` past the payload limits).
fn stored_state(kind: &str, value: &Json) -> Option<ExecutionState> {
    let kind = keel::text::QualifiedName::parse(kind).expect("the state kinds are qualified names");
    Some(ExecutionState { kind, payload: keel::json::Payload::from_json(value.clone()).ok()?, segments: Vec::new() })
}

/// Every Definition a state can be offered to: the two roots and the tool child.
fn definitions(world: &InteractionWorld) -> Vec<Arc<dyn waist::Definition>> {
    let mut all: Vec<Arc<dyn waist::Definition>> =
        world.definitions.iter().map(|d| Arc::new(d.clone()) as Arc<dyn waist::Definition>).collect();
    all.push(world.tool_child.definition().clone());
    all
}

fn snapshot_bytes(state: &ExecutionState) -> Vec<u8> {
    state.to_json().to_canonical_bytes()
}

/// `state` as JSON without the members a failing Step may add to: `usage` and `spending`.
fn without_spent(state: &ExecutionState) -> keel::json::Json {
    let mut json = state.to_json();
    if let keel::json::Json::Object(state) = &mut json {
        if let Some(keel::json::Json::Object(payload)) = state.get_mut("payload") {
            payload.remove("usage");
            payload.remove("spending");
        }
    }
    json
}

/// `state` (any kind) against every Definition: `restore` agrees with the typed decoders and
/// the restore checks, and restore → snapshot is byte-stable.
fn check_restores(world: &InteractionWorld, state: &ExecutionState) {
    let cx = StepContext::default();
    for definition in &world.definitions {
        let checked = definition.restore_state(state);
        let restored = waist::Definition::restore(definition, &cx, state);
        assert_eq!(checked.is_ok(), restored.is_ok(), "restore and restore_state agree: {:?}", checked.err());
        if let Ok(parent) = checked {
            assert_eq!(ParentState::from_execution_state(state).ok().as_ref(), Some(&parent), "restore_state decodes like the codec");
            check_rules_agree(definition, &parent);
        }
        if let Ok(execution) = restored {
            restore_is_stable(definition, execution.as_ref(), state);
        }
    }
    let tool_child = world.tool_child.definition();
    match tool_child.restore(&cx, state) {
        Ok(execution) => {
            let decoded = ToolCallState::from_execution_state(state);
            assert!(decoded.is_ok(), "the tool child restores only tool call states: {:?}", decoded.err());
            restore_is_stable(tool_child.as_ref(), execution.as_ref(), state);
        }
        Err(_) => assert!(ToolCallState::from_execution_state(state).is_err(), "the tool child restores every tool call state"),
    }
}

/// The Definition is one implementation of `StateRules`: validating through it must agree.
fn check_rules_agree(definition: &Definition, parent: &ParentState) {
    assert!(parent.validate_structure().is_ok());
    assert!(parent.validate_against(definition).is_ok(), "restore_state accepted it, so the rules do");
    assert!(parent.model_call_count <= definition.max_model_calls());
}

/// snapshot(restore(s)) is the canonical re-encoding of `s`, and a fixed point.
fn restore_is_stable(definition: &dyn waist::Definition, execution: &dyn waist::Execution, state: &ExecutionState) {
    let snapshot = execution.snapshot().unwrap_or_else(|e| panic!("a restored execution snapshots: {e}"));
    assert_eq!(snapshot.kind, state.kind);
    let canonical = canonical_state(state);
    assert_eq!(snapshot_bytes(&snapshot), snapshot_bytes(&canonical), "restore → snapshot is the canonical re-encoding");
    let again = definition
        .restore(&StepContext::default(), &snapshot)
        .unwrap_or_else(|e| panic!("a snapshot of a restored execution restores: {e}"));
    let second = again.snapshot().unwrap_or_else(|e| panic!("snapshots again: {e}"));
    assert_eq!(snapshot_bytes(&second), snapshot_bytes(&snapshot), "restore → snapshot is a fixed point");
}

/// The state with its payload re-encoded by the typed codec of its kind.
fn canonical_state(state: &ExecutionState) -> ExecutionState {
    let encoded = match state.kind.as_str() {
        ParentState::KIND => ParentState::from_execution_state(state).and_then(|s| s.to_execution_state()),
        ToolCallState::KIND => ToolCallState::from_execution_state(state).and_then(|s| s.to_execution_state()),
        other => panic!("restored a state of foreign kind {other}"),
    };
    encoded.unwrap_or_else(|e| panic!("a restorable state decodes and encodes: {e}"))
}

/// `{"state":ExecutionState,"signals":[Signal]}`.
fn step_input(value: &Json) -> Option<(ExecutionState, Vec<Signal>)> {
    let mut r = ObjectReader::new(value).ok()?;
    let state = r.required::<ExecutionState>("state").ok()?;
    let signals = r.required::<Vec<Signal>>("signals").ok()?;
    r.finish().ok()?;
    Some((state, signals))
}

/// Restores `state` under `definition` (if it accepts it) and runs one Step over `window`.
fn step_once(world: &InteractionWorld, definition: &dyn waist::Definition, state: &ExecutionState, window: &[Signal]) {
    let cx = StepContext::default();
    let Ok(mut execution) = definition.restore(&cx, state) else { return };
    let before = execution.snapshot().unwrap_or_else(|e| panic!("a restored execution snapshots: {e}"));
    let outcome = execution.step(&cx, window);
    let after = execution.snapshot().unwrap_or_else(|e| panic!("an execution snapshots after any Step: {e}"));
    // Determinism (what restore-before-adopt relies on): an instance restored from the same
    // state steps to the same Transition and the same state.
    let mut twin = definition.restore(&cx, &before).unwrap_or_else(|e| panic!("a snapshot restores: {e}"));
    let twin_outcome = twin.step(&cx, window);
    assert_eq!(
        outcome.as_ref().map(ToJson::to_json).map_err(ToString::to_string),
        twin_outcome.as_ref().map(ToJson::to_json).map_err(ToString::to_string),
        "a restored twin steps alike"
    );
    let twin_after = twin.snapshot().unwrap_or_else(|e| panic!("the twin snapshots: {e}"));
    assert_eq!(snapshot_bytes(&twin_after), snapshot_bytes(&after), "a restored twin ends in the same state");
    let transition = match outcome {
        Ok(t) if !matches!(t, Transition::Fail { .. }) => t,
        Ok(failed) => {
            round_trip::<Transition>(&failed.to_json()).expect("a fail transition round-trips");
            // What the failing Step settled (its tokens, its budget spending) is kept, so the
            // run's usage covers the call that failed it; nothing else changes.
            assert_eq!(without_spent(&after), without_spent(&before), "a failing Step keeps its state but what it spent");
            return;
        }
        Err(_) => {
            assert_eq!(snapshot_bytes(&after), snapshot_bytes(&before), "a Step error keeps the state");
            return;
        }
    };
    assert!(transition.consumed() as usize <= window.len(), "consumed {} of {}", transition.consumed(), window.len());
    assert!(round_trip::<Transition>(&transition.to_json()).is_some(), "the Transition round-trips");
    match &transition {
        Transition::Continue { effects, .. } => {
            for effect in effects {
                check_effect(world, &after, effect);
            }
        }
        Transition::Complete { output, .. } => {
            // The kernel checks the output schema at preparation: a valid state never fails it.
            let schema = definition.descriptor().output_schema();
            assert!(schema.validate(output.value()).is_ok(), "a completing Step's output satisfies the output schema");
            if after.kind.as_str() == ParentState::KIND {
                Output::from_payload(output).unwrap_or_else(|e| panic!("the parent completes with an Output: {e}"));
            } else {
                SettledToolResult::from_payload(output).unwrap_or_else(|e| panic!("a tool child completes with its result: {e}"));
            }
        }
        _ => {}
    }
    let restored = definition.restore(&cx, &after).unwrap_or_else(|e| panic!("the state after a Step restores: {e}"));
    restore_is_stable(definition, restored.as_ref(), &after);
}

/// Every Effect a Step declares is a valid payload of its kind.
fn check_effect(world: &InteractionWorld, state: &ExecutionState, effect: &Effect) {
    let parent = state.kind.as_str() == ParentState::KIND;
    match effect {
        Effect::Dispatcher(payload) if parent => {
            ModelCallEffect::from_payload(payload).unwrap_or_else(|e| panic!("the parent declares model calls: {e}"));
        }
        Effect::Dispatcher(payload) => {
            ToolCallEffect::from_payload(payload).unwrap_or_else(|e| panic!("the tool child declares tool calls: {e}"));
        }
        Effect::Framework(FrameworkEffect::Wait { payload: Some(payload), .. }) if !parent => {
            WaitOpenedPayload::from_payload(payload).unwrap_or_else(|e| panic!("the tool child waits with its request: {e}"));
        }
        Effect::Framework(FrameworkEffect::StartChild(spec)) if spec.deployment_ref == *world.tool_child.reference() => {
            ToolCallInput::from_payload(&spec.input).unwrap_or_else(|e| panic!("a tool child starts with a tool call: {e}"));
        }
        Effect::Framework(FrameworkEffect::StartChild(spec)) => {
            assert_eq!(&spec.deployment_ref, world.worker.reference(), "delegates start the configured worker");
            let schema = world.worker.definition().descriptor().input_schema();
            assert!(schema.validate(spec.input.value()).is_ok(), "delegate input satisfies the worker's schema");
        }
        Effect::Framework(_) => {}
    }
}
