//! The simulated model: a script of turns chosen by the model call's sequence number alone
//! (so a never-started call performed later by the host gets the same answer), in complete or
//! streaming mode, with an optional context reducer and the completion validator.

use super::context::Context;
use super::ledger::{Caller, ModelCallRecord};
use super::spec::{Finish, ModelMode, ModelSpec, Trigger, Turn};
use keel::chat::{FinishReason, Message, Request, Response, ResponseDelta, ToolCall, Usage};
use keel::env::BoxFuture;
use keel::interaction::protocol::ModelResult;
use keel::interaction::completion::{CompletionCandidate, CompletionDecision, CompletionValidator};
use keel::interaction::model::{
    DispatcherConfig, ModelCallContext, ModelClient, ModelContextReducer, ModelDeltaStream, ModelError, ModelStreamer,
};
use std::sync::Arc;
use std::time::Duration;

/// The chat finish reason of a scripted one.
pub fn finish_reason(f: Finish) -> FinishReason {
    match f {
        Finish::Stop => FinishReason::Stop,
        Finish::ToolCalls => FinishReason::ToolCalls,
        Finish::Length => FinishReason::Length,
        Finish::ContentFilter => FinishReason::ContentFilter,
        Finish::Refusal => FinishReason::Refusal,
        Finish::Other => FinishReason::Other,
    }
}

/// The answer to model call `sequence` (1-based): a pure function of the script.
pub fn scripted_answer(spec: &ModelSpec, sequence: u32) -> Result<Response, ModelError> {
    let turn = usize::try_from(sequence).ok().and_then(|s| s.checked_sub(1)).and_then(|i| spec.turns.get(i));
    match turn {
        None => Ok(Response::new(Message::assistant(spec.fallback.clone()), FinishReason::Stop, Usage::new(1, 1))),
        Some(Turn::Text { text, finish }) => {
            Ok(Response::new(Message::assistant(text.clone()), finish_reason(*finish), Usage::new(1, 1)))
        }
        Some(Turn::Calls { calls, finish }) => {
            let calls: Vec<ToolCall> = calls.iter().map(|c| ToolCall::new(&c.id, &c.name, &c.arguments)).collect();
            Ok(Response::new(Message::assistant_with_calls("", calls), finish_reason(*finish), Usage::new(1, 1)))
        }
        Some(Turn::ProviderError { message }) => Err(ModelError::Provider(message.clone())),
        Some(Turn::HostError { message }) => Err(ModelError::Host(message.clone())),
    }
}

/// One simulated model (the root's, or a delegate's).
pub struct SimModel {
    /// `root` or the delegate name.
    pub name: String,
    pub spec: ModelSpec,
    pub cx: Arc<Context>,
}

impl SimModel {
    async fn answer(&self, call: &ModelCallContext, request: Request) -> Result<Response, ModelError> {
        let invocation = &call.invocation;
        let sequence = invocation.model_call_sequence();
        let host = self.cx.ledger.is_host_performing(invocation.effect_id());
        // The recorder logged who issued this call just before it reached the model.
        let issued_by = self.cx.ledger.dispatches(invocation.effect_id()).last().map(|d| d.caller.clone());
        let caller = if host { Caller::Host } else { issued_by.unwrap_or(Caller::Engine(self.cx.incarnation())) };
        self.cx.trace(format!("model {} call {sequence} start by {caller:?} ({} messages)", self.name, request.messages.len()));
        let applied_steers = invocation.applied_steer_signal_ids();
        if self.cx.timeline.keeps() {
            for steer in &applied_steers {
                self.cx.timeline.end(&format!("steer:{}", steer.as_str()), "applied", format!("model call {sequence} applies the steer"));
            }
        }
        self.cx.ledger.record_model_call(ModelCallRecord {
            model: self.name.clone(),
            process: invocation.relation().child_key.as_ref().map_or_else(|| "root".to_owned(), |k| k.as_str().to_owned()),
            sequence,
            request,
            applied_steers,
            caller,
        });
        // The answer is fixed by the sequence: that is the truth if the call is cut off.
        let truth = match scripted_answer(&self.spec, sequence) {
            Ok(r) => Some(ModelResult::response(r)),
            Err(ModelError::Provider(m)) => Some(ModelResult::provider_error(&m)),
            // Settled as the dispatcher settles it once no retry is left.
            Err(e @ ModelError::Transient(_)) => Some(ModelResult::provider_error(&e.to_string())),
            Err(ModelError::Host(m)) => Some(ModelResult::host_error(&m)),
            // An unknown outcome has no settlement to record as the truth.
            Err(ModelError::Unknown(_)) => None,
        };
        if let Some(Ok(s)) = truth.map(|t| t.to_settlement()) {
            self.cx.ledger.record_truth(invocation.effect_id(), s);
        }
        let (lo, hi) = self.spec.latency_ms;
        let ms = lo + self.cx.env.rng.next_u64() % (hi - lo + 1);
        self.cx.env.clock.sleep(Duration::from_millis(ms)).await;
        if self.name == "root" && !host {
            self.cx.hook(Trigger::ModelCall(sequence)).await;
        }
        let answer = scripted_answer(&self.spec, sequence);
        match &answer {
            Err(ModelError::Provider(_)) => self.cx.fired("model.provider_error"),
            Err(ModelError::Host(_)) => self.cx.fired("model.host_failure"),
            // Scripts have no unknown-outcome or transient turn (scripted_answer never returns one).
            Err(ModelError::Unknown(_) | ModelError::Transient(_)) => {}
            Ok(r) => {
                if let Some(f) = r.finish_reason {
                    if !r.tool_calls().is_empty() && !matches!(f, FinishReason::ToolCalls) {
                        self.cx.fired(&format!("model.calls_with_{}", f.as_str()));
                    }
                }
            }
        }
        self.cx.trace(format!("model {} call {sequence} end {}", self.name, if answer.is_ok() { "ok" } else { "error" }));
        answer
    }
}

impl ModelClient for SimModel {
    fn call<'a>(&'a self, cx: &'a ModelCallContext, request: Request) -> BoxFuture<'a, Result<Response, ModelError>> {
        Box::pin(self.answer(cx, request))
    }
}

impl ModelStreamer for SimModel {
    fn stream<'a>(
        &'a self,
        cx: &'a ModelCallContext,
        request: Request,
    ) -> BoxFuture<'a, Result<ModelDeltaStream<'a>, ModelError>> {
        Box::pin(async move {
            let response = self.answer(cx, request).await?;
            self.cx.fired("model.streamed");
            let deltas: Vec<Result<ResponseDelta, ModelError>> =
                ResponseDelta::split(&response, 7).into_iter().map(Ok).collect();
            Ok(Box::pin(futures::stream::iter(deltas)) as ModelDeltaStream<'a>)
        })
    }
}

/// Replaces contexts longer than four messages with one summary message.
pub struct SummaryReducer {
    pub cx: Arc<Context>,
}

impl ModelContextReducer for SummaryReducer {
    fn reduce<'a>(&'a self, _: &'a ModelCallContext, request: &'a Request) -> BoxFuture<'a, Result<Vec<Message>, String>> {
        let n = request.messages.len();
        let out = if n > 4 {
            self.cx.fired("model.reduced");
            vec![Message::user(format!("summary of {n} messages"))]
        } else {
            request.messages.clone()
        };
        Box::pin(async move { Ok(out) })
    }
}

/// The feedback text of a rejected candidate.
pub const VALIDATOR_FEEDBACK: &str = "Please try again with more detail.";

/// Rejects until the working context holds `rejections` feedback messages: a pure function of
/// the candidate, so re-running a Step after a crash decides the same.
pub fn validator(rejections: u32) -> CompletionValidator {
    Arc::new(move |c: &CompletionCandidate| {
        let seen = c.working_context().messages.iter().filter(|m| m.text().contains(VALIDATOR_FEEDBACK)).count();
        if (seen as u64) < u64::from(rejections) {
            Ok(CompletionDecision::reject(VALIDATOR_FEEDBACK))
        } else {
            Ok(CompletionDecision::accept())
        }
    })
}

/// The Dispatcher configuration of a simulated model.
pub fn dispatcher_config(model: Arc<SimModel>) -> DispatcherConfig {
    let reducer = model.spec.reducer.then(|| Arc::new(SummaryReducer { cx: model.cx.clone() }));
    let clock = model.cx.env.clock.clone();
    let mut config = match model.spec.mode {
        ModelMode::Complete => DispatcherConfig::complete(model),
        ModelMode::Stream => DispatcherConfig::stream(model),
    };
    if let Some(r) = reducer {
        config = config.with_reducer(r);
    }
    // Time budgets are measured on the simulated clock.
    config.with_clock(clock)
}
