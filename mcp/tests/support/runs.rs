//! What the MCP tests do with a keel run, whichever server answers: an agent over the tools,
//! and the tool results a finished run settled.

use futures::StreamExt;
use keel::prelude::*;
use keel_mcp::{McpExt, McpTools};

/// An agent calling `tools` with the scripted `model` (at most four model calls).
pub fn agent(tools: &McpTools, model: ScriptedModel) -> Agent {
    Agent::builder("mcp-test").version("1").model(model).mcp(tools).max_model_calls(4).build().expect("agent")
}

/// The settled tool results of a finished run, in order: (tool, is_error, text).
pub async fn settled(run: &Run) -> Vec<(String, bool, String)> {
    let mut out = Vec::new();
    let mut events = run.events();
    while let Some(event) = events.next().await {
        match event {
            RunEvent::ToolSettled { tool, is_error, text, .. } => out.push((tool, is_error, text)),
            RunEvent::Finished(_) => break,
            _ => {}
        }
    }
    out
}
