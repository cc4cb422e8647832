//! keel's [`Request`] as an OpenAI Chat Completions request body.

use super::PROVIDER;
use crate::error::ProviderError;
use crate::wire::{insert_sampling, merge_extra, to_value};
use keel::chat::{Message, Part, Request, Role, ToolChoice};
use serde_json::{json, Map, Value};

/// The request body. `model` is used when the request names none; `legacy_max_tokens` sends
/// `max_tokens` instead of `max_completion_tokens` (for older compatible servers);
/// `send_reasoning` puts the reasoning text of an assistant message that called tools back as
/// its `reasoning_content` (see [`OpenAiConfig::send_reasoning`](super::OpenAiConfig::send_reasoning)).
pub(crate) fn body(
    request: &Request,
    model: &str,
    legacy_max_tokens: bool,
    send_reasoning: bool,
    stream: Option<bool>,
) -> Result<Value, ProviderError> {
    let mut messages = Vec::with_capacity(request.messages.len());
    for message in &request.messages {
        push_message(&mut messages, message, send_reasoning)?;
    }
    let options = &request.options;
    let mut body = Map::new();
    body.insert("model".into(), Value::String(options.model.clone().unwrap_or_else(|| model.to_owned())));
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        let mut tools = Vec::with_capacity(request.tools.len());
        for tool in &request.tools {
            let parameters = to_value(PROVIDER, &tool.input_schema, &format!("tool `{}` input schema", tool.name))?;
            tools.push(json!({
                "type": "function",
                "function": {"name": tool.name, "description": tool.description, "parameters": parameters},
            }));
        }
        body.insert("tools".into(), Value::Array(tools));
        // tool_choice is only accepted next to tools; `auto` is the default and is omitted.
        let choice = match &request.tool_choice {
            ToolChoice::Auto => None,
            ToolChoice::None => Some(json!("none")),
            ToolChoice::Required => Some(json!("required")),
            ToolChoice::Tool(name) => Some(json!({"type": "function", "function": {"name": name}})),
        };
        if let Some(choice) = choice {
            body.insert("tool_choice".into(), choice);
        }
    }
    insert_sampling(PROVIDER, &mut body, options)?;
    if let Some(max) = options.max_output_tokens {
        let key = if legacy_max_tokens { "max_tokens" } else { "max_completion_tokens" };
        body.insert(key.into(), json!(max));
    }
    if !options.stop.is_empty() {
        body.insert("stop".into(), json!(options.stop));
    }
    if let Some(include_usage) = stream {
        body.insert("stream".into(), Value::Bool(true));
        if include_usage {
            body.insert("stream_options".into(), json!({"include_usage": true}));
        }
    }
    merge_extra(PROVIDER, &mut body, options.extra.as_ref())?;
    one_choice(&body)?;
    Ok(Value::Object(body))
}

/// Asks for a final answer matching `schema` (`response_format` `json_schema`). A
/// `response_format` the request set through `options.extra` is kept: the caller chose it.
pub(crate) fn insert_response_format(body: &mut Value, schema: &keel::json::Json) -> Result<(), ProviderError> {
    let schema = to_value(PROVIDER, schema, "output schema")?;
    if let Value::Object(body) = body {
        body.entry("response_format").or_insert_with(|| {
            json!({"type": "json_schema", "json_schema": {"name": "output", "schema": schema, "strict": false}})
        });
    }
    Ok(())
}

/// Refuses `n` other than 1 (it can only come through `options.extra`), before anything is
/// sent: keel's response holds one answer, so further choices would be billed and thrown
/// away (complete mode) or interleaved with the first (a stream's choices arrive mixed,
/// told apart only by their `index`). Several answers are several calls.
fn one_choice(body: &Map<String, Value>) -> Result<(), ProviderError> {
    match body.get("n") {
        None | Some(Value::Null) => Ok(()),
        Some(n) if n.as_u64() == Some(1) => Ok(()),
        Some(n) => Err(ProviderError::request(
            PROVIDER,
            format!("options.extra.n is {n}: a keel response holds one answer, so n must be 1 (make one call per answer you need)"),
        )),
    }
}

/// Appends `message`; a keel tool message carrying several results becomes one `tool`
/// message per result, in order, as the API requires.
fn push_message(out: &mut Vec<Value>, message: &Message, send_reasoning: bool) -> Result<(), ProviderError> {
    match message.role {
        Role::System => out.push(json!({"role": "system", "content": message.text()})),
        Role::User => out.push(json!({"role": "user", "content": message.text()})),
        Role::Assistant => {
            let text = message.text();
            let mut m = Map::new();
            m.insert("role".into(), json!("assistant"));
            m.insert("content".into(), if text.is_empty() { Value::Null } else { Value::String(text) });
            let calls: Vec<Value> = message
                .tool_calls()
                .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
                .collect();
            if !calls.is_empty() {
                m.insert("tool_calls".into(), Value::Array(calls));
                // Only a turn that called tools: DeepSeek needs those turns' reasoning in every
                // later request and ignores the others'.
                if send_reasoning {
                    let reasoning: String = message
                        .parts
                        .iter()
                        .filter_map(|p| match p {
                            Part::Reasoning(r) if r.signature.is_none() && r.redacted.is_none() && r.encrypted.is_none() => Some(r.text.as_str()),
                            _ => None,
                        })
                        .collect();
                    if !reasoning.is_empty() {
                        m.insert("reasoning_content".into(), Value::String(reasoning));
                    }
                }
            }
            out.push(Value::Object(m));
        }
        Role::Tool => {
            for part in &message.parts {
                let Part::ToolResult(result) = part else {
                    return Err(ProviderError::request(PROVIDER, "a tool message holds a part that is not a tool result"));
                };
                out.push(json!({"role": "tool", "tool_call_id": result.id, "content": result.output.content}));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel::json::Json;
    use keel::chat::{Options, ToolCall, ToolDefinition, ToolOutput, ToolResult};
    use keel::json::{Number, Object};

    fn tool(name: &str) -> ToolDefinition {
        ToolDefinition::new(name, "A tool.", keel::json::parse(br#"{"type":"object"}"#).unwrap())
    }

    fn request(choice: ToolChoice) -> Request {
        let mut extra = Object::new();
        extra.insert("seed".into(), Json::Number(Number::parse("12345678901234567890").unwrap()));
        Request {
            messages: vec![
                Message::system("Be brief."),
                Message::user("Weather?"),
                Message::assistant_with_calls("", vec![ToolCall::new("a", "w", "{}"), ToolCall::new("b", "w", "{}")]),
                Message::tool_results(vec![
                    ToolResult::ok("a", "w", ToolOutput::text("sunny")),
                    ToolResult::error("b", "w", "error: offline"),
                ]),
            ],
            options: Options {
                model: Some("m".into()),
                temperature: Some(Number::parse("0.70").unwrap()),
                top_p: None,
                max_output_tokens: Some(64),
                stop: vec!["END".into()],
                extra: Some(extra),
            },
            tools: vec![tool("w")],
            tool_choice: choice,
        }
    }

    #[test]
    fn maps_every_member_and_splits_tool_results() {
        let body = body(&request(ToolChoice::Required), "default", false, false, Some(true)).unwrap();
        let expected = json!({
            "model": "m",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Weather?"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "a", "type": "function", "function": {"name": "w", "arguments": "{}"}},
                    {"id": "b", "type": "function", "function": {"name": "w", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "a", "content": "sunny"},
                {"role": "tool", "tool_call_id": "b", "content": "error: offline"},
            ],
            "tools": [{"type": "function", "function": {"name": "w", "description": "A tool.", "parameters": {"type": "object"}}}],
            "tool_choice": "required",
            "temperature": serde_json::from_str::<Value>("0.70").unwrap(),
            "max_completion_tokens": 64,
            "stop": ["END"],
            "stream": true,
            "stream_options": {"include_usage": true},
            "seed": serde_json::from_str::<Value>("12345678901234567890").unwrap(),
        });
        assert_eq!(body, expected);
        assert!(body.to_string().contains("\"temperature\":0.70"), "exact number text: {body}");
    }

    #[test]
    fn tool_choice_and_legacy_max_tokens() {
        let choice = |c| body(&request(c), "d", true, false, None).unwrap().get("tool_choice").cloned();
        assert_eq!(choice(ToolChoice::Auto), None);
        assert_eq!(choice(ToolChoice::None), Some(json!("none")));
        assert_eq!(choice(ToolChoice::Tool("w".into())), Some(json!({"type": "function", "function": {"name": "w"}})));
        let b = body(&request(ToolChoice::Auto), "d", true, false, None).unwrap();
        assert_eq!(b.get("max_tokens"), Some(&json!(64)));
        assert!(b.get("max_completion_tokens").is_none() && b.get("stream").is_none());
        let mut no_tools = request(ToolChoice::None);
        no_tools.tools.clear();
        let b = body(&no_tools, "d", false, false, None).unwrap();
        assert!(b.get("tools").is_none() && b.get("tool_choice").is_none(), "no tool_choice without tools");
    }

    #[test]
    fn reasoning_parts_are_never_sent() {
        let assistant = Message::new(
            Role::Assistant,
            vec![
                Part::Reasoning(keel::chat::Reasoning::text("2+2 is 4.")),
                Part::Reasoning(keel::chat::Reasoning::signed("t", "sig")),
                Part::text("4."),
            ],
        );
        let request = Request::new(vec![Message::user("2+2?"), assistant, Message::user("And 3+3?")]);
        let body = body(&request, "m", false, false, None).unwrap();
        assert_eq!(body["messages"][1], json!({"role": "assistant", "content": "4."}));
        assert!(!body.to_string().contains("2+2 is 4."));
    }

    #[test]
    fn reasoning_of_a_turn_that_called_tools_is_sent_back_only_when_asked() {
        let call = ToolCall::new("call_1", "weather", r#"{"city":"Paris"}"#);
        let with_call = Message::new(
            Role::Assistant,
            vec![Part::Reasoning(keel::chat::Reasoning::text("Look it ")), Part::Reasoning(keel::chat::Reasoning::text("up.")), Part::ToolCall(call)],
        );
        let answer = Message::new(Role::Assistant, vec![Part::Reasoning(keel::chat::Reasoning::text("Done.")), Part::text("18 C.")]);
        let result = Message::tool_results(vec![ToolResult::ok("call_1", "weather", ToolOutput::text("18 C"))]);
        let request = Request::new(vec![Message::user("Weather?"), with_call, result, answer, Message::user("And tomorrow?")]);
        let sent = body(&request, "m", false, true, None).unwrap();
        assert_eq!(sent["messages"][1]["reasoning_content"], json!("Look it up."));
        assert!(sent["messages"][3].get("reasoning_content").is_none(), "a turn without tool calls keeps its reasoning");
        let plain = body(&request, "m", false, false, None).unwrap();
        assert!(!plain.to_string().contains("reasoning_content"), "off by default");
    }

    #[test]
    fn several_choices_are_refused_before_sending() {
        for (n, refused) in [(Json::Number(Number::parse("1").unwrap()), false), (Json::Null, false),
            (Json::Number(Number::parse("2").unwrap()), true), (Json::Number(Number::parse("0").unwrap()), true),
            (Json::String("2".into()), true)]
        {
            let mut r = request(ToolChoice::Auto);
            r.options.extra.as_mut().unwrap().insert("n".into(), n.clone());
            match body(&r, "d", false, false, Some(true)) {
                Err(e) if refused => {
                    assert!(matches!(e, ProviderError::Request { .. }) && e.to_string().contains("n must be 1"), "{n:?}: {e}")
                }
                Ok(_) if !refused => {}
                other => panic!("n = {n:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn an_extra_member_may_not_override_a_typed_one() {
        let mut r = request(ToolChoice::Auto);
        r.options.extra.as_mut().unwrap().insert("stream".into(), Json::Bool(false));
        let e = body(&r, "d", false, false, Some(true)).unwrap_err();
        assert!(e.to_string().contains("options.extra.stream collides"), "{e}");
    }
}
