//! keel's [`Request`] as an Anthropic Messages request body.

use super::PROVIDER;
use crate::error::ProviderError;
use crate::wire::{insert_sampling, merge_extra, to_value};
use keel::chat::{Message, Part, Request, Role, ToolCall, ToolChoice};
use serde_json::{json, Map, Value};

/// The request body. `model` and `max_tokens` apply when the request's options name none
/// (the API requires `max_tokens`).
pub(crate) fn body(request: &Request, model: &str, max_tokens: u32, stream: bool) -> Result<Value, ProviderError> {
    let options = &request.options;
    let mut body = Map::new();
    body.insert("model".into(), Value::String(options.model.clone().unwrap_or_else(|| model.to_owned())));
    body.insert("max_tokens".into(), json!(options.max_output_tokens.unwrap_or(max_tokens)));
    // System messages form keel's prefix; the API takes them as the top-level `system`.
    let system: Vec<String> = request.messages.iter().filter(|m| m.role == Role::System).map(Message::text).collect();
    if !system.is_empty() {
        body.insert("system".into(), Value::String(system.join("\n\n")));
    }
    let mut messages = Vec::with_capacity(request.messages.len());
    for message in request.messages.iter().filter(|m| m.role != Role::System) {
        messages.push(message_value(message)?);
    }
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        let mut tools = Vec::with_capacity(request.tools.len());
        for tool in &request.tools {
            let schema = to_value(PROVIDER, &tool.input_schema, &format!("tool `{}` input schema", tool.name))?;
            tools.push(json!({"name": tool.name, "description": tool.description, "input_schema": schema}));
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
    merge_extra(PROVIDER, &mut body, options.extra.as_ref())?;
    Ok(Value::Object(body))
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
            Part::Text(text) => json!({"type": "text", "text": text}),
            Part::ToolCall(call) => json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input(call)?}),
            // Thinking blocks are sent back by the Anthropic thinking support; reasoning of
            // another provider cannot be verified here.
            Part::Reasoning(_) => continue,
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
        let body = body(&request(ToolChoice::Auto), "claude", 512, false).unwrap();
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
    fn tool_choice_mapping() {
        let choice = |c| body(&request(c), "m", 1, true).unwrap().get("tool_choice").cloned();
        assert_eq!(choice(ToolChoice::Auto), None);
        assert_eq!(choice(ToolChoice::None), Some(json!({"type": "none"})));
        assert_eq!(choice(ToolChoice::Required), Some(json!({"type": "any"})));
        assert_eq!(choice(ToolChoice::Tool("w".into())), Some(json!({"type": "tool", "name": "w"})));
    }
}
