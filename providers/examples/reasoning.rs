//! A reasoning model with a tool: Claude with extended thinking answers a weather question
//! through keel's durable agent, streaming. Its thinking comes back as reasoning parts (never
//! answer text), is kept in the run's durable context, and is sent back, signed, on the next
//! model call, as the API requires when thinking is used with tools.
//!
//! * The real API: `ANTHROPIC_API_KEY=... cargo run -p keel-providers --example reasoning`
//!   (`ANTHROPIC_MODEL` picks the model, default `claude-sonnet-4-5`).
//! * Offline, against a recorded two-turn thinking exchange served on 127.0.0.1 (what CI
//!   runs): `cargo run -p keel-providers --example reasoning -- --fixture`. The fixture
//!   server refuses a second request that does not carry the first turn's signed thinking.

use keel::chat::{Message, Part};
use keel::interaction::output::Completion;
use keel::prelude::*;
use keel_providers::anthropic::{AnthropicClient, AnthropicConfig, ANTHROPIC_BASE_URL};
use keel_providers::testing::{Fixture, FixtureServer};
use keel_providers::Pacing;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let env = keel::env::TokioEnv::current()?.env();
    let fixture = std::env::args().any(|a| a == "--fixture");
    let has_key = std::env::var("ANTHROPIC_API_KEY").is_ok_and(|k| !k.trim().is_empty());
    if !fixture && !has_key {
        println!("Set ANTHROPIC_API_KEY to ask the real API, or pass --fixture to run against a recorded exchange.");
        return Ok(());
    }
    let server = if fixture {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/anthropic/stream_thinking_tool_round.json");
        Some(FixtureServer::start(Fixture::load(path)?).await?)
    } else {
        None
    };
    let mut config = match &server {
        Some(server) => AnthropicConfig::at(server.url(), "claude-sonnet-4-5", Pacing::new(&env)).with_api_key("test-key"),
        None => {
            let model = std::env::var("ANTHROPIC_MODEL").unwrap_or_else(|_| "claude-sonnet-4-5".into());
            let base_url = std::env::var("ANTHROPIC_BASE_URL").unwrap_or_else(|_| ANTHROPIC_BASE_URL.into());
            AnthropicConfig::at(base_url, model, Pacing::new(&env))
        }
    };
    // Thinking needs a budget of at least 1024 tokens, below max_tokens.
    config.max_tokens = 2048;
    config.thinking = Some(1024);
    let client = AnthropicClient::new(config)?;

    let weather = tool_fn(
        "weather",
        "Current weather in a city.",
        r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#,
        |args| async move {
            let city = args.get("city").and_then(|c| c.as_str()).unwrap_or("?").to_owned();
            Ok(format!("{city}: 18°C, clear"))
        },
    );
    let agent =
        Agent::builder("example.reasoning").version("1").streaming_model(client).tool(weather).max_model_calls(4).build()?;
    let messages = vec![Message::system("You are a terse weather assistant."), Message::user("What is the weather in Paris?")];
    let result = Runtime::in_memory(agent)?.start_messages(messages).await?.result().await?;
    let output = result.interaction_output().ok_or("a completed run without an output")?;
    println!("{}", result.text());
    if let Completion::ModelResponse(response) = &output.completion {
        for part in response.message.iter().flat_map(|m| m.parts.iter()) {
            if let Part::Reasoning(reasoning) = part {
                let signed = if reasoning.signature.is_some() { "signed" } else { "unsigned" };
                println!("(reasoning, {signed}: {})", reasoning.text);
            }
        }
        println!("(finish: {:?}, usage: {:?}, model calls: {})", response.finish_reason, response.usage, output.model_calls);
    }
    if let Some(server) = server {
        server.check_done()?;
    }
    Ok(())
}
