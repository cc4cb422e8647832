//! keel's [`Request`] as a Responses API request body.

use super::PROVIDER;
use crate::error::ProviderError;
use crate::wire::{insert_sampling, merge_extra, to_value};
use keel::chat::{Message, Part, Reasoning, Request, Role, ToolChoice};
use serde_json::{json, Map, Value};

/// The request body. `model` is used when the request names none, `reasoning` when its
/// `options.extra` sets no `reasoning`; `stream` asks for events. Always stateless:
/// `store: false`, with reasoning items returned encrypted so the next call can send them back.
pub(crate) fn body(request: &Request, model: &str, reasoning: Option<Value>, stream: bool) -> Result<Value, ProviderError> {
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
    if let Some(reasoning) = reasoning {
        // The request's own `reasoning` (through options.extra) wins over the client's.
        body.entry("reasoning").or_insert(reasoning);
    }
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
                    Part::Reasoning(reasoning) => {
                        // Only what the API can take back: an item it stored (an id) or
                        // encrypted content. Reasoning from another provider is dropped.
                        if reasoning.id.is_none() && reasoning.encrypted.is_none() {
                            continue;
                        }
                        flush(&mut text, out);
                        out.push(reasoning_item(reasoning));
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

/// A reasoning part as the `reasoning` input item it came from: its id, its summary texts, its
/// reasoning text (where the model exposed one) and its encrypted content, passed back
/// unchanged.
fn reasoning_item(reasoning: &Reasoning) -> Value {
    let mut item = Map::new();
    item.insert("type".into(), json!("reasoning"));
    if let Some(id) = &reasoning.id {
        item.insert("id".into(), json!(id));
    }
    let summary: Vec<Value> = reasoning.summary.iter().map(|text| json!({"type": "summary_text", "text": text})).collect();
    item.insert("summary".into(), Value::Array(summary));
    if !reasoning.text.is_empty() {
        item.insert("content".into(), json!([{"type": "reasoning_text", "text": reasoning.text}]));
    }
    if let Some(encrypted) = &reasoning.encrypted {
        item.insert("encrypted_content".into(), json!(encrypted));
    }
    Value::Object(item)
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel::chat::ToolCall;

    #[test]
    fn reasoning_goes_back_as_its_item_and_only_when_the_api_can_take_it() {
        let mine = Reasoning { summary: vec!["Think.".into()], encrypted: Some("gAAA".into()), id: Some("rs_1".into()), ..Reasoning::default() };
        let foreign = Reasoning::signed("Anthropic thinking", "sig");
        let request = Request::new(vec![
            Message::user("Hi"),
            Message::new(Role::Assistant, vec![Part::Reasoning(foreign), Part::Reasoning(mine), Part::ToolCall(ToolCall::new("c1", "w", "{}"))]),
        ]);
        let body = body(&request, "m", Some(json!({"effort": "low"})), false).unwrap();
        assert_eq!(
            body["input"],
            json!([
                {"role": "user", "content": "Hi"},
                {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Think."}], "encrypted_content": "gAAA"},
                {"type": "function_call", "call_id": "c1", "name": "w", "arguments": "{}"},
            ])
        );
        assert_eq!(body["store"], json!(false));
        assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
        assert_eq!(body["reasoning"], json!({"effort": "low"}));
    }

    #[test]
    fn stop_sequences_are_refused_before_sending() {
        let mut request = Request::new(vec![Message::user("Hi")]);
        request.options.stop = vec!["END".into()];
        assert!(matches!(body(&request, "m", None, true), Err(ProviderError::Request { .. })));
    }
}
