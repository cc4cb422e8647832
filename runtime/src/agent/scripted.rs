//! An offline model that follows a script: for examples, tests and simulations.

use crate::chat::{FinishReason, Message, Request, Response, ResponseDelta, ToolCall, Usage};
use crate::env::BoxFuture;
use crate::interaction::model::{ModelCallContext, ModelClient, ModelDeltaStream, ModelError, ModelIdentity, ModelStreamer};

#[derive(Clone, Debug)]
enum Turn {
    Text(String),
    Calls(Vec<(String, String)>),
}

/// A model that answers its n-th call with the n-th turn of a script, whatever the request
/// says. The answer depends only on the call's sequence number, so a call repeated after a
/// crash gets the same answer. Calls beyond the script get the last text turn (or `"done"`).
///
/// It is a real [`ModelClient`] and [`ModelStreamer`] (streamed as small text deltas), meant for
/// programs that must run offline: examples, tests, demos.
///
/// ```
/// use keel::prelude::*;
/// let model = ScriptedModel::new()
///     .call_tool("get_weather", r#"{"city":"Paris"}"#)
///     .then_text("It is sunny.");
/// # let _ = model;
/// ```
#[derive(Clone, Debug, Default)]
pub struct ScriptedModel {
    turns: Vec<Turn>,
    chunk_bytes: usize,
}

/// The streamed chunk size when none is set.
const DEFAULT_CHUNK_BYTES: usize = 4;

impl ScriptedModel {
    /// An empty script (every call answers `"done"`).
    pub fn new() -> ScriptedModel {
        ScriptedModel { turns: Vec::new(), chunk_bytes: DEFAULT_CHUNK_BYTES }
    }

    /// Next turn: call `tool` once with `arguments` (JSON text).
    pub fn call_tool(self, tool: impl Into<String>, arguments: impl Into<String>) -> ScriptedModel {
        self.call_tools([(tool.into(), arguments.into())])
    }

    /// Next turn: call several tools in one response, in this order.
    pub fn call_tools<I, N, A>(mut self, calls: I) -> ScriptedModel
    where
        I: IntoIterator<Item = (N, A)>,
        N: Into<String>,
        A: Into<String>,
    {
        self.turns.push(Turn::Calls(calls.into_iter().map(|(n, a)| (n.into(), a.into())).collect()));
        self
    }

    /// Next turn: answer with final text.
    pub fn then_text(mut self, text: impl Into<String>) -> ScriptedModel {
        self.turns.push(Turn::Text(text.into()));
        self
    }

    /// Streams responses in chunks of at most `bytes` bytes (at least 1).
    pub fn chunk_bytes(mut self, bytes: usize) -> ScriptedModel {
        self.chunk_bytes = bytes.max(1);
        self
    }

    /// The response to call number `sequence` (1-based).
    pub fn answer(&self, sequence: u32) -> Response {
        let index = usize::try_from(sequence).ok().and_then(|s| s.checked_sub(1));
        let turn = index.and_then(|i| self.turns.get(i)).cloned().or_else(|| {
            self.turns.iter().rev().find(|t| matches!(t, Turn::Text(_))).cloned()
        });
        match turn {
            Some(Turn::Calls(calls)) => {
                let calls = calls
                    .iter()
                    .enumerate()
                    .map(|(i, (name, args))| ToolCall::new(format!("call_{sequence}_{i}"), name.clone(), args.clone()))
                    .collect();
                Response::new(Message::assistant_with_calls("", calls), FinishReason::ToolCalls, Usage::new(1, 1))
            }
            Some(Turn::Text(text)) => Response::new(Message::assistant(text), FinishReason::Stop, Usage::new(1, 1)),
            None => Response::new(Message::assistant("done"), FinishReason::Stop, Usage::new(1, 1)),
        }
    }
}

impl ModelClient for ScriptedModel {
    fn call<'a>(&'a self, cx: &'a ModelCallContext, _request: Request) -> BoxFuture<'a, Result<Response, ModelError>> {
        let response = self.answer(cx.invocation.model_call_sequence());
        Box::pin(async move { Ok(response) })
    }

    fn identity(&self) -> ModelIdentity {
        ModelIdentity::new("keel", "scripted")
    }
}

impl ModelStreamer for ScriptedModel {
    fn stream<'a>(&'a self, cx: &'a ModelCallContext, _request: Request) -> BoxFuture<'a, Result<ModelDeltaStream<'a>, ModelError>> {
        let response = self.answer(cx.invocation.model_call_sequence());
        let deltas: Vec<Result<ResponseDelta, ModelError>> =
            ResponseDelta::split(&response, self.chunk_bytes).into_iter().map(Ok).collect();
        Box::pin(async move { Ok(Box::pin(futures::stream::iter(deltas)) as ModelDeltaStream<'a>) })
    }

    fn identity(&self) -> ModelIdentity {
        ModelIdentity::new("keel", "scripted")
    }
}
