//! A real run exported over OTLP/HTTP (protobuf, through `opentelemetry-otlp` and reqwest) to
//! a receiver on 127.0.0.1 that decodes every export with `opentelemetry-proto`.
//!
//! No OpenTelemetry Collector is installable from the registries CI has (Debian ships only the
//! Go SDK's sources, PyPI and npm no collector), so this receiver is `keel_otel::testing`'s,
//! which sees every exported byte; `tests/phoenix.rs` exports to a real trace store.

use keel_otel::testing::{OtlpReceiver, ReceivedSpan};
use std::time::Duration;
mod exported;

fn named<'a>(spans: &'a [ReceivedSpan], name: &str) -> Vec<&'a ReceivedSpan> {
    spans.iter().filter(|s| s.span.name == name).collect()
}

#[test]
fn a_run_with_a_tool_call_arrives_at_an_otlp_receiver_as_one_trace() {
    let receiver = OtlpReceiver::start().unwrap();
    // Built outside any async runtime: the exporter's blocking client runs on its own thread.
    let provider = keel_otel::otlp_provider("keel-otlp-test", Some(&receiver.endpoint())).unwrap();
    let id = exported::run_weather_exported(provider);

    let spans = receiver.wait_for(Duration::from_secs(10), |s| !named(s, "invoke_agent weather").is_empty());
    assert!(receiver.refused().is_empty(), "{:?}", receiver.refused());
    let run = named(&spans, "invoke_agent weather");
    assert_eq!(run.len(), 1, "{:?}", spans.iter().map(|s| &s.span.name).collect::<Vec<_>>());
    let run = run[0];
    assert_eq!(run.service, "keel-otlp-test");
    assert!(run.span.parent_span_id.is_empty(), "the run is the trace's root");
    assert_eq!(run.attribute("gen_ai.operation.name").as_deref(), Some("invoke_agent"));
    assert_eq!(run.attribute("gen_ai.conversation.id"), Some(id.clone()));

    let chats: Vec<_> = spans.iter().filter(|s| s.span.name.starts_with("chat ")).collect();
    assert_eq!(chats.len(), 2);
    let tools = named(&spans, "execute_tool get_weather");
    assert_eq!(tools.len(), 1);
    for child in chats.iter().chain(tools.iter()) {
        assert_eq!(child.span.trace_id, run.span.trace_id, "{}", child.span.name);
        assert_eq!(child.span.parent_span_id, run.span.span_id, "{}", child.span.name);
        assert_eq!(child.attribute("gen_ai.conversation.id"), Some(id.clone()));
    }
    assert_eq!(tools[0].attribute("gen_ai.tool.name").as_deref(), Some("get_weather"));
    assert!(chats.iter().all(|c| c.attribute("gen_ai.usage.input_tokens").is_some()));
}

#[test]
fn an_endpoint_that_is_not_a_url_is_refused_with_what_to_check() {
    let error = keel_otel::otlp_provider("svc", Some("not a url")).err().expect("refused");
    let text = error.to_string();
    assert!(text.contains("OTEL_EXPORTER_OTLP_ENDPOINT"), "{text}");
}
