//! `Agent::builder(..).mcp(tools)`: a server's tools added to an agent.

use crate::server::McpTools;
use keel::agent::AgentBuilder;

/// Adds MCP tools to an [`AgentBuilder`]: `use keel_mcp::McpExt;` then
/// `Agent::builder("a").mcp(&tools)`.
pub trait McpExt {
    /// Adds every tool `tools` exposes (all the server listed, or the
    /// [`select`](McpTools::select)ed ones), each with its declared options: Unknowns held
    /// for the host unless declared [`retry_safe`](McpTools::retry_safe). The tools'
    /// definitions become part of the agent's configuration digest, so a run is resumed only
    /// by an agent that lists the same tools.
    fn mcp(self, tools: &McpTools) -> AgentBuilder;
}

impl McpExt for AgentBuilder {
    fn mcp(self, tools: &McpTools) -> AgentBuilder {
        tools.keel_tools().into_iter().fold(self, |builder, (tool, options)| builder.tool_with(tool, options))
    }
}
