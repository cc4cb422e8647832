//! Wire-text tests: chat values decoded from and compared against JSON text.

use super::*;
use crate::json::codec::DecodeErrorKind;
use crate::json::{parse, FromJson, Json, Number, ToJson};

fn json(text: &str) -> Json {
    parse(text.as_bytes()).unwrap()
}

fn decode_err<T: FromJson + std::fmt::Debug>(text: &str) -> crate::json::DecodeError {
    T::from_json_bytes(text.as_bytes()).unwrap_err()
}

const REQUEST: &str = r#"{
  "messages": [
    {"role": "system", "parts": [{"type": "text", "text": "be brief"}]},
    {"role": "user", "parts": [{"type": "text", "text": "weather in Paris?"}]},
    {"role": "assistant", "parts": [
      {"type": "text", "text": "checking"},
      {"type": "tool_call", "id": "call_1", "name": "weather", "arguments": "{\"city\":\"Paris\"}"}
    ]},
    {"role": "tool", "parts": [
      {"type": "tool_result", "id": "call_1", "name": "weather",
       "output": {"content": "18C", "details": {"celsius": 18.0}}, "is_error": false}
    ]}
  ],
  "options": {"model": "m-1", "temperature": 0.70, "max_output_tokens": 256, "stop": ["END"], "extra": {"seed": 1}},
  "tools": [{"name": "weather", "description": "Current weather.", "input_schema": {"type": "object"}}],
  "tool_choice": {"tool": "weather"}
}"#;

#[test]
fn request_from_text() {
    let r: Request = decode(REQUEST.as_bytes()).unwrap();
    assert_eq!(r.messages.len(), 4);
    assert_eq!(r.options.temperature, Some(Number("0.70".into())));
    assert_eq!(r.tool_choice, ToolChoice::Tool("weather".into()));
    assert_eq!(
        r.messages[3].results().next().unwrap().output.details,
        Some(json(r#"{"celsius":18.0}"#))
    );
    // Re-encoding gives the same value, and canonical text is a fixed point.
    assert_eq!(r.to_json(), json(REQUEST));
    let canonical = r.to_json().to_canonical_string();
    let again: Request = decode(canonical.as_bytes()).unwrap();
    assert_eq!(again, r);
    assert_eq!(again.to_json().to_canonical_string(), canonical);
}

#[test]
fn minimal_request_text() {
    let r: Request =
        decode(br#"{"messages":[{"role":"user","parts":[{"type":"text","text":"hi"}]}]}"#).unwrap();
    assert_eq!(r, Request::new(vec![Message::user("hi")]));
    assert_eq!(
        r.to_json(),
        json(r#"{"messages":[{"role":"user","parts":[{"type":"text","text":"hi"}]}]}"#)
    );
}

#[test]
fn request_rejections_from_text() {
    let cases: &[(&str, &str)] = &[
        (r#"{"messages":[]}"#, "$"),
        (
            r#"{"messages":[{"role":"user","parts":[]}]}"#,
            "$.messages[0]",
        ),
        (
            r#"{"messages":[{"role":"user","parts":[{"type":"text","text":"a"}]},{"role":"system","parts":[{"type":"text","text":"s"}]}]}"#,
            "$",
        ),
        (
            r#"{"messages":[{"role":"user","parts":[{"type":"text","text":"a"}]}],"stream":true}"#,
            "$",
        ),
        (
            r#"{"messages":[{"role":"user","parts":[{"type":"text","text":"a"}]}],"options":null}"#,
            "$.options",
        ),
        (
            r#"{"messages":[{"role":"user","parts":[{"type":"text","text":"a"}]}],"options":{"top_k":3}}"#,
            "$.options",
        ),
        (
            r#"{"messages":[{"role":"user","parts":[{"type":"text","text":"a"}]}],"options":{"temperature":"hot"}}"#,
            "$.options.temperature",
        ),
        (
            r#"{"messages":[{"role":"user","parts":[{"type":"text","text":"a","cache":true}]}]}"#,
            "$.messages[0].parts[0]",
        ),
        (
            r#"{"messages":[{"role":"user","parts":[{"type":"tool_call","id":"c","name":"t","arguments":""}]}]}"#,
            "$.messages[0]",
        ),
        (
            r#"{"messages":[{"role":"assistant","parts":[{"type":"tool_call","id":"c","name":"invalid/name","arguments":""}]}]}"#,
            "$.messages[0].parts[0]",
        ),
        (
            r#"{"messages":[{"role":"user","parts":[{"type":"text","text":"a"}]}],"tools":[{"name":"t","description":"d","input_schema":{"type":"object"}},{"name":"t","description":"e","input_schema":{"type":"object"}}]}"#,
            "$",
        ),
        (
            r#"{"messages":[{"role":"user","parts":[{"type":"text","text":"a"}]}],"tool_choice":{"tool":"missing"}}"#,
            "$",
        ),
        (
            r#"{"messages":[{"role":"user","parts":[{"type":"text","text":"a"}]}],"tool_choice":"required"}"#,
            "$",
        ),
        (
            r#"{"messages":[{"role":"user","parts":[{"type":"text","text":"a"}]}],"tools":[{"name":"t","description":"d","input_schema":{"type":"object"},"strict":true}]}"#,
            "$.tools[0]",
        ),
        (
            r#"{"messages":[{"role":"tool","parts":[{"type":"tool_result","id":"c","name":"t","output":{"content":"x","details":null},"is_error":false}]}]}"#,
            "$.messages[0].parts[0].output.details",
        ),
        (
            r#"{"messages":[{"role":"tool","parts":[{"type":"tool_result","id":"c","name":"t","output":{"content":"x","mime":"t"},"is_error":false}]}]}"#,
            "$.messages[0].parts[0].output",
        ),
    ];
    for (text, path) in cases {
        let e = decode_err::<Request>(text);
        assert_eq!(&e.path, path, "{text}: {e}");
    }
}

#[test]
fn malformed_text_is_a_decode_error() {
    let e = decode::<Request>(br#"{"messages":[],"messages":[]}"#).unwrap_err();
    assert!(
        matches!(e, ChatError::Decode(ref d) if matches!(d.kind, DecodeErrorKind::Json(_))),
        "{e}"
    );
    assert!(matches!(decode::<Request>(b"{"), Err(ChatError::Decode(_))));
    assert!(matches!(
        decode::<Message>(b"[]"),
        Err(ChatError::Decode(_))
    ));
}

#[test]
fn response_from_text() {
    let text = r#"{"message":{"role":"assistant","parts":[{"type":"tool_call","id":"c1","name":"t","arguments":"{"}]},
                  "finish_reason":"length","usage":{"input_tokens":10,"output_tokens":4096}}"#;
    let r: Response = decode(text.as_bytes()).unwrap();
    assert_eq!(r.tool_calls(), vec![&ToolCall::new("c1", "t", "{")]);
    assert_eq!(r.finish_reason, Some(FinishReason::Length));
    assert_eq!(r.to_json(), json(text));
    for bad in [
        r#"{"usage":{"input_tokens":1,"output_tokens":1},"finish_reason":null}"#,
        r#"{"usage":{"input_tokens":1}}"#,
        r#"{"usage":{"input_tokens":-1,"output_tokens":1}}"#,
        r#"{"usage":{"input_tokens":1,"output_tokens":1},"model":"m"}"#,
        r#"{"message":{"role":"user","parts":[{"type":"text","text":"a"}]},"usage":{"input_tokens":1,"output_tokens":1}}"#,
        r#"{"finish_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}"#,
    ] {
        assert!(decode::<Response>(bad.as_bytes()).is_err(), "{bad}");
    }
}

#[test]
fn deltas_from_text() {
    let stream = [
        r#"{"text":"Hel"}"#,
        r#"{"text":"lo","tool_calls":[{"index":0,"id":"c1","name":"t","arguments":"{\"a\""}]}"#,
        r#"{"tool_calls":[{"index":0,"arguments":":1}"}]}"#,
        r#"{"finish_reason":"tool_calls","usage":{"input_tokens":3,"output_tokens":9}}"#,
    ];
    let deltas: Vec<ResponseDelta> = stream
        .iter()
        .map(|t| decode(t.as_bytes()).unwrap())
        .collect();
    for (d, t) in deltas.iter().zip(stream) {
        assert_eq!(d.to_json(), json(t));
    }
    let r = Accumulator::accumulate(&deltas).unwrap();
    assert_eq!(
        r,
        Response::new(
            Message::assistant_with_calls("Hello", vec![ToolCall::new("c1", "t", r#"{"a":1}"#)]),
            FinishReason::ToolCalls,
            Usage::new(3, 9),
        )
    );
    for bad in [
        "{}",
        r#"{"text":null}"#,
        r#"{"tool_calls":[{"index":0}]}"#,
        r#"{"tool_calls":[{"index":0,"id":"c","type":"function"}]}"#,
        r#"{"tool_calls":[{"index":-1,"id":"c"}]}"#,
        r#"{"tool_calls":[{"index":4294967296,"id":"c"}]}"#,
        r#"{"usage":{"input_tokens":1,"output_tokens":1,"total":2}}"#,
        r#"{"text":"a","role":"assistant"}"#,
    ] {
        assert!(decode::<ResponseDelta>(bad.as_bytes()).is_err(), "{bad}");
    }
}

#[test]
fn split_deltas_survive_the_wire() {
    let r = Response::new(
        Message::assistant_with_calls(
            "héllo wörld 😀",
            vec![ToolCall::new("c1", "t", r#"{"q":"€"}"#)],
        ),
        FinishReason::ToolCalls,
        Usage::new(1, 2),
    );
    let decoded: Vec<ResponseDelta> = ResponseDelta::split(&r, 3)
        .iter()
        .map(|d| decode(d.to_json().to_canonical_string().as_bytes()).unwrap())
        .collect();
    assert_eq!(Accumulator::accumulate(&decoded), Ok(r));
}

#[test]
fn rejected_completion_context_is_a_valid_request() {
    // The context after a rejected completion:
    // [user, assistant(call), tool(result), assistant("premature"), user(feedback)].
    let r = Request::new(vec![
        Message::user("task"),
        Message::assistant_with_calls("", vec![ToolCall::new("c1", "t", "{}")]),
        Message::tool_results(vec![ToolResult::ok("c1", "t", ToolOutput::text("r"))]),
        Message::assistant("premature"),
        Message::user("feedback"),
    ]);
    assert_eq!(r.validate(), Ok(()));
    let text = r.to_json().to_canonical_string();
    assert_eq!(decode::<Request>(text.as_bytes()), Ok(r));
}
