//! Model provider clients for keel: OpenAI Chat Completions (and any OpenAI-compatible server:
//! vLLM, llama.cpp's server, Ollama, LiteLLM), the OpenAI Responses API (reasoning models, their
//! encrypted reasoning carried between calls: [`responses`]), and Anthropic Messages.
//!
//! Each client is both a [`keel::interaction::model::ModelClient`] (complete mode) and a
//! [`keel::interaction::model::ModelStreamer`] (server-sent events), so it plugs into a model
//! Dispatcher either way:
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use keel::interaction::model::DispatcherConfig;
//! use keel_providers::openai::{OpenAiClient, OpenAiConfig};
//! use keel_providers::Pacing;
//! use std::sync::Arc;
//!
//! let env = keel::env::TokioEnv::current()?.env();
//! // The official API, key from OPENAI_API_KEY ...
//! let openai = OpenAiClient::new(OpenAiConfig::new("gpt-4o-mini", Pacing::new(&env)))?;
//! // ... or a local OpenAI-compatible server, no key needed.
//! let local = OpenAiClient::new(OpenAiConfig::compatible("http://localhost:11434/v1", "llama3.2", Pacing::new(&env)))?;
//! let config = DispatcherConfig::stream(Arc::new(openai));
//! # let _ = (local, config); Ok(()) }
//! ```
//!
//! The clients use HTTP on the real tokio runtime. Retry waits, jitter and timeouts run on the
//! keel clock and rng given in [`Pacing`], so a seeded environment reproduces them.
//!
//! # Which outcome is which
//!
//! A model call can be retried only while the request provably had no effect: no connection
//! was made, or the provider refused it with a retryable status before any of the response
//! body was read. Once the request may have reached the model, the call is never repeated
//! silently: a second call could be charged twice or answer differently.
//!
//! | outcome of one attempt | retried? | when final: [`ProviderError`] | class → keel |
//! |---|---|---|---|
//! | connection refused / not established (includes DNS, TLS, connect timeout) | yes | `Connect` | provider failure → `ModelError::Provider` (settled `error`) |
//! | HTTP 429, 408, 409 (honoring `retry-after-ms` / `Retry-After` in seconds or as an HTTP date) | yes | `Status` | provider failure, transient → `ModelError::Transient` (the agent's `on_model_error` policy repeats the call) |
//! | HTTP 5xx (including Anthropic's 529 overloaded) | yes | `Status` | provider failure, transient |
//! | any other non-2xx (400, 401, 403, 404, 413, 422, 3xx) | no | `Status` | provider failure |
//! | 2xx whose body is not the documented format | no | `Malformed` | provider failure |
//! | 2xx carrying a second choice (a server answering with several; merged they would garble the answer), or a Responses stream carrying a second response or announcing one output item twice | no | `Malformed` | provider failure |
//! | an error event inside a started stream (Responses API: `error` or `response.failed`; also a complete response whose status is `failed`) | no | `Stream` | provider failure; transient when its type or code names an overloaded, rate-limit or server error |
//! | keel request the provider format cannot carry (including `n` other than 1 in `options.extra`: a response holds one answer; stop sequences for the Responses API) | not sent | `Request` | provider failure |
//! | no answer within [`Timeouts::response`], or a stream silent for [`Timeouts::stream_idle`] | no | `Timeout` | **unknown** → `ModelError::Unknown` (dispatch error: the Effect stays unknown until the host resolves it) |
//! | connection lost after the request was sent (mid-response, mid-stream, a stream ending inside an event or before its answer was complete) | no | `ConnectionLost` | **unknown** |
//! | misconfiguration (no key for the official endpoint, bad base URL) | not sent | `Config` | host failure → `ModelError::Host` (settled `host_error`) |
//!
//! Retries stop at [`RetryPolicy::max_attempts`] (clamped to [`MAX_ATTEMPTS_LIMIT`]) or when
//! the next wait would pass [`RetryPolicy::total_deadline`], whichever comes first; the last
//! outcome is then final. Backoff doubles from [`RetryPolicy::initial_backoff`] up to
//! [`RetryPolicy::max_backoff`] with jitter in the upper half of each step; a Retry-After
//! replaces the computed backoff (capped at [`MAX_RETRY_AFTER`]). A Retry-After date is read
//! against the response's own `Date` header (else the keel clock), see [`retry_after`].
//!
//! A stream's end is judged by what arrived, not by its framing: the terminal event
//! (`data: [DONE]`, `message_stop`) may be missing once the finish reason arrived, and the
//! last event may lack its blank line or line end (LF or CRLF) or be followed by a keep-alive
//! comment. A body ending inside an event (its JSON cut) or before the finish reason is a lost
//! connection. In the Responses API the finish reason and usage come only with the terminal
//! event (`response.completed` / `response.incomplete`), so a body ending before it is a lost
//! connection, however it is framed.
//!
//! # Testing
//!
//! The `testing` feature adds [`testing::FixtureServer`], a real HTTP server on 127.0.0.1 that
//! replays recorded exchanges (format in [`testing::fixture`]). Point a client's base URL at
//! it to run the real adapters, offline and reproducibly.

#![forbid(unsafe_code)]

mod error;
mod http;
mod retry;
mod sse;
mod stream;
pub mod transport;
mod wire;

#[cfg(feature = "anthropic")]
pub mod anthropic;
#[cfg(feature = "openai")]
pub mod openai;
#[cfg(feature = "responses")]
pub mod responses;
#[cfg(feature = "testing")]
pub mod testing;

pub use error::{OutcomeClass, ProviderError, MAX_ERROR_TEXT_BYTES};
pub use http::{CONNECT_TIMEOUT, MAX_RESPONSE_BYTES};
pub use retry::{is_retryable_status, retry_after, Pacing, RetryPolicy, Timeouts, MAX_ATTEMPTS_LIMIT, MAX_RETRY_AFTER};
pub use sse::{SseDecoder, SseError, SseEvent, MAX_SSE_EVENT_BYTES};
pub use stream::MAX_STREAM_EVENTS;
