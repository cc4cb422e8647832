//! A Responses API response object as keel's [`Response`]. The same object ends a stream
//! (`response.completed` / `response.incomplete` carry it), so its status, finish reason and
//! usage are read here for both modes.

use super::PROVIDER;
use crate::error::{bounded, ProviderError};
use crate::wire::{checked, object, opt_array, opt_str, opt_u64, parse_body, req_str};
use keel::chat::{FinishReason, Message, Part, Reasoning, Response, Role, ToolCall, Usage};
use serde_json::{Map, Value};

/// Parses and maps a complete (non-streamed) response body.
pub(crate) fn parse(bytes: &[u8]) -> Result<Response, ProviderError> {
    let value = parse_body(PROVIDER, bytes, "the response body")?;
    let root = object(PROVIDER, &value, "the response")?;
    let mut parts = Vec::new();
    let mut refusal = false;
    for (i, item) in opt_array(PROVIDER, root, "output", "response")?.iter().enumerate() {
        let what = format!("response.output[{i}]");
        let item = object(PROVIDER, item, &what)?;
        match output_item(item, &what)? {
            Item::Message { text, refused } => {
                refusal |= refused;
                if !text.is_empty() {
                    parts.push(Part::Text(text));
                }
            }
            Item::Call(call) => parts.push(Part::ToolCall(call)),
            Item::Reasoning(reasoning) => {
                if reasoning != Reasoning::default() {
                    parts.push(Part::Reasoning(reasoning));
                }
            }
            Item::Other => {}
        }
    }
    let called = parts.iter().any(|p| matches!(p, Part::ToolCall(_)));
    let finish_reason = Some(finish(root, called, refusal)?);
    let usage = usage_of(root)?;
    let message = (!parts.is_empty()).then(|| Message::new(Role::Assistant, parts));
    checked(PROVIDER, Response { message, finish_reason, usage })
}

/// One output item, as far as keel carries it.
pub(crate) enum Item {
    /// A `message`: its `output_text` and `refusal` parts joined.
    Message { text: String, refused: bool },
    /// A `function_call`.
    Call(ToolCall),
    /// A `reasoning` item: its id, summary texts, reasoning text and encrypted content.
    Reasoning(Reasoning),
    /// An item of a hosted tool (web search, file search, ...), which keel never requests.
    Other,
}

/// Reads one output item.
pub(crate) fn output_item(item: &Map<String, Value>, what: &str) -> Result<Item, ProviderError> {
    match req_str(PROVIDER, item, "type", what)? {
        "message" => {
            let mut text = String::new();
            let mut refused = false;
            for (j, content) in opt_array(PROVIDER, item, "content", what)?.iter().enumerate() {
                let what = format!("{what}.content[{j}]");
                let content = object(PROVIDER, content, &what)?;
                match req_str(PROVIDER, content, "type", &what)? {
                    "output_text" => text.push_str(req_str(PROVIDER, content, "text", &what)?),
                    "refusal" => {
                        refused = true;
                        text.push_str(req_str(PROVIDER, content, "refusal", &what)?);
                    }
                    _ => {}
                }
            }
            Ok(Item::Message { text, refused })
        }
        "function_call" => {
            let id = req_str(PROVIDER, item, "call_id", what)?;
            let name = req_str(PROVIDER, item, "name", what)?;
            let arguments = opt_str(PROVIDER, item, "arguments", what)?.unwrap_or("");
            Ok(Item::Call(ToolCall::new(id, name, arguments)))
        }
        "reasoning" => {
            let id = opt_str(PROVIDER, item, "id", what)?.filter(|s| !s.is_empty()).map(str::to_owned);
            let encrypted = opt_str(PROVIDER, item, "encrypted_content", what)?.filter(|s| !s.is_empty()).map(str::to_owned);
            let mut summary = Vec::new();
            for (j, part) in opt_array(PROVIDER, item, "summary", what)?.iter().enumerate() {
                let what = format!("{what}.summary[{j}]");
                let part = object(PROVIDER, part, &what)?;
                let text = req_str(PROVIDER, part, "text", &what)?;
                if !text.is_empty() {
                    summary.push(text.to_owned());
                }
            }
            let mut text = String::new();
            for (j, part) in opt_array(PROVIDER, item, "content", what)?.iter().enumerate() {
                let what = format!("{what}.content[{j}]");
                let part = object(PROVIDER, part, &what)?;
                if req_str(PROVIDER, part, "type", &what)? == "reasoning_text" {
                    text.push_str(req_str(PROVIDER, part, "text", &what)?);
                }
            }
            Ok(Item::Reasoning(Reasoning { text, summary, encrypted, id, ..Reasoning::default() }))
        }
        _ => Ok(Item::Other),
    }
}

/// The finish reason of a finished response object: `completed` (a tool call makes it
/// `tool_calls`, a refusal `refusal`), or `incomplete` with its reason. A `failed` response is
/// the provider's error; any other status (`in_progress`, `queued`: a background response) is
/// no answer yet.
pub(crate) fn finish(root: &Map<String, Value>, called: bool, refused: bool) -> Result<FinishReason, ProviderError> {
    match opt_str(PROVIDER, root, "status", "response")? {
        // Compatible servers may omit the status of a complete answer.
        Some("completed") | None => Ok(if refused {
            FinishReason::Refusal
        } else if called {
            FinishReason::ToolCalls
        } else {
            FinishReason::Stop
        }),
        Some("incomplete") => {
            let reason = match root.get("incomplete_details") {
                Some(Value::Object(details)) => opt_str(PROVIDER, details, "reason", "response.incomplete_details")?,
                _ => None,
            };
            Ok(match reason {
                Some("max_output_tokens") => FinishReason::Length,
                Some("content_filter") => FinishReason::ContentFilter,
                _ => FinishReason::Other,
            })
        }
        Some("failed") => Err(failed(root)),
        Some(other) => Err(ProviderError::malformed(
            PROVIDER,
            format!("the response has status `{other}`, not an answer (background responses are not supported)"),
        )),
    }
}

/// The error of a `failed` response (`response.error`: `code` and `message`).
pub(crate) fn failed(root: &Map<String, Value>) -> ProviderError {
    let (kind, message) = match root.get("error") {
        Some(Value::Object(error)) => error_fields(error),
        _ => ("failed".to_owned(), "the response failed without an error".to_owned()),
    };
    ProviderError::Stream { provider: PROVIDER, kind, message: bounded(message) }
}

/// `(kind, message)` of an error object: its `code`, else its `type`.
pub(crate) fn error_fields(error: &Map<String, Value>) -> (String, String) {
    let text = |key: &str| error.get(key).and_then(Value::as_str).filter(|s| !s.is_empty());
    let kind = text("code").or_else(|| text("type")).unwrap_or("error").to_owned();
    let message = text("message").unwrap_or("").to_owned();
    (kind, message)
}

/// The response's `usage`; absent or `null` is zero.
pub(crate) fn usage_of(root: &Map<String, Value>) -> Result<Usage, ProviderError> {
    match root.get("usage") {
        None | Some(Value::Null) => Ok(Usage::default()),
        Some(u) => usage(object(PROVIDER, u, "response.usage")?),
    }
}

/// `input_tokens` and `output_tokens`, with the cached part of the input
/// (`input_tokens_details.cached_tokens`, and `cache_write_tokens` where reported) and the
/// reasoning part of the output (`output_tokens_details.reasoning_tokens`). Absent members
/// count as zero.
pub(crate) fn usage(usage: &Map<String, Value>) -> Result<Usage, ProviderError> {
    let input = opt_u64(PROVIDER, usage, "input_tokens", "usage")?.unwrap_or(0);
    let output = opt_u64(PROVIDER, usage, "output_tokens", "usage")?.unwrap_or(0);
    Ok(Usage {
        cache_read_tokens: detail(usage, "input_tokens_details", "cached_tokens")?,
        cache_write_tokens: detail(usage, "input_tokens_details", "cache_write_tokens")?,
        reasoning_tokens: detail(usage, "output_tokens_details", "reasoning_tokens")?,
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

    fn map(text: &str) -> Map<String, Value> {
        serde_json::from_str::<Value>(text).unwrap().as_object().unwrap().clone()
    }

    #[test]
    fn usage_details_are_parts_of_input_and_output() {
        assert_eq!(
            usage(&map(
                r#"{"input_tokens":2006,"input_tokens_details":{"cached_tokens":1920,"cache_write_tokens":64},
                "output_tokens":300,"output_tokens_details":{"reasoning_tokens":192},"total_tokens":2306}"#
            ))
            .unwrap(),
            Usage { cache_read_tokens: 1920, cache_write_tokens: 64, reasoning_tokens: 192, ..Usage::new(2006, 300) }
        );
        assert_eq!(usage(&map(r#"{"input_tokens":5,"output_tokens":1,"input_tokens_details":null}"#)).unwrap(), Usage::new(5, 1));
        for bad in [r#"{"input_tokens":-1}"#, r#"{"output_tokens_details":{"reasoning_tokens":"x"}}"#, r#"{"input_tokens_details":3}"#] {
            assert!(matches!(usage(&map(bad)), Err(ProviderError::Malformed { .. })), "{bad}");
        }
    }

    #[test]
    fn statuses_map_to_finish_reasons_or_errors() {
        assert_eq!(finish(&map(r#"{"status":"completed"}"#), false, false).unwrap(), FinishReason::Stop);
        assert_eq!(finish(&map(r#"{"status":"completed"}"#), true, false).unwrap(), FinishReason::ToolCalls);
        assert_eq!(finish(&map(r#"{"status":"completed"}"#), true, true).unwrap(), FinishReason::Refusal);
        let incomplete = |reason: &str| {
            finish(&map(&format!(r#"{{"status":"incomplete","incomplete_details":{{"reason":"{reason}"}}}}"#)), false, false).unwrap()
        };
        assert_eq!(incomplete("max_output_tokens"), FinishReason::Length);
        assert_eq!(incomplete("content_filter"), FinishReason::ContentFilter);
        assert_eq!(incomplete("something_new"), FinishReason::Other);
        let e = finish(&map(r#"{"status":"failed","error":{"code":"server_error","message":"boom"}}"#), false, false).unwrap_err();
        assert!(matches!(&e, ProviderError::Stream { kind, .. } if kind == "server_error"), "{e}");
        assert!(e.may_succeed_if_repeated());
        let e = finish(&map(r#"{"status":"queued"}"#), false, false).unwrap_err();
        assert!(matches!(e, ProviderError::Malformed { .. }), "{e}");
    }

    #[test]
    fn reasoning_items_become_reasoning_parts_never_text() {
        let body = br#"{"status":"completed","output":[
            {"id":"rs_1","type":"reasoning","encrypted_content":"gAAA","summary":[{"type":"summary_text","text":"Think."}]},
            {"type":"message","role":"assistant","content":[{"type":"output_text","text":"Done."}]}],
            "usage":{"input_tokens":9,"output_tokens":7,"output_tokens_details":{"reasoning_tokens":5}}}"#;
        let response = parse(body).unwrap();
        let message = response.message.unwrap();
        assert_eq!(message.text(), "Done.");
        let expected = Reasoning { summary: vec!["Think.".into()], encrypted: Some("gAAA".into()), id: Some("rs_1".into()), ..Reasoning::default() };
        assert_eq!(message.parts[0], Part::Reasoning(expected));
        assert_eq!(response.usage, Usage { reasoning_tokens: 5, ..Usage::new(9, 7) });
    }

    #[test]
    fn hostile_bodies_are_typed_errors() {
        for body in [
            "not json",
            "[]",
            r#"{"output":{}}"#,
            r#"{"output":[{"type":"function_call","name":"w","arguments":"{}"}]}"#,
            r#"{"output":[{"type":"message","content":[{"type":"output_text","text":7}]}]}"#,
            r#"{"output":[{"content":[]}]}"#,
            r#"{"output":[{"type":"function_call","call_id":"c","name":"not a valid name!","arguments":"{}"}]}"#,
        ] {
            let e = parse(body.as_bytes()).unwrap_err();
            assert!(matches!(e, ProviderError::Malformed { .. }), "{body}: {e}");
        }
    }
}
