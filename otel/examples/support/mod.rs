//! The weather agent the tracing examples and `tests/spans.rs` trace: one tool round, a
//! scripted model, so it runs without a provider.

use keel::prelude::*;

/// A tool answering the weather of the `city` argument.
pub fn weather() -> FnTool {
    tool_fn(
        "get_weather",
        "The current weather of a city.",
        r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#,
        |args| async move {
            let city = args.get("city").and_then(|c| c.as_str()).unwrap_or("?").to_owned();
            Ok(format!("sunny, 21 °C in {city}"))
        },
    )
}

/// The agent `weather`: asks the tool about Paris, then answers "It is sunny in Paris."; with
/// `content`, prompt, completion and tool text are on its spans.
pub fn weather_agent(content: bool) -> Result<Agent, BuildError> {
    Agent::builder("weather")
        .version("1.0.0")
        .model(ScriptedModel::new().call_tool("get_weather", r#"{"city":"Paris"}"#).then_text("It is sunny in Paris."))
        .tool(weather())
        // Prompt, completion and tool text on the spans: off unless asked for.
        .trace_content(content)
        .build()
}
