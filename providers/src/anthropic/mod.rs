//! Anthropic Messages (`POST {base_url}/v1/messages`).
//!
//! | keel | Messages API |
//! |---|---|
//! | system messages (keel's prefix) | the top-level `system`, joined with blank lines: one text block with a cache breakpoint (a plain string with caching off) |
//! | user message | `{"role": "user", "content": [text blocks]}` |
//! | assistant message | `{"role": "assistant", "content": [thinking, redacted_thinking, text and tool_use blocks]}`; `tool_use.input` is the parsed arguments (`{}` when empty or not an object) |
//! | reasoning part | a `thinking` block (`thinking` + `signature`) or a `redacted_thinking` block (`data`), verbatim, where the model put them; reasoning without a signature or redacted data (another provider's) is not sent |
//! | tool message | a `user` message of `tool_result` blocks (`tool_use_id`, `content`, `is_error` when set) |
//! | prompt caching ([`PromptCache`]) | `cache_control: {"type": "ephemeral"}` on the system block, the last tool and the last cacheable block of the last message (three of the four breakpoints the API allows) |
//! | tools / tool_choice | `tools[]` of `{name, description, input_schema}`; `none` → `{"type": "none"}`, `required` → `{"type": "any"}`, a name → `{"type": "tool", "name"}` (`auto` is omitted; no tool_choice without tools) |
//! | extended thinking | [`AnthropicConfig::thinking`] → `thinking: {"type": "enabled", "budget_tokens"}` (or `options.extra.thinking`) |
//! | options | `model` (else the configured one), `max_tokens` (required by the API: the request's, else [`AnthropicConfig::max_tokens`]), `temperature`, `top_p`, `stop_sequences`; `extra` members are added at the top level |
//! | stop reasons | `end_turn`, `stop_sequence` → stop; `max_tokens`, `model_context_window_exceeded` → length; `tool_use` → tool_calls; `refusal` → refusal; anything else → other |
//! | usage | input = `input_tokens` + `cache_creation_input_tokens` + `cache_read_input_tokens`, of which cache write = `cache_creation_input_tokens` and cache read = `cache_read_input_tokens`; output = `output_tokens` (thinking included; no reasoning count apart) |
//!
//! Extended thinking (enabled through `options.extra`, e.g. `{"thinking": {"type": "enabled",
//! "budget_tokens": 1024}}`): `thinking` blocks (streamed as `thinking_delta` and
//! `signature_delta`) and `redacted_thinking` blocks become reasoning parts, never answer
//! text, kept in the durable context and sent back unmodified, as the API requires when
//! thinking is used with tools. Server-tool content blocks are not carried.

mod request;
mod response;
mod stream;

use crate::error::ProviderError;
use crate::http::Transport;
use crate::retry::Pacing;
use crate::wire::{endpoint, Endpoint};
use keel::chat::{Request, Response};
use keel::env::BoxFuture;
use keel::interaction::model::{ModelCallContext, ModelClient, ModelDeltaStream, ModelError, ModelIdentity, ModelStreamer};

pub(crate) const PROVIDER: &str = "anthropic";

/// The official endpoint.
pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";
/// The environment variable read when the configuration holds no key.
pub const ANTHROPIC_API_KEY_VAR: &str = "ANTHROPIC_API_KEY";
/// The `anthropic-version` header sent with every request.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// `max_tokens` of requests that set no `max_output_tokens`.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// Where the client puts prompt-cache breakpoints (`"cache_control": {"type": "ephemeral"}`):
/// on the instructions (the `system` blocks), on the tool definitions (the last tool), and
/// on the history (the last block of the last message that can carry one). Each is a prefix
/// Anthropic caches for five minutes; a later call with the same prefix reads it at a tenth
/// of the input price (usage reports the writes and reads). A prefix below the model's
/// minimum (1024 tokens on most models) is simply not cached.
///
/// [`PromptCache::AUTO`] (the default) marks all three; [`PromptCache::OFF`] none; or choose
/// each member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PromptCache {
    pub system: bool,
    pub tools: bool,
    pub history: bool,
}

impl PromptCache {
    /// Breakpoints on instructions, tools and history.
    pub const AUTO: PromptCache = PromptCache { system: true, tools: true, history: true };
    /// No breakpoint: request bodies carry no `cache_control`.
    pub const OFF: PromptCache = PromptCache { system: false, tools: false, history: false };
}

impl Default for PromptCache {
    fn default() -> PromptCache {
        PromptCache::AUTO
    }
}

/// How to reach the Messages API.
#[derive(Clone)]
pub struct AnthropicConfig {
    /// The root `/v1/messages` is appended to: [`ANTHROPIC_BASE_URL`] or a proxy.
    pub base_url: String,
    /// The `x-api-key`. `None` reads [`ANTHROPIC_API_KEY_VAR`]; without either, the official
    /// endpoint is refused and any other base URL is called without a key.
    pub api_key: Option<String>,
    /// The model of requests that name none in their options.
    pub model: String,
    /// `max_tokens` of requests whose options set none (the API requires one).
    pub max_tokens: u32,
    /// Retries, timeouts, and the clock and rng they run on.
    pub pacing: Pacing,
    /// Prompt-cache breakpoints; [`PromptCache::AUTO`] unless changed.
    pub cache: PromptCache,
    /// Extended thinking with this token budget (`"thinking": {"type": "enabled",
    /// "budget_tokens": N}`; the API wants at least 1024 and less than `max_tokens`). `None`
    /// (the default) sends nothing; `options.extra.thinking` overrides it per request.
    pub thinking: Option<u32>,
}

impl AnthropicConfig {
    /// The official API with `model`, the key from [`ANTHROPIC_API_KEY_VAR`].
    pub fn new(model: impl Into<String>, pacing: Pacing) -> AnthropicConfig {
        AnthropicConfig::at(ANTHROPIC_BASE_URL, model, pacing)
    }

    /// The Messages API at `base_url` (a proxy, or a test server).
    pub fn at(base_url: impl Into<String>, model: impl Into<String>, pacing: Pacing) -> AnthropicConfig {
        AnthropicConfig {
            base_url: base_url.into(),
            api_key: None,
            model: model.into(),
            max_tokens: DEFAULT_MAX_TOKENS,
            pacing,
            cache: PromptCache::AUTO,
            thinking: None,
        }
    }

    /// The same configuration with an explicit key.
    pub fn with_api_key(mut self, key: impl Into<String>) -> AnthropicConfig {
        self.api_key = Some(key.into());
        self
    }
}

impl std::fmt::Debug for AnthropicConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("model", &self.model)
            .field("max_tokens", &self.max_tokens)
            .field("pacing", &self.pacing)
            .field("cache", &self.cache)
            .field("thinking", &self.thinking)
            .finish()
    }
}

/// A Messages API client: a [`ModelClient`] and a [`ModelStreamer`].
pub struct AnthropicClient {
    config: AnthropicConfig,
    url: String,
    key: Option<String>,
    transport: Transport,
}

impl AnthropicClient {
    /// Checks the configuration and resolves the key (see [`AnthropicConfig::api_key`]).
    pub fn new(config: AnthropicConfig) -> Result<AnthropicClient, ProviderError> {
        let Endpoint { url, key } = endpoint(
            PROVIDER,
            &config.base_url,
            ANTHROPIC_BASE_URL,
            config.api_key.as_deref(),
            ANTHROPIC_API_KEY_VAR,
            "AnthropicConfig::api_key",
            "v1/messages",
        )?;
        if config.max_tokens == 0 {
            return Err(ProviderError::Config { provider: PROVIDER, detail: "max_tokens must be at least 1".into() });
        }
        let transport = Transport::new(PROVIDER, config.pacing.clone())?;
        Ok(AnthropicClient { config, url, key, transport })
    }

    /// Like [`AnthropicClient::new`], sending through `http` instead of the default reqwest transport
    /// (`testing::ExchangeTransport` serves recorded exchanges under the simulator).
    pub fn with_transport(config: AnthropicConfig, http: std::sync::Arc<dyn crate::transport::HttpTransport>) -> Result<AnthropicClient, ProviderError> {
        let mut client = AnthropicClient::new(config)?;
        client.transport = Transport::with(PROVIDER, client.config.pacing.clone(), http);
        Ok(client)
    }

    fn headers(&self) -> Vec<(&'static str, String)> {
        let mut headers =
            vec![("content-type", "application/json".to_owned()), ("anthropic-version", ANTHROPIC_VERSION.to_owned())];
        if let Some(key) = &self.key {
            headers.push(("x-api-key", key.clone()));
        }
        headers
    }

    /// One complete call, with the crate's retry rules.
    pub async fn complete(&self, request: &Request) -> Result<Response, ProviderError> {
        let body = request::body(request, &self.config.model, self.config.max_tokens, false, self.config.cache, self.config.thinking)?;
        let (response, sent_at) = self.transport.send(&self.url, &self.headers(), body.to_string().into_bytes()).await?;
        let bytes = self.transport.read_body(response, sent_at).await?;
        response::parse(&bytes)
    }

    /// Opens one streamed call, with the crate's retry rules (retries end once the stream's
    /// status and headers arrived).
    pub async fn open_stream(&self, request: &Request) -> Result<ModelDeltaStream<'static>, ProviderError> {
        let body = request::body(request, &self.config.model, self.config.max_tokens, true, self.config.cache, self.config.thinking)?;
        let (response, _) = self.transport.send(&self.url, &self.headers(), body.to_string().into_bytes()).await?;
        Ok(crate::stream::deltas(self.transport.chunks(response), stream::AnthropicEvents::default()))
    }
}

impl ModelClient for AnthropicClient {
    fn call<'a>(&'a self, _cx: &'a ModelCallContext, request: Request) -> BoxFuture<'a, Result<Response, ModelError>> {
        Box::pin(async move { Ok(self.complete(&request).await?) })
    }
    /// The provider and model name (the endpoint is not part of it: a compatible server
    /// serving the same model under the same name answers the same way).
    fn identity(&self) -> ModelIdentity {
        ModelIdentity::new(PROVIDER, &self.config.model)
    }
}

impl ModelStreamer for AnthropicClient {
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

impl std::fmt::Debug for AnthropicClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicClient")
            .field("url", &self.url)
            .field("model", &self.config.model)
            .field("api_key", &self.key.as_ref().map(|_| "<set>"))
            .finish()
    }
}
