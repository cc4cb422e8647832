//! Real Interaction runs through [`DirectRunner`] on the [`InteractionWorld`]: the source of
//! the captured Interaction corpus (states, Step windows, protocol payloads, tree snapshots).
//!
//! An [`InteractionScenario`] is a model script (see [`super::interaction_world::script_turn`])
//! for one of the roots plus what the host does each time the tree goes idle: steer, answer
//! tool inputs (discovered with `pending_tool_inputs`, as a host would), answer the delegate
//! worker, resolve Unknowns, kill, cancel or restore under a new incarnation.

use super::hosted::{hex, nth, HostedRun};
use super::interaction_world::{InteractionWorld, Recorder, Recording, RootMode};
use keel::chat::{Message, ToolOutput, ToolResult};
use keel::interaction::pending_inputs::pending_tool_inputs;
use keel::interaction::protocol::{
    InteractionInput, ModelCallEffect, ModelResult, SettledToolResult, ToolCallEffect, ToolCallSettlement,
};
use keel::interaction::signals::steer_signal;
use keel::interaction::wire::Wire;
use keel::json::{Json, Payload};
use keel::kernel::capability::CapabilitySet;
use keel::kernel::effect::{Effect, Settlement};
use keel::kernel::ids::ProcessId;
use keel::kernel::owner::{Command, RootConfig};
use keel::kernel::resource::Budget;
use keel::kernel::signal::SettlementStatus;
use keel::kernel::status::Status;
use keel::kernel::tree_limits::TreeLimits;
use std::sync::{Arc, Mutex, PoisonError};

/// What the host does once the tree is idle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Host {
    /// Steers the root with one user message.
    Steer(&'static str),
    /// Answers every pending tool input with this JSON (schema-checked first, like a host).
    AnswerInputs(&'static str),
    /// Answers every waiting delegate worker with this string.
    AnswerWorkers(&'static str),
    /// Settles every Unknown Effect with a plausible result of its own kind.
    ResolveUnknowns,
    /// Kills the n-th Process (snapshot order).
    Kill(u8),
    /// Cancels the n-th Process.
    Cancel(u8),
    /// Restores the head in a fresh owner under a new incarnation.
    Restore,
}

/// One run: the root, the model script (a JSON array, as text) and the host's actions.
#[derive(Clone, Debug)]
pub struct InteractionScenario {
    pub name: &'static str,
    pub root: RootMode,
    pub script: &'static str,
    pub host: Vec<Host>,
}

/// What a run left behind.
#[derive(Debug, Default)]
pub struct Capture {
    /// Every acknowledged cut, in commit order.
    pub cuts: Vec<Vec<u8>>,
    /// Every Step the Interaction Processes ran, and the streamed deltas.
    pub recording: Recording,
}

/// The root of every Interaction run.
pub fn interaction_root_id() -> ProcessId {
    ProcessId::root_from_hex(&hex(2)).expect("fixed root id")
}

/// The Start input of `scenario`: a system message and the script as the first user message.
pub fn start_input(scenario: &InteractionScenario) -> Option<Payload> {
    InteractionInput::new(vec![Message::system("Answer briefly."), Message::user(scenario.script)]).to_payload().ok()
}

/// Runs `scenario` on a recording world.
pub fn capture(scenario: &InteractionScenario) -> Capture {
    let recorder: Recorder = Arc::new(Mutex::new(Recording::default()));
    // The world's configuration is fixed: failing to build it is a bug in this crate.
    let world = InteractionWorld::new(Some(recorder.clone())).unwrap_or_else(|e| panic!("the Interaction world: {e}"));
    let cuts = run_in(&world, scenario);
    drop(world);
    let recording = std::mem::take(&mut *recorder.lock().unwrap_or_else(PoisonError::into_inner));
    Capture { cuts, recording }
}

/// Runs `scenario` on `world` and returns every acknowledged cut, in commit order.
pub fn run_in(world: &InteractionWorld, scenario: &InteractionScenario) -> Vec<Vec<u8>> {
    let root = world.root(scenario.root).clone();
    let config = RootConfig { budget: Budget::unlimited(), capabilities: CapabilitySet::empty(), limits: TreeLimits::default() };
    let Some(input) = start_input(scenario) else { return Vec::new() };
    let Some(mut run) = HostedRun::start(world.resolver.clone(), root, input, interaction_root_id(), 200, config) else {
        return Vec::new();
    };
    for action in &scenario.host {
        let Some(head) = run.head() else { break };
        match action {
            Host::Steer(text) => {
                if let Some(request) = run.next_signal_id().and_then(|id| steer_signal(id, vec![Message::user(*text)]).ok()) {
                    run.command(Command::Deliver { process: head.root_id.clone(), requests: vec![request] });
                }
            }
            Host::AnswerInputs(answer) => {
                let Ok(answer) = keel::json::parse(answer.as_bytes()) else { continue };
                for pending in pending_tool_inputs(&head).unwrap_or_default() {
                    let Some(request) = run.next_signal_id().and_then(|id| pending.response_signal(id, &answer).ok()) else { continue };
                    run.command(Command::Deliver { process: pending.process_id().clone(), requests: vec![request] });
                }
            }
            Host::AnswerWorkers(text) => {
                for p in head.processes().iter().filter(|p| p.status == Status::Waiting && p.deployment_ref == *world.worker.reference()) {
                    let Some(wait) = p.current_wait_id.clone() else { continue };
                    if let Some(request) = run.signal(Some(wait), &Json::str(*text)) {
                        run.command(Command::Deliver { process: p.id.clone(), requests: vec![request] });
                    }
                }
            }
            Host::ResolveUnknowns => {
                for p in head.processes() {
                    let Some(prepared) = &p.prepared else { continue };
                    for effect in prepared.unknown_ids() {
                        let payload = prepared.effects.iter().find(|e| e.id == effect).map(|e| &e.effect);
                        let Some(settlement) = payload.and_then(resolution) else { continue };
                        run.command(Command::Resolve { process: p.id.clone(), effect, settlement });
                    }
                }
            }
            Host::Kill(n) | Host::Cancel(n) => {
                let Some(process) = nth(&head, *n) else { continue };
                let reason = "host request".to_owned();
                let command = if matches!(action, Host::Kill(_)) { Command::Kill { process, reason } } else { Command::Cancel { process, reason } };
                run.command(command);
            }
            Host::Restore => {
                if !run.restore(&head) {
                    break;
                }
            }
        }
        run.run_to_idle();
    }
    run.finish()
}

/// What a host that knows the truth settles an Unknown Effect with: a successful result for a
/// tool call, a final answer for a model call.
fn resolution(effect: &Effect) -> Option<Settlement> {
    let Effect::Dispatcher(payload) = effect else { return None };
    if let Ok(call) = ToolCallEffect::from_payload(payload) {
        let c = &call.input.call;
        let result = SettledToolResult::new(ToolResult::ok(c.id.clone(), c.name.clone(), ToolOutput::text("resolved by the host")), false);
        return ToolCallSettlement::Result(result).to_settlement().ok();
    }
    if ModelCallEffect::from_payload(payload).is_ok() {
        let response = keel::chat::Response::new(
            Message::assistant("resolved by the host"),
            keel::chat::FinishReason::Stop,
            keel::chat::Usage::new(1, 1),
        );
        return ModelResult::response(response).to_settlement().ok();
    }
    Some(Settlement { status: SettlementStatus::Failed, payload: Payload::null() })
}


/// The fixed Interaction scenarios the corpus is captured from: one per feature of the loop.
pub fn interaction_scenarios() -> Vec<InteractionScenario> {
    use Host::*;
    use RootMode::*;
    let s = |name, root, script, host: Vec<Host>| InteractionScenario { name, root, script, host };
    vec![
        s("answer", Complete, r#"["Paris is sunny."]"#, vec![]),
        s("one-tool", Complete, r#"[{"calls":[["c1","weather","{\"city\":\"Oslo\"}"]]},"Oslo: 18C"]"#, vec![]),
        s(
            "window",
            Complete,
            r#"[{"calls":[["c1","shared","{}"],["c2","keyed","{\"key\":\"a\"}"],["c3","keyed","{\"key\":\"a\"}"],["c4","weather","{}"],["c5","shared","{}"]]},"all done"]"#,
            vec![],
        ),
        s("direct", Complete, r#"[{"calls":[["c1","direct","{\"x\":1}"],["c2","direct","{\"x\":2}"]]}]"#, vec![]),
        s("advertise", Complete, r#"[{"calls":[["c1","secret","{}"]]},{"calls":[["c2","hidden","{}"]]},"found it"]"#, vec![]),
        s(
            "bad-calls",
            Complete,
            r#"[{"calls":[["c1","nope","{}"],["c2","weather","not json"],["c3","hidden","{}"],["c4","fail","{}"]]},"recovered"]"#,
            vec![],
        ),
        s(
            "input",
            Complete,
            r#"[{"calls":[["c1","ask","{\"times\":2}"],["c2","shared","{}"]]},"thanks"]"#,
            vec![AnswerInputs(r#""blue""#), Restore, AnswerInputs(r#""green""#)],
        ),
        s(
            "input-steer",
            Complete,
            r#"[{"calls":[["c1","ask","{}"]]},"steered"]"#,
            vec![Steer("Prefer short answers."), Steer("And be polite."), AnswerInputs(r#""yes""#)],
        ),
        s("input-kill", Complete, r#"[{"calls":[["c1","ask","{}"],["c2","ask","{}"]]}]"#, vec![Kill(0)]),
        s("input-cancel", Complete, r#"[{"calls":[["c1","ask","{}"]]}]"#, vec![Restore, Cancel(0)]),
        s(
            "delegate",
            Complete,
            r#"[{"calls":[["d1","worker","{\"text\":\"hello\"}"],["d2","worker","{\"text\":\"fail\"}"]]},"delegated"]"#,
            vec![],
        ),
        s(
            "delegate-wait",
            Complete,
            r#"[{"calls":[["d1","worker","{\"text\":\"wait\"}"]]},{"calls":[["c1","weather","{}"]]},"waited"]"#,
            vec![Steer("Hurry up."), Restore, AnswerWorkers("approved")],
        ),
        s("delegate-bad-args", Complete, r#"[{"calls":[["d1","worker","{\"text\":7}"]]},"ok"]"#, vec![]),
        s("reject-once", Complete, r#"["REJECT this","accepted answer"]"#, vec![]),
        s("provider-error", Complete, r#"[{"calls":[["c1","weather","{}"]]},{"provider_error":"rate limited"}]"#, vec![]),
        s("host-error", Complete, r#"[{"host_error":"credentials expired"}]"#, vec![]),
        s("truncated", Complete, r#"[{"length":"The answer is"}]"#, vec![]),
        s(
            "too-many-calls",
            Complete,
            r#"[{"calls":[["a","weather","{}"]]},{"calls":[["b","weather","{}"]]},{"calls":[["c","weather","{}"]]},{"calls":[["d","weather","{}"]]},{"calls":[["e","weather","{}"]]},{"calls":[["f","weather","{}"]]},"never"]"#,
            vec![],
        ),
        s("lost-resolve", Complete, r#"[{"calls":[["c1","lost","{}"],["c2","shared","{}"]]},"resolved"]"#, vec![Restore, ResolveUnknowns]),
        s("lost-kill", Complete, r#"[{"calls":[["c1","lost","{}"]]}]"#, vec![Kill(1)]),
        s(
            "stream",
            Stream,
            r#"[{"calls":[["c1","secret","{}"],["c2","weather","{\"city\":\"Rome\"}"]]},{"calls":[["c3","hidden","{}"]]},{"calls":[["c4","direct","{}"]]}]"#,
            vec![],
        ),
        s(
            "stream-input",
            Stream,
            r#"[{"calls":[["c1","ask","{}"],["c2","shared","{}"]]},{"calls":[["c3","weather","{}"]]},"streamed"]"#,
            vec![Steer("Keep it short."), AnswerInputs(r#""red""#), Restore],
        ),
        s("stream-error", Stream, r#"[{"provider_error":"stream broke"}]"#, vec![]),
    ]
}
