//! keel's spans as OpenTelemetry sees them: real runs (scripted model, a real tool, the real
//! runtime and store) traced through `tracing-opentelemetry` into the SDK's in-memory
//! exporter, then the span tree and its GenAI attributes checked.

use futures::StreamExt as _;
use keel::env::TokioEnv;
use keel::interaction::model::{ModelCallContext, ModelClient, ModelError};
use keel::kernel::commit::{Committer, MemoryCommitter};
use keel::prelude::*;
use opentelemetry::trace::{SpanKind, Status as OtelStatus};
use opentelemetry::Value;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tracing_subscriber::layer::SubscriberExt as _;

#[path = "../examples/support/mod.rs"]
mod support;
use support::weather;

fn weather_agent(content: bool) -> Agent {
    support::weather_agent(content).unwrap()
}

/// Spans recorded while `work` runs on this thread's current-thread runtime.
async fn traced<F: std::future::Future<Output = ()>>(work: F) -> Vec<SpanData> {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder().with_simple_exporter(exporter.clone()).build();
    let subscriber = tracing_subscriber::registry().with(keel_otel::layer(&provider));
    {
        let _default = tracing::subscriber::set_default(subscriber);
        work.await;
    }
    provider.force_flush().unwrap();
    exporter.get_finished_spans().unwrap()
}

fn attr<'a>(span: &'a SpanData, key: &str) -> Option<&'a Value> {
    span.attributes.iter().find(|kv| kv.key.as_str() == key).map(|kv| &kv.value)
}

fn text(span: &SpanData, key: &str) -> String {
    match attr(span, key) {
        Some(v) => v.as_str().into_owned(),
        None => panic!("span {} has no {key}: {:?}", span.name, span.attributes),
    }
}

fn int(span: &SpanData, key: &str) -> i64 {
    match attr(span, key) {
        Some(Value::I64(n)) => *n,
        other => panic!("span {} has no integer {key}: {other:?}", span.name),
    }
}

fn flag(span: &SpanData, key: &str) -> bool {
    match attr(span, key) {
        Some(Value::Bool(b)) => *b,
        other => panic!("span {} has no boolean {key}: {other:?}", span.name),
    }
}

fn named<'a>(spans: &'a [SpanData], name: &str) -> Vec<&'a SpanData> {
    spans.iter().filter(|s| s.name == name).collect()
}

async fn run_weather(content: bool) -> (String, Vec<SpanData>) {
    let mut id = String::new();
    let spans = traced(async {
        let runtime = Runtime::in_memory(weather_agent(content)).unwrap();
        let run = runtime.start("What is the weather in Paris?").await.unwrap();
        id = run.id().to_string();
        assert_eq!(run.result().await.unwrap().text(), "It is sunny in Paris.");
    })
    .await;
    (id, spans)
}

#[tokio::test]
async fn a_tool_round_is_one_agent_span_with_two_chat_spans_and_one_tool_span() {
    let (id, spans) = run_weather(false).await;

    let runs = named(&spans, "invoke_agent weather");
    assert_eq!(runs.len(), 1, "{:?}", spans.iter().map(|s| &s.name).collect::<Vec<_>>());
    let run = runs[0];
    assert_eq!(run.parent_span_id, opentelemetry::trace::SpanId::INVALID, "the run span is a root");
    assert_eq!(text(run, "gen_ai.operation.name"), "invoke_agent");
    assert_eq!(text(run, "gen_ai.agent.name"), "weather");
    assert_eq!(text(run, "gen_ai.conversation.id"), id);
    assert!(!flag(run, "keel.run.restored"));
    assert_eq!(text(run, "keel.run.status"), "completed");
    assert_eq!(run.status, OtelStatus::Unset);

    let chats = named(&spans, &format!("chat {}", text(run, "gen_ai.request.model")));
    assert_eq!(chats.len(), 2, "one span per model call");
    let mut input_total = 0;
    let mut output_total = 0;
    for chat in &chats {
        assert_eq!(chat.parent_span_id, run.span_context.span_id(), "a model call is a child of its run");
        assert_eq!(chat.span_context.trace_id(), run.span_context.trace_id());
        assert_eq!(chat.span_kind, SpanKind::Client);
        assert_eq!(text(chat, "gen_ai.operation.name"), "chat");
        assert_eq!(text(chat, "gen_ai.conversation.id"), id);
        assert_eq!(text(chat, "gen_ai.provider.name"), text(run, "gen_ai.provider.name"));
        assert_eq!(int(chat, "keel.model.attempt"), 1);
        assert!(!flag(chat, "keel.model.reissued"));
        input_total += int(chat, "gen_ai.usage.input_tokens");
        output_total += int(chat, "gen_ai.usage.output_tokens");
        assert!(attr(chat, "gen_ai.input.messages").is_none(), "no prompt text without opting in");
        assert!(attr(chat, "gen_ai.output.messages").is_none(), "no completion text without opting in");
    }
    let mut reasons: Vec<String> = chats.iter().map(|c| text(c, "gen_ai.response.finish_reasons")).collect();
    reasons.sort();
    assert_eq!(reasons, ["stop", "tool_calls"]);
    let mut calls: Vec<i64> = chats.iter().map(|c| int(c, "keel.model.call")).collect();
    calls.sort();
    assert_eq!(calls, [1, 2]);
    assert_eq!(int(run, "gen_ai.usage.input_tokens"), input_total, "the run's usage is its calls' sum");
    assert_eq!(int(run, "gen_ai.usage.output_tokens"), output_total);
    assert!(input_total > 0 && output_total > 0);

    let tools = named(&spans, "execute_tool get_weather");
    assert_eq!(tools.len(), 1);
    let tool = tools[0];
    assert_eq!(tool.parent_span_id, run.span_context.span_id());
    assert_eq!(text(tool, "gen_ai.operation.name"), "execute_tool");
    assert_eq!(text(tool, "gen_ai.tool.name"), "get_weather");
    assert!(!text(tool, "gen_ai.tool.call.id").is_empty());
    assert!(attr(tool, "gen_ai.tool.call.arguments").is_none());
    assert!(attr(tool, "gen_ai.tool.call.result").is_none());
    assert_eq!(tool.status, OtelStatus::Unset);

    // The tool ran between the two model calls.
    let first_chat = chats.iter().min_by_key(|c| int(c, "keel.model.call")).unwrap();
    let second_chat = chats.iter().max_by_key(|c| int(c, "keel.model.call")).unwrap();
    assert!(first_chat.end_time <= tool.start_time && tool.end_time <= second_chat.start_time);

    // Every acknowledged commit is an event on the run span.
    let commits = run.events.iter().filter(|e| e.name == "commit").count();
    assert!(commits >= 4, "start, model pending, model settled, tool, finish: {commits}");
}

#[tokio::test]
async fn prompt_completion_and_tool_text_are_recorded_only_when_the_agent_opts_in() {
    let (_, spans) = run_weather(true).await;
    let run = named(&spans, "invoke_agent weather")[0];
    let model = text(run, "gen_ai.request.model");
    let chats = named(&spans, &format!("chat {model}"));
    let first = chats.iter().find(|c| int(c, "keel.model.call") == 1).unwrap();
    let input: serde_json::Value = serde_json::from_str(&text(first, "gen_ai.input.messages")).unwrap();
    assert_eq!(input[0]["role"], "user");
    assert_eq!(input[0]["parts"][0]["type"], "text");
    assert_eq!(input[0]["parts"][0]["content"], "What is the weather in Paris?");
    let output: serde_json::Value = serde_json::from_str(&text(first, "gen_ai.output.messages")).unwrap();
    assert_eq!(output[0]["parts"][0]["type"], "tool_call");
    assert_eq!(output[0]["parts"][0]["name"], "get_weather");
    let second = chats.iter().find(|c| int(c, "keel.model.call") == 2).unwrap();
    assert!(text(second, "gen_ai.output.messages").contains("It is sunny in Paris."));
    assert!(text(second, "gen_ai.input.messages").contains("sunny, 21 °C in Paris"), "the tool result is in the next prompt");

    let tool = named(&spans, "execute_tool get_weather")[0];
    assert_eq!(text(tool, "gen_ai.tool.call.arguments"), r#"{"city":"Paris"}"#);
    assert_eq!(text(tool, "gen_ai.tool.call.result"), "sunny, 21 °C in Paris");
}

#[tokio::test]
async fn an_input_wait_is_a_span_under_its_tool_call() {
    let spans = traced(async {
        let agent = Agent::builder("concierge")
            .version("1")
            .model(ScriptedModel::new().call_tool("ask_user", r#"{"question":"Which city?"}"#).then_text("Booked."))
            .tool(AskHuman::new("ask_user", "Asks the user a question."))
            .build()
            .unwrap();
        let run = Runtime::in_memory(agent).unwrap().start("Book me a hotel.").await.unwrap();
        let mut events = run.events();
        while let Some(event) = events.next().await {
            if let RunEvent::InputRequested(request) = event {
                run.answer_text(&request, "Lyon").await.unwrap();
            }
        }
        assert_eq!(run.result().await.unwrap().text(), "Booked.");
    })
    .await;
    let tool = named(&spans, "execute_tool ask_user")[0];
    let waits = named(&spans, "keel.input_wait");
    assert_eq!(waits.len(), 1);
    assert_eq!(waits[0].parent_span_id, tool.span_context.span_id());
    assert!(!text(waits[0], "keel.wait.id").is_empty());
    assert!(waits[0].end_time <= tool.end_time);
}

/// A model that never answers while `hang` is set; tells `entered` when it is called.
struct HangingModel {
    hang: Arc<AtomicBool>,
    entered: Arc<tokio::sync::Notify>,
    inner: ScriptedModel,
}

impl ModelClient for HangingModel {
    fn call<'a>(&'a self, cx: &'a ModelCallContext, request: keel::chat::Request) -> keel::env::BoxFuture<'a, Result<keel::chat::Response, ModelError>> {
        Box::pin(async move {
            if self.hang.load(Ordering::SeqCst) {
                self.entered.notify_one();
                futures::future::pending::<()>().await;
            }
            self.inner.call(cx, request).await
        })
    }
}

/// Starts `task` under the agent `agent` builds around a `HangingModel` answering `answer`,
/// drops the writer once that model was called (its call in flight: a crash), resumes the run
/// under a new runtime whose model answers, and returns the run's id and final text.
async fn crash_while_calling(agent: impl Fn(HangingModel) -> Agent, answer: &str, task: &str) -> (String, String) {
    let hang = Arc::new(AtomicBool::new(true));
    let entered = Arc::new(tokio::sync::Notify::new());
    let model = || HangingModel { hang: hang.clone(), entered: entered.clone(), inner: ScriptedModel::new().then_text(answer) };
    let store: Arc<dyn Committer> = Arc::new(MemoryCommitter::new());
    let env = TokioEnv::current().unwrap().env();
    let first = Runtime::with_store(agent(model()), store.clone(), env.clone());
    let run = first.start(task).await.unwrap();
    entered.notified().await; // the call's pending boundary is durable: it was dispatched
    let id = run.id().to_string();
    drop((run, first)); // the writer is gone with the call in flight
    hang.store(false, Ordering::SeqCst);
    let second = Runtime::with_store(agent(model()), store, env);
    let run = second.resume(&id.parse().unwrap()).await.unwrap();
    let text = run.result().await.unwrap().text();
    (id, text)
}

#[tokio::test]
async fn a_restore_reissues_the_unknown_model_call_under_a_span_of_the_unknown() {
    let mut id = String::new();
    let spans = traced(async {
        let agent = |model: HangingModel| Agent::builder("m").version("1").model(model).build().unwrap();
        let (run, text) = crash_while_calling(agent, "Hello.", "Hi.").await;
        assert_eq!(text, "Hello.");
        id = run;
    })
    .await;

    let restored: Vec<_> = named(&spans, "invoke_agent m").into_iter().filter(|s| flag(s, "keel.run.restored")).collect();
    assert_eq!(restored.len(), 1, "the resumed run has its own span");
    let run = restored[0];
    assert_eq!(text(run, "gen_ai.conversation.id"), id);
    assert_eq!(text(run, "keel.run.status"), "completed");
    assert!(run.events.iter().any(|e| e.name == "run restored"));

    let unknowns = named(&spans, "keel.unknown");
    assert_eq!(unknowns.len(), 1);
    let unknown = unknowns[0];
    assert_eq!(unknown.parent_span_id, run.span_context.span_id());
    assert_eq!(text(unknown, "keel.unknown.kind"), "model");
    assert_eq!(text(unknown, "keel.unknown.policy"), "retry");
    assert_eq!(text(unknown, "keel.unknown.resolution"), "succeeded");
    assert!(unknown.events.iter().any(|e| e.name == "call outcome unknown"));

    let reissued: Vec<_> = spans.iter().filter(|s| s.name.starts_with("chat ") && flag(s, "keel.model.reissued")).collect();
    assert_eq!(reissued.len(), 1, "the call is re-issued once");
    let chat = reissued[0];
    assert_eq!(chat.parent_span_id, unknown.span_context.span_id(), "the re-issue settles the Unknown");
    assert_eq!(text(chat, "keel.effect.id"), text(unknown, "keel.effect.id"));
    assert_eq!(text(chat, "gen_ai.response.finish_reasons"), "stop");
}

#[tokio::test]
async fn a_failed_run_is_an_error_span_with_its_failure_code() {
    let spans = traced(async {
        let agent = Agent::builder("looping")
            .version("1")
            .model(ScriptedModel::new().call_tool("get_weather", r#"{"city":"Paris"}"#).call_tool("get_weather", r#"{"city":"Lyon"}"#))
            .tool(weather())
            .max_model_calls(1)
            .build()
            .unwrap();
        let run = Runtime::in_memory(agent).unwrap().start("Weather?").await.unwrap();
        assert!(run.result().await.is_err());
    })
    .await;
    let run = named(&spans, "invoke_agent looping")[0];
    assert_eq!(text(run, "keel.run.status"), "failed");
    assert!(matches!(run.status, OtelStatus::Error { .. }), "{:?}", run.status);
    assert!(text(run, "error.type").starts_with("interaction."), "{}", text(run, "error.type"));
}

/// The events of the weather run started under a fixed id (so every id in them is the same).
async fn weather_events() -> Vec<RunEvent> {
    let runtime = Runtime::in_memory(weather_agent(true)).unwrap();
    let run = runtime.start_with_id(&RunId::from_key("same run"), "What is the weather in Paris?").await.unwrap();
    run.events().collect().await
}

#[tokio::test]
async fn a_traced_run_makes_the_same_events_as_an_untraced_one() {
    let untraced = weather_events().await;
    let mut traced_events = Vec::new();
    let spans = traced(async { traced_events = weather_events().await }).await;
    assert!(spans.len() >= 4, "the traced run was traced");
    assert_eq!(traced_events, untraced, "tracing changes nothing a run does");
    assert!(matches!(untraced.last(), Some(RunEvent::Finished(_))));
}

/// A coordinator that hands the weather question to a `researcher` delegate (built by
/// `researcher`), then answers.
fn coordinator(researcher: Agent) -> Agent {
    let task = r#"{"messages":[{"role":"user","parts":[{"type":"text","text":"Weather in Paris?"}]}]}"#;
    Agent::builder("coordinator")
        .version("1")
        .model(ScriptedModel::new().call_tool("research", task).then_text("The researcher says: sunny."))
        .delegate("research", "Ask the researcher.", researcher)
        .trace_content(true)
        .build()
        .unwrap()
}

fn researcher(model: impl keel::interaction::model::ModelClient + 'static) -> Agent {
    Agent::builder("researcher").version("1").description("Finds facts.").model(model).tool(weather()).build().unwrap()
}

fn parent_of<'a>(spans: &'a [SpanData], child: &SpanData) -> Option<&'a SpanData> {
    spans.iter().find(|s| s.span_context.span_id() == child.parent_span_id)
}

#[tokio::test]
async fn a_delegate_run_is_an_agent_span_under_the_parent_s_call_of_it() {
    let spans = traced(async {
        let model = ScriptedModel::new().call_tool("get_weather", r#"{"city":"Paris"}"#).then_text("Sunny in Paris.");
        let run = Runtime::in_memory(coordinator(researcher(model))).unwrap().start("Weather?").await.unwrap();
        assert_eq!(run.result().await.unwrap().text(), "The researcher says: sunny.");
    })
    .await;
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_ref()).collect();
    let run = named(&spans, "invoke_agent coordinator")[0];
    assert_eq!(run.parent_span_id, opentelemetry::trace::SpanId::INVALID, "{names:?}");
    let trace = run.span_context.trace_id();
    assert!(spans.iter().all(|s| s.span_context.trace_id() == trace), "one trace for the whole tree: {names:?}");

    // The parent's call of the delegate, and the delegate's run under it.
    let calls = named(&spans, "execute_tool research");
    assert_eq!(calls.len(), 1, "{names:?}");
    let call = calls[0];
    assert_eq!(call.parent_span_id, run.span_context.span_id());
    assert_eq!(text(call, "gen_ai.operation.name"), "execute_tool");
    assert_eq!(text(call, "keel.delegate.agent"), "researcher");
    assert!(!text(call, "gen_ai.tool.call.id").is_empty());
    assert!(text(call, "gen_ai.tool.call.arguments").contains("Weather in Paris?"));
    assert_eq!(text(call, "gen_ai.tool.call.result"), "Sunny in Paris.");
    let delegates = named(&spans, "invoke_agent researcher");
    assert_eq!(delegates.len(), 1, "{names:?}");
    let delegate = delegates[0];
    assert_eq!(delegate.parent_span_id, call.span_context.span_id(), "the delegate's run is a child of the call of it");
    assert_eq!(text(delegate, "gen_ai.operation.name"), "invoke_agent");
    assert_eq!(text(delegate, "gen_ai.agent.name"), "researcher");
    assert_eq!(text(delegate, "gen_ai.request.model"), text(run, "gen_ai.request.model"));
    assert_eq!(text(delegate, "keel.run.status"), "completed");
    assert!(int(delegate, "gen_ai.usage.input_tokens") > 0);
    assert!(call.start_time <= delegate.start_time && delegate.end_time <= call.end_time);

    // The delegate's model calls and tool call are children of its run; the parent's of its.
    let delegate_process = text(delegate, "keel.process.id");
    let chats: Vec<&SpanData> = spans.iter().filter(|s| s.name.starts_with("chat ")).collect();
    assert_eq!(chats.len(), 4, "two calls each: {names:?}");
    for chat in &chats {
        let expected = if text(chat, "keel.process.id") == delegate_process { delegate } else { run };
        assert_eq!(chat.parent_span_id, expected.span_context.span_id(), "chat of {}", text(chat, "keel.process.id"));
    }
    assert_eq!(chats.iter().filter(|c| text(c, "keel.process.id") == delegate_process).count(), 2);
    let tool = named(&spans, "execute_tool get_weather")[0];
    assert_eq!(tool.parent_span_id, delegate.span_context.span_id());
    assert_eq!(parent_of(&spans, delegate).map(|s| s.name.as_ref()), Some("execute_tool research"));
}

#[tokio::test]
async fn a_delegate_in_flight_at_a_crash_is_traced_again_under_the_restored_run() {
    let spans = traced(async {
        // The delegate's model hangs: the crash comes with the delegate's call in flight.
        let agent = |model: HangingModel| coordinator(researcher(model));
        let (_, text) = crash_while_calling(agent, "Sunny in Paris.", "Weather?").await;
        assert_eq!(text, "The researcher says: sunny.");
    })
    .await;
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_ref()).collect();
    // The crashed writer's spans stay open (its model call never returned, and a span ends
    // after its children): only the restored run's are exported.
    let restored: Vec<_> = named(&spans, "invoke_agent coordinator").into_iter().filter(|s| flag(s, "keel.run.restored")).collect();
    assert_eq!(restored.len(), 1, "{names:?}");
    let restored = restored[0];
    let calls = named(&spans, "execute_tool research");
    assert_eq!(calls.len(), 1, "{names:?}");
    let call = calls[0];
    assert_eq!(call.parent_span_id, restored.span_context.span_id(), "the delegate in flight is traced again under the restored run");
    let after = named(&spans, "invoke_agent researcher")[0];
    assert_eq!(after.parent_span_id, call.span_context.span_id());
    assert_eq!(text(after, "keel.run.status"), "completed");

    // The Unknown the crash left and the re-issue settling it are under the delegate span of
    // the restored run (the crashed writer's attempt never returned: its span never ends).
    let reissued: Vec<&SpanData> = spans.iter().filter(|s| s.name.starts_with("chat ") && flag(s, "keel.model.reissued")).collect();
    assert_eq!(reissued.len(), 1, "{names:?}");
    let reissued = reissued[0];
    assert_eq!(text(reissued, "keel.process.id"), text(after, "keel.process.id"));
    let unknown = named(&spans, "keel.unknown")[0];
    assert_eq!(unknown.parent_span_id, after.span_context.span_id(), "the delegate's Unknown is under its span");
    assert_eq!(reissued.parent_span_id, unknown.span_context.span_id());
}
