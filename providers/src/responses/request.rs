//! keel's [`Request`] as a Responses API request body.

use super::PROVIDER;
use crate::error::ProviderError;
use crate::wire::{insert_sampling, merge_extra, to_value};
use keel::chat::{Message, Part, Request, Role, ToolChoice};
use serde_json::{json, Map, Value};

/// The request body. `model` is used when the request names none; `stream` asks for events.
/// Always stateless: `store: false`, with reasoning items returned encrypted so the next call
/// can send them back.
pub(crate) fn body(request: &Request, model: &str, stream: bool) -> Result<Value, ProviderError> {
    let mut input = Vec::with_capacity(request.messages.len());
    for message in &request.messages {
        push_items(&mut input, message)?;
    }
    let options = &request.options;
    if !options.stop.is_empty() {
        return Err(ProviderError::request(
            PROVIDER,
            "options.stop: the Responses API has no stop sequences; leave it empty or use the Chat Completions client",
        ));
    }
    let mut body = Map::new();
    body.insert("model".into(), Value::String(options.model.clone().unwrap_or_else(|| model.to_owned())));
    body.insert("input".into(), Value::Array(input));
    if !request.tools.is_empty() {
        let mut tools = Vec::with_capacity(request.tools.len());
        for tool in &request.tools {
            let parameters = to_value(PROVIDER, &tool.input_schema, &format!("tool `{}` input schema", tool.name))?;
            // Not strict: strict mode demands schemas keel's tools need not follow (every
            // property required, no additional properties), and would reject them.
            tools.push(json!({
                "type": "function",
                "name": tool.name,
                "description": tool.description,
                "parameters": parameters,
                "strict": false,
            }));
        }
        body.insert("tools".into(), Value::Array(tools));
        let choice = match &request.tool_choice {
            ToolChoice::Auto => None,
            ToolChoice::None => Some(json!("none")),
            ToolChoice::Required => Some(json!("required")),
            ToolChoice::Tool(name) => Some(json!({"type": "function", "name": name})),
        };
        if let Some(choice) = choice {
            body.insert("tool_choice".into(), choice);
        }
    }
    insert_sampling(PROVIDER, &mut body, options)?;
    if let Some(max) = options.max_output_tokens {
        body.insert("max_output_tokens".into(), json!(max));
    }
    body.insert("store".into(), Value::Bool(false));
    body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    if stream {
        body.insert("stream".into(), Value::Bool(true));
    }
    merge_extra(PROVIDER, &mut body, options.extra.as_ref())?;
    Ok(Value::Object(body))
}

/// Appends the input items of `message`: one message item for system and user text, an
/// assistant message's parts as items in their order (consecutive text joined into one
/// message item), and one `function_call_output` per tool result.
fn push_items(out: &mut Vec<Value>, message: &Message) -> Result<(), ProviderError> {
    match message.role {
        Role::System => out.push(json!({"role": "system", "content": message.text()})),
        Role::User => out.push(json!({"role": "user", "content": message.text()})),
        Role::Assistant => {
            let mut text = String::new();
            let flush = |text: &mut String, out: &mut Vec<Value>| {
                if !text.is_empty() {
                    out.push(json!({"role": "assistant", "content": std::mem::take(text)}));
                }
            };
            for part in &message.parts {
                match part {
                    Part::Text(t) => text.push_str(t),
                    Part::ToolCall(call) => {
                        flush(&mut text, out);
                        out.push(json!({
                            "type": "function_call",
                            "call_id": call.id,
                            "name": call.name,
                            "arguments": call.arguments,
                        }));
                    }
                    Part::ToolResult(_) => {
                        return Err(ProviderError::request(PROVIDER, "an assistant message holds a tool result"));
                    }
                }
            }
            flush(&mut text, out);
        }
        Role::Tool => {
            for part in &message.parts {
                let Part::ToolResult(result) = part else {
                    return Err(ProviderError::request(PROVIDER, "a tool message holds a part that is not a tool result"));
                };
                out.push(json!({"type": "function_call_output", "call_id": result.id, "output": result.output.content}));
            }
        }
    }
    Ok(())
}
