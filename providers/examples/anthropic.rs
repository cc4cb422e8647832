//! Asks a Claude model about the weather, with one tool, through keel's durable Interaction.
//!
//! * The real API: `ANTHROPIC_API_KEY=... cargo run -p keel-providers --example anthropic`
//!   (`ANTHROPIC_MODEL` picks the model, default `claude-sonnet-4-5`).
//! * A proxy speaking the Messages API: set `ANTHROPIC_BASE_URL` (the root `/v1/messages`
//!   follows). For a local model, use an OpenAI-compatible server with the `openai` example.
//! * Offline, against a recorded exchange served on 127.0.0.1 (what CI runs):
//!   `cargo run -p keel-providers --example anthropic -- --fixture`

#[path = "support/mod.rs"]
mod support;

use keel::chat::Message;
use keel_providers::anthropic::{AnthropicClient, AnthropicConfig, ANTHROPIC_BASE_URL};
use keel_providers::testing::{Fixture, FixtureServer};
use keel_providers::Pacing;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let env = keel::env::TokioEnv::current()?.env();
    let fixture = std::env::args().any(|a| a == "--fixture");
    let base_url = std::env::var("ANTHROPIC_BASE_URL").ok();
    let has_key = std::env::var("ANTHROPIC_API_KEY").is_ok_and(|k| !k.trim().is_empty());
    if !fixture && !has_key {
        println!(
            "Set ANTHROPIC_API_KEY to ask the real API (ANTHROPIC_BASE_URL for a proxy), or pass\n\
             --fixture to run against a recorded exchange. For a local model, run the `openai`\n\
             example against an OpenAI-compatible server (vLLM, llama.cpp, Ollama, LiteLLM)."
        );
        return Ok(());
    }
    let model = std::env::var("ANTHROPIC_MODEL").unwrap_or_else(|_| "claude-sonnet-4-5".into());
    let server = if fixture {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/anthropic/tool_round.json");
        Some(FixtureServer::start(Fixture::load(path)?).await?)
    } else {
        None
    };
    let config = match &server {
        Some(server) => {
            let mut c = AnthropicConfig::at(server.url(), "claude-sonnet-4-5", Pacing::new(&env)).with_api_key("test-key");
            c.max_tokens = 1024;
            c
        }
        None => AnthropicConfig::at(base_url.unwrap_or_else(|| ANTHROPIC_BASE_URL.into()), model, Pacing::new(&env)),
    };
    let client = AnthropicClient::new(config)?;
    let messages = vec![Message::system("You are a terse weather assistant."), Message::user("What is the weather in Paris?")];
    let answer = support::ask(client, messages).await.map_err(|e| format!("the agent failed: {e}"))?;
    println!("{answer}");
    if let Some(server) = server {
        server.check_done()?;
    }
    Ok(())
}
