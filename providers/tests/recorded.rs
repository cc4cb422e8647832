//! The Chat Completions and Messages clients against traffic recorded from the live APIs
//! (OpenAI, Anthropic) and from OpenAI-compatible servers (DeepSeek, xAI, Azure), taken from
//! public repositories (`tests/fixtures/SOURCES.md` names each origin) and replayed on
//! 127.0.0.1 with chunk boundaries inside JSON values. Call by call: each recorded stream is
//! decoded into text, reasoning, tool calls, finish reason and usage, and what the client sends
//! back on the next call (calls, results, signed thinking) is checked against the recording;
//! and through the real Interaction on the real Engine (a recorded call running the test's
//! weather tool, a recorded signed thinking stream kept in the run's answer).

mod common;

use common::{fixture, pacing, run, serve, Model, KEY};
use futures::StreamExt;
use keel::chat::{Accumulator, FinishReason, Message, Request, Response, ToolDefinition, ToolOutput, ToolResult, Usage};
use keel::interaction::model::ModelError;
use keel_providers::anthropic::{AnthropicClient, AnthropicConfig};
use keel_providers::openai::{OpenAiClient, OpenAiConfig};
use keel_providers::testing::{FixtureServer, ReplayBody};
use serde_json::{json, Value};
use std::sync::Arc;

fn openai(server: &FixtureServer, model: &str) -> OpenAiClient {
    let config = OpenAiConfig::compatible(format!("{}/v1", server.url()), model, pacing(&common::env())).with_api_key(KEY);
    OpenAiClient::new(config).expect("client")
}

fn anthropic(server: &FixtureServer, model: &str, max_tokens: u32) -> AnthropicClient {
    let mut config = AnthropicConfig::at(server.url(), model, pacing(&common::env())).with_api_key(KEY);
    config.max_tokens = max_tokens;
    AnthropicClient::new(config).expect("client")
}

/// Reads a whole stream into a response, or the error that ended it.
async fn collect(mut stream: keel::interaction::model::ModelDeltaStream<'static>) -> Result<Response, ModelError> {
    let mut acc = Accumulator::new();
    while let Some(delta) = stream.next().await {
        acc.push(&delta?).expect("deltas accumulate");
    }
    Ok(acc.finish().expect("a response"))
}

fn tool(name: &str, description: &str, schema: Value) -> ToolDefinition {
    ToolDefinition::new(name, description, keel::json::parse(schema.to_string().as_bytes()).expect("schema"))
}

/// (id, name, arguments) of each call of `response`.
fn calls(response: &Response) -> Vec<(String, String, String)> {
    let message = response.message.as_ref().expect("a message");
    message.tool_calls().map(|c| (c.id.clone(), c.name.clone(), c.arguments.clone())).collect()
}

/// The assistant message of `response` and one tool message answering its calls with `output`.
fn answer_calls(messages: &mut Vec<Message>, response: &Response, output: &str) {
    let message = response.message.clone().expect("a message");
    let results: Vec<ToolResult> =
        message.tool_calls().map(|c| ToolResult::ok(c.id.clone(), c.name.clone(), ToolOutput::text(output))).collect();
    messages.push(message);
    messages.push(Message::tool_results(results));
}

/// The body of the `n`th request the server received, as JSON.
fn sent(server: &FixtureServer, n: usize) -> Value {
    let received = server.received();
    serde_json::from_slice(&received.get(n).unwrap_or_else(|| panic!("request {n} was sent")).body).expect("a JSON body")
}

/// The recorded (whole) response body of exchange `n` of a fixture, as JSON.
fn recorded_body(name: &str, n: usize) -> Value {
    match &fixture(name).exchanges[n].response.body {
        ReplayBody::Whole(text) => serde_json::from_str(text).expect("recorded JSON"),
        ReplayBody::Chunks(_) => panic!("{name}: exchange {n} is a stream"),
    }
}

fn without_cache_control(mut block: Value) -> Value {
    if let Some(map) = block.as_object_mut() {
        map.remove("cache_control");
    }
    block
}

// ---- OpenAI Chat Completions ----

const CAPITAL_PROMPT: &str = "What is the capital of the UK? Use the tool, then answer.";

fn capital_request(messages: Vec<Message>) -> Request {
    let schema = json!({"type": "object", "properties": {"country": {"type": "string"}}, "required": ["country"], "additionalProperties": false});
    Request { tools: vec![tool("get_capital", "", schema)], ..Request::new(messages) }
}

#[tokio::test]
async fn openai_a_recorded_streamed_tool_round() {
    let server = serve(&["openai/recorded_tool_round.json"]).await;
    let client = openai(&server, "gpt-4o-mini");
    let mut messages = vec![Message::user(CAPITAL_PROMPT)];
    let stream = client.open_stream(&capital_request(messages.clone())).await.expect("the stream opens");
    let response = collect(stream).await.expect("the recorded call decodes");
    assert_eq!(calls(&response), [("call_ZR5UUuTt3pf61kjwAJIYdVMj".into(), "get_capital".into(), r#"{"country":"UK"}"#.into())]);
    assert_eq!(response.message.as_ref().unwrap().text(), "");
    assert_eq!(response.finish_reason, Some(FinishReason::ToolCalls));
    assert_eq!(response.usage, Usage::new(53, 15), "the usage chunk after the finish reason counts");
    answer_calls(&mut messages, &response, "London");

    let stream = client.open_stream(&capital_request(messages)).await.expect("the stream opens");
    let response = collect(stream).await.expect("the recorded answer decodes");
    assert_eq!(response.message.unwrap().text(), "The capital of the UK is London.");
    assert_eq!(response.finish_reason, Some(FinishReason::Stop));
    assert_eq!(response.usage, Usage::new(78, 9));
    server.check_done().unwrap();

    // The second request carried the call and its result as the recorded second request did.
    let body = sent(&server, 1);
    assert_eq!(body["stream"], json!(true));
    let messages = body["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 3, "{body}");
    let call = &messages[1]["tool_calls"][0];
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(call["id"], "call_ZR5UUuTt3pf61kjwAJIYdVMj");
    assert_eq!(call["function"], json!({"name": "get_capital", "arguments": "{\"country\":\"UK\"}"}));
    assert_eq!(messages[2]["role"], "tool");
    assert_eq!(messages[2]["tool_call_id"], "call_ZR5UUuTt3pf61kjwAJIYdVMj");
    assert!(messages[2]["content"].to_string().contains("London"), "{}", messages[2]);
}

#[tokio::test]
async fn openai_a_recorded_streamed_text_answer() {
    let server = serve(&["openai/recorded_text.json"]).await;
    let client = openai(&server, "gpt-4.1-nano");
    let stream = client.open_stream(&Request::new(vec![Message::user("Invent a new holiday and describe its traditions.")])).await.expect("opens");
    let response = collect(stream).await.expect("the recorded answer decodes");
    let text = response.message.unwrap().text();
    assert!(text.starts_with("**Holiday Name:** Harmony Day\n\n**Date:**"), "{text}");
    assert!(text.ends_with("connected through shared human experiences and mutual respect."), "{text}");
    assert_eq!(text.chars().count(), 1724, "300 deltas, none lost or doubled");
    assert_eq!(response.finish_reason, Some(FinishReason::Stop));
    assert_eq!(response.usage, Usage::new(16, 300));
    server.check_done().unwrap();
}

#[tokio::test]
async fn openai_compatible_deepseek_reasoning_then_a_call_with_cached_and_reasoning_tokens() {
    let server = serve(&["openai/recorded_deepseek_tool_call.json"]).await;
    let client = openai(&server, "deepseek-reasoner");
    let stream = client.open_stream(&Request::new(vec![Message::user("What is the weather in San Francisco?")])).await.expect("opens");
    let response = collect(stream).await.expect("the recorded stream decodes");
    assert_eq!(calls(&response), [("call_00_ioIn7yN9p1ZOMNpDLwd4MgAF".into(), "weather".into(), r#"{"location": "San Francisco"}"#.into())]);
    let message = response.message.as_ref().unwrap();
    assert_eq!(message.text(), "", "reasoning is never answer text");
    let reasoning: Vec<_> = message.reasoning().collect();
    assert_eq!(reasoning.len(), 1);
    assert!(reasoning[0].text.starts_with("The user is asking for the weather in San Francisco."), "{}", reasoning[0].text);
    assert!(reasoning[0].text.ends_with("location parameter set to \"San Francisco\"."), "{}", reasoning[0].text);
    assert_eq!(response.finish_reason, Some(FinishReason::ToolCalls));
    // The finish reason and the usage arrive in the same (last) chunk.
    assert_eq!(response.usage, Usage { cache_read_tokens: 320, reasoning_tokens: 39, ..Usage::new(339, 83) });
    server.check_done().unwrap();
}

#[tokio::test]
async fn openai_compatible_xai_a_whole_call_in_one_chunk() {
    let server = serve(&["openai/recorded_xai_tool_call.json"]).await;
    let client = openai(&server, "grok-3-mini");
    let stream = client.open_stream(&Request::new(vec![Message::user("What is the weather in San Francisco?")])).await.expect("opens");
    let response = collect(stream).await.expect("the recorded stream decodes");
    assert_eq!(calls(&response), [("call_79382389".into(), "weather".into(), r#"{"location":"San Francisco"}"#.into())]);
    let message = response.message.as_ref().unwrap();
    assert_eq!(message.text(), "");
    assert!(message.reasoning().next().is_some_and(|r| r.text.starts_with("First, the user is asking about the weather in San Francisco")));
    assert_eq!(response.finish_reason, Some(FinishReason::ToolCalls));
    // xAI counts reasoning apart from completion_tokens (total 560 = 307 + 26 + 227); the
    // client reports the provider's figures as they are.
    assert_eq!(response.usage, Usage { cache_read_tokens: 306, reasoning_tokens: 227, ..Usage::new(307, 26) });
    server.check_done().unwrap();
}

#[tokio::test]
async fn openai_compatible_azure_a_first_chunk_without_choices() {
    let server = serve(&["openai/recorded_azure_model_router.json"]).await;
    let client = openai(&server, "model-router");
    let stream = client.open_stream(&Request::new(vec![Message::user("What is the capital of Denmark?")])).await.expect("opens");
    let response = collect(stream).await.expect("the recorded stream decodes");
    assert_eq!(response.message.unwrap().text(), "Capital of Denmark.");
    assert_eq!(response.finish_reason, Some(FinishReason::Stop));
    assert_eq!(response.usage, Usage { reasoning_tokens: 64, ..Usage::new(15, 78) });
    server.check_done().unwrap();
}

#[tokio::test]
async fn openai_recorded_streams_through_the_engine() {
    // DeepSeek's recorded weather call runs the test's weather tool; the recorded OpenAI text
    // stream is the answer after the result.
    let server = serve(&["openai/recorded_deepseek_tool_call.json", "openai/recorded_text.json"]).await;
    let model = Model::Stream(Arc::new(openai(&server, "deepseek-reasoner")));
    let response = run(model, vec![Message::user("What is the weather in San Francisco?")]).await.response();
    let text = response.message.unwrap().text();
    assert!(text.starts_with("**Holiday Name:** Harmony Day"), "{text}");
    assert_eq!(response.finish_reason, Some(FinishReason::Stop));
    assert_eq!(response.usage, Usage::new(16, 300));
    server.check_done().unwrap();
    let body = sent(&server, 1);
    let messages = body["messages"].as_array().expect("messages");
    assert_eq!(messages[1]["tool_calls"][0]["id"], "call_00_ioIn7yN9p1ZOMNpDLwd4MgAF", "{body}");
    assert_eq!(messages[1]["tool_calls"][0]["function"]["arguments"], "{\"location\": \"San Francisco\"}");
    assert_eq!(messages[2]["tool_call_id"], "call_00_ioIn7yN9p1ZOMNpDLwd4MgAF");
}

#[tokio::test]
async fn openai_compatible_deepseek_reasoning_of_a_tool_turn_is_sent_back_when_asked() {
    // DeepSeek's thinking mode refuses the request after a tool-call turn unless that turn's
    // reasoning comes back as `reasoning_content`; the setting sends it, the default does not.
    for send in [false, true] {
        let server = serve(&["openai/recorded_deepseek_tool_call.json", "openai/recorded_text.json"]).await;
        let mut config = OpenAiConfig::compatible(format!("{}/v1", server.url()), "deepseek-reasoner", pacing(&common::env())).with_api_key(KEY);
        if send {
            config = config.with_reasoning_sent_back();
        }
        let model = Model::Stream(Arc::new(OpenAiClient::new(config).expect("client")));
        run(model, vec![Message::user("What is the weather in San Francisco?")]).await.response();
        server.check_done().unwrap();
        let body = sent(&server, 1);
        let turn = &body["messages"][1];
        assert!(turn["tool_calls"].is_array(), "{body}");
        match turn.get("reasoning_content") {
            Some(Value::String(text)) if send => assert!(!text.is_empty(), "the recorded reasoning comes back"),
            None if !send => {}
            other => panic!("send = {send}: reasoning_content {other:?}"),
        }
    }
}

// ---- Anthropic Messages ----

#[tokio::test]
async fn anthropic_a_recorded_thinking_stream_through_the_engine() {
    let server = serve(&["anthropic/recorded_thinking_stream.json"]).await;
    let model = Model::Stream(Arc::new(anthropic(&server, "claude-sonnet-4-0", 4096)));
    let response = run(model, vec![Message::user("How do I cross the street?")]).await.response();
    let message = response.message.unwrap();
    assert!(message.text().starts_with("Here are the basic steps for safely crossing the street:"));
    let reasoning: Vec<_> = message.reasoning().collect();
    assert_eq!(reasoning.len(), 1, "the signed thinking block is kept in the run's answer");
    assert!(reasoning[0].signature.as_deref().is_some_and(|s| s.starts_with("EvMCCkYICxgCKkCHP2cSuEdcJK/0rF")));
    assert_eq!(response.usage, Usage::new(43, 282));
    server.check_done().unwrap();
}

#[tokio::test]
async fn anthropic_a_recorded_streamed_tool_round() {
    let server = serve(&["anthropic/recorded_tool_round.json"]).await;
    let client = anthropic(&server, "claude-sonnet-4-5", 1024);
    let request = |messages: Vec<Message>| Request {
        tools: vec![tool("updateIssueList", "Update the issue list.", json!({"type": "object", "properties": {}}))],
        ..Request::new(messages)
    };
    let mut messages = vec![Message::user("Update the issue list.")];
    let stream = client.open_stream(&request(messages.clone())).await.expect("opens");
    let response = collect(stream).await.expect("the recorded call decodes");
    assert_eq!(response.message.as_ref().unwrap().text(), "I'll update the issue list for you.");
    let recorded = calls(&response);
    assert_eq!(recorded.len(), 1);
    assert_eq!((recorded[0].0.as_str(), recorded[0].1.as_str()), ("toolu_01QE1WLsSVp5hy5Q3GmGTmjP", "updateIssueList"));
    let arguments: Value = serde_json::from_str(&recorded[0].2).expect("arguments are JSON");
    assert_eq!(arguments, json!({}), "an empty partial_json is a call without arguments");
    assert_eq!(response.finish_reason, Some(FinishReason::ToolCalls));
    assert_eq!(response.usage, Usage::new(565, 48));
    answer_calls(&mut messages, &response, "Updated.");

    let stream = client.open_stream(&request(messages)).await.expect("opens");
    let response = collect(stream).await.expect("the recorded answer decodes");
    assert_eq!(
        response.message.unwrap().text(),
        "Hello! I'm doing well, thank you for asking. How are you doing today? Is there anything I can help you with?"
    );
    assert_eq!(response.finish_reason, Some(FinishReason::Stop));
    assert_eq!(response.usage, Usage::new(12, 30));
    server.check_done().unwrap();

    let body = sent(&server, 1);
    let messages = body["messages"].as_array().expect("messages");
    let tool_use = messages[1]["content"].as_array().expect("blocks").iter().find(|b| b["type"] == "tool_use").cloned().expect("the call");
    assert_eq!(without_cache_control(tool_use), json!({"type": "tool_use", "id": "toolu_01QE1WLsSVp5hy5Q3GmGTmjP", "name": "updateIssueList", "input": {}}));
    let result = &messages[2]["content"][0];
    assert_eq!((result["type"].as_str(), result["tool_use_id"].as_str()), (Some("tool_result"), Some("toolu_01QE1WLsSVp5hy5Q3GmGTmjP")));
}

#[tokio::test]
async fn anthropic_a_recorded_thinking_stream_keeps_the_signature() {
    // The recording keeps the API's wire bytes, padding spaces after each JSON value included.
    let server = serve(&["anthropic/recorded_thinking_stream.json"]).await;
    let client = anthropic(&server, "claude-sonnet-4-0", 4096);
    let mut request = Request::new(vec![Message::user("How do I cross the street?")]);
    let keel::json::Json::Object(extra) = keel::json::parse(br#"{"thinking":{"type":"enabled","budget_tokens":1024}}"#).unwrap() else { unreachable!() };
    request.options.extra = Some(extra);
    let stream = client.open_stream(&request).await.expect("opens");
    let response = collect(stream).await.expect("the recorded stream decodes");
    let message = response.message.unwrap();
    let text = message.text();
    assert!(text.starts_with("Here are the basic steps for safely crossing the street:"), "{text}");
    assert!(text.ends_with("Always prioritize safety over speed when crossing streets."), "{text}");
    let reasoning: Vec<_> = message.reasoning().collect();
    assert_eq!(reasoning.len(), 1);
    assert_eq!(
        reasoning[0].text,
        "This is a straightforward question about pedestrian safety. I should provide clear, helpful advice about how to safely cross a street. This is basic safety information that could help prevent accidents."
    );
    let signature = reasoning[0].signature.as_deref().expect("the thinking block is signed");
    assert!(signature.starts_with("EvMCCkYICxgCKkCHP2cSuEdcJK/0rF"), "{signature}");
    assert_eq!(response.finish_reason, Some(FinishReason::Stop));
    assert_eq!(response.usage, Usage::new(43, 282));
    server.check_done().unwrap();
}

#[tokio::test]
async fn anthropic_a_recorded_thinking_tool_round_sends_the_signed_thinking_back() {
    const NAME: &str = "anthropic/recorded_thinking_tool_round.json";
    let server = serve(&[NAME]).await;
    let client = anthropic(&server, "claude-sonnet-4-0", 4096);
    let schema = json!({"type": "object", "properties": {}, "additionalProperties": false});
    let keel::json::Json::Object(extra) = keel::json::parse(br#"{"thinking":{"type":"enabled","budget_tokens":3000}}"#).unwrap() else { unreachable!() };
    let request = |messages: Vec<Message>| {
        let mut request = Request { tools: vec![tool("get_user_country", "", schema.clone())], ..Request::new(messages) };
        request.options.extra = Some(extra.clone());
        request
    };
    let mut messages = vec![Message::user("What is the largest city in the user country?")];
    let response = client.complete(&request(messages.clone())).await.expect("the recorded message decodes");
    let recorded = recorded_body(NAME, 0);
    let thinking = &recorded["content"][0];
    let message = response.message.as_ref().unwrap();
    assert_eq!(message.text(), recorded["content"][1]["text"].as_str().unwrap(), "thinking is never answer text");
    let reasoning: Vec<_> = message.reasoning().collect();
    assert_eq!(reasoning.len(), 1);
    assert_eq!(reasoning[0].text, thinking["thinking"].as_str().unwrap());
    assert_eq!(reasoning[0].signature.as_deref(), thinking["signature"].as_str());
    assert_eq!(calls(&response), [("toolu_01YGzqpRE16Vricda3Aqcejo".into(), "get_user_country".into(), "{}".into())]);
    assert_eq!(response.finish_reason, Some(FinishReason::ToolCalls));
    assert_eq!(response.usage, Usage::new(398, 155));
    answer_calls(&mut messages, &response, "Mexico");

    let response = client.complete(&request(messages)).await.expect("the recorded answer decodes");
    let text = response.message.unwrap().text();
    assert!(text.starts_with("Based on the information that you're from Mexico, the largest city in your country is **Mexico City**"), "{text}");
    assert_eq!(response.finish_reason, Some(FinishReason::Stop));
    assert_eq!(response.usage, Usage::new(566, 126));
    server.check_done().unwrap();

    // The assistant turn went back as the API returned it: the signed thinking block first,
    // unchanged, then the text and the call (the recorded second request, which the live API
    // accepted, carried the same three blocks).
    let body = sent(&server, 1);
    let blocks: Vec<Value> = body["messages"][1]["content"].as_array().expect("blocks").iter().cloned().map(without_cache_control).collect();
    let expected: Vec<Value> = recorded["content"].as_array().unwrap().clone();
    assert_eq!(blocks, expected, "{body}");
    assert_eq!(body["thinking"], json!({"type": "enabled", "budget_tokens": 3000}));
}
