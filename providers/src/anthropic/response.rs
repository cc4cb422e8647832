//! An Anthropic Messages response as keel's [`Response`].

use super::PROVIDER;
use crate::error::ProviderError;
use crate::wire::{checked, object, opt_array, opt_str, opt_u64, parse_body, req_str};
use keel::chat::{FinishReason, Message, Part, Reasoning, Response, Role, ToolCall, Usage};
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
            "thinking" => {
                let text = req_str(PROVIDER, block, "thinking", &what)?;
                let signature = opt_str(PROVIDER, block, "signature", &what)?.filter(|s| !s.is_empty());
                let reasoning = Reasoning { text: text.to_owned(), signature: signature.map(str::to_owned), ..Reasoning::default() };
                if !reasoning.text.is_empty() || reasoning.signature.is_some() {
                    parts.push(Part::Reasoning(reasoning));
                }
            }
            "redacted_thinking" => {
                let data = req_str(PROVIDER, block, "data", &what)?;
                if !data.is_empty() {
                    parts.push(Part::Reasoning(Reasoning::redacted(data)));
                }
            }
            // Server-tool blocks carry nothing keel's message can hold.
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
/// input), which are also reported as the cache write and read parts; output is
/// `output_tokens` (thinking included: the API does not count it apart). Members absent here
/// fall back to `earlier` (a stream's `message_start` usage), then to zero.
pub(crate) fn usage(u: &Map<String, Value>, earlier: Option<Usage>) -> Result<Usage, ProviderError> {
    let field = |key| opt_u64(PROVIDER, u, key, "usage");
    let earlier = earlier.unwrap_or_default();
    let cache_write = field("cache_creation_input_tokens")?.unwrap_or(earlier.cache_write_tokens);
    let cache_read = field("cache_read_input_tokens")?.unwrap_or(earlier.cache_read_tokens);
    let uncached = match field("input_tokens")? {
        Some(n) => n,
        None => earlier.input_tokens.saturating_sub(earlier.cache_write_tokens).saturating_sub(earlier.cache_read_tokens),
    };
    Ok(Usage {
        input_tokens: uncached.saturating_add(cache_write).saturating_add(cache_read),
        output_tokens: field("output_tokens")?.unwrap_or(earlier.output_tokens),
        cache_read_tokens: cache_read,
        cache_write_tokens: cache_write,
        reasoning_tokens: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(text: &str, earlier: Option<Usage>) -> Usage {
        usage(serde_json::from_str::<Value>(text).unwrap().as_object().unwrap(), earlier).unwrap()
    }

    #[test]
    fn cache_tokens_are_parts_of_the_input_and_fall_back_member_by_member() {
        let start = u(r#"{"input_tokens":21,"cache_creation_input_tokens":188086,"cache_read_input_tokens":0,"output_tokens":1}"#, None);
        assert_eq!(start, Usage { cache_write_tokens: 188086, ..Usage::new(188107, 1) });
        // A message_delta with output only keeps message_start's input and its parts.
        assert_eq!(u(r#"{"output_tokens":393}"#, Some(start)), Usage { cache_write_tokens: 188086, ..Usage::new(188107, 393) });
        // One with cumulative input members takes them.
        assert_eq!(
            u(r#"{"input_tokens":21,"cache_creation_input_tokens":0,"cache_read_input_tokens":188086,"output_tokens":393}"#, Some(start)),
            Usage { cache_read_tokens: 188086, ..Usage::new(188107, 393) }
        );
        assert_eq!(u(r#"{}"#, None), Usage::default());
    }
}
