//! The Interaction deployments the fuzz targets and the corpus capture share: the real
//! Interaction strategy (two roots: complete mode, and streaming mode with a context reducer),
//! the real ToolSet over deterministic test tools, and a delegate worker.
//!
//! Everything here is a pure function of its input so that a restored, fuzzed or re-run tree
//! behaves the same way every time, and nothing here panics: libFuzzer aborts on any panic,
//! even one the kernel would catch and turn into a Failure.
//!
//! The model reads its script from the first user message: a JSON array whose n-th entry
//! answers model call n (see [`script_turn`]). Past the end, or for any other text, it answers
//! `"done"`.

use futures::StreamExt;
use keel::chat::{FinishReason, Message, Request, Response, ResponseDelta, Role, ToolCall, ToolOutput, Usage};
use keel::env::BoxFuture;
use keel::interaction::completion::{CompletionDecision, CompletionValidator};
use keel::interaction::config::DefinitionConfig;
use keel::interaction::definition::Definition;
use keel::interaction::delegate::{Delegate, DelegateConfig};
use keel::interaction::model::{
    DispatcherConfig, ModelCallContext, ModelClient, ModelContextReducer, ModelDeltaStream, ModelDispatcher, ModelError,
    ModelStreamer,
};
use keel::interaction::toolset::{ToolSet, ToolSetConfig};
use keel::json::{self, Digest, Json, ObjectBuilder, Payload, ToJson};
use keel::kernel::binding::{Deployment, DeploymentSet};
use keel::kernel::capability::CapabilitySet;
use keel::kernel::descriptor::Descriptor;
use keel::kernel::dispatcher::{DispatchContext, DispatchError, DispatchPolicy, Dispatcher, EffectRequest};
use keel::kernel::effect::{Effect, FrameworkEffect, Settlement};
use keel::kernel::engine_signal::WaitOpened;
use keel::kernel::failure::{codes, Failure};
use keel::kernel::ids::{WaitId, WaitKey};
use keel::kernel::resource::Budget;
use keel::kernel::signal::Signal;
use keel::kernel::transition::Transition;
use keel::kernel::waist::{self, Execution, ExecutionState, StepContext, StepError};
use keel::text::QualifiedName;
use keel::tool::{require_tool_input, Concurrency, Invocation, Tool, ToolContext, ToolDefinitionInput, ToolError};
use std::sync::{Arc, Mutex, PoisonError};

// ------------------------------------------------------------------ model

/// The scripted answer to model call `sequence` (1-based) of a request whose first user
/// message is the script. Entries: `"text"` (final answer), `{"calls":[[id,name,args]..]}`,
/// `{"length":"text"}` (truncated), `{"provider_error":"text"}`, `{"host_error":"text"}`.
pub fn script_turn(request: &Request, sequence: u32) -> Result<Response, ModelError> {
    let done = || Ok(answer("done", FinishReason::Stop));
    let Some(script) = request.messages.iter().find(|m| m.role == Role::User) else { return done() };
    let Ok(script) = json::parse(script.text().as_bytes()) else { return done() };
    let turn = usize::try_from(sequence).ok().and_then(|s| s.checked_sub(1)).and_then(|i| script.as_array()?.get(i));
    let Some(turn) = turn else { return done() };
    if let Some(text) = turn.as_str() {
        return Ok(answer(text, FinishReason::Stop));
    }
    let text = |key: &str| turn.get(key).and_then(Json::as_str).map(str::to_owned);
    if let Some(t) = text("length") {
        return Ok(answer(&t, FinishReason::Length));
    }
    if let Some(t) = text("provider_error") {
        return Err(ModelError::Provider(t));
    }
    if let Some(t) = text("host_error") {
        return Err(ModelError::Host(t));
    }
    let calls: Vec<ToolCall> = turn
        .get("calls")
        .and_then(Json::as_array)
        .unwrap_or_default()
        .iter()
        .filter_map(|c| match c.as_array()? {
            [id, name, args] => Some(ToolCall::new(id.as_str()?, name.as_str()?, args.as_str()?)),
            _ => None,
        })
        .collect();
    if calls.is_empty() {
        return done();
    }
    Ok(Response::new(Message::assistant_with_calls("", calls), FinishReason::ToolCalls, Usage::new(2, 1)))
}

fn answer(text: &str, finish: FinishReason) -> Response {
    Response::new(Message::assistant(text), finish, Usage::new(2, 1))
}

/// The model of both roots: [`script_turn`] by the call's sequence.
pub struct ScriptModel;

impl ModelClient for ScriptModel {
    fn call<'a>(&'a self, cx: &'a ModelCallContext, request: Request) -> BoxFuture<'a, Result<Response, ModelError>> {
        let result = script_turn(&request, cx.invocation.model_call_sequence());
        Box::pin(async move { result })
    }
}

impl ModelStreamer for ScriptModel {
    /// The same answers, streamed in 7-byte chunks.
    fn stream<'a>(&'a self, cx: &'a ModelCallContext, request: Request) -> BoxFuture<'a, Result<ModelDeltaStream<'a>, ModelError>> {
        let result = script_turn(&request, cx.invocation.model_call_sequence());
        Box::pin(async move {
            let deltas = ResponseDelta::split(&result?, 7);
            Ok(futures::stream::iter(deltas.into_iter().map(Ok)).boxed())
        })
    }
}

/// Keeps the script message and the last two messages, summarizing what lies between (so the
/// streaming root's settlements carry `replacement_messages`).
pub struct Summarizer;

impl ModelContextReducer for Summarizer {
    fn reduce<'a>(&'a self, _: &'a ModelCallContext, request: &'a Request) -> BoxFuture<'a, Result<Vec<Message>, String>> {
        let messages = &request.messages;
        let out = match messages.split_first() {
            Some((first, rest)) if rest.len() > 3 => {
                let cut = rest.len() - 2;
                let mut out = vec![first.clone(), Message::user(format!("summary of {cut}"))];
                out.extend(rest[cut..].iter().cloned());
                out
            }
            _ => messages.clone(),
        };
        Box::pin(async move { Ok(out) })
    }
}

/// Rejects an answer that says `REJECT` once, with feedback (so runs reach the feedback path).
fn validator() -> CompletionValidator {
    Arc::new(|candidate| {
        let text = candidate.output().response().and_then(|r| r.message.as_ref()).map(Message::text).unwrap_or_default();
        let already = candidate.working_context().messages.iter().any(|m| m.text() == "Do not reject.");
        Ok(if text.contains("REJECT") && !already {
            CompletionDecision::reject("Do not reject.")
        } else {
            CompletionDecision::accept()
        })
    })
}

// ------------------------------------------------------------------ tools

/// One deterministic test tool: `weather` (exclusive), `shared`, `keyed` (by its `key`
/// argument), `direct` (direct result), `secret` (advertises the deferred `hidden`), `ask`
/// (pauses for a string answer `times` times, default 1), `fail` (a model-visible error) and
/// `lost` (a host failure: the call is Unknown).
pub struct FuzzTool(pub &'static str);

/// The initial tools, in registration order; `hidden` is deferred.
pub const TOOLS: [&str; 8] = ["weather", "shared", "keyed", "direct", "secret", "ask", "fail", "lost"];

impl Tool for FuzzTool {
    fn spec(&self) -> ToolDefinitionInput {
        ToolDefinitionInput {
            name: self.0.into(),
            description: format!("The {} fuzz tool.", self.0),
            input_schema: ObjectBuilder::new().field("type", "object").build(),
        }
    }

    fn call<'a>(&'a self, invocation: &'a Invocation, cx: ToolContext) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        let args = invocation.arguments_json();
        let result = match self.0 {
            "secret" => match cx.advertise(&["hidden"]) {
                Ok(()) => Ok(ToolOutput::text("hidden is available")),
                Err(e) => Err(ToolError::failed(e.to_string())),
            },
            "ask" => {
                let times = args.get("times").and_then(Json::as_u64).unwrap_or(1);
                let (asked, answers) = match cx.continuation() {
                    None => (0, String::new()),
                    Some(c) => {
                        let state = c.state().value();
                        let asked = state.get("asked").and_then(Json::as_u64).unwrap_or(0);
                        let before = state.get("answers").and_then(Json::as_str).unwrap_or_default();
                        (asked, format!("{before}{}", c.response().canonical()))
                    }
                };
                if asked < times {
                    let state = ObjectBuilder::new().field("asked", &(asked + 1)).field("answers", &answers).build();
                    let prompt = Json::str(format!("Answer {} of {times}", asked + 1)).to_canonical_bytes();
                    Err(require_tool_input(&prompt, br#"{"type":"string"}"#, &state.to_canonical_bytes()))
                } else {
                    Ok(ToolOutput::text(format!("answers: {answers}")))
                }
            }
            "fail" => Err(ToolError::failed("the tool refused")),
            "lost" => Err(ToolError::host_failure("the host lost the call")),
            name => Ok(ToolOutput::text(format!("{name}({})", args.to_canonical_string()))),
        };
        Box::pin(async move { result })
    }

    fn concurrency(&self, invocation: &Invocation) -> Option<Concurrency> {
        match self.0 {
            "keyed" => Some(Concurrency::keyed(invocation.arguments_json().get("key").and_then(Json::as_str).unwrap_or("k"))),
            "shared" | "ask" | "secret" | "fail" | "lost" => Some(Concurrency::shared()),
            _ => None,
        }
    }

    fn returns_direct_result(&self) -> bool {
        self.0 == "direct"
    }
}

fn tool_set() -> Result<ToolSet, String> {
    ToolSet::new(ToolSetConfig {
        name: "keel.fuzz.tools".into(),
        description: "Runs one fuzz tool call.".into(),
        tools: TOOLS.iter().map(|n| Arc::new(FuzzTool(n)) as Arc<dyn Tool>).collect(),
        deferred_tools: vec![Arc::new(FuzzTool("hidden"))],
        observer: None,
        implementation_digest: Digest::of(b"keel.fuzz.tools"),
        configuration_digest: Digest::of(b"keel.fuzz.tools.config"),
    })
    .map_err(|e| e.to_string())
}

// ------------------------------------------------------------------ delegate worker

/// The delegate child: input `{"text":S}`; completes with `{"value":UPPER}`; `"fail"` fails;
/// `"wait"` first parks on an external wait and upper-cases the (string) answer.
pub struct WorkerDefinition {
    descriptor: Descriptor,
}

/// State `{"text":S,"phase":0|1|2,"wait"?:WaitId}`: fresh, opening expected, parked.
struct Worker {
    text: String,
    phase: u64,
    wait: Option<WaitId>,
}

/// The worker's state kind.
pub const WORKER_KIND: &str = "keel.fuzz.worker";

fn step_error(text: &str) -> StepError {
    StepError::other(text)
}

impl waist::Definition for WorkerDefinition {
    fn descriptor(&self) -> &Descriptor {
        &self.descriptor
    }
    fn start(&self, input: &Payload) -> Result<Box<dyn Execution>, StepError> {
        let text = input.value().get("text").and_then(Json::as_str).ok_or_else(|| step_error("no text"))?;
        Ok(Box::new(Worker { text: text.to_owned(), phase: 0, wait: None }))
    }
    fn restore(&self, _: &StepContext, state: &ExecutionState) -> Result<Box<dyn Execution>, StepError> {
        let v = state.payload.value();
        if state.kind.as_str() != WORKER_KIND {
            return Err(step_error("not a worker state"));
        }
        let text = v.get("text").and_then(Json::as_str).ok_or_else(|| step_error("no text"))?.to_owned();
        let phase = v.get("phase").and_then(Json::as_u64).filter(|p| *p <= 2).ok_or_else(|| step_error("bad phase"))?;
        let wait = match v.get("wait").and_then(Json::as_str) {
            Some(w) => Some(WaitId::parse(w).map_err(|e| step_error(&e.to_string()))?),
            None => None,
        };
        Ok(Box::new(Worker { text, phase, wait }))
    }
}

fn upper(text: &str) -> Result<Payload, StepError> {
    Payload::from_json(ObjectBuilder::new().field("value", &text.to_uppercase()).build()).map_err(|e| step_error(&e.to_string()))
}

impl Execution for Worker {
    fn step(&mut self, _: &StepContext, signals: &[Signal]) -> Result<Transition, StepError> {
        match (self.text.as_str(), self.phase) {
            ("fail", _) => Ok(Transition::Fail { consumed: 0, failure: Failure::new(codes::STEP_FAILED, "the worker gave up") }),
            ("wait", 0) => {
                self.phase = 1;
                let key = WaitKey::parse("keel.fuzz.worker.go").map_err(|e| step_error(&e.to_string()))?;
                Ok(Transition::Continue { consumed: 0, effects: vec![Effect::Framework(FrameworkEffect::Wait { key, payload: None })] })
            }
            ("wait", 1) => {
                let signal = signals.first().ok_or_else(|| step_error("expected the wait opening"))?;
                let opened = WaitOpened::parse(signal).map_err(|e| step_error(&e.to_string()))?;
                self.phase = 2;
                self.wait = Some(opened.wait_id.clone());
                Ok(Transition::Wait { consumed: 1, wait_id: opened.wait_id })
            }
            ("wait", _) => {
                let signal = signals.first().ok_or_else(|| step_error("expected the answer"))?;
                let text = signal.payload().value().as_str().unwrap_or("no text").to_owned();
                Ok(Transition::Complete { consumed: 1, output: upper(&text)? })
            }
            (text, _) => Ok(Transition::Complete { consumed: 0, output: upper(text)? }),
        }
    }
    fn snapshot(&self) -> Result<ExecutionState, StepError> {
        let json = ObjectBuilder::new()
            .field("text", &self.text)
            .field("phase", &self.phase)
            .opt_field("wait", self.wait.as_ref().map(|w| w.as_str().to_owned()).as_ref())
            .build();
        let kind = QualifiedName::parse(WORKER_KIND).map_err(|e| step_error(&e.to_string()))?;
        Ok(ExecutionState { kind, payload: Payload::from_json(json).map_err(|e| step_error(&e.to_string()))?, segments: Vec::new() })
    }
}

fn worker_deployment() -> Result<Deployment, String> {
    let schema = |text: &[u8]| json::parse(text).map_err(|e| e.to_string());
    let descriptor = Descriptor::new(
        WORKER_KIND,
        "Upper-cases a text.",
        schema(br#"{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}"#)?,
        schema(br#"{"type":"object","properties":{"value":{"type":"string"}},"required":["value"]}"#)?,
        Some(schema(br#"{"type":"string"}"#)?),
    )
    .map_err(|e| e.to_string())?;
    Ok(Deployment::new(Arc::new(WorkerDefinition { descriptor }), None, Digest::of(b"keel.fuzz.worker"), Digest::of(b"v1")))
}

// ------------------------------------------------------------------ recording

/// What one Step of an Interaction Process saw: its restored state and its Signal window.
#[derive(Clone, Debug)]
pub struct StepRecord {
    pub state: ExecutionState,
    pub window: Vec<Signal>,
}

/// Everything the recording wrappers saw, in order.
#[derive(Default, Debug)]
pub struct Recording {
    pub steps: Vec<StepRecord>,
    /// Streamed model deltas (`{"response_delta":..}` payloads).
    pub deltas: Vec<Payload>,
}

pub type Recorder = Arc<Mutex<Recording>>;

fn with_recording(recorder: &Recorder, f: impl FnOnce(&mut Recording)) {
    f(&mut recorder.lock().unwrap_or_else(PoisonError::into_inner));
}

/// A Definition that records every Step of its Executions (same descriptor, same children).
struct Recorded {
    inner: Arc<dyn waist::Definition>,
    recorder: Recorder,
}

struct RecordedExecution {
    inner: Box<dyn Execution>,
    recorder: Recorder,
}

impl waist::Definition for Recorded {
    fn descriptor(&self) -> &Descriptor {
        self.inner.descriptor()
    }
    fn child_deployments(&self) -> Vec<keel::kernel::deployment::DeploymentRef> {
        self.inner.child_deployments()
    }
    fn start(&self, input: &Payload) -> Result<Box<dyn Execution>, StepError> {
        let inner = self.inner.start(input)?;
        Ok(Box::new(RecordedExecution { inner, recorder: self.recorder.clone() }))
    }
    fn restore(&self, cx: &StepContext, state: &ExecutionState) -> Result<Box<dyn Execution>, StepError> {
        let inner = self.inner.restore(cx, state)?;
        Ok(Box::new(RecordedExecution { inner, recorder: self.recorder.clone() }))
    }
}

impl Execution for RecordedExecution {
    fn step(&mut self, cx: &StepContext, signals: &[Signal]) -> Result<Transition, StepError> {
        if let Ok(state) = self.inner.snapshot() {
            with_recording(&self.recorder, |r| r.steps.push(StepRecord { state, window: signals.to_vec() }));
        }
        self.inner.step(cx, signals)
    }
    fn snapshot(&self) -> Result<ExecutionState, StepError> {
        self.inner.snapshot()
    }
}

/// A Dispatcher that listens to the deltas of the one it wraps.
struct DeltaTap {
    inner: Arc<dyn Dispatcher>,
    recorder: Recorder,
}

impl Dispatcher for DeltaTap {
    fn policy(&self, effect: &Payload) -> DispatchPolicy {
        self.inner.policy(effect)
    }
    fn dispatch<'a>(&'a self, request: EffectRequest, mut cx: DispatchContext) -> BoxFuture<'a, Result<Settlement, DispatchError>> {
        let recorder = self.recorder.clone();
        cx.deltas = Some(Arc::new(move |delta: Payload| {
            with_recording(&recorder, |r| r.deltas.push(delta));
            true
        }));
        self.inner.dispatch(request, cx)
    }
}

/// `deployment` with its Definition (and Dispatcher) wrapped by the recorder, under the same
/// DeploymentRef (the ref names the descriptor and digests, not the Rust object).
fn recorded(deployment: &Deployment, recorder: &Option<Recorder>) -> Deployment {
    let Some(recorder) = recorder else { return deployment.clone() };
    let definition = Arc::new(Recorded { inner: deployment.definition().clone(), recorder: recorder.clone() });
    let dispatcher = deployment.dispatcher().map(|d| Arc::new(DeltaTap { inner: d.clone(), recorder: recorder.clone() }) as Arc<dyn Dispatcher>);
    let r = deployment.reference();
    Deployment::new(definition, dispatcher, r.implementation_digest(), r.configuration_digest())
}

// ------------------------------------------------------------------ the world

/// Which root a run starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RootMode {
    /// Complete model calls; up to 3 concurrent tool calls; the `worker` delegate; the
    /// completion validator; at most 6 model calls.
    Complete,
    /// Streamed model calls with the context reducer; one tool call at a time; no delegate;
    /// at most 4 model calls.
    Stream,
}

/// The deployments of every Interaction run.
pub struct InteractionWorld {
    pub complete: Deployment,
    pub stream: Deployment,
    /// The Definitions of the two roots (for direct restore checks).
    pub definitions: Vec<Definition>,
    pub tool_child: Deployment,
    pub worker: Deployment,
    pub resolver: Arc<DeploymentSet>,
}

impl InteractionWorld {
    /// The world; with a recorder, every Interaction Step and model delta is recorded.
    pub fn new(recorder: Option<Recorder>) -> Result<InteractionWorld, String> {
        let tools = tool_set()?;
        let worker = worker_deployment()?;
        let delegate = Delegate::new(DelegateConfig {
            name: "worker".into(),
            description: "Upper-cases a text in a child process.".into(),
            deployment: worker.clone(),
            budget: Budget::finite(40, 10, 20),
            capabilities: CapabilitySet::empty(),
        })
        .map_err(|e| e.to_string())?;
        let base = DefinitionConfig {
            description: "The Interaction under fuzzing.".into(),
            tools: Some(tools.clone()),
            tool_budget: Some(Budget::finite(40, 10, 20)),
            ..DefinitionConfig::default()
        };
        let complete_definition = Definition::new(DefinitionConfig {
            name: "keel.fuzz.interaction".into(),
            max_model_calls: 6,
            max_concurrent_tool_calls: 3,
            delegates: vec![delegate],
            completion_validator: Some(validator()),
            ..base.clone()
        })
        .map_err(|e| e.to_string())?;
        let stream_definition = Definition::new(DefinitionConfig {
            name: "keel.fuzz.interaction_stream".into(),
            max_model_calls: 4,
            max_concurrent_tool_calls: 1,
            ..base
        })
        .map_err(|e| e.to_string())?;
        let complete_model = ModelDispatcher::new(complete_definition.model_manifest(), DispatcherConfig::complete(Arc::new(ScriptModel)))
            .map_err(|e| e.to_string())?;
        let stream_model = ModelDispatcher::new(
            stream_definition.model_manifest(),
            DispatcherConfig::stream(Arc::new(ScriptModel)).with_reducer(Arc::new(Summarizer)),
        )
        .map_err(|e| e.to_string())?;
        let root = |definition: &Definition, model: ModelDispatcher, config: &[u8]| {
            let d = Deployment::new(Arc::new(definition.clone()), Some(Arc::new(model)), Digest::of(b"keel.interaction"), Digest::of(config));
            recorded(&d, &recorder)
        };
        let complete = root(&complete_definition, complete_model, b"complete");
        let stream = root(&stream_definition, stream_model, b"stream");
        let tool_child = recorded(tools.deployment(), &recorder);
        let resolver = Arc::new(
            DeploymentSet::new().with(complete.clone()).with(stream.clone()).with(tool_child.clone()).with(worker.clone()),
        );
        Ok(InteractionWorld {
            complete,
            stream,
            definitions: vec![complete_definition, stream_definition],
            tool_child,
            worker,
            resolver,
        })
    }

    pub fn root(&self, mode: RootMode) -> &Deployment {
        match mode {
            RootMode::Complete => &self.complete,
            RootMode::Stream => &self.stream,
        }
    }

    /// The root deployment whose reference is `reference`, if it is one of ours.
    pub fn root_for(&self, reference: &keel::kernel::deployment::DeploymentRef) -> Option<&Deployment> {
        [&self.complete, &self.stream].into_iter().find(|d| d.reference() == reference)
    }
}

/// Shared by the targets: the world without recording, built once. Its configuration is
/// fixed, so failing to build it is a bug in this file, not a finding.
pub fn fuzz_world() -> &'static InteractionWorld {
    static WORLD: std::sync::OnceLock<InteractionWorld> = std::sync::OnceLock::new();
    WORLD.get_or_init(|| InteractionWorld::new(None).unwrap_or_else(|e| panic!("the fuzz Interaction world: {e}")))
}

impl ToJson for StepRecord {
    /// `{"state":ExecutionState,"signals":[Signal]}`: the input shape of the Step selector of
    /// the `interaction_state` target.
    fn to_json(&self) -> Json {
        ObjectBuilder::new().field("state", &self.state).field("signals", &self.window).build()
    }
}
