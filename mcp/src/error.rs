//! What can go wrong while connecting to a server and choosing its tools.

/// A failure to connect to an MCP server or to use its tool list. Each message names the
/// server and says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpError {
    /// The server could not be started, reached or initialized, or did not list its tools.
    #[error("MCP server `{server}`: {detail}")]
    Connect {
        /// The server's name.
        server: String,
        /// What happened.
        detail: String,
    },
    /// A tool was named that the server does not list.
    #[error("MCP server `{server}` lists no tool `{tool}` (it lists: {listed}); check the name or the server's version")]
    NoSuchTool {
        /// The server's name.
        server: String,
        /// The name asked for.
        tool: String,
        /// The names the server lists, comma-separated.
        listed: String,
    },
    /// A listed tool could not be read (no name, a schema that is not a JSON object).
    #[error("MCP server `{server}`: tool `{tool}` cannot be used: {detail}")]
    BadTool {
        /// The server's name.
        server: String,
        /// The tool's name (or its position when it has none).
        tool: String,
        /// What is wrong.
        detail: String,
    },
    /// The server's tool list differs from the one recorded earlier (for example by the
    /// process that started a run now being resumed). Nothing was called. Resume with the
    /// server version the run started with, or start a new run.
    #[error("MCP server `{server}` changed its tools since they were recorded: {changes}")]
    ToolsChanged {
        /// The server's name.
        server: String,
        /// Each difference, for example `echo: input schema changed; add: removed`.
        changes: String,
    },
}
