//! An agent using the tools of an MCP server: the reference server
//! (@modelcontextprotocol/server-everything) started over stdio, two of its tools exposed,
//! one declared retry-safe after reading the server's hints. The model is scripted, so it runs
//! offline.
//!
//! Run: `cargo run -p keel-mcp --example mcp_agent -- "$(bash .ci/mcp-server.sh)"`
//! (the argument, or `KEEL_MCP_SERVER`, is the server's `dist/index.js`; node >= 20 runs it).

use keel::prelude::*;
use keel_mcp::{McpExt, McpServer};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let script = std::env::args().nth(1).or_else(|| std::env::var("KEEL_MCP_SERVER").ok()).ok_or(
        "give the path of server-everything's dist/index.js: cargo run -p keel-mcp --example mcp_agent -- \"$(bash .ci/mcp-server.sh)\"",
    )?;

    // 1. Start the server, initialize, list its tools (every page).
    let everything = McpServer::stdio("node", [script.as_str(), "stdio"]).name("everything").connect().await?;
    let everything = everything.select(["echo", "get-sum"])?;
    for tool in everything.listed().iter().filter(|t| everything.names().contains(&t.name)) {
        println!("tool {}: {} (hints: {:?})", tool.name, tool.description.as_deref().unwrap_or(""), tool.hints);
    }
    // 2. The server's hints are only hints: we read get-sum and confirm it is safe to send
    //    twice. echo keeps the default: a call whose answer is lost is held for us.
    println!("the server hints these are retry-safe: {:?}", everything.hinted_retry_safe());
    let everything = everything.retry_safe(["get-sum"])?;

    // 3. The agent: the MCP tools are keel tools (part of its configuration digest).
    let model = ScriptedModel::new()
        .call_tool("get-sum", r#"{"a":19,"b":23}"#)
        .call_tool("echo", r#"{"message":"the sum is 42"}"#)
        .then_text("19 + 23 = 42, and the server echoed it back.");
    let agent = Agent::builder("mcp-agent")
        .version("1")
        .instructions("Use the MCP tools to add numbers and echo results.")
        .model(model)
        .mcp(&everything)
        .max_model_calls(4)
        .build()?;

    // 4. Run it and watch the tool calls go to the server.
    let run = Runtime::in_memory(agent)?.start("What is 19 + 23? Echo the answer.").await?;
    let mut events = run.events();
    while let Some(event) = events.next().await {
        match event {
            RunEvent::ToolStarted { tool, .. } => println!("calling {tool}"),
            RunEvent::ToolSettled { tool, text, is_error, .. } => println!("{tool} {}: {text}", if is_error { "failed" } else { "answered" }),
            RunEvent::Finished(result) => println!("finished: {}", result.status().as_str()),
            _ => {}
        }
    }
    println!("{}", run.result().await?.text());
    Ok(())
}
