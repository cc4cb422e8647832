//! An OpenAI Chat Completions response as keel's [`Response`].

use super::PROVIDER;
use crate::error::ProviderError;
use crate::wire::{checked, object, opt_array, opt_str, opt_u64, parse_body, req_str};
use keel::chat::{FinishReason, Message, Part, Reasoning, Response, Role, ToolCall, Usage};
use serde_json::{Map, Value};

/// Parses and maps a complete (non-streamed) response body.
pub(crate) fn parse(bytes: &[u8]) -> Result<Response, ProviderError> {
    let value = parse_body(PROVIDER, bytes, "the response body")?;
    let root = object(PROVIDER, &value, "the response")?;
    let choices = opt_array(PROVIDER, root, "choices", "response")?;
    if choices.len() > 1 {
        // Same outcome as a stream carrying a second choice (see `stream`).
        return Err(super::stream::several_choices(choices.len()));
    }
    let choice = choices.first().ok_or_else(|| ProviderError::malformed(PROVIDER, "response.choices is empty"))?;
    let choice = object(PROVIDER, choice, "response.choices[0]")?;
    let message = choice
        .get("message")
        .ok_or_else(|| ProviderError::malformed(PROVIDER, "response.choices[0].message is missing"))?;
    let message = object(PROVIDER, message, "response.choices[0].message")?;
    let what = "response.choices[0].message";

    let mut parts = Vec::new();
    // Reasoning text some compatible servers return beside the answer (see `stream`).
    for key in ["reasoning_content", "reasoning"] {
        // `reasoning` is an object on some servers: only its text form is taken.
        let text = if key == "reasoning" { message.get(key).and_then(Value::as_str) } else { opt_str(PROVIDER, message, key, what)? };
        if let Some(reasoning) = text.filter(|r| !r.is_empty()) {
            parts.push(Part::Reasoning(Reasoning::text(reasoning)));
            break;
        }
    }
    if let Some(text) = opt_str(PROVIDER, message, "content", what)?.filter(|t| !t.is_empty()) {
        parts.push(Part::Text(text.to_owned()));
    }
    let refusal = opt_str(PROVIDER, message, "refusal", what)?.filter(|t| !t.is_empty());
    if let Some(text) = refusal {
        parts.push(Part::Text(text.to_owned()));
    }
    for (i, call) in opt_array(PROVIDER, message, "tool_calls", what)?.iter().enumerate() {
        let what = format!("{what}.tool_calls[{i}]");
        let call = object(PROVIDER, call, &what)?;
        let id = req_str(PROVIDER, call, "id", &what)?;
        let function = call
            .get("function")
            .ok_or_else(|| ProviderError::malformed(PROVIDER, format!("{what}.function is missing")))?;
        let function = object(PROVIDER, function, &format!("{what}.function"))?;
        let name = req_str(PROVIDER, function, "name", &format!("{what}.function"))?;
        let arguments = opt_str(PROVIDER, function, "arguments", &format!("{what}.function"))?.unwrap_or("");
        parts.push(Part::ToolCall(ToolCall::new(id, name, arguments)));
    }
    let finish = opt_str(PROVIDER, choice, "finish_reason", "response.choices[0]")?;
    let finish_reason = if refusal.is_some() { Some(FinishReason::Refusal) } else { finish.map(finish_reason) };
    let usage = match root.get("usage") {
        None | Some(Value::Null) => Usage::default(),
        Some(usage) => self::usage(object(PROVIDER, usage, "response.usage")?)?,
    };
    let message = (!parts.is_empty()).then(|| Message::new(Role::Assistant, parts));
    checked(PROVIDER, Response { message, finish_reason, usage })
}

/// An OpenAI `finish_reason` as keel's. `function_call` is the deprecated name of
/// `tool_calls`; a value keel does not know is `other`.
pub(crate) fn finish_reason(name: &str) -> FinishReason {
    match name {
        "stop" => FinishReason::Stop,
        "length" => FinishReason::Length,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "content_filter" => FinishReason::ContentFilter,
        _ => FinishReason::Other,
    }
}

/// `usage.prompt_tokens` and `usage.completion_tokens`, with the cached part of the prompt
/// (`prompt_tokens_details.cached_tokens`) and the reasoning part of the completion
/// (`completion_tokens_details.reasoning_tokens`). Absent members count as zero.
pub(crate) fn usage(usage: &Map<String, Value>) -> Result<Usage, ProviderError> {
    let input = opt_u64(PROVIDER, usage, "prompt_tokens", "usage")?.unwrap_or(0);
    let output = opt_u64(PROVIDER, usage, "completion_tokens", "usage")?.unwrap_or(0);
    Ok(Usage {
        cache_read_tokens: detail(usage, "prompt_tokens_details", "cached_tokens")?,
        reasoning_tokens: detail(usage, "completion_tokens_details", "reasoning_tokens")?,
        ..Usage::new(input, output)
    })
}

/// `usage.{group}.{key}`; an absent or `null` group or member is zero.
fn detail(usage: &Map<String, Value>, group: &str, key: &str) -> Result<u64, ProviderError> {
    match usage.get(group) {
        None | Some(Value::Null) => Ok(0),
        Some(details) => {
            let what = format!("usage.{group}");
            Ok(opt_u64(PROVIDER, object(PROVIDER, details, &what)?, key, &what)?.unwrap_or(0))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_with_several_choices_fails_like_a_stream_would() {
        let two = br#"{"choices":[{"index":0,"message":{"role":"assistant","content":"Mild."},"finish_reason":"stop"},
            {"index":1,"message":{"role":"assistant","content":"Warm."},"finish_reason":"stop"}]}"#;
        let e = parse(two).unwrap_err();
        assert!(matches!(e, ProviderError::Malformed { .. }) && e.to_string().contains("2 choices"), "{e}");
        let one = br#"{"choices":[{"index":0,"message":{"role":"assistant","content":"Mild."},"finish_reason":"stop"}]}"#;
        assert_eq!(parse(one).unwrap().message.unwrap().text(), "Mild.");
    }

    #[test]
    fn reasoning_content_is_a_reasoning_part_not_answer_text() {
        let body = br#"{"choices":[{"index":0,"message":{"role":"assistant","content":"4.","reasoning_content":"2+2 is 4."},"finish_reason":"stop"}],
            "usage":{"prompt_tokens":12,"completion_tokens":30,"completion_tokens_details":{"reasoning_tokens":25}}}"#;
        let response = parse(body).unwrap();
        let message = response.message.unwrap();
        assert_eq!(message.text(), "4.");
        assert_eq!(message.parts[0], Part::Reasoning(Reasoning::text("2+2 is 4.")));
        assert_eq!(response.usage, Usage { reasoning_tokens: 25, ..Usage::new(12, 30) });
    }

    #[test]
    fn usage_details_are_parts_of_input_and_output() {
        let u = |text: &str| usage(serde_json::from_str::<Value>(text).unwrap().as_object().unwrap());
        assert_eq!(
            u(r#"{"prompt_tokens":2006,"completion_tokens":300,"prompt_tokens_details":{"cached_tokens":1920,"audio_tokens":0},
                "completion_tokens_details":{"reasoning_tokens":192,"audio_tokens":0}}"#)
            .unwrap(),
            Usage { cache_read_tokens: 1920, reasoning_tokens: 192, ..Usage::new(2006, 300) }
        );
        // Compatible servers send none, or nulls.
        assert_eq!(u(r#"{"prompt_tokens":5,"completion_tokens":1}"#).unwrap(), Usage::new(5, 1));
        assert_eq!(
            u(r#"{"prompt_tokens":5,"completion_tokens":1,"prompt_tokens_details":null,"completion_tokens_details":{"reasoning_tokens":null}}"#).unwrap(),
            Usage::new(5, 1)
        );
        for bad in [r#"{"prompt_tokens_details":{"cached_tokens":-1}}"#, r#"{"completion_tokens_details":7}"#] {
            assert!(matches!(u(bad), Err(ProviderError::Malformed { .. })), "{bad}");
        }
    }
}
