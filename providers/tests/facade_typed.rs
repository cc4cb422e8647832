//! An agent built with the facade (instructions, a typed output) against a real HTTP server on
//! 127.0.0.1: what each provider client puts on the wire.

use keel::prelude::*;
use keel_providers::anthropic::{AnthropicClient, AnthropicConfig};
use keel_providers::openai::{OpenAiClient, OpenAiConfig};
use keel_providers::testing::{Fixture, FixtureServer};
use keel_providers::Pacing;
use serde::Deserialize;
use serde_json::{json, Value};

const INSTRUCTIONS: &str = "You are a terse weather assistant.";

#[derive(Debug, Deserialize, schemars::JsonSchema, PartialEq)]
struct Forecast {
    city: String,
    celsius: i32,
}

/// A fixture of one exchange at `path` that checks nothing of the request but its method and
/// path, answering `body`.
async fn serve(path: &str, body: Value) -> FixtureServer {
    let fixture = json!({
        "description": "one answer",
        "exchanges": [{"request": {"method": "POST", "path": path}, "response": {"status": 200, "headers": {"content-type": "application/json"}, "body": body.to_string()}}]
    });
    FixtureServer::start(Fixture::parse(&fixture.to_string()).unwrap()).await.unwrap()
}

fn sent(server: &FixtureServer) -> Value {
    let received = server.received();
    assert_eq!(received.len(), 1, "one request");
    serde_json::from_slice(&received[0].body).unwrap()
}

fn agent(model: impl ModelClient) -> Agent {
    Agent::builder("forecaster").version("1").instructions(INSTRUCTIONS).model(model).output::<Forecast>().build().unwrap()
}

#[tokio::test]
async fn openai_gets_the_instructions_as_the_system_message_and_the_output_schema_as_response_format() {
    let answer = r#"{"city":"Paris","celsius":18}"#;
    let server = serve(
        "/v1/chat/completions",
        json!({"id": "c1", "object": "chat.completion", "model": "gpt-4o-mini", "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 10, "completion_tokens": 5}}),
    )
    .await;
    let env = keel::env::TokioEnv::current().unwrap().env();
    let config = OpenAiConfig::compatible(format!("{}/v1", server.url()), "gpt-4o-mini", Pacing::new(&env)).with_api_key("k");
    let run = Runtime::in_memory(agent(OpenAiClient::new(config).unwrap())).unwrap().start("Weather in Paris?").await.unwrap();
    let forecast: Forecast = run.result().await.unwrap().output().unwrap();
    assert_eq!(forecast, Forecast { city: "Paris".into(), celsius: 18 });

    let body = sent(&server);
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "system");
    let system = messages[0]["content"].as_str().unwrap();
    assert!(system.starts_with(INSTRUCTIONS), "{system}");
    assert_eq!(messages[1], json!({"role": "user", "content": "Weather in Paris?"}));
    let format = &body["response_format"];
    assert_eq!(format["type"], "json_schema", "{body}");
    assert_eq!(format["json_schema"]["schema"]["properties"]["celsius"]["type"], "integer", "{body}");
    server.check_done().unwrap();
}

#[tokio::test]
async fn openai_structured_output_can_be_turned_off_for_servers_that_reject_it() {
    let server = serve(
        "/v1/chat/completions",
        json!({"id": "c1", "object": "chat.completion", "model": "m", "choices": [{"index": 0, "message": {"role": "assistant", "content": r#"{"city":"Oslo","celsius":-3}"#}, "finish_reason": "stop"}]}),
    )
    .await;
    let env = keel::env::TokioEnv::current().unwrap().env();
    let mut config = OpenAiConfig::compatible(format!("{}/v1", server.url()), "m", Pacing::new(&env));
    config.structured_output = false;
    let run = Runtime::in_memory(agent(OpenAiClient::new(config).unwrap())).unwrap().start("Oslo?").await.unwrap();
    assert_eq!(run.result().await.unwrap().output::<Forecast>().unwrap().celsius, -3);
    let body = sent(&server);
    assert!(body.get("response_format").is_none(), "{body}");
    assert!(body["messages"][0]["content"].as_str().unwrap().contains("JSON Schema"), "the schema is in the instructions");
}

#[tokio::test]
async fn anthropic_gets_the_instructions_in_the_system_field() {
    let server = serve(
        "/v1/messages",
        json!({"id": "m1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": [{"type": "text", "text": r#"{"city":"Paris","celsius":18}"#}], "stop_reason": "end_turn", "usage": {"input_tokens": 10, "output_tokens": 5}}),
    )
    .await;
    let env = keel::env::TokioEnv::current().unwrap().env();
    let config = AnthropicConfig::at(server.url(), "claude-sonnet-4-5", Pacing::new(&env)).with_api_key("k");
    let run = Runtime::in_memory(agent(AnthropicClient::new(config).unwrap())).unwrap().start("Weather in Paris?").await.unwrap();
    assert_eq!(run.result().await.unwrap().output::<Forecast>().unwrap().city, "Paris");
    let body = sent(&server);
    let system = match &body["system"] {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks[0]["text"].as_str().unwrap().to_owned(),
        other => panic!("no system field: {other} in {body}"),
    };
    assert!(system.starts_with(INSTRUCTIONS), "{system}");
    assert!(system.contains("\"celsius\""), "the output schema is in the system text: {system}");
    let messages = body["messages"].as_array().unwrap();
    assert!(messages.iter().all(|m| m["role"] != "system"), "{body}");
    server.check_done().unwrap();
}
