//! ToolSet, tool child and tool Dispatcher through the real owner: the tool-child Deployment
//! runs as a root Process (DirectRunner + MemoryCommitter) with small real tools.

use super::attribution::ToolInvocation;
use super::error::ErrorKind;
use super::ids::tool_input_wait_key;
use super::pending_inputs::pending_tool_inputs;
use super::protocol::{SettledToolResult, ToolCallInput, ToolCallSettlement};
use super::signals::tool_input_response_signal;
use super::state::{ToolCallState, ToolChildPhase};
use super::tool_child::{decode_tool_child_output, ToolChildDefinition};
use super::toolset::{ToolObserver, ToolSet, ToolSetConfig, ToolSettlement};
use super::window::ToolCatalog;
use super::wire::Wire;
use crate::chat::{ToolCall, ToolOutput, ToolResult};
use crate::env::{BoxFuture, Timestamp};
use crate::json::{parse, Digest, Json, Payload};
use crate::kernel::binding::DeploymentSet;
use crate::kernel::capability::CapabilitySet;
use crate::kernel::commit::{Committer, MemoryCommitter};
use crate::kernel::direct::DirectRunner;
use crate::kernel::ids::{EffectId, IncarnationId, ProcessId, SignalId, WaitId};
use crate::kernel::owner::{Command, Owner, Publication, Reply, RootConfig};
use crate::kernel::resource::Budget;
use crate::kernel::result::ProcessResult;
use crate::kernel::signal::{SettlementStatus, Signal, SignalRequest};
use crate::kernel::snapshot::TreeSnapshot;
use crate::kernel::status::Status;
use crate::kernel::tree_limits::TreeLimits;
use crate::kernel::waist::{Definition, StepContext, StepError};
use crate::tool::{require_tool_input, Invocation, Tool, ToolContext, ToolDefinitionInput, ToolError};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

type Behavior = Arc<dyn Fn(&Invocation, &ToolContext) -> Result<ToolOutput, ToolError> + Send + Sync>;

struct TestTool {
    name: &'static str,
    direct: bool,
    behavior: Behavior,
    calls: Arc<AtomicU64>,
}

impl Tool for TestTool {
    fn spec(&self) -> ToolDefinitionInput {
        ToolDefinitionInput {
            name: self.name.into(),
            description: "A test tool.".into(),
            input_schema: parse(br#"{"type":"object","properties":{"x":{"type":"integer"}},"additionalProperties":false}"#)
                .unwrap(),
        }
    }
    fn call<'a>(&'a self, invocation: &'a Invocation, cx: ToolContext) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        // The behavior runs while the future is polled, so its panics happen inside the poll.
        Box::pin(async move { (self.behavior)(invocation, &cx) })
    }
    fn returns_direct_result(&self) -> bool {
        self.direct
    }
}

fn tool(name: &'static str, direct: bool, behavior: Behavior) -> (Arc<dyn Tool>, Arc<AtomicU64>) {
    let calls = Arc::new(AtomicU64::new(0));
    (Arc::new(TestTool { name, direct, behavior, calls: calls.clone() }), calls)
}

fn ok(text: &'static str) -> Behavior {
    Arc::new(move |_, _| Ok(ToolOutput::text(text)))
}

#[derive(Default)]
struct Recorder {
    events: Mutex<Vec<String>>,
    panic_started: bool,
    panic_settled: bool,
}

impl ToolObserver for Recorder {
    fn on_tool_started(&self, invocation: &ToolInvocation) {
        self.events.lock().unwrap().push(format!("started {} step {}", invocation.tool_call().name, invocation.step_sequence()));
        assert!(!self.panic_started, "observer panic (started)");
    }
    fn on_tool_settled(&self, invocation: &ToolInvocation, settlement: &ToolSettlement) {
        let what = match settlement {
            ToolSettlement { result: Some(r), .. } => format!("result {}", r.output.content),
            ToolSettlement { input_required: true, .. } => "input_required".to_owned(),
            ToolSettlement { unknown: true, failure: Some(_), .. } => "unknown".to_owned(),
            other => format!("invalid {other:?}"),
        };
        self.events.lock().unwrap().push(format!("settled {} {what}", invocation.tool_call().name));
        assert!(!self.panic_settled, "observer panic (settled)");
    }
}

impl Recorder {
    fn events(&self) -> Vec<String> {
        self.events.lock().unwrap().clone()
    }
}

fn now() -> Timestamp {
    Timestamp::from_millis(1_700_000_000_000).unwrap()
}

fn hex(n: u64) -> String {
    format!("{n:032x}")
}

struct Harness {
    set: ToolSet,
    resolver: Arc<DeploymentSet>,
    committer: Arc<MemoryCommitter>,
}

fn config(name: &str, tools: Vec<Arc<dyn Tool>>, deferred: Vec<Arc<dyn Tool>>, observer: Option<Arc<dyn ToolObserver>>) -> ToolSetConfig {
    ToolSetConfig {
        name: name.into(),
        description: "Test tools.".into(),
        tools,
        deferred_tools: deferred,
        observer,
        implementation_digest: Digest::of(b"keel.test.tools"),
        configuration_digest: Digest::of(name.as_bytes()),
    }
}

fn harness(tools: Vec<Arc<dyn Tool>>, deferred: Vec<Arc<dyn Tool>>, observer: Option<Arc<dyn ToolObserver>>) -> Harness {
    let set = ToolSet::new(config("keel.test.tools", tools, deferred, observer)).unwrap();
    let resolver = Arc::new(DeploymentSet::new().with(set.deployment().clone()));
    Harness { set, resolver, committer: Arc::new(MemoryCommitter::new()) }
}

fn input(name: &str, arguments: &str) -> ToolCallInput {
    ToolCallInput { model_call_sequence: 1, tool_call_index: 0, call: ToolCall::new("call_1", name, arguments) }
}

impl Harness {
    fn root(&self) -> ProcessId {
        ProcessId::root_from_hex(&hex(1)).unwrap()
    }

    fn start(&self, call: &ToolCallInput) -> DirectRunner {
        let owner = Owner::start(
            self.resolver.clone(),
            self.set.deployment().clone(),
            call.to_payload().unwrap(),
            self.root(),
            IncarnationId::from_hex(&hex(100)).unwrap(),
            RootConfig { budget: Budget::unlimited(), capabilities: CapabilitySet::empty(), limits: TreeLimits::default() },
            now(),
        )
        .expect("start");
        DirectRunner::new(owner, self.committer.clone() as Arc<dyn Committer>, now())
    }

    fn run(&self, call: &ToolCallInput) -> DirectRunner {
        let mut r = self.start(call);
        r.run_to_idle();
        r
    }

    fn head(&self) -> TreeSnapshot {
        let head = futures::executor::block_on(self.committer.load_tree(&self.root())).unwrap().expect("head");
        TreeSnapshot::from_cut(&head.cut).expect("head decodes")
    }

    fn restore(&self, incarnation: u64) -> DirectRunner {
        let owner = Owner::restore(
            self.resolver.clone(),
            self.set.deployment().clone(),
            &self.head(),
            IncarnationId::from_hex(&hex(incarnation)).unwrap(),
            now(),
        )
        .expect("restore");
        DirectRunner::new(owner, self.committer.clone() as Arc<dyn Committer>, now())
    }

    fn deliver(&self, r: &mut DirectRunner, process: &ProcessId, request: SignalRequest) -> bool {
        let reply = r.command(Command::Deliver { process: process.clone(), requests: vec![request] });
        matches!(reply, Ok(Reply::Delivered { accepted: true }))
    }
}

fn finished(r: &DirectRunner) -> Option<ProcessResult> {
    let root = r.owner.root_id().clone();
    r.published.iter().find_map(|p| match p {
        Publication::Finished { result } if result.process_id == root => Some(result.clone()),
        _ => None,
    })
}

fn output(r: &DirectRunner) -> SettledToolResult {
    let result = finished(r).expect("finished");
    assert_eq!(result.status(), Status::Completed, "{:?}", result.termination);
    decode_tool_child_output(result.output.as_ref().expect("output")).unwrap()
}

fn signal_id(text: &str) -> SignalId {
    SignalId::parse(text).unwrap()
}

// ---------------------------------------------------------------- ToolSet construction

#[test]
fn toolset_rejects_invalid_configurations() {
    let kind = |c: ToolSetConfig| ToolSet::new(c).map(|_| ()).unwrap_err().kind();
    assert_eq!(kind(config("keel.test.tools", vec![], vec![], None)), ErrorKind::InvalidToolSet, "no tools");
    let dup = || vec![tool("a", false, ok("x")).0];
    assert_eq!(kind(config("keel.test.tools", dup(), dup(), None)), ErrorKind::InvalidToolSet, "duplicate across groups");
    assert_eq!(
        kind(config("keel.test.tools", vec![tool("a", false, ok("x")).0, tool("a", false, ok("y")).0], vec![], None)),
        ErrorKind::InvalidToolSet,
        "duplicate initial"
    );
    assert_eq!(kind(config("keel.test.tools", vec![tool("bad name", false, ok("x")).0], vec![], None)), ErrorKind::InvalidToolSet, "bind");
    assert_eq!(kind(config("Bad Name", dup(), vec![], None)), ErrorKind::InvalidToolSet, "qualified name");
    let mut c = config("keel.test.tools", dup(), vec![], None);
    c.description = String::new();
    assert_eq!(kind(c), ErrorKind::InvalidToolSet, "description");
    let many: Vec<Arc<dyn Tool>> = (0..=crate::limits::MAX_REQUEST_TOOLS)
        .map(|i| {
            let name: &'static str = Box::leak(format!("t{i}").into_boxed_str());
            tool(name, false, ok("x")).0
        })
        .collect();
    assert_eq!(kind(config("keel.test.tools", many, vec![], None)), ErrorKind::InvalidToolSet, "too many tools");
}

#[test]
fn toolset_manifest_keeps_registration_order() {
    let h = harness(
        vec![tool("zeta", false, ok("z")).0, tool("alpha", true, ok("a")).0],
        vec![tool("later", false, ok("l")).0],
        None,
    );
    let names: Vec<String> = h.set.initial_definitions().into_iter().map(|d| d.name).collect();
    assert_eq!(names, ["zeta", "alpha"]);
    assert_eq!(h.set.deferred_definitions().keys().collect::<Vec<_>>(), ["later"]);
    assert!(h.set.entry("later").unwrap().deferred);
    assert!(!h.set.entry("zeta").unwrap().deferred);
    assert!(h.set.entry("alpha").unwrap().bound.returns_direct_result());
    assert!(h.set.tool("later").is_some() && h.set.tool("nope").is_none());
    assert!(!h.set.is_delegate("zeta"));
    assert_eq!(h.set.deployment_ref(), h.set.deployment().reference());
    assert_eq!(h.set.deployment().definition().descriptor().name().as_str(), "keel.test.tools.tool_call");
}

#[test]
fn the_tool_dispatcher_never_replays() {
    use crate::kernel::dispatcher::ReplayPolicy;
    let h = harness(vec![tool("a", false, ok("x")).0], vec![], None);
    let dispatcher = h.set.deployment().dispatcher().cloned().expect("the tool child deployment dispatches");
    let effect = super::protocol::ToolCallEffect {
        input: ToolCallInput { model_call_sequence: 1, tool_call_index: 0, call: ToolCall::new("c", "a", "{}") },
        resume: None,
    };
    for payload in [effect.to_payload().unwrap(), Payload::null(), Payload::from_bytes(b"{\"x\":1}").unwrap()] {
        let policy = dispatcher.policy(&payload);
        assert_eq!(policy.replay, ReplayPolicy::Never);
        assert_eq!(policy.required_capabilities, CapabilitySet::default());
    }
}

#[test]
fn observation_failure_counts_saturate() {
    let h = harness(vec![tool("a", false, ok("x")).0], vec![], None);
    h.set.counters().set(u64::MAX - 1, u64::MAX);
    h.set.counters().record_started_panic();
    h.set.counters().record_started_panic();
    h.set.counters().record_settled_panic();
    let f = h.set.observation_failures();
    assert_eq!((f.tool_started_panics, f.tool_settled_panics), (u64::MAX, u64::MAX));
}

// ---------------------------------------------------------------- results

#[test]
fn success_completes_with_the_result_and_direct_flag() {
    let recorder = Arc::new(Recorder::default());
    let h = harness(
        vec![tool("plain", false, ok("plain out")).0, tool("direct", true, ok("direct out")).0],
        vec![],
        Some(recorder.clone()),
    );
    let r = h.run(&input("plain", r#"{"x":1}"#));
    let out = output(&r);
    assert_eq!(out.result.output.content, "plain out");
    assert!(!out.result.is_error && !out.direct && out.advertised_tool_names.is_empty());
    assert!(out.result.answers(&input("plain", "").call));
    assert_eq!(recorder.events(), ["started plain step 1", "settled plain result plain out"]);

    let h2 = harness(vec![tool("direct", true, ok("direct out")).0], vec![], None);
    assert!(output(&h2.run(&input("direct", ""))).direct, "blank arguments become {{}} and direct is declared");
    let root = h2.head();
    let usage = root.root().usage();
    assert_eq!((usage.committed_steps, usage.prepared_effects, usage.accepted_signals), (2, 1, 1));
}

#[test]
fn ordinary_error_is_a_model_visible_result() {
    let recorder = Arc::new(Recorder::default());
    let (t, _) = tool("fails", true, Arc::new(|_, _| Err(ToolError::failed("disk full"))));
    let h = harness(vec![t], vec![], Some(recorder.clone()));
    let out = output(&h.run(&input("fails", "{}")));
    assert_eq!(out.result.output.content, "error: tool \"fails\" failed: disk full");
    assert!(out.result.is_error);
    assert!(!out.direct, "an error result is never direct");
    assert_eq!(recorder.events(), ["started fails step 1", "settled fails result error: tool \"fails\" failed: disk full"]);
}

#[test]
fn invalid_arguments_never_call_the_tool_or_the_observer() {
    let recorder = Arc::new(Recorder::default());
    let (t, calls) = tool("strict", true, ok("never"));
    let h = harness(vec![t], vec![], Some(recorder.clone()));
    for (n, args) in [r#"{"x":"not a number"}"#, "{not json"].into_iter().enumerate() {
        let mut call = input("strict", args);
        call.call.id = format!("call_{n}");
        let h = Harness { set: h.set.clone(), resolver: h.resolver.clone(), committer: Arc::new(MemoryCommitter::new()) };
        let out = output(&h.run(&call));
        assert!(out.result.output.content.starts_with("error: invalid arguments: "), "{}", out.result.output.content);
        assert!(out.result.is_error && !out.direct);
    }
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    assert!(recorder.events().is_empty());
}

#[test]
fn advertisements_commit_only_with_success() {
    let (adv_ok, _) = tool("adv_ok", false, Arc::new(|_, cx| {
        cx.advertise(&["later"]).unwrap();
        Ok(ToolOutput::text("ok"))
    }));
    let (adv_err, _) = tool("adv_err", false, Arc::new(|_, cx| {
        cx.advertise(&["later"]).unwrap();
        Err(ToolError::failed("no"))
    }));
    let (adv_bad, _) = tool("adv_bad", false, Arc::new(|_, cx| {
        // An initial tool is not deferred: the advertisement is refused and nothing is staged.
        assert!(cx.advertise(&["adv_ok"]).is_err());
        Ok(ToolOutput::text("ok"))
    }));
    let (later, _) = tool("later", false, ok("deferred ran"));
    let tools = vec![adv_ok, adv_err, adv_bad];
    let h = harness(tools, vec![later], None);
    let fresh = || Harness { set: h.set.clone(), resolver: h.resolver.clone(), committer: Arc::new(MemoryCommitter::new()) };
    assert_eq!(output(&fresh().run(&input("adv_ok", "{}"))).advertised_tool_names, ["later"]);
    assert!(output(&fresh().run(&input("adv_err", "{}"))).advertised_tool_names.is_empty());
    assert!(output(&fresh().run(&input("adv_bad", "{}"))).advertised_tool_names.is_empty());
    // Deferred tools are executable without being advertised.
    assert_eq!(output(&fresh().run(&input("later", "{}"))).result.output.content, "deferred ran");
}

#[test]
fn observer_panics_are_counted_and_change_nothing() {
    let recorder = Arc::new(Recorder { panic_started: true, panic_settled: true, ..Recorder::default() });
    let h = harness(vec![tool("a", false, ok("fine")).0], vec![], Some(recorder));
    let out = output(&h.run(&input("a", "{}")));
    assert_eq!(out.result.output.content, "fine");
    let f = h.set.observation_failures();
    assert_eq!((f.tool_started_panics, f.tool_settled_panics), (1, 1));
}

// ---------------------------------------------------------------- unknown outcomes

fn assert_unknown(h: &Harness, r: &DirectRunner) -> EffectId {
    assert!(finished(r).is_none(), "an unknown effect parks the child");
    let head = h.head();
    let unknown = head.root().unknown_effect_ids();
    assert_eq!(unknown.len(), 1, "{unknown:?}");
    assert!(head.root().is_parked());
    unknown[0].clone()
}

#[test]
fn a_panic_is_unknown_until_the_host_resolves_it() {
    let recorder = Arc::new(Recorder::default());
    let (t, _) = tool("boom", false, Arc::new(|_, _| panic!("tool exploded")));
    let h = harness(vec![t], vec![], Some(recorder.clone()));
    let mut r = h.run(&input("boom", "{}"));
    let effect = assert_unknown(&h, &r);
    assert_eq!(recorder.events(), ["started boom step 1", "settled boom unknown"]);

    let resolved = ToolCallSettlement::Result(SettledToolResult::new(
        ToolResult { id: "call_1".into(), name: "boom".into(), output: ToolOutput::text("resolved by host"), is_error: false },
        false,
    ));
    let reply = r.command(Command::Resolve { process: h.root(), effect, settlement: resolved.to_settlement().unwrap() });
    assert!(matches!(reply, Ok(Reply::Resolved)), "{reply:?}");
    r.run_to_idle();
    assert_eq!(output(&r).result.output.content, "resolved by host");
}

#[test]
fn host_failure_cancellation_and_deadline_are_unknown() {
    let errors: [fn() -> ToolError; 3] =
        [|| ToolError::host_failure("db down"), || ToolError::Canceled, || ToolError::DeadlineExceeded];
    for make in errors {
        let recorder = Arc::new(Recorder::default());
        let (t, _) = tool("flaky", false, Arc::new(move |_, _| Err(make())));
        let h = harness(vec![t], vec![], Some(recorder.clone()));
        let r = h.run(&input("flaky", "{}"));
        assert_unknown(&h, &r);
        assert_eq!(recorder.events(), ["started flaky step 1", "settled flaky unknown"]);
    }
}

// ---------------------------------------------------------------- input waits

const SCHEMA: &[u8] = br#"{"type":"string","enum":["red","blue"]}"#;

/// Pauses once (or `pauses` times), then answers with every response it got.
fn asking(pauses: u64) -> Behavior {
    Arc::new(move |_, cx| {
        let step = match cx.continuation() {
            None => 0,
            Some(c) => c.state().value().get("step").and_then(Json::as_u64).unwrap_or(0),
        };
        if step < pauses {
            let state = format!(r#"{{"step":{}}}"#, step + 1);
            return Err(require_tool_input(br#""Pick a color""#, SCHEMA, state.as_bytes()));
        }
        let answer = cx.continuation().map(|c| c.response().value().to_canonical_string()).unwrap_or_default();
        Ok(ToolOutput::text(format!("picked {answer}")))
    })
}

fn answer(h: &Harness, r: &mut DirectRunner, id: &str, value: &str) {
    let pending = pending_tool_inputs(&h.head()).unwrap();
    assert_eq!(pending.len(), 1);
    let request = pending[0].response_signal(signal_id(id), &Json::str(value)).unwrap();
    assert!(h.deliver(r, pending[0].process_id(), request));
    r.run_to_idle();
}

#[test]
fn input_required_waits_and_resumes_with_the_continuation() {
    let recorder = Arc::new(Recorder::default());
    let (t, calls) = tool("ask", false, asking(1));
    let h = harness(vec![t], vec![], Some(recorder.clone()));
    let mut r = h.run(&input("ask", "{}"));
    let head = h.head();
    assert_eq!(head.root().status, Status::Waiting);
    let pending = pending_tool_inputs(&head).unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].process_id(), &h.root());
    assert_eq!(Some(pending[0].wait_id()), head.root().current_wait_id.as_ref());
    assert_eq!(pending[0].prompt().value(), &Json::str("Pick a color"));
    assert_eq!(pending[0].response_schema().value(), &parse(SCHEMA).unwrap());
    assert_eq!(recorder.events(), ["started ask step 1", "settled ask input_required"]);

    answer(&h, &mut r, "signal:answer-1", "red");
    assert_eq!(output(&r).result.output.content, r#"picked "red""#);
    assert_eq!(calls.load(Ordering::SeqCst), 2, "called again from the start");
    assert_eq!(recorder.events()[2], "started ask step 4");
    assert!(pending_tool_inputs(&h.head()).unwrap().is_empty());
}

#[test]
fn consecutive_pauses_count_up_with_fresh_wait_keys() {
    let (t, calls) = tool("ask", false, asking(2));
    let h = harness(vec![t], vec![], None);
    let mut r = h.run(&input("ask", "{}"));
    let first = pending_tool_inputs(&h.head()).unwrap()[0].wait_id().clone();
    let state = ToolCallState::from_execution_state(&h.head().root().committed_state).unwrap();
    assert_eq!(state.checkpoint.as_ref().unwrap().pause_count, 1);

    answer(&h, &mut r, "signal:answer-1", "red");
    assert!(finished(&r).is_none());
    let head = h.head();
    let state = ToolCallState::from_execution_state(&head.root().committed_state).unwrap();
    assert_eq!(state.phase, ToolChildPhase::WaitingInput);
    assert_eq!(state.checkpoint.as_ref().unwrap().pause_count, 2);
    let second = state.wait_id.clone().unwrap();
    assert_ne!(first, second);
    assert_ne!(tool_input_wait_key(1, "call_1", 1).unwrap(), state.input_wait_key().unwrap());

    answer(&h, &mut r, "signal:answer-2", "blue");
    assert_eq!(output(&r).result.output.content, r#"picked "blue""#);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[test]
fn invalid_answers_are_rejected_locally_and_fail_the_child_raw() {
    let (t, calls) = tool("ask", false, asking(1));
    let h = harness(vec![t], vec![], None);
    let mut r = h.run(&input("ask", "{}"));
    let pending = pending_tool_inputs(&h.head()).unwrap().remove(0);
    let err = pending.response_signal(signal_id("signal:bad"), &Json::str("green")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidToolInputRequest);

    let raw = tool_input_response_signal(signal_id("signal:raw"), pending.wait_id().clone(), &Json::str("green")).unwrap();
    assert!(h.deliver(&mut r, pending.process_id(), raw));
    r.run_to_idle();
    let result = finished(&r).expect("finished");
    assert_eq!(result.status(), Status::Failed, "{:?}", result.termination);
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the tool is not re-entered with an invalid answer");
}

#[test]
fn an_answered_pause_has_the_pinned_usage() {
    let (t, _) = tool("ask", false, asking(1));
    let h = harness(vec![t], vec![], None);
    let mut r = h.run(&input("ask", "{}"));
    answer(&h, &mut r, "signal:answer-1", "red");
    assert_eq!(output(&r).result.output.content, r#"picked "red""#);
    let head = h.head();
    let usage = head.root().usage();
    // ready, checkpoint, adopt wait, answer, result; tool_call, wait, tool_call; settlement,
    // opening, answer, settlement.
    assert_eq!((usage.committed_steps, usage.prepared_effects, usage.accepted_signals), (5, 3, 4));
    assert_eq!(head.root().mailbox.cursor(), head.root().mailbox.len(), "no receipt left unconsumed");
}

/// The kernel opens a framework wait and runs the adopting Step in one owner turn, so an
/// answer cannot be admitted in between through the owner; the window that would carry it is
/// exercised on the Execution directly (and through the conformance helper).
#[test]
fn an_early_answer_survives_the_wait_adoption() {
    let d = definition();
    let cx = StepContext::default();
    let call = input("a", "{}");
    let request = crate::tool::ToolInputRequest::new(br#""q""#, SCHEMA, b"null").unwrap();
    let checkpoint = super::protocol::ToolCheckpoint { pause_count: 1, input_request: request.clone() };
    let paused = ToolCallSettlement::Checkpoint(checkpoint);
    let root = ProcessId::root_from_hex(&hex(1)).unwrap();
    let wait = WaitId::of_effect(&EffectId::derive(&root, 2, 0));
    let key = tool_input_wait_key(1, "call_1", 1).unwrap();
    let echoed = super::protocol::WaitOpenedPayload { input_request: request }.to_payload().unwrap();
    let opening = Signal::new(
        SignalId::wait_opening(&wait),
        Some(wait.clone()),
        Payload::from_json(crate::kernel::engine_signal::WaitOpened::payload_json(&key, Some(&echoed))).unwrap(),
        None,
    )
    .unwrap();
    let early = Signal::new(
        signal_id("signal:early"),
        Some(wait.clone()),
        super::protocol::InputResponse::new(&Json::str("red")).unwrap().to_payload().unwrap(),
        None,
    )
    .unwrap();

    let mut e = d.start(&call.to_payload().unwrap()).unwrap();
    e.step(&cx, &[]).unwrap();
    let t = e.step(&cx, &[settlement_signal(1, &paused)]).unwrap();
    assert!(matches!(&t, crate::kernel::transition::Transition::Continue { consumed: 1, effects } if effects.len() == 1));
    let t = e.step(&cx, &[opening.clone(), early.clone()]).unwrap();
    assert_eq!(t, crate::kernel::transition::Transition::Wait { consumed: 1, wait_id: wait.clone() }, "only the opening");
    let t = e.step(&cx, std::slice::from_ref(&early)).unwrap();
    let crate::kernel::transition::Transition::Continue { consumed: 1, effects } = t else { panic!("{t:?}") };
    let crate::kernel::effect::Effect::Dispatcher(payload) = &effects[0] else { panic!() };
    let resumed = super::protocol::ToolCallEffect::from_payload(payload).unwrap();
    assert_eq!(resumed.resume.unwrap().response.value(), &Json::str("red"));

    let suffix = vec![vec![], vec![settlement_signal(1, &paused)], vec![opening, early.clone()], vec![early]];
    crate::kernel::conformance::check_definition(&d, &call.to_payload().unwrap(), &[suffix]).unwrap();
}

#[test]
fn a_restored_waiting_child_takes_its_answer() {
    let (t, calls) = tool("ask", false, asking(1));
    let h = harness(vec![t], vec![], None);
    let r = h.run(&input("ask", "{}"));
    let before = pending_tool_inputs(&h.head()).unwrap().remove(0);
    drop(r);
    let mut r2 = h.restore(200);
    r2.run_to_idle();
    let after = pending_tool_inputs(&h.head()).unwrap().remove(0);
    assert_eq!(before.wait_id(), after.wait_id(), "same WaitId after restore");
    let request = after.response_signal(signal_id("signal:after-restore"), &Json::str("blue")).unwrap();
    assert!(h.deliver(&mut r2, after.process_id(), request));
    r2.run_to_idle();
    assert_eq!(output(&r2).result.output.content, r#"picked "blue""#);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[test]
fn pending_inputs_reject_an_inconsistent_waiting_child() {
    let (t, _) = tool("ask", false, asking(1));
    let h = harness(vec![t], vec![], None);
    let _r = h.run(&input("ask", "{}"));
    let head = h.head();
    let mut root = head.root().clone();
    // The state says waiting_input on one wait while the Process is parked on another.
    let mut state = ToolCallState::from_execution_state(&root.committed_state).unwrap();
    state.wait_id = Some(WaitId::parse("wait:other").unwrap());
    root.committed_state = state.to_execution_state().unwrap();
    let forged = TreeSnapshot::build(head.root_id.clone(), head.incarnation.clone(), head.limits, [root], []).unwrap();
    let err = pending_tool_inputs(&forged).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidPendingToolInput);
}

// ---------------------------------------------------------------- the Definition itself

fn settlement_signal(step: u64, settlement: &ToolCallSettlement) -> Signal {
    let effect = EffectId::derive(&ProcessId::root_from_hex(&hex(1)).unwrap(), step, 0);
    Signal::new(SignalId::settlement(&effect), None, settlement.to_payload().unwrap(), Some(SettlementStatus::Succeeded))
        .unwrap()
}

fn definition() -> ToolChildDefinition {
    ToolChildDefinition::new("keel.test.tool_call", "Runs one tool call.").unwrap()
}

#[test]
fn tool_child_definition_conforms() {
    let call = input("a", "{}");
    let done = ToolCallSettlement::Result(SettledToolResult::new(
        ToolResult { id: "call_1".into(), name: "a".into(), output: ToolOutput::text("x"), is_error: false },
        false,
    ));
    let suffixes = vec![vec![vec![]], vec![vec![], vec![settlement_signal(1, &done)]]];
    crate::kernel::conformance::check_definition(&definition(), &call.to_payload().unwrap(), &suffixes).unwrap();
}

#[test]
fn tool_child_steps_are_strict() {
    let d = definition();
    let cx = StepContext::default();
    let call = input("a", "{}");
    let mut e = d.start(&call.to_payload().unwrap()).unwrap();
    let before = e.snapshot().unwrap();

    // A cancelled Step leaves the state untouched.
    let cancelled = StepContext::default();
    cancelled.cancel.cancel();
    assert_eq!(e.step(&cancelled, &[]), Err(StepError::Canceled));
    assert_eq!(e.snapshot().unwrap(), before);

    // Ready accepts no signals.
    let wrong = ToolCallSettlement::Result(SettledToolResult::new(
        ToolResult { id: "other".into(), name: "a".into(), output: ToolOutput::text("x"), is_error: false },
        false,
    ));
    assert!(e.step(&cx, &[settlement_signal(1, &wrong)]).is_err());
    assert_eq!(e.snapshot().unwrap(), before);
    assert!(e.step(&cx, &[]).is_ok());

    // A result that answers another call is rejected; no signal at all too.
    let awaiting = e.snapshot().unwrap();
    assert!(e.step(&cx, &[settlement_signal(1, &wrong)]).is_err());
    assert!(e.step(&cx, &[]).is_err());
    assert_eq!(e.snapshot().unwrap(), awaiting);

    // A checkpoint must count from 1.
    let request = crate::tool::ToolInputRequest::new(br#""q""#, SCHEMA, b"null").unwrap();
    let skipped = ToolCallSettlement::Checkpoint(super::protocol::ToolCheckpoint { pause_count: 2, input_request: request });
    assert!(e.step(&cx, &[settlement_signal(1, &skipped)]).is_err());
    assert_eq!(e.snapshot().unwrap(), awaiting);

    // Input that is not a tool call is InvalidInput.
    let bad = Payload::from_json(Json::str("nope")).unwrap();
    assert!(d.start(&bad).is_err());
    // Restore requires the exact kind.
    let mut foreign = before.clone();
    foreign.kind = crate::text::QualifiedName::parse("interaction").unwrap();
    assert!(d.restore(&cx, &foreign).is_err());
}

#[test]
fn wait_openings_and_answers_must_match_the_checkpoint() {
    let d = definition();
    let cx = StepContext::default();
    let call = input("a", "{}");
    let request = crate::tool::ToolInputRequest::new(br#""q""#, SCHEMA, b"null").unwrap();
    let other_request = crate::tool::ToolInputRequest::new(br#""another""#, SCHEMA, b"null").unwrap();
    let paused = ToolCallSettlement::Checkpoint(super::protocol::ToolCheckpoint { pause_count: 1, input_request: request.clone() });
    let root = ProcessId::root_from_hex(&hex(1)).unwrap();
    let wait = WaitId::of_effect(&EffectId::derive(&root, 2, 0));
    let key = tool_input_wait_key(1, "call_1", 1).unwrap();
    let opening_with = |r: &crate::tool::ToolInputRequest| {
        let echoed = super::protocol::WaitOpenedPayload { input_request: r.clone() }.to_payload().unwrap();
        let body = crate::kernel::engine_signal::WaitOpened::payload_json(&key, Some(&echoed));
        Signal::new(SignalId::wait_opening(&wait), Some(wait.clone()), Payload::from_json(body).unwrap(), None).unwrap()
    };
    let mut e = d.start(&call.to_payload().unwrap()).unwrap();
    e.step(&cx, &[]).unwrap();
    e.step(&cx, &[settlement_signal(1, &paused)]).unwrap();
    let awaiting_open = e.snapshot().unwrap();
    assert!(e.step(&cx, &[opening_with(&other_request)]).is_err(), "the echo must be the checkpoint's request");
    assert!(e.step(&cx, &[settlement_signal(1, &paused)]).is_err(), "the first signal must be the opening");
    assert_eq!(e.snapshot().unwrap(), awaiting_open);
    e.step(&cx, &[opening_with(&request)]).unwrap();

    let answer_to = |w: &WaitId, value: &str| {
        let payload = super::protocol::InputResponse::new(&Json::str(value)).unwrap().to_payload().unwrap();
        Signal::new(signal_id("signal:a"), Some(w.clone()), payload, None).unwrap()
    };
    let waiting = e.snapshot().unwrap();
    assert!(e.step(&cx, &[answer_to(&WaitId::parse("wait:other").unwrap(), "red")]).is_err(), "another wait");
    assert!(e.step(&cx, &[answer_to(&wait, "green")]).is_err(), "schema re-validated");
    assert_eq!(e.snapshot().unwrap(), waiting);
    e.step(&cx, &[answer_to(&wait, "red")]).unwrap();

    let done = ToolCallSettlement::Result(SettledToolResult::new(
        ToolResult { id: "call_1".into(), name: "a".into(), output: ToolOutput::text("x"), is_error: false },
        false,
    ));
    let t = e.step(&cx, &[settlement_signal(4, &done)]).unwrap();
    assert!(matches!(t, crate::kernel::transition::Transition::Complete { consumed: 1, .. }));
    let state = ToolCallState::from_execution_state(&e.snapshot().unwrap()).unwrap();
    assert_eq!(state.phase, ToolChildPhase::Completed);
    assert!(e.step(&cx, &[]).is_err(), "a completed child cannot step");
}
