//! The transport seam: "list this server's tools, call this one". Every MCP tool talks to its
//! server through [`McpTransport`], so the outcome rules in [`crate::tool`] run unchanged over
//! a real server ([`crate::rmcp_transport::RmcpTransport`], on rmcp and the real tokio) and
//! over [`crate::in_process::InProcessServer`] (no I/O, no tokio: what the simulator drives).
//!
//! A call can pause: the server asks the user a question (`elicitation/create`) before it
//! answers. [`McpTransport::call_tool`] then returns [`CallStep::Asked`] with the call still
//! in flight inside a [`PausedCall`]; answering it sends the reply and waits for the call's
//! next step.

use crate::elicitation::ElicitationAnswer;
use keel::env::BoxFuture;
use serde_json::{Map, Value};

/// One page of a `tools/list` answer.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolPage {
    /// Each tool as the server wrote it (`name`, `description`, `inputSchema`, `annotations`).
    pub tools: Vec<Value>,
    /// The cursor of the next page, if any.
    pub next_cursor: Option<String>,
}

/// A `tools/call` answer: the server's `CallToolResult` object as it was written
/// (`content`, `structuredContent`, `isError`).
#[derive(Clone, Debug, PartialEq)]
pub struct CallAnswer(pub Value);

/// A server's question to the user during a call (`elicitation/create`, form mode).
#[derive(Clone, Debug, PartialEq)]
pub struct ElicitationQuestion {
    /// What the server asks, for a person to read.
    pub message: String,
    /// The JSON Schema of the content an accepting answer carries (an object schema).
    pub requested_schema: Value,
}

/// What a call has reached: its answer, or a question of the server it waits on.
pub enum CallStep {
    /// The `tools/call` answer.
    Answered(CallAnswer),
    /// The server asked the user something; the call waits, in flight, for the reply.
    Asked(PausedCall),
}

/// What [`PausedCall::answer`] leads to: the call's next step.
pub type Resume = Box<dyn FnOnce(ElicitationAnswer) -> BoxFuture<'static, Result<CallStep, TransportError>> + Send>;

/// A call in flight that waits for the answer to its server's question. Answer it with
/// [`answer`](Self::answer); dropping it unanswered replies `cancel` to the server.
pub struct PausedCall {
    question: ElicitationQuestion,
    resume: Resume,
}

impl PausedCall {
    /// A paused call: `resume` sends the reply and waits for what comes next.
    pub fn new(question: ElicitationQuestion, resume: Resume) -> PausedCall {
        PausedCall { question, resume }
    }

    /// What the server asked.
    pub fn question(&self) -> &ElicitationQuestion {
        &self.question
    }

    /// Sends `answer` to the server and waits for the call's next step.
    pub fn answer(self, answer: ElicitationAnswer) -> BoxFuture<'static, Result<CallStep, TransportError>> {
        (self.resume)(answer)
    }
}

impl std::fmt::Debug for PausedCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PausedCall").field("question", &self.question).finish_non_exhaustive()
    }
}

/// Why a request got no answer, in the classes the outcome rules need.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    /// Nothing reached the server: it could not be started or reached, or the connection was
    /// known closed before the request was handed over. Safe to send again.
    #[error("not sent: {0}")]
    NotSent(String),
    /// The request may have reached the server and its answer was lost (the server process
    /// died, the session or connection was lost mid-call, the answer timed out).
    #[error("answer lost: {0}")]
    Lost(String),
    /// The server answered with a JSON-RPC error (an unknown tool, invalid arguments).
    #[error("the server answered with error {code}: {message}")]
    Refused {
        /// The JSON-RPC error code.
        code: i64,
        /// The server's message.
        message: String,
    },
}

/// Talks to one MCP server. Implementations never retry: the caller decides that from the
/// error class.
pub trait McpTransport: Send + Sync + 'static {
    /// Makes sure a session is open, opening a new one (starting the server process again, a
    /// new HTTP session) if the last one ended. A failure here sent nothing.
    fn open(&self) -> BoxFuture<'_, Result<(), TransportError>>;

    /// One page of `tools/list`, starting at `cursor`.
    fn list_tools(&self, cursor: Option<String>) -> BoxFuture<'_, Result<ToolPage, TransportError>>;

    /// One `tools/call` of `name` with `arguments`, until it answers or its server asks the
    /// user something ([`CallStep::Asked`]: the call stays in flight).
    fn call_tool(&self, name: String, arguments: Map<String, Value>) -> BoxFuture<'_, Result<CallStep, TransportError>>;

    /// A number that grows whenever the server's tool list may have changed since it was
    /// last read: a `notifications/tools/list_changed` arrived, or the server was restarted
    /// or a new session begun. Callers re-read the list before trusting a tool again.
    fn list_generation(&self) -> u64;
}

/// Every tool the server lists, all pages read in order.
pub(crate) async fn list_all(transport: &dyn McpTransport) -> Result<Vec<Value>, TransportError> {
    let mut tools = Vec::new();
    let mut cursor = None;
    // A server that hands back a cursor forever would loop forever: a page cap ends it.
    for _ in 0..MAX_PAGES {
        let page = transport.list_tools(cursor.take()).await?;
        tools.extend(page.tools);
        match page.next_cursor {
            Some(next) if !next.is_empty() => cursor = Some(next),
            _ => return Ok(tools),
        }
    }
    Err(TransportError::Refused { code: 0, message: format!("the tool list did not end after {MAX_PAGES} pages") })
}

/// The most `tools/list` pages read for one listing.
pub const MAX_PAGES: usize = 1000;
