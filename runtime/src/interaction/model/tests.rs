//! Model Dispatcher tests: every construction, preparation, reducer, streaming and settlement
//! rule with small scripted models.

use super::prepare::prepare_request;
use super::*;
use crate::chat::{
    FinishReason, Message, Request, Response, ResponseDelta, ToolCall, ToolDefinition, ToolOutput, ToolResult, Usage,
};
use crate::env::{BoxFuture, CancelToken};
use crate::interaction::attribution::ModelInvocation;
use crate::interaction::error::ErrorKind;
use crate::interaction::manifest::ModelManifest;
use crate::interaction::protocol::{
    ModelCallEffect, ModelResponseDelta, ModelResult, Steer, ToolCallEffect, ToolCallInput,
};
use crate::interaction::wire::Wire;
use crate::json::{parse, Digest, Payload};
use crate::kernel::capability::CapabilitySet;
use crate::kernel::deployment::DeploymentRef;
use crate::kernel::dispatcher::{DeltaSink, DispatchContext, DispatchError, Dispatcher, EffectRequest, ReplayPolicy};
use crate::kernel::effect::Settlement;
use crate::kernel::ids::{EffectId, IncarnationId, ProcessId, SignalId};
use crate::kernel::relation::Relation;
use crate::kernel::signal::SettlementStatus;
use crate::text::QualifiedName;
use futures::executor::block_on;
use futures::stream::{BoxStream, StreamExt};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

// ---------------------------------------------------------------- fixtures

fn tool(name: &str) -> ToolDefinition {
    ToolDefinition::new(name, format!("the {name} tool"), parse(br#"{"type":"object"}"#).unwrap())
}

/// initial [search, fetch], delegates [research], deferred {archive, calendar, zip}.
fn manifest() -> ModelManifest {
    ModelManifest {
        initial: vec![tool("search"), tool("fetch")],
        delegates: vec![tool("research")],
        deferred: ["archive", "calendar", "zip"].iter().map(|n| ((*n).to_owned(), tool(n))).collect(),
    }
}

fn context() -> Request {
    Request::new(vec![Message::system("be brief"), Message::user("weather in Paris?")])
}

fn sid(text: &str) -> SignalId {
    SignalId::parse(text).unwrap()
}

fn effect() -> ModelCallEffect {
    ModelCallEffect::naming(3, &context(), vec![], vec![sid("signal:s1"), sid("signal:s2")]).unwrap().0
}

/// The segments a dispatched request carries for `context()`.
fn segments() -> Vec<std::sync::Arc<crate::kernel::segment::Segment>> {
    ModelCallEffect::naming(3, &context(), vec![], vec![]).unwrap().1
}

fn process() -> ProcessId {
    ProcessId::parse("process:root").unwrap()
}

fn request_with(payload: Payload) -> EffectRequest {
    let d = Digest::of(b"x");
    EffectRequest {
        incarnation: IncarnationId::from_hex("0123456789abcdef0123456789abcdef").unwrap(),
        deployment_ref: DeploymentRef::from_parts(QualifiedName::parse("agent").unwrap(), d, d, d, d),
        process_id: process(),
        relation: Relation::root(process()),
        step_sequence: 5,
        batch_index: 0,
        effect_id: EffectId::derive(&process(), 5, 0),
        attempt_id: None,
        payload,
        segments: segments(),
    }
}

fn request_for(effect: &ModelCallEffect) -> EffectRequest {
    request_with(effect.to_payload().unwrap())
}

fn quiet() -> DispatchContext {
    DispatchContext { cancel: CancelToken::new(), deltas: None }
}

fn answer() -> Response {
    Response::new(Message::assistant("18C and sunny."), FinishReason::Stop, Usage::new(12, 4))
}

fn tool_calls_answer() -> Response {
    Response::new(
        Message::assistant_with_calls(
            "Let me check the weather first.",
            vec![
                ToolCall::new("call_1", "search", r#"{"q":"Paris weather today"}"#),
                ToolCall::new("call_2", "fetch", r#"{"url":"https://example.org/forecast"}"#),
            ],
        ),
        FinishReason::ToolCalls,
        Usage::new(40, 17),
    )
}

fn result_of(settlement: &Settlement) -> ModelResult {
    let result = ModelResult::from_payload(&settlement.payload).unwrap();
    assert_eq!(settlement.status, result.status(), "status agrees with the result");
    result
}

fn dispatch(
    dispatcher: &ModelDispatcher,
    request: EffectRequest,
    cx: DispatchContext,
) -> Result<Settlement, DispatchError> {
    block_on(dispatcher.dispatch(request, cx))
}

fn settle(dispatcher: &ModelDispatcher, effect: &ModelCallEffect) -> ModelResult {
    result_of(&dispatch(dispatcher, request_for(effect), quiet()).unwrap())
}

fn tool_names(request: &Request) -> Vec<String> {
    request.tools.iter().map(|t| t.name.clone()).collect()
}

/// A complete-mode model answering from a script, recording what it was asked.
#[derive(Default)]
struct ScriptedClient {
    script: Mutex<VecDeque<Result<Response, ModelError>>>,
    seen: Mutex<Vec<(ModelInvocation, Request)>>,
}

impl ScriptedClient {
    fn new(script: Vec<Result<Response, ModelError>>) -> Arc<ScriptedClient> {
        Arc::new(ScriptedClient { script: Mutex::new(script.into()), seen: Mutex::default() })
    }
    fn calls(&self) -> usize {
        self.seen.lock().unwrap().len()
    }
    fn last(&self) -> (ModelInvocation, Request) {
        self.seen.lock().unwrap().last().cloned().unwrap()
    }
}

impl ModelClient for ScriptedClient {
    fn call<'a>(&'a self, cx: &'a ModelCallContext, request: Request) -> BoxFuture<'a, Result<Response, ModelError>> {
        self.seen.lock().unwrap().push((cx.invocation.clone(), request));
        let next = self.script.lock().unwrap().pop_front();
        Box::pin(async move { next.unwrap_or_else(|| Err(ModelError::Provider("script exhausted".into()))) })
    }
}

enum StreamScript {
    OpenFails(ModelError),
    Items(Vec<Result<ResponseDelta, ModelError>>),
}

/// A streaming model answering from a script.
struct ScriptedStreamer {
    script: Mutex<VecDeque<StreamScript>>,
    seen: Mutex<Vec<(ModelInvocation, Request)>>,
}

impl ScriptedStreamer {
    fn new(script: Vec<StreamScript>) -> Arc<ScriptedStreamer> {
        Arc::new(ScriptedStreamer { script: Mutex::new(script.into()), seen: Mutex::default() })
    }
    fn deltas(deltas: Vec<ResponseDelta>) -> Arc<ScriptedStreamer> {
        ScriptedStreamer::new(vec![StreamScript::Items(deltas.into_iter().map(Ok).collect())])
    }
}

impl ModelStreamer for ScriptedStreamer {
    fn stream<'a>(
        &'a self,
        cx: &'a ModelCallContext,
        request: Request,
    ) -> BoxFuture<'a, Result<BoxStream<'a, Result<ResponseDelta, ModelError>>, ModelError>> {
        self.seen.lock().unwrap().push((cx.invocation.clone(), request));
        let next = self.script.lock().unwrap().pop_front();
        Box::pin(async move {
            match next {
                None => Err(ModelError::Provider("script exhausted".into())),
                Some(StreamScript::OpenFails(e)) => Err(e),
                Some(StreamScript::Items(items)) => Ok(futures::stream::iter(items).boxed()),
            }
        })
    }
}

type ReduceFn = dyn Fn(&Request) -> Result<Vec<Message>, String> + Send + Sync;

/// A reducer computing its answer from the prepared request, recording what it saw.
struct FnReducer {
    reduce: Box<ReduceFn>,
    seen: Mutex<Vec<(ModelInvocation, Request)>>,
}

impl FnReducer {
    fn new(reduce: impl Fn(&Request) -> Result<Vec<Message>, String> + Send + Sync + 'static) -> Arc<FnReducer> {
        Arc::new(FnReducer { reduce: Box::new(reduce), seen: Mutex::default() })
    }
}

impl ModelContextReducer for FnReducer {
    fn reduce<'a>(
        &'a self,
        cx: &'a ModelCallContext,
        request: &'a Request,
    ) -> BoxFuture<'a, Result<Vec<Message>, String>> {
        self.seen.lock().unwrap().push((cx.invocation.clone(), request.clone()));
        let out = (self.reduce)(request);
        Box::pin(async move { out })
    }
}

#[derive(Default)]
struct RecordingObserver {
    panics: bool,
    seen: Mutex<Vec<(ModelInvocation, Response)>>,
}

impl ModelObserver for RecordingObserver {
    fn on_model_response(&self, invocation: &ModelInvocation, response: &Response) {
        self.seen.lock().unwrap().push((invocation.clone(), response.clone()));
        if self.panics {
            panic!("observer exploded");
        }
    }
}

fn complete(client: &Arc<ScriptedClient>) -> ModelDispatcher {
    ModelDispatcher::new(manifest(), DispatcherConfig::complete(client.clone())).unwrap()
}

/// A sink recording every emitted payload; `accept` decides what it answers.
fn recording_sink(accept: bool) -> (DeltaSink, Arc<Mutex<Vec<Payload>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let sink: DeltaSink = Arc::new(move |p: Payload| {
        log.lock().unwrap().push(p);
        accept
    });
    (sink, seen)
}

// ---------------------------------------------------------------- policy and construction

#[test]
fn policy_is_never_without_capabilities_for_every_effect() {
    let d = complete(&ScriptedClient::new(vec![]));
    for payload in [effect().to_payload().unwrap(), Payload::null(), Payload::from_bytes(b"{\"x\":1}").unwrap()] {
        let policy = d.policy(&payload);
        assert_eq!(policy.replay, ReplayPolicy::Never);
        assert_eq!(policy.required_capabilities, CapabilitySet::default());
    }
}

#[test]
fn construction_rejects_an_invalid_manifest() {
    let client = ScriptedClient::new(vec![]);
    let mut m = manifest();
    m.delegates.push(tool("search"));
    let e = ModelDispatcher::new(m, DispatcherConfig::complete(client.clone())).unwrap_err();
    assert!(e.is(ErrorKind::InvalidDispatcherConfig));
    let mut m = manifest();
    m.deferred.insert("fetch".into(), tool("fetch"));
    assert!(ModelDispatcher::new(m, DispatcherConfig::complete(client.clone()))
        .unwrap_err()
        .is(ErrorKind::InvalidDispatcherConfig));
    let mut m = manifest();
    m.deferred.insert("alias".into(), tool("other"));
    assert!(ModelDispatcher::new(m, DispatcherConfig::stream(ScriptedStreamer::new(vec![]))).is_err());
    // An empty manifest is fine (no tools at all).
    ModelDispatcher::new(ModelManifest::default(), DispatcherConfig::complete(client)).unwrap();
}

#[test]
fn the_dispatcher_copies_the_manifest_at_construction() {
    let client = ScriptedClient::new(vec![Ok(answer())]);
    let mut m = manifest();
    let d = ModelDispatcher::new(m.clone(), DispatcherConfig::complete(client.clone())).unwrap();
    m.initial.clear();
    drop(m);
    settle(&d, &effect());
    assert_eq!(tool_names(&client.last().1), ["search", "fetch", "research"]);
}

// ---------------------------------------------------------------- complete mode outcomes

#[test]
fn complete_mode_success_settles_the_response() {
    let client = ScriptedClient::new(vec![Ok(tool_calls_answer())]);
    let d = complete(&client);
    let settlement = dispatch(&d, request_for(&effect()), quiet()).unwrap();
    assert_eq!(settlement.status, SettlementStatus::Succeeded);
    assert_eq!(result_of(&settlement), ModelResult::response(tool_calls_answer()));
    assert_eq!(client.calls(), 1);
    let (_, seen) = client.last();
    assert_eq!(seen.messages, context().messages, "the effect's messages, untouched");
    assert_eq!(seen.options, context().options);
}

#[test]
fn provider_error_is_a_failed_error_settlement() {
    let client = ScriptedClient::new(vec![Err(ModelError::Provider("  rate limited \n".into()))]);
    let settlement = dispatch(&complete(&client), request_for(&effect()), quiet()).unwrap();
    assert_eq!(settlement.status, SettlementStatus::Failed);
    assert_eq!(result_of(&settlement), ModelResult::Error("rate limited".into()), "normalized");
}

#[test]
fn provider_error_text_is_normalized() {
    let client =
        ScriptedClient::new(vec![Err(ModelError::Provider("   ".into())), Err(ModelError::Provider("x".repeat(5000)))]);
    let d = complete(&client);
    assert_eq!(settle(&d, &effect()), ModelResult::Error("Interaction operation failed".into()));
    assert_eq!(settle(&d, &effect()), ModelResult::Error("x".repeat(2048)));
}

#[test]
fn host_error_is_a_failed_host_error_settlement() {
    let client = ScriptedClient::new(vec![Err(ModelError::Host("credential store unreachable".into()))]);
    let settlement = dispatch(&complete(&client), request_for(&effect()), quiet()).unwrap();
    assert_eq!(settlement.status, SettlementStatus::Failed);
    assert_eq!(result_of(&settlement), ModelResult::HostError("credential store unreachable".into()));
}

#[test]
fn an_unknown_outcome_is_a_dispatch_error_in_both_modes() {
    let client = ScriptedClient::new(vec![Err(ModelError::Unknown("read timed out after the request was sent".into()))]);
    let e = dispatch(&complete(&client), request_for(&effect()), quiet()).unwrap_err();
    assert!(matches!(&e, DispatchError::Failed(text) if text.contains("read timed out")), "{e:?}");
    let text = ResponseDelta::text("partial");
    for script in [
        StreamScript::OpenFails(ModelError::Unknown("connect timed out".into())),
        StreamScript::Items(vec![Ok(text.clone()), Err(ModelError::Unknown("connection lost mid-stream".into()))]),
    ] {
        let e = dispatch(&streaming(ScriptedStreamer::new(vec![script])), request_for(&effect()), quiet()).unwrap_err();
        assert!(matches!(e, DispatchError::Failed(_)), "{e:?}");
    }
}

#[test]
fn an_invalid_response_is_a_failed_error_settlement() {
    let tool_message = Response {
        message: Some(Message::tool_results(vec![ToolResult::ok("c", "search", ToolOutput::text("x"))])),
        ..Response::default()
    };
    let client = ScriptedClient::new(vec![Ok(tool_message)]);
    let observer = Arc::new(RecordingObserver::default());
    let d =
        ModelDispatcher::new(manifest(), DispatcherConfig::complete(client).with_observer(observer.clone())).unwrap();
    let settlement = dispatch(&d, request_for(&effect()), quiet()).unwrap();
    assert_eq!(settlement.status, SettlementStatus::Failed);
    match result_of(&settlement) {
        ModelResult::Error(text) => assert!(text.starts_with("model returned an invalid response"), "{text}"),
        other => panic!("expected an error settlement, got {other:?}"),
    }
    assert!(observer.seen.lock().unwrap().is_empty(), "only valid responses are observed");
}

#[test]
fn a_response_too_large_to_settle_is_an_error_settlement() {
    // Valid as a response (text within the payload limit) but not as a settlement payload.
    let text = "a".repeat(crate::limits::MAX_PAYLOAD_BYTES - 16);
    let huge = Response::new(Message::assistant(text), FinishReason::Stop, Usage::default());
    huge.validate().unwrap();
    let client = ScriptedClient::new(vec![Ok(huge)]);
    let observer = Arc::new(RecordingObserver::default());
    let d =
        ModelDispatcher::new(manifest(), DispatcherConfig::complete(client).with_observer(observer.clone())).unwrap();
    match settle(&d, &effect()) {
        ModelResult::Error(text) => assert!(text.starts_with("model response cannot be settled"), "{text}"),
        other => panic!("expected an error settlement, got {other:?}"),
    }
    assert!(observer.seen.lock().unwrap().is_empty(), "an unsettled response is not observed");
}

// ---------------------------------------------------------------- unknown outcomes

#[test]
fn foreign_operations_and_bad_payloads_are_dispatch_errors() {
    let client = ScriptedClient::new(vec![]);
    let d = complete(&client);
    let steer = Steer { messages: vec![Message::user("hi")] }.to_payload().unwrap();
    let tool_call = ToolCallEffect {
        input: ToolCallInput { model_call_sequence: 1, tool_call_index: 0, call: ToolCall::new("c", "search", "{}") },
        resume: None,
    }
    .to_payload()
    .unwrap();
    let canonical = effect().to_canonical_string();
    let unknown_member = canonical.replacen("\"model_call_sequence\"", "\"extra\":1,\"model_call_sequence\"", 1);
    let zero_sequence = canonical.replacen("\"model_call_sequence\":3", "\"model_call_sequence\":0", 1);
    assert_ne!(zero_sequence, canonical);
    let other_context = {
        let (e, _) = ModelCallEffect::naming(3, &Request::new(vec![Message::user("other")]), vec![], vec![]).unwrap();
        crate::json::ToJson::to_json(&e).to_canonical_string()
    };
    let payloads = [
        steer,
        tool_call,
        Payload::null(),
        Payload::from_bytes(b"{}").unwrap(),
        Payload::from_bytes(unknown_member.as_bytes()).unwrap(),
        Payload::from_bytes(zero_sequence.as_bytes()).unwrap(),
        // Names a context the request's segments are not.
        Payload::from_bytes(other_context.as_bytes()).unwrap(),
    ];
    for payload in payloads {
        let shown = payload.canonical().to_owned();
        match dispatch(&d, request_with(payload), quiet()) {
            Err(DispatchError::Failed(text)) => assert!(text.starts_with("model dispatcher: "), "{text}"),
            other => panic!("{shown}: expected a dispatch error, got {other:?}"),
        }
    }
    assert_eq!(client.calls(), 0, "the model is never called for an undecodable effect");
}

#[test]
fn manifest_order_is_initial_then_delegates_then_advertised_in_commit_order() {
    let client = ScriptedClient::new(vec![Ok(answer()), Ok(answer())]);
    let d = complete(&client);
    settle(&d, &effect());
    assert_eq!(tool_names(&client.last().1), ["search", "fetch", "research"]);
    let mut e = effect();
    e.advertised_tool_names = vec!["zip".into(), "archive".into()];
    settle(&d, &e);
    let (_, seen) = client.last();
    assert_eq!(tool_names(&seen), ["search", "fetch", "research", "zip", "archive"]);
    assert_eq!(seen.tools[3], tool("zip"), "the bound definition itself");
}

#[test]
fn an_advertised_name_that_is_not_a_bound_deferred_tool_is_a_dispatch_error() {
    let client = ScriptedClient::new(vec![]);
    let d = complete(&client);
    for names in [vec!["nope"], vec!["archive", "nope"], vec!["search"], vec!["research"]] {
        let mut e = effect();
        e.advertised_tool_names = names.iter().map(|n| (*n).to_owned()).collect();
        match dispatch(&d, request_for(&e), quiet()) {
            Err(DispatchError::Failed(text)) => assert!(text.contains("is not a deferred tool"), "{text}"),
            other => panic!("{names:?}: expected a dispatch error, got {other:?}"),
        }
    }
    assert_eq!(client.calls(), 0);
}

#[test]
fn an_invalid_prepared_request_is_an_error() {
    // Unreachable through a validated manifest; the preparation still refuses it.
    let visible = vec![tool("search"), tool("search")];
    let e = prepare_request(&visible, &Default::default(), &effect(), context()).unwrap_err();
    assert!(e.starts_with("prepared model request is invalid"), "{e}");
    let ok = prepare_request(&[tool("search")], &Default::default(), &effect(), context()).unwrap();
    assert_eq!(tool_names(&ok), ["search"]);
    assert_eq!(ok.messages, context().messages);
}

// ---------------------------------------------------------------- attribution

#[test]
fn the_client_sees_the_invocation_of_its_call() {
    let client = ScriptedClient::new(vec![Ok(answer())]);
    let d = complete(&client);
    let req = request_for(&effect());
    dispatch(&d, req.clone(), quiet()).unwrap();
    let (inv, _) = client.last();
    assert!(inv.is_valid());
    assert_eq!(inv.model_call_sequence(), 3);
    assert_eq!(inv.effect_id(), &req.effect_id);
    assert_eq!(inv.step_sequence(), 5);
    assert_eq!(inv.relation(), &req.relation);
    assert_eq!(inv.deployment_ref(), &req.deployment_ref);
    let mut ids = inv.applied_steer_signal_ids();
    assert_eq!(ids, [sid("signal:s1"), sid("signal:s2")]);
    ids.clear();
    assert_eq!(inv.applied_steer_signal_ids().len(), 2, "a defensive copy");
}

// ---------------------------------------------------------------- reducer

#[test]
fn a_reducer_that_changes_the_messages_makes_the_settlement_carry_them() {
    let reduced = vec![Message::system("be brief"), Message::user("summary: weather in Paris?")];
    let out = reduced.clone();
    let reducer = FnReducer::new(move |_| Ok(out.clone()));
    let client = ScriptedClient::new(vec![Ok(answer())]);
    let d = ModelDispatcher::new(manifest(), DispatcherConfig::complete(client.clone()).with_reducer(reducer.clone()))
        .unwrap();
    let mut e = effect();
    e.advertised_tool_names = vec!["calendar".into()];
    let result = settle(&d, &e);
    assert_eq!(result, ModelResult::Response { response: answer(), replacement_messages: Some(reduced.clone()), clock: None });

    // The reducer saw the fully prepared request (tools included) and the invocation.
    let (inv, seen) = reducer.seen.lock().unwrap()[0].clone();
    assert_eq!(tool_names(&seen), ["search", "fetch", "research", "calendar"]);
    assert_eq!(seen.messages, context().messages);
    assert_eq!(inv.model_call_sequence(), 3);
    // The model got the reduced messages with the same tools and options.
    let (_, called) = client.last();
    assert_eq!(called.messages, reduced);
    assert_eq!(tool_names(&called), ["search", "fetch", "research", "calendar"]);
    assert_eq!(called.options, context().options);
}

#[test]
fn a_reducer_returning_identical_messages_carries_no_replacement() {
    let reducer = FnReducer::new(|r| Ok(r.messages.clone()));
    let client = ScriptedClient::new(vec![Ok(answer())]);
    let d = ModelDispatcher::new(manifest(), DispatcherConfig::complete(client.clone()).with_reducer(reducer)).unwrap();
    assert_eq!(settle(&d, &effect()), ModelResult::response(answer()));
    assert_eq!(client.calls(), 1);
}

#[test]
fn no_replacement_on_a_failed_call_even_if_reduced() {
    let reducer = FnReducer::new(|_| Ok(vec![Message::user("short")]));
    let client = ScriptedClient::new(vec![Err(ModelError::Provider("boom".into()))]);
    let d = ModelDispatcher::new(manifest(), DispatcherConfig::complete(client).with_reducer(reducer)).unwrap();
    assert_eq!(settle(&d, &effect()), ModelResult::Error("boom".into()));
}

#[test]
fn reducer_failures_are_host_errors_and_the_model_is_not_called() {
    let cases: Vec<(Arc<FnReducer>, &str)> = vec![
        (FnReducer::new(|_| Err("summary service down".into())), "model context reducer failed: summary service down"),
        (FnReducer::new(|_| Ok(vec![])), "model context reducer returned an invalid context"),
        (
            FnReducer::new(|_| Ok(vec![Message::user("q"), Message::system("late system")])),
            "model context reducer returned an invalid context",
        ),
        (
            FnReducer::new(|_| Ok(vec![Message::tool_results(vec![])])),
            "model context reducer returned an invalid context",
        ),
    ];
    for (reducer, expected) in cases {
        let client = ScriptedClient::new(vec![Ok(answer())]);
        let d =
            ModelDispatcher::new(manifest(), DispatcherConfig::complete(client.clone()).with_reducer(reducer)).unwrap();
        let settlement = dispatch(&d, request_for(&effect()), quiet()).unwrap();
        assert_eq!(settlement.status, SettlementStatus::Failed);
        match result_of(&settlement) {
            ModelResult::HostError(text) => assert!(text.starts_with(expected), "{text}"),
            other => panic!("expected a host error, got {other:?}"),
        }
        assert_eq!(client.calls(), 0, "{expected}: the model must not be called");
    }
}

/// A reducer that makes its own model call: it answers `outcome` (messages and usage, or the
/// failure of its model call).
struct CallingReducer(Result<Reduction, ModelError>);

impl ModelContextReducer for CallingReducer {
    fn reduce<'a>(&'a self, _: &'a ModelCallContext, _: &'a Request) -> BoxFuture<'a, Result<Vec<Message>, String>> {
        unreachable!("the Dispatcher calls reduce_with_usage")
    }

    fn reduce_with_usage<'a>(&'a self, _: &'a ModelCallContext, _: &'a Request) -> BoxFuture<'a, Result<Reduction, ModelError>> {
        let outcome = self.0.clone();
        Box::pin(async move { outcome })
    }
}

#[test]
fn a_reducer_calling_a_model_adds_its_usage_and_its_failures_keep_their_kind() {
    let reduced = vec![Message::system("be brief"), Message::user("summary: weather in Paris?")];
    let reduction = Reduction { messages: reduced.clone(), usage: Usage::new(100, 10) };
    let client = ScriptedClient::new(vec![Ok(answer())]);
    let config = DispatcherConfig::complete(client.clone()).with_reducer(Arc::new(CallingReducer(Ok(reduction))));
    let d = ModelDispatcher::new(manifest(), config).unwrap();
    let mut counted = answer();
    counted.usage = counted.usage.saturating_add(Usage::new(100, 10));
    assert_eq!(settle(&d, &effect()), ModelResult::Response { response: counted, replacement_messages: Some(reduced), clock: None });

    let with = |error: ModelError| {
        let client = ScriptedClient::new(vec![Ok(answer())]);
        let config = DispatcherConfig::complete(client.clone()).with_reducer(Arc::new(CallingReducer(Err(error))));
        let d = ModelDispatcher::new(manifest(), config).unwrap();
        let outcome = block_on(d.attempt(request_for(&effect()), quiet(), None));
        assert_eq!(client.calls(), 0, "the model is not called after its reducer failed");
        outcome
    };
    // Unknown: the Effect stays unknown (the Unknown policy decides), never a settled failure.
    let unknown = with(ModelError::Unknown("connection lost".into())).unwrap_err();
    assert!(unknown.to_string().contains("model context reducer's model call outcome unknown: connection lost"), "{unknown}");
    // Transient: a failed settlement a retry policy may repeat.
    let (settlement, transient) = with(ModelError::Transient("overloaded".into())).unwrap();
    assert!(matches!(result_of(&settlement), ModelResult::Error(t) if t.contains("overloaded")));
    assert!(transient.is_some_and(|t| t.contains("overloaded")));
    // Provider and host failures settle definitely, as their kinds.
    let (settlement, transient) = with(ModelError::Provider("refused".into())).unwrap();
    assert!(matches!(result_of(&settlement), ModelResult::Error(t) if t == "model context reducer failed: refused"));
    assert_eq!(transient, None);
    let (settlement, _) = with(ModelError::Host("no disk".into())).unwrap();
    assert!(matches!(result_of(&settlement), ModelResult::HostError(t) if t == "model context reducer failed: no disk"));
}

// ---------------------------------------------------------------- streaming

fn streaming(streamer: Arc<ScriptedStreamer>) -> ModelDispatcher {
    ModelDispatcher::new(manifest(), DispatcherConfig::stream(streamer)).unwrap()
}

#[test]
fn streaming_settles_exactly_what_complete_mode_settles() {
    for response in [answer(), tool_calls_answer()] {
        let whole =
            dispatch(&complete(&ScriptedClient::new(vec![Ok(response.clone())])), request_for(&effect()), quiet())
                .unwrap();
        for chunk in [1, 3, 7, 1000] {
            let deltas = ResponseDelta::split(&response, chunk);
            let streamed =
                dispatch(&streaming(ScriptedStreamer::deltas(deltas)), request_for(&effect()), quiet()).unwrap();
            assert_eq!(streamed, whole, "chunk {chunk}");
        }
    }
}

#[test]
fn streamed_deltas_are_emitted_in_order_as_response_delta_payloads() {
    let deltas = ResponseDelta::split(&tool_calls_answer(), 5);
    assert!(deltas.len() > 5);
    let streamer = ScriptedStreamer::deltas(deltas.clone());
    let (sink, seen) = recording_sink(true);
    let cx = DispatchContext { cancel: CancelToken::new(), deltas: Some(sink) };
    let settlement = dispatch(&streaming(streamer.clone()), request_for(&effect()), cx).unwrap();
    assert_eq!(result_of(&settlement), ModelResult::response(tool_calls_answer()));
    let seen = seen.lock().unwrap();
    let decoded: Vec<ResponseDelta> =
        seen.iter().map(|p| ModelResponseDelta::from_payload(p).unwrap().response_delta).collect();
    assert_eq!(decoded, deltas);
    assert_eq!(seen[0].canonical(), r#"{"response_delta":{"text":"Let m"}}"#);
    // The streamer got the prepared request too.
    assert_eq!(tool_names(&streamer.seen.lock().unwrap()[0].1), ["search", "fetch", "research"]);
}

#[test]
fn rejected_or_panicking_emits_do_not_change_the_settlement() {
    let deltas = ResponseDelta::split(&tool_calls_answer(), 4);
    let expected = ModelResult::response(tool_calls_answer());
    let (rejecting, seen) = recording_sink(false);
    let cx = DispatchContext { cancel: CancelToken::new(), deltas: Some(rejecting) };
    let settlement =
        dispatch(&streaming(ScriptedStreamer::deltas(deltas.clone())), request_for(&effect()), cx).unwrap();
    assert_eq!(result_of(&settlement), expected);
    assert_eq!(seen.lock().unwrap().len(), deltas.len(), "every delta is still offered");

    let calls = Arc::new(AtomicUsize::new(0));
    let count = calls.clone();
    let panicking: DeltaSink = Arc::new(move |_| {
        count.fetch_add(1, Ordering::Relaxed);
        panic!("listener exploded")
    });
    let cx = DispatchContext { cancel: CancelToken::new(), deltas: Some(panicking) };
    let settlement =
        dispatch(&streaming(ScriptedStreamer::deltas(deltas.clone())), request_for(&effect()), cx).unwrap();
    assert_eq!(result_of(&settlement), expected);
    assert_eq!(calls.load(Ordering::Relaxed), deltas.len());
}

#[test]
fn a_stream_with_no_deltas_is_an_error_settlement() {
    let d = streaming(ScriptedStreamer::deltas(vec![]));
    assert_eq!(settle(&d, &effect()), ModelResult::Error("model stream yielded no deltas".into()));
}

#[test]
fn stream_failures_settle_by_their_kind() {
    let text = ResponseDelta::text("partial");
    let cases = vec![
        (StreamScript::OpenFails(ModelError::Provider("overloaded".into())), ModelResult::Error("overloaded".into())),
        (StreamScript::OpenFails(ModelError::Host("proxy down".into())), ModelResult::HostError("proxy down".into())),
        (
            StreamScript::Items(vec![Ok(text.clone()), Err(ModelError::Provider("connection reset".into()))]),
            ModelResult::Error("connection reset".into()),
        ),
        (
            StreamScript::Items(vec![Ok(text.clone()), Err(ModelError::Host("disk full".into()))]),
            ModelResult::HostError("disk full".into()),
        ),
    ];
    for (script, expected) in cases {
        let (sink, seen) = recording_sink(true);
        let cx = DispatchContext { cancel: CancelToken::new(), deltas: Some(sink) };
        let settlement = dispatch(&streaming(ScriptedStreamer::new(vec![script])), request_for(&effect()), cx).unwrap();
        assert_eq!(settlement.status, SettlementStatus::Failed);
        assert_eq!(result_of(&settlement), expected);
        assert!(seen.lock().unwrap().len() <= 1, "only the deltas before the failure were emitted");
    }
}

#[test]
fn invalid_deltas_and_unaccumulable_streams_are_error_settlements() {
    let call = |id: Option<&str>| ResponseDelta {
        tool_calls: vec![crate::chat::ToolCallDelta {
            index: 0,
            id: id.map(str::to_owned),
            name: Some("search".into()),
            arguments: Some("{}".into()),
        }],
        ..ResponseDelta::default()
    };
    let cases: Vec<(Vec<ResponseDelta>, &str)> = vec![
        (vec![ResponseDelta::text("a"), ResponseDelta::default()], "model stream yielded an invalid delta"),
        (vec![call(Some("c1")), call(Some("c2"))], "model stream yielded an invalid delta"),
        (vec![call(None)], "model stream produced an invalid response"),
    ];
    for (deltas, expected) in cases {
        let (sink, seen) = recording_sink(true);
        let cx = DispatchContext { cancel: CancelToken::new(), deltas: Some(sink) };
        let n = deltas.len();
        let settlement = dispatch(&streaming(ScriptedStreamer::deltas(deltas)), request_for(&effect()), cx).unwrap();
        match result_of(&settlement) {
            ModelResult::Error(text) => assert!(text.starts_with(expected), "{text}"),
            other => panic!("expected an error settlement, got {other:?}"),
        }
        let emitted = seen.lock().unwrap().len();
        if expected.contains("invalid delta") {
            assert_eq!(emitted, n - 1, "a rejected delta is never emitted");
        }
    }
}

// ---------------------------------------------------------------- observer

#[test]
fn the_observer_sees_each_successful_response_once() {
    let client =
        ScriptedClient::new(vec![Ok(answer()), Err(ModelError::Provider("x".into())), Ok(tool_calls_answer())]);
    let observer = Arc::new(RecordingObserver::default());
    let d =
        ModelDispatcher::new(manifest(), DispatcherConfig::complete(client).with_observer(observer.clone())).unwrap();
    for _ in 0..3 {
        settle(&d, &effect());
    }
    let seen = observer.seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].1, answer());
    assert_eq!(seen[1].1, tool_calls_answer());
    assert_eq!(seen[0].0.model_call_sequence(), 3);
    assert_eq!(seen[0].0.applied_steer_signal_ids(), [sid("signal:s1"), sid("signal:s2")]);
    assert_eq!(d.observation_failures(), ModelObservationFailures::default());
}

#[test]
fn observer_panics_are_counted_and_do_not_change_the_settlement() {
    let response = tool_calls_answer();
    let client = ScriptedClient::new(vec![Ok(response.clone()), Ok(response.clone())]);
    let observer = Arc::new(RecordingObserver { panics: true, ..RecordingObserver::default() });
    let d =
        ModelDispatcher::new(manifest(), DispatcherConfig::complete(client).with_observer(observer.clone())).unwrap();
    let quiet_dispatcher = complete(&ScriptedClient::new(vec![Ok(response.clone())]));
    let expected = dispatch(&quiet_dispatcher, request_for(&effect()), quiet()).unwrap();
    assert_eq!(dispatch(&d, request_for(&effect()), quiet()).unwrap(), expected);
    assert_eq!(d.observation_failures().model_response_panics, 1);
    assert_eq!(dispatch(&d, request_for(&effect()), quiet()).unwrap(), expected);
    assert_eq!(d.observation_failures(), ModelObservationFailures { model_response_panics: 2 });
    assert_eq!(observer.seen.lock().unwrap().len(), 2);
}

#[test]
fn streaming_responses_are_observed_too() {
    let observer = Arc::new(RecordingObserver::default());
    let streamer = ScriptedStreamer::deltas(ResponseDelta::split(&answer(), 2));
    let d =
        ModelDispatcher::new(manifest(), DispatcherConfig::stream(streamer).with_observer(observer.clone())).unwrap();
    settle(&d, &effect());
    assert_eq!(observer.seen.lock().unwrap()[0].1, answer());
}

// ---------------------------------------------------------------- cancellation

/// A model that never answers; optionally cancels the dispatch itself mid-call first.
struct HangingClient {
    cancel_mid_call: bool,
}

impl ModelClient for HangingClient {
    fn call<'a>(&'a self, cx: &'a ModelCallContext, _request: Request) -> BoxFuture<'a, Result<Response, ModelError>> {
        if self.cancel_mid_call {
            cx.cancel.cancel();
        }
        Box::pin(futures::future::pending())
    }
}

/// A model that honors cancellation by failing.
struct CooperativeClient;

impl ModelClient for CooperativeClient {
    fn call<'a>(&'a self, cx: &'a ModelCallContext, _request: Request) -> BoxFuture<'a, Result<Response, ModelError>> {
        Box::pin(async move {
            cx.cancel.cancelled().await;
            Err(ModelError::Provider("request aborted: context canceled".into()))
        })
    }
}

#[test]
fn a_cancelled_dispatch_still_settles_as_a_provider_error() {
    for cancel_mid_call in [false, true] {
        let d =
            ModelDispatcher::new(manifest(), DispatcherConfig::complete(Arc::new(HangingClient { cancel_mid_call })))
                .unwrap();
        let cancel = CancelToken::new();
        if !cancel_mid_call {
            cancel.cancel();
        }
        let settlement = dispatch(&d, request_for(&effect()), DispatchContext { cancel, deltas: None }).unwrap();
        assert_eq!(settlement.status, SettlementStatus::Failed);
        assert_eq!(result_of(&settlement), ModelResult::Error("model call canceled".into()));
    }
    let d = ModelDispatcher::new(manifest(), DispatcherConfig::complete(Arc::new(CooperativeClient))).unwrap();
    let cancel = CancelToken::new();
    cancel.cancel();
    let settlement = dispatch(&d, request_for(&effect()), DispatchContext { cancel, deltas: None }).unwrap();
    assert_eq!(result_of(&settlement), ModelResult::Error("request aborted: context canceled".into()));
}

#[test]
fn a_finished_call_wins_over_a_pending_cancellation() {
    let client = ScriptedClient::new(vec![Ok(answer())]);
    let cancel = CancelToken::new();
    cancel.cancel();
    let settlement =
        dispatch(&complete(&client), request_for(&effect()), DispatchContext { cancel, deltas: None }).unwrap();
    assert_eq!(result_of(&settlement), ModelResult::response(answer()));
}

/// A reducer that never answers.
struct HangingReducer;

impl ModelContextReducer for HangingReducer {
    fn reduce<'a>(
        &'a self,
        _cx: &'a ModelCallContext,
        _request: &'a Request,
    ) -> BoxFuture<'a, Result<Vec<Message>, String>> {
        Box::pin(futures::future::pending())
    }
}

#[test]
fn a_cancelled_reduction_is_a_host_error_and_the_model_is_not_called() {
    let client = ScriptedClient::new(vec![Ok(answer())]);
    let d = ModelDispatcher::new(
        manifest(),
        DispatcherConfig::complete(client.clone()).with_reducer(Arc::new(HangingReducer)),
    )
    .unwrap();
    let cancel = CancelToken::new();
    cancel.cancel();
    let settlement = dispatch(&d, request_for(&effect()), DispatchContext { cancel, deltas: None }).unwrap();
    assert_eq!(result_of(&settlement), ModelResult::HostError("model context reducer canceled".into()));
    assert_eq!(client.calls(), 0);
}

#[test]
fn a_cancelled_stream_is_a_provider_error() {
    struct EndlessStreamer;
    impl ModelStreamer for EndlessStreamer {
        fn stream<'a>(
            &'a self,
            _cx: &'a ModelCallContext,
            _request: Request,
        ) -> BoxFuture<'a, Result<BoxStream<'a, Result<ResponseDelta, ModelError>>, ModelError>> {
            let first = futures::stream::iter(vec![Ok(ResponseDelta::text("thinking"))]);
            Box::pin(async move { Ok(first.chain(futures::stream::pending()).boxed()) })
        }
    }
    let d = ModelDispatcher::new(manifest(), DispatcherConfig::stream(Arc::new(EndlessStreamer))).unwrap();
    let cancel = CancelToken::new();
    let trip = cancel.clone();
    // The listener cancels the dispatch after the first delta; the stream then never ends.
    let sink: DeltaSink = Arc::new(move |_| {
        trip.cancel();
        true
    });
    let settlement = dispatch(&d, request_for(&effect()), DispatchContext { cancel, deltas: Some(sink) }).unwrap();
    assert_eq!(result_of(&settlement), ModelResult::Error("model call canceled".into()));
}

#[test]
fn the_dispatcher_is_shareable_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<ModelDispatcher>();
    let d: Arc<dyn Dispatcher> = Arc::new(complete(&ScriptedClient::new(vec![Ok(answer())])));
    let fut = d.dispatch(request_for(&effect()), quiet());
    fn assert_send<T: Send>(_: &T) {}
    assert_send(&fut);
    assert_eq!(result_of(&block_on(fut).unwrap()), ModelResult::response(answer()));
}
