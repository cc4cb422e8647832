//! Parent Interaction tests through the real owner (DirectRunner + MemoryCommitter): a
//! scripted model behind the real ModelDispatcher, a test tool-child deployment (one Effect
//! per call, answered by a function of the call) and a test delegate deployment.

mod active_delegates;
mod codes;
mod config;
mod context;
mod compaction;
mod delegate_waits;
mod delegates;
mod direct;
mod faults;
mod loops;
mod rounds;
#[cfg(feature = "mutations")]
mod mutations;
mod snapshots;
mod time_budget;
pub(super) mod streaming;
mod waits;

use crate::chat::{FinishReason, Message, Request, Response, ToolCall, Usage};
use crate::env::{BoxFuture, Timestamp};
use crate::interaction::config::DefinitionConfig;
use crate::interaction::definition::Definition;
use crate::interaction::delegate::{Delegate, DelegateConfig};
use crate::interaction::model::{DispatcherConfig, ModelCallContext, ModelClient, ModelDispatcher, ModelError};
use crate::interaction::output::Output;
use crate::interaction::protocol::{InteractionInput, SettledToolResult, ToolCallEffect};
use crate::interaction::toolset::{ToolSet, ToolSetConfig};
use crate::interaction::wire::Wire;
use crate::json::{Digest, Json, ObjectBuilder, Payload, ToJson};
use crate::kernel::binding::{Deployment, DeploymentSet};
use crate::kernel::capability::CapabilitySet;
use crate::kernel::commit::{Committer, MemoryCommitter};
use crate::kernel::descriptor::Descriptor;
use crate::kernel::direct::DirectRunner;
use crate::kernel::effect::Effect;
use crate::kernel::failure::{codes as kcodes, Failure};
use crate::kernel::ids::{IncarnationId, ProcessId, SignalId};
use crate::kernel::owner::{Owner, Publication, RootConfig};
use crate::kernel::resource::Budget;
use crate::kernel::result::ProcessResult;
use crate::kernel::signal::{SettlementStatus, Signal};
use crate::kernel::transition::Transition;
use crate::kernel::tree_limits::TreeLimits;
use crate::kernel::waist::{self, Execution, ExecutionState, StepContext, StepError};
use crate::text::QualifiedName;
use crate::tool::{Concurrency, Invocation, Tool, ToolContext, ToolDefinitionInput, ToolError};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

// ------------------------------------------------------------------ model

/// Answers each call with the next scripted response and records what it was asked.
#[derive(Default)]
pub(super) struct ScriptedModel {
    responses: Mutex<VecDeque<Response>>,
    pub requests: Mutex<Vec<Request>>,
    pub applied: Mutex<Vec<Vec<SignalId>>>,
    /// The parent's kernel step sequence of each call.
    pub steps: Mutex<Vec<u64>>,
}

impl ScriptedModel {
    pub fn new(responses: Vec<Response>) -> Arc<ScriptedModel> {
        Arc::new(ScriptedModel { responses: Mutex::new(responses.into()), ..ScriptedModel::default() })
    }
    pub fn request(&self, n: usize) -> Request {
        self.requests.lock().unwrap()[n].clone()
    }
    pub fn calls(&self) -> usize {
        self.requests.lock().unwrap().len()
    }
}

impl ModelClient for ScriptedModel {
    fn call<'a>(&'a self, cx: &'a ModelCallContext, request: Request) -> BoxFuture<'a, Result<Response, ModelError>> {
        self.requests.lock().unwrap().push(request);
        self.applied.lock().unwrap().push(cx.invocation.applied_steer_signal_ids());
        self.steps.lock().unwrap().push(cx.invocation.step_sequence());
        let next = self.responses.lock().unwrap().pop_front();
        Box::pin(async move { next.ok_or_else(|| ModelError::Provider("script exhausted".into())) })
    }
}

pub(super) fn calls_response(calls: Vec<ToolCall>) -> Response {
    Response::new(Message::assistant_with_calls("", calls), FinishReason::ToolCalls, Usage::new(1, 1))
}

pub(super) fn with_finish(calls: Vec<ToolCall>, finish: FinishReason) -> Response {
    Response::new(Message::assistant_with_calls("", calls), finish, Usage::new(1, 1))
}

pub(super) fn answer(text: &str) -> Response {
    Response::new(Message::assistant(text), FinishReason::Stop, Usage::new(1, 1))
}

pub(super) fn call(id: &str, name: &str, args: &str) -> ToolCall {
    ToolCall::new(id, name, args)
}

// ------------------------------------------------------------------ tools

/// A test tool answering `name(canonical arguments)`: `keyed` classifies by its `key`
/// argument, `shared` overlaps freely, `direct` returns direct results, `secret` advertises
/// the deferred `hidden`, `ask` pauses for input once (shared); anything else is exclusive.
struct TestTool(&'static str);

impl Tool for TestTool {
    fn spec(&self) -> ToolDefinitionInput {
        ToolDefinitionInput {
            name: self.0.into(),
            description: format!("The {} test tool.", self.0),
            input_schema: crate::json::parse(br#"{"type":"object"}"#).unwrap(),
        }
    }
    fn call<'a>(&'a self, invocation: &'a Invocation, cx: ToolContext) -> BoxFuture<'a, Result<crate::chat::ToolOutput, ToolError>> {
        if self.0 == "secret" {
            cx.advertise(&["hidden"]).unwrap();
        }
        if self.0 == "ask" {
            let result = match cx.continuation() {
                None => Err(crate::tool::require_tool_input(br#""Pick a color""#, br#"{"type":"string"}"#, b"{}")),
                Some(c) => Ok(crate::chat::ToolOutput::text(format!("picked {}", c.response().value().to_canonical_string()))),
            };
            return Box::pin(async move { result });
        }
        let text = format!("{}({})", self.0, invocation.arguments_json().to_canonical_string());
        Box::pin(async move { Ok(crate::chat::ToolOutput::text(text)) })
    }
    fn concurrency(&self, invocation: &Invocation) -> Option<Concurrency> {
        match self.0 {
            "keyed" => Some(Concurrency::keyed(
                invocation.arguments_json().get("key").and_then(Json::as_str).unwrap_or_default(),
            )),
            "shared" | "ask" => Some(Concurrency::shared()),
            _ => None,
        }
    }
    fn returns_direct_result(&self) -> bool {
        self.0 == "direct"
    }
}

pub(super) const TOOLS: [&str; 6] = ["weather", "keyed", "shared", "direct", "secret", "ask"];

/// The real ToolSet over the test tools (`hidden` deferred).
pub(super) fn tool_set() -> ToolSet {
    tool_set_with(Vec::new())
}

/// The test tools followed by `extra` (registered after them).
pub(super) fn tool_set_with(extra: Vec<Arc<dyn Tool>>) -> ToolSet {
    let mut tools: Vec<Arc<dyn Tool>> = TOOLS.iter().map(|n| Arc::new(TestTool(n)) as Arc<dyn Tool>).collect();
    tools.extend(extra);
    ToolSet::new(ToolSetConfig {
        name: "test.tools".into(),
        description: "Runs one test tool call.".into(),
        tools,
        deferred_tools: vec![Arc::new(TestTool("hidden"))],
        observer: None,
        implementation_digest: Digest::of(b"test.tools.impl"),
        configuration_digest: Digest::of(b"test.tools.config"),
    })
    .unwrap()
}

/// The call id of a held tool dispatch.
pub(super) fn tool_call_id(d: &crate::kernel::direct::PendingDispatch) -> String {
    ToolCallEffect::from_payload(&d.request.payload).unwrap().input.call.id
}

/// What a [`FaultTool`] does on its n-th call (1-based).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fault {
    /// Panics on every call.
    Panic,
    /// Panics on the first call only, then answers like a good tool.
    PanicOnce,
    /// Returns a host failure (Unknown) on every call.
    HostFailure,
}

/// A shared-concurrency tool that misbehaves per [`Fault`] and counts its calls.
pub(super) struct FaultTool {
    name: &'static str,
    fault: Fault,
    pub calls: std::sync::atomic::AtomicU64,
}

impl FaultTool {
    pub fn new(name: &'static str, fault: Fault) -> Arc<FaultTool> {
        Arc::new(FaultTool { name, fault, calls: std::sync::atomic::AtomicU64::new(0) })
    }
    pub fn count(&self) -> u64 {
        self.calls.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Tool for FaultTool {
    fn spec(&self) -> ToolDefinitionInput {
        ToolDefinitionInput {
            name: self.name.into(),
            description: format!("The {} fault tool.", self.name),
            input_schema: crate::json::parse(br#"{"type":"object"}"#).unwrap(),
        }
    }
    fn call<'a>(&'a self, _: &'a Invocation, _: ToolContext) -> BoxFuture<'a, Result<crate::chat::ToolOutput, ToolError>> {
        let n = self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        match (self.fault, n) {
            (Fault::Panic, _) | (Fault::PanicOnce, 1) => panic!("{} exploded", self.name),
            (Fault::HostFailure, _) => Box::pin(async { Err(ToolError::host_failure("the host lost the call")) }),
            (Fault::PanicOnce, _) => {
                let text = format!("{} ok on call {n}", self.name);
                Box::pin(async move { Ok(crate::chat::ToolOutput::text(text)) })
            }
        }
    }
    fn concurrency(&self, _: &Invocation) -> Option<Concurrency> {
        Some(Concurrency::shared())
    }
}

/// A harness whose tool set adds `extra` tools after the test tools.
pub(super) fn harness_tools(
    extra: Vec<Arc<dyn Tool>>,
    responses: Vec<Response>,
    configure: impl FnOnce(&mut DefinitionConfig),
) -> Harness {
    harness_full(tool_set_with(extra), responses, configure, |_| {}, |m| DispatcherConfig::complete(m))
}

// ------------------------------------------------------------------ delegate child

/// Input `{"text":S}`; completes with `{"value":UPPER}`, fails for `"fail"`; for `"wait"` it
/// opens an external wait first and upper-cases the answer.
struct UpperDefinition {
    descriptor: Descriptor,
}

struct Upper {
    text: String,
    /// 0: fresh; 1: wait opening expected; 2: parked on `wait`.
    phase: u32,
    wait: Option<crate::kernel::ids::WaitId>,
}

impl waist::Definition for UpperDefinition {
    fn descriptor(&self) -> &Descriptor {
        &self.descriptor
    }
    fn start(&self, input: &Payload) -> Result<Box<dyn Execution>, StepError> {
        let text = input.value().get("text").and_then(Json::as_str).unwrap_or_default().to_owned();
        Ok(Box::new(Upper { text, phase: 0, wait: None }))
    }
    fn restore(&self, _: &StepContext, state: &ExecutionState) -> Result<Box<dyn Execution>, StepError> {
        let v = state.payload.value();
        let text = v.get("text").and_then(Json::as_str).unwrap_or_default().to_owned();
        let phase = v.get("phase").and_then(Json::as_u64).unwrap_or_default() as u32;
        let wait = v.get("wait").and_then(Json::as_str).map(|w| crate::kernel::ids::WaitId::parse(w).unwrap());
        Ok(Box::new(Upper { text, phase, wait }))
    }
}

fn upper_output(text: &str) -> Payload {
    Payload::from_json(ObjectBuilder::new().field("value", &text.to_uppercase()).build()).unwrap()
}

impl Execution for Upper {
    fn step(&mut self, _: &StepContext, signals: &[Signal]) -> Result<Transition, StepError> {
        match (self.text.as_str(), self.phase) {
            ("fail", _) => Ok(Transition::Fail { consumed: 0, failure: Failure::new(kcodes::STEP_FAILED, "worker gave up") }),
            ("wait", 0) => {
                self.phase = 1;
                let key = crate::kernel::ids::WaitKey::parse("test.upper.go").unwrap();
                Ok(Transition::Continue {
                    consumed: 0,
                    effects: vec![Effect::Framework(crate::kernel::effect::FrameworkEffect::Wait { key, payload: None })],
                })
            }
            ("wait", 1) => {
                let opened = crate::kernel::engine_signal::WaitOpened::parse(&signals[0]).unwrap();
                self.phase = 2;
                self.wait = Some(opened.wait_id.clone());
                Ok(Transition::Wait { consumed: 1, wait_id: opened.wait_id })
            }
            ("wait", _) => {
                let answer = signals[0].payload().value().as_str().unwrap_or_default().to_owned();
                Ok(Transition::Complete { consumed: 1, output: upper_output(&answer) })
            }
            (text, _) => Ok(Transition::Complete { consumed: 0, output: upper_output(text) }),
        }
    }
    fn snapshot(&self) -> Result<ExecutionState, StepError> {
        let json = ObjectBuilder::new()
            .field("text", &self.text)
            .field("phase", &u64::from(self.phase))
            .opt_field("wait", self.wait.as_ref().map(|w| w.as_str().to_owned()).as_ref())
            .build();
        Ok(ExecutionState { kind: QualifiedName::parse("test.upper").unwrap(), payload: Payload::from_json(json).unwrap(), segments: Vec::new() })
    }
}

pub(super) fn upper_deployment(config: &[u8]) -> Deployment {
    let input = crate::json::parse(
        br#"{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}"#,
    )
    .unwrap();
    let output = crate::json::parse(br#"{"type":"object","properties":{"value":{"type":"string"}},"required":["value"]}"#)
        .unwrap();
    let signals = crate::json::parse(br#"{"type":"string"}"#).unwrap();
    let descriptor = Descriptor::new("test.upper", "Upper-cases a text.", input, output, Some(signals)).unwrap();
    Deployment::new(Arc::new(UpperDefinition { descriptor }), None, Digest::of(b"test.upper"), Digest::of(config))
}

pub(super) fn delegate(name: &str, deployment: &Deployment) -> Delegate {
    Delegate::new(DelegateConfig {
        name: name.into(),
        description: format!("Delegates to the {name} worker."),
        deployment: deployment.clone(),
        budget: Budget::unlimited(),
        capabilities: CapabilitySet::empty(),
    })
    .unwrap()
}

// ------------------------------------------------------------------ harness

pub(super) fn now() -> Timestamp {
    Timestamp::from_millis(1_700_000_000_000).unwrap()
}

pub(super) fn hex(n: u64) -> String {
    format!("{n:032x}")
}

pub(super) struct Harness {
    pub model: Arc<ScriptedModel>,
    pub definition: Definition,
    pub parent: Deployment,
    pub resolver: Arc<DeploymentSet>,
    pub committer: Arc<MemoryCommitter>,
}

/// The base configuration: every test tool, concurrency 4, max 8 model calls.
pub(super) fn base_config(tools: &ToolSet) -> DefinitionConfig {
    DefinitionConfig {
        name: "test.interaction".into(),
        description: "The interaction under test.".into(),
        max_model_calls: 8,
        tools: Some(tools.clone()),
        tool_budget: Some(Budget::unlimited()),
        max_concurrent_tool_calls: 4,
        ..DefinitionConfig::default()
    }
}

pub(super) fn harness(responses: Vec<Response>, configure: impl FnOnce(&mut DefinitionConfig)) -> Harness {
    harness_with(responses, configure, |_| {})
}

/// `extra` may add (or leave out) deployments of the resolver.
pub(super) fn harness_with(
    responses: Vec<Response>,
    configure: impl FnOnce(&mut DefinitionConfig),
    extra: impl FnOnce(&mut DeploymentSet),
) -> Harness {
    harness_full(tool_set(), responses, configure, extra, |m| DispatcherConfig::complete(m))
}

/// Everything chosen by the caller: the tool set and the model Dispatcher's configuration
/// (built from the scripted model).
pub(super) fn harness_full(
    tools: ToolSet,
    responses: Vec<Response>,
    configure: impl FnOnce(&mut DefinitionConfig),
    extra: impl FnOnce(&mut DeploymentSet),
    model_config: impl FnOnce(Arc<ScriptedModel>) -> DispatcherConfig,
) -> Harness {
    let mut config = base_config(&tools);
    configure(&mut config);
    let definition = Definition::new(config).unwrap();
    let model = ScriptedModel::new(responses);
    let dispatcher = ModelDispatcher::new(definition.model_manifest(), model_config(model.clone())).unwrap();
    let parent = Deployment::new(
        Arc::new(definition.clone()),
        Some(Arc::new(dispatcher)),
        Digest::of(b"keel.interaction"),
        Digest::of(b"test.interaction.config"),
    );
    let mut set = DeploymentSet::new().with(parent.clone()).with(tools.deployment().clone());
    extra(&mut set);
    Harness { model, definition, parent, resolver: Arc::new(set), committer: Arc::new(MemoryCommitter::new()) }
}

pub(super) fn user_input(text: &str) -> Payload {
    InteractionInput::new(vec![Message::user(text)]).to_payload().unwrap()
}

impl Harness {
    pub fn start(&self, text: &str) -> DirectRunner {
        self.start_with(text, CapabilitySet::empty())
    }

    /// A root started with a whole start input.
    pub fn start_input(&self, input: Payload) -> Result<DirectRunner, crate::kernel::owner::StartError> {
        let owner = Owner::start(
            self.resolver.clone(),
            self.parent.clone(),
            input,
            ProcessId::root_from_hex(&hex(1)).unwrap(),
            IncarnationId::from_hex(&hex(100)).unwrap(),
            RootConfig { budget: Budget::unlimited(), capabilities: CapabilitySet::empty(), limits: TreeLimits::default() },
            now(),
        )?;
        Ok(DirectRunner::new(owner, self.committer.clone() as Arc<dyn Committer>, now()))
    }

    /// A root holding `capabilities` (children may be granted at most these).
    pub fn start_with(&self, text: &str, capabilities: CapabilitySet) -> DirectRunner {
        let owner = Owner::start(
            self.resolver.clone(),
            self.parent.clone(),
            user_input(text),
            ProcessId::root_from_hex(&hex(1)).unwrap(),
            IncarnationId::from_hex(&hex(100)).unwrap(),
            RootConfig { budget: Budget::unlimited(), capabilities, limits: TreeLimits::default() },
            now(),
        )
        .expect("start");
        DirectRunner::new(owner, self.committer.clone() as Arc<dyn Committer>, now())
    }

    pub fn run(&self, text: &str) -> (DirectRunner, ProcessResult) {
        let mut r = self.start(text);
        r.run_to_idle();
        let result = root_result(&r).expect("the root finished");
        self.check(&r);
        (r, result)
    }

    /// The kernel's invariant oracle over everything the runner committed and published.
    pub fn check(&self, r: &DirectRunner) {
        use crate::kernel::invariants::{check_commits, check_history, check_publications};
        use crate::kernel::snapshot::TreeSnapshot;
        let acknowledged: Vec<&crate::kernel::owner::CommitRequest> =
            r.commits.iter().filter(|(_, ok)| *ok).map(|(c, _)| c).collect();
        let mut violations = check_commits(acknowledged.iter().copied());
        let heads: Vec<TreeSnapshot> =
            r.acknowledged_cuts().iter().filter_map(|c| TreeSnapshot::from_cut(c).ok()).collect();
        violations.extend(check_publications(&r.published, &heads));
        violations.extend(check_history(&self.committer.history(r.owner.root_id())));
        let report: Vec<String> = violations.iter().map(ToString::to_string).collect();
        assert!(report.is_empty(), "invariant violations:\n{}", report.join("\n"));
    }
}

impl Harness {
    /// The committer's head of the tree.
    pub fn head(&self) -> crate::kernel::snapshot::TreeSnapshot {
        let root = ProcessId::root_from_hex(&hex(1)).unwrap();
        let head = futures::executor::block_on(self.committer.load_tree(&root)).unwrap().expect("a head");
        crate::kernel::snapshot::TreeSnapshot::from_cut(&head.cut).unwrap()
    }

    /// A new owner over the head under incarnation `hex(incarnation)` (the old one is fenced).
    pub fn restore(&self, incarnation: u64) -> DirectRunner {
        let owner = Owner::restore(
            self.resolver.clone(),
            self.parent.clone(),
            &self.head(),
            IncarnationId::from_hex(&hex(incarnation)).unwrap(),
            now(),
        )
        .expect("restore");
        DirectRunner::new(owner, self.committer.clone() as Arc<dyn Committer>, now())
    }

    /// The root's parent state at the head.
    pub fn parent_state(&self) -> crate::interaction::state::ParentState {
        self.definition.restore_state(&self.head().root().committed_state).unwrap()
    }
}

/// Performs every dispatch held right now, in issue order.
pub(super) fn run_held(r: &mut DirectRunner, attempt: u64) {
    for d in r.take_dispatches() {
        let (e, o) = d.run(attempt);
        r.complete(e, o);
    }
}

/// Every (process, effect) that is Unknown at the frontier in `snapshot`.
pub(super) fn unknowns(snapshot: &crate::kernel::snapshot::TreeSnapshot) -> Vec<(ProcessId, crate::kernel::ids::EffectId)> {
    snapshot
        .processes()
        .iter()
        .flat_map(|p| p.prepared.iter().flat_map(|s| s.unknown_ids()).map(|e| (p.id.clone(), e)))
        .collect()
}

pub(super) fn root_result(r: &DirectRunner) -> Option<ProcessResult> {
    let root = r.owner.root_id().clone();
    r.published.iter().find_map(|p| match p {
        Publication::Finished { result } if result.process_id == root => Some(result.clone()),
        _ => None,
    })
}

pub(super) fn output_of(result: &ProcessResult) -> Output {
    Output::from_payload(result.output.as_ref().expect("completed with an output")).unwrap()
}

pub(super) fn failure_of(result: &ProcessResult) -> Failure {
    result.termination.failure.clone().expect("failed")
}

/// The tool results of the tool message at `index` of `request`.
pub(super) fn results_at(request: &Request, index: usize) -> Vec<crate::chat::ToolResult> {
    request.messages[index].results().cloned().collect()
}
