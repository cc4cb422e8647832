//! A model stream that drops mid-answer is recovered with no host code.
//!
//! The connection to the model drops after part of the answer streamed. keel cannot know
//! whether the provider finished the call, so the call is **Unknown**; for a model call the
//! default policy re-issues it (its only side effect is cost, and the re-issue counts against
//! `max_model_calls`), so the run completes without any code here handling it.
//!
//! Offline, against an OpenAI-compatible server on 127.0.0.1 that drops the first stream and
//! answers the second (what CI runs):
//! `cargo run -p keel-providers --example dropped_stream -- --fixture`

use keel::prelude::*;
use keel_providers::openai::{OpenAiClient, OpenAiConfig};
use keel_providers::testing::{Fixture, FixtureServer};
use keel_providers::Pacing;
use std::io::Write;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    if !std::env::args().any(|a| a == "--fixture") {
        println!("Pass --fixture: this example needs a server that drops a stream on purpose.");
        return Ok(());
    }
    let env = keel::env::TokioEnv::current()?.env();
    let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/openai");
    // Exchange 1 streams "Hel" and drops the connection; exchange 2 answers the same request.
    let server = FixtureServer::start(Fixture::concat([
        Fixture::load(format!("{fixtures}/stream_disconnect.json"))?,
        Fixture::load(format!("{fixtures}/stream_done_without_blank_line.json"))?,
    ]))
    .await?;
    let config = OpenAiConfig::compatible(format!("{}/v1", server.url()), "gpt-4o-mini", Pacing::new(&env)).with_api_key("test-key");
    let client = OpenAiClient::new(config)?;

    let weather = tool_fn(
        "weather",
        "Current weather in a city.",
        r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#,
        |args| async move { Ok(format!("{}: 18°C, clear", args.get("city").and_then(|c| c.as_str()).unwrap_or("?"))) },
    );
    // Nothing about Unknown calls here: the default policy re-issues a model call.
    let agent = Agent::builder("example.dropped-stream").version("1").streaming_model(client).tool(weather).max_model_calls(3).build()?;
    let run = Runtime::in_memory(agent)?.start("Hi").await?;

    let mut events = run.events();
    let mut unknowns = 0;
    while let Some(event) = events.next().await {
        match event {
            RunEvent::ModelDelta { text, .. } => {
                print!("{text}");
                std::io::stdout().flush()?;
            }
            RunEvent::Unknown(unknown) => {
                unknowns += 1;
                println!("\n[the stream dropped: the call is Unknown; policy {:?} re-issues it]", unknown.policy);
            }
            RunEvent::ResolutionNeeded { reason, .. } => return Err(format!("the run waits for a resolution: {reason}").into()),
            RunEvent::Finished(_) => println!(),
            _ => {}
        }
    }
    let result = run.result().await?;
    println!("final: {}", result.text());
    if unknowns != 1 {
        return Err(format!("expected one dropped stream, saw {unknowns}").into());
    }
    server.check_done()?;
    Ok(())
}
