//! OpenAI Chat Completions (`POST {base_url}/chat/completions`), also the client for any
//! OpenAI-compatible server: vLLM, llama.cpp's server, Ollama, LiteLLM proxies.
//!
//! | keel | Chat Completions |
//! |---|---|
//! | system / user message | `{"role": "system" \| "user", "content": text}` |
//! | assistant message | `content` (text or `null`) + `tool_calls[]` of `{"id", "type": "function", "function": {"name", "arguments"}}` |
//! | tool message with N results | N `{"role": "tool", "tool_call_id", "content"}` messages, in order |
//! | tools / tool_choice | `tools[]` of functions; `none`, `required`, or `{"type": "function", ...}` (`auto` is omitted; no tool_choice without tools) |
//! | options | `model` (else the configured one), `temperature`, `top_p`, `max_completion_tokens` (or `max_tokens`, see [`OpenAiConfig::legacy_max_tokens`]), `stop`; `extra` members are added at the top level |
//! | response `content` / `refusal` | text parts; a refusal makes the finish reason `refusal` |
//! | finish reasons | `stop`, `length`, `tool_calls` (and the old `function_call`), `content_filter`; anything else is `other` |
//! | usage | `prompt_tokens` → input, of which `prompt_tokens_details.cached_tokens` → cache read; `completion_tokens` → output, of which `completion_tokens_details.reasoning_tokens` → reasoning |
//! | typed output schema (`ModelCallContext::output_schema`) | `response_format` `{"type": "json_schema", "json_schema": {"name": "output", "schema", "strict": false}}` (see [`OpenAiConfig::structured_output`]) |
//! | `n` (through `options.extra`) | must be absent or 1: refused before sending otherwise, and a response or stream carrying a second choice fails the call (keel's response holds one answer; a stream's choices arrive interleaved, and merging them would garble the answer) |
//!
//! Streaming sends `stream: true` and `stream_options.include_usage` (turn it off with
//! [`OpenAiConfig::stream_usage`] for servers that reject it).

mod request;
mod response;
mod stream;

use crate::error::ProviderError;
use crate::http::Transport;
use crate::retry::Pacing;
use crate::wire::{endpoint, Endpoint};
use keel::chat::{Request, Response};
use keel::env::BoxFuture;
use keel::json::Json;
use keel::interaction::model::{ModelCallContext, ModelClient, ModelDeltaStream, ModelError, ModelIdentity, ModelStreamer};

pub(crate) const PROVIDER: &str = "openai";

/// The official endpoint.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
/// The environment variable read when the configuration holds no key.
pub const OPENAI_API_KEY_VAR: &str = "OPENAI_API_KEY";
/// The environment variable [`OpenAiConfig::from_env`] reads for the API root.
pub const OPENAI_BASE_URL_VAR: &str = "OPENAI_BASE_URL";
/// The environment variable [`OpenAiConfig::from_env`] reads for the model.
pub const OPENAI_MODEL_VAR: &str = "OPENAI_MODEL";

/// How to reach an OpenAI (or compatible) endpoint.
#[derive(Clone)]
pub struct OpenAiConfig {
    /// The API root the `/chat/completions` path is appended to, e.g. [`OPENAI_BASE_URL`] or
    /// `http://localhost:8000/v1` (vLLM), `http://localhost:11434/v1` (Ollama).
    pub base_url: String,
    /// The bearer key. `None` reads [`OPENAI_API_KEY_VAR`]; without either, the official
    /// endpoint is refused and any other base URL is called without a key (local servers).
    pub api_key: Option<String>,
    /// The model of requests that name none in their options.
    pub model: String,
    /// Send `max_tokens` instead of `max_completion_tokens`, for servers that only know the
    /// older name.
    pub legacy_max_tokens: bool,
    /// Ask streams for a final usage chunk (`stream_options.include_usage`).
    pub stream_usage: bool,
    /// Send the schema of an agent's typed output (`AgentBuilder::output`) as
    /// `response_format` `json_schema` (not strict: a `schemars` schema need not meet strict
    /// mode's rules; the answer is checked by the agent anyway). Turn it off for a server that
    /// rejects `response_format`: the schema still reaches the model in the system message.
    pub structured_output: bool,
    /// Send the reasoning text of each earlier assistant turn that called tools back as its
    /// `reasoning_content` (off by default). DeepSeek's thinking mode requires it once a turn
    /// called tools (without it the next request is refused with 400); servers that do not
    /// know the member may refuse it, and turns without tool calls never carry it.
    pub send_reasoning: bool,
    /// Retries, timeouts, and the clock and rng they run on.
    pub pacing: Pacing,
}

impl OpenAiConfig {
    /// The official API with `model`, the key from [`OPENAI_API_KEY_VAR`].
    pub fn new(model: impl Into<String>, pacing: Pacing) -> OpenAiConfig {
        OpenAiConfig::compatible(OPENAI_BASE_URL, model, pacing)
    }

    /// An OpenAI-compatible server at `base_url` (the root that `/chat/completions` follows).
    pub fn compatible(base_url: impl Into<String>, model: impl Into<String>, pacing: Pacing) -> OpenAiConfig {
        OpenAiConfig {
            base_url: base_url.into(),
            api_key: None,
            model: model.into(),
            legacy_max_tokens: false,
            stream_usage: true,
            structured_output: true,
            send_reasoning: false,
            pacing,
        }
    }

    /// The endpoint and model a deployment chose through the environment: the API root from
    /// [`OPENAI_BASE_URL_VAR`] (default: the official API), the model from [`OPENAI_MODEL_VAR`]
    /// (default: `default_model`), and the key, as always, from [`OPENAI_API_KEY_VAR`]. One
    /// program then runs against the real API or a local OpenAI-compatible server unchanged.
    pub fn from_env(default_model: impl Into<String>, pacing: Pacing) -> OpenAiConfig {
        let (base_url, model) = env_endpoint(default_model.into());
        OpenAiConfig::compatible(base_url, model, pacing)
    }

    /// The same configuration sending reasoning back as `reasoning_content` (see
    /// [`send_reasoning`](OpenAiConfig::send_reasoning)): for DeepSeek's thinking mode with tools.
    pub fn with_reasoning_sent_back(mut self) -> OpenAiConfig {
        self.send_reasoning = true;
        self
    }

    /// The same configuration with an explicit key.
    pub fn with_api_key(mut self, key: impl Into<String>) -> OpenAiConfig {
        self.api_key = Some(key.into());
        self
    }
}

impl std::fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("model", &self.model)
            .field("legacy_max_tokens", &self.legacy_max_tokens)
            .field("stream_usage", &self.stream_usage)
            .field("structured_output", &self.structured_output)
            .field("send_reasoning", &self.send_reasoning)
            .field("pacing", &self.pacing)
            .finish()
    }
}

/// A Chat Completions client: a [`ModelClient`] and a [`ModelStreamer`].
pub struct OpenAiClient {
    config: OpenAiConfig,
    url: String,
    key: Option<String>,
    transport: Transport,
}

impl OpenAiClient {
    /// Checks the configuration and resolves the key (see [`OpenAiConfig::api_key`]).
    pub fn new(config: OpenAiConfig) -> Result<OpenAiClient, ProviderError> {
        let Endpoint { url, key } = endpoint(
            PROVIDER,
            &config.base_url,
            OPENAI_BASE_URL,
            config.api_key.as_deref(),
            OPENAI_API_KEY_VAR,
            "OpenAiConfig::api_key",
            "chat/completions",
        )?;
        let transport = Transport::new(PROVIDER, config.pacing.clone())?;
        Ok(OpenAiClient { config, url, key, transport })
    }

    /// Like [`OpenAiClient::new`], sending through `http` instead of the default reqwest transport
    /// (`testing::ExchangeTransport` serves recorded exchanges under the simulator).
    pub fn with_transport(config: OpenAiConfig, http: std::sync::Arc<dyn crate::transport::HttpTransport>) -> Result<OpenAiClient, ProviderError> {
        let mut client = OpenAiClient::new(config)?;
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
        self.complete_with(request, None).await
    }

    /// [`complete`](Self::complete), asking for an answer matching `output_schema` when the
    /// configuration allows it ([`OpenAiConfig::structured_output`]).
    pub async fn complete_with(&self, request: &Request, output_schema: Option<&Json>) -> Result<Response, ProviderError> {
        let mut body = request::body(request, &self.config.model, self.config.legacy_max_tokens, self.config.send_reasoning, None)?;
        self.response_format(&mut body, output_schema)?;
        let (response, sent_at) = self.transport.send(&self.url, &self.headers(), body.to_string().into_bytes()).await?;
        let bytes = self.transport.read_body(response, sent_at).await?;
        response::parse(&bytes)
    }

    /// Opens one streamed call, with the crate's retry rules (retries end once the stream's
    /// status and headers arrived).
    pub async fn open_stream(&self, request: &Request) -> Result<ModelDeltaStream<'static>, ProviderError> {
        self.open_stream_with(request, None).await
    }

    /// [`open_stream`](Self::open_stream), asking for an answer matching `output_schema` when
    /// the configuration allows it ([`OpenAiConfig::structured_output`]).
    pub async fn open_stream_with(&self, request: &Request, output_schema: Option<&Json>) -> Result<ModelDeltaStream<'static>, ProviderError> {
        let mut body = request::body(request, &self.config.model, self.config.legacy_max_tokens, self.config.send_reasoning, Some(self.config.stream_usage))?;
        self.response_format(&mut body, output_schema)?;
        let (response, _) = self.transport.send(&self.url, &self.headers(), body.to_string().into_bytes()).await?;
        Ok(crate::stream::deltas(self.transport.chunks(response), stream::OpenAiEvents::default()))
    }
}

/// The API root from [`OPENAI_BASE_URL_VAR`] (default: the official API) and the model from
/// [`OPENAI_MODEL_VAR`] (default: `default_model`); blank values count as unset. Shared by
/// both OpenAI clients' `from_env`.
pub(crate) fn env_endpoint(default_model: String) -> (String, String) {
    let set = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let base_url = set(OPENAI_BASE_URL_VAR).unwrap_or_else(|| OPENAI_BASE_URL.to_owned());
    let model = set(OPENAI_MODEL_VAR).unwrap_or(default_model);
    (base_url, model)
}

impl OpenAiClient {
    fn response_format(&self, body: &mut serde_json::Value, output_schema: Option<&Json>) -> Result<(), ProviderError> {
        match output_schema {
            Some(schema) if self.config.structured_output => request::insert_response_format(body, schema),
            _ => Ok(()),
        }
    }
}

impl ModelClient for OpenAiClient {
    fn call<'a>(&'a self, cx: &'a ModelCallContext, request: Request) -> BoxFuture<'a, Result<Response, ModelError>> {
        Box::pin(async move { Ok(self.complete_with(&request, cx.output_schema.as_ref()).await?) })
    }
    /// The provider and model name (the endpoint is not part of it: a compatible server
    /// serving the same model under the same name answers the same way).
    fn identity(&self) -> ModelIdentity {
        ModelIdentity::new(PROVIDER, &self.config.model)
    }
}

impl ModelStreamer for OpenAiClient {
    fn stream<'a>(
        &'a self,
        cx: &'a ModelCallContext,
        request: Request,
    ) -> BoxFuture<'a, Result<ModelDeltaStream<'a>, ModelError>> {
        Box::pin(async move { Ok(self.open_stream_with(&request, cx.output_schema.as_ref()).await?) })
    }

    fn identity(&self) -> ModelIdentity {
        ModelClient::identity(self)
    }
}

impl std::fmt::Debug for OpenAiClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiClient")
            .field("url", &self.url)
            .field("model", &self.config.model)
            .field("api_key", &self.key.as_ref().map(|_| "<set>"))
            .finish()
    }
}
