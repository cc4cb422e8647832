//! Parent Interaction tests through the real owner (DirectRunner + MemoryCommitter): a
//! scripted model behind the real ModelDispatcher, a test tool-child deployment (one Effect
//! per call, answered by a function of the call) and a test delegate deployment.

mod config;
mod delegates;
mod direct;
mod loops;

use crate::chat::{FinishReason, Message, Request, Response, ToolCall, Usage};
use crate::env::{BoxFuture, Timestamp};
use crate::interaction::config::DefinitionConfig;
use crate::interaction::definition::Definition;
use crate::interaction::delegate::{Delegate, DelegateConfig};
use crate::interaction::model::{DispatcherConfig, ModelCallContext, ModelClient, ModelDispatcher, ModelError};
use crate::interaction::output::Output;
use crate::interaction::protocol::{InteractionInput, SettledToolResult, ToolCallInput};
use crate::interaction::toolset::{ToolEntry, ToolSet};
use crate::interaction::wire::Wire;
use crate::json::{Digest, FromJson, Json, ObjectBuilder, ObjectReader, Payload, ToJson};
use crate::kernel::binding::{Deployment, DeploymentSet};
use crate::kernel::capability::CapabilitySet;
use crate::kernel::commit::{Committer, MemoryCommitter};
use crate::kernel::descriptor::Descriptor;
use crate::kernel::direct::DirectRunner;
use crate::kernel::effect::{Effect, Settlement};
use crate::kernel::failure::{codes as kcodes, Failure};
use crate::kernel::ids::{IncarnationId, ProcessId, SignalId};
use crate::kernel::owner::{Owner, Publication, RootConfig};
use crate::kernel::resource::Budget;
use crate::kernel::result::ProcessResult;
use crate::kernel::signal::{SettlementStatus, Signal};
use crate::kernel::testkit::FnDispatcher;
use crate::kernel::transition::Transition;
use crate::kernel::tree_limits::TreeLimits;
use crate::kernel::waist::{self, Execution, ExecutionState, StepContext, StepError};
use crate::text::QualifiedName;
use crate::tool::{bind, Concurrency, Invocation, Tool, ToolContext, ToolDefinitionInput, ToolError};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

// ------------------------------------------------------------------ model

/// Answers each call with the next scripted response and records what it was asked.
#[derive(Default)]
pub(super) struct ScriptedModel {
    responses: Mutex<VecDeque<Response>>,
    pub requests: Mutex<Vec<Request>>,
    pub applied: Mutex<Vec<Vec<SignalId>>>,
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

/// A bound tool: `keyed` classifies by its `key` argument, `shared` overlaps freely,
/// `direct` returns direct results; anything else is exclusive.
struct TestTool(&'static str);

impl Tool for TestTool {
    fn spec(&self) -> ToolDefinitionInput {
        ToolDefinitionInput {
            name: self.0.into(),
            description: format!("The {} test tool.", self.0),
            input_schema: crate::json::parse(br#"{"type":"object"}"#).unwrap(),
        }
    }
    fn call<'a>(&'a self, _: &'a Invocation, _: ToolContext) -> BoxFuture<'a, Result<crate::chat::ToolOutput, ToolError>> {
        Box::pin(async { Ok(crate::chat::ToolOutput::default()) })
    }
    fn concurrency(&self, invocation: &Invocation) -> Option<Concurrency> {
        match self.0 {
            "keyed" => Some(Concurrency::keyed(
                invocation.arguments_json().get("key").and_then(Json::as_str).unwrap_or_default(),
            )),
            "shared" => Some(Concurrency::shared()),
            _ => None,
        }
    }
    fn returns_direct_result(&self) -> bool {
        self.0 == "direct"
    }
}

pub(super) const TOOLS: [&str; 6] = ["weather", "keyed", "shared", "direct", "crash", "secret"];

/// The tool child: dispatches its call once, completes with the settled result (or fails
/// for the `crash` tool). The dispatcher answers `name(arguments)`.
struct ToolChildDefinition {
    descriptor: Descriptor,
}

struct ToolChild {
    input: ToolCallInput,
    dispatched: bool,
}

const TOOL_CHILD_KIND: &str = "test.tool_child";

impl waist::Definition for ToolChildDefinition {
    fn descriptor(&self) -> &Descriptor {
        &self.descriptor
    }
    fn start(&self, input: &Payload) -> Result<Box<dyn Execution>, StepError> {
        Ok(Box::new(ToolChild { input: ToolCallInput::from_payload(input)?, dispatched: false }))
    }
    fn restore(&self, _: &StepContext, state: &ExecutionState) -> Result<Box<dyn Execution>, StepError> {
        let mut r = ObjectReader::new(state.payload.value()).map_err(|e| StepError::other(e.to_string()))?;
        let input: Json = r.required("input").map_err(|e| StepError::other(e.to_string()))?;
        let dispatched: bool = r.required("dispatched").map_err(|e| StepError::other(e.to_string()))?;
        let input = ToolCallInput::from_json(&input).map_err(|e| StepError::other(e.to_string()))?;
        Ok(Box::new(ToolChild { input, dispatched }))
    }
}

impl Execution for ToolChild {
    fn step(&mut self, _: &StepContext, signals: &[Signal]) -> Result<Transition, StepError> {
        if !self.dispatched {
            if self.input.call.name == "crash" {
                return Ok(Transition::Fail { consumed: 0, failure: Failure::new(kcodes::STEP_FAILED, "tool crashed") });
            }
            self.dispatched = true;
            return Ok(Transition::Continue { consumed: 0, effects: vec![Effect::Dispatcher(self.input.to_payload()?)] });
        }
        let settlement = signals.first().ok_or_else(|| StepError::other("expected the settlement"))?;
        Ok(Transition::Complete { consumed: 1, output: settlement.payload().clone() })
    }
    fn snapshot(&self) -> Result<ExecutionState, StepError> {
        let json = ObjectBuilder::new().field("input", &self.input.to_json()).field("dispatched", &self.dispatched).build();
        Ok(ExecutionState {
            kind: QualifiedName::parse(TOOL_CHILD_KIND).unwrap(),
            payload: Payload::from_json(json).map_err(|e| StepError::other(e.to_string()))?,
        })
    }
}

fn tool_result_for(input: &ToolCallInput) -> SettledToolResult {
    let c = &input.call;
    let output = crate::chat::ToolOutput::text(format!("{}({})", c.name, c.arguments));
    let mut settled = SettledToolResult::new(crate::chat::ToolResult::ok(&c.id, &c.name, output), c.name == "direct");
    if c.name == "secret" {
        settled.advertised_tool_names = vec!["hidden".into()];
    }
    settled
}

fn tool_deployment() -> Deployment {
    let object = || crate::json::parse(br#"{"type":"object"}"#).unwrap();
    let descriptor = Descriptor::new(TOOL_CHILD_KIND, "Runs one test tool call.", object(), object(), None).unwrap();
    let dispatcher = FnDispatcher::new(Arc::new(|request, _| {
        let input = ToolCallInput::from_payload(&request.payload).map_err(|e| crate::kernel::dispatcher::DispatchError::Failed(e.to_string()))?;
        let payload = tool_result_for(&input).to_payload().unwrap();
        Ok(Settlement { status: SettlementStatus::Succeeded, payload })
    }));
    Deployment::new(
        Arc::new(ToolChildDefinition { descriptor }),
        Some(Arc::new(dispatcher)),
        Digest::of(b"test.tool_child.impl"),
        Digest::of(b"test.tool_child.config"),
    )
}

pub(super) fn tool_set(deployment: &Deployment) -> ToolSet {
    let mut entries: Vec<ToolEntry> =
        TOOLS.iter().map(|n| ToolEntry { bound: bind(Arc::new(TestTool(n))).unwrap(), deferred: false }).collect();
    entries.push(ToolEntry { bound: bind(Arc::new(TestTool("hidden"))).unwrap(), deferred: true });
    ToolSet::from_parts(deployment.clone(), entries)
}

// ------------------------------------------------------------------ delegate child

/// Input `{"text":S}`; completes with `{"value":UPPER}`, fails for `"fail"`.
struct UpperDefinition {
    descriptor: Descriptor,
}

struct Upper {
    text: String,
}

impl waist::Definition for UpperDefinition {
    fn descriptor(&self) -> &Descriptor {
        &self.descriptor
    }
    fn start(&self, input: &Payload) -> Result<Box<dyn Execution>, StepError> {
        let text = input.value().get("text").and_then(Json::as_str).unwrap_or_default().to_owned();
        Ok(Box::new(Upper { text }))
    }
    fn restore(&self, _: &StepContext, state: &ExecutionState) -> Result<Box<dyn Execution>, StepError> {
        self.start(&state.payload)
    }
}

impl Execution for Upper {
    fn step(&mut self, _: &StepContext, _: &[Signal]) -> Result<Transition, StepError> {
        if self.text == "fail" {
            return Ok(Transition::Fail { consumed: 0, failure: Failure::new(kcodes::STEP_FAILED, "worker gave up") });
        }
        let json = ObjectBuilder::new().field("value", &self.text.to_uppercase()).build();
        Ok(Transition::Complete { consumed: 0, output: Payload::from_json(json).unwrap() })
    }
    fn snapshot(&self) -> Result<ExecutionState, StepError> {
        let json = ObjectBuilder::new().field("text", &self.text).build();
        Ok(ExecutionState { kind: QualifiedName::parse("test.upper").unwrap(), payload: Payload::from_json(json).unwrap() })
    }
}

pub(super) fn upper_deployment(config: &[u8]) -> Deployment {
    let input = crate::json::parse(
        br#"{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}"#,
    )
    .unwrap();
    let output = crate::json::parse(br#"{"type":"object","properties":{"value":{"type":"string"}},"required":["value"]}"#)
        .unwrap();
    let descriptor = Descriptor::new("test.upper", "Upper-cases a text.", input, output, None).unwrap();
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

fn hex(n: u64) -> String {
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
pub(super) fn base_config(tools: &Deployment) -> DefinitionConfig {
    DefinitionConfig {
        name: "test.interaction".into(),
        description: "The interaction under test.".into(),
        max_model_calls: 8,
        tools: Some(tool_set(tools)),
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
    let tools = tool_deployment();
    let mut config = base_config(&tools);
    configure(&mut config);
    let definition = Definition::new(config).unwrap();
    let model = ScriptedModel::new(responses);
    let dispatcher =
        ModelDispatcher::new(definition.model_manifest(), DispatcherConfig::complete(model.clone())).unwrap();
    let parent = Deployment::new(
        Arc::new(definition.clone()),
        Some(Arc::new(dispatcher)),
        Digest::of(b"keel.interaction"),
        Digest::of(b"test.interaction.config"),
    );
    let mut set = DeploymentSet::new().with(parent.clone()).with(tools);
    extra(&mut set);
    Harness { model, definition, parent, resolver: Arc::new(set), committer: Arc::new(MemoryCommitter::new()) }
}

pub(super) fn user_input(text: &str) -> Payload {
    InteractionInput::new(vec![Message::user(text)]).to_payload().unwrap()
}

impl Harness {
    pub fn start(&self, text: &str) -> DirectRunner {
        let owner = Owner::start(
            self.resolver.clone(),
            self.parent.clone(),
            user_input(text),
            ProcessId::root_from_hex(&hex(1)).unwrap(),
            IncarnationId::from_hex(&hex(100)).unwrap(),
            RootConfig { budget: Budget::unlimited(), capabilities: CapabilitySet::empty(), limits: TreeLimits::default() },
            now(),
        )
        .expect("start");
        DirectRunner::new(owner, self.committer.clone() as Arc<dyn Committer>, now())
    }

    pub fn run(&self, text: &str) -> (DirectRunner, ProcessResult) {
        let mut r = self.start(text);
        r.run_to_idle();
        let result = root_result(&r).expect("the root finished");
        (r, result)
    }
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
