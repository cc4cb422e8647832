//! An MCP server in the same process, behind the [`McpTransport`] seam: no I/O, no tokio, no
//! threads, every answer ready at once. The simulator and tests drive MCP tools with it and
//! inject the faults a real server meets (a call refused before it was sent, an answer lost
//! after the call ran, the server down, its tool list changed), deterministically. A tool can
//! ask the user a question before it answers ([`InProcessServer::asking`]), as a server's
//! `elicitation/create` does.

use crate::elicitation::ElicitationAnswer;
use crate::transport::{CallAnswer, CallStep, ElicitationQuestion, McpTransport, PausedCall, ToolPage, TransportError};
use keel::env::BoxFuture;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

/// What the in-process server does to the next call (in injection order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The next call is not sent (the server could not be reached); it does not run.
    RefuseSend,
    /// The next call runs, then its answer is lost (the process died, the connection dropped).
    LoseAnswer,
    /// The next call is lost before it ran; the client cannot tell this from `LoseAnswer`.
    LoseRequest,
}

/// A tool's code in the in-process server: arguments in, a `CallToolResult` object out.
pub type Handler = dyn Fn(&str, &Map<String, Value>) -> Value + Send + Sync;

/// The code of a tool that asked first: its arguments and the user's answer in, a
/// `CallToolResult` object out.
pub type AnswerHandler = dyn Fn(&Map<String, Value>, &ElicitationAnswer) -> Value + Send + Sync;

#[derive(Clone)]
struct Asking {
    question: ElicitationQuestion,
    then: Arc<AnswerHandler>,
}

struct State {
    tools: Vec<Value>,
    page_size: usize,
    generation: u64,
    /// Queued faults, each for any tool (`None`) or one tool by name.
    faults: VecDeque<(Option<String>, Fault)>,
    up: bool,
    executed: Vec<(String, Value)>,
    asking: BTreeMap<String, Asking>,
    replies: Vec<(String, ElicitationAnswer)>,
}

/// An in-process MCP server. Clone it to keep a handle for injecting faults while an agent
/// uses it.
#[derive(Clone)]
pub struct InProcessServer {
    state: Arc<Mutex<State>>,
    handler: Arc<Handler>,
}

impl InProcessServer {
    /// A server listing `tools` (MCP tool objects: `name`, `description`, `inputSchema`,
    /// `annotations`) and answering calls with `handler`.
    pub fn new(tools: Vec<Value>, handler: impl Fn(&str, &Map<String, Value>) -> Value + Send + Sync + 'static) -> InProcessServer {
        InProcessServer {
            state: Arc::new(Mutex::new(State {
                tools,
                page_size: 100,
                generation: 0,
                faults: VecDeque::new(),
                up: true,
                executed: Vec::new(),
                asking: BTreeMap::new(),
                replies: Vec::new(),
            })),
            handler: Arc::new(handler),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain data behind: keep using it.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Lists at most `n` tools per `tools/list` page (at least 1).
    pub fn page_size(self, n: usize) -> InProcessServer {
        self.state().page_size = n.max(1);
        self
    }

    /// Replaces the tool list and announces it (as `notifications/tools/list_changed`).
    pub fn set_tools(&self, tools: Vec<Value>) {
        let mut s = self.state();
        s.tools = tools;
        s.generation += 1;
    }

    /// Queues a fault for the next call.
    pub fn inject(&self, fault: Fault) {
        self.state().faults.push_back((None, fault));
    }

    /// Queues a fault for the next call of the tool `name` (calls of other tools pass).
    pub fn inject_for(&self, name: impl Into<String>, fault: Fault) {
        self.state().faults.push_back((Some(name.into()), fault));
    }

    /// Takes the server down (`false`: every request is not sent) or up again (which counts
    /// as a restart: the tool list is to be read again).
    pub fn set_up(&self, up: bool) {
        let mut s = self.state();
        if up && !s.up {
            s.generation += 1;
        }
        s.up = up;
    }

    /// Every call that ran on the server, in order: tool name and arguments.
    pub fn executed(&self) -> Vec<(String, Value)> {
        self.state().executed.clone()
    }

    /// A call of the tool `name` asks `question` once it runs, then answers with `then` given
    /// the user's answer (instead of the server's handler). A fault queued for the call
    /// applies when it answers.
    pub fn asking(
        self,
        name: impl Into<String>,
        question: ElicitationQuestion,
        then: impl Fn(&Map<String, Value>, &ElicitationAnswer) -> Value + Send + Sync + 'static,
    ) -> InProcessServer {
        self.state().asking.insert(name.into(), Asking { question, then: Arc::new(then) });
        self
    }

    /// Every answer to a question that reached the server, in order: tool name and answer.
    pub fn replies(&self) -> Vec<(String, ElicitationAnswer)> {
        self.state().replies.clone()
    }
}

impl McpTransport for InProcessServer {
    fn open(&self) -> BoxFuture<'_, Result<(), TransportError>> {
        let up = self.state().up;
        Box::pin(async move { if up { Ok(()) } else { Err(TransportError::NotSent("the in-process server is down".to_owned())) } })
    }

    fn list_tools(&self, cursor: Option<String>) -> BoxFuture<'_, Result<ToolPage, TransportError>> {
        let s = self.state();
        let result = if !s.up {
            Err(TransportError::NotSent("the in-process server is down".to_owned()))
        } else {
            match cursor.as_deref().map(str::parse::<usize>) {
                Some(Err(_)) => Err(TransportError::Refused { code: -32602, message: "invalid cursor".to_owned() }),
                parsed => {
                    let start = parsed.and_then(Result::ok).unwrap_or(0).min(s.tools.len());
                    let end = (start + s.page_size).min(s.tools.len());
                    Ok(ToolPage { tools: s.tools[start..end].to_vec(), next_cursor: (end < s.tools.len()).then(|| end.to_string()) })
                }
            }
        };
        Box::pin(async move { result })
    }

    fn call_tool(&self, name: String, arguments: Map<String, Value>) -> BoxFuture<'_, Result<CallStep, TransportError>> {
        let mut s = self.state();
        let result = if !s.up {
            Err(TransportError::NotSent("the in-process server is down".to_owned()))
        } else {
            let next = s.faults.iter().position(|(target, _)| target.as_deref().is_none_or(|t| t == name));
            match next.and_then(|i| s.faults.remove(i)).map(|(_, fault)| fault) {
                Some(Fault::RefuseSend) => Err(TransportError::NotSent("injected: the call was not sent".to_owned())),
                Some(Fault::LoseRequest) => Err(TransportError::Lost("injected: the request was lost".to_owned())),
                fault => {
                    let known = s.tools.iter().any(|t| t.get("name").and_then(Value::as_str) == Some(name.as_str()));
                    if !known {
                        Err(TransportError::Refused { code: -32602, message: format!("Tool {name} not found") })
                    } else {
                        s.executed.push((name.clone(), Value::Object(arguments.clone())));
                        let lose = fault == Some(Fault::LoseAnswer);
                        match s.asking.get(&name).cloned() {
                            Some(asking) => {
                                let state = self.state.clone();
                                let resume: crate::transport::Resume = Box::new(move |answer: ElicitationAnswer| {
                                    state.lock().unwrap_or_else(|p| p.into_inner()).replies.push((name, answer.clone()));
                                    let result = (asking.then)(&arguments, &answer);
                                    Box::pin(std::future::ready(if lose {
                                        Err(TransportError::Lost("injected: the answer was lost".to_owned()))
                                    } else {
                                        Ok(CallStep::Answered(CallAnswer(result)))
                                    }))
                                });
                                Ok(CallStep::Asked(PausedCall::new(asking.question, resume)))
                            }
                            None => {
                                let answer = (self.handler)(&name, &arguments);
                                if lose {
                                    Err(TransportError::Lost("injected: the answer was lost".to_owned()))
                                } else {
                                    Ok(CallStep::Answered(CallAnswer(answer)))
                                }
                            }
                        }
                    }
                }
            }
        };
        drop(s);
        Box::pin(async move { result })
    }

    fn list_generation(&self) -> u64 {
        self.state().generation
    }
}
