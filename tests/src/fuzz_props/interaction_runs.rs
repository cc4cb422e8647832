//! Real Interaction runs through [`DirectRunner`] on the [`InteractionWorld`]: the source of
//! the captured Interaction corpus (states, Step windows, protocol payloads, tree snapshots).
//!
//! An [`InteractionScenario`] is a model script (see [`super::interaction_world::script_turn`])
//! for one of the roots plus what the host does each time the tree goes idle: steer, answer
//! tool inputs (discovered with `pending_tool_inputs`, as a host would), answer the delegate
//! worker, resolve Unknowns, kill, cancel or restore under a new incarnation.

use super::interaction_world::{InteractionWorld, Recorder, Recording, RootMode};
use super::runs::now;
use keel::chat::{Message, ToolOutput, ToolResult};
use keel::interaction::pending_inputs::pending_tool_inputs;
use keel::interaction::protocol::{
    InteractionInput, ModelCallEffect, ModelResult, SettledToolResult, ToolCallEffect, ToolCallSettlement,
};
use keel::interaction::signals::steer_signal;
use keel::interaction::wire::Wire;
use keel::json::{Json, Payload};
use keel::kernel::capability::CapabilitySet;
use keel::kernel::commit::{Committer, MemoryCommitter};
use keel::kernel::direct::DirectRunner;
use keel::kernel::effect::{Effect, Settlement};
use keel::kernel::ids::{IncarnationId, ProcessId, SignalId};
use keel::kernel::owner::{Command, Owner, RootConfig};
use keel::kernel::resource::Budget;
use keel::kernel::signal::{SettlementStatus, SignalRequest};
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

fn hex(n: u64) -> String {
    format!("{n:032x}")
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
    let committer = Arc::new(MemoryCommitter::new());
    let root = world.root(scenario.root).clone();
    let config = RootConfig { budget: Budget::unlimited(), capabilities: CapabilitySet::empty(), limits: TreeLimits::default() };
    let Some(input) = start_input(scenario) else { return Vec::new() };
    let Ok(owner) = Owner::start(
        world.resolver.clone(),
        root.clone(),
        input,
        interaction_root_id(),
        IncarnationId::from_hex(&hex(200)).expect("fixed incarnation"),
        config,
        now(),
    ) else {
        return Vec::new();
    };
    let mut cuts = Vec::new();
    let mut runner = DirectRunner::new(owner, committer.clone() as Arc<dyn Committer>, now());
    runner.run_to_idle();
    let mut signals = 0u64;
    let mut incarnation = 200u64;
    for action in &scenario.host {
        if runner.owner.stopped().is_some() {
            break;
        }
        let Some(head) = runner.owner.head().cloned() else { break };
        let mut next_id = || {
            signals += 1;
            SignalId::external(&format!("signal:host-{signals}")).ok()
        };
        match action {
            Host::Steer(text) => {
                if let Some(request) = next_id().and_then(|id| steer_signal(id, vec![Message::user(*text)]).ok()) {
                    let _ = runner.command(Command::Deliver { process: head.root_id.clone(), requests: vec![request] });
                }
            }
            Host::AnswerInputs(answer) => {
                let Ok(answer) = keel::json::parse(answer.as_bytes()) else { continue };
                for pending in pending_tool_inputs(&head).unwrap_or_default() {
                    let Some(request) = next_id().and_then(|id| pending.response_signal(id, &answer).ok()) else { continue };
                    let _ = runner.command(Command::Deliver { process: pending.process_id().clone(), requests: vec![request] });
                }
            }
            Host::AnswerWorkers(text) => {
                for p in head.processes().iter().filter(|p| p.status == Status::Waiting && p.deployment_ref == *world.worker.reference()) {
                    let Some(wait) = p.current_wait_id.clone() else { continue };
                    let request = next_id()
                        .zip(Payload::from_json(Json::str(*text)).ok())
                        .and_then(|(id, payload)| SignalRequest::new(id, Some(wait), payload).ok());
                    if let Some(request) = request {
                        let _ = runner.command(Command::Deliver { process: p.id.clone(), requests: vec![request] });
                    }
                }
            }
            Host::ResolveUnknowns => {
                for p in head.processes() {
                    let Some(prepared) = &p.prepared else { continue };
                    for effect in prepared.unknown_ids() {
                        let payload = prepared.effects.iter().find(|e| e.id == effect).map(|e| &e.effect);
                        let Some(settlement) = payload.and_then(resolution) else { continue };
                        let _ = runner.command(Command::Resolve { process: p.id.clone(), effect, settlement });
                    }
                }
            }
            Host::Kill(n) | Host::Cancel(n) => {
                let processes = head.processes();
                let Some(p) = processes.get(usize::from(*n) % processes.len().max(1)) else { continue };
                let (process, reason) = (p.id.clone(), "host request".to_owned());
                let command =
                    if matches!(action, Host::Kill(_)) { Command::Kill { process, reason } } else { Command::Cancel { process, reason } };
                let _ = runner.command(command);
            }
            Host::Restore => {
                incarnation += 1;
                collect(&runner, &mut cuts);
                let restored = IncarnationId::from_hex(&hex(incarnation))
                    .ok()
                    .and_then(|inc| Owner::restore(world.resolver.clone(), root.clone(), &head, inc, now()).ok());
                let Some(owner) = restored else { break };
                runner = DirectRunner::new(owner, committer.clone() as Arc<dyn Committer>, now());
            }
        }
        runner.run_to_idle();
    }
    collect(&runner, &mut cuts);
    cuts
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

fn collect(runner: &DirectRunner, cuts: &mut Vec<Vec<u8>>) {
    cuts.extend(runner.commits.iter().filter(|(_, ok)| *ok).map(|(c, _)| c.cut().bytes.to_vec()));
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
