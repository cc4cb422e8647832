//! A reasoning model with a tool through the OpenAI Responses API: the agent works out
//! (12 + 7) * 3 * 10 one calculator call at a time, and the model's encrypted reasoning is kept
//! in the run's durable context and sent back with every later call (`store: false`).
//!
//! * The real API: `OPENAI_API_KEY=sk-... cargo run -p keel-providers --example responses`
//!   (`OPENAI_MODEL` picks the model, default `gpt-5-mini`).
//! * Offline, against a recorded exchange of gpt-5.1-codex-max served on 127.0.0.1 (what CI
//!   runs): `cargo run -p keel-providers --example responses -- --fixture`

use keel::prelude::*;
use keel_providers::responses::{ResponsesClient, ResponsesConfig};
use keel_providers::testing::{Fixture, FixtureServer};
use keel_providers::Pacing;

const PROMPT: &str = "What is (12 + 7) * 3 * 10? Use the calculator, one step per call.";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let env = keel::env::TokioEnv::current()?.env();
    let fixture = std::env::args().any(|a| a == "--fixture");
    if !fixture && std::env::var("OPENAI_API_KEY").map_or(true, |k| k.trim().is_empty()) {
        println!("Set OPENAI_API_KEY to ask the real API, or pass --fixture to run against a recorded exchange.");
        return Ok(());
    }
    let server = match fixture {
        true => {
            let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/responses/calculator_rounds.json");
            Some(FixtureServer::start(Fixture::load(path)?).await?)
        }
        false => None,
    };
    let config = match &server {
        Some(server) => ResponsesConfig::at(format!("{}/v1", server.url()), "gpt-5.1-codex-max", Pacing::new(&env)).with_api_key("test-key"),
        None => ResponsesConfig::from_env("gpt-5-mini", Pacing::new(&env)),
    };
    let model = ResponsesClient::new(config.with_reasoning("high", "detailed"))?;
    let calculator = tool_fn(
        "calculator",
        "A minimal calculator for basic arithmetic. Call it once per step.",
        r#"{"type":"object","properties":{"a":{"type":"number","description":"First operand."},"b":{"type":"number","description":"Second operand."},"op":{"type":"string","enum":["add","subtract","multiply","divide"],"default":"add","description":"Arithmetic operation to perform."}},"required":["a","b","op"],"additionalProperties":false}"#,
        |args| async move {
            let number = |key: &str| args.get(key).and_then(|v| v.as_number()).map(|n| n.as_f64()).ok_or(format!("`{key}` must be a number"));
            let (a, b) = (number("a")?, number("b")?);
            let value = match args.get("op").and_then(|v| v.as_str()).unwrap_or("add") {
                "add" => a + b,
                "subtract" => a - b,
                "multiply" => a * b,
                "divide" if b != 0.0 => a / b,
                "divide" => return Err("division by zero".to_owned()),
                other => return Err(format!("unknown op `{other}`")),
            };
            Ok(value.to_string())
        },
    );
    let agent = Agent::builder("example.calculator").version("1").streaming_model(model).tool(calculator).max_model_calls(6).build()?;
    let result = Runtime::in_memory(agent)?.start(PROMPT).await?.result().await?;
    println!("{}", result.text());
    if let Some(server) = server {
        server.check_done()?;
    }
    Ok(())
}
