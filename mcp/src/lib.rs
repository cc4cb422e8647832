//! Tools from MCP (Model Context Protocol) servers for keel agents, on the official Rust SDK
//! (`rmcp`): stdio servers (started as child processes) and streamable-HTTP servers.
//!
//! ```no_run
//! use keel::prelude::*;
//! use keel_mcp::{McpExt, McpServer};
//!
//! # async fn demo(model: ScriptedModel) -> Result<(), Box<dyn std::error::Error>> {
//! let everything = McpServer::stdio("npx", ["-y", "@modelcontextprotocol/server-everything"])
//!     .connect()
//!     .await? // initialize, then every page of tools/list
//!     .select(["echo", "get-sum"])? // or all the server lists
//!     .retry_safe(["get-sum"])?; // your declaration; the server's hints are only hints
//! let agent = Agent::builder("assistant").version("1").model(model).mcp(&everything).build()?;
//! let run = Runtime::in_memory(agent)?.start("What is 2 + 3?").await?;
//! println!("{}", run.result().await?.text());
//! # Ok(()) }
//! ```
//!
//! # Which outcome is which
//!
//! A `tools/call` is sent at most once by this crate. Once it may have reached the server, a
//! lost answer is **Unknown**: the call may have acted, and keel's Unknown policy of the tool
//! decides (held for the host by default; sent again only if you declared the tool
//! retry-safe with [`McpTools::retry_safe`] or [`McpTools::options`]). A server's
//! `readOnlyHint` / `idempotentHint` are shown by [`McpTools::hinted_retry_safe`] and never
//! trusted alone.
//!
//! | outcome of one attempt | sent again? | keel outcome |
//! |---|---|---|
//! | a result | no | the tool's output (text of each content block; `structuredContent` as details, and as text when there is no content) |
//! | a result with `isError: true` | no | a tool error the model sees, carrying the content |
//! | a JSON-RPC error answer (unknown tool, invalid arguments, an unexpected result type) | no | a tool error the model sees |
//! | not sent: the server could not be started or reached, the connection was refused, the session had already ended | yes, within [`NotSentRetry`] (default 3 attempts, 200 ms then 400 ms), each attempt starting the server again if it had exited | after the last attempt: a tool error the model sees (`not called: ...`) |
//! | the server changed the tool's definition (announced by `notifications/tools/list_changed` or found after a restart) | not called | a tool error the model sees (`not called: ... changed the tool`) |
//! | answer lost after the call was sent: the server process died, the session or connection was lost, no answer within the call timeout ([`DEFAULT_CALL_TIMEOUT`]) | **never by this crate** | **Unknown** (`ToolError::HostFailure`): held for the host (`run.unknowns()` / `run.resolve`) unless the tool's policy is `Retry` (declared retry-safe) or `ReportToModel` |
//! | the server asks the user something during the call (`elicitation/create`, form mode) | no | the call pauses, in flight: an input request of the tool call ([`Elicitation`]); the host's `run.answer` ([`ElicitationAnswer`]: accept with content checked against the server's schema, decline, cancel) is sent and the call goes on; a question that cannot be put to the host (a schema that does not compile) is answered `cancel` |
//! | the process ended while the call waited for the answer (its in-flight call and session are gone) | only if declared retry-safe | once answered, **Unknown** (`ToolError::HostFailure`), held like a lost answer; a retry-safe call is sent again and, while the server asks the identical questions again, gets the answers already given (a different question goes to the host) |
//!
//! # Questions from the server (elicitation)
//!
//! keel-mcp declares form elicitation. A server's `elicitation/create` during a `tools/call`
//! (routed by the HTTP response stream it came on, else to the one call in flight on the
//! session; a question that cannot be tied to one call is refused with a JSON-RPC error) pauses
//! the keel call with an input request: the MCP call stays in flight in the tool's table of
//! paused calls ([`MAX_PAUSED_CALLS`]), and the call timeout does not run while it waits. The
//! question is committed like any input request; the in-flight call lives only in this
//! process, hence the last row above.
//!
//! # Durability
//!
//! The exposed tools' definitions (name, description, input schema) are part of the agent's
//! configuration digest, like any keel tool: a run is resumed only by an agent built from the
//! same tool list, and a server that changed its tools makes `Runtime::resume` refuse the run
//! (`RunError::Restore`) instead of using the new tools silently. [`McpTools::tool_list`]
//! gives the list to keep beside a run and [`McpTools::expect`] names what changed. A stdio
//! server that has exited is started again before the next call (after a resume in a new
//! process, or after a crash).
//!
//! # Testing and the simulator
//!
//! Every tool talks through the [`McpTransport`] seam. [`in_process::InProcessServer`] is an
//! MCP server in the same process (no I/O, no tokio, no threads) with injectable faults, so
//! the same outcome rules run under the simulator.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod elicitation;
mod error;
mod ext;
pub mod in_process;
mod rmcp_transport;
mod server;
mod tool;
pub mod transport;

pub use elicitation::{Elicitation, ElicitationAnswer};
pub use error::McpError;
pub use ext::McpExt;
pub use rmcp_transport::RmcpTransport;
pub use server::{McpServer, McpToolInfo, McpTools, ToolHints, DEFAULT_CALL_TIMEOUT};
pub use tool::{McpTool, NotSentRetry, MAX_PAUSED_CALLS};
pub use transport::{CallAnswer, CallStep, ElicitationQuestion, McpTransport, PausedCall, Resume, ToolPage, TransportError};
