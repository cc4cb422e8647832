//! The real Interaction on the real Engine (tokio), its model a provider client pointed at a
//! [`FixtureServer`], with one `weather` tool.

#![allow(dead_code)]

use keel::chat::{Message, Response, ToolOutput};
use keel::env::{BoxFuture, Env, TokioEnv};
use keel::interaction::config::DefinitionConfig;
use keel::interaction::definition::Definition;
use keel::interaction::model::{DispatcherConfig, ModelClient, ModelDispatcher, ModelStreamer};
use keel::interaction::output::{Completion, Output};
use keel::interaction::protocol::InteractionInput;
use keel::interaction::toolset::{ToolSet, ToolSetConfig};
use keel::interaction::wire::Wire;
use keel::json::{Digest, Json};
use keel::kernel::binding::{Deployment, DeploymentSet};
use keel::kernel::capability::CapabilitySet;
use keel::kernel::commit::MemoryCommitter;
use keel::kernel::effect::EffectPhase;
use keel::kernel::engine::{Engine, EngineConfig};
use keel::kernel::owner::RootConfig;
use keel::kernel::resource::Budget;
use keel::kernel::result::ProcessResult;
use keel::kernel::status::Status;
use keel::kernel::tree_limits::TreeLimits;
use keel::tool::{Invocation, Tool, ToolContext, ToolDefinitionInput, ToolError};
use keel_providers::testing::{Fixture, FixtureServer};
use keel_providers::{Pacing, RetryPolicy, Timeouts};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The test key every fixture expects.
pub const KEY: &str = "test-key";

pub fn fixture(name: &str) -> Fixture {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name);
    Fixture::load(&path).unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()))
}

pub async fn serve(names: &[&str]) -> FixtureServer {
    FixtureServer::start(Fixture::concat(names.iter().map(|n| fixture(n)))).await.expect("fixture server starts")
}

pub fn env() -> Env {
    TokioEnv::current().expect("inside a tokio runtime").env()
}

/// Short waits so retry and timeout tests take well under a second each.
pub fn pacing(env: &Env) -> Pacing {
    Pacing {
        clock: env.clock.clone(),
        rng: env.rng.clone(),
        retry: RetryPolicy {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(20),
            max_backoff: Duration::from_millis(80),
            total_deadline: Duration::from_secs(10),
        },
        timeouts: Timeouts { response: Duration::from_millis(1500), stream_idle: Duration::from_millis(400) },
    }
}

/// Answers `{"city": C}` with `C: 18°C, clear`.
struct Weather;

impl Tool for Weather {
    fn spec(&self) -> ToolDefinitionInput {
        ToolDefinitionInput {
            name: "weather".into(),
            description: "Current weather in a city.".into(),
            input_schema: keel::json::parse(
                br#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#,
            )
            .expect("schema"),
        }
    }

    fn call<'a>(&'a self, invocation: &'a Invocation, _cx: ToolContext) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        let city = invocation.arguments_json().get("city").and_then(Json::as_str).unwrap_or("?").to_owned();
        Box::pin(async move { Ok(ToolOutput::text(format!("{city}: 18°C, clear"))) })
    }
}

pub enum Model {
    Complete(Arc<dyn ModelClient>),
    Stream(Arc<dyn ModelStreamer>),
}

/// How a run ended.
#[derive(Debug)]
pub enum Ending {
    Finished(Box<ProcessResult>),
    /// The model Effect of the root became unknown; the diagnostic text.
    Unknown(String),
}

impl Ending {
    /// The final response of a completed run.
    pub fn response(&self) -> Response {
        let Ending::Finished(result) = self else { panic!("run did not finish: {self:?}") };
        assert_eq!(result.status(), Status::Completed, "run did not complete: {:?}", result.termination);
        let output = Output::from_payload(result.output.as_ref().expect("completed with output")).expect("output decodes");
        match output.completion {
            Completion::ModelResponse(r) => r,
            other => panic!("not a model response: {other:?}"),
        }
    }

    /// The failure reason of a failed run.
    pub fn failure(&self) -> String {
        let Ending::Finished(result) = self else { panic!("run did not finish: {self:?}") };
        assert_eq!(result.status(), Status::Failed, "run did not fail: {:?}", result.termination);
        result.termination.reason.clone()
    }

    pub fn unknown(&self) -> String {
        match self {
            Ending::Unknown(text) => text.clone(),
            other => panic!("no unknown effect: {other:?}"),
        }
    }
}

/// Runs one Interaction (max 4 model calls, the weather tool) with `model` on a fresh Engine.
pub async fn run(model: Model, messages: Vec<Message>) -> Ending {
    run_input(model, InteractionInput::new(messages)).await
}

/// [`run`] with the whole input (messages and request options).
pub async fn run_input(model: Model, input: InteractionInput) -> Ending {
    let env = env();
    let toolset = ToolSet::new(ToolSetConfig {
        name: "test.tools".into(),
        description: "The weather tool.".into(),
        tools: vec![Arc::new(Weather)],
        deferred_tools: vec![],
        observer: None,
        implementation_digest: Digest::of(b"test.tools.impl"),
        configuration_digest: Digest::of(b"test.tools.config"),
    })
    .expect("tool set");
    let tools = toolset.deployment().clone();
    let definition = Definition::new(DefinitionConfig {
        name: "test.interaction".into(),
        description: "An interaction against a recorded provider.".into(),
        max_model_calls: 4,
        tools: Some(toolset),
        tool_budget: Some(Budget::unlimited()),
        max_concurrent_tool_calls: 4,
        ..DefinitionConfig::default()
    })
    .expect("definition");
    let config = match model {
        Model::Complete(c) => DispatcherConfig::complete(c),
        Model::Stream(s) => DispatcherConfig::stream(s),
    };
    let dispatcher = ModelDispatcher::new(definition.model_manifest(), config).expect("dispatcher");
    let parent = Deployment::new(
        Arc::new(definition),
        Some(Arc::new(dispatcher)),
        Digest::of(b"keel.interaction"),
        Digest::of(b"test.interaction.config"),
    );
    let resolver = Arc::new(DeploymentSet::new().with(parent.clone()).with(tools));
    let engine = Engine::new(EngineConfig {
        env: env.clone(),
        committer: Arc::new(MemoryCommitter::new()),
        resolver,
        root: RootConfig { budget: Budget::unlimited(), capabilities: CapabilitySet::empty(), limits: TreeLimits::default() },
        listeners: vec![],
    });
    let input = input.to_payload().expect("input");
    let handle = engine.start(parent, input).await.expect("start");
    let root = handle.id().clone();
    // Bounded: 200 polls of 50 ms.
    for _ in 0..200 {
        let waited = futures::future::select(Box::pin(handle.await_result()), env.clock.sleep(Duration::from_millis(50))).await;
        if let futures::future::Either::Left((result, _)) = waited {
            return Ending::Finished(Box::new(result.expect("the engine ran")));
        }
        if let Some(head) = engine.inspect_head(&root) {
            for process in head.processes() {
                for effect in process.prepared.iter().flat_map(|p| p.effects.iter()) {
                    if effect.phase == EffectPhase::Unknown {
                        return Ending::Unknown(effect.diagnostic.as_ref().map_or_else(String::new, |d| format!("{d:?}")));
                    }
                }
            }
        }
    }
    panic!("the run neither finished nor left an unknown effect within 10 s");
}
