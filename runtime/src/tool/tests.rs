//! Binding, preparation, classification and calls through real (test-only) tools.

use super::*;
use crate::chat::{ToolCall, ToolOutput};
use crate::env::{BoxFuture, CancelToken};
use crate::json::Json;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

const ECHO_SCHEMA: &[u8] = br#"{
    "type": "object",
    "properties": {"text": {"type": "string"}, "key": {"type": "string"}},
    "additionalProperties": false
}"#;

/// Echoes `text`; declares itself shared, keyed by `key` when given; counts calls.
struct EchoTool {
    name: String,
    description: String,
    schema: Json,
    direct: bool,
    calls: AtomicUsize,
    classified: AtomicUsize,
}

impl EchoTool {
    fn new() -> EchoTool {
        EchoTool {
            name: "echo".into(),
            description: "Echoes its text.".into(),
            schema: crate::json::parse(ECHO_SCHEMA).unwrap(),
            direct: false,
            calls: AtomicUsize::new(0),
            classified: AtomicUsize::new(0),
        }
    }
}

impl Tool for EchoTool {
    fn spec(&self) -> ToolDefinitionInput {
        ToolDefinitionInput {
            name: self.name.clone(),
            description: self.description.clone(),
            input_schema: self.schema.clone(),
        }
    }

    fn call<'a>(
        &'a self,
        invocation: &'a Invocation,
        cx: ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            self.calls.fetch_add(1, Ordering::SeqCst);
            if cx.is_cancelled() {
                return Err(ToolError::Canceled);
            }
            let text = invocation
                .arguments_json()
                .get("text")
                .and_then(Json::as_str)
                .unwrap_or_default();
            if text == "advertise" {
                cx.advertise(&["later"])?;
            }
            if text == "ask" {
                return match cx.continuation() {
                    None => Err(require_tool_input(
                        br#""continue?""#,
                        br#"{"type":"boolean"}"#,
                        br#"{"asked":1}"#,
                    )),
                    Some(c) => Ok(ToolOutput {
                        content: format!("answer {}", c.response().canonical()),
                        details: None,
                    }),
                };
            }
            Ok(ToolOutput {
                content: text.to_owned(),
                details: None,
            })
        })
    }

    fn concurrency(&self, invocation: &Invocation) -> Option<Concurrency> {
        self.classified.fetch_add(1, Ordering::SeqCst);
        let key = invocation
            .arguments_json()
            .get("key")
            .and_then(Json::as_str)
            .unwrap_or_default();
        Some(Concurrency::keyed(key))
    }

    fn returns_direct_result(&self) -> bool {
        self.direct
    }
}

/// A tool using every default: no capabilities.
struct PlainTool;

impl Tool for PlainTool {
    fn spec(&self) -> ToolDefinitionInput {
        ToolDefinitionInput {
            name: "plain".into(),
            description: "Does nothing.".into(),
            input_schema: crate::json::parse(br#"{"type":"object"}"#).unwrap(),
        }
    }
    fn call<'a>(
        &'a self,
        _: &'a Invocation,
        _: ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async { Ok(ToolOutput::default()) })
    }
}

/// Panics in whichever method `panic_in` names.
struct PanickyTool {
    panic_in: &'static str,
}

impl Tool for PanickyTool {
    fn spec(&self) -> ToolDefinitionInput {
        if self.panic_in == "spec" {
            panic!("spec panicked");
        }
        PlainTool.spec()
    }
    fn call<'a>(
        &'a self,
        _: &'a Invocation,
        _: ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async { Ok(ToolOutput::default()) })
    }
    fn concurrency(&self, _: &Invocation) -> Option<Concurrency> {
        if self.panic_in == "concurrency" {
            panic!("classifier panicked");
        }
        Some(Concurrency::shared())
    }
    fn returns_direct_result(&self) -> bool {
        if self.panic_in == "returns_direct_result" {
            panic!("capability panicked");
        }
        true
    }
}

fn echo() -> (Arc<EchoTool>, BoundTool) {
    let tool = Arc::new(EchoTool::new());
    let bound = bind(tool.clone()).unwrap();
    (tool, bound)
}

fn call(name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: "call_1".into(),
        name: name.into(),
        arguments: arguments.into(),
    }
}

fn run(
    bound: &BoundTool,
    invocation: &Invocation,
    cx: ToolContext,
) -> Result<ToolOutput, ToolError> {
    futures::executor::block_on(bound.call(invocation, cx))
}

fn bind_err(tool: EchoTool) -> BindError {
    bind(Arc::new(tool)).unwrap_err()
}

// ---- bind ----

#[test]
fn bind_freezes_the_definition() {
    let (_, bound) = echo();
    assert_eq!(bound.name(), "echo");
    assert_eq!(bound.spec().description(), "Echoes its text.");
    assert_eq!(
        bound.spec().input_schema().source(),
        &crate::json::parse(ECHO_SCHEMA).unwrap()
    );
    assert!(!bound.returns_direct_result());
    let direct = bind(Arc::new(EchoTool {
        direct: true,
        ..EchoTool::new()
    }))
    .unwrap();
    assert!(direct.returns_direct_result());
    assert!(
        !bind(Arc::new(PlainTool)).unwrap().returns_direct_result(),
        "default: not direct"
    );
}

#[test]
fn bind_rejects_bad_names() {
    for name in ["", "invalid/name", "has space", &"n".repeat(65)] {
        let err = bind_err(EchoTool {
            name: name.into(),
            ..EchoTool::new()
        });
        assert!(
            matches!(err, BindError::InvalidSpec(SpecError::InvalidName { .. })),
            "{name}: {err:?}"
        );
    }
}

#[test]
fn bind_rejects_bad_descriptions() {
    let cases = [
        ("", SpecError::EmptyDescription),
        ("  ", SpecError::EmptyDescription),
        ("Echoes. ", SpecError::DescriptionWhitespace),
    ];
    for (description, expected) in cases {
        let err = bind_err(EchoTool {
            description: description.into(),
            ..EchoTool::new()
        });
        assert_eq!(err, BindError::InvalidSpec(expected));
    }
    let err = bind_err(EchoTool {
        description: "d".repeat(4097),
        ..EchoTool::new()
    });
    assert!(matches!(
        err,
        BindError::InvalidSpec(SpecError::DescriptionTooLong { .. })
    ));
}

#[test]
fn bind_rejects_non_object_schemas() {
    for schema in [
        &br#"{"type":"string"}"#[..],
        b"true",
        br#"{"properties":{}}"#,
    ] {
        let err = bind_err(EchoTool {
            schema: crate::json::parse(schema).unwrap(),
            ..EchoTool::new()
        });
        assert_eq!(err, BindError::InvalidSpec(SpecError::NotObjectSchema));
    }
}

#[test]
fn bind_rejects_uncompilable_schemas() {
    let schema =
        crate::json::parse(br#"{"type":"object","properties":{"a":{"minLength":-1}}}"#).unwrap();
    let err = bind_err(EchoTool {
        schema,
        ..EchoTool::new()
    });
    assert!(
        matches!(err, BindError::InvalidSpec(SpecError::InvalidSchema(_))),
        "{err:?}"
    );
}

#[test]
fn bind_catches_panics() {
    for method in ["spec", "returns_direct_result"] {
        assert_eq!(
            bind(Arc::new(PanickyTool { panic_in: method })).unwrap_err(),
            BindError::Panicked { method }
        );
    }
}

// ---- prepare ----

#[test]
fn blank_arguments_become_an_empty_object() {
    let (_, bound) = echo();
    for blank in ["", " ", "\n\t "] {
        let inv = bound.prepare(&call("echo", blank)).unwrap();
        assert_eq!(inv.arguments_json(), &Json::object());
        assert_eq!(inv.call().arguments, "{}");
        assert_eq!((inv.id(), inv.name()), ("call_1", "echo"));
    }
}

#[test]
fn arguments_are_normalized() {
    let (_, bound) = echo();
    let inv = bound
        .prepare(&call("echo", " { \"text\" : \"hi\" } "))
        .unwrap();
    assert_eq!(inv.call().arguments, inv.arguments().canonical());
    assert_eq!(inv.arguments_json().get("text"), Some(&Json::str("hi")));
}

#[test]
fn invalid_json_is_rejected() {
    let (_, bound) = echo();
    for bad in [
        "{",
        "{} {}",
        r#"{"text":"a","text":"b"}"#,
        r#"{"text":"\ud800"}"#,
        "nope",
    ] {
        match bound.prepare(&call("echo", bad)) {
            Err(PrepareError::InvalidJson { diagnostic }) => {
                assert!(diagnostic.starts_with("invalid JSON"), "{diagnostic}");
                assert!(diagnostic.len() <= crate::limits::MAX_DIAGNOSTIC_BYTES);
            }
            other => panic!("{bad}: {other:?}"),
        }
    }
    let huge = format!(
        r#"{{"text":"{}"}}"#,
        "a".repeat(crate::limits::MAX_PAYLOAD_BYTES)
    );
    assert!(matches!(
        bound.prepare(&call("echo", &huge)),
        Err(PrepareError::InvalidJson { .. })
    ));
}

#[test]
fn schema_violations_are_rejected() {
    let (_, bound) = echo();
    for bad in [r#"{"text":1}"#, r#"{"other":"x"}"#, "[]", "1", r#""text""#] {
        match bound.prepare(&call("echo", bad)) {
            Err(e @ PrepareError::SchemaViolation { .. }) => {
                assert!(e.diagnostic().len() <= crate::limits::MAX_DIAGNOSTIC_BYTES);
                let result = invalid_arguments_result(&e.diagnostic());
                assert!(result
                    .output
                    .content
                    .starts_with("error: invalid arguments: "));
                assert!(result.is_error);
            }
            other => panic!("{bad}: {other:?}"),
        }
    }
}

#[test]
fn name_must_match() {
    let (tool, bound) = echo();
    let err = bound.prepare(&call("Echo", "{}")).unwrap_err();
    assert_eq!(
        err,
        PrepareError::NameMismatch {
            expected: "echo".into(),
            found: "Echo".into()
        }
    );
    assert_eq!(
        tool.calls.load(Ordering::SeqCst) + tool.classified.load(Ordering::SeqCst),
        0
    );
}

// ---- classify ----

#[test]
fn classify_without_capability_is_exclusive() {
    let bound = bind(Arc::new(PlainTool)).unwrap();
    let inv = bound.prepare(&call("plain", "{}")).unwrap();
    assert_eq!(bound.classify(&inv), Ok(Concurrency::Exclusive));
}

#[test]
fn classify_reports_keys() {
    let (tool, bound) = echo();
    let keyed = bound.prepare(&call("echo", r#"{"key":"db"}"#)).unwrap();
    assert_eq!(
        bound.classify(&keyed),
        Ok(Concurrency::Shared {
            key: Some("db".into())
        })
    );
    let unkeyed = bound.prepare(&call("echo", r#"{"key":""}"#)).unwrap();
    assert_eq!(
        bound.classify(&unkeyed),
        Ok(Concurrency::Shared { key: None })
    );
    assert_eq!(tool.classified.load(Ordering::SeqCst), 2);
    assert_eq!(
        tool.calls.load(Ordering::SeqCst),
        0,
        "classifying never calls the tool"
    );
}

#[test]
fn classify_panic_is_a_planning_error() {
    let bound = bind(Arc::new(PanickyTool {
        panic_in: "concurrency",
    }))
    .unwrap();
    let inv = bound.prepare(&call("plain", "{}")).unwrap();
    assert_eq!(
        bound.classify(&inv),
        Err(ClassifyError::Panicked {
            tool: "plain".into()
        })
    );
}

// ---- call ----

#[test]
fn call_runs_the_tool() {
    let (tool, bound) = echo();
    let inv = bound.prepare(&call("echo", r#"{"text":"hello"}"#)).unwrap();
    let out = run(&bound, &inv, ToolContext::detached(CancelToken::new())).unwrap();
    assert_eq!(out.content, "hello");
    assert_eq!(tool.calls.load(Ordering::SeqCst), 1);
    let cancelled = CancelToken::new();
    cancelled.cancel();
    assert_eq!(
        run(&bound, &inv, ToolContext::detached(cancelled)),
        Err(ToolError::Canceled)
    );
}

#[test]
fn call_refuses_foreign_invocations() {
    let (tool, bound) = echo();
    let plain = bind(Arc::new(PlainTool)).unwrap();
    let foreign = plain.prepare(&call("plain", "{}")).unwrap();
    let err = run(&bound, &foreign, ToolContext::detached(CancelToken::new())).unwrap_err();
    assert!(matches!(err, ToolError::HostFailure { .. }));
    assert_eq!(tool.calls.load(Ordering::SeqCst), 0);
}

#[test]
fn advertisements_are_staged_through_the_context() {
    let (_, bound) = echo();
    let inv = bound
        .prepare(&call("echo", r#"{"text":"advertise"}"#))
        .unwrap();
    let deferred: BTreeSet<String> = ["later".to_string()].into_iter().collect();
    let advertiser = Advertiser::new(Arc::new(deferred));
    let cx = ToolContext::new(CancelToken::new(), advertiser.clone());
    run(&bound, &inv, cx).unwrap();
    assert_eq!(advertiser.staged(), ["later"]);
    // Without an active call, the tool's `?` turns the refusal into an ordinary error.
    let err = run(&bound, &inv, ToolContext::detached(CancelToken::new())).unwrap_err();
    let outcome = classify_outcome("echo", Err(err));
    let ToolOutcome::Result(r) = outcome else {
        panic!("{outcome:?}")
    };
    assert!(
        r.is_error && r.output.content.contains("tool advertisement unavailable"),
        "{r:?}"
    );
}

#[test]
fn input_round_trip_re_enters_from_the_start() {
    let (tool, bound) = echo();
    let inv = bound.prepare(&call("echo", r#"{"text":"ask"}"#)).unwrap();
    let first = run(&bound, &inv, ToolContext::detached(CancelToken::new()));
    let ToolOutcome::InputRequired(request) = classify_outcome("echo", first) else {
        panic!()
    };
    assert_eq!(request.prompt().canonical(), r#""continue?""#);
    assert!(
        request.resume_with(&Json::str("yes")).is_err(),
        "the answer must satisfy the schema"
    );
    let continuation = request.resume_with(&Json::Bool(true)).unwrap();
    assert_eq!(continuation.state().canonical(), r#"{"asked":1}"#);
    let cx = ToolContext::detached(CancelToken::new()).with_continuation(continuation);
    let out = run(&bound, &inv, cx).unwrap();
    assert_eq!(out.content, "answer true");
    assert_eq!(tool.calls.load(Ordering::SeqCst), 2);
}

#[test]
fn extensions_reach_the_tool() {
    #[derive(Debug, PartialEq)]
    struct Attribution {
        model_call_sequence: u32,
    }
    let cx = ToolContext::detached(CancelToken::new()).with_extension(Attribution {
        model_call_sequence: 3,
    });
    assert_eq!(
        cx.extension::<Attribution>(),
        Some(&Attribution {
            model_call_sequence: 3
        })
    );
    assert!(cx.extension::<u64>().is_none());
    assert!(cx.continuation().is_none());
}

#[test]
fn the_trait_is_object_safe_and_shareable() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<BoundTool>();
    assert_send_sync::<ToolContext>();
    assert_send_sync::<Invocation>();
    assert_send_sync::<ToolError>();
    let tools: Vec<Arc<dyn Tool>> = vec![Arc::new(PlainTool), Arc::new(EchoTool::new())];
    assert_eq!(
        tools
            .into_iter()
            .map(|t| bind(t).unwrap().name().to_owned())
            .collect::<Vec<_>>(),
        ["plain", "echo"]
    );
}
