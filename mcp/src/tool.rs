//! One MCP tool as a keel [`Tool`]: each call's outcome mapped to keel's (a result, a tool
//! error the model sees, or Unknown), never sending a call twice on its own.
//!
//! A server's question during a call pauses the keel call with an input request; the MCP call
//! stays in flight in this tool's table of paused calls, keyed by the keel call attempt that
//! paused, until the host's answer re-enters the tool.

use crate::elicitation::{response_schema, Answered, Elicitation, ElicitationAnswer, PausedState};
use crate::server::{difference, McpToolInfo};
use crate::transport::{list_all, CallAnswer, CallStep, McpTransport, PausedCall, TransportError};
use keel::chat::ToolOutput;
use keel::env::{BoxFuture, Clock};
use keel::interaction::attribution::ToolInvocation;
use keel::json::Json;
use keel::tool::{Invocation, Tool, ToolContext, ToolDefinitionInput, ToolError, ToolInputRequest};
use serde_json::Value;
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The most paused calls one tool keeps; past it the oldest is dropped (its server is told
/// the user canceled). A run canceled while its call waited leaves its entry behind.
pub const MAX_PAUSED_CALLS: usize = 256;

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
    /// Declared safe to send twice (Unknown policy `Retry`); set by `McpTools::keel_tools`.
    pub(crate) retry_safe: bool,
    /// Calls in flight waiting for the answer to their server's question, by key (with the
    /// order they paused in, to drop the oldest first).
    paused: Mutex<BTreeMap<String, (u64, PausedCall)>>,
    /// Numbers the keys of calls run without a keel attribution, and orders the table.
    paused_count: AtomicU64,
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
        McpTool {
            server,
            keel_name,
            info,
            schema,
            transport,
            clock,
            retry,
            checked: AtomicU64::new(generation),
            retry_safe: false,
            paused: Mutex::new(BTreeMap::new()),
            paused_count: AtomicU64::new(0),
        }
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
    async fn attempt(&self, arguments: &serde_json::Map<String, Value>) -> Result<CallStep, Attempt> {
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
            // The answers given in this conversation with the server so far, and the ones to
            // give again if a call sent anew asks the same questions.
            let mut history = Vec::new();
            let mut reuse = VecDeque::new();
            let mut step = match cx.continuation() {
                None => self.send(&arguments, &cx).await?,
                Some(continuation) => {
                    let state = PausedState::from_json(continuation.state().value())
                        .ok_or_else(|| ToolError::host_failure("the saved state of this paused MCP call is unreadable"))?;
                    let response = continuation.response().value().clone();
                    let answer = ElicitationAnswer::from_json(&response)
                        .ok_or_else(|| ToolError::host_failure("the answer to the MCP server's question is unreadable"))?;
                    let mut answered = state.answered;
                    answered.push(Answered { question: state.question, answer: response });
                    match self.take_paused(&state.key) {
                        Some(paused) => {
                            history = answered;
                            paused.answer(answer).await.map_err(|e| self.after_sent(e))?
                        }
                        // The call that asked was in flight in a process that ended (or was
                        // dropped from the table): it may have acted.
                        None if self.retry_safe => {
                            reuse = answered.into();
                            self.send(&arguments, &cx).await?
                        }
                        None => {
                            return Err(ToolError::host_failure(format!(
                                "the call of `{}` on MCP server `{}` asked for input and was in flight in a process that has ended; it may have acted and is not sent again (declare the tool retry-safe to have it sent again, with the answers already given reused)",
                                self.info.name, self.server
                            )))
                        }
                    }
                }
            };
            loop {
                let paused = match step {
                    CallStep::Answered(answer) => return answer_to_outcome(&answer),
                    CallStep::Asked(paused) => paused,
                };
                // A call sent anew gets the earlier answers again, in order, while the server
                // asks exactly the same questions; anything else goes to the host.
                if reuse.front().is_some_and(|a: &Answered| &a.question == paused.question()) {
                    let again = reuse.pop_front().expect("checked above");
                    let answer = ElicitationAnswer::from_json(&again.answer)
                        .ok_or_else(|| ToolError::host_failure("a saved answer to the MCP server's question is unreadable"))?;
                    history.push(again);
                    step = paused.answer(answer).await.map_err(|e| self.after_sent(e))?;
                    continue;
                }
                reuse.clear();
                match self.input_request(&paused, &cx, &history) {
                    Ok((key, request)) => {
                        self.keep_paused(key, paused);
                        return Err(ToolError::InputRequired(request));
                    }
                    // A question keel cannot put to the host (a requested schema that does not
                    // compile, too large): the server is told the user canceled.
                    Err(_) => step = paused.answer(ElicitationAnswer::Cancel).await.map_err(|e| self.after_sent(e))?,
                }
            }
        })
    }
}

impl McpTool {
    /// Sends the call: attempts that provably sent nothing are tried again within the
    /// bounds; the first step of the call that was sent is returned.
    async fn send(&self, arguments: &serde_json::Map<String, Value>, cx: &ToolContext) -> Result<CallStep, ToolError> {
        let attempts = self.retry.attempts();
        let mut attempt = 1;
        loop {
            if cx.is_cancelled() {
                // Nothing of this attempt was sent yet.
                return Err(ToolError::failed("the call was canceled before it was sent"));
            }
            match self.attempt(arguments).await {
                Ok(step) => return Ok(step),
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
                Err(Attempt::Transport(other)) => return Err(self.after_sent(other)),
            }
        }
    }

    /// The outcome of a call whose request was handed over: a refusal is an error the model
    /// sees; anything else lost the answer, so the call may have acted: Unknown. Never sent
    /// again here; the tool's Unknown policy decides (held for the host unless declared
    /// retry-safe).
    fn after_sent(&self, error: TransportError) -> ToolError {
        match error {
            TransportError::Refused { code, message } => {
                ToolError::failed(format!("the MCP server `{}` refused the call (error {code}): {message}", self.server))
            }
            TransportError::Lost(message) | TransportError::NotSent(message) => ToolError::host_failure(format!(
                "the answer of MCP server `{}` to `{}` was lost after the call was sent: {message}",
                self.server, self.info.name
            )),
        }
    }

    /// The keel input request for a server's question, and the key its paused call is kept
    /// under: the keel call attempt that pauses (unique in the store), so an answer reaching
    /// another process finds nothing instead of another call.
    fn input_request(&self, paused: &PausedCall, cx: &ToolContext, history: &[Answered]) -> Result<(String, ToolInputRequest), String> {
        let question = paused.question().clone();
        let key = match ToolInvocation::from_context(cx) {
            Some(invocation) => invocation.effect_id().as_str().to_owned(),
            None => format!("local-{}", self.paused_count.fetch_add(1, Ordering::SeqCst)),
        };
        let elicitation = Elicitation {
            server: self.server.clone(),
            tool: self.info.name.clone(),
            message: question.message.clone(),
            requested_schema: question.requested_schema.clone(),
        };
        let prompt = elicitation.prompt()?;
        let schema = Json::from_serde_value(&response_schema(&question.requested_schema)).map_err(|e| e.to_string())?;
        let state = PausedState { key: key.clone(), question, answered: history.to_vec() }.to_json()?;
        let request = ToolInputRequest::from_values(prompt, schema, state).map_err(|e| e.to_string())?;
        Ok((key, request))
    }

    fn table(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, (u64, PausedCall)>> {
        // Plain data: a panic while it was held leaves it whole.
        self.paused.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn keep_paused(&self, key: String, paused: PausedCall) {
        let order = self.paused_count.fetch_add(1, Ordering::SeqCst);
        let mut table = self.table();
        table.insert(key, (order, paused));
        while table.len() > MAX_PAUSED_CALLS {
            let oldest = table.iter().min_by_key(|(_, (order, _))| *order).map(|(k, _)| k.clone());
            match oldest {
                Some(k) => drop(table.remove(&k)),
                None => break,
            }
        }
    }

    fn take_paused(&self, key: &str) -> Option<PausedCall> {
        self.table().remove(key).map(|(_, paused)| paused)
    }

    /// How many calls wait for the answer to their server's question in this process.
    pub fn paused_calls(&self) -> usize {
        self.table().len()
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
