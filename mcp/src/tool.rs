//! One MCP tool as a keel [`Tool`]: each call's outcome mapped to keel's (a result, a tool
//! error the model sees, or Unknown), never sending a call twice on its own.

use crate::server::{difference, McpToolInfo};
use crate::transport::{list_all, CallAnswer, McpTransport, TransportError};
use keel::chat::ToolOutput;
use keel::env::{BoxFuture, Clock};
use keel::json::Json;
use keel::tool::{Invocation, Tool, ToolContext, ToolDefinitionInput, ToolError};
use serde_json::Value;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How a call that was not sent is tried again: `attempts` in all (the first included),
/// waiting `initial_backoff`, then twice that, and so on, capped at 5 s.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotSentRetry {
    /// Attempts in all, clamped to 1..=10.
    pub attempts: u32,
    /// The wait before the first retry.
    pub initial_backoff: Duration,
}

impl Default for NotSentRetry {
    fn default() -> Self {
        NotSentRetry { attempts: 3, initial_backoff: Duration::from_millis(200) }
    }
}

impl NotSentRetry {
    pub(crate) fn attempts(&self) -> u32 {
        self.attempts.clamp(1, 10)
    }

    /// The wait after failed attempt number `attempt` (1-based).
    pub(crate) fn backoff(&self, attempt: u32) -> Duration {
        let factor = 1u32 << attempt.saturating_sub(1).min(16);
        self.initial_backoff.saturating_mul(factor).min(Duration::from_secs(5))
    }
}

/// A tool of an MCP server, exposed to keel. Made by
/// [`McpTools::keel_tools`](crate::McpTools::keel_tools) (or [`McpExt::mcp`](crate::McpExt::mcp)).
///
/// Its definition is frozen as it was listed when the agent was built. Before a call, if the
/// server announced a change to its list, or was restarted, the list is read again: a tool
/// whose definition changed (or vanished) is not called, and the model is told so.
pub struct McpTool {
    server: String,
    keel_name: String,
    info: McpToolInfo,
    schema: Json,
    transport: Arc<dyn McpTransport>,
    clock: Arc<dyn Clock>,
    retry: NotSentRetry,
    /// The list generation at which the definition was last checked.
    checked: AtomicU64,
}

impl McpTool {
    pub(crate) fn new(
        server: String,
        keel_name: String,
        info: McpToolInfo,
        transport: Arc<dyn McpTransport>,
        clock: Arc<dyn Clock>,
        retry: NotSentRetry,
        generation: u64,
    ) -> McpTool {
        // An input schema that does not convert is shown as `{}` only if conversion fails,
        // which a serde_json object never does; keel's build then checks the schema itself.
        let schema = Json::from_serde_value(&info.input_schema).unwrap_or_else(|_| Json::object());
        McpTool { server, keel_name, info, schema, transport, clock, retry, checked: AtomicU64::new(generation) }
    }

    /// The server's name for the tool.
    pub fn mcp_name(&self) -> &str {
        &self.info.name
    }

    /// What the server listed for it.
    pub fn info(&self) -> &McpToolInfo {
        &self.info
    }

    fn description(&self) -> String {
        let text = self.info.description.as_deref().or(self.info.title.as_deref()).unwrap_or("").trim();
        if text.is_empty() {
            format!("The tool `{}` of the MCP server `{}`.", self.info.name, self.server)
        } else {
            text.to_owned()
        }
    }

    /// One attempt: the session opened, the definition checked if the list may have changed,
    /// then the call sent.
    async fn attempt(&self, arguments: &serde_json::Map<String, Value>) -> Result<CallAnswer, Attempt> {
        self.transport.open().await.map_err(Attempt::Transport)?;
        let generation = self.transport.list_generation();
        if generation != self.checked.load(Ordering::SeqCst) {
            let listed = list_all(self.transport.as_ref()).await.map_err(|e| match e {
                // Reading the list never acts: a lost listing sent no call.
                TransportError::Lost(m) => Attempt::Transport(TransportError::NotSent(format!("reading the tool list: {m}"))),
                other => Attempt::Transport(other),
            })?;
            let now = listed.iter().find(|t| t.get("name").and_then(Value::as_str) == Some(self.info.name.as_str()));
            match now {
                None => return Err(Attempt::Changed("the server no longer lists it".to_owned())),
                Some(now) => {
                    if let Some(what) = difference(&self.info.definition, &crate::server::definition_of(now)) {
                        return Err(Attempt::Changed(what));
                    }
                }
            }
            self.checked.store(generation, Ordering::SeqCst);
        }
        self.transport.call_tool(self.info.name.clone(), arguments.clone()).await.map_err(Attempt::Transport)
    }
}

enum Attempt {
    Transport(TransportError),
    Changed(String),
}

impl Tool for McpTool {
    fn spec(&self) -> ToolDefinitionInput {
        ToolDefinitionInput { name: self.keel_name.clone(), description: self.description(), input_schema: self.schema.clone() }
    }

    fn call<'a>(&'a self, invocation: &'a Invocation, cx: ToolContext) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let arguments = match invocation.arguments_json().to_serde_value() {
                Ok(Value::Object(map)) => map,
                Ok(_) => return Err(ToolError::failed("the arguments must be a JSON object")),
                Err(e) => return Err(ToolError::failed(format!("the arguments could not be read: {e}"))),
            };
            let attempts = self.retry.attempts();
            let mut attempt = 1;
            loop {
                if cx.is_cancelled() {
                    // Nothing of this attempt was sent yet.
                    return Err(ToolError::failed("the call was canceled before it was sent"));
                }
                match self.attempt(&arguments).await {
                    Ok(answer) => return answer_to_outcome(&answer),
                    Err(Attempt::Changed(what)) => {
                        return Err(ToolError::failed(format!(
                            "not called: the MCP server `{}` changed the tool `{}` since this agent was built ({what}); rebuild the agent against the server's current tools",
                            self.server, self.info.name
                        )))
                    }
                    Err(Attempt::Transport(TransportError::NotSent(message))) => {
                        if attempt >= attempts {
                            return Err(ToolError::failed(format!(
                                "not called: the MCP server `{}` could not be reached ({attempts} attempts): {message}",
                                self.server
                            )));
                        }
                        self.clock.sleep(self.retry.backoff(attempt)).await;
                        attempt += 1;
                    }
                    Err(Attempt::Transport(TransportError::Refused { code, message })) => {
                        return Err(ToolError::failed(format!("the MCP server `{}` refused the call (error {code}): {message}", self.server)))
                    }
                    // The call may have acted: Unknown. Never sent again here; the tool's
                    // Unknown policy decides (held for the host unless declared retry-safe).
                    Err(Attempt::Transport(TransportError::Lost(message))) => {
                        return Err(ToolError::host_failure(format!(
                            "the answer of MCP server `{}` to `{}` was lost after the call was sent: {message}",
                            self.server, self.info.name
                        )))
                    }
                }
            }
        })
    }
}

/// A `CallToolResult` as keel's outcome: its content as text (structured content as details),
/// an `isError` result as a tool error the model sees.
fn answer_to_outcome(answer: &CallAnswer) -> Result<ToolOutput, ToolError> {
    let result = &answer.0;
    let mut parts = Vec::new();
    for block in result.get("content").and_then(Value::as_array).into_iter().flatten() {
        parts.push(block_text(block));
    }
    let structured = result.get("structuredContent").filter(|v| !v.is_null());
    if parts.is_empty() {
        if let Some(value) = structured {
            parts.push(value.to_string());
        }
    }
    let details = structured.and_then(|v| Json::from_serde_value(v).ok());
    let output = ToolOutput { content: parts.join("\n"), details };
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        let message = if output.content.is_empty() { "the tool reported an error".to_owned() } else { output.content.clone() };
        Err(ToolError::failed_with_output(message, output))
    } else {
        Ok(output)
    }
}

/// One content block as text: text as it is, anything else as a short note (the model gets
/// text from keel; images and audio are named, not inlined).
fn block_text(block: &Value) -> String {
    let field = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or("");
    match field("type") {
        "text" => field("text").to_owned(),
        "image" => format!("[image {}]", field("mimeType")),
        "audio" => format!("[audio {}]", field("mimeType")),
        "resource_link" => format!("[resource {} {}]", field("uri"), field("name")),
        "resource" => {
            let resource = block.get("resource");
            match resource.and_then(|r| r.get("text")).and_then(Value::as_str) {
                Some(text) => text.to_owned(),
                None => format!("[resource {}]", resource.and_then(|r| r.get("uri")).and_then(Value::as_str).unwrap_or("")),
            }
        }
        other => format!("[{other} content]"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_error_results_map_to_output_and_tool_error() {
        let ok = CallAnswer(serde_json::json!({"content": [{"type": "text", "text": "Echo: hi"}, {"type": "image", "mimeType": "image/png", "data": "AA=="}]}));
        assert_eq!(answer_to_outcome(&ok).unwrap().content, "Echo: hi\n[image image/png]");
        let err = CallAnswer(serde_json::json!({"content": [{"type": "text", "text": "bad input"}], "isError": true}));
        match answer_to_outcome(&err) {
            Err(ToolError::Failed { message, output: Some(o) }) => assert_eq!((message.as_str(), o.content.as_str()), ("bad input", "bad input")),
            other => panic!("expected a tool error with output, got {other:?}"),
        }
        let structured = CallAnswer(serde_json::json!({"content": [], "structuredContent": {"sum": 3}}));
        let out = answer_to_outcome(&structured).unwrap();
        assert_eq!(out.content, r#"{"sum":3}"#);
        assert!(out.details.is_some());
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let r = NotSentRetry { attempts: 20, initial_backoff: Duration::from_millis(200) };
        assert_eq!((r.attempts(), r.backoff(1), r.backoff(2), r.backoff(9)), (10, Duration::from_millis(200), Duration::from_millis(400), Duration::from_secs(5)));
    }
}
