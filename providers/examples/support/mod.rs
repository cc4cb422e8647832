//! What both examples share: a weather tool, the Interaction on an Engine, and running one
//! conversation to its end.

use keel::chat::{Message, ToolOutput};
use keel::env::{BoxFuture, Env};
use keel::interaction::config::DefinitionConfig;
use keel::interaction::definition::Definition;
use keel::interaction::model::{DispatcherConfig, ModelDispatcher};
use keel::interaction::output::{Completion, Output};
use keel::interaction::protocol::InteractionInput;
use keel::interaction::toolset::{ToolSet, ToolSetConfig};
use keel::interaction::wire::Wire;
use keel::json::{Digest, Json};
use keel::kernel::binding::{Deployment, DeploymentSet};
use keel::kernel::capability::CapabilitySet;
use keel::kernel::commit::MemoryCommitter;
use keel::kernel::engine::{Engine, EngineConfig};
use keel::kernel::owner::RootConfig;
use keel::kernel::resource::Budget;
use keel::kernel::status::Status;
use keel::kernel::tree_limits::TreeLimits;
use keel::tool::{Invocation, Tool, ToolContext, ToolDefinitionInput, ToolError};
use std::sync::Arc;

/// A pretend weather service.
struct Weather;

impl Tool for Weather {
    fn spec(&self) -> ToolDefinitionInput {
        ToolDefinitionInput {
            name: "weather".into(),
            description: "Current weather in a city.".into(),
            input_schema: keel::json::parse(
                br#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#,
            )
            .expect("a valid schema"),
        }
    }

    fn call<'a>(&'a self, invocation: &'a Invocation, _cx: ToolContext) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        let city = invocation.arguments_json().get("city").and_then(Json::as_str).unwrap_or("?").to_owned();
        Box::pin(async move { Ok(ToolOutput::text(format!("{city}: 18°C, clear"))) })
    }
}

/// Runs `messages` through a durable Interaction whose model is `model`, and returns the final
/// answer's text, or why the run ended otherwise.
pub async fn ask(env: Env, model: DispatcherConfig, messages: Vec<Message>) -> Result<String, String> {
    let toolset = ToolSet::new(ToolSetConfig {
        name: "example.tools".into(),
        description: "A weather tool.".into(),
        tools: vec![Arc::new(Weather)],
        deferred_tools: vec![],
        observer: None,
        implementation_digest: Digest::of(b"example.tools.v1"),
        configuration_digest: Digest::of(b"example.tools.config.v1"),
    })
    .map_err(|e| e.to_string())?;
    let tools = toolset.deployment().clone();
    let definition = Definition::new(DefinitionConfig {
        name: "example.weather".into(),
        description: "Answers weather questions with a tool.".into(),
        max_model_calls: 4,
        tools: Some(toolset),
        tool_budget: Some(Budget::unlimited()),
        max_concurrent_tool_calls: 4,
        ..DefinitionConfig::default()
    })
    .map_err(|e| e.to_string())?;
    let dispatcher = ModelDispatcher::new(definition.model_manifest(), model).map_err(|e| e.to_string())?;
    let agent = Deployment::new(
        Arc::new(definition),
        Some(Arc::new(dispatcher)),
        Digest::of(b"keel.interaction"),
        Digest::of(b"example.weather.config.v1"),
    );
    let engine = Engine::new(EngineConfig {
        env,
        committer: Arc::new(MemoryCommitter::new()),
        resolver: Arc::new(DeploymentSet::new().with(agent.clone()).with(tools)),
        root: RootConfig { budget: Budget::unlimited(), capabilities: CapabilitySet::empty(), limits: TreeLimits::default() },
        listeners: vec![],
    });
    let input = InteractionInput::new(messages).to_payload().map_err(|e| e.to_string())?;
    let result = engine.run(agent, input).await.map_err(|e| e.to_string())?;
    if result.status() != Status::Completed {
        return Err(format!("the run ended {:?}: {}", result.status(), result.termination.reason));
    }
    let output = Output::from_payload(result.output.as_ref().ok_or("no output")?).map_err(|e| e.to_string())?;
    match output.completion {
        Completion::ModelResponse(response) => {
            let text = response.message.map(|m| m.text()).unwrap_or_default();
            Ok(format!("{text}\n(finish: {:?}, usage: {:?}, model calls: {})", response.finish_reason, response.usage, output.model_calls))
        }
        Completion::DirectToolResults(results) => Ok(format!("{results:?}")),
    }
}
