//! A real run exported over OTLP/HTTP to a real trace store, Arize Phoenix (installed from
//! PyPI by `.ci/phoenix.sh`), then read back through Phoenix's own REST API: what a team
//! sees when it points keel at its collector.
//!
//! Needs `KEEL_PHOENIX_URL` (Phoenix's base URL, e.g. `http://127.0.0.1:6006`). Without it the
//! test says so and passes, except where `CI` or `KEEL_REQUIRE_PHOENIX` is set: there it
//! fails, so CI cannot skip it by accident.

use serde_json::Value;
use std::time::{Duration, Instant};
mod exported;

fn phoenix_url() -> Option<String> {
    let required =
        ["CI", "KEEL_REQUIRE_PHOENIX"].iter().any(|v| std::env::var(v).is_ok_and(|s| !s.is_empty() && s != "false" && s != "0"));
    match std::env::var("KEEL_PHOENIX_URL") {
        Ok(url) if !url.is_empty() => Some(url.trim_end_matches('/').to_owned()),
        _ if required => panic!("KEEL_PHOENIX_URL is not set; start Phoenix with `bash .ci/phoenix.sh start`"),
        _ => {
            eprintln!("skipped: KEEL_PHOENIX_URL is not set (`bash .ci/phoenix.sh start` starts Phoenix)");
            None
        }
    }
}

/// One span as Phoenix returns it in OTLP's JSON shape.
struct StoredSpan(Value);

impl StoredSpan {
    fn text(&self, key: &str) -> &str {
        self.0[key].as_str().unwrap_or_default()
    }

    fn attribute(&self, key: &str) -> Option<String> {
        let attributes = self.0["attributes"].as_array()?;
        let value = &attributes.iter().find(|kv| kv["key"] == key)?["value"];
        value["string_value"]
            .as_str()
            .map(str::to_owned)
            .or_else(|| value["int_value"].as_i64().map(|n| n.to_string()))
            .or_else(|| value["int_value"].as_str().map(str::to_owned))
    }
}

/// Every span Phoenix holds whose `gen_ai.conversation.id` is `conversation`, once `done`
/// holds for them (Phoenix writes what it receives asynchronously).
fn spans_of(url: &str, conversation: &str, done: impl Fn(&[StoredSpan]) -> bool) -> Vec<StoredSpan> {
    let client = reqwest::blocking::Client::new();
    let filter = format!("gen_ai.conversation.id:\"{conversation}\"");
    let mut query = reqwest::Url::parse(&format!("{url}/v1/projects/default/spans/otlpv1")).expect("a URL");
    query.query_pairs_mut().append_pair("limit", "1000").append_pair("attribute", &filter);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let response = client
            .get(query.clone())
            .send()
            .and_then(|r| r.error_for_status())
            .expect("Phoenix answers its span API");
        let body: Value = serde_json::from_str(&response.text().expect("a body")).expect("JSON");
        let spans: Vec<StoredSpan> = body["data"].as_array().expect("data").iter().cloned().map(StoredSpan).collect();
        if done(&spans) {
            return spans;
        }
        assert!(Instant::now() < deadline, "Phoenix holds only {} spans of {conversation} after 30 s", spans.len());
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn a_run_exported_over_otlp_is_stored_by_phoenix_as_one_trace_with_genai_attributes() {
    let Some(url) = phoenix_url() else { return };
    // Built outside any async runtime: the exporter's blocking client runs on its own thread.
    let provider = keel_otel::otlp_provider("keel-phoenix-test", Some(&format!("{url}/v1/traces"))).unwrap();
    let id = exported::run_weather_exported(provider);

    // One run span, two model calls and one tool call.
    let spans = spans_of(&url, &id, |spans| spans.len() >= 4);
    let names: Vec<&str> = spans.iter().map(|s| s.text("name")).collect();
    let runs: Vec<&StoredSpan> = spans.iter().filter(|s| s.text("name") == "invoke_agent weather").collect();
    assert_eq!(runs.len(), 1, "{names:?}");
    let run = runs[0];
    assert!(run.text("parent_span_id").is_empty(), "the run is the trace's root: {:?}", run.0);
    assert_eq!(run.attribute("gen_ai.operation.name").as_deref(), Some("invoke_agent"));
    assert_eq!(run.attribute("gen_ai.agent.name").as_deref(), Some("weather"));

    let chats: Vec<&StoredSpan> = spans.iter().filter(|s| s.text("name").starts_with("chat ")).collect();
    let tools: Vec<&StoredSpan> = spans.iter().filter(|s| s.text("name") == "execute_tool get_weather").collect();
    assert_eq!((chats.len(), tools.len()), (2, 1), "{names:?}");
    for child in chats.iter().chain(tools.iter()) {
        assert_eq!(child.text("trace_id"), run.text("trace_id"), "{}", child.text("name"));
        assert_eq!(child.text("parent_span_id"), run.text("span_id"), "{}", child.text("name"));
    }
    assert_eq!(tools[0].attribute("gen_ai.tool.name").as_deref(), Some("get_weather"));
    assert_eq!(tools[0].attribute("gen_ai.operation.name").as_deref(), Some("execute_tool"));
    for chat in &chats {
        assert_eq!(chat.attribute("gen_ai.operation.name").as_deref(), Some("chat"));
        assert_eq!(chat.attribute("gen_ai.request.model").as_deref(), Some("scripted"));
        assert!(chat.attribute("gen_ai.usage.input_tokens").is_some(), "{:?}", chat.0);
    }
}
