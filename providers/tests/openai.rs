//! The OpenAI adapter through the real Interaction on the real Engine, against recorded
//! exchanges served by the fixture server.

mod common;

use common::{pacing, run, serve, Model, KEY};
use keel::chat::{FinishReason, Message, Usage};
use keel_providers::openai::{OpenAiClient, OpenAiConfig};
use keel_providers::testing::FixtureServer;
use keel_providers::{Pacing, RetryPolicy};
use std::sync::Arc;
use std::time::Duration;

fn client(server: &FixtureServer, pacing: Pacing) -> Arc<OpenAiClient> {
    let config = OpenAiConfig::compatible(format!("{}/v1", server.url()), "gpt-4o-mini", pacing).with_api_key(KEY);
    Arc::new(OpenAiClient::new(config).expect("client"))
}

fn complete(server: &FixtureServer) -> Model {
    Model::Complete(client(server, pacing(&common::env())))
}

fn streaming(server: &FixtureServer) -> Model {
    Model::Stream(client(server, pacing(&common::env())))
}

fn user(text: &str) -> Vec<Message> {
    vec![Message::user(text)]
}

#[tokio::test]
async fn a_tool_round_in_complete_mode() {
    let server = serve(&["openai/tool_round.json"]).await;
    let ending = run(complete(&server), user("What is the weather in Paris?")).await;
    let response = ending.response();
    assert_eq!(response.message.unwrap().text(), "It is 18°C and clear in Paris.");
    assert_eq!(response.finish_reason, Some(FinishReason::Stop));
    assert_eq!(response.usage, Usage::new(80, 11));
    server.check_done().unwrap();
}

#[tokio::test]
async fn streamed_parallel_calls_split_across_chunks() {
    let server = serve(&["openai/stream_parallel.json"]).await;
    let ending = run(streaming(&server), user("Weather in Paris and Tokyo?")).await;
    let response = ending.response();
    assert_eq!(response.message.unwrap().text(), "Both are 18°C and clear.");
    assert_eq!(response.usage, Usage::new(120, 9), "the usage chunk after the finish reason counts");
    // The second request carried both calls and one tool message per result.
    server.check_done().unwrap();
}

#[tokio::test]
async fn streamed_usage_carries_cached_and_reasoning_tokens() {
    let server = serve(&["openai/stream_usage_details.json"]).await;
    let response = run(streaming(&server), user("Hi")).await.response();
    assert_eq!(response.message.unwrap().text(), "Mild.");
    assert_eq!(response.usage, Usage { cache_read_tokens: 1920, reasoning_tokens: 192, ..Usage::new(2006, 300) });
    server.check_done().unwrap();
}

#[tokio::test]
async fn streamed_reasoning_content_is_kept_apart_and_never_sent_back() {
    let server = serve(&["openai/stream_reasoning_content.json"]).await;
    let response = run(streaming(&server), user("What is the weather in Paris?")).await.response();
    let message = response.message.unwrap();
    assert_eq!(message.text(), "18°C and clear.", "reasoning is never answer text");
    assert_eq!(message.parts[0], keel::chat::Part::Reasoning(keel::chat::Reasoning::text("18°C and clear; answer briefly.")));
    assert_eq!(response.usage, Usage { cache_read_tokens: 192, reasoning_tokens: 12, ..Usage::new(230, 20) });
    // The second request (tool results) matched the fixture, which carries no reasoning.
    server.check_done().unwrap();
}

#[tokio::test]
async fn a_refusal_is_a_final_answer_with_finish_reason_refusal() {
    let server = serve(&["openai/refusal.json"]).await;
    let response = run(complete(&server), user("Help me with something harmful.")).await.response();
    assert_eq!(response.finish_reason, Some(FinishReason::Refusal));
    assert_eq!(response.message.unwrap().text(), "I can't help with that.");
    assert_eq!(response.usage, Usage::new(20, 7));
    server.check_done().unwrap();
}

#[tokio::test]
async fn length_truncated_tool_calls_get_truncation_feedback() {
    let server = serve(&["openai/length_tool_calls.json"]).await;
    let response = run(complete(&server), user("What is the weather in Paris?")).await.response();
    assert_eq!(response.message.unwrap().text(), "Sorry, let me answer directly: mild.");
    server.check_done().unwrap();
}

#[tokio::test]
async fn retryable_statuses_are_retried_honoring_retry_after() {
    let server = serve(&["openai/retry_then_ok.json"]).await;
    let env = common::env();
    let started = env.clock.now();
    let response = run(complete(&server), user("Hi")).await.response();
    assert_eq!(response.message.unwrap().text(), "Mild.");
    let waited = env.clock.now().saturating_duration_since(started);
    assert!(waited >= Duration::from_secs(1), "Retry-After: 1 was honored (waited {waited:?})");
    assert_eq!(server.served(), 3);
    server.check_done().unwrap();
}

#[tokio::test]
async fn a_retry_after_date_is_honored_against_the_response_date() {
    // The 429's Date is in 2015 and its Retry-After one second later: the wait is the server's
    // second, not the distance to the client's clock (which would be no wait at all).
    let server = serve(&["openai/retry_after_date.json"]).await;
    let env = common::env();
    let started = env.clock.now();
    let response = run(complete(&server), user("Hi")).await.response();
    assert_eq!(response.message.unwrap().text(), "Mild.");
    let waited = env.clock.now().saturating_duration_since(started);
    assert!(waited >= Duration::from_secs(1), "Retry-After date one second after Date was honored (waited {waited:?})");
    assert!(waited < Duration::from_secs(5), "and no longer ({waited:?})");
    server.check_done().unwrap();
}

#[tokio::test]
async fn a_retry_after_date_past_the_deadline_makes_the_status_final_at_once() {
    let server = serve(&["openai/retry_after_date_too_far.json"]).await;
    let env = common::env();
    let started = env.clock.now();
    let reason = run(complete(&server), user("Hi")).await.failure();
    assert!(reason.contains("HTTP 429") && reason.contains("1 attempt(s)"), "{reason}");
    let waited = env.clock.now().saturating_duration_since(started);
    assert!(waited < Duration::from_secs(5), "no wait toward a date past the retry deadline ({waited:?})");
    server.check_done().unwrap();
}

#[tokio::test]
async fn a_stream_with_a_second_choice_fails_instead_of_merging() {
    let server = serve(&["openai/stream_two_choices.json"]).await;
    let reason = run(streaming(&server), user("Hi")).await.failure();
    assert!(reason.contains("choice 1, a second answer") && reason.contains("`n` absent or 1"), "{reason}");
    assert_eq!(server.received().len(), 1, "a started stream is never retried");
    server.check_done().unwrap();
}

#[tokio::test]
async fn n_above_one_is_refused_before_anything_is_sent() {
    let server = serve(&[]).await;
    let client = client(&server, pacing(&common::env()));
    let mut request = keel::chat::Request::new(user("Hi"));
    let mut extra = keel::json::Object::new();
    extra.insert("n".into(), keel::json::Json::Number(keel::json::Number::parse("2").unwrap()));
    request.options.extra = Some(extra);
    let e = client.complete(&request).await.unwrap_err();
    assert!(matches!(e, keel_providers::ProviderError::Request { .. }) && e.to_string().contains("n must be 1"), "{e}");
    let e = client.open_stream(&request).await.err().expect("refused");
    assert!(matches!(e, keel_providers::ProviderError::Request { .. }), "{e}");
    assert!(server.received().is_empty(), "nothing was sent");
}

#[tokio::test]
async fn exhausted_retries_are_a_definite_failure() {
    let server = serve(&["openai/server_error_exhausted.json"]).await;
    let reason = run(complete(&server), user("Hi")).await.failure();
    assert!(reason.contains("HTTP 500") && reason.contains("3 attempt(s)"), "{reason}");
    server.check_done().unwrap();
}

#[tokio::test]
async fn a_bad_request_is_definite_and_never_retried() {
    let server = serve(&["openai/bad_request.json"]).await;
    let reason = run(complete(&server), user("Hi")).await.failure();
    assert!(reason.contains("HTTP 400") && reason.contains("Invalid 'messages[0].content'"), "{reason}");
    assert_eq!(server.received().len(), 1, "no retry");
    server.check_done().unwrap();
}

#[tokio::test]
async fn a_response_timeout_leaves_the_model_call_unknown() {
    let server = serve(&["openai/stall_before_headers.json"]).await;
    let text = run(complete(&server), user("Hi")).await.unknown();
    assert!(text.contains("model outcome unknown") && text.contains("no response within"), "{text}");
    assert_eq!(server.received().len(), 1, "a timeout is never retried");
}

#[tokio::test]
async fn a_body_stalled_after_the_headers_leaves_the_model_call_unknown() {
    let server = serve(&["openai/stall_mid_body.json"]).await;
    let env = common::env();
    let started = env.clock.now();
    let text = run(complete(&server), user("Hi")).await.unknown();
    assert!(text.contains("no complete response body within"), "{text}");
    let waited = env.clock.now().saturating_duration_since(started);
    assert!(waited >= Duration::from_millis(1500), "the response timeout ran out first ({waited:?})");
    assert_eq!(server.received().len(), 1);
}

#[tokio::test]
async fn a_stalled_stream_leaves_the_model_call_unknown() {
    let server = serve(&["openai/stream_stalled.json"]).await;
    let text = run(streaming(&server), user("Hi")).await.unknown();
    assert!(text.contains("no stream chunk within"), "{text}");
    assert_eq!(server.received().len(), 1);
}

#[tokio::test]
async fn a_connection_lost_mid_stream_leaves_the_model_call_unknown() {
    let server = serve(&["openai/stream_disconnect.json"]).await;
    let text = run(streaming(&server), user("Hi")).await.unknown();
    assert!(text.contains("connection lost after the request was sent"), "{text}");
    assert_eq!(server.received().len(), 1);
}

#[tokio::test]
async fn a_malformed_body_is_a_clear_definite_failure() {
    let server = serve(&["openai/malformed.json"]).await;
    let reason = run(complete(&server), user("Hi")).await.failure();
    assert!(reason.contains("malformed response") && reason.contains("not JSON"), "{reason}");
    let server = serve(&["openai/malformed_stream.json"]).await;
    let reason = run(streaming(&server), user("Hi")).await.failure();
    assert!(reason.contains("malformed response") && reason.contains("stream chunk is not JSON"), "{reason}");
}

#[tokio::test]
async fn connection_refused_is_retried_then_definite() {
    // A port with no listener: every attempt is refused before anything is sent.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = OpenAiConfig::compatible(format!("http://127.0.0.1:{port}/v1"), "gpt-4o-mini", pacing(&common::env()));
    let model = Model::Complete(Arc::new(OpenAiClient::new(config).expect("no key needed for a local server")));
    let reason = run(model, user("Hi")).await.failure();
    assert!(reason.contains("cannot connect") && reason.contains("3 attempt(s)"), "{reason}");
}

#[tokio::test]
async fn connection_refused_then_served_succeeds() {
    let addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let env = common::env();
    let mut pacing = pacing(&env);
    pacing.retry = RetryPolicy {
        max_attempts: 8,
        initial_backoff: Duration::from_millis(100),
        max_backoff: Duration::from_millis(200),
        total_deadline: Duration::from_secs(10),
    };
    let config = OpenAiConfig::compatible(format!("http://{addr}/v1"), "gpt-4o-mini", pacing).with_api_key(KEY);
    let model = Model::Complete(Arc::new(OpenAiClient::new(config).unwrap()));
    // The server comes up while the client is backing off.
    let late = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(150)).await;
        keel_providers::testing::FixtureServer::start_on(addr, common::fixture("openai/final_answer.json")).await.unwrap()
    });
    let ending = run(model, user("Hi")).await;
    let server = late.await.unwrap();
    assert_eq!(ending.response().message.unwrap().text(), "Mild.");
    server.check_done().unwrap();
}

#[test]
fn the_official_endpoint_needs_a_key() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let env = common::env();
        let mut config = OpenAiConfig::new("gpt-4o-mini", pacing(&env));
        if std::env::var("OPENAI_API_KEY").is_ok() {
            return; // the environment supplies one
        }
        let e = OpenAiClient::new(config.clone()).unwrap_err();
        assert!(e.to_string().contains("OPENAI_API_KEY"), "{e}");
        config.api_key = Some("k".into());
        assert!(OpenAiClient::new(config).is_ok());
    });
}
