//! The Anthropic adapter through the real Interaction on the real Engine, against recorded
//! exchanges served by the fixture server.

mod common;

use common::{pacing, run, run_input, serve, Model, KEY};
use keel::chat::{FinishReason, Message, Reasoning, Usage};
use keel::interaction::protocol::InteractionInput;
use keel_providers::anthropic::{AnthropicClient, AnthropicConfig};
use keel_providers::testing::FixtureServer;
use std::sync::Arc;

const SYSTEM: &str = "You are a terse weather assistant.";

fn client(server: &FixtureServer) -> Arc<AnthropicClient> {
    let mut config = AnthropicConfig::at(server.url(), "claude-sonnet-4-5", pacing(&common::env())).with_api_key(KEY);
    config.max_tokens = 1024;
    Arc::new(AnthropicClient::new(config).expect("client"))
}

fn complete(server: &FixtureServer) -> Model {
    Model::Complete(client(server))
}

fn streaming(server: &FixtureServer) -> Model {
    Model::Stream(client(server))
}

fn ask(text: &str) -> Vec<Message> {
    vec![Message::system(SYSTEM), Message::user(text)]
}

#[tokio::test]
async fn a_tool_round_with_a_system_prompt() {
    let server = serve(&["anthropic/tool_round.json"]).await;
    let response = run(complete(&server), ask("What is the weather in Paris?")).await.response();
    assert_eq!(response.message.unwrap().text(), "18°C and clear.");
    assert_eq!(response.finish_reason, Some(FinishReason::Stop));
    assert_eq!(response.usage, Usage::new(400, 9));
    server.check_done().unwrap();
}

#[tokio::test]
async fn streamed_parallel_tool_use_split_across_chunks() {
    let server = serve(&["anthropic/stream_parallel.json"]).await;
    let response = run(streaming(&server), ask("Weather in Paris and Tokyo?")).await.response();
    assert_eq!(response.message.unwrap().text(), "Both 18°C and clear.");
    assert_eq!(response.finish_reason, Some(FinishReason::Stop));
    assert_eq!(response.usage, Usage::new(450, 8), "input from message_start, output from message_delta");
    server.check_done().unwrap();
}

#[tokio::test]
async fn usage_carries_cache_writes_and_reads() {
    // Complete mode: the first response of the tool round read 100 tokens from the cache.
    let server = serve(&["anthropic/tool_round.json"]).await;
    let client = client(&server);
    let mut request = keel::chat::Request::new(ask("What is the weather in Paris?"));
    request.tools = vec![weather_definition()];
    let response = client.complete(&request).await.unwrap();
    assert_eq!(response.usage, Usage { cache_read_tokens: 100, ..Usage::new(410, 42) });
    // Streamed: message_start reports the cache, message_delta the output only.
    let server = serve(&["anthropic/stream_cache_usage.json"]).await;
    let response = run(streaming(&server), ask("Hi")).await.response();
    assert_eq!(response.message.unwrap().text(), "Mild.");
    assert_eq!(response.usage, Usage { cache_write_tokens: 188, cache_read_tokens: 1024, ..Usage::new(21 + 188 + 1024, 5) });
    server.check_done().unwrap();
}

/// The weather tool as the fixtures' requests declare it.
fn weather_definition() -> keel::chat::ToolDefinition {
    let schema = br#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#;
    keel::chat::ToolDefinition::new("weather", "Current weather in a city.", keel::json::parse(schema).unwrap())
}

#[tokio::test]
async fn extended_thinking_with_tool_use_sends_the_signed_thinking_back() {
    // The fixture's second request carries the first turn's `thinking` block with its
    // signature and its `redacted_thinking` data verbatim, ahead of the text and tool_use:
    // the server refuses (no matching exchange) any other body.
    let server = serve(&["anthropic/stream_thinking_tool_round.json"]).await;
    let mut input = InteractionInput::new(ask("What is the weather in Paris?"));
    input.options.max_output_tokens = Some(2048);
    let keel::json::Json::Object(extra) = keel::json::parse(br#"{"thinking":{"type":"enabled","budget_tokens":1024}}"#).unwrap() else { unreachable!() };
    input.options.extra = Some(extra);
    let response = run_input(streaming(&server), input).await.response();
    let message = response.message.unwrap();
    assert_eq!(message.text(), "18°C and clear.", "thinking is never answer text");
    let reasoning: Vec<&Reasoning> = message.reasoning().collect();
    assert_eq!(reasoning.len(), 1);
    assert_eq!(reasoning[0].text, "The tool says 18°C and clear. Answer tersely.");
    assert!(reasoning[0].signature.as_deref().is_some_and(|s| s.starts_with("ErUBCkYIBhgC")));
    assert_eq!(response.usage, Usage::new(530, 41));
    server.check_done().unwrap();
}

#[tokio::test]
async fn a_refusal_stop_reason_is_finish_reason_refusal() {
    let server = serve(&["anthropic/refusal.json"]).await;
    let response = run(complete(&server), ask("Help me with something harmful.")).await.response();
    assert_eq!(response.finish_reason, Some(FinishReason::Refusal));
    assert_eq!(response.message.unwrap().text(), "I can't help with that.");
    server.check_done().unwrap();
}

#[tokio::test]
async fn max_tokens_with_a_cut_tool_use_gets_truncation_feedback() {
    let server = serve(&["anthropic/length_tool_calls.json"]).await;
    let response = run(streaming(&server), ask("What is the weather in Paris?")).await.response();
    assert_eq!(response.message.unwrap().text(), "Mild.");
    server.check_done().unwrap();
}

#[tokio::test]
async fn overloaded_529_is_retried() {
    let server = serve(&["anthropic/overloaded_then_ok.json"]).await;
    let response = run(complete(&server), ask("Hi")).await.response();
    assert_eq!(response.message.unwrap().text(), "Mild.");
    assert_eq!(response.usage, Usage::new(12, 2));
    server.check_done().unwrap();
}

#[tokio::test]
async fn an_error_event_mid_stream_is_a_definite_failure() {
    let server = serve(&["anthropic/stream_error_event.json"]).await;
    let reason = run(streaming(&server), ask("Hi")).await.failure();
    assert!(reason.contains("overloaded_error") && reason.contains("Overloaded"), "{reason}");
    assert_eq!(server.received().len(), 1, "a started stream is never retried");
}

#[tokio::test]
async fn a_malformed_message_is_a_clear_definite_failure() {
    let server = serve(&["anthropic/malformed.json"]).await;
    let reason = run(complete(&server), ask("Hi")).await.failure();
    assert!(reason.contains("malformed response") && reason.contains("response.content[0].text is missing"), "{reason}");
}

#[tokio::test]
async fn a_stalled_stream_leaves_the_model_call_unknown() {
    let server = serve(&["anthropic/stream_stalled.json"]).await;
    let text = run(streaming(&server), ask("Hi")).await.unknown();
    assert!(text.contains("no stream chunk within"), "{text}");
}
