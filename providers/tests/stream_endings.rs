//! How a streamed body ends must not decide whether the answer counts: every framing of a
//! stream's end (with or without the terminal event, with or without the last blank line or
//! line end, LF or CRLF, a keep-alive comment last), served by the fixture server on
//! 127.0.0.1, gives the whole answer; a stream cut before the answer was complete, or inside an
//! event, is a lost connection (the model call is unknown).

mod common;

use common::{pacing, run, Model, KEY};
use futures::StreamExt;
use keel::chat::{Accumulator, FinishReason, Message, Request, Response, Usage};
use keel::interaction::model::ModelError;
use keel_providers::anthropic::{AnthropicClient, AnthropicConfig};
use keel_providers::openai::{OpenAiClient, OpenAiConfig};
use keel_providers::testing::{Fixture, FixtureServer};
use serde_json::json;
use std::sync::Arc;

/// The end of a stream's body, after its last event's data line.
#[derive(Clone, Copy, Debug)]
enum Ending {
    /// The blank line that dispatches the event.
    BlankLine,
    /// The line end only.
    LineEnd,
    /// Nothing: the body stops right after the data.
    Nothing,
}

/// One way of framing a stream's end.
#[derive(Clone, Copy, Debug)]
struct Framing {
    /// The provider's terminal event (`data: [DONE]`, `message_stop`) is sent.
    terminal: bool,
    ending: Ending,
    crlf: bool,
    /// A `: keep-alive` comment follows the last event's lines.
    keep_alive_last: bool,
}

fn framings() -> Vec<Framing> {
    let mut all = Vec::new();
    for terminal in [true, false] {
        for ending in [Ending::BlankLine, Ending::LineEnd, Ending::Nothing] {
            for crlf in [false, true] {
                for keep_alive_last in [false, true] {
                    all.push(Framing { terminal, ending, crlf, keep_alive_last });
                }
            }
        }
    }
    all
}

/// Events (each its lines) as a body framed as `framing` says. Every event but the last ends
/// in a blank line.
fn body(events: &[Vec<String>], framing: Framing) -> String {
    let nl = if framing.crlf { "\r\n" } else { "\n" };
    let mut out = String::new();
    for (i, lines) in events.iter().enumerate() {
        out.push_str(&lines.join(nl));
        if i + 1 < events.len() {
            out.push_str(nl);
            out.push_str(nl);
        }
    }
    if framing.keep_alive_last {
        out.push_str(nl);
        out.push_str(": keep-alive");
    }
    match framing.ending {
        Ending::BlankLine => {
            out.push_str(nl);
            out.push_str(nl);
        }
        Ending::LineEnd => out.push_str(nl),
        Ending::Nothing => {}
    }
    out
}

/// A fixture of one streamed exchange at `path` whose body is `body` in 11-byte chunks (so
/// chunk boundaries fall inside lines, JSON values and CRLF pairs).
fn fixture(path: &str, body: &str) -> Fixture {
    let chunks: Vec<String> = body.as_bytes().chunks(11).map(|c| String::from_utf8(c.to_vec()).expect("ASCII body")).collect();
    let text = json!({
        "description": "a stream's end, framed one way",
        "exchanges": [{
            "request": {"method": "POST", "path": path},
            "response": {"status": 200, "headers": {"content-type": "text/event-stream"}, "chunks": chunks, "chunk_delay_ms": 0},
        }],
    });
    Fixture::parse(&text.to_string()).expect("fixture")
}

fn data(value: serde_json::Value) -> Vec<String> {
    vec![format!("data: {value}")]
}

fn named(event: &str, value: serde_json::Value) -> Vec<String> {
    vec![format!("event: {event}"), format!("data: {value}")]
}

/// Reads a whole stream from `open` into a response, or the error that ended it.
async fn collect(mut stream: keel::interaction::model::ModelDeltaStream<'static>) -> Result<Response, ModelError> {
    let mut acc = Accumulator::new();
    while let Some(delta) = stream.next().await {
        acc.push(&delta?).expect("deltas accumulate");
    }
    Ok(acc.finish().expect("a response"))
}

fn openai_chunk(choice: serde_json::Value) -> Vec<String> {
    data(json!({"id": "chatcmpl-7", "object": "chat.completion.chunk", "created": 1733000007, "model": "gpt-4o-mini-2024-07-18",
        "choices": [choice], "usage": null}))
}

fn openai_events(upto_finish: bool, usage: bool, done: bool) -> Vec<Vec<String>> {
    let mut events = vec![
        openai_chunk(json!({"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": null, "finish_reason": null})),
        openai_chunk(json!({"index": 0, "delta": {"content": "Mi"}, "logprobs": null, "finish_reason": null})),
        openai_chunk(json!({"index": 0, "delta": {"content": "ld."}, "logprobs": null, "finish_reason": null})),
    ];
    if upto_finish {
        events.push(openai_chunk(json!({"index": 0, "delta": {}, "logprobs": null, "finish_reason": "stop"})));
    }
    if usage {
        events.push(data(json!({"id": "chatcmpl-7", "object": "chat.completion.chunk", "created": 1733000007,
            "model": "gpt-4o-mini-2024-07-18", "choices": [],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}})));
    }
    if done {
        events.push(vec!["data: [DONE]".to_owned()]);
    }
    events
}

async fn openai_stream(body: &str) -> Result<Response, ModelError> {
    let server = FixtureServer::start(fixture("/v1/chat/completions", body)).await.expect("server");
    let config = OpenAiConfig::compatible(format!("{}/v1", server.url()), "gpt-4o-mini", pacing(&common::env())).with_api_key(KEY);
    let client = OpenAiClient::new(config).expect("client");
    let stream = client.open_stream(&Request::new(vec![Message::user("Hi")])).await.expect("the stream opens");
    let result = collect(stream).await;
    server.check_done().expect("one exchange served");
    result
}

#[tokio::test]
async fn openai_every_framing_of_a_whole_stream_is_the_answer() {
    for framing in framings() {
        let body = body(&openai_events(true, true, framing.terminal), framing);
        let response = openai_stream(&body).await.unwrap_or_else(|e| panic!("{framing:?}: {e}\n{body:?}"));
        assert_eq!(response.message.expect("a message").text(), "Mild.", "{framing:?}");
        assert_eq!(response.finish_reason, Some(FinishReason::Stop), "{framing:?}");
        assert_eq!(response.usage, Usage::new(10, 2), "{framing:?}: the usage chunk counts");
    }
}

#[tokio::test]
async fn openai_a_stream_cut_before_the_finish_reason_or_inside_an_event_is_unknown() {
    for framing in framings().into_iter().filter(|f| !f.terminal) {
        // The content arrived, the finish reason did not.
        let body = body(&openai_events(false, false, false), framing);
        match openai_stream(&body).await {
            Err(ModelError::Unknown(text)) => assert!(text.contains("ended before its final event"), "{framing:?}: {text}"),
            other => panic!("{framing:?}: a stream without its finish reason must be unknown, got {other:?}"),
        }
    }
    // Cut inside the finish chunk, the usage chunk or `[DONE]` itself: the server stopped in
    // the middle of an event, which no framing explains.
    for keep in [0usize, 1, 2] {
        let events = openai_events(true, true, true);
        let whole = body(&events[..events.len() - keep], Framing { terminal: true, ending: Ending::BlankLine, crlf: false, keep_alive_last: false });
        let last_start = whole.trim_end().rfind("data: ").expect("an event");
        let cut = &whole[..last_start + (whole.trim_end().len() - last_start) / 2 + 3];
        match openai_stream(cut).await {
            Err(ModelError::Unknown(text)) => assert!(text.contains("in the middle of an event"), "{cut:?}: {text}"),
            other => panic!("a stream cut inside an event must be unknown: {cut:?} gave {other:?}"),
        }
    }
}

fn anthropic_events(upto_stop_reason: bool, message_stop: bool) -> Vec<Vec<String>> {
    let mut events = vec![
        named("message_start", json!({"type": "message_start", "message": {"id": "msg_07", "type": "message", "role": "assistant",
            "content": [], "model": "claude-sonnet-4-5", "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 12, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 1}}})),
        named("content_block_start", json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})),
        named("ping", json!({"type": "ping"})),
        named("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Mi"}})),
        named("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ld."}})),
        named("content_block_stop", json!({"type": "content_block_stop", "index": 0})),
    ];
    if upto_stop_reason {
        events.push(named("message_delta", json!({"type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 2}})));
    }
    if message_stop {
        events.push(named("message_stop", json!({"type": "message_stop"})));
    }
    events
}

async fn anthropic_stream(body: &str) -> Result<Response, ModelError> {
    let server = FixtureServer::start(fixture("/v1/messages", body)).await.expect("server");
    let config = AnthropicConfig::at(server.url(), "claude-sonnet-4-5", pacing(&common::env())).with_api_key(KEY);
    let client = AnthropicClient::new(config).expect("client");
    let stream = client.open_stream(&Request::new(vec![Message::user("Hi")])).await.expect("the stream opens");
    let result = collect(stream).await;
    server.check_done().expect("one exchange served");
    result
}

#[tokio::test]
async fn anthropic_every_framing_of_a_whole_stream_is_the_answer() {
    for framing in framings() {
        let body = body(&anthropic_events(true, framing.terminal), framing);
        let response = anthropic_stream(&body).await.unwrap_or_else(|e| panic!("{framing:?}: {e}\n{body:?}"));
        assert_eq!(response.message.expect("a message").text(), "Mild.", "{framing:?}");
        assert_eq!(response.finish_reason, Some(FinishReason::Stop), "{framing:?}");
        assert_eq!(response.usage, Usage::new(12, 2), "{framing:?}: input from message_start, output from message_delta");
    }
}

#[tokio::test]
async fn anthropic_a_stream_cut_before_the_stop_reason_or_inside_an_event_is_unknown() {
    for framing in framings().into_iter().filter(|f| !f.terminal) {
        let body = body(&anthropic_events(false, false), framing);
        match anthropic_stream(&body).await {
            Err(ModelError::Unknown(text)) => assert!(text.contains("ended before its final event"), "{framing:?}: {text}"),
            other => panic!("{framing:?}: a stream without its stop reason must be unknown, got {other:?}"),
        }
    }
    for keep in [0usize, 1] {
        let events = anthropic_events(true, true);
        let whole = body(&events[..events.len() - keep], Framing { terminal: true, ending: Ending::BlankLine, crlf: true, keep_alive_last: false });
        let last_start = whole.trim_end().rfind("data: ").expect("an event");
        let cut = &whole[..last_start + (whole.trim_end().len() - last_start) / 2 + 3];
        match anthropic_stream(cut).await {
            Err(ModelError::Unknown(text)) => assert!(text.contains("in the middle of an event"), "{cut:?}: {text}"),
            other => panic!("a stream cut inside an event must be unknown: {cut:?} gave {other:?}"),
        }
    }
}

/// The recorded case of the report, through the real Interaction on the real Engine: a
/// compatible server's stream ending in `data: [DONE]` with no blank line after it.
#[tokio::test]
async fn a_done_without_its_blank_line_ends_a_whole_answer() {
    let server = common::serve(&["openai/stream_done_without_blank_line.json"]).await;
    let config = OpenAiConfig::compatible(format!("{}/v1", server.url()), "gpt-4o-mini", pacing(&common::env())).with_api_key(KEY);
    let model = Model::Stream(Arc::new(OpenAiClient::new(config).expect("client")));
    let response = run(model, vec![Message::user("Hi")]).await.response();
    assert_eq!(response.message.expect("a message").text(), "Mild.");
    assert_eq!(response.usage, Usage::new(10, 2));
    server.check_done().unwrap();
}
