//! Round rules through the real owner that the loop tests do not pin: fresh child-wait keys per
//! re-wait, an input-waiting child holding its concurrency slot, deferred tools executable
//! before they are advertised, the ways direct eligibility is lost, a rejected direct
//! candidate, steering after truncation feedback and pending steers across a restore, and the
//! model-call count going up when the call is declared.

use super::*;
use crate::interaction::completion::{CompletionCandidate, CompletionDecision};
use crate::interaction::output::CompletionSource;
use crate::interaction::pending_inputs::pending_tool_inputs;
use crate::interaction::signals::steer_signal;
use crate::interaction::state::Phase;
use crate::kernel::effect::FrameworkEffect;
use crate::kernel::owner::Command;
use crate::kernel::status::Status;

/// The real Interaction Definition, recording the child-wait keys its Steps declare (the
/// kernel settles framework Effects inline, so no committed cut holds them).
struct Recording {
    inner: Definition,
    keys: Arc<Mutex<Vec<String>>>,
}

struct RecordingExecution {
    inner: Box<dyn Execution>,
    keys: Arc<Mutex<Vec<String>>>,
}

impl waist::Definition for Recording {
    fn descriptor(&self) -> &Descriptor {
        self.inner.descriptor()
    }
    fn child_deployments(&self) -> Vec<crate::kernel::deployment::DeploymentRef> {
        self.inner.child_deployments()
    }
    fn start(&self, input: &Payload) -> Result<Box<dyn Execution>, StepError> {
        Ok(Box::new(RecordingExecution { inner: self.inner.start(input)?, keys: self.keys.clone() }))
    }
    fn restore(&self, cx: &StepContext, state: &ExecutionState) -> Result<Box<dyn Execution>, StepError> {
        Ok(Box::new(RecordingExecution { inner: self.inner.restore(cx, state)?, keys: self.keys.clone() }))
    }
}

impl Execution for RecordingExecution {
    fn step(&mut self, cx: &StepContext, signals: &[Signal]) -> Result<Transition, StepError> {
        let t = self.inner.step(cx, signals)?;
        if let Transition::Continue { effects, .. } = &t {
            for e in effects {
                if let Effect::Framework(FrameworkEffect::WaitChildren(spec)) = e {
                    // A Step may run more than once (restore-before-adopt checks): keep each once.
                    let mut keys = self.keys.lock().unwrap();
                    if !keys.contains(&spec.key.as_str().to_owned()) {
                        keys.push(spec.key.as_str().to_owned());
                    }
                }
            }
        }
        Ok(t)
    }
    fn snapshot(&self) -> Result<ExecutionState, StepError> {
        self.inner.snapshot()
    }
}

/// Performs the held dispatch of call `id` (panics when it is not held).
fn finish_call(r: &mut DirectRunner, held: &mut Vec<crate::kernel::direct::PendingDispatch>, id: &str, attempt: u64) {
    let i = held.iter().position(|d| tool_call_id(d) == id).unwrap_or_else(|| panic!("{id} is not held"));
    let (e, o) = held.remove(i).run(attempt);
    r.complete(e, o);
    held.extend(r.take_dispatches());
}

fn steer(id: &str, text: &str) -> crate::kernel::signal::SignalRequest {
    steer_signal(SignalId::parse(id).unwrap(), vec![Message::user(text)]).unwrap()
}

#[test]
fn every_re_wait_of_a_tool_batch_has_a_fresh_key() {
    let calls = vec![
        call("s1", "shared", r#"{"n":1}"#),
        call("s2", "shared", r#"{"n":2}"#),
        call("s3", "shared", r#"{"n":3}"#),
        call("w4", "weather", "{}"),
    ];
    let mut h = harness(vec![calls_response(calls), answer("done")], |c| c.max_concurrent_tool_calls = 2);
    let keys = Arc::new(Mutex::new(Vec::new()));
    let recording = Recording { inner: h.definition.clone(), keys: keys.clone() };
    let dispatcher = h.parent.dispatcher().cloned();
    let reference = h.parent.reference().clone();
    h.parent = Deployment::new(Arc::new(recording), dispatcher, reference.implementation_digest(), reference.configuration_digest());
    h.resolver = Arc::new(DeploymentSet::new().with(h.parent.clone()).with(tool_set().deployment().clone()));
    let mut r = h.start("go");
    run_held(&mut r, 1);
    let mut held = r.take_dispatches();
    assert_eq!(held.iter().map(tool_call_id).collect::<Vec<_>>(), ["s1", "s2"], "two slots");
    finish_call(&mut r, &mut held, "s1", 2);
    assert_eq!(held.iter().map(tool_call_id).collect::<Vec<_>>(), ["s2", "s3"], "s1's slot went to s3");
    finish_call(&mut r, &mut held, "s2", 3);
    finish_call(&mut r, &mut held, "s3", 4);
    // The exclusive weather call is its own window after the barrier.
    finish_call(&mut r, &mut held, "w4", 5);
    assert_eq!(held.len(), 1, "the next model call");
    for d in held {
        let (e, o) = d.run(6);
        r.complete(e, o);
    }
    r.run_to_idle();
    h.check(&r);
    assert_eq!(root_result(&r).unwrap().status(), Status::Completed);
    // `interaction.children:<seq>:<first index of the batch>:<settled invocations>`.
    assert_eq!(
        *keys.lock().unwrap(),
        [
            "interaction.children:1:0:0",
            "interaction.children:1:0:1",
            "interaction.children:1:0:2",
            "interaction.children:1:3:0"
        ]
    );
}

#[test]
fn a_child_waiting_for_input_keeps_its_concurrency_slot() {
    let calls = vec![call("a1", "ask", "{}"), call("a2", "ask", r#"{"n":2}"#), call("s3", "shared", "{}")];
    let h = harness(vec![calls_response(calls), answer("done")], |c| c.max_concurrent_tool_calls = 2);
    let mut r = h.start("go");
    r.run_to_idle();
    let pending = pending_tool_inputs(&h.head()).unwrap();
    assert_eq!(pending.len(), 2);
    assert_eq!(h.head().processes().len(), 3, "s3 waits for a slot: both are held by waiting children");
    let answer_first = pending[0].response_signal(SignalId::parse("signal:a").unwrap(), &Json::str("red")).unwrap();
    r.command(Command::Deliver { process: pending[0].process_id().clone(), requests: vec![answer_first] }).unwrap();
    r.run_to_idle();
    // The answered child finished and was consumed, so it is retired: count lifetime children.
    let head = h.head();
    assert_eq!(head.processes().len() + head.residues_of(&head.root_id).count(), 4, "the freed slot started s3");
    assert!(root_result(&r).is_none(), "the other sibling still waits");
    let rest = pending_tool_inputs(&h.head()).unwrap();
    assert_eq!(rest.len(), 1);
    let answer_second = rest[0].response_signal(SignalId::parse("signal:b").unwrap(), &Json::str("blue")).unwrap();
    r.command(Command::Deliver { process: rest[0].process_id().clone(), requests: vec![answer_second] }).unwrap();
    r.run_to_idle();
    h.check(&r);
    let ids: Vec<String> = results_at(&h.model.request(1), 2).into_iter().map(|r| r.id).collect();
    assert_eq!(ids, ["a1", "a2", "s3"]);
}

#[test]
fn a_deferred_tool_runs_before_it_is_advertised() {
    let h = harness(vec![calls_response(vec![call("h1", "hidden", r#"{"n":1}"#)]), answer("done")], |_| {});
    let (_r, result) = h.run("go");
    assert_eq!(result.status(), Status::Completed);
    let results = results_at(&h.model.request(1), 2);
    assert!(!results[0].is_error);
    assert_eq!(results[0].output.content, r#"hidden({"n":1})"#);
    for n in 0..2 {
        assert!(!h.model.request(n).tools.iter().any(|t| t.name == "hidden"), "running it advertises nothing");
    }
}

#[test]
fn an_unknown_tool_or_invalid_arguments_cost_the_round_its_direct_completion() {
    for (second, expected) in [
        (call("g", "ghost", "{}"), "error: tool \"ghost\" is not available"),
        (call("d2", "direct", "{not json"), "error: invalid arguments: "),
    ] {
        let h = harness(vec![calls_response(vec![call("d1", "direct", "{}"), second]), answer("via the model")], |_| {});
        let (_r, result) = h.run("go");
        let output = output_of(&result);
        assert_eq!(output.source(), CompletionSource::ModelResponse, "{expected}");
        assert_eq!(output.model_calls, 2);
        let results = results_at(&h.model.request(1), 2);
        assert!(!results[0].is_error);
        assert!(results[1].is_error && results[1].output.content.starts_with(expected), "{:?}", results[1]);
    }
}

#[test]
fn a_rejected_direct_candidate_goes_back_to_the_model_with_its_round() {
    let seen = Arc::new(Mutex::new(Vec::<(CompletionSource, usize)>::new()));
    let record = seen.clone();
    let h = harness(vec![calls_response(vec![call("d1", "direct", "{}")]), answer("checked")], move |c| {
        c.completion_validator = Some(Arc::new(move |candidate: &CompletionCandidate| {
            let source = candidate.output().source();
            record.lock().unwrap().push((source, candidate.working_context().messages.len()));
            Ok(match source {
                CompletionSource::DirectToolResults => CompletionDecision::reject("Check the result first."),
                _ => CompletionDecision::accept(),
            })
        }))
    });
    let (_r, result) = h.run("go");
    let output = output_of(&result);
    assert_eq!(output.source(), CompletionSource::ModelResponse);
    assert_eq!(output.model_calls, 2);
    // The candidate's context excludes the candidate: [user] for the direct one, then
    // [user, assistant(calls), tool(results), user(feedback)] for the model's.
    assert_eq!(*seen.lock().unwrap(), [(CompletionSource::DirectToolResults, 1), (CompletionSource::ModelResponse, 4)]);
    let second = h.model.request(1);
    assert_eq!(second.messages.len(), 4);
    assert_eq!(second.messages[1].tool_calls().map(|c| c.id.as_str()).collect::<Vec<_>>(), ["d1"]);
    assert_eq!(results_at(&second, 2)[0].output.content, "direct({})");
    assert_eq!(second.messages[3].text(), "Check the result first.");
    assert_eq!(h.model.applied.lock().unwrap()[1], Vec::<SignalId>::new(), "a retry applies no steer");
}

#[test]
fn the_call_is_counted_when_declared_and_a_steer_follows_truncation_feedback() {
    let truncated = with_finish(vec![call("c1", "weather", "{\"ci")], FinishReason::Length);
    let h = harness(vec![truncated, answer("done")], |_| {});
    let mut r = h.start("go");
    let held = r.take_dispatches();
    assert_eq!(held.len(), 1);
    // The declaring Step is prepared until its Effect settles: its candidate already counts.
    let committed = h.parent_state();
    assert_eq!((committed.phase, committed.model_call_count), (Phase::ReadyModel, 0));
    let prepared = h.head().root().prepared.clone().expect("the declaring step is prepared");
    let candidate = h.definition.restore_state(&prepared.candidate_state).unwrap();
    assert_eq!((candidate.phase, candidate.model_call_count), (Phase::AwaitingModel, 1), "counted while in flight");
    r.command(Command::Deliver { process: r.owner.root_id().clone(), requests: vec![steer("signal:s1", "be exact")] })
        .unwrap();
    for d in held {
        let (e, o) = d.run(1);
        r.complete(e, o);
    }
    r.run_to_idle();
    h.check(&r);
    assert_eq!(root_result(&r).unwrap().status(), Status::Completed);
    let second = h.model.request(1);
    assert_eq!(second.messages.len(), 4, "[user, assistant(calls), tool(feedback), user(steer)]");
    assert!(results_at(&second, 2)[0].output.content.contains("reached its token limit"));
    assert_eq!(second.messages[3].text(), "be exact");
    assert_eq!(*h.model.applied.lock().unwrap(), [vec![], vec![SignalId::parse("signal:s1").unwrap()]]);
}

#[test]
fn pending_steers_keep_their_order_across_a_restore() {
    let h = harness(vec![calls_response(vec![call("a1", "ask", "{}"), call("s2", "shared", "{}")]), answer("done")], |_| {});
    let mut r = h.start("go");
    run_held(&mut r, 1);
    let tools = r.take_dispatches();
    assert_eq!(tools.len(), 2);
    let root = r.owner.root_id().clone();
    r.command(Command::Deliver { process: root.clone(), requests: vec![steer("signal:s1", "first steer")] }).unwrap();
    for d in tools {
        let (e, o) = d.run(2);
        r.complete(e, o);
    }
    r.run_to_idle();
    // s2's settlement stepped the parent: the first steer is admitted into its state.
    let ids = |h: &Harness| h.parent_state().pending_steer.map(|p| p.signal_ids).unwrap_or_default();
    assert_eq!(ids(&h), [SignalId::parse("signal:s1").unwrap()]);
    r.command(Command::Deliver { process: root, requests: vec![steer("signal:s2", "second steer")] }).unwrap();
    r.run_to_idle();
    assert_eq!(h.head().root().mailbox.pending_count(), 1, "the second waits in the parked parent's mailbox");
    drop(r);
    let mut r = h.restore(300);
    r.run_to_idle();
    assert_eq!(ids(&h), [SignalId::parse("signal:s1").unwrap()]);
    let pending = pending_tool_inputs(&h.head()).unwrap();
    let answer = pending[0].response_signal(SignalId::parse("signal:answer").unwrap(), &Json::str("x")).unwrap();
    r.command(Command::Deliver { process: pending[0].process_id().clone(), requests: vec![answer] }).unwrap();
    r.run_to_idle();
    h.check(&r);
    assert_eq!(root_result(&r).unwrap().status(), Status::Completed);
    let texts: Vec<String> = h.model.request(1).messages.iter().map(Message::text).collect();
    assert_eq!(texts[3..], ["first steer", "second steer"]);
    let applied = h.model.applied.lock().unwrap().clone();
    assert_eq!(applied[1], [SignalId::parse("signal:s1").unwrap(), SignalId::parse("signal:s2").unwrap()]);
}

/// Records the ToolInvocation its calls find in their context.
#[derive(Default)]
struct Attributed(Mutex<Vec<crate::interaction::attribution::ToolInvocation>>);

impl Tool for Attributed {
    fn spec(&self) -> ToolDefinitionInput {
        ToolDefinitionInput {
            name: "attributed".into(),
            description: "Records its attribution.".into(),
            input_schema: crate::json::parse(br#"{"type":"object"}"#).unwrap(),
        }
    }
    fn call<'a>(&'a self, _: &'a Invocation, cx: ToolContext) -> BoxFuture<'a, Result<crate::chat::ToolOutput, ToolError>> {
        if let Some(i) = crate::interaction::attribution::ToolInvocation::from_context(&cx) {
            self.0.lock().unwrap().push(i.clone());
        }
        Box::pin(async { Ok(crate::chat::ToolOutput::text("noted")) })
    }
}

#[test]
fn a_tool_sees_the_attribution_of_its_own_child() {
    use crate::interaction::ids::tool_child_key;
    let tool = Arc::new(Attributed::default());
    let target = call("a1", "attributed", r#"{"x":1}"#);
    let h = harness_tools(
        vec![tool.clone()],
        vec![
            calls_response(vec![call("w0", "weather", "{}")]),
            calls_response(vec![call("w1", "weather", "{}"), target.clone()]),
            answer("done"),
        ],
        |_| {},
    );
    let (r, result) = h.run("go");
    assert_eq!(result.status(), Status::Completed);
    let seen = tool.0.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    let i = &seen[0];
    assert!(i.is_valid());
    assert_eq!((i.model_call_sequence(), i.tool_call_index()), (2, 1), "the absolute index in the response");
    assert_eq!(i.tool_call(), target);
    assert_eq!(i.step_sequence(), 1, "the tool child's own step");
    assert_eq!(i.relation().child_key, Some(tool_child_key(2, "a1").unwrap()));
    assert_eq!(i.relation().parent_id.as_ref(), Some(r.owner.root_id()));
    assert_eq!(i.deployment_ref(), tool_set().deployment_ref());
    // The finished tool child was consumed by its parent: its residue keeps id and key.
    let head = h.head();
    let child = head.residues_of(&head.root_id).find(|c| Some(&c.child_key) == i.relation().child_key.as_ref()).unwrap().process_id.clone();
    assert_eq!(i.effect_id(), &crate::kernel::ids::EffectId::derive(&child, 1, 0), "the child's Effect");
}
