//! The provider adapters under the simulator: the OpenAI and Anthropic clients send through
//! `keel_providers::testing::ExchangeTransport` (the recorded fixture exchanges served from
//! memory, chunk boundaries kept) inside a madsim runtime, so their request building,
//! response parsing and mapping run on simulated time and scheduling. Every seed must end with
//! the recorded answer, and one seed must run identically twice.

use std::path::PathBuf;
use std::sync::Arc;

use keel::kernel::commit::MemoryCommitter;
use keel::prelude::*;
use keel_providers::anthropic::{AnthropicClient, AnthropicConfig};
use keel_providers::openai::{OpenAiClient, OpenAiConfig};
use keel_providers::testing::{ExchangeTransport, Fixture};
use keel_providers::Pacing;

fn fixture(name: &str) -> Fixture {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../providers/tests/fixtures").join(name);
    Fixture::load(&path).unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()))
}

#[derive(Clone, Copy, Debug)]
enum Provider {
    OpenAi,
    Anthropic,
}

/// One seeded run of the weather agent (the `keel::agent` facade, the engine on madsim) whose
/// model is the `provider` adapter over its recorded tool round. Returns the answer and how
/// many exchanges the transport served.
fn run(provider: Provider, seed: u64) -> (String, usize) {
    let rt = madsim::runtime::Runtime::with_seed_and_config(seed, madsim::Config::default());
    rt.block_on(async move {
        let env = keel::env::MadsimEnv::current().expect("madsim env").env();
        let weather = tool_fn(
            "weather",
            "Current weather in a city.",
            r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#,
            |args| async move {
                let city = args.get("city").and_then(|c| c.as_str()).unwrap_or("?").to_owned();
                Ok(format!("{city}: 18°C, clear"))
            },
        );
        let (builder, messages, transport) = match provider {
            Provider::OpenAi => {
                let transport = Arc::new(ExchangeTransport::new(fixture("openai/tool_round.json"), env.clock.clone()));
                let config = OpenAiConfig::compatible("http://fixture.invalid/v1", "gpt-4o-mini", Pacing::new(&env))
                    .with_api_key("test-key");
                let client = OpenAiClient::with_transport(config, transport.clone()).expect("client");
                (Agent::builder("weather").model(client), vec![Message::user("What is the weather in Paris?")], transport)
            }
            Provider::Anthropic => {
                let transport = Arc::new(ExchangeTransport::new(fixture("anthropic/tool_round.json"), env.clock.clone()));
                let mut config = AnthropicConfig::at("http://fixture.invalid", "claude-sonnet-4-5", Pacing::new(&env))
                    .with_api_key("test-key");
                config.max_tokens = 1024;
                let client = AnthropicClient::with_transport(config, transport.clone()).expect("client");
                let messages =
                    vec![Message::system("You are a terse weather assistant."), Message::user("What is the weather in Paris?")];
                (Agent::builder("example.weather").model(client), messages, transport)
            }
        };
        let agent = builder.version("1").tool(weather).max_model_calls(4).build().expect("agent");
        let runtime = Runtime::with_store(agent, Arc::new(MemoryCommitter::new()), env);
        let result = runtime.start_messages(messages).await.expect("start").result().await.expect("result");
        assert!(result.is_completed(), "{provider:?} seed {seed}: {:?} {}", result.status(), result.reason());
        (result.text(), transport.served())
    })
}

#[test]
fn the_openai_adapter_runs_its_recorded_tool_round_under_madsim() {
    for seed in 0..20 {
        let (text, served) = run(Provider::OpenAi, seed);
        assert_eq!(served, 2, "seed {seed}");
        assert!(text.contains("18"), "seed {seed}: {text}");
    }
    assert_eq!(run(Provider::OpenAi, 7), run(Provider::OpenAi, 7));
}

#[test]
fn the_anthropic_adapter_runs_its_recorded_tool_round_under_madsim() {
    for seed in 0..20 {
        let (text, served) = run(Provider::Anthropic, seed);
        assert_eq!(served, 2, "seed {seed}");
        assert_eq!(text, "18°C and clear.", "seed {seed}");
    }
}
