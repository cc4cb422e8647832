//! A run's spans printed to stdout by `tracing-subscriber`'s formatter: the agent span, each
//! model call and tool call with their GenAI attributes, and the commits in between.
//!
//! ```text
//! cargo run -p keel-otel --example tracing_stdout
//! ```

use keel::prelude::*;
use tracing_subscriber::fmt::format::FmtSpan;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // keel's spans and events (target `keel`): info shows runs, model and tool calls, waits and
    // Unknowns; `tracing::Level::DEBUG` adds every commit. A closed span prints with its fields.
    tracing_subscriber::registry()
        .with(tracing_subscriber::fmt::layer().with_span_events(FmtSpan::CLOSE).with_ansi(false))
        .with(tracing_subscriber::filter::Targets::new().with_target(keel::agent::TRACE_TARGET, tracing::Level::INFO))
        .init();

    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
    rt.block_on(async {
        let weather = tool_fn(
            "get_weather",
            "The current weather of a city.",
            r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#,
            |args| async move {
                let city = args.get("city").and_then(|c| c.as_str()).unwrap_or("?").to_owned();
                Ok(format!("sunny, 21 °C in {city}"))
            },
        );
        let agent = Agent::builder("weather")
            .version("1.0.0")
            .model(ScriptedModel::new().call_tool("get_weather", r#"{"city":"Paris"}"#).then_text("It is sunny in Paris."))
            .tool(weather)
            // Prompt, completion and tool text on the spans: off unless asked for.
            .trace_content(true)
            .build()?;
        let run = Runtime::in_memory(agent)?.start("What is the weather in Paris?").await?;
        println!("answer: {}", run.result().await?.text());
        Ok(())
    })
}
