//! keel-mcp against the real reference server (@modelcontextprotocol/server-everything, node)
//! over stdio and over streamable HTTP on 127.0.0.1, started by the tests. Install it with
//! `bash .ci/mcp-server.sh`; without it these tests are skipped, except in CI where they fail.

mod support;

use futures::StreamExt;
use keel::prelude::*;
use keel::kernel::commit::{Committer, MemoryCommitter};
use keel_mcp::{Elicitation, ElicitationAnswer, McpError, McpServer, McpTools, NotSentRetry};
use std::sync::Arc;
use std::time::Duration;
use support::runs::{agent, settled};
use support::{kill, server_script, HttpServer};

const LONG: &str = "trigger-long-running-operation";

fn stdio(script: &str) -> McpServer {
    McpServer::stdio("node", [script, "stdio"]).name("everything").call_timeout(Some(Duration::from_secs(60)))
}

async fn started(run: &Run) {
    let mut events = run.events();
    while let Some(event) = events.next().await {
        if matches!(event, RunEvent::ToolStarted { .. }) {
            return;
        }
    }
    panic!("the run ended before its tool call started");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_lists_schemas_and_hints_and_calls_tools() {
    let Some(script) = server_script() else { return };
    let tools = stdio(&script).connect().await.unwrap();
    let names = tools.names();
    for expected in ["echo", "get-sum", LONG, "gzip-file-as-resource"] {
        assert!(names.iter().any(|n| n == expected), "{expected} not in {names:?}");
    }
    let echo = tools.listed().iter().find(|t| t.name == "echo").unwrap();
    assert_eq!(echo.input_schema["properties"]["message"]["type"], "string");
    let long = tools.listed().iter().find(|t| t.name == LONG).unwrap();
    assert!(long.hinted_retry_safe(), "the server hints the long operation is read-only and idempotent");
    assert!(matches!(tools.clone().select(["no-such-tool"]), Err(McpError::NoSuchTool { .. })));

    let tools = tools.select(["echo", "get-sum", "gzip-file-as-resource"]).unwrap();
    let model = ScriptedModel::new()
        .call_tool("echo", r#"{"message":"hello"}"#)
        .call_tool("get-sum", r#"{"a":2,"b":3}"#)
        .call_tool("gzip-file-as-resource", r#"{"name":"x.gz","data":"ftp://example.com/x"}"#)
        .then_text("done");
    let run = Runtime::in_memory(agent(&tools, model)).unwrap().start("go").await.unwrap();
    assert_eq!(run.result().await.unwrap().text(), "done");
    let results = settled(&run).await;
    assert_eq!(results[0], ("echo".to_owned(), false, "Echo: hello".to_owned()));
    assert!(!results[1].1 && results[1].2.contains('5'), "{:?}", results[1]);
    // The server's isError result is a tool error the model sees, with the server's text.
    assert!(results[2].1 && results[2].2.contains("Unsupported URL protocol"), "{:?}", results[2]);
    assert_eq!(tools.sessions_opened(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_server_killed_mid_call_leaves_the_call_unknown_and_unsent() {
    let Some(script) = server_script() else { return };
    let tools = stdio(&script).connect().await.unwrap().select([LONG]).unwrap();
    let model = ScriptedModel::new().call_tool(LONG, r#"{"duration":10,"steps":10}"#).then_text("done");
    let run = Runtime::in_memory(agent(&tools, model)).unwrap().start("go").await.unwrap();
    started(&run).await;
    tokio::time::sleep(Duration::from_millis(1000)).await; // the call is with the server
    kill(tools.process_id().await.expect("a running server"));
    let held = match tokio::time::timeout(Duration::from_secs(30), run.idle()).await.expect("idle in time").unwrap() {
        Idle::NeedsResolution(calls) => calls,
        other => panic!("expected the call held as Unknown, got {other:?}"),
    };
    assert_eq!(held.len(), 1);
    // Held for the host even though the server hints the tool is idempotent: not sent
    // again, so no second session was opened.
    assert_eq!(tools.sessions_opened(), 1);
    run.resolve(&held[0], Resolution::Failed("outcome unknown".into())).await.unwrap();
    assert_eq!(run.result().await.unwrap().text(), "done");
    assert_eq!(tools.sessions_opened(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_retry_safe_call_is_sent_again_to_a_restarted_server() {
    let Some(script) = server_script() else { return };
    let tools = stdio(&script).connect().await.unwrap().select([LONG]).unwrap();
    let tools = tools.clone().retry_safe(tools.hinted_retry_safe()).unwrap(); // confirmed by us
    let model = ScriptedModel::new().call_tool(LONG, r#"{"duration":2,"steps":2}"#).then_text("done");
    let run = Runtime::in_memory(agent(&tools, model)).unwrap().start("go").await.unwrap();
    started(&run).await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    let first = tools.process_id().await.expect("a running server");
    kill(first);
    let result = tokio::time::timeout(Duration::from_secs(60), run.result()).await.expect("finished in time").unwrap();
    assert_eq!(result.text(), "done");
    let results = settled(&run).await;
    assert_eq!(results.len(), 1);
    assert!(!results[0].1 && results[0].2.contains("Long running operation completed"), "{results:?}");
    assert_eq!(tools.sessions_opened(), 2, "the server was started again for the repeated call");
    assert_ne!(tools.process_id().await, Some(first));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_cannot_start_is_reported_after_the_retries() {
    let started = std::time::Instant::now();
    let error = McpServer::stdio("/nonexistent/mcp-server", ["stdio"])
        .retry_not_sent(NotSentRetry { attempts: 3, initial_backoff: Duration::from_millis(50) })
        .connect()
        .await
        .unwrap_err();
    let McpError::Connect { server, detail } = &error else { panic!("expected Connect, got {error:?}") };
    assert_eq!(server, "mcp-server");
    assert!(detail.contains("after 3 attempts") && detail.contains("cannot start"), "{detail}");
    assert!(started.elapsed() >= Duration::from_millis(150), "waited 50 + 100 ms between attempts");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamable_http_calls_tools_and_a_killed_server_leaves_the_call_unknown() {
    let Some(script) = server_script() else { return };
    let mut server = HttpServer::start(&script).await;
    let tools = McpServer::http(&server.url)
        .name("everything-http")
        .call_timeout(Some(Duration::from_secs(60)))
        .connect()
        .await
        .unwrap()
        .select(["echo", LONG])
        .unwrap();
    let model = ScriptedModel::new().call_tool("echo", r#"{"message":"over http"}"#).call_tool(LONG, r#"{"duration":10,"steps":10}"#).then_text("done");
    let run = Runtime::in_memory(agent(&tools, model)).unwrap().start("go").await.unwrap();
    let mut events = run.events();
    while let Some(event) = events.next().await {
        match event {
            RunEvent::ToolSettled { tool, text, is_error, .. } if tool == "echo" => assert_eq!((is_error, text.as_str()), (false, "Echo: over http")),
            RunEvent::ToolStarted { tool, .. } if tool == LONG => break,
            _ => {}
        }
    }
    tokio::time::sleep(Duration::from_millis(1000)).await;
    server.child.start_kill().unwrap();
    let held = match tokio::time::timeout(Duration::from_secs(70), run.idle()).await.expect("idle in time").unwrap() {
        Idle::NeedsResolution(calls) => calls,
        other => panic!("expected the call held as Unknown, got {other:?}"),
    };
    assert_eq!(held.len(), 1);
    assert_eq!(tools.sessions_opened(), 1, "not sent again");
}

// ---- The server's question during a call (elicitation) ----

const ASK: &str = "trigger-elicitation-request";

/// The run's one pending input: the server's question.
async fn asked(run: &Run) -> (InputRequest, Elicitation) {
    let idle = tokio::time::timeout(Duration::from_secs(60), run.idle()).await.expect("idle in time").unwrap();
    let Idle::NeedsInput(requests) = idle else { panic!("expected the server's question as an input request, got {idle:?}") };
    assert_eq!(requests.len(), 1);
    let question = Elicitation::from_request(&requests[0]).expect("an MCP question");
    assert_eq!((question.tool.as_str(), question.message.as_str()), (ASK, "Please provide inputs for the following fields:"));
    assert_eq!(question.requested_schema["required"], serde_json::json!(["name"]));
    (requests[0].clone(), question)
}

fn ada() -> ElicitationAnswer {
    ElicitationAnswer::Accept(keel::json::parse(br#"{"name":"Ada Lovelace","check":true,"integer":7}"#).unwrap())
}

fn ask_then_done() -> ScriptedModel {
    ScriptedModel::new().call_tool(ASK, "{}").then_text("done")
}

/// Asks, refuses an answer outside the server's schema, accepts one inside it, and returns the
/// tool's result text.
async fn ask_and_answer(tools: &McpTools) -> String {
    let run = Runtime::in_memory(agent(tools, ask_then_done())).unwrap().start("go").await.unwrap();
    let (request, _) = asked(&run).await;
    let no_name = ElicitationAnswer::Accept(keel::json::parse(br#"{"check":true}"#).unwrap());
    assert!(matches!(run.answer(&request, no_name.to_json()).await, Err(AnswerError::Invalid { .. })), "name is required");
    let too_big = ElicitationAnswer::Accept(keel::json::parse(br#"{"name":"Ada","integer":1000}"#).unwrap());
    assert!(matches!(run.answer(&request, too_big.to_json()).await, Err(AnswerError::Invalid { .. })), "integer is at most 100");
    assert!(run.answer(&request, ada().to_json()).await.unwrap());
    assert_eq!(tokio::time::timeout(Duration::from_secs(60), run.result()).await.expect("finished in time").unwrap().text(), "done");
    let results = settled(&run).await;
    assert_eq!(results.len(), 1);
    assert!(!results[0].1, "{results:?}");
    results[0].2.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_server_question_is_answered_with_run_answer() {
    let Some(script) = server_script() else { return };
    let tools = stdio(&script).connect().await.unwrap().select([ASK]).unwrap();
    let text = ask_and_answer(&tools).await;
    assert!(text.contains("User provided the requested information") && text.contains("- Name: Ada Lovelace") && text.contains("- Favorite Integer: 7"), "{text}");
    assert_eq!(tools.sessions_opened(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamable_http_server_question_is_answered_with_run_answer() {
    let Some(script) = server_script() else { return };
    let server = HttpServer::start(&script).await;
    let tools = McpServer::http(&server.url).name("everything-http").call_timeout(Some(Duration::from_secs(60))).connect().await.unwrap();
    let tools = tools.select([ASK, "echo"]).unwrap();
    let text = ask_and_answer(&tools).await;
    assert!(text.contains("- Name: Ada Lovelace") && text.contains("Agreed to terms: true"), "{text}");
}

/// A run asked by the server declines; the decline reaches the server, which answers the call
/// with that, and the run finishes.
async fn decline_reaches_the_server(tools: &McpTools) {
    let run = Runtime::in_memory(agent(tools, ask_then_done())).unwrap().start("go").await.unwrap();
    let (request, _) = asked(&run).await;
    run.answer(&request, ElicitationAnswer::Decline.to_json()).await.unwrap();
    assert_eq!(tokio::time::timeout(Duration::from_secs(60), run.result()).await.expect("finished in time").unwrap().text(), "done");
    let results = settled(&run).await;
    assert!(!results[0].1 && results[0].2.contains("User declined to provide the requested information"), "{results:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_declined_question_reaches_the_server() {
    let Some(script) = server_script() else { return };
    let tools = stdio(&script).connect().await.unwrap().select([ASK]).unwrap();
    decline_reaches_the_server(&tools).await;
}

/// A run asked by the server, its runtime and server gone (as when the process exits), resumed
/// by a new runtime on the same store and answered there. `restart` takes the old tools, ends
/// their server and returns tools connected to a newly started one, with whatever keeps that
/// server up.
async fn restarted_while_asked<K, F>(tools: McpTools, restart: impl FnOnce(McpTools) -> F) -> (Run, McpTools, K)
where
    F: std::future::Future<Output = (McpTools, K)>,
{
    let store: Arc<dyn Committer> = Arc::new(MemoryCommitter::new());
    let env = || keel::env::TokioEnv::current().expect("a tokio runtime").env();
    let id = {
        let runtime = Runtime::with_store(agent(&tools, ask_then_done()), store.clone(), env());
        let run = runtime.start("go").await.unwrap();
        asked(&run).await;
        run.id()
    };
    let (tools, keep) = restart(tools).await;
    let runtime = Runtime::with_store(agent(&tools, ask_then_done()), store, env());
    let run = runtime.resume(&id).await.unwrap();
    let (request, _) = asked(&run).await; // the committed question is still pending
    run.answer(&request, ada().to_json()).await.unwrap();
    (run, tools, keep)
}

/// `restarted_while_asked` over stdio: the restart drops the tools (ending the server process)
/// and starts a new process.
async fn stdio_restarted_while_asked(script: &str, retry_safe: bool) -> (Run, McpTools) {
    let connect = || async {
        let tools = stdio(script).connect().await.unwrap().select([ASK]).unwrap();
        if retry_safe { tools.retry_safe([ASK]).unwrap() } else { tools }
    };
    let tools = connect().await;
    let first = tools.process_id().await.expect("a running server");
    let (run, tools, ()) = restarted_while_asked(tools, |old| async move {
        drop(old);
        let tools = connect().await;
        assert_ne!(tools.process_id().await, Some(first), "a new server process");
        (tools, ())
    })
    .await;
    (run, tools)
}

/// The run waits for the host with the one call held as Unknown.
async fn held_unknown(run: &Run) -> UnknownEffect {
    let idle = tokio::time::timeout(Duration::from_secs(60), run.idle()).await.expect("idle in time").unwrap();
    let Idle::NeedsResolution(mut held) = idle else { panic!("expected the call held as Unknown, got {idle:?}") };
    assert_eq!(held.len(), 1, "{held:?}");
    held.remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_restart_while_asked_leaves_the_call_unknown_and_unsent() {
    let Some(script) = server_script() else { return };
    let (run, tools) = stdio_restarted_while_asked(&script, false).await;
    let held = held_unknown(&run).await;
    run.resolve(&held, Resolution::Failed("outcome unknown".into())).await.unwrap();
    assert_eq!(run.result().await.unwrap().text(), "done");
    assert_eq!(tools.sessions_opened(), 1, "only the listing's session: nothing was sent again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_restart_while_asked_resends_a_retry_safe_call_and_reuses_the_answer() {
    let Some(script) = server_script() else { return };
    let (run, _tools) = stdio_restarted_while_asked(&script, true).await;
    let result = tokio::time::timeout(Duration::from_secs(60), run.result()).await.expect("finished in time").unwrap();
    assert_eq!(result.text(), "done");
    let results = settled(&run).await;
    assert!(!results[0].1 && results[0].2.contains("- Name: Ada Lovelace"), "{results:?}");
    assert!(run.pending_inputs().is_empty(), "the identical question was answered with the answer already given");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamable_http_decline_and_a_restart_while_asked() {
    let Some(script) = server_script() else { return };
    let connect = |url: String| async move {
        McpServer::http(url).name("everything-http").call_timeout(Some(Duration::from_secs(60))).connect().await.unwrap().select([ASK]).unwrap()
    };
    let mut server = HttpServer::start(&script).await;
    let tools = connect(server.url.clone()).await;
    // A decline reaches the server over the call's response stream.
    decline_reaches_the_server(&tools).await;

    // Asked again, then the process and the server go away; a new runtime on the same store
    // with a new server gets the answer: the call is Unknown, not sent again.
    let script = &script;
    let (run, tools, _server) = restarted_while_asked(tools, |old| async move {
        drop(old);
        server.child.start_kill().unwrap();
        let _ = server.child.wait().await;
        let server = HttpServer::start(script).await;
        (connect(server.url.clone()).await, server)
    })
    .await;
    held_unknown(&run).await;
    assert_eq!(tools.sessions_opened(), 1, "nothing sent again");
}
