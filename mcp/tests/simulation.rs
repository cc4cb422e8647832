//! MCP tools under the simulator: keel-sim's harness runs an agent whose tools come from an
//! in-process MCP server (the `McpTransport` seam, no I/O), under seeded crashes, lost
//! acknowledgements, failed commits and tool faults, while the server itself refuses a send or
//! loses a request or an answer of the held tool, as drawn from the seed. The oracle checks each call answered
//! exactly once, no call of a held tool run twice, Unknowns kept until settled. A second
//! campaign's tool asks the user a question first (elicitation), answered by the harness's host.

use keel::env::{BoxFuture, Clock, MadsimEnv, Rng, Timestamp};
use keel::prelude::*;
use keel_mcp::in_process::{Fault, InProcessServer};
use keel_mcp::{ElicitationAnswer, ElicitationQuestion, McpExt, McpServer, NotSentRetry};
use keel_sim::harness::{Campaign, Faults};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// The clock of a factory call made outside a run (the harness probes the agent's shape
/// first): no tool is called there, so nothing waits on it.
struct Probe;

impl Clock for Probe {
    fn now(&self) -> Timestamp {
        Timestamp::saturating_from_millis(0)
    }
    fn sleep(&self, _d: Duration) -> BoxFuture<'static, ()> {
        Box::pin(std::future::ready(()))
    }
}

fn server() -> InProcessServer {
    let tools = vec![
        json!({"name": "echo", "description": "Echoes the message.", "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}, "annotations": {"idempotentHint": true}}),
        json!({"name": "get-sum", "description": "Adds a and b.", "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}, "annotations": {"readOnlyHint": true}}),
    ];
    InProcessServer::new(tools, |name, args| {
        let text = match name {
            "echo" => format!("Echo: {}", args.get("message").and_then(Value::as_str).unwrap_or("")),
            _ => {
                let n = |k: &str| args.get(k).and_then(Value::as_f64).unwrap_or(0.0);
                format!("The sum is {}.", n("a") + n("b"))
            }
        };
        json!({"content": [{"type": "text", "text": text}]})
    })
}

/// A fresh in-process server per agent build (each restore builds again), with one
/// transport fault drawn from the seed; echo is held on Unknown, get-sum declared retry-safe.
fn mcp_agent() -> AgentBuilder {
    let server = server();
    let clock: Arc<dyn Clock> = match MadsimEnv::current() {
        Ok(env) => {
            match env.next_u64() % 4 {
                1 => server.inject(Fault::RefuseSend),
                // Lost answers only for the held tool: a retry-safe tool's re-run must agree
                // with the run that took effect (the oracle's `retry_safe`), which a fault
                // inside its call cannot promise; the harness's own faults retry get-sum.
                2 => server.inject_for("echo", Fault::LoseAnswer),
                3 => server.inject_for("echo", Fault::LoseRequest),
                _ => {}
            }
            Arc::new(env)
        }
        Err(_) => Arc::new(Probe),
    };
    let connect = McpServer::http("in-process")
        .name("mem")
        .retry_not_sent(NotSentRetry { attempts: 2, initial_backoff: Duration::from_millis(50) })
        .connect_with(Arc::new(server), clock);
    let tools = futures::executor::block_on(connect).expect("the in-process server lists its tools").retry_safe(["get-sum"]).expect("get-sum is listed");
    Agent::builder("mcp-sim").version("1").mcp(&tools).max_model_calls(6)
}

fn script() -> ScriptedModel {
    ScriptedModel::new()
        .call_tool("get-sum", r#"{"a":19,"b":23}"#)
        .call_tool("echo", r#"{"message":"42"}"#)
        .then_text("19 + 23 = 42.")
}

#[test]
fn mcp_tools_under_seeded_faults() {
    let report = Campaign::new(mcp_agent, script()).name("mcp").seeds(0..300).faults(Faults::all()).run();
    println!("{report}");
    report.assert_ok();
    report.assert_every_fault_fired();
}

/// An agent whose MCP tool asks the user before it answers (an in-process server built per
/// run, so a restore finds no paused call: the answered call is then Unknown and held).
fn asking_agent() -> AgentBuilder {
    let tools = vec![json!({"name": "book", "description": "Books a table.", "inputSchema": {"type": "object", "properties": {"guests": {"type": "integer"}}}})];
    let question = ElicitationQuestion {
        message: "Which date?".into(),
        requested_schema: json!({"type": "object", "properties": {"date": {"type": "string"}}, "required": ["date"]}),
    };
    let server = InProcessServer::new(tools, |_, _| json!({"content": []})).asking("book", question, |_, answer| {
        let text = match answer {
            ElicitationAnswer::Accept(content) => format!("booked on {}", content.get("date").and_then(keel::json::Json::as_str).unwrap_or("?")),
            other => format!("not booked ({})", other.action()),
        };
        json!({"content": [{"type": "text", "text": text}]})
    });
    let clock: Arc<dyn Clock> = match MadsimEnv::current() {
        Ok(env) => {
            if env.next_u64() % 2 == 1 {
                server.inject_for("book", Fault::LoseAnswer);
            }
            Arc::new(env)
        }
        Err(_) => Arc::new(Probe),
    };
    let connect = McpServer::http("in-process").name("mem").connect_with(Arc::new(server), clock);
    let tools = futures::executor::block_on(connect).expect("the in-process server lists its tools");
    Agent::builder("mcp-ask-sim").version("1").mcp(&tools).max_model_calls(4)
}

#[test]
fn mcp_server_questions_under_seeded_faults() {
    let script = ScriptedModel::new().call_tool("book", r#"{"guests":2}"#).then_text("Booked.");
    let report = Campaign::new(asking_agent, script)
        .name("mcp-ask")
        .seeds(0..150)
        .faults(Faults::all())
        .answer_json(r#"{"action":"accept","content":{"date":"2026-12-24"}}"#)
        .run();
    println!("{report}");
    report.assert_ok();
}
