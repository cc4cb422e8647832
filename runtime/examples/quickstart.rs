//! Quickstart: an agent with a weather tool, run offline with a scripted model.
//!
//! Run: `cargo run -p keel-runtime --example quickstart`

use keel::prelude::*;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 1. The model. Offline here; any `ModelClient` (an HTTP provider) plugs in the same way.
    let model = ScriptedModel::new()
        .call_tool("get_weather", r#"{"city":"Paris"}"#)
        .then_text("It is sunny and 21 °C in Paris.");

    // 2. A tool: a name, a description, an argument schema and an async function.
    let weather = tool_fn(
        "get_weather",
        "The current weather of a city.",
        r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#,
        |args| async move {
            let city = args.get("city").and_then(|c| c.as_str()).unwrap_or("nowhere").to_owned();
            Ok(format!("sunny, 21 °C in {city}"))
        },
    );

    // 3. The agent: checked now, before any model call.
    let agent = Agent::builder("weather")
        .version("1.0.0")
        .model(model)
        .tool(weather)
        .max_model_calls(4)
        .build()?;

    // 4. Run it and watch what happens. Every event is durable before you see it.
    let runtime = Runtime::in_memory(agent)?;
    let run = runtime.start("What is the weather in Paris?").await?;
    let mut events = run.events();
    while let Some(event) = events.next().await {
        match event {
            RunEvent::ToolStarted { tool, .. } => println!("calling {tool}"),
            RunEvent::ToolSettled { tool, text, .. } => println!("{tool} answered: {text}"),
            RunEvent::InputRequested(request) => {
                run.answer_text(&request, "yes").await?;
            }
            RunEvent::Finished(result) => println!("answer: {}", result.text()),
            _ => {}
        }
    }
    // 5. The answer. `result()` is `Ok` only for a completed run: a run that failed, was
    //    canceled or killed is `Err(RunError::NotCompleted(failure))` with its code and message
    //    (handled in `runtime/examples/failed_run.rs`); here `?` prints it and exits non-zero.
    let result = run.result().await?;
    assert_eq!(result.text(), "It is sunny and 21 °C in Paris.");
    Ok(())
}
