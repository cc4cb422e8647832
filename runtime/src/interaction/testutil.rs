//! Test fixtures, generators and strict-decoding probes shared by the Interaction tests.

use super::wire::Wire;
use crate::chat::{
    FinishReason, Message, Options, Part, Request, Response, Role, ToolCall, ToolOutput, ToolResult, Usage,
};
use crate::json::{parse, Json, Number, Object, Payload};
use crate::kernel::ids::{ProcessId, SignalId, WaitId};
use crate::tool::ToolInputRequest;
use proptest::prelude::*;

pub fn json(text: &str) -> Json {
    parse(text.as_bytes()).unwrap()
}

pub fn payload(text: &str) -> Payload {
    Payload::from_bytes(text.as_bytes()).unwrap()
}

pub fn sid(text: &str) -> SignalId {
    SignalId::parse(text).unwrap()
}

pub fn pid(text: &str) -> ProcessId {
    ProcessId::parse(text).unwrap()
}

pub fn wid(text: &str) -> WaitId {
    WaitId::parse(text).unwrap()
}

pub fn call(id: &str, name: &str) -> ToolCall {
    ToolCall::new(id, name, r#"{"q":"x"}"#)
}

pub fn ok_result(id: &str, name: &str, content: &str) -> ToolResult {
    ToolResult::ok(id, name, ToolOutput::text(content))
}

pub fn tool_calls_response(calls: Vec<ToolCall>) -> Response {
    Response::new(Message::assistant_with_calls("working", calls), FinishReason::ToolCalls, Usage::new(10, 5))
}

pub fn final_response(text: &str) -> Response {
    Response::new(Message::assistant(text), FinishReason::Stop, Usage::new(3, 2))
}

pub fn context() -> Request {
    Request::new(vec![Message::system("be brief"), Message::user("weather in Paris?")])
}

/// A request with every option spelled (exact number text included).
pub fn rich_context() -> Request {
    let mut extra = Object::new();
    extra.insert("seed".into(), Json::u64(7));
    Request {
        messages: vec![
            Message::system("be brief"),
            Message::user("weather in Paris?"),
            Message::assistant_with_calls("", vec![call("call_1", "weather")]),
            Message::tool_results(vec![ok_result("call_1", "weather", "18C")]),
        ],
        options: Options {
            model: Some("m-1".into()),
            temperature: Some(Number::parse("0.70").unwrap()),
            top_p: None,
            max_output_tokens: Some(256),
            stop: vec!["END".into()],
            extra: Some(extra),
        },
        ..Request::default()
    }
}

pub fn input_request(schema: &str) -> ToolInputRequest {
    ToolInputRequest::new(br#"{"question":"approve?"}"#, schema.as_bytes(), br#"{"step":1,"n":1e400}"#).unwrap()
}

/// Member names whose values are opaque JSON (a probe must not insert members there).
const OPAQUE: [&str; 7] =
    ["prompt", "response_schema", "continuation_state", "details", "extra", "input_response", "input_schema"];

fn opaque(path: &[String]) -> bool {
    let Some(last) = path.last() else { return false };
    if OPAQUE.contains(&last.as_str()) {
        return true;
    }
    // An artifact's output is the delegate's value; a tool result's output is strict.
    last == "output" && path.len() >= 3 && path[path.len() - 3] == "artifact_records"
}

/// The paths of every strict object in `value` (the root included).
fn object_paths(value: &Json, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    if opaque(path) {
        return;
    }
    match value {
        Json::Object(o) => {
            out.push(path.clone());
            for (k, v) in o {
                path.push(k.clone());
                object_paths(v, path, out);
                path.pop();
            }
        }
        Json::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                path.push(format!("[{i}]"));
                object_paths(v, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

fn at_path<'a>(value: &'a mut Json, path: &[String]) -> &'a mut Json {
    let mut node = value;
    for step in path {
        node = match node {
            Json::Object(o) => o.get_mut(step).unwrap(),
            Json::Array(items) => {
                let i: usize = step.trim_start_matches('[').trim_end_matches(']').parse().unwrap();
                &mut items[i]
            }
            _ => unreachable!(),
        };
    }
    node
}

/// Inserts `zz_unknown` into every strict object of `value`'s encoding in turn and checks that
/// decoding rejects each, naming the unknown member. Returns how many objects were probed.
pub fn assert_rejects_unknown_members_everywhere<T: Wire + std::fmt::Debug>(value: &T) -> usize {
    let encoded = value.to_json();
    let mut paths = Vec::new();
    object_paths(&encoded, &mut Vec::new(), &mut paths);
    for path in &paths {
        let mut probe = encoded.clone();
        if let Json::Object(o) = at_path(&mut probe, path) {
            o.insert("zz_unknown".into(), Json::u64(1));
        }
        let e = T::from_json(&probe).expect_err(&format!("unknown member at {path:?} accepted for {value:?}"));
        assert!(e.to_string().contains("zz_unknown"), "rejection at {path:?} does not name the member: {e}");
    }
    paths.len()
}

/// Encode → decode → encode is a fixed point, in values and canonical bytes, through JSON and
/// through bytes.
pub fn assert_round_trip<T: Wire + PartialEq + std::fmt::Debug>(value: &T) {
    value.validate().unwrap_or_else(|e| panic!("{value:?} is invalid: {e}"));
    let canonical = value.to_canonical_string();
    let decoded = T::from_wire_bytes(canonical.as_bytes()).unwrap_or_else(|e| panic!("{canonical}: {e}"));
    assert_eq!(&decoded, value);
    assert_eq!(decoded.to_canonical_string(), canonical);
    let via_payload = T::from_payload(&value.to_payload().unwrap()).unwrap();
    assert_eq!(&via_payload, value);
}

/// Decoding `text` fails with an error of `T`'s family.
pub fn assert_rejected<T: Wire + std::fmt::Debug>(text: &str) -> super::InteractionError {
    match T::from_wire_bytes(text.as_bytes()) {
        Ok(v) => panic!("accepted {text}: {v:?}"),
        Err(e) => {
            assert_eq!(e.kind(), T::INVALID, "{e}");
            e
        }
    }
}

/// `value`'s encoding with `edit` applied, as canonical text.
pub fn edited<T: Wire>(value: &T, edit: impl FnOnce(&mut Json)) -> String {
    let mut j = value.to_json();
    edit(&mut j);
    j.to_canonical_string()
}

/// The object at `path` (member names) of `j`.
pub fn obj<'a>(j: &'a mut Json, path: &[&str]) -> &'a mut Object {
    let mut node = j;
    for key in path {
        node = match node {
            Json::Object(o) => o.get_mut(*key).unwrap(),
            _ => panic!("not an object at {key}"),
        };
    }
    match node {
        Json::Object(o) => o,
        _ => panic!("not an object"),
    }
}

// ---------------------------------------------------------------- generators

pub fn arb_json() -> impl Strategy<Value = Json> {
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        any::<u64>().prop_map(Json::u64),
        prop_oneof![Just("1e400"), Just("-0.50"), Just("9007199254740993")]
            .prop_map(|n| Json::Number(Number::parse(n).unwrap())),
        "[a-z é<\"\\\\]{0,6}".prop_map(Json::String),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Json::Array),
            prop::collection::btree_map("[a-z]{1,4}", inner, 0..3).prop_map(Json::Object),
        ]
    })
}

pub fn arb_text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 é😀.,!?]{1,12}"
}

pub fn arb_call_id() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9_:/ -]{1,12}"
}

pub fn arb_tool_name() -> impl Strategy<Value = String> {
    "[a-z_][a-z0-9_-]{0,10}"
}

pub fn arb_signal_id() -> impl Strategy<Value = SignalId> {
    "s[a-z0-9:._-]{0,10}".prop_map(|s| SignalId::parse(&s).unwrap())
}

pub fn arb_call() -> impl Strategy<Value = ToolCall> {
    (arb_call_id(), arb_tool_name(), "[{}a-z:\" 0-9]{0,10}").prop_map(|(id, name, args)| ToolCall::new(id, name, args))
}

/// Calls with distinct ids.
pub fn arb_calls(max: usize) -> impl Strategy<Value = Vec<ToolCall>> {
    prop::collection::vec(arb_call(), 1..=max).prop_map(|calls| {
        calls.into_iter().enumerate().map(|(i, c)| ToolCall { id: format!("{}{i}", c.id), ..c }).collect()
    })
}

pub fn arb_output() -> impl Strategy<Value = ToolOutput> {
    ("[a-z ]{0,8}", proptest::option::of(arb_json().prop_filter("details are never null", |j| !j.is_null())))
        .prop_map(|(content, details)| ToolOutput { content, details })
}

pub fn arb_result() -> impl Strategy<Value = ToolResult> {
    (arb_call_id(), arb_tool_name(), arb_output(), any::<bool>()).prop_map(|(id, name, output, is_error)| ToolResult {
        id,
        name,
        output,
        is_error,
    })
}

pub fn arb_user_message() -> impl Strategy<Value = Message> {
    prop::collection::vec(arb_text(), 1..3)
        .prop_map(|texts| Message::new(Role::User, texts.into_iter().map(Part::Text).collect()))
}

pub fn arb_assistant_message() -> impl Strategy<Value = Message> {
    (proptest::option::of(arb_text()), prop::collection::vec(arb_call(), 0..3)).prop_map(|(text, calls)| {
        let text = if calls.is_empty() { Some(text.unwrap_or_else(|| "ok".into())) } else { text };
        Message::assistant_with_calls(text.unwrap_or_default(), calls)
    })
}

pub fn arb_message() -> impl Strategy<Value = Message> {
    prop_oneof![
        arb_user_message(),
        arb_assistant_message(),
        prop::collection::vec(arb_result(), 1..3).prop_map(Message::tool_results),
    ]
}

pub fn arb_options() -> impl Strategy<Value = Options> {
    prop_oneof![
        Just(Options::default()),
        (proptest::option::of("[a-z0-9-]{1,8}"), proptest::option::of(1u32..4096), any::<bool>()).prop_map(
            |(model, max_output_tokens, temperature)| Options {
                model,
                max_output_tokens,
                temperature: temperature.then(|| Number::parse("0.70").unwrap()),
                ..Options::default()
            }
        ),
    ]
}

/// A valid request without tools.
pub fn arb_context() -> impl Strategy<Value = Request> {
    (proptest::option::of(arb_text()), prop::collection::vec(arb_message(), 1..4), arb_options()).prop_map(
        |(system, rest, options)| {
            let mut messages: Vec<Message> = system.into_iter().map(Message::system).collect();
            messages.extend(rest);
            Request { messages, options, ..Request::default() }
        },
    )
}

pub fn arb_response() -> impl Strategy<Value = Response> {
    (
        proptest::option::of(arb_assistant_message()),
        proptest::option::of(proptest::sample::select(FinishReason::ALL.to_vec())),
        any::<(u32, u32)>(),
    )
        .prop_map(|(message, finish_reason, (i, o))| Response {
            message,
            finish_reason,
            usage: Usage::new(u64::from(i), u64::from(o)),
        })
}

/// Unique valid tool names.
pub fn arb_names() -> impl Strategy<Value = Vec<String>> {
    prop::collection::btree_set(arb_tool_name(), 0..4).prop_map(|s| s.into_iter().collect())
}

pub fn arb_signal_ids() -> impl Strategy<Value = Vec<SignalId>> {
    prop::collection::btree_set(arb_signal_id(), 0..4).prop_map(|s| s.into_iter().collect())
}

/// A request with a schema and a response that satisfies it.
pub fn arb_request_and_answer() -> impl Strategy<Value = (ToolInputRequest, Json)> {
    prop_oneof![
        arb_json().prop_map(|answer| ("true", answer)),
        any::<bool>().prop_map(|b| (r#"{"type":"boolean"}"#, Json::Bool(b))),
        "[a-z]{0,5}".prop_map(|s| (r#"{"type":"string"}"#, Json::String(s))),
        Just((r#"{"type":"object","required":["ok"]}"#, json(r#"{"ok":1}"#))),
    ]
    .prop_flat_map(|(schema, answer)| {
        (arb_json(), arb_json()).prop_map(move |(prompt, state)| {
            (ToolInputRequest::from_values(prompt, json(schema), state).unwrap(), answer.clone())
        })
    })
}
