//! The `mutations` hooks are live: each run below differs only in the mutation in effect on
//! this thread (`mutation::scoped`, so tests running in parallel are untouched), and the
//! mutated run really breaks the rule the mutation names.

use super::*;
use crate::interaction::signals::steer_signal;
use crate::kernel::owner::Command;
use crate::kernel::status::Status;
use crate::mutation::{scoped, Mutation};

/// Three shared calls whose children finish in reverse order; the ids of the folded results.
fn reverse_completion(m: Option<Mutation>) -> Vec<String> {
    scoped(m, || {
        let calls =
            vec![call("s1", "shared", "{}"), call("s2", "shared", r#"{"n":2}"#), call("s3", "shared", r#"{"n":3}"#)];
        let h = harness(vec![calls_response(calls), answer("done")], |_| {});
        let mut r = h.start("go");
        run_held(&mut r, 1);
        let tools = r.take_dispatches();
        assert_eq!(tools.len(), 3);
        for (n, d) in tools.into_iter().rev().enumerate() {
            let (e, o) = d.run(10 + n as u64);
            r.complete(e, o);
        }
        r.run_to_idle();
        h.check(&r);
        assert_eq!(root_result(&r).unwrap().status(), Status::Completed);
        results_at(&h.model.request(1), 2).into_iter().map(|r| r.id).collect()
    })
}

#[test]
fn fold_in_completion_order_reorders_the_tool_message() {
    assert_eq!(reverse_completion(None), ["s1", "s2", "s3"]);
    assert_eq!(reverse_completion(Some(Mutation::FoldInCompletionOrder)), ["s3", "s2", "s1"]);
}

/// A steer during the first model call; (model calls, applied ids per call, steer copies in
/// the last request).
fn steered(m: Option<Mutation>) -> (usize, Vec<Vec<SignalId>>, usize) {
    scoped(m, || {
        let h = harness(vec![answer("premature"), answer("final"), answer("third")], |_| {});
        let mut r = h.start("go");
        let held = r.take_dispatches();
        let steer = steer_signal(SignalId::parse("signal:s1").unwrap(), vec![Message::user("use metric units")]).unwrap();
        r.command(Command::Deliver { process: r.owner.root_id().clone(), requests: vec![steer] }).unwrap();
        for d in held {
            let (e, o) = d.run(1);
            r.complete(e, o);
        }
        r.run_to_idle();
        h.check(&r);
        assert_eq!(root_result(&r).unwrap().status(), Status::Completed);
        let last = h.model.request(h.model.calls() - 1);
        let copies = last.messages.iter().filter(|m| m.text() == "use metric units").count();
        let applied = h.model.applied.lock().unwrap().clone();
        (h.model.calls(), applied, copies)
    })
}

#[test]
fn steer_applied_twice_shows_the_steer_to_two_model_calls() {
    let s1 = SignalId::parse("signal:s1").unwrap();
    assert_eq!(steered(None), (2, vec![vec![], vec![s1.clone()]], 1));
    assert_eq!(steered(Some(Mutation::SteerAppliedTwice)), (3, vec![vec![], vec![s1.clone()], vec![s1]], 2));
}

/// A tool panics (Unknown), the owner is replaced; (tool calls, root status, unknowns left).
fn restored_unknown(m: Option<Mutation>) -> (u64, Option<Status>, usize) {
    scoped(m, || {
        let flaky = FaultTool::new("flaky", Fault::PanicOnce);
        let h = harness_tools(
            vec![flaky.clone()],
            vec![calls_response(vec![call("f1", "flaky", "{}")]), answer("done")],
            |_| {},
        );
        let mut r = h.start("go");
        r.run_to_idle();
        assert!(root_result(&r).is_none());
        assert_eq!(flaky.count(), 1);
        assert_eq!(unknowns(&h.head()).len(), 1);
        let mut r2 = h.restore(200);
        r2.run_to_idle();
        h.check(&r2);
        (flaky.count(), root_result(&r2).map(|r| r.status()), unknowns(&h.head()).len())
    })
}

#[test]
fn redispatch_unknown_runs_the_tool_again_without_the_host() {
    assert_eq!(restored_unknown(None), (1, None, 1), "the Unknown waits for the host");
    assert_eq!(restored_unknown(Some(Mutation::RedispatchUnknown)), (2, Some(Status::Completed), 0));
}
