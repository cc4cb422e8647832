//! Quickstart: an agent with instructions, a typed tool and a typed answer, run offline with a
//! scripted model.
//!
//! Run: `cargo run -p keel-runtime --example quickstart`

use keel::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The tool's arguments. The model is shown their JSON Schema, derived by schemars (the doc
/// comments become descriptions).
#[derive(Deserialize, JsonSchema)]
struct WeatherArgs {
    /// The city, for example "Paris".
    city: String,
}

/// What the tool returns: any `Serialize` type.
#[derive(Serialize)]
struct Weather {
    city: String,
    celsius: i32,
    sky: String,
}

/// The answer the agent must give: checked against this type's schema before the run
/// completes.
#[derive(Debug, Deserialize, JsonSchema)]
struct Forecast {
    city: String,
    celsius: i32,
    summary: String,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 1. The model. Offline here; any `ModelClient` (an HTTP provider) plugs in the same way.
    let model = ScriptedModel::new()
        .call_tool("get_weather", r#"{"city":"Paris"}"#)
        .then_text(r#"{"city":"Paris","celsius":21,"summary":"Sunny and mild."}"#);

    // 2. A tool: an async function of typed arguments. Arguments that do not fit reach the
    //    model as a tool error (so it can correct them), as does an `Err` you return.
    let weather = tool("get_weather", "The current weather of a city.", |args: WeatherArgs| async move {
        if args.city.trim().is_empty() {
            return Err("name a city".to_owned());
        }
        Ok(Weather { city: args.city, celsius: 21, sky: "sunny".to_owned() })
    });

    // 3. The agent: checked now, before any model call.
    let agent = Agent::builder("weather")
        .version("1.0.0")
        .instructions("You are a weather assistant. Look the weather up with your tool; never guess.")
        .model(model)
        .tool(weather)
        .output::<Forecast>()
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
            RunEvent::Finished(result) => println!("finished: {}", result.status().as_str()),
            _ => {}
        }
    }

    // 5. The answer. `result()` is `Ok` only for a completed run: a run that failed, was
    //    canceled or killed is `Err(RunError::NotCompleted(failure))` with its code and message
    //    (handled in `runtime/examples/failed_run.rs`); here `?` prints it and exits non-zero.
    //    `output()` reads the checked answer as your type.
    let forecast: Forecast = run.result().await?.output()?;
    println!("{}: {} °C. {}", forecast.city, forecast.celsius, forecast.summary);
    Ok(())
}
