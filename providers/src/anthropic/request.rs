//! keel's [`Request`] as an Anthropic Messages request body.

use super::{PromptCache, PROVIDER};
use crate::error::ProviderError;
use crate::wire::{insert_sampling, merge_extra, to_value};
use keel::chat::{Message, Part, Reasoning, Request, Role, ToolCall, ToolChoice};
use serde_json::{json, Map, Value};

/// The request body. `model` and `max_tokens` apply when the request's options name none
/// (the API requires `max_tokens`); `cache` says where prompt-cache breakpoints go;
/// `thinking` enables extended thinking with that token budget.
pub(crate) fn body(
    request: &Request,
    model: &str,
    max_tokens: u32,
    stream: bool,
    cache: PromptCache,
    thinking: Option<u32>,
) -> Result<Value, ProviderError> {
    let options = &request.options;
    let mut body = Map::new();
    body.insert("model".into(), Value::String(options.model.clone().unwrap_or_else(|| model.to_owned())));
    body.insert("max_tokens".into(), json!(options.max_output_tokens.unwrap_or(max_tokens)));
    // System messages form keel's prefix; the API takes them as the top-level `system`.
    let system: Vec<String> = request.messages.iter().filter(|m| m.role == Role::System).map(Message::text).collect();
    if !system.is_empty() {
        let text = system.join("\n\n");
        // A breakpoint needs the block form; without one the plain string keeps its bytes.
        let system = if cache.system {
            json!([{"type": "text", "text": text, "cache_control": ephemeral()}])
        } else {
            Value::String(text)
        };
        body.insert("system".into(), system);
    }
    let mut messages = Vec::with_capacity(request.messages.len());
    for message in request.messages.iter().filter(|m| m.role != Role::System) {
        messages.push(message_value(message)?);
    }
    if cache.history {
        mark_history(&mut messages);
    }
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        let mut tools = Vec::with_capacity(request.tools.len());
        for tool in &request.tools {
            let schema = to_value(PROVIDER, &tool.input_schema, &format!("tool `{}` input schema", tool.name))?;
            tools.push(json!({"name": tool.name, "description": tool.description, "input_schema": schema}));
        }
        if cache.tools {
            // The last tool's breakpoint caches every tool definition (they lead the prefix).
            if let Some(Value::Object(last)) = tools.last_mut() {
                last.insert("cache_control".into(), ephemeral());
            }
        }
        body.insert("tools".into(), Value::Array(tools));
        let choice = match &request.tool_choice {
            ToolChoice::Auto => None,
            ToolChoice::None => Some(json!({"type": "none"})),
            ToolChoice::Required => Some(json!({"type": "any"})),
            ToolChoice::Tool(name) => Some(json!({"type": "tool", "name": name})),
        };
        if let Some(choice) = choice {
            body.insert("tool_choice".into(), choice);
        }
    }
    insert_sampling(PROVIDER, &mut body, options)?;
    if !options.stop.is_empty() {
        body.insert("stop_sequences".into(), json!(options.stop));
    }
    if stream {
        body.insert("stream".into(), Value::Bool(true));
    }
    if let Some(budget_tokens) = thinking {
        // Before `extra`, which may still override it.
        body.insert("thinking".into(), json!({"type": "enabled", "budget_tokens": budget_tokens}));
    }
    merge_extra(PROVIDER, &mut body, options.extra.as_ref())?;
    Ok(Value::Object(body))
}

/// The `cache_control` of a breakpoint (the default five-minute cache).
fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

/// Puts a breakpoint on the last block of the last message that can carry one (thinking
/// blocks cannot), so the whole conversation so far is written to the cache and the next
/// call, whose prefix it is, reads it: the API looks for an earlier cache entry up to 20
/// blocks before a breakpoint, so one breakpoint at the end follows an agent's growing
/// history.
fn mark_history(messages: &mut [Value]) {
    let Some(Value::Array(blocks)) = messages.last_mut().and_then(|m| m.get_mut("content")) else { return };
    let cacheable = blocks.iter_mut().rev().find(|b| {
        !matches!(b.get("type").and_then(Value::as_str), Some("thinking" | "redacted_thinking"))
    });
    if let Some(Value::Object(block)) = cacheable {
        block.insert("cache_control".into(), ephemeral());
    }
}

/// One non-system message as content blocks. Tool results travel in a `user` message.
fn message_value(message: &Message) -> Result<Value, ProviderError> {
    let role = match message.role {
        Role::Assistant => "assistant",
        Role::User | Role::Tool => "user",
        Role::System => return Err(ProviderError::request(PROVIDER, "a system message outside the prefix")),
    };
    let mut blocks = Vec::with_capacity(message.parts.len());
    for part in &message.parts {
        blocks.push(match part {
            Part::Reasoning(reasoning) => match thinking_block(reasoning) {
                Some(block) => block,
                None => continue,
            },
            Part::Text(text) => json!({"type": "text", "text": text}),
            Part::ToolCall(call) => json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input(call)?}),
            Part::ToolResult(result) => {
                let mut block = Map::new();
                block.insert("type".into(), json!("tool_result"));
                block.insert("tool_use_id".into(), json!(result.id));
                block.insert("content".into(), json!(result.output.content));
                if result.is_error {
                    block.insert("is_error".into(), Value::Bool(true));
                }
                Value::Object(block)
            }
        });
    }
    Ok(json!({"role": role, "content": blocks}))
}

/// A reasoning part as the block Anthropic verifies: `thinking` with its signature, or
/// `redacted_thinking` with its data, both verbatim. Reasoning without either (another
/// provider's, or an unsigned `reasoning_content`) cannot be verified and is not sent.
fn thinking_block(reasoning: &Reasoning) -> Option<Value> {
    if let Some(data) = &reasoning.redacted {
        return Some(json!({"type": "redacted_thinking", "data": data}));
    }
    let signature = reasoning.signature.as_ref()?;
    Some(json!({"type": "thinking", "thinking": reasoning.text, "signature": signature}))
}

/// A tool call's argument text as the object `input` the API requires. Empty text is `{}`.
/// Text that is not a JSON object can only come from a call cut off by the token limit; keel
/// never executed it and answers it with an error result asking the model to emit the call
/// again, so it is sent as `{}` (the API rejects anything but an object).
fn input(call: &ToolCall) -> Result<Value, ProviderError> {
    match serde_json::from_str::<Value>(&call.arguments) {
        Ok(value @ Value::Object(_)) => Ok(value),
        _ => Ok(Value::Object(Map::new())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel::chat::{Options, ToolDefinition, ToolOutput, ToolResult};

    fn request(choice: ToolChoice) -> Request {
        Request {
            messages: vec![
                Message::system("Be brief."),
                Message::system("Use metric units."),
                Message::user("Weather?"),
                Message::assistant_with_calls(
                    "Checking.",
                    vec![ToolCall::new("a", "w", r#"{"city":"Paris","n":1e400}"#), ToolCall::new("b", "w", "")],
                ),
                Message::tool_results(vec![
                    ToolResult::ok("a", "w", ToolOutput::text("sunny")),
                    ToolResult::error("b", "w", "error: offline"),
                ]),
            ],
            options: Options { stop: vec!["END".into()], ..Options::default() },
            tools: vec![ToolDefinition::new("w", "A tool.", keel::json::parse(br#"{"type":"object"}"#).unwrap())],
            tool_choice: choice,
        }
    }

    #[test]
    fn system_prefix_blocks_and_results() {
        let body = body(&request(ToolChoice::Auto), "claude", 512, false, PromptCache::OFF, None).unwrap();
        let expected = json!({
            "model": "claude",
            "max_tokens": 512,
            "system": "Be brief.\n\nUse metric units.",
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Weather?"}]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "a", "name": "w", "input": serde_json::from_str::<Value>(r#"{"city":"Paris","n":1e400}"#).unwrap()},
                    {"type": "tool_use", "id": "b", "name": "w", "input": {}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "a", "content": "sunny"},
                    {"type": "tool_result", "tool_use_id": "b", "content": "error: offline", "is_error": true}]},
            ],
            "tools": [{"name": "w", "description": "A tool.", "input_schema": {"type": "object"}}],
            "stop_sequences": ["END"],
        });
        assert_eq!(body, expected);
    }

    #[test]
    fn cache_breakpoints_on_system_tools_and_the_last_history_block() {
        let body = body(&request(ToolChoice::Auto), "claude", 512, false, PromptCache::AUTO, None).unwrap();
        assert_eq!(
            body["system"],
            json!([{"type": "text", "text": "Be brief.\n\nUse metric units.", "cache_control": {"type": "ephemeral"}}])
        );
        assert_eq!(body["tools"][0]["cache_control"], json!({"type": "ephemeral"}));
        let messages = body["messages"].as_array().unwrap();
        let last = messages.last().unwrap()["content"].as_array().unwrap();
        assert_eq!(last[1]["cache_control"], json!({"type": "ephemeral"}));
        assert!(last[0].get("cache_control").is_none());
        // Exactly three breakpoints: the API allows four.
        assert_eq!(body.to_string().matches("cache_control").count(), 3);
        // Chosen one by one.
        let only_tools = PromptCache { system: false, tools: true, history: false };
        let body = self::body(&request(ToolChoice::Auto), "claude", 512, false, only_tools, Some(1024)).unwrap();
        assert_eq!(body["system"], json!("Be brief.\n\nUse metric units."));
        assert_eq!(body.to_string().matches("cache_control").count(), 1);
        assert_eq!(body["thinking"], json!({"type": "enabled", "budget_tokens": 1024}));
    }

    #[test]
    fn reasoning_goes_back_as_thinking_blocks_first_and_never_as_cache_breakpoints() {
        let assistant = Message::new(
            Role::Assistant,
            vec![
                Part::Reasoning(Reasoning::signed("Plan: call w.", "sig-1")),
                Part::Reasoning(Reasoning::redacted("opaque==")),
                // Another provider's or unsigned reasoning cannot be verified: not sent.
                Part::Reasoning(Reasoning::text("unsigned")),
                Part::Reasoning(Reasoning { id: Some("rs_1".into()), encrypted: Some("gAAA".into()), ..Reasoning::default() }),
                Part::ToolCall(ToolCall::new("a", "w", "{}")),
            ],
        );
        let request = Request::new(vec![Message::user("Weather?"), assistant]);
        let body = body(&request, "claude", 512, false, PromptCache::AUTO, None).unwrap();
        assert_eq!(
            body["messages"][1]["content"],
            json!([
                {"type": "thinking", "thinking": "Plan: call w.", "signature": "sig-1"},
                {"type": "redacted_thinking", "data": "opaque=="},
                {"type": "tool_use", "id": "a", "name": "w", "input": {}, "cache_control": {"type": "ephemeral"}},
            ])
        );
        // A last message of thinking only gets no breakpoint.
        let thinking_only = Message::new(Role::Assistant, vec![Part::Reasoning(Reasoning::signed("t", "s"))]);
        let request = Request::new(vec![Message::user("Hi"), thinking_only]);
        let body = self::body(&request, "claude", 512, false, PromptCache::AUTO, None).unwrap();
        assert_eq!(body["messages"][1]["content"], json!([{"type": "thinking", "thinking": "t", "signature": "s"}]));
    }

    #[test]
    fn tool_choice_mapping() {
        let choice = |c| body(&request(c), "m", 1, true, PromptCache::OFF, None).unwrap().get("tool_choice").cloned();
        assert_eq!(choice(ToolChoice::Auto), None);
        assert_eq!(choice(ToolChoice::None), Some(json!({"type": "none"})));
        assert_eq!(choice(ToolChoice::Required), Some(json!({"type": "any"})));
        assert_eq!(choice(ToolChoice::Tool("w".into())), Some(json!({"type": "tool", "name": "w"})));
    }
}
