//! What both provider examples share: one weather agent on the `keel::agent` facade, run to its
//! end over a given model client.

use keel::interaction::output::Completion;
use keel::prelude::*;

/// Runs `messages` through a durable weather agent whose model is `model`, and returns the
/// answer with its finish reason, usage and model-call count, or why the run ended otherwise.
pub async fn ask(model: impl ModelClient, messages: Vec<Message>) -> Result<String, Box<dyn std::error::Error>> {
    let weather = tool_fn(
        "weather",
        "Current weather in a city.",
        r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#,
        |args| async move {
            let city = args.get("city").and_then(|c| c.as_str()).unwrap_or("?").to_owned();
            Ok(format!("{city}: 18°C, clear"))
        },
    );
    let agent = Agent::builder("example.weather").version("1").model(model).tool(weather).max_model_calls(4).build()?;
    let result = Runtime::in_memory(agent)?.start_messages(messages).await?.result().await?;
    if !result.is_completed() {
        return Err(format!("the run ended {:?}: {}", result.status(), result.reason()).into());
    }
    let output = result.interaction_output().ok_or("a completed run without an output")?;
    Ok(match output.completion {
        Completion::ModelResponse(response) => format!(
            "{}\n(finish: {:?}, usage: {:?}, model calls: {})",
            result.text(),
            response.finish_reason,
            response.usage,
            output.model_calls
        ),
        Completion::DirectToolResults(results) => format!("{results:?}"),
    })
}
