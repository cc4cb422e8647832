//! Asks an OpenAI model about the weather, with one tool, through keel's durable Interaction.
//!
//! * The real API: `OPENAI_API_KEY=sk-... cargo run -p keel-providers --example openai`
//!   (`OPENAI_MODEL` picks the model, default `gpt-4o-mini`).
//! * A local OpenAI-compatible server (vLLM, llama.cpp's server, Ollama, LiteLLM): set
//!   `OPENAI_BASE_URL` to its API root, e.g.
//!   `OPENAI_BASE_URL=http://localhost:11434/v1 OPENAI_MODEL=llama3.2 cargo run -p keel-providers --example openai`
//!   (no key needed; `OPENAI_API_KEY` is sent if set).
//! * Offline, against a recorded exchange served on 127.0.0.1 (what CI runs):
//!   `cargo run -p keel-providers --example openai -- --fixture`

#[path = "support/mod.rs"]
mod support;

use keel::chat::Message;
use keel_providers::openai::{OpenAiClient, OpenAiConfig, OPENAI_BASE_URL};
use keel_providers::testing::{Fixture, FixtureServer};
use keel_providers::Pacing;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let env = keel::env::TokioEnv::current()?.env();
    let fixture = std::env::args().any(|a| a == "--fixture");
    let base_url = std::env::var("OPENAI_BASE_URL").ok();
    let has_key = std::env::var("OPENAI_API_KEY").is_ok_and(|k| !k.trim().is_empty());
    if !fixture && base_url.is_none() && !has_key {
        println!(
            "Set OPENAI_API_KEY to ask the real API, or OPENAI_BASE_URL to ask a local OpenAI-compatible\n\
             server (e.g. OPENAI_BASE_URL=http://localhost:11434/v1 OPENAI_MODEL=llama3.2 for Ollama,\n\
             http://localhost:8000/v1 for vLLM, http://localhost:8080/v1 for llama.cpp's server),\n\
             or pass --fixture to run against a recorded exchange."
        );
        return Ok(());
    }
    let model = std::env::var("OPENAI_MODEL").unwrap_or_else(|_| "gpt-4o-mini".into());
    let server = if fixture {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/openai/tool_round.json");
        Some(FixtureServer::start(Fixture::load(path)?).await?)
    } else {
        None
    };
    let config = match (&server, base_url) {
        (Some(server), _) => {
            OpenAiConfig::compatible(format!("{}/v1", server.url()), "gpt-4o-mini", Pacing::new(&env)).with_api_key("test-key")
        }
        (None, Some(url)) => OpenAiConfig::compatible(url, model, Pacing::new(&env)),
        (None, None) => OpenAiConfig::compatible(OPENAI_BASE_URL, model, Pacing::new(&env)),
    };
    let client = OpenAiClient::new(config)?;
    let answer = support::ask(client, vec![Message::user("What is the weather in Paris?")]).await.map_err(|e| format!("the agent failed: {e}"))?;
    println!("{answer}");
    if let Some(server) = server {
        server.check_done()?;
    }
    Ok(())
}
