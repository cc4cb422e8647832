//! The parent Execution driven by hand (no owner): exact Effects, signal collection rules
//! and the child start/wait protocol checks.

use super::*;
use crate::interaction::codes;
use crate::interaction::ids::tool_child_key;
use crate::interaction::protocol::{ModelCallEffect, ModelResult, ToolCallInput};
use crate::kernel::child::{Boundary, ChildSpec, ChildWaitSpec, Condition};
use crate::kernel::effect::FrameworkEffect;
use crate::kernel::engine_signal::{ChildOutcome, ChildStartResult, ChildWaitOpened, ChildWaitSatisfied};
use crate::kernel::ids::{ChildKey, EffectId, WaitId};
use crate::kernel::status::{Cause, Termination};
use crate::kernel::waist::Definition as _;

struct Driver {
    definition: Definition,
    tools: Deployment,
    execution: Box<dyn Execution>,
    step: u64,
}

fn root() -> ProcessId {
    ProcessId::root_from_hex(&format!("{:032x}", 1)).unwrap()
}

fn child(n: u64) -> ProcessId {
    ProcessId::parse(&format!("process:child-{n}")).unwrap()
}

impl Driver {
    fn new(configure: impl FnOnce(&mut DefinitionConfig)) -> Driver {
        let tools = super::tool_set();
        let mut config = base_config(&tools);
        configure(&mut config);
        let definition = Definition::new(config).unwrap();
        let execution = definition.start(&user_input("go")).unwrap();
        Driver { definition, tools: tools.deployment().clone(), execution, step: 0 }
    }

    fn effect_id(&mut self) -> EffectId {
        self.step += 1;
        EffectId::derive(&root(), self.step, 0)
    }

    fn step(&mut self, signals: &[Signal]) -> Result<Transition, StepError> {
        let t = self.execution.step(&StepContext::default(), signals);
        // Restore-before-adopt, as the kernel does.
        let snapshot = self.execution.snapshot().unwrap();
        self.execution = self.definition.restore(&StepContext::default(), &snapshot).unwrap();
        t
    }

    fn snapshot(&self) -> ExecutionState {
        self.execution.snapshot().unwrap()
    }

    fn model(&mut self, response: Response) -> Signal {
        let s = ModelResult::response(response).to_settlement().unwrap();
        Signal::new(SignalId::settlement(&self.effect_id()), None, s.payload, Some(s.status)).unwrap()
    }

    fn started(&mut self, key: &ChildKey, outcome: Result<ProcessId, Failure>) -> Signal {
        let r = ChildStartResult { key: key.clone(), deployment_ref: self.tools.reference().clone(), outcome };
        let payload = Payload::from_json(r.to_json()).unwrap();
        Signal::new(SignalId::settlement(&self.effect_id()), None, payload, Some(SettlementStatus::Succeeded)).unwrap()
    }
}

fn wait_id(n: u64) -> WaitId {
    WaitId::of_effect(&EffectId::derive(&root(), 1000 + n, 0))
}

fn opened(wait: &WaitId, spec: &ChildWaitSpec) -> Signal {
    let payload = Payload::from_json(ChildWaitOpened::payload_json(spec)).unwrap();
    Signal::new(SignalId::wait_opening(wait), Some(wait.clone()), payload, None).unwrap()
}

fn completed(key: &ChildKey, process: &ProcessId, tools: &Deployment, output: &SettledToolResult) -> ChildOutcome {
    ChildOutcome {
        key: key.clone(),
        result: ProcessResult {
            process_id: process.clone(),
            deployment_ref: tools.reference().clone(),
            termination: Termination {
                cause: Cause::Completion,
                reason: String::new(),
                failure: None,
                unresolved_effect_ids: vec![],
            },
            output: Some(output.to_payload().unwrap()),
        },
        boundary: Boundary::SubtreeDrained,
        subtree_unresolved_effects: vec![],
    }
}

fn satisfied(wait: &WaitId, spec: &ChildWaitSpec, outcomes: Vec<ChildOutcome>) -> Signal {
    let s = ChildWaitSatisfied { wait_id: wait.clone(), key: spec.key.clone(), boundary: spec.boundary, outcomes };
    let payload = Payload::from_json(s.payload_json()).unwrap();
    Signal::new(SignalId::child_wait_satisfied(wait), Some(wait.clone()), payload, None).unwrap()
}

fn effects(t: Transition) -> Vec<Effect> {
    match t {
        Transition::Continue { effects, .. } => effects,
        other => panic!("expected continue, got {other:?}"),
    }
}

fn start_spec(effect: &Effect) -> ChildSpec {
    match effect {
        Effect::Framework(FrameworkEffect::StartChild(spec)) => spec.clone(),
        other => panic!("{other:?}"),
    }
}

fn wait_spec(effect: &Effect) -> ChildWaitSpec {
    match effect {
        Effect::Framework(FrameworkEffect::WaitChildren(spec)) => spec.clone(),
        other => panic!("{other:?}"),
    }
}

/// Drives one weather call up to `awaiting_child_starts`; returns the start it asks for.
fn to_child_starts(d: &mut Driver) -> ChildSpec {
    effects(d.step(&[]).unwrap());
    let signal = d.model(calls_response(vec![call("c1", "weather", "{}")]));
    let starts = effects(d.step(&[signal]).unwrap());
    assert_eq!(starts.len(), 1);
    start_spec(&starts[0])
}

/// Drives one weather call up to `awaiting_child_wait_open`; returns the child key and spec.
fn to_wait_open(d: &mut Driver) -> (ChildKey, ChildWaitSpec) {
    let spec = to_child_starts(d);
    assert_eq!(spec.key, tool_child_key(1, "c1").unwrap());
    assert_eq!(&spec.deployment_ref, d.tools.reference());
    let input = ToolCallInput::from_payload(&spec.input).unwrap();
    assert_eq!((input.model_call_sequence, input.tool_call_index, input.call.id.as_str()), (1, 0, "c1"));
    let signal = d.started(&spec.key, Ok(child(1)));
    let wait = effects(d.step(&[signal]).unwrap());
    let wait = wait_spec(&wait[0]);
    assert_eq!(wait.key.as_str(), "interaction.children:1:0:0");
    assert_eq!(wait.children, vec![child(1)]);
    assert_eq!((wait.boundary, wait.condition), (Boundary::SubtreeDrained, Condition::Any));
    (spec.key, wait)
}

#[test]
fn the_opening_consumes_only_itself_when_a_satisfaction_follows() {
    let mut d = Driver::new(|_| {});
    let (key, spec) = to_wait_open(&mut d);
    let wait = wait_id(1);
    let result = SettledToolResult::new(crate::chat::ToolResult::ok("c1", "weather", Default::default()), false);
    let answer = satisfied(&wait, &spec, vec![completed(&key, &child(1), &d.tools, &result)]);
    let t = d.step(&[opened(&wait, &spec), answer.clone()]).unwrap();
    assert_eq!(t, Transition::Wait { consumed: 1, wait_id: wait.clone() });
    let next = effects(d.step(&[answer]).unwrap());
    let Effect::Dispatcher(payload) = &next[0] else { panic!() };
    let effect = ModelCallEffect::from_payload(payload).unwrap();
    assert_eq!(effect.model_call_sequence, 2);
    assert_eq!(effect.request(&d.snapshot().segments).unwrap().messages.len(), 3);
}

#[test]
fn a_mismatched_opening_or_satisfaction_is_a_step_error_and_changes_nothing() {
    let mut d = Driver::new(|_| {});
    let (key, spec) = to_wait_open(&mut d);
    let before = d.snapshot();
    let mut other = spec.clone();
    other.condition = Condition::All;
    assert!(d.step(&[opened(&wait_id(1), &other)]).is_err());
    assert_eq!(d.snapshot(), before);
    assert!(d.step(&[]).is_err(), "the opening is required");
    d.step(&[opened(&wait_id(1), &spec)]).unwrap();
    let before = d.snapshot();
    let result = SettledToolResult::new(crate::chat::ToolResult::ok("c1", "weather", Default::default()), false);
    let outcome = completed(&key, &child(1), &d.tools, &result);
    assert!(d.step(&[satisfied(&wait_id(2), &spec, vec![outcome.clone()])]).is_err(), "another wait");
    let wrong = SettledToolResult::new(crate::chat::ToolResult::ok("c9", "weather", Default::default()), false);
    let mismatched = completed(&key, &child(1), &d.tools, &wrong);
    assert!(d.step(&[satisfied(&wait_id(1), &spec, vec![mismatched])]).is_err(), "answers another call");
    let stranger = completed(&key, &child(7), &d.tools, &result);
    assert!(d.step(&[satisfied(&wait_id(1), &spec, vec![stranger])]).is_err(), "not an active child");
    assert_eq!(d.snapshot(), before);
}

#[test]
fn start_results_must_match_the_pending_starts() {
    let mut d = Driver::new(|_| {});
    let key = to_child_starts(&mut d).key;
    let before = d.snapshot();
    let one = d.started(&key, Ok(child(1)));
    let two = d.started(&key, Ok(child(2)));
    assert!(d.step(&[one, two]).is_err(), "one result per pending start");
    let wrong = d.started(&ChildKey::parse("tool_other").unwrap(), Ok(child(1)));
    assert!(d.step(&[wrong]).is_err(), "matched by key");
    assert!(d.step(&[]).is_err(), "at least one start result");
    assert_eq!(d.snapshot(), before);
    let failed = d.started(&key, Err(Failure::new(kcodes::STEP_FAILED, "no room")));
    let t = d.step(&[failed]).unwrap();
    let Transition::Fail { failure, .. } = t else { panic!("{t:?}") };
    assert!(failure.is(codes::TOOL_START_FAILED));
    assert_eq!(d.snapshot(), before, "a failure keeps the last valid state");
}

#[test]
fn only_steers_are_accepted_outside_their_phase() {
    let mut d = Driver::new(|_| {});
    let stray = d.model(answer("x"));
    assert!(d.step(&[stray]).is_err(), "ready_model accepts only steers");
    effects(d.step(&[]).unwrap());
    let a = d.model(answer("x"));
    let b = d.model(answer("y"));
    assert!(d.step(&[a, b]).is_err(), "a duplicate settlement");
    let done = d.model(answer("done"));
    let t = d.step(&[done]).unwrap();
    assert!(matches!(t, Transition::Complete { consumed: 1, .. }));
    assert!(d.step(&[]).is_err(), "completed execution cannot advance");
}

#[test]
fn replacement_messages_replace_the_working_context() {
    let mut d = Driver::new(|_| {});
    effects(d.step(&[]).unwrap());
    let reduced = ModelResult::Response {
        response: calls_response(vec![call("c1", "weather", "{}")]),
        replacement_messages: Some(vec![Message::user("summary")]),
        clock: None,
    };
    let s = reduced.to_settlement().unwrap();
    let signal = Signal::new(SignalId::settlement(&d.effect_id()), None, s.payload, Some(s.status)).unwrap();
    effects(d.step(&[signal]).unwrap());
    let state = crate::interaction::state::ParentState::from_execution_state(&d.snapshot()).unwrap();
    let texts: Vec<String> = state.working_context.messages().map(Message::text).collect();
    assert_eq!(texts, vec!["summary"]);
}

#[test]
fn conformance_through_a_tool_round() {
    let mut d = Driver::new(|_| {});
    let key = tool_child_key(1, "c1").unwrap();
    let model = d.model(calls_response(vec![call("c1", "weather", "{}")]));
    let started = d.started(&key, Ok(child(1)));
    let spec = ChildWaitSpec {
        key: crate::kernel::ids::WaitKey::parse("interaction.children:1:0:0").unwrap(),
        children: vec![child(1)],
        boundary: Boundary::SubtreeDrained,
        condition: Condition::Any,
    };
    let wait = wait_id(1);
    let result = SettledToolResult::new(crate::chat::ToolResult::ok("c1", "weather", Default::default()), false);
    let answer_signal = satisfied(&wait, &spec, vec![completed(&key, &child(1), &d.tools, &result)]);
    let final_answer = d.model(answer("done"));
    let suffixes = vec![
        vec![vec![], vec![model.clone()], vec![started.clone()], vec![opened(&wait, &spec), answer_signal.clone()]],
        vec![
            vec![],
            vec![model],
            vec![started],
            vec![opened(&wait, &spec)],
            vec![answer_signal],
            vec![final_answer],
        ],
    ];
    crate::kernel::conformance::check_definition(&d.definition, &user_input("go"), &suffixes).unwrap();
}

fn steer(id: &str, text: &str) -> Signal {
    let r = crate::interaction::signals::steer_signal(SignalId::parse(id).unwrap(), vec![Message::user(text)]).unwrap();
    Signal::new(r.id().clone(), None, r.payload().clone(), None).unwrap()
}

#[test]
fn steers_in_ready_model_are_applied_to_the_first_request() {
    let mut d = Driver::new(|_| {});
    assert!(d.step(&[steer("signal:s1", "a"), steer("signal:s1", "b")]).is_err(), "a duplicate steer id");
    let t = effects(d.step(&[steer("signal:s1", "first"), steer("signal:s2", "second")]).unwrap());
    let Effect::Dispatcher(payload) = &t[0] else { panic!() };
    let effect = ModelCallEffect::from_payload(payload).unwrap();
    let ids: Vec<&str> = effect.applied_steer_signal_ids.iter().map(|s| s.as_str()).collect();
    assert_eq!(ids, vec!["signal:s1", "signal:s2"]);
    let request = effect.request(&d.snapshot().segments).unwrap();
    let texts: Vec<String> = request.messages.iter().map(Message::text).collect();
    assert_eq!(texts, vec!["go", "first", "second"]);
}

#[test]
fn a_delegate_output_violating_its_schema_is_a_step_error() {
    let upper = upper_deployment(b"upper");
    let u = upper.clone();
    let mut d = Driver::new(move |c| c.delegates = vec![delegate("upper", &u)]);
    effects(d.step(&[]).unwrap());
    let call = call("u1", "upper", r#"{"text":"a"}"#);
    let signal = d.model(calls_response(vec![call.clone()]));
    let starts = effects(d.step(&[signal]).unwrap());
    let key = start_spec(&starts[0]).key;
    assert_eq!(key, crate::interaction::ids::delegate_child_key(1, &call).unwrap());
    let r = ChildStartResult { key: key.clone(), deployment_ref: upper.reference().clone(), outcome: Ok(child(1)) };
    let eid = d.effect_id();
    let started = Signal::new(
        SignalId::settlement(&eid),
        None,
        Payload::from_json(r.to_json()).unwrap(),
        Some(SettlementStatus::Succeeded),
    )
    .unwrap();
    let wait = wait_spec(&effects(d.step(&[started]).unwrap())[0]);
    assert_eq!(wait.condition, Condition::All);
    d.step(&[opened(&wait_id(1), &wait)]).unwrap();
    let before = d.snapshot();
    let mut outcome = completed(&key, &child(1), &upper, &SettledToolResult::new(crate::chat::ToolResult::ok("u1", "upper", Default::default()), false));
    outcome.result.output = Some(Payload::from_bytes(br#"{"value":7}"#).unwrap());
    let e = d.step(&[satisfied(&wait_id(1), &wait, vec![outcome.clone()])]).unwrap_err();
    assert!(e.to_string().contains("violates its output schema"), "{e}");
    assert_eq!(d.snapshot(), before);
    outcome.result.output = Some(Payload::from_bytes(br#"{"value":"A"}"#).unwrap());
    let next = effects(d.step(&[satisfied(&wait_id(1), &wait, vec![outcome])]).unwrap());
    let Effect::Dispatcher(payload) = &next[0] else { panic!() };
    assert_eq!(ModelCallEffect::from_payload(payload).unwrap().model_call_sequence, 2);
    let state = crate::interaction::state::ParentState::from_execution_state(&d.snapshot()).unwrap();
    assert_eq!(state.artifact_records.len(), 1);
    assert_eq!(state.artifact_records[0].output().canonical(), r#"{"value":"A"}"#);
}

#[test]
fn host_and_provider_errors_fail_with_their_codes() {
    for (result, code) in [
        (ModelResult::host_error("reducer broke"), codes::HOST_FAILED),
        (ModelResult::provider_error("rate limited"), codes::MODEL_FAILED),
    ] {
        let mut d = Driver::new(|_| {});
        effects(d.step(&[]).unwrap());
        let s = result.to_settlement().unwrap();
        let signal = Signal::new(SignalId::settlement(&d.effect_id()), None, s.payload, Some(s.status)).unwrap();
        let Transition::Fail { failure, consumed } = d.step(&[signal]).unwrap() else { panic!() };
        assert!(failure.is(code), "{failure:?}");
        assert_eq!(consumed, 1);
    }
}

#[test]
fn the_wait_must_be_at_the_drained_boundary_at_opening_and_at_satisfaction() {
    let mut d = Driver::new(|_| {});
    let (key, spec) = to_wait_open(&mut d);
    let before = d.snapshot();
    let mut result_boundary = spec.clone();
    result_boundary.boundary = Boundary::TerminalResult;
    assert!(d.step(&[opened(&wait_id(1), &result_boundary)]).is_err(), "a result-boundary opening");
    assert_eq!(d.snapshot(), before);
    d.step(&[opened(&wait_id(1), &spec)]).unwrap();
    let before = d.snapshot();
    let result = SettledToolResult::new(crate::chat::ToolResult::ok("c1", "weather", Default::default()), false);
    let mut outcome = completed(&key, &child(1), &d.tools, &result);
    assert!(d.step(&[satisfied(&wait_id(1), &result_boundary, vec![outcome.clone()])]).is_err(), "a result-boundary satisfaction");
    outcome.boundary = Boundary::TerminalResult;
    assert!(d.step(&[satisfied(&wait_id(1), &spec, vec![outcome.clone()])]).is_err(), "a result-boundary outcome");
    outcome.boundary = Boundary::SubtreeDrained;
    let answer = satisfied(&wait_id(1), &spec, vec![outcome]);
    assert!(d.step(&[answer.clone(), answer.clone()]).is_err(), "two satisfactions in one window");
    assert!(d.step(&[satisfied(&wait_id(1), &spec, vec![])]).is_err(), "no outcome");
    assert_eq!(d.snapshot(), before);
    assert!(d.step(&[answer]).is_ok());
}

#[test]
fn outcomes_must_arrive_in_invocation_order() {
    let mut d = Driver::new(|_| {});
    effects(d.step(&[]).unwrap());
    let signal = d.model(calls_response(vec![call("s1", "shared", "{}"), call("s2", "shared", r#"{"n":2}"#)]));
    let starts = effects(d.step(&[signal]).unwrap());
    let keys: Vec<ChildKey> = starts.iter().map(|e| start_spec(e).key).collect();
    let one = d.started(&keys[0], Ok(child(1)));
    let two = d.started(&keys[1], Ok(child(2)));
    let spec = wait_spec(&effects(d.step(&[one, two]).unwrap())[0]);
    assert_eq!(spec.children, vec![child(1), child(2)]);
    d.step(&[opened(&wait_id(1), &spec)]).unwrap();
    let before = d.snapshot();
    let r1 = SettledToolResult::new(crate::chat::ToolResult::ok("s1", "shared", Default::default()), false);
    let r2 = SettledToolResult::new(crate::chat::ToolResult::ok("s2", "shared", Default::default()), false);
    let o1 = completed(&keys[0], &child(1), &d.tools, &r1);
    let o2 = completed(&keys[1], &child(2), &d.tools, &r2);
    assert!(d.step(&[satisfied(&wait_id(1), &spec, vec![o2.clone(), o1.clone()])]).is_err(), "reversed");
    assert!(d.step(&[satisfied(&wait_id(1), &spec, vec![o1.clone(), o1.clone()])]).is_err(), "repeated");
    let mut wrong_key = o2.clone();
    wrong_key.key = keys[0].clone();
    assert!(d.step(&[satisfied(&wait_id(1), &spec, vec![o1.clone(), wrong_key])]).is_err(), "key of another invocation");
    assert_eq!(d.snapshot(), before);
    let next = effects(d.step(&[satisfied(&wait_id(1), &spec, vec![o1, o2])]).unwrap());
    let Effect::Dispatcher(payload) = &next[0] else { panic!() };
    assert_eq!(ModelCallEffect::from_payload(payload).unwrap().model_call_sequence, 2);
}

#[test]
fn an_interaction_envelope_where_a_kernel_signal_belongs_is_an_error() {
    let mut d = Driver::new(|_| {});
    let key = to_child_starts(&mut d).key;
    let before = d.snapshot();
    // A tool child's settlement envelope sent to the parent instead of a child start result.
    let settled = crate::interaction::protocol::ToolCallSettlement::Result(SettledToolResult::new(
        crate::chat::ToolResult::ok("c1", "weather", Default::default()),
        false,
    ))
    .to_settlement()
    .unwrap();
    let stray = Signal::new(SignalId::settlement(&d.effect_id()), None, settled.payload, Some(settled.status)).unwrap();
    let e = d.step(&[stray]).unwrap_err();
    assert!(e.to_string().contains("where a kernel signal was expected"), "{e}");
    assert_eq!(d.snapshot(), before);
    let good = d.started(&key, Ok(child(1)));
    assert!(d.step(&[good]).is_ok());
}

#[test]
fn a_delegate_satisfaction_must_settle_every_waited_child() {
    let upper = upper_deployment(b"upper");
    let u = upper.clone();
    let mut d = Driver::new(move |c| c.delegates = vec![delegate("upper", &u)]);
    effects(d.step(&[]).unwrap());
    let calls = vec![call("u1", "upper", r#"{"text":"a"}"#), call("u2", "upper", r#"{"text":"b"}"#)];
    let signal = d.model(calls_response(calls));
    let starts = effects(d.step(&[signal]).unwrap());
    assert_eq!(starts.len(), 2, "a delegate run starts at once");
    let mut started = Vec::new();
    for (n, e) in starts.iter().enumerate() {
        let r = ChildStartResult { key: start_spec(e).key, deployment_ref: upper.reference().clone(), outcome: Ok(child(n as u64 + 1)) };
        let eid = d.effect_id();
        let payload = Payload::from_json(r.to_json()).unwrap();
        started.push(Signal::new(SignalId::settlement(&eid), None, payload, Some(SettlementStatus::Succeeded)).unwrap());
    }
    let spec = wait_spec(&effects(d.step(&started).unwrap())[0]);
    assert_eq!((spec.condition, spec.children.len()), (Condition::All, 2));
    d.step(&[opened(&wait_id(1), &spec)]).unwrap();
    let before = d.snapshot();
    let outcome = |n: u64, e: &Effect, text: &str| {
        let mut o = completed(&start_spec(e).key, &child(n), &upper, &SettledToolResult::new(crate::chat::ToolResult::ok("x", "y", Default::default()), false));
        o.result.output = Some(upper_output(text));
        o
    };
    let e = d.step(&[satisfied(&wait_id(1), &spec, vec![outcome(1, &starts[0], "a")])]).unwrap_err();
    assert!(e.to_string().contains("every waited child"), "{e}");
    assert_eq!(d.snapshot(), before);
    let both = vec![outcome(1, &starts[0], "a"), outcome(2, &starts[1], "b")];
    assert!(d.step(&[satisfied(&wait_id(1), &spec, both)]).is_ok());
}

#[test]
fn replacement_messages_that_make_an_invalid_context_are_a_step_error() {
    let mut d = Driver::new(|_| {});
    effects(d.step(&[]).unwrap());
    let before = d.snapshot();
    // Each message is valid, but a system message must lead the context.
    let reduced = ModelResult::Response {
        response: answer("done"),
        replacement_messages: Some(vec![Message::user("summary"), Message::system("late system prompt")]),
        clock: None,
    };
    let s = reduced.to_settlement().unwrap();
    let signal = Signal::new(SignalId::settlement(&d.effect_id()), None, s.payload, Some(s.status)).unwrap();
    let e = d.step(&[signal]).unwrap_err();
    assert!(e.to_string().contains("replacement messages make an invalid context"), "{e}");
    assert_eq!(d.snapshot(), before);
}
