//! The captured Interaction corpus: every acknowledged cut of the fixed Interaction scenarios
//! ([`super::interaction_runs::interaction_scenarios`]) taken apart into inputs of the
//! `interaction_state`, `interaction_protocol` and `tree_snapshot` targets.
//!
//! Sources, per cut and per Process: committed and candidate states; declared Effects (model
//! calls, tool calls, wait payloads, tool child inputs); settlements; pending Signals; terminal
//! outputs; Artifacts. From the recording wrappers: every Step's (state, window) and every
//! streamed delta. Distinct inputs are then thinned to a few per kind, round-robin over their
//! shapes, so the committed corpus stays within the replay limits.

use super::interaction_protocol::PROTOCOL_TYPES;
use super::interaction_runs::{capture, interaction_scenarios, start_input};
use super::interaction_state::STATE_SELECTORS;
use keel::interaction::protocol::{
    InputResponse, ModelCallEffect, ModelResponseDelta, ModelResult, SettledToolResult, Steer, ToolCallEffect, ToolCallInput,
    ToolCallSettlement, WaitOpenedPayload,
};
use keel::interaction::output::Output;
use keel::interaction::signals::envelope_operation;
use keel::interaction::state::{ParentState, ToolCallState};
use keel::interaction::wire::Wire;
use keel::json::{Digest, Json, Payload, ToJson};
use keel::kernel::effect::{Effect, FrameworkEffect};
use keel::kernel::signal::Signal;
use keel::kernel::snapshot::TreeSnapshot;
use keel::kernel::waist::ExecutionState;
use std::collections::BTreeMap;

/// One corpus file to write: `fuzz/corpus/<target>/<name>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CorpusFile {
    pub target: &'static str,
    pub name: String,
    pub bytes: Vec<u8>,
}

/// How many captured inputs of one selector the committed corpus keeps.
const PER_STATE_SELECTOR: usize = 18;
const PER_PROTOCOL_TYPE: usize = 4;
/// How many captured Interaction tree snapshots `tree_snapshot` keeps.
const SNAPSHOTS: usize = 40;

/// A captured input before thinning: its selector, a shape class to spread the picks over,
/// the scenario it came from, and the bytes after the selector.
struct Found {
    selector: usize,
    class: String,
    scenario: &'static str,
    json: Vec<u8>,
}

fn selector_of(list: &[&str], name: &str) -> usize {
    list.iter().position(|n| *n == name).unwrap_or_else(|| panic!("no selector named {name}"))
}

/// The corpus files of every Interaction scenario (deterministic: same files every time).
pub fn interaction_corpus() -> Vec<CorpusFile> {
    let mut states: Vec<Found> = Vec::new();
    let mut protocol: Vec<Found> = Vec::new();
    let mut snapshots: Vec<(&'static str, Vec<u8>)> = Vec::new();
    for scenario in interaction_scenarios() {
        let name = scenario.name;
        let captured = capture(&scenario);
        let mut p = |type_name: &str, class: &str, value: Json| {
            protocol.push(Found { selector: selector_of(PROTOCOL_TYPES, type_name), class: class.to_owned(), scenario: name, json: value.to_canonical_bytes() });
        };
        if let Some(input) = start_input(&scenario) {
            p("InteractionInput", "start", input.value().clone());
        }
        for delta in &captured.recording.deltas {
            if ModelResponseDelta::from_payload(delta).is_ok() {
                p("ModelResponseDelta", "delta", delta.value().clone());
            }
        }
        for step in &captured.recording.steps {
            for signal in &step.window {
                signal_inputs(signal, &mut p);
            }
            states.push(Found {
                selector: selector_of(STATE_SELECTORS, "Step"),
                class: format!("{}:{}", step.state.kind.as_str(), phase_of(&step.state)),
                scenario: name,
                json: step.to_json().to_canonical_bytes(),
            });
        }
        for cut in &captured.cuts {
            let Ok(snap) = TreeSnapshot::decode(cut) else { continue };
            if !snapshots.iter().any(|(_, c)| c == cut) {
                snapshots.push((name, cut.clone()));
            }
            for process in snap.processes() {
                let mut found_state = |state: &ExecutionState| {
                    let (selector, class) = match state.kind.as_str() {
                        ParentState::KIND => ("ParentState", phase_of(state)),
                        ToolCallState::KIND => ("ToolCallState", phase_of(state)),
                        _ => return,
                    };
                    // A parent state's typed codec is its full form (messages inline); its
                    // stored payload names the messages, which are the state's segments.
                    let payload = match ParentState::from_execution_state(state) {
                        Ok(parent) if state.kind.as_str() == ParentState::KIND => parent.to_json().to_canonical_bytes(),
                        _ => state.payload.value().to_canonical_bytes(),
                    };
                    states.push(Found { selector: selector_of(STATE_SELECTORS, selector), class: class.clone(), scenario: name, json: payload });
                    let whole = state.to_json().to_canonical_bytes();
                    states.push(Found { selector: selector_of(STATE_SELECTORS, "ExecutionState"), class, scenario: name, json: whole });
                };
                found_state(&process.committed_state);
                if let Some(prepared) = &process.prepared {
                    found_state(&prepared.candidate_state);
                    for effect in &prepared.effects {
                        effect_inputs(&effect.effect, &mut p);
                    }
                }
                for (_, settlement) in process.settlements() {
                    payload_inputs(&settlement.payload, &mut p);
                }
                for signal in process.mailbox.pending_window() {
                    signal_inputs(&signal, &mut p);
                }
                if let Some(output) = process.finish.as_ref().and_then(|f| f.output.as_ref()) {
                    if Output::from_payload(output).is_ok() {
                        p("Output", "output", output.value().clone());
                    } else if SettledToolResult::from_payload(output).is_ok() {
                        p("SettledToolResult", "output", output.value().clone());
                    }
                }
                if let Ok(parent) = ParentState::from_execution_state(&process.committed_state) {
                    for artifact in &parent.artifact_records {
                        p("Artifact", "artifact", artifact.to_json());
                    }
                    let invocations = parent.tool_round.iter().flat_map(|r| r.child_batch.iter()).flat_map(|b| b.invocations.iter());
                    for settled in invocations.filter_map(|i| i.result.as_ref()) {
                        p("SettledToolResult", "round", settled.to_json());
                    }
                }
                if let Ok(child) = ToolCallState::from_execution_state(&process.committed_state) {
                    p("ToolCallInput", "call", child.call.to_json());
                    if let Some(checkpoint) = &child.checkpoint {
                        p("ToolCheckpoint", "checkpoint", checkpoint.to_json());
                    }
                }
            }
        }
    }
    let mut files = thin("interaction_state", STATE_SELECTORS, states, PER_STATE_SELECTOR);
    files.extend(thin("interaction_protocol", PROTOCOL_TYPES, protocol, PER_PROTOCOL_TYPE));
    files.extend(spread(snapshots, SNAPSHOTS).into_iter().map(|(scenario, bytes)| CorpusFile {
        target: "tree_snapshot",
        name: format!("real-interaction-{scenario}-{}", short_digest(&bytes)),
        bytes,
    }));
    files
}

/// The shape of an Interaction state: its phase and which optional parts it holds.
fn phase_of(state: &ExecutionState) -> String {
    let v = state.payload.value();
    let mut class = v.get("phase").and_then(Json::as_str).unwrap_or("other").to_owned();
    for member in ["pending_steer", "artifact_records", "advertised_tool_names", "checkpoint", "wait_id", "result"] {
        if v.get(member).is_some() {
            class.push('+');
            class.push_str(member);
        }
    }
    if let Some(kind) = v.get("tool_round").and_then(|r| r.get("child_batch")).and_then(|b| b.get("kind")).and_then(Json::as_str) {
        class.push_str("+batch:");
        class.push_str(kind);
    }
    class
}

type Sink<'a> = dyn FnMut(&str, &str, Json) + 'a;

/// A declared Effect's payload, by what it is.
fn effect_inputs(effect: &Effect, p: &mut Sink<'_>) {
    match effect {
        Effect::Dispatcher(payload) => {
            if ModelCallEffect::from_payload(payload).is_ok() {
                p("ModelCallEffect", "effect", payload.value().clone());
            } else if ToolCallEffect::from_payload(payload).is_ok() {
                let class = if payload.value().get("tool_call").and_then(|b| b.get("checkpoint")).is_some() { "resume" } else { "first" };
                p("ToolCallEffect", class, payload.value().clone());
            }
        }
        Effect::Framework(FrameworkEffect::Wait { payload: Some(payload), .. }) => {
            if WaitOpenedPayload::from_payload(payload).is_ok() {
                p("WaitOpenedPayload", "wait", payload.value().clone());
            }
        }
        Effect::Framework(FrameworkEffect::StartChild(spec)) => {
            if ToolCallInput::from_payload(&spec.input).is_ok() {
                p("ToolCallInput", "start", spec.input.value().clone());
            }
        }
        Effect::Framework(_) => {}
    }
}

/// A settlement or Signal payload, by what it is.
fn payload_inputs(payload: &Payload, p: &mut Sink<'_>) {
    if let Ok(result) = ModelResult::from_payload(payload) {
        let class = match result {
            ModelResult::Response { replacement_messages: Some(_), .. } => "reduced",
            ModelResult::Response { .. } => "response",
            ModelResult::Error(_) => "error",
            ModelResult::HostError(_) => "host_error",
            ModelResult::OutOfTime { .. } => "out_of_time",
        };
        p("ModelResult", class, payload.value().clone());
    } else if let Ok(settlement) = ToolCallSettlement::from_payload(payload) {
        let class = if matches!(settlement, ToolCallSettlement::Checkpoint(_)) { "checkpoint" } else { "result" };
        p("ToolCallSettlement", class, payload.value().clone());
    } else if Steer::from_payload(payload).is_ok() {
        p("Steer", "steer", payload.value().clone());
    } else if InputResponse::from_payload(payload).is_ok() {
        p("InputResponse", "answer", payload.value().clone());
    }
}

/// A whole Signal (classified by the target) and its payload.
fn signal_inputs(signal: &Signal, p: &mut Sink<'_>) {
    let value = signal.payload().value();
    let class = match envelope_operation(value) {
        Some(op) => op.as_str().to_owned(),
        None => value.get("operation").and_then(Json::as_str).unwrap_or("kernel").to_owned(),
    };
    p("Signal", &class, signal.to_json());
    payload_inputs(signal.payload(), p);
    // The tool child's wait payload travels only inside the kernel's opening.
    if let Ok(opened) = WaitOpenedPayload::from_signal(signal) {
        p("WaitOpenedPayload", "echo", opened.payload.to_json());
    }
}

/// Distinct inputs, at most `cap` per selector, round-robin over their classes (first-seen
/// order), named `real-<scenario>-<selector>-<digest>`.
fn thin(target: &'static str, selectors: &[&str], found: Vec<Found>, cap: usize) -> Vec<CorpusFile> {
    let mut files = Vec::new();
    for (selector, selector_name) in selectors.iter().enumerate() {
        let mut classes: BTreeMap<usize, Vec<Found>> = BTreeMap::new();
        let mut order: Vec<String> = Vec::new();
        let mut seen: Vec<Vec<u8>> = Vec::new();
        for f in found.iter().filter(|f| f.selector == selector) {
            if seen.contains(&f.json) {
                continue;
            }
            seen.push(f.json.clone());
            let index = order.iter().position(|c| *c == f.class).unwrap_or_else(|| {
                order.push(f.class.clone());
                order.len() - 1
            });
            classes.entry(index).or_default().push(Found { selector, class: f.class.clone(), scenario: f.scenario, json: f.json.clone() });
        }
        let picked = round_robin(classes.into_values().collect(), cap);
        for f in picked {
            let selector_byte = u8::try_from(selector).expect("few selectors");
            let mut bytes = vec![selector_byte];
            bytes.extend_from_slice(&f.json);
            let name = format!("real-{}-{}-{}", f.scenario, selector_name.to_lowercase(), short_digest(&bytes));
            files.push(CorpusFile { target, name, bytes });
        }
    }
    files
}

/// Up to `cap` items taken one per group in turn; within a group, spread out (middle first,
/// then the middles of the halves...) so the picks span the whole run, not just its start.
fn round_robin<T>(groups: Vec<Vec<T>>, cap: usize) -> Vec<T> {
    let mut iters: Vec<std::vec::IntoIter<T>> = groups.into_iter().map(|g| spread_out(g).into_iter()).collect();
    let mut out = Vec::new();
    while out.len() < cap {
        let before = out.len();
        for it in iters.iter_mut() {
            if out.len() < cap {
                out.extend(it.next());
            }
        }
        if out.len() == before {
            break;
        }
    }
    out
}

/// Up to `cap` snapshots spread over the scenarios (round-robin in scenario order).
fn spread(snapshots: Vec<(&'static str, Vec<u8>)>, cap: usize) -> Vec<(&'static str, Vec<u8>)> {
    let mut groups: Vec<Vec<(&'static str, Vec<u8>)>> = Vec::new();
    for s in snapshots {
        match groups.iter_mut().find(|g| g.first().is_some_and(|f| f.0 == s.0)) {
            Some(g) => g.push(s),
            None => groups.push(vec![s]),
        }
    }
    round_robin(groups, cap)
}

fn spread_out<T>(items: Vec<T>) -> Vec<T> {
    let mut slots: Vec<Option<T>> = items.into_iter().map(Some).collect();
    let mut out = Vec::new();
    let mut intervals = std::collections::VecDeque::from([(0, slots.len())]);
    while let Some((lo, hi)) = intervals.pop_front() {
        if lo >= hi {
            continue;
        }
        let mid = lo + (hi - lo) / 2;
        out.extend(slots[mid].take());
        intervals.push_back((lo, mid));
        intervals.push_back((mid + 1, hi));
    }
    out
}

fn short_digest(bytes: &[u8]) -> String {
    Digest::of(bytes).hex()[..12].to_owned()
}
