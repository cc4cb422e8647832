//! The core loop through the real owner: model call → tool batch → results in call order →
//! next model call → final answer, and every failure of the loop.

use super::*;
use crate::chat::ToolResult;
use crate::interaction::codes;
use crate::interaction::completion::{CompletionCandidate, CompletionDecision};
use crate::interaction::output::CompletionSource;
use crate::interaction::signals::steer_signal;
use crate::kernel::owner::Command;
use crate::kernel::status::Status;

#[test]
fn single_tool_round_then_final_answer() {
    let h = harness(vec![calls_response(vec![call("c1", "weather", r#"{"city":"Paris"}"#)]), answer("18C in Paris")], |_| {});
    let (_r, result) = h.run("weather in Paris?");
    assert_eq!(result.status(), Status::Completed);
    let output = output_of(&result);
    assert_eq!(output.source(), CompletionSource::ModelResponse);
    assert_eq!(output.model_calls, 2);
    assert_eq!(output.response().unwrap().message.as_ref().unwrap().text(), "18C in Paris");
    assert_eq!(h.model.calls(), 2);
    // Model, start, wait-open, wait parked, settle + next model: four kernel
    // Steps per single-tool round.
    assert_eq!(*h.model.steps.lock().unwrap(), vec![1, 5]);
    let first = h.model.request(0);
    let names: Vec<&str> = first.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, TOOLS.to_vec(), "initial tools in registration order, the deferred one hidden");
    let second = h.model.request(1);
    assert_eq!(second.messages.len(), 3, "user, assistant(calls), tool(results)");
    let results = results_at(&second, 2);
    assert_eq!(results, vec![ToolResult::ok("c1", "weather", crate::chat::ToolOutput::text(r#"weather({"city":"Paris"})"#))]);
}

#[test]
fn same_key_calls_never_overlap_and_windows_respect_the_key() {
    let calls = vec![
        call("a", "keyed", r#"{"key":"x"}"#),
        call("b", "keyed", r#"{"key":"y"}"#),
        call("c", "keyed", r#"{"key":"x"}"#),
    ];
    let h = harness(vec![calls_response(calls), answer("done")], |_| {});
    let mut r = h.start("go");
    // The model call runs; then the first window [a, b] starts (c repeats key x).
    let model = r.take_dispatches();
    assert_eq!(model.len(), 1);
    for d in model {
        let (e, o) = d.run(1);
        r.complete(e, o);
    }
    let first = r.take_dispatches();
    let ids: Vec<String> = first.iter().map(tool_call_id).collect();
    assert_eq!(ids, vec!["a", "b"], "c must not start while a (same key) is running");
    for d in first.into_iter().rev() {
        let (e, o) = d.run(2);
        r.complete(e, o);
    }
    let second = r.take_dispatches();
    let ids: Vec<String> = second.iter().map(tool_call_id).collect();
    assert_eq!(ids, vec!["c"]);
    for d in second {
        let (e, o) = d.run(3);
        r.complete(e, o);
    }
    r.run_to_idle();
    h.check(&r);
    assert_eq!(root_result(&r).unwrap().status(), Status::Completed);
    let ids: Vec<String> = results_at(&h.model.request(1), 2).into_iter().map(|r| r.id).collect();
    assert_eq!(ids, vec!["a", "b", "c"]);
}

#[test]
fn results_return_in_call_order_when_children_finish_in_reverse() {
    let calls = vec![call("s1", "shared", "{}"), call("s2", "shared", r#"{"n":2}"#), call("s3", "shared", r#"{"n":3}"#)];
    let h = harness(vec![calls_response(calls), answer("done")], |_| {});
    let mut r = h.start("go");
    for d in r.take_dispatches() {
        let (e, o) = d.run(1);
        r.complete(e, o);
    }
    let tools = r.take_dispatches();
    assert_eq!(tools.len(), 3, "one window of three shared calls, all started at once");
    for (n, d) in tools.into_iter().rev().enumerate() {
        let (e, o) = d.run(10 + n as u64);
        r.complete(e, o);
    }
    r.run_to_idle();
    h.check(&r);
    assert_eq!(root_result(&r).unwrap().status(), Status::Completed);
    let results = results_at(&h.model.request(1), 2);
    let ids: Vec<&str> = results.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, vec!["s1", "s2", "s3"]);
    assert_eq!(results[1].output.content, r#"shared({"n":2})"#);
}

#[test]
fn concurrency_one_runs_calls_one_at_a_time() {
    let calls = vec![call("s1", "shared", "{}"), call("s2", "shared", "{}")];
    let h = harness(vec![calls_response(calls), answer("done")], |c| c.max_concurrent_tool_calls = 0);
    let mut r = h.start("go");
    for d in r.take_dispatches() {
        let (e, o) = d.run(1);
        r.complete(e, o);
    }
    let first = r.take_dispatches();
    assert_eq!(first.len(), 1, "0 is normalized to 1");
    for d in first {
        let (e, o) = d.run(2);
        r.complete(e, o);
    }
    assert_eq!(r.take_dispatches().len(), 1);
}

#[test]
fn truncated_calls_get_feedback_and_another_model_call() {
    let truncated = with_finish(vec![call("c1", "weather", "{\"ci")], FinishReason::Length);
    let h = harness(vec![truncated, answer("done")], |_| {});
    let (r, result) = h.run("go");
    assert_eq!(result.status(), Status::Completed);
    assert_eq!(output_of(&result).model_calls, 2);
    let results = results_at(&h.model.request(1), 2);
    assert!(results[0].is_error);
    assert_eq!(
        results[0].output.content,
        "error: tool \"weather\" was not executed because model output reached its token limit; emit the complete call again"
    );
    let head = futures::executor::block_on(h.committer.load_tree(r.owner.root_id())).unwrap().unwrap();
    let snapshot = crate::kernel::snapshot::TreeSnapshot::from_cut(&head.cut).unwrap();
    assert_eq!(snapshot.processes().len(), 1, "no tool child was started");
}

#[test]
fn calls_with_another_finish_reason_fail_even_with_a_steer() {
    for finish in [FinishReason::Stop, FinishReason::ContentFilter] {
        let h = harness(vec![with_finish(vec![call("c1", "weather", "{}")], finish)], |_| {});
        let mut r = h.start("go");
        let held = r.take_dispatches();
        let steer = steer_signal(SignalId::parse("signal:s1").unwrap(), vec![Message::user("retry")]).unwrap();
        r.command(Command::Deliver { process: r.owner.root_id().clone(), requests: vec![steer] }).unwrap();
        for d in held {
            let (e, o) = d.run(1);
            r.complete(e, o);
        }
        r.run_to_idle();
        let result = root_result(&r).unwrap();
        assert_eq!(result.status(), Status::Failed);
        let failure = failure_of(&result);
        assert!(failure.is(codes::MODEL_TOOL_CALLS_NOT_COMPLETED), "{failure:?}");
        assert_eq!(
            failure.message.as_str(),
            format!("model output ended with {}; tool calls were not executed", finish.as_str())
        );
    }
}

#[test]
fn unknown_tools_are_rejected_inline() {
    let calls = vec![call("g", "ghost", "{}"), call("w", "weather", "{}")];
    let h = harness(vec![calls_response(calls), answer("done")], |_| {});
    let (_r, result) = h.run("go");
    assert_eq!(result.status(), Status::Completed);
    let results = results_at(&h.model.request(1), 2);
    assert_eq!(results[0], ToolResult::error("g", "ghost", "error: tool \"ghost\" is not available"));
    assert!(!results[1].is_error);
}

#[test]
fn the_model_call_limit_fails_before_requesting() {
    let h = harness(vec![calls_response(vec![call("c1", "weather", "{}")])], |c| c.max_model_calls = 1);
    let (_r, result) = h.run("go");
    assert_eq!(result.status(), Status::Failed);
    assert!(failure_of(&result).is(codes::LIMIT_MODEL_CALLS));
    assert_eq!(h.model.calls(), 1);
}

#[test]
fn a_final_answer_on_the_last_allowed_call_completes() {
    let h = harness(vec![answer("done")], |c| c.max_model_calls = 1);
    let (_r, result) = h.run("go");
    assert_eq!(output_of(&result).model_calls, 1);
}

#[test]
fn provider_and_host_errors_fail_the_interaction() {
    // The script is empty: the scripted model answers with a provider error.
    let h = harness(vec![], |_| {});
    let (_r, result) = h.run("go");
    assert!(failure_of(&result).is(codes::MODEL_FAILED));
}

#[test]
fn a_steer_during_a_model_call_is_applied_at_the_next_boundary() {
    let h = harness(vec![answer("premature"), answer("final")], |_| {});
    let mut r = h.start("go");
    let held = r.take_dispatches();
    assert_eq!(held.len(), 1);
    let steer = steer_signal(SignalId::parse("signal:s1").unwrap(), vec![Message::user("use metric units")]).unwrap();
    r.command(Command::Deliver { process: r.owner.root_id().clone(), requests: vec![steer] }).unwrap();
    for d in held {
        let (e, o) = d.run(1);
        r.complete(e, o);
    }
    r.run_to_idle();
    h.check(&r);
    let result = root_result(&r).unwrap();
    let output = output_of(&result);
    assert_eq!(output.response().unwrap().message.as_ref().unwrap().text(), "final", "the steer overrode completion");
    assert_eq!(output.model_calls, 2);
    let second = h.model.request(1);
    let texts: Vec<String> = second.messages.iter().map(Message::text).collect();
    assert_eq!(texts, vec!["go", "premature", "use metric units"]);
    let applied = h.model.applied.lock().unwrap().clone();
    assert_eq!(applied, vec![vec![], vec![SignalId::parse("signal:s1").unwrap()]]);
    assert_eq!(h.model.request(0).messages.len(), 1, "the in-flight request never sees the steer");
}

#[test]
fn a_steer_during_a_tool_round_waits_and_suppresses_direct_completion() {
    let h = harness(vec![calls_response(vec![call("d1", "direct", "{}")]), answer("final")], |_| {});
    let mut r = h.start("go");
    for d in r.take_dispatches() {
        let (e, o) = d.run(1);
        r.complete(e, o);
    }
    let tools = r.take_dispatches();
    assert_eq!(tools.len(), 1);
    let steer = steer_signal(SignalId::parse("signal:s2").unwrap(), vec![Message::user("also check rain")]).unwrap();
    r.command(Command::Deliver { process: r.owner.root_id().clone(), requests: vec![steer] }).unwrap();
    for d in tools {
        let (e, o) = d.run(2);
        r.complete(e, o);
    }
    r.run_to_idle();
    let output = output_of(&root_result(&r).unwrap());
    assert_eq!(output.source(), CompletionSource::ModelResponse);
    let texts: Vec<String> = h.model.request(1).messages.iter().map(Message::text).collect();
    assert_eq!(texts.last().unwrap(), "also check rain", "after the tool message");
    assert_eq!(h.model.request(1).messages.len(), 4);
}

#[test]
fn direct_results_complete_without_another_model_call() {
    let calls = vec![call("d1", "direct", "{}"), call("d2", "direct", r#"{"n":2}"#)];
    let h = harness(vec![calls_response(calls)], |_| {});
    let (_r, result) = h.run("go");
    let output = output_of(&result);
    assert_eq!(output.source(), CompletionSource::DirectToolResults);
    assert_eq!(output.model_calls, 1);
    let ids: Vec<&str> = output.tool_results().unwrap().iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, vec!["d1", "d2"]);
    assert_eq!(h.model.calls(), 1);
}

#[test]
fn one_non_direct_result_sends_everything_back_to_the_model() {
    let calls = vec![call("d1", "direct", "{}"), call("w", "weather", "{}")];
    let h = harness(vec![calls_response(calls), answer("done")], |_| {});
    let (_r, result) = h.run("go");
    assert_eq!(output_of(&result).source(), CompletionSource::ModelResponse);
    assert_eq!(results_at(&h.model.request(1), 2).len(), 2);
}

#[test]
fn the_validator_rejects_then_accepts() {
    let seen = Arc::new(Mutex::new(Vec::<usize>::new()));
    let record = seen.clone();
    let h = harness(
        vec![calls_response(vec![call("c1", "weather", "{}")]), answer("premature"), answer("final")],
        move |c| {
            c.completion_validator = Some(Arc::new(move |candidate: &CompletionCandidate| {
                record.lock().unwrap().push(candidate.working_context().messages.len());
                let text = candidate.output().response().unwrap().message.as_ref().unwrap().text();
                Ok(if text == "premature" { CompletionDecision::reject("Give the final answer.") } else { CompletionDecision::accept() })
            }))
        },
    );
    let (_r, result) = h.run("go");
    let output = output_of(&result);
    assert_eq!(output.model_calls, 3);
    let texts: Vec<String> = h.model.request(2).messages.iter().map(Message::text).collect();
    assert_eq!(texts.len(), 5, "[user, assistant(call), tool(result), assistant(premature), user(feedback)]");
    assert_eq!(texts[3], "premature");
    assert_eq!(texts[4], "Give the final answer.");
    assert_eq!(*seen.lock().unwrap(), vec![3, 5], "the candidate context excludes the candidate");
}

#[test]
fn validator_errors_and_invalid_decisions_fail() {
    let h = harness(vec![answer("x")], |c| c.completion_validator = Some(Arc::new(|_: &CompletionCandidate| Err("broken".into()))));
    let (_r, result) = h.run("go");
    let f = failure_of(&result);
    assert!(f.is(codes::COMPLETION_VALIDATOR_FAILED));
    assert_eq!(f.message.as_str(), "broken");
    let h = harness(vec![answer("x")], |c| {
        c.completion_validator = Some(Arc::new(|_: &CompletionCandidate| Ok(CompletionDecision::default())))
    });
    let (_r, result) = h.run("go");
    let f = failure_of(&result);
    assert!(f.is(codes::COMPLETION_DECISION_INVALID));
    assert_eq!(result.termination.cause, crate::kernel::status::Cause::ContractFailure);
}

#[test]
fn a_rejected_candidate_at_the_limit_fails_with_the_limit() {
    let h = harness(vec![answer("x")], |c| {
        c.max_model_calls = 1;
        c.completion_validator = Some(Arc::new(|_: &CompletionCandidate| Ok(CompletionDecision::reject("again"))))
    });
    let (_r, result) = h.run("go");
    assert!(failure_of(&result).is(codes::LIMIT_MODEL_CALLS));
}

#[test]
fn duplicate_call_ids_are_a_step_error() {
    let h = harness(vec![calls_response(vec![call("c1", "weather", "{}"), call("c1", "shared", "{}")])], |_| {});
    let (_r, result) = h.run("go");
    let f = failure_of(&result);
    assert_eq!(f.code.as_str(), kcodes::STEP_FAILED.name(), "{f:?}");
    assert!(f.message.as_str().contains("repeats a tool call id"), "{f:?}");
}

#[test]
fn a_tool_child_that_does_not_complete_fails_the_parent() {
    // One step is not enough for a tool child (dispatch, then complete): the budget kills it.
    let h = harness(vec![calls_response(vec![call("c1", "weather", "{}")])], |c| {
        c.tool_budget = Some(Budget::finite(1, 100, 100))
    });
    let (_r, result) = h.run("go");
    assert_eq!(result.status(), Status::Failed);
    let f = failure_of(&result);
    assert!(f.is(codes::TOOL_PROCESS_FAILED), "{f:?}");
    assert!(f.message.as_str().starts_with("Tool child process:"), "{f:?}");
    assert!(f.message.as_str().contains("ended with failed (execution_failure): "), "{f:?}");
}

#[test]
fn advertisements_commit_after_the_round_in_call_order() {
    let h = harness(vec![calls_response(vec![call("c1", "secret", "{}")]), answer("done")], |_| {});
    let (_r, result) = h.run("go");
    assert_eq!(result.status(), Status::Completed);
    let names: Vec<String> = h.model.request(1).tools.iter().map(|t| t.name.clone()).collect();
    assert_eq!(names.last().unwrap(), "hidden", "the advertised deferred tool is visible from the next call");
    assert!(!h.model.request(0).tools.iter().any(|t| t.name == "hidden"));
}

#[test]
fn a_restored_tree_resumes_mid_batch() {
    let calls = vec![call("s1", "shared", "{}"), call("s2", "shared", "{}")];
    let h = harness(vec![calls_response(calls), answer("done")], |_| {});
    let mut r = h.start("go");
    for d in r.take_dispatches() {
        let (e, o) = d.run(1);
        r.complete(e, o);
    }
    let tools = r.take_dispatches();
    assert_eq!(tools.len(), 2);
    let (e, o) = tools.into_iter().next().unwrap().run(2);
    r.complete(e, o);
    // Every committed cut restores through the Definition (restore-before-adopt runs it too).
    let head = futures::executor::block_on(h.committer.load_tree(r.owner.root_id())).unwrap().unwrap();
    let snapshot = crate::kernel::snapshot::TreeSnapshot::from_cut(&head.cut).unwrap();
    let state = snapshot.root().committed_state.clone();
    let parent = h.definition.restore_state(&state).unwrap();
    assert!(parent.tool_round.is_some());
}

#[test]
fn a_sibling_waiting_for_input_stays_active_while_others_finish() {
    use crate::interaction::pending_inputs::pending_tool_inputs;
    let calls = vec![call("a1", "ask", "{}"), call("s2", "shared", "{}")];
    let h = harness(vec![calls_response(calls), answer("done")], |_| {});
    let mut r = h.start("go");
    r.run_to_idle();
    assert!(root_result(&r).is_none(), "the parent keeps waiting for the paused sibling");
    assert_eq!(h.model.calls(), 1);
    let head = futures::executor::block_on(h.committer.load_tree(r.owner.root_id())).unwrap().unwrap();
    let snapshot = crate::kernel::snapshot::TreeSnapshot::from_cut(&head.cut).unwrap();
    let pending = pending_tool_inputs(&snapshot).unwrap();
    assert_eq!(pending.len(), 1);
    let request = pending[0].response_signal(SignalId::parse("signal:answer").unwrap(), &Json::str("blue")).unwrap();
    r.command(Command::Deliver { process: pending[0].process_id().clone(), requests: vec![request] }).unwrap();
    r.run_to_idle();
    h.check(&r);
    assert_eq!(root_result(&r).unwrap().status(), Status::Completed);
    let results = results_at(&h.model.request(1), 2);
    let contents: Vec<&str> = results.iter().map(|r| r.output.content.as_str()).collect();
    assert_eq!(contents, vec![r#"picked "blue""#, "shared({})"]);
}

#[test]
fn a_validator_panic_is_a_panic_failure() {
    let h = harness(vec![answer("x")], |c| {
        c.completion_validator = Some(Arc::new(|_: &CompletionCandidate| -> Result<CompletionDecision, String> {
            panic!("validator bug")
        }))
    });
    let (_r, result) = h.run("go");
    let f = failure_of(&result);
    assert_eq!(f.kind, crate::kernel::failure::FailureKind::Panic, "{f:?}");
    assert_eq!(f.code.as_str(), "execution.step.failed");
}

#[test]
fn a_restored_tree_keeps_settled_siblings_and_waits_for_the_unknown_one() {
    use crate::interaction::protocol::ToolCallSettlement;
    use crate::kernel::owner::Reply;
    use crate::kernel::snapshot::TreeSnapshot;
    let calls = vec![call("s1", "shared", "{}"), call("s2", "shared", "{}")];
    let h = harness(vec![calls_response(calls), answer("done")], |_| {});
    let mut r = h.start("go");
    for d in r.take_dispatches() {
        let (e, o) = d.run(1);
        r.complete(e, o);
    }
    let mut tools = r.take_dispatches();
    assert_eq!(tools.len(), 2);
    let held = tools.pop().unwrap();
    assert_eq!(tool_call_id(&held), "s2");
    let (e, o) = tools.pop().unwrap().run(2);
    r.complete(e, o);
    // The owner dies with s2's dispatch in flight; a new incarnation restores the head.
    let load = |h: &Harness| {
        let head = futures::executor::block_on(h.committer.load_tree(&ProcessId::root_from_hex(&hex(1)).unwrap()));
        TreeSnapshot::from_cut(&head.unwrap().unwrap().cut).unwrap()
    };
    let owner = Owner::restore(
        h.resolver.clone(),
        h.parent.clone(),
        &load(&h),
        IncarnationId::from_hex(&hex(200)).unwrap(),
        now(),
    )
    .unwrap();
    let mut r2 = DirectRunner::new(owner, h.committer.clone() as Arc<dyn Committer>, now());
    r2.run_to_idle();
    assert!(root_result(&r2).is_none(), "the parent waits for the unknown sibling");
    assert_eq!(h.model.calls(), 1);
    let snapshot = load(&h);
    let (process, effect) = snapshot
        .processes()
        .iter()
        .find_map(|p| {
            let unknown = p.prepared.as_ref()?.unknown_ids();
            unknown.first().map(|e| (p.id.clone(), e.clone()))
        })
        .expect("s2's effect is unknown after the restore");
    let settled = SettledToolResult::new(
        ToolResult::ok("s2", "shared", crate::chat::ToolOutput::text("shared(resolved)")),
        false,
    );
    let settlement = ToolCallSettlement::Result(settled).to_settlement().unwrap();
    let reply = r2.command(Command::Resolve { process, effect, settlement });
    assert!(matches!(reply, Ok(Reply::Resolved)), "{reply:?}");
    r2.run_to_idle();
    h.check(&r2);
    assert_eq!(root_result(&r2).unwrap().status(), Status::Completed);
    let contents: Vec<String> = results_at(&h.model.request(1), 2).into_iter().map(|r| r.output.content).collect();
    assert_eq!(contents, vec!["shared({})", "shared(resolved)"]);
}

#[test]
fn a_final_response_without_a_message_or_finish_reason_is_a_step_error() {
    let no_finish = Response { finish_reason: None, ..answer("almost") };
    let no_message = Response { message: None, ..answer("unused") };
    for (response, expected) in [(no_finish, "needs a finish reason"), (no_message, "needs a message")] {
        let h = harness(vec![response], |_| {});
        let (_r, result) = h.run("go");
        assert_eq!(result.status(), Status::Failed);
        let f = failure_of(&result);
        assert_eq!(f.code.as_str(), kcodes::STEP_FAILED.name(), "{f:?}");
        assert!(f.message.as_str().contains(expected), "{f:?}");
        assert!(result.output.is_none(), "never offered as a completion");
    }
}
