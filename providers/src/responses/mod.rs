//! The OpenAI Responses API (`POST {base_url}/responses`), the API OpenAI recommends for its
//! reasoning models. Stateless: every call sends `store: false` and asks for
//! `include: ["reasoning.encrypted_content"]`, so the provider keeps nothing between calls and
//! each reasoning item comes back encrypted, to be sent back with the next call as the model
//! requires (keel's durable context carries it).
//!
//! | keel | Responses API |
//! |---|---|
//! | system / user message | input item `{"role": "system" \| "user", "content": text}` |
//! | assistant message | its parts in order: text → `{"role": "assistant", "content": text}`; tool call → `{"type": "function_call", "call_id", "name", "arguments"}`; reasoning → `{"type": "reasoning", "id", "summary": [{"type": "summary_text", "text"}], "encrypted_content"}` |
//! | tool message with N results | N `{"type": "function_call_output", "call_id", "output"}` items, in order |
//! | tools / tool_choice | `tools[]` of `{"type": "function", "name", "description", "parameters", "strict": false}`; `none`, `required`, or `{"type": "function", "name"}` (`auto` is omitted; no tool_choice without tools) |
//! | options | `model` (else the configured one), `temperature`, `top_p`, `max_output_tokens`; `extra` members are added at the top level; `reasoning` from `extra`, else from [`ResponsesConfig::reasoning_effort`] / [`ResponsesConfig::reasoning_summary`]; `stop` is refused (the API has no stop sequences) |
//! | output items | `message` (`output_text` parts → text; `refusal` → text, finish reason `refusal`), `function_call` → tool call, `reasoning` → reasoning part (summary text and encrypted content, never answer text); items of hosted tools (which keel never asks for) are skipped |
//! | status → finish reason | `completed`: `tool_calls` when a function call was made, else `stop`; `incomplete`: `length` for `max_output_tokens`, `content_filter`, else `other`; `failed` fails the call with the response's error |
//! | usage | `input_tokens` → input, of which `input_tokens_details.cached_tokens` → cache read (and `cache_write_tokens`, when reported, → cache write); `output_tokens` → output, of which `output_tokens_details.reasoning_tokens` → reasoning |
//!
//! Streaming sends `stream: true` and reads the semantic events: `response.output_item.added`
//! / `.done`, `response.output_text.delta`, `response.refusal.delta`,
//! `response.function_call_arguments.delta` / `.done`, reasoning items, and one of
//! `response.completed`, `response.incomplete` (the answer, with its finish reason and usage)
//! or `response.failed` / `error` (the call fails; transient when the error names a rate
//! limit, an overload or a server error). A stream ends at its terminal event; a body that
//! ends before it is a lost connection.

mod request;
mod response;
mod stream;

use crate::error::ProviderError;
use crate::http::Transport;
use crate::openai::{OPENAI_API_KEY_VAR, OPENAI_BASE_URL};
use crate::retry::Pacing;
use crate::wire::{endpoint, Endpoint};
use keel::chat::{Request, Response};
use keel::env::BoxFuture;
use keel::interaction::model::{ModelCallContext, ModelClient, ModelDeltaStream, ModelError, ModelIdentity, ModelStreamer};

pub(crate) const PROVIDER: &str = "openai-responses";

/// How to reach a Responses API endpoint.
#[derive(Clone)]
pub struct ResponsesConfig {
    /// The API root the `/responses` path is appended to, e.g. [`OPENAI_BASE_URL`].
    pub base_url: String,
    /// The bearer key. `None` reads [`OPENAI_API_KEY_VAR`]; without either, the official
    /// endpoint is refused and any other base URL is called without a key.
    pub api_key: Option<String>,
    /// The model of requests that name none in their options.
    pub model: String,
    /// `reasoning.effort` sent with every request (`minimal`, `low`, `medium`, `high`, ...),
    /// unless the request's `options.extra` sets `reasoning` itself. `None` leaves the
    /// model's default.
    pub reasoning_effort: Option<String>,
    /// `reasoning.summary` (`auto`, `concise`, `detailed`): ask for reasoning summaries, kept
    /// as reasoning parts (never answer text). Same precedence as `reasoning_effort`.
    pub reasoning_summary: Option<String>,
    /// Retries, timeouts, and the clock and rng they run on.
    pub pacing: Pacing,
}

impl ResponsesConfig {
    /// The official API with `model`, the key from [`OPENAI_API_KEY_VAR`].
    pub fn new(model: impl Into<String>, pacing: Pacing) -> ResponsesConfig {
        ResponsesConfig::at(OPENAI_BASE_URL, model, pacing)
    }

    /// A Responses API server at `base_url` (the root that `/responses` follows).
    pub fn at(base_url: impl Into<String>, model: impl Into<String>, pacing: Pacing) -> ResponsesConfig {
        ResponsesConfig {
            base_url: base_url.into(),
            api_key: None,
            model: model.into(),
            reasoning_effort: None,
            reasoning_summary: None,
            pacing,
        }
    }

    /// The API root from [`OPENAI_BASE_URL_VAR`](crate::openai::OPENAI_BASE_URL_VAR) (default: the official API), the model from
    /// [`OPENAI_MODEL_VAR`](crate::openai::OPENAI_MODEL_VAR) (default: `default_model`), the key from [`OPENAI_API_KEY_VAR`].
    pub fn from_env(default_model: impl Into<String>, pacing: Pacing) -> ResponsesConfig {
        let (base_url, model) = crate::openai::env_endpoint(default_model.into());
        ResponsesConfig::at(base_url, model, pacing)
    }

    /// The same configuration with an explicit key.
    pub fn with_api_key(mut self, key: impl Into<String>) -> ResponsesConfig {
        self.api_key = Some(key.into());
        self
    }

    /// The same configuration asking for reasoning `effort` and reasoning summaries of kind
    /// `summary` (e.g. `("high", "auto")`).
    pub fn with_reasoning(mut self, effort: impl Into<String>, summary: impl Into<String>) -> ResponsesConfig {
        self.reasoning_effort = Some(effort.into());
        self.reasoning_summary = Some(summary.into());
        self
    }

    /// The `reasoning` member this configuration adds, if any.
    fn reasoning(&self) -> Option<serde_json::Value> {
        let mut reasoning = serde_json::Map::new();
        if let Some(effort) = &self.reasoning_effort {
            reasoning.insert("effort".into(), effort.clone().into());
        }
        if let Some(summary) = &self.reasoning_summary {
            reasoning.insert("summary".into(), summary.clone().into());
        }
        (!reasoning.is_empty()).then_some(serde_json::Value::Object(reasoning))
    }
}

impl std::fmt::Debug for ResponsesConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponsesConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("model", &self.model)
            .field("reasoning_effort", &self.reasoning_effort)
            .field("reasoning_summary", &self.reasoning_summary)
            .field("pacing", &self.pacing)
            .finish()
    }
}

/// A Responses API client: a [`ModelClient`] and a [`ModelStreamer`].
pub struct ResponsesClient {
    config: ResponsesConfig,
    url: String,
    key: Option<String>,
    transport: Transport,
}

impl ResponsesClient {
    /// Checks the configuration and resolves the key (see [`ResponsesConfig::api_key`]).
    pub fn new(config: ResponsesConfig) -> Result<ResponsesClient, ProviderError> {
        let Endpoint { url, key } = endpoint(
            PROVIDER,
            &config.base_url,
            OPENAI_BASE_URL,
            config.api_key.as_deref(),
            OPENAI_API_KEY_VAR,
            "ResponsesConfig::api_key",
            "responses",
        )?;
        let transport = Transport::new(PROVIDER, config.pacing.clone())?;
        Ok(ResponsesClient { config, url, key, transport })
    }

    /// Like [`ResponsesClient::new`], sending through `http` instead of the default reqwest
    /// transport (`testing::ExchangeTransport` serves recorded exchanges under the simulator).
    pub fn with_transport(
        config: ResponsesConfig,
        http: std::sync::Arc<dyn crate::transport::HttpTransport>,
    ) -> Result<ResponsesClient, ProviderError> {
        let mut client = ResponsesClient::new(config)?;
        client.transport = Transport::with(PROVIDER, client.config.pacing.clone(), http);
        Ok(client)
    }

    fn headers(&self) -> Vec<(&'static str, String)> {
        let mut headers = vec![("content-type", "application/json".to_owned())];
        if let Some(key) = &self.key {
            headers.push(("authorization", format!("Bearer {key}")));
        }
        headers
    }

    /// One complete call, with the crate's retry rules.
    pub async fn complete(&self, request: &Request) -> Result<Response, ProviderError> {
        let body = request::body(request, &self.config.model, self.config.reasoning(), false)?;
        let (response, sent_at) = self.transport.send(&self.url, &self.headers(), body.to_string().into_bytes()).await?;
        let bytes = self.transport.read_body(response, sent_at).await?;
        response::parse(&bytes)
    }

    /// Opens one streamed call, with the crate's retry rules (retries end once the stream's
    /// status and headers arrived).
    pub async fn open_stream(&self, request: &Request) -> Result<ModelDeltaStream<'static>, ProviderError> {
        let body = request::body(request, &self.config.model, self.config.reasoning(), true)?;
        let (response, _) = self.transport.send(&self.url, &self.headers(), body.to_string().into_bytes()).await?;
        Ok(crate::stream::deltas(self.transport.chunks(response), stream::ResponsesEvents::default()))
    }
}

impl ModelClient for ResponsesClient {
    fn call<'a>(&'a self, _cx: &'a ModelCallContext, request: Request) -> BoxFuture<'a, Result<Response, ModelError>> {
        Box::pin(async move { Ok(self.complete(&request).await?) })
    }
    /// The provider, the model name and the reasoning settings (they change the answers; the
    /// endpoint does not).
    fn identity(&self) -> ModelIdentity {
        let mut identity = ModelIdentity::new(PROVIDER, &self.config.model);
        if let Some(effort) = &self.config.reasoning_effort {
            identity = identity.setting("reasoning_effort", effort.as_str());
        }
        if let Some(summary) = &self.config.reasoning_summary {
            identity = identity.setting("reasoning_summary", summary.as_str());
        }
        identity
    }
}

impl ModelStreamer for ResponsesClient {
    fn stream<'a>(
        &'a self,
        _cx: &'a ModelCallContext,
        request: Request,
    ) -> BoxFuture<'a, Result<ModelDeltaStream<'a>, ModelError>> {
        Box::pin(async move { Ok(self.open_stream(&request).await?) })
    }

    fn identity(&self) -> ModelIdentity {
        ModelClient::identity(self)
    }
}

impl std::fmt::Debug for ResponsesClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponsesClient")
            .field("url", &self.url)
            .field("model", &self.config.model)
            .field("api_key", &self.key.as_ref().map(|_| "<set>"))
            .finish()
    }
}
