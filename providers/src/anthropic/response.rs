//! An Anthropic Messages response as keel's [`Response`].

use super::PROVIDER;
use crate::error::ProviderError;
use crate::wire::{checked, object, opt_array, opt_str, opt_u64, parse_body, req_str};
use keel::chat::{FinishReason, Message, Part, Response, Role, ToolCall, Usage};
use serde_json::{Map, Value};

/// Parses and maps a complete (non-streamed) response body.
pub(crate) fn parse(bytes: &[u8]) -> Result<Response, ProviderError> {
    let value = parse_body(PROVIDER, bytes, "the response body")?;
    let root = object(PROVIDER, &value, "the response")?;
    if let Some(kind) = opt_str(PROVIDER, root, "type", "response")? {
        if kind != "message" {
            return Err(ProviderError::malformed(PROVIDER, format!("response.type is `{kind}`, not `message`")));
        }
    }
    let mut parts = Vec::new();
    for (i, block) in opt_array(PROVIDER, root, "content", "response")?.iter().enumerate() {
        let what = format!("response.content[{i}]");
        let block = object(PROVIDER, block, &what)?;
        match req_str(PROVIDER, block, "type", &what)? {
            "text" => {
                let text = req_str(PROVIDER, block, "text", &what)?;
                if !text.is_empty() {
                    parts.push(Part::Text(text.to_owned()));
                }
            }
            "tool_use" => {
                let id = req_str(PROVIDER, block, "id", &what)?;
                let name = req_str(PROVIDER, block, "name", &what)?;
                let arguments = match block.get("input") {
                    None | Some(Value::Null) => "{}".to_owned(),
                    Some(input) => input.to_string(),
                };
                parts.push(Part::ToolCall(ToolCall::new(id, name, arguments)));
            }
            // Thinking and server-tool blocks carry nothing keel's message can hold.
            _ => {}
        }
    }
    let finish_reason = opt_str(PROVIDER, root, "stop_reason", "response")?.map(stop_reason);
    let usage = match root.get("usage") {
        None | Some(Value::Null) => Usage::default(),
        Some(u) => usage(object(PROVIDER, u, "response.usage")?, None)?,
    };
    let message = (!parts.is_empty()).then(|| Message::new(Role::Assistant, parts));
    checked(PROVIDER, Response { message, finish_reason, usage })
}

/// An Anthropic `stop_reason` as keel's finish reason.
pub(crate) fn stop_reason(name: &str) -> FinishReason {
    match name {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "tool_use" => FinishReason::ToolCalls,
        "refusal" => FinishReason::Refusal,
        _ => FinishReason::Other,
    }
}

/// Usage: input is `input_tokens` plus the cache creation and cache read tokens (all billed
/// input); output is `output_tokens`. Members absent here fall back to `earlier` (a stream's
/// `message_start` usage), then to zero.
pub(crate) fn usage(u: &Map<String, Value>, earlier: Option<Usage>) -> Result<Usage, ProviderError> {
    let field = |key| opt_u64(PROVIDER, u, key, "usage");
    let parts = [field("input_tokens")?, field("cache_creation_input_tokens")?, field("cache_read_input_tokens")?];
    let input = if parts.iter().any(Option::is_some) {
        parts.iter().flatten().fold(0u64, |sum, n| sum.saturating_add(*n))
    } else {
        earlier.map_or(0, |e| e.input_tokens)
    };
    let output = field("output_tokens")?.or(earlier.map(|e| e.output_tokens)).unwrap_or(0);
    Ok(Usage::new(input, output))
}
