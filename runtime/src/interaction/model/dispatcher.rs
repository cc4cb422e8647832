//! The model Dispatcher: executes `model_call` Effects, and nothing else.

use super::client::ModelMode;
use super::config::DispatcherConfig;
use super::context::ModelCallContext;
use super::error::ModelError;
use super::observer::{observe, ModelObservationFailures, ModelObserver, PanicCounter};
use super::prepare::prepare_request;
use super::reducer::ModelContextReducer;
use super::stream::stream_response;
use crate::chat::{Message, Request, Response, ToolDefinition, Usage};
use crate::env::{BoxFuture, CancelToken, Clock};
use crate::interaction::run_clock::CallClock;
use crate::interaction::attribution::ModelInvocation;
use crate::interaction::diagnostic::normalize_str;
use crate::interaction::error::InteractionError;
use crate::interaction::manifest::ModelManifest;
use crate::interaction::protocol::{ModelCallEffect, ModelResult};
use crate::interaction::wire::Wire;
use crate::json::Payload;
use crate::kernel::dispatcher::{DeltaSink, DispatchContext, DispatchError, DispatchPolicy, Dispatcher, EffectRequest};
use crate::kernel::effect::Settlement;
use futures::future::{select, Either};
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

/// The model boundary of one Interaction Definition.
///
/// It owns exactly one model (complete or streaming), an optional observer and an optional
/// context reducer, and a copy of the Definition's manifest taken at construction. It never
/// runs tools, starts children or decides completion. Every outcome of the model itself is a
/// definite settlement (`response`, `error` or `host_error`); only an Effect it cannot even
/// prepare (foreign operation, malformed payload, unknown advertisement, invalid prepared
/// request) is a [`DispatchError`], which leaves the Effect unknown: it is never retried and
/// needs explicit resolution.
pub struct ModelDispatcher {
    /// Initial definitions, then delegate definitions: the start of every call's manifest.
    visible: Vec<ToolDefinition>,
    deferred: BTreeMap<String, ToolDefinition>,
    mode: ModelMode,
    observer: Option<Arc<dyn ModelObserver>>,
    reducer: Option<Arc<dyn ModelContextReducer>>,
    instructions: Option<Message>,
    output_schema: Option<crate::json::Json>,
    clock: Option<Arc<dyn Clock>>,
    response_panics: PanicCounter,
}

impl ModelDispatcher {
    /// Binds a manifest to its model capabilities. The manifest must pass
    /// [`ModelManifest::validate`] (errors are `InvalidDispatcherConfig`); "no model" and "two
    /// models" are unrepresentable in [`ModelMode`].
    pub fn new(manifest: ModelManifest, config: DispatcherConfig) -> Result<ModelDispatcher, InteractionError> {
        manifest.validate()?;
        let visible = manifest.visible();
        Ok(ModelDispatcher {
            visible,
            deferred: manifest.deferred,
            mode: config.mode,
            observer: config.observer,
            reducer: config.reducer,
            instructions: config.instructions.map(Message::system),
            output_schema: config.output_schema,
            clock: config.clock,
            response_panics: PanicCounter::default(),
        })
    }

    /// A snapshot of the observer panics isolated so far.
    pub fn observation_failures(&self) -> ModelObservationFailures {
        ModelObservationFailures { model_response_panics: self.response_panics.get() }
    }

    async fn run(&self, request: EffectRequest, cx: DispatchContext) -> Result<Settlement, DispatchError> {
        self.attempt(request, cx, None).await.map(|(settlement, _)| settlement)
    }

    /// One attempt of the call: its settlement, and the error text when the settlement is a
    /// failure the model may not repeat ([`ModelError::Transient`]), so a caller with a retry
    /// policy can try again. `clock`, when given, replaces the configured one (a runtime's).
    pub(crate) async fn attempt(
        &self,
        request: EffectRequest,
        cx: DispatchContext,
        clock: Option<Arc<dyn Clock>>,
    ) -> Result<(Settlement, Option<String>), DispatchError> {
        let effect = ModelCallEffect::from_payload(&request.payload).map_err(unknown)?;
        // Under a time budget the clock is read before anything else: a call at or past its
        // deadline is settled without calling the model.
        let timed = match (effect.time, clock.or_else(|| self.clock.clone())) {
            (None, _) => None,
            (Some(_), None) => {
                let text = "the run has a time budget but its model dispatcher has no clock: run it with a keel Runtime, or give the DispatcherConfig a clock (`with_clock`)";
                return Ok((self.settle(&ModelInvocation::from_effect(&request, &effect), ModelResult::host_error(text))?, None));
            }
            (Some(time), Some(clock)) => {
                let started_ms = clock.now().as_millis();
                if let Some(deadline_ms) = time.deadline_ms.filter(|d| started_ms >= *d) {
                    let result = ModelResult::OutOfTime { at_ms: started_ms, deadline_ms };
                    return Ok((self.settle(&ModelInvocation::from_effect(&request, &effect), result)?, None));
                }
                Some((clock, started_ms))
            }
        };
        let context = effect.request(&request.segments).map_err(unknown)?;
        // Only a reducer reads the context as it was before reduction: copy it for one alone.
        let original = self.reducer.as_ref().map(|_| context.messages.clone()).unwrap_or_default();
        let prepared = prepare_request(&self.visible, &self.deferred, &effect, context).map_err(|e| unknown_text(&e))?;
        let call = ModelCallContext { invocation: ModelInvocation::from_effect(&request, &effect), cancel: cx.cancel, output_schema: self.output_schema.clone() };
        let (mut result, transient) = self.call(&call, prepared, &original, cx.deltas.as_ref()).await?;
        if let (ModelResult::Response { clock: readings, .. }, Some((clock, started_ms))) = (&mut result, timed) {
            *readings = Some(CallClock { started_ms, settled_ms: clock.now().as_millis().max(started_ms) });
        }
        Ok((self.settle(&call.invocation, result)?, transient))
    }

    /// Reduction (if configured), then the model call, as a model result; an outcome the
    /// model reported as [`ModelError::Unknown`] is a dispatch error (Effect unknown).
    async fn call(
        &self,
        call: &ModelCallContext,
        prepared: Request,
        original: &[Message],
        deltas: Option<&DeltaSink>,
    ) -> Result<(ModelResult, Option<String>), DispatchError> {
        let (request, replacement_messages, reducer_usage) = match &self.reducer {
            None => (prepared, None, Usage::default()),
            Some(reducer) => match reduce(reducer.as_ref(), call, prepared, original).await {
                Ok(reduced) => reduced,
                Err(ReduceFailure::Settled(result, transient)) => return Ok((result, transient)),
                Err(ReduceFailure::Unknown(text)) => return Err(unknown_text(&text)),
            },
        };
        let request = match &self.instructions {
            None => request,
            Some(system) => {
                let mut request = request;
                request.messages.insert(0, system.clone());
                request
            }
        };
        let response = match until_cancelled(&call.cancel, self.call_model(call, request, deltas)).await {
            // A call ended by cancellation is an ordinary provider failure, not unknown.
            None => return Ok((ModelResult::provider_error("model call canceled"), None)),
            Some(Err(ModelError::Host(text))) => return Ok((ModelResult::host_error(&text), None)),
            Some(Err(ModelError::Provider(text))) => return Ok((ModelResult::provider_error(&text), None)),
            Some(Err(e @ ModelError::Transient(_))) => {
                let text = e.to_string();
                return Ok((ModelResult::provider_error(&text), Some(text)));
            }
            Some(Err(ModelError::Unknown(text))) => return Err(unknown_text(&format!("model outcome unknown: {text}"))),
            Some(Ok(response)) => response,
        };
        // A reducer's own model call (a summary) is part of this call's cost.
        let mut response = response;
        response.usage = response.usage.saturating_add(reducer_usage);
        if let Err(e) = response.validate() {
            return Ok((ModelResult::provider_error(&format!("model returned an invalid response: {e}")), None));
        }
        Ok((ModelResult::Response { response, replacement_messages, clock: None }, None))
    }

    async fn call_model(
        &self,
        call: &ModelCallContext,
        request: Request,
        deltas: Option<&DeltaSink>,
    ) -> Result<Response, ModelError> {
        match &self.mode {
            ModelMode::Complete(client) => client.call(call, request).await,
            ModelMode::Stream(streamer) => stream_response(streamer.as_ref(), call, request, deltas).await,
        }
    }

    /// Encodes the result; a response is observed only once it is known to settle as one.
    fn settle(&self, invocation: &ModelInvocation, result: ModelResult) -> Result<Settlement, DispatchError> {
        let settlement = match result.to_settlement() {
            Ok(settlement) => settlement,
            // Only a response can fail to encode (error texts are bounded diagnostics): one
            // that does not fit a payload is an invalid response.
            Err(e) => {
                let fallback =
                    ModelResult::provider_error(&format!("model response cannot be settled: {}", e.detail()));
                return fallback.to_settlement().map_err(|e| DispatchError::InvalidSettlement(e.to_string()));
            }
        };
        if let (ModelResult::Response { response, .. }, Some(observer)) = (&result, &self.observer) {
            if observe(observer.as_ref(), invocation, response) {
                self.response_panics.record();
            }
        }
        Ok(settlement)
    }
}

/// Why a reduction did not produce a context: a definite settlement (the model is not
/// called; `Some` text when the reducer's own model call failed transiently, so a retry
/// policy may repeat the call), or an unknown outcome of the reducer's own model call.
enum ReduceFailure {
    Settled(ModelResult, Option<String>),
    Unknown(String),
}

/// Runs the reducer and checks its result. The reducer sees the fully prepared request; the
/// messages it returns replace the request's messages (options and tools stay). The
/// replacement travels back only when it differs from the Effect's messages.
async fn reduce(
    reducer: &dyn ModelContextReducer,
    call: &ModelCallContext,
    mut request: Request,
    original: &[Message],
) -> Result<(Request, Option<Vec<Message>>, Usage), ReduceFailure> {
    let host = |text: String| ReduceFailure::Settled(ModelResult::host_error(&text), None);
    let reduction = match until_cancelled(&call.cancel, reducer.reduce_with_usage(call, &request)).await {
        None => return Err(host("model context reducer canceled".into())),
        Some(Err(ModelError::Host(e))) => return Err(host(format!("model context reducer failed: {e}"))),
        Some(Err(ModelError::Provider(e))) => {
            return Err(ReduceFailure::Settled(ModelResult::provider_error(&format!("model context reducer failed: {e}")), None))
        }
        Some(Err(ModelError::Transient(e))) => {
            let text = format!("model context reducer failed (may succeed if repeated): {e}");
            return Err(ReduceFailure::Settled(ModelResult::provider_error(&text), Some(text)));
        }
        Some(Err(ModelError::Unknown(e))) => {
            return Err(ReduceFailure::Unknown(format!("model context reducer's model call outcome unknown: {e}")))
        }
        Some(Ok(reduction)) => reduction,
    };
    request.messages = reduction.messages;
    request.validate().map_err(|e| host(format!("model context reducer returned an invalid context: {e}")))?;
    let replacement = (request.messages != original).then(|| request.messages.clone());
    Ok((request, replacement, reduction.usage))
}

/// One call of `mode`'s model, outside any Effect's own call: a reducer's summary. A stream
/// is read to its end without deltas (they would be taken for the answer's).
pub(crate) async fn call_model_once(mode: &ModelMode, cx: &ModelCallContext, request: Request) -> Result<Response, ModelError> {
    match mode {
        ModelMode::Complete(client) => client.call(cx, request).await,
        ModelMode::Stream(streamer) => stream_response(streamer.as_ref(), cx, request, None).await,
    }
}

/// `work`'s output, or `None` once `cancel` fires first. `work` is polled first, so work that
/// is already finished wins over a cancellation that is already requested.
async fn until_cancelled<F: Future>(cancel: &CancelToken, work: F) -> Option<F::Output> {
    let work = std::pin::pin!(work);
    match select(work, cancel.cancelled()).await {
        Either::Left((output, _)) => Some(output),
        Either::Right(((), _)) => None,
    }
}

fn unknown(e: InteractionError) -> DispatchError {
    unknown_text(&e.to_string())
}

fn unknown_text(text: &str) -> DispatchError {
    DispatchError::Failed(normalize_str(&format!("model dispatcher: {text}")))
}

impl Dispatcher for ModelDispatcher {
    /// Never replay: a model call costs money and may answer differently.
    fn policy(&self, _effect: &Payload) -> DispatchPolicy {
        DispatchPolicy::never()
    }

    fn dispatch<'a>(
        &'a self,
        request: EffectRequest,
        cx: DispatchContext,
    ) -> BoxFuture<'a, Result<Settlement, DispatchError>> {
        Box::pin(self.run(request, cx))
    }
}

impl std::fmt::Debug for ModelDispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let visible: Vec<&str> = self.visible.iter().map(|d| d.name.as_str()).collect();
        let deferred: Vec<&str> = self.deferred.keys().map(String::as_str).collect();
        f.debug_struct("ModelDispatcher")
            .field("visible", &visible)
            .field("deferred", &deferred)
            .field("mode", &self.mode)
            .field("observer", &self.observer.is_some())
            .field("reducer", &self.reducer.is_some())
            .field("observation_failures", &self.observation_failures())
            .finish()
    }
}
