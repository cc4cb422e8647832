//! The Responses API client against recorded exchanges served on 127.0.0.1: through the real
//! Interaction on the real Engine (text, usage, every outcome of the retry table) and call by
//! call (a recorded tool loop of a reasoning model whose encrypted reasoning must travel back,
//! every framing of a stream's end).

mod common;

use common::{fixture, pacing, run, serve, Model, KEY};
use futures::StreamExt;
use keel::chat::{Accumulator, FinishReason, Message, Request, Response, Usage};
use keel::interaction::model::ModelError;
use keel_providers::responses::{ResponsesClient, ResponsesConfig};
use keel_providers::testing::{Fixture, FixtureServer};
use keel_providers::Pacing;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

fn client(server: &FixtureServer, model: &str, pacing: Pacing) -> Arc<ResponsesClient> {
    let config = ResponsesConfig::at(format!("{}/v1", server.url()), model, pacing).with_api_key(KEY);
    Arc::new(ResponsesClient::new(config).expect("client"))
}

fn complete(server: &FixtureServer) -> Model {
    Model::Complete(client(server, "gpt-5-mini", pacing(&common::env())))
}

fn streaming(server: &FixtureServer) -> Model {
    Model::Stream(client(server, "gpt-5-mini", pacing(&common::env())))
}

fn user(text: &str) -> Vec<Message> {
    vec![Message::user(text)]
}

/// What the Engine's Interaction sends for `user("Hi")` with its weather tool.
fn weather_request() -> Request {
    let schema = keel::json::parse(br#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#).expect("schema");
    Request { tools: vec![ToolDefinition::new("weather", "Current weather in a city.", schema)], ..Request::new(user("Hi")) }
}

/// The recorded final answer of the calculator conversation.
const ANSWER: &str = "The final result is **570**.";

#[tokio::test]
async fn complete_text_through_the_engine() {
    let server = serve(&["responses/complete_text.json"]).await;
    let response = run(complete(&server), user("What's the weather like in SF?")).await.response();
    let text = response.message.expect("a message").text();
    assert!(text.starts_with("I can't provide real-time updates") && text.ends_with("variable weather!"), "{text}");
    assert_eq!(response.finish_reason, Some(FinishReason::Stop));
    assert_eq!(response.usage, Usage::new(14, 50));
    server.check_done().unwrap();
}

#[tokio::test]
async fn streamed_text_with_cached_tokens_through_the_engine() {
    // Two message items (commentary, final answer) around a hosted web search item, which is
    // skipped; the usage counts cached input tokens.
    let server = serve(&["responses/stream_cached_usage.json"]).await;
    let response = run(streaming(&server), user("Hi")).await.response();
    // The source kept only the first two text deltas of each message item (its `.done`
    // events still carry the whole texts): the answer is what the deltas said.
    assert_eq!(response.message.expect("a message").text(), "Got itHere are a few **AI");
    assert_eq!(response.finish_reason, Some(FinishReason::Stop));
    let usage = response.usage;
    assert_eq!(usage.cache_read_tokens, 3072, "{usage:?}");
    assert!(usage.input_tokens >= usage.cache_read_tokens && usage.output_tokens > 0, "{usage:?}");
    server.check_done().unwrap();
}

#[tokio::test]
async fn retryable_statuses_are_retried_honoring_retry_after() {
    let server = serve(&["responses/retry_then_stream.json"]).await;
    let env = common::env();
    let started = env.clock.now();
    let response = run(streaming(&server), user("Hi")).await.response();
    assert_eq!(response.message.expect("a message").text(), ANSWER);
    assert_eq!(response.usage, Usage::new(299, 12));
    let waited = env.clock.now().saturating_duration_since(started);
    assert!(waited >= Duration::from_secs(1), "Retry-After: 1 was honored (waited {waited:?})");
    assert_eq!(server.served(), 3);
    server.check_done().unwrap();
}

#[tokio::test]
async fn a_server_error_on_every_attempt_is_a_transient_failure() {
    let server = serve(&["responses/server_error_exhausted.json"]).await;
    let client = client(&server, "gpt-5-mini", pacing(&common::env()));
    let e = client.open_stream(&weather_request()).await.err().expect("a failure");
    assert!(e.to_string().contains("HTTP 500") && e.to_string().contains("3 attempt(s)"), "{e}");
    assert!(matches!(ModelError::from(e), ModelError::Transient(_)));
    assert_eq!(server.served(), 3);
    server.check_done().unwrap();
}

#[tokio::test]
async fn a_bad_request_is_final_at_once() {
    let server = serve(&["responses/bad_request.json"]).await;
    let reason = run(streaming(&server), user("Hi")).await.failure();
    assert!(reason.contains("HTTP 400") && reason.contains("1 attempt(s)") && reason.contains("unsupported_parameter"), "{reason}");
    assert_eq!(server.served(), 1);
    server.check_done().unwrap();
}

#[tokio::test]
async fn a_connection_cut_mid_stream_is_unknown() {
    let server = serve(&["responses/stream_cut.json"]).await;
    let text = run(streaming(&server), user("Hi")).await.unknown();
    assert!(text.contains("may have answered"), "{text}");
    assert_eq!(server.served(), 1, "never retried once the request may have reached the model");
}

#[tokio::test]
async fn a_stream_closed_before_response_completed_is_unknown() {
    let server = serve(&["responses/stream_closed_before_completed.json"]).await;
    let text = run(streaming(&server), user("Hi")).await.unknown();
    assert!(text.contains("ended before its final event"), "{text}");
    assert_eq!(server.served(), 1);
}

#[tokio::test]
async fn an_error_event_fails_the_call_with_its_code() {
    let server = serve(&["responses/stream_error_event.json"]).await;
    let client = client(&server, "gpt-5-mini", pacing(&common::env()));
    let stream = client.open_stream(&weather_request()).await.expect("the stream opens");
    match collect(stream).await {
        Err(ModelError::Provider(text)) => assert!(text.contains("insufficient_quota") && text.contains("exceeded your current quota"), "{text}"),
        other => panic!("a quota error is a definite, not transient, failure: {other:?}"),
    }
    server.check_done().unwrap();
}

/// Reads a whole stream into a response, or the error that ended it.
async fn collect(mut stream: keel::interaction::model::ModelDeltaStream<'static>) -> Result<Response, ModelError> {
    let mut acc = Accumulator::new();
    while let Some(delta) = stream.next().await {
        acc.push(&delta?).expect("deltas accumulate");
    }
    Ok(acc.finish().expect("a response"))
}

// ---- every framing of a stream's end ----

fn event(value: serde_json::Value) -> Vec<String> {
    let kind = value["type"].as_str().expect("a type").to_owned();
    vec![format!("event: {kind}"), format!("data: {value}")]
}

fn answer_events(completed: bool) -> Vec<Vec<String>> {
    let mut events = vec![
        event(json!({"type": "response.created", "sequence_number": 0, "response": {"id": "resp_7", "object": "response", "status": "in_progress", "output": [], "usage": null}})),
        event(json!({"type": "response.output_item.added", "sequence_number": 1, "output_index": 0, "item": {"id": "msg_7", "type": "message", "status": "in_progress", "content": [], "role": "assistant"}})),
        event(json!({"type": "response.output_text.delta", "sequence_number": 2, "item_id": "msg_7", "output_index": 0, "content_index": 0, "delta": "Mi", "logprobs": []})),
        event(json!({"type": "response.output_text.delta", "sequence_number": 3, "item_id": "msg_7", "output_index": 0, "content_index": 0, "delta": "ld.", "logprobs": []})),
        event(json!({"type": "response.output_item.done", "sequence_number": 4, "output_index": 0, "item": {"id": "msg_7", "type": "message", "status": "completed", "content": [{"type": "output_text", "annotations": [], "text": "Mild."}], "role": "assistant"}})),
    ];
    if completed {
        events.push(event(json!({"type": "response.completed", "sequence_number": 5, "response": {"id": "resp_7", "object": "response", "status": "completed",
            "output": [{"id": "msg_7", "type": "message", "status": "completed", "content": [{"type": "output_text", "annotations": [], "text": "Mild."}], "role": "assistant"}],
            "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 2, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 12}}})));
    }
    events
}

/// `events` framed: `crlf` line ends, a keep-alive comment after the last event or not, and
/// after the last line a blank line (`2`), a line end (`1`) or nothing (`0`).
fn framed(events: &[Vec<String>], crlf: bool, keep_alive_last: bool, trailing_line_ends: usize) -> String {
    let nl = if crlf { "\r\n" } else { "\n" };
    let mut out = events.iter().map(|lines| lines.join(nl)).collect::<Vec<_>>().join(&format!("{nl}{nl}"));
    if keep_alive_last {
        out.push_str(nl);
        out.push_str(": keep-alive");
    }
    out.push_str(&nl.repeat(trailing_line_ends));
    out
}

async fn stream_of(body: &str) -> Result<Response, ModelError> {
    // 11-byte chunks: boundaries fall inside lines, JSON values and CRLF pairs.
    let chunks: Vec<String> = body.as_bytes().chunks(11).map(|c| String::from_utf8(c.to_vec()).expect("ASCII")).collect();
    let text = json!({"exchanges": [{"request": {"method": "POST", "path": "/v1/responses"},
        "response": {"status": 200, "headers": {"content-type": "text/event-stream"}, "chunks": chunks, "chunk_delay_ms": 0}}]});
    let server = FixtureServer::start(Fixture::parse(&text.to_string()).expect("fixture")).await.expect("server");
    let client = client(&server, "gpt-5-mini", pacing(&common::env()));
    let stream = client.open_stream(&Request::new(user("Hi"))).await.expect("the stream opens");
    let result = collect(stream).await;
    server.check_done().expect("one exchange served");
    result
}

#[tokio::test]
async fn every_framing_of_a_whole_stream_is_the_answer() {
    for crlf in [false, true] {
        for keep_alive_last in [false, true] {
            for ends in [0, 1, 2] {
                let body = framed(&answer_events(true), crlf, keep_alive_last, ends);
                let response = stream_of(&body).await.unwrap_or_else(|e| panic!("{body:?}: {e}"));
                assert_eq!(response.message.expect("a message").text(), "Mild.", "{body:?}");
                assert_eq!(response.finish_reason, Some(FinishReason::Stop));
                assert_eq!(response.usage, Usage::new(10, 2));
            }
        }
    }
}

#[tokio::test]
async fn a_stream_without_response_completed_or_cut_inside_it_is_unknown() {
    for crlf in [false, true] {
        for ends in [0, 1, 2] {
            let body = framed(&answer_events(false), crlf, false, ends);
            match stream_of(&body).await {
                Err(ModelError::Unknown(text)) => assert!(text.contains("ended before its final event"), "{text}"),
                other => panic!("{body:?}: the answer's text without response.completed must be unknown, got {other:?}"),
            }
        }
    }
    let whole = framed(&answer_events(true), false, false, 2);
    let last = whole.trim_end().rfind("data: ").expect("an event");
    let cut = &whole[..last + 40];
    match stream_of(cut).await {
        Err(ModelError::Unknown(text)) => assert!(text.contains("in the middle of an event"), "{text}"),
        other => panic!("a stream cut inside response.completed must be unknown, got {other:?}"),
    }
}

#[test]
fn every_fixture_of_this_client_parses() {
    for name in [
        "calculator_rounds", "complete_reasoning", "complete_text", "retry_then_stream", "server_error_exhausted",
        "bad_request", "stream_cut", "stream_closed_before_completed", "stream_error_event", "stream_cached_usage",
    ] {
        let f = fixture(&format!("responses/{name}.json"));
        assert!(!f.exchanges.is_empty(), "{name}");
    }
}

// ---- a reasoning model's recorded tool loop, call by call ----

use keel::chat::{Options, ToolDefinition, ToolOutput, ToolResult};

const PROMPT: &str = "What is (12 + 7) * 3 * 10? Use the calculator, one step per call.";

fn calculator_request(messages: Vec<Message>) -> Request {
    let schema = keel::json::parse(
        br#"{"type":"object","properties":{"a":{"type":"number","description":"First operand."},"b":{"type":"number","description":"Second operand."},"op":{"type":"string","enum":["add","subtract","multiply","divide"],"default":"add","description":"Arithmetic operation to perform."}},"required":["a","b","op"],"additionalProperties":false}"#,
    )
    .expect("schema");
    let extra = match keel::json::parse(br#"{"reasoning":{"effort":"high","summary":"detailed"}}"#).expect("extra") {
        keel::json::Json::Object(o) => o,
        _ => unreachable!("an object"),
    };
    Request {
        tools: vec![ToolDefinition::new("calculator", "A minimal calculator for basic arithmetic. Call it once per step.", schema)],
        options: Options { extra: Some(extra), ..Options::default() },
        ..Request::new(messages)
    }
}

/// The assistant message of `response` and one tool message answering its calls with `output`.
fn answer_calls(messages: &mut Vec<Message>, response: &Response, output: &str) {
    let message = response.message.clone().expect("a message");
    let results: Vec<ToolResult> =
        message.tool_calls().map(|c| ToolResult::ok(c.id.clone(), c.name.clone(), ToolOutput::text(output))).collect();
    messages.push(message);
    messages.push(Message::tool_results(results));
}

#[tokio::test]
async fn a_recorded_tool_loop_streams_calls_and_sends_every_item_back() {
    let server = serve(&["responses/calculator_rounds.json"]).await;
    let client = client(&server, "gpt-5.1-codex-max", pacing(&common::env()));
    let mut messages = vec![Message::user(PROMPT)];
    let mut calls = Vec::new();
    for output in ["19", "57", "570"] {
        let stream = client.open_stream(&calculator_request(messages.clone())).await.expect("the stream opens");
        let response = collect(stream).await.expect("a whole response");
        assert_eq!(response.finish_reason, Some(FinishReason::ToolCalls));
        let message = response.message.clone().expect("a message");
        assert_eq!(message.text(), "", "a reasoning summary is never answer text");
        calls.extend(message.tool_calls().map(|c| c.arguments.clone()));
        answer_calls(&mut messages, &response, output);
    }
    // The argument fragments were assembled (the fixture server checked each next request
    // body: calls, outputs and the reasoning item with its encrypted content sent back).
    assert_eq!(calls, [r#"{"a":12,"b":7,"op":"add"}"#, r#"{"a":19,"b":3,"op":"multiply"}"#, r#"{"a":57,"b":10,"op":"multiply"}"#]);
    let stream = client.open_stream(&calculator_request(messages.clone())).await.expect("the stream opens");
    let response = collect(stream).await.expect("the answer");
    assert_eq!(response.message.expect("a message").text(), ANSWER);
    assert_eq!(response.finish_reason, Some(FinishReason::Stop));
    assert_eq!(response.usage, Usage::new(299, 12));
    server.check_done().unwrap();
}

#[tokio::test]
async fn a_recorded_complete_answer_carries_reasoning_usage() {
    let server = serve(&["responses/complete_reasoning.json"]).await;
    let client = client(&server, "gpt-5.1-codex-max", pacing(&common::env()));
    // The conversation of the recorded loop up to its last call, built from the recorded
    // calls themselves.
    let mut messages = vec![Message::user(PROMPT)];
    let recorded = serve(&["responses/calculator_rounds.json"]).await;
    let streaming = self::client(&recorded, "gpt-5.1-codex-max", pacing(&common::env()));
    for output in ["19", "57", "570"] {
        let stream = streaming.open_stream(&calculator_request(messages.clone())).await.expect("the stream opens");
        let response = collect(stream).await.expect("a whole response");
        answer_calls(&mut messages, &response, output);
    }
    let response = client.complete(&calculator_request(messages)).await.expect("the answer");
    assert_eq!(response.message.expect("a message").text(), "12 + 7 = 19\n19 × 3 = 57\n57 × 10 = 570\n\nFinal result: 570");
    assert_eq!(response.finish_reason, Some(FinishReason::Stop));
    assert_eq!(response.usage, Usage { reasoning_tokens: 128, ..Usage::new(865, 163) });
    server.check_done().unwrap();
}
