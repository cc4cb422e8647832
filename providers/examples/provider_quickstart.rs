//! The README's provider quickstart: a durable weather agent on OpenAI (or any OpenAI-compatible
//! server), in under 30 lines of `main`.
//!
//! * The real API: `OPENAI_API_KEY=sk-... cargo run -p keel-providers --example provider_quickstart`.
//! * A local server: `OPENAI_BASE_URL=http://localhost:11434/v1 OPENAI_MODEL=llama3.2 cargo run ...`.
//! * Offline, against a recorded exchange on 127.0.0.1 (what CI runs): add `-- --fixture`.

use keel::prelude::*;
use keel_providers::openai::{OpenAiClient, OpenAiConfig};
use keel_providers::Pacing;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let offline = fixture::serve_if_asked().await?; // sets OPENAI_BASE_URL to a local replay
    let env = keel::env::TokioEnv::current()?.env();
    let model = OpenAiClient::new(OpenAiConfig::from_env("gpt-4o-mini", Pacing::new(&env)))?;
    let weather = tool_fn(
        "weather",
        "Current weather in a city.",
        r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#,
        |args| async move {
            let city = args.get("city").and_then(|c| c.as_str()).unwrap_or("?").to_owned();
            Ok(format!("{city}: 18°C, clear"))
        },
    );
    let agent = Agent::builder("weather").version("1").model(model).tool(weather).max_model_calls(4).build()?;
    let run = Runtime::in_memory(agent)?.start("What is the weather in Paris?").await?;
    println!("{}", run.result().await?.text());
    fixture::finish(offline)
}

/// `--fixture`: replay a recorded OpenAI exchange from a real HTTP server on 127.0.0.1.
mod fixture {
    use keel_providers::testing::{Fixture, FixtureServer};

    pub async fn serve_if_asked() -> Result<Option<FixtureServer>, Box<dyn std::error::Error>> {
        if !std::env::args().any(|a| a == "--fixture") {
            return Ok(None);
        }
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/openai/tool_round.json");
        let server = FixtureServer::start(Fixture::load(path)?).await?;
        std::env::set_var("OPENAI_BASE_URL", format!("{}/v1", server.url()));
        std::env::set_var("OPENAI_API_KEY", "test-key");
        Ok(Some(server))
    }

    /// Fails unless the server saw every recorded request, in order.
    pub fn finish(server: Option<FixtureServer>) -> Result<(), Box<dyn std::error::Error>> {
        Ok(server.map(|s| s.check_done()).transpose().map(|_| ())?)
    }
}
