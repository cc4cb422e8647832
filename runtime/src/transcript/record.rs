//! The recording wrappers: a model client and tools that forward every call unchanged and
//! write what happened into one shared [`TranscriptRecorder`].

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::{
    ModelCallRecord, ModelOutcome, ToolCallRecord, ToolOutcome, Transcript, TranscriptError, MAX_TRANSCRIPT_CALLS,
};
use crate::chat::{Request, Response};
use crate::env::{BoxFuture, Clock};
use crate::interaction::model::{ModelCallContext, ModelClient, ModelDeltaStream, ModelError, ModelStreamer};
use crate::chat::{Accumulator, ResponseDelta};
use futures::StreamExt;
use crate::tool::{Concurrency, Invocation, Tool, ToolContext, ToolDefinitionInput, ToolError};
use crate::chat::ToolOutput;

/// Recorded calls, each with the order it started in (calls may end out of order).
#[derive(Default)]
struct Calls {
    model: Vec<(u64, ModelCallRecord)>,
    tools: Vec<(u64, ToolCallRecord)>,
    started: u64,
    dropped: u64,
}

/// Where the recording wrappers write; shared by the model and every tool of one run.
pub struct TranscriptRecorder {
    clock: Arc<dyn Clock>,
    start_ms: u64,
    calls: Mutex<Calls>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl TranscriptRecorder {
    /// A recorder timing calls on `clock` (keel's abstract clock: `env.clock`) from now.
    pub fn new(clock: Arc<dyn Clock>) -> Arc<TranscriptRecorder> {
        let start_ms = clock.now().as_millis();
        Arc::new(TranscriptRecorder { clock, start_ms, calls: Mutex::new(Calls::default()) })
    }

    fn now_ms(&self) -> u64 {
        self.clock.now().as_millis().saturating_sub(self.start_ms)
    }

    /// The order number of a call starting now.
    fn start(&self) -> u64 {
        let mut calls = lock(&self.calls);
        calls.started += 1;
        calls.started
    }

    fn full(calls: &Calls) -> bool {
        calls.model.len() + calls.tools.len() >= MAX_TRANSCRIPT_CALLS
    }

    fn push_model(&self, order: u64, record: ModelCallRecord) {
        let mut calls = lock(&self.calls);
        if Self::full(&calls) {
            calls.dropped += 1;
        } else {
            calls.model.push((order, record));
        }
    }

    fn push_tool(&self, order: u64, record: ToolCallRecord) {
        let mut calls = lock(&self.calls);
        if Self::full(&calls) {
            calls.dropped += 1;
        } else {
            calls.tools.push((order, record));
        }
    }

    /// A wrapper for [`AgentBuilder::wrap_tools`](crate::agent::AgentBuilder::wrap_tools) that
    /// records every tool of the agent (its declared options unchanged):
    /// `Agent::builder(..).wrap_tools(recorder.tool_wrapper())`.
    pub fn tool_wrapper(
        self: &Arc<Self>,
    ) -> impl Fn(Arc<dyn Tool>, &crate::agent::ToolOptions) -> Arc<dyn Tool> + Send + Sync + 'static {
        let recorder = self.clone();
        move |inner, _options| Arc::new(RecordingTool::new(inner, recorder.clone())) as Arc<dyn Tool>
    }

    fn push_model_outcome(&self, order: u64, started_ms: u64, request: Request, answer: &Result<Response, ModelError>) {
        let outcome = match answer {
            Ok(r) => ModelOutcome::Response(r.clone()),
            Err(ModelError::Provider(m)) => ModelOutcome::Error { class: "provider".into(), message: m.clone() },
            Err(ModelError::Transient(m)) => ModelOutcome::Error { class: "transient".into(), message: m.clone() },
            Err(ModelError::Host(m)) => ModelOutcome::Error { class: "host".into(), message: m.clone() },
            Err(ModelError::Unknown(m)) => ModelOutcome::Error { class: "unknown".into(), message: m.clone() },
        };
        let ended_ms = self.now_ms();
        self.push_model(order, ModelCallRecord { sequence: 0, started_ms, ended_ms, request, outcome });
    }

    /// The transcript so far, calls in the order they started (model calls numbered 1, 2, ...).
    pub fn transcript(&self) -> Transcript {
        let calls = lock(&self.calls);
        let mut model = calls.model.clone();
        model.sort_by_key(|(order, _)| *order);
        let mut tools = calls.tools.clone();
        tools.sort_by_key(|(order, _)| *order);
        Transcript {
            model_calls: model
                .into_iter()
                .enumerate()
                .map(|(i, (_, mut r))| {
                    r.sequence = i as u64 + 1;
                    r
                })
                .collect(),
            tool_calls: tools.into_iter().map(|(_, r)| r).collect(),
            dropped: calls.dropped,
        }
    }

    /// Writes the transcript to `path` as canonical JSON; refuses one with dropped calls.
    pub fn write(&self, path: impl AsRef<Path>) -> Result<Transcript, TranscriptError> {
        let transcript = self.transcript();
        if transcript.dropped > 0 {
            return Err(TranscriptError::Incomplete(transcript.dropped));
        }
        let path = path.as_ref();
        std::fs::write(path, transcript.encode())
            .map_err(|source| TranscriptError::Write { path: path.to_path_buf(), source })?;
        Ok(transcript)
    }
}

/// A model client that records every request and answer of `inner`.
pub struct RecordingModel<M> {
    inner: M,
    recorder: Arc<TranscriptRecorder>,
}

impl<M: ModelClient> RecordingModel<M> {
    pub fn new(inner: M, recorder: Arc<TranscriptRecorder>) -> RecordingModel<M> {
        RecordingModel { inner, recorder }
    }

    async fn record(&self, cx: &ModelCallContext, request: Request) -> Result<Response, ModelError> {
        let order = self.recorder.start();
        let started_ms = self.recorder.now_ms();
        let answer = self.inner.call(cx, request.clone()).await;
        self.recorder.push_model_outcome(order, started_ms, request, &answer);
        answer
    }
}

impl<M: ModelClient> ModelClient for RecordingModel<M> {
    fn call<'a>(&'a self, cx: &'a ModelCallContext, request: Request) -> BoxFuture<'a, Result<Response, ModelError>> {
        Box::pin(self.record(cx, request))
    }
}

/// A streaming model client that records every request of `inner` and the complete response
/// its deltas add up to (a transcript keeps whole responses: a replay serves them whole or
/// streamed, as the replaying agent asks). The deltas pass through unchanged as they arrive.
pub struct RecordingStreamer<M> {
    inner: M,
    recorder: Arc<TranscriptRecorder>,
}

impl<M: ModelStreamer> RecordingStreamer<M> {
    pub fn new(inner: M, recorder: Arc<TranscriptRecorder>) -> RecordingStreamer<M> {
        RecordingStreamer { inner, recorder }
    }
}

/// Where a recorded stream is while it is read.
struct Tap<'a> {
    deltas: ModelDeltaStream<'a>,
    accumulator: Option<Accumulator>,
    recorder: Arc<TranscriptRecorder>,
    order: u64,
    started_ms: u64,
    request: Option<Request>,
}

impl Tap<'_> {
    /// Records the call once, when the stream ends (or fails).
    fn finish(&mut self, failed: Option<ModelError>) {
        let (Some(request), Some(acc)) = (self.request.take(), self.accumulator.take()) else { return };
        let answer = match failed {
            Some(e) => Err(e),
            None => acc.finish().map_err(|e| ModelError::Provider(format!("the streamed response does not add up: {e}"))),
        };
        self.recorder.push_model_outcome(self.order, self.started_ms, request, &answer);
    }
}

impl Drop for Tap<'_> {
    fn drop(&mut self) {
        // A stream dropped before its end was cut off: its outcome is unknown.
        if self.request.is_some() {
            self.finish(Some(ModelError::Unknown("the stream was dropped before it ended".into())));
        }
    }
}

impl<M: ModelStreamer> ModelStreamer for RecordingStreamer<M> {
    fn stream<'a>(&'a self, cx: &'a ModelCallContext, request: Request) -> BoxFuture<'a, Result<ModelDeltaStream<'a>, ModelError>> {
        Box::pin(async move {
            let order = self.recorder.start();
            let started_ms = self.recorder.now_ms();
            match self.inner.stream(cx, request.clone()).await {
                Err(e) => {
                    self.recorder.push_model_outcome(order, started_ms, request, &Err(e.clone()));
                    Err(e)
                }
                Ok(deltas) => {
                    let tap = Tap {
                        deltas,
                        accumulator: Some(Accumulator::new()),
                        recorder: self.recorder.clone(),
                        order,
                        started_ms,
                        request: Some(request),
                    };
                    let stream = futures::stream::unfold(tap, |mut tap| async move {
                        match tap.deltas.next().await {
                            Some(Ok(delta)) => {
                                let pushed = tap.accumulator.as_mut().map(|a| a.push(&delta));
                                if let Some(Err(e)) = pushed {
                                    tap.finish(Some(ModelError::Provider(format!("the streamed response does not add up: {e}"))));
                                }
                                Some((Ok::<ResponseDelta, ModelError>(delta), tap))
                            }
                            Some(Err(e)) => {
                                tap.finish(Some(e.clone()));
                                Some((Err(e), tap))
                            }
                            None => {
                                tap.finish(None);
                                None
                            }
                        }
                    });
                    Ok(Box::pin(stream) as ModelDeltaStream<'a>)
                }
            }
        })
    }
}

/// A tool that records every call of `inner`: arguments, result or error, timing.
pub struct RecordingTool<T> {
    inner: T,
    recorder: Arc<TranscriptRecorder>,
}

impl<T: Tool> RecordingTool<T> {
    pub fn new(inner: T, recorder: Arc<TranscriptRecorder>) -> RecordingTool<T> {
        RecordingTool { inner, recorder }
    }

    async fn record(&self, invocation: &Invocation, cx: ToolContext) -> Result<ToolOutput, ToolError> {
        let order = self.recorder.start();
        let started_ms = self.recorder.now_ms();
        let answer = cx.continuation().map(|c| c.response().canonical().to_owned());
        let outcome = self.inner.call(invocation, cx).await;
        let error = |class: &str, message: String| ToolOutcome::Error { class: class.into(), message };
        let recorded = match &outcome {
            Ok(output) => ToolOutcome::Result(output.content.clone()),
            Err(e @ (ToolError::Failed { .. } | ToolError::InvalidInputRequest(_))) => error("failed", e.to_string()),
            Err(e @ ToolError::AuthorizationDenied { .. }) => error("denied", e.to_string()),
            Err(e @ ToolError::InputRequired(_)) => error("input_required", e.to_string()),
            Err(e @ ToolError::HostFailure { .. }) => error("host_failure", e.to_string()),
            Err(e @ ToolError::Canceled) => error("canceled", e.to_string()),
            Err(e @ ToolError::DeadlineExceeded) => error("deadline", e.to_string()),
        };
        let call = invocation.call();
        self.recorder.push_tool(
            order,
            ToolCallRecord {
                id: call.id.clone(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
                started_ms,
                ended_ms: self.recorder.now_ms(),
                outcome: recorded,
                answer,
            },
        );
        outcome
    }
}

impl<T: Tool> Tool for RecordingTool<T> {
    fn spec(&self) -> ToolDefinitionInput {
        self.inner.spec()
    }

    fn call<'a>(&'a self, invocation: &'a Invocation, cx: ToolContext) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(self.record(invocation, cx))
    }

    fn concurrency(&self, invocation: &Invocation) -> Option<Concurrency> {
        self.inner.concurrency(invocation)
    }

    fn returns_direct_result(&self) -> bool {
        self.inner.returns_direct_result()
    }
}
