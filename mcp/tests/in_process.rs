//! The outcome rules over the in-process server (the simulator's transport): every fault a
//! real server meets, injected deterministically, through a real keel agent and run.

mod support;

use keel::kernel::commit::{Committer, MemoryCommitter};
use keel::prelude::*;
use keel_mcp::in_process::{Fault, InProcessServer};
use keel_mcp::{Elicitation, ElicitationAnswer, ElicitationQuestion, McpError, McpServer, McpTools, NotSentRetry};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use support::runs::{agent, settled};

fn echo_tool(schema_extra: Value) -> Value {
    let mut schema = json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]});
    if let (Some(s), Some(extra)) = (schema.as_object_mut(), schema_extra.as_object()) {
        for (k, v) in extra {
            s.insert(k.clone(), v.clone());
        }
    }
    json!({"name": "echo", "description": "Echoes the message.", "inputSchema": schema, "annotations": {"idempotentHint": true}})
}

fn new_server() -> InProcessServer {
    let tools = vec![
        echo_tool(json!({})),
        json!({"name": "fail", "description": "Always reports an error.", "inputSchema": {"type": "object"}}),
        json!({"name": "a", "description": "A.", "inputSchema": {"type": "object"}}),
        json!({"name": "b", "description": "B.", "inputSchema": {"type": "object"}}),
        json!({"name": "c", "description": "C.", "inputSchema": {"type": "object"}}),
    ];
    InProcessServer::new(tools, |name, args| match name {
        "echo" => json!({"content": [{"type": "text", "text": format!("Echo: {}", args.get("message").and_then(Value::as_str).unwrap_or(""))}]}),
        "fail" => json!({"content": [{"type": "text", "text": "the disk is full"}], "isError": true}),
        other => json!({"content": [{"type": "text", "text": other}]}),
    })
}

async fn connect(server: &InProcessServer) -> Result<McpTools, McpError> {
    let clock = Arc::new(keel::env::TokioEnv::current().expect("a tokio runtime"));
    McpServer::http("in-process")
        .name("mem")
        .retry_not_sent(NotSentRetry { attempts: 3, initial_backoff: Duration::from_millis(1) })
        .connect_with(Arc::new(server.clone()), clock)
        .await
}

fn echo_then_done() -> ScriptedModel {
    ScriptedModel::new().call_tool("echo", r#"{"message":"hi"}"#).then_text("done")
}

#[tokio::test]
async fn every_page_is_listed_and_a_subset_can_be_chosen() {
    let server = new_server().page_size(2);
    let tools = connect(&server).await.unwrap();
    assert_eq!(tools.names(), ["echo", "fail", "a", "b", "c"]);
    let chosen = tools.clone().select(["b", "echo"]).unwrap();
    assert_eq!(chosen.names(), ["echo", "b"]);
    match tools.select(["nope"]) {
        Err(McpError::NoSuchTool { tool, listed, .. }) => assert_eq!((tool.as_str(), listed.as_str()), ("nope", "echo, fail, a, b, c")),
        other => panic!("expected NoSuchTool, got {other:?}"),
    }
}

#[tokio::test]
async fn a_result_reaches_the_model_and_is_error_is_a_tool_error() {
    let server = new_server();
    let tools = connect(&server).await.unwrap().select(["echo", "fail"]).unwrap();
    let model = ScriptedModel::new().call_tool("echo", r#"{"message":"hi"}"#).call_tool("fail", "{}").then_text("done");
    let run = Runtime::in_memory(agent(&tools, model)).unwrap().start("go").await.unwrap();
    assert_eq!(run.result().await.unwrap().text(), "done");
    assert_eq!(
        settled(&run).await,
        vec![("echo".to_owned(), false, "Echo: hi".to_owned()), ("fail".to_owned(), true, "the disk is full".to_owned())]
    );
}

#[tokio::test]
async fn a_lost_answer_is_unknown_and_never_sent_again_even_with_an_idempotent_hint() {
    let server = new_server();
    let tools = connect(&server).await.unwrap().select(["echo"]).unwrap();
    // The server hints echo is idempotent; the hint is shown, not trusted.
    assert_eq!(tools.hinted_retry_safe(), ["echo"]);
    server.inject(Fault::LoseAnswer);
    let run = Runtime::in_memory(agent(&tools, echo_then_done())).unwrap().start("go").await.unwrap();
    let held = match run.idle().await.unwrap() {
        Idle::NeedsResolution(calls) => calls,
        other => panic!("expected a held Unknown, got {other:?}"),
    };
    assert_eq!(held.len(), 1);
    assert_eq!(server.executed().len(), 1, "the call ran once and was not sent again");
    run.resolve(&held[0], Resolution::Failed("outcome unknown; not repeated".into())).await.unwrap();
    assert_eq!(run.result().await.unwrap().text(), "done");
    assert_eq!(server.executed().len(), 1);
}

#[tokio::test]
async fn a_lost_request_is_unknown_too() {
    let server = new_server();
    let tools = connect(&server).await.unwrap().select(["echo"]).unwrap();
    server.inject(Fault::LoseRequest);
    let run = Runtime::in_memory(agent(&tools, echo_then_done())).unwrap().start("go").await.unwrap();
    assert!(matches!(run.idle().await.unwrap(), Idle::NeedsResolution(calls) if calls.len() == 1));
    assert!(server.executed().is_empty());
}

#[tokio::test]
async fn a_tool_declared_retry_safe_is_sent_again_after_a_lost_answer() {
    let server = new_server();
    let tools = connect(&server).await.unwrap().select(["echo"]).unwrap().retry_safe(["echo"]).unwrap();
    server.inject(Fault::LoseAnswer);
    let run = Runtime::in_memory(agent(&tools, echo_then_done())).unwrap().start("go").await.unwrap();
    assert_eq!(run.result().await.unwrap().text(), "done");
    assert_eq!(server.executed().len(), 2, "declared retry-safe: sent again once");
}

#[tokio::test]
async fn a_call_not_sent_is_tried_again_within_the_bound() {
    let server = new_server();
    let tools = connect(&server).await.unwrap().select(["echo"]).unwrap();
    server.inject(Fault::RefuseSend);
    server.inject(Fault::RefuseSend);
    let run = Runtime::in_memory(agent(&tools, echo_then_done())).unwrap().start("go").await.unwrap();
    assert_eq!(run.result().await.unwrap().text(), "done");
    assert_eq!(settled(&run).await, vec![("echo".to_owned(), false, "Echo: hi".to_owned())]);
    assert_eq!(server.executed().len(), 1);

    // Down for every attempt: the model is told, nothing ran.
    let down = new_server();
    let tools = connect(&down).await.unwrap().select(["echo"]).unwrap();
    down.set_up(false);
    let run = Runtime::in_memory(agent(&tools, echo_then_done())).unwrap().start("go").await.unwrap();
    assert_eq!(run.result().await.unwrap().text(), "done");
    let results = settled(&run).await;
    assert_eq!(results.len(), 1);
    assert!(results[0].1 && results[0].2.contains("not called") && results[0].2.contains("3 attempts"), "{results:?}");
    assert!(down.executed().is_empty());
}

#[tokio::test]
async fn a_tool_changed_on_the_server_is_not_called() {
    let server = new_server();
    let tools = connect(&server).await.unwrap().select(["echo"]).unwrap();
    // The server announces a new list in which echo takes another argument.
    server.set_tools(vec![echo_tool(json!({"required": ["message", "loud"]}))]);
    let run = Runtime::in_memory(agent(&tools, echo_then_done())).unwrap().start("go").await.unwrap();
    assert_eq!(run.result().await.unwrap().text(), "done");
    let results = settled(&run).await;
    assert!(results[0].1 && results[0].2.contains("changed the tool `echo`") && results[0].2.contains("input schema changed"), "{results:?}");
    assert!(server.executed().is_empty());
}

#[tokio::test]
async fn a_resume_against_a_changed_tool_list_is_refused() {
    let store: Arc<dyn Committer> = Arc::new(MemoryCommitter::new());
    let env = || keel::env::TokioEnv::current().expect("a tokio runtime").env();
    let server = new_server();
    let tools = connect(&server).await.unwrap().select(["echo"]).unwrap();
    let recorded = tools.tool_list();
    server.inject(Fault::LoseAnswer);
    let id = {
        let runtime = Runtime::with_store(agent(&tools, echo_then_done()), store.clone(), env());
        let run = runtime.start("go").await.unwrap();
        assert!(matches!(run.idle().await.unwrap(), Idle::NeedsResolution(_)));
        let id = run.id();
        drop(run);
        id
    };

    // The server now lists echo with another schema: a new process connects again.
    server.set_tools(vec![echo_tool(json!({"required": ["message", "loud"]}))]);
    let changed = connect(&server).await.unwrap().select(["echo"]).unwrap();
    match changed.expect(&recorded) {
        Err(McpError::ToolsChanged { changes, .. }) => assert_eq!(changes, "echo: input schema changed"),
        other => panic!("expected ToolsChanged, got {other:?}"),
    }
    let runtime = Runtime::with_store(agent(&changed, echo_then_done()), store.clone(), env());
    match runtime.resume(&id).await {
        Err(RunError::Refused(refused)) => assert!(!refused.to_string().is_empty()),
        Err(other) => panic!("expected the resume to be refused, got {other}"),
        Ok(_) => panic!("a run was resumed against a changed tool list"),
    }
    drop(runtime);

    // Back to the recorded list: the same run resumes, its Unknown still held.
    server.set_tools(vec![echo_tool(json!({}))]);
    let same = connect(&server).await.unwrap().select(["echo"]).unwrap();
    same.expect(&recorded).unwrap();
    let runtime = Runtime::with_store(agent(&same, echo_then_done()), store, env());
    let run = runtime.resume(&id).await.unwrap();
    assert_eq!(run.unknowns().len(), 1);
    assert_eq!(server.executed().len(), 1, "resuming sent nothing");
}

// ---- A server's question during a call (elicitation) ----

fn booking_server() -> InProcessServer {
    let tools = vec![json!({"name": "book", "description": "Books a table.", "inputSchema": {"type": "object", "properties": {"guests": {"type": "integer"}}}})];
    let question = ElicitationQuestion {
        message: "Which date?".into(),
        requested_schema: json!({"type": "object", "properties": {"date": {"type": "string", "minLength": 10}}, "required": ["date"]}),
    };
    InProcessServer::new(tools, |_, _| json!({"content": [{"type": "text", "text": "no question asked"}]})).asking("book", question, |args, answer| {
        let text = match answer {
            ElicitationAnswer::Accept(content) => {
                format!("booked for {} guests on {}", args["guests"], content.get("date").and_then(Json::as_str).unwrap_or("?"))
            }
            other => format!("not booked: the user chose {}", other.action()),
        };
        json!({"content": [{"type": "text", "text": text}]})
    })
}

fn book_then_done() -> ScriptedModel {
    ScriptedModel::new().call_tool("book", r#"{"guests":4}"#).then_text("done")
}

/// The run's one pending input, which must be the server's question.
async fn asked(run: &Run) -> (InputRequest, Elicitation) {
    let requests = match run.idle().await.unwrap() {
        Idle::NeedsInput(requests) => requests,
        other => panic!("expected the server's question as an input request, got {other:?}"),
    };
    assert_eq!(requests.len(), 1);
    let elicitation = Elicitation::from_request(&requests[0]).expect("an MCP question");
    (requests[0].clone(), elicitation)
}

fn date(text: &str) -> ElicitationAnswer {
    ElicitationAnswer::Accept(keel::json::parse(format!(r#"{{"date":"{text}"}}"#).as_bytes()).unwrap())
}

#[tokio::test]
async fn a_server_question_is_an_input_request_answered_with_run_answer() {
    let server = booking_server();
    let tools = connect(&server).await.unwrap();
    let run = Runtime::in_memory(agent(&tools, book_then_done())).unwrap().start("go").await.unwrap();
    let (request, question) = asked(&run).await;
    assert_eq!((question.server.as_str(), question.tool.as_str(), question.message.as_str()), ("mem", "book", "Which date?"));
    assert_eq!(question.requested_schema["required"], json!(["date"]));
    // Checked against the server's schema before anything is committed or sent.
    match run.answer(&request, date("soon").to_json()).await {
        Err(AnswerError::Invalid { .. }) => {}
        other => panic!("expected the short date refused, got {other:?}"),
    }
    assert!(server.replies().is_empty());
    assert!(run.answer(&request, date("2026-12-24").to_json()).await.unwrap());
    assert_eq!(run.result().await.unwrap().text(), "done");
    assert_eq!(settled(&run).await, [("book".to_owned(), false, "booked for 4 guests on 2026-12-24".to_owned())]);
    assert_eq!(server.replies(), [("book".to_owned(), date("2026-12-24"))]);
    assert_eq!(server.executed().len(), 1);
}

#[tokio::test]
async fn a_declined_or_canceled_question_reaches_the_server_and_the_call_goes_on() {
    for answer in [ElicitationAnswer::Decline, ElicitationAnswer::Cancel] {
        let server = booking_server();
        let tools = connect(&server).await.unwrap();
        let run = Runtime::in_memory(agent(&tools, book_then_done())).unwrap().start("go").await.unwrap();
        let (request, _) = asked(&run).await;
        run.answer(&request, answer.to_json()).await.unwrap();
        assert_eq!(run.result().await.unwrap().text(), "done");
        let expected = format!("not booked: the user chose {}", answer.action());
        assert_eq!(settled(&run).await, [("book".to_owned(), false, expected)]);
        assert_eq!(server.replies(), [("book".to_owned(), answer)]);
    }
}

/// Starts a run that waits on the server's question, then drops its runtime (its paused MCP
/// call with it, as a process exit would) and resumes it in a new runtime on the same store.
async fn restarted_while_asked(server: &InProcessServer, retry_safe: bool) -> Run {
    let store: Arc<dyn Committer> = Arc::new(MemoryCommitter::new());
    let env = || keel::env::TokioEnv::current().expect("a tokio runtime").env();
    let build = |tools: McpTools| if retry_safe { tools.retry_safe(["book"]).unwrap() } else { tools };
    let tools = build(connect(server).await.unwrap());
    let id = {
        let runtime = Runtime::with_store(agent(&tools, book_then_done()), store.clone(), env());
        let run = runtime.start("go").await.unwrap();
        asked(&run).await;
        run.id()
    };
    drop(tools);
    let tools = build(connect(server).await.unwrap());
    let runtime = Runtime::with_store(agent(&tools, book_then_done()), store, env());
    let run = runtime.resume(&id).await.unwrap();
    let (request, _) = asked(&run).await; // the question was committed: still pending
    run.answer(&request, date("2026-12-24").to_json()).await.unwrap();
    run
}

#[tokio::test]
async fn after_a_restart_the_answered_call_is_unknown_and_not_sent_again() {
    let server = booking_server();
    let run = restarted_while_asked(&server, false).await;
    let held = match run.idle().await.unwrap() {
        Idle::NeedsResolution(held) => held,
        other => panic!("expected the call held as Unknown, got {other:?}"),
    };
    assert_eq!(held.len(), 1);
    assert_eq!(server.executed().len(), 1, "not sent again");
    assert!(server.replies().is_empty(), "the call that asked is gone with its process");
    run.resolve(&held[0], Resolution::Failed("outcome unknown".into())).await.unwrap();
    assert_eq!(run.result().await.unwrap().text(), "done");
}

#[tokio::test]
async fn after_a_restart_a_retry_safe_call_is_sent_again_and_the_same_question_gets_the_same_answer() {
    let server = booking_server();
    let run = restarted_while_asked(&server, true).await;
    assert_eq!(run.result().await.unwrap().text(), "done");
    assert_eq!(settled(&run).await, [("book".to_owned(), false, "booked for 4 guests on 2026-12-24".to_owned())]);
    assert_eq!(server.executed().len(), 2, "sent again once");
    assert_eq!(server.replies(), [("book".to_owned(), date("2026-12-24"))], "the answer given once, reused");
    assert!(run.pending_inputs().is_empty());
}
