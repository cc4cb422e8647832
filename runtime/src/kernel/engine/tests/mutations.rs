//! Mutation `DispatchBeforePending` is live in the Engine driver: with it, a dispatch starts
//! while the commit recording its Effect as pending is still unacknowledged (held) or even
//! after it failed. The activation is thread-local (`mutation::scoped`) and the test
//! executor runs every task on this thread.

use super::*;
use crate::mutation::{scoped, Mutation};

fn is_pending(call: &CommitCallKind) -> bool {
    matches!(call, CommitCallKind::Effect { kind: EffectBoundaryKind::Pending, .. })
}

/// Holds the pending commit; (dispatches while it is held, the result after the release).
fn held_pending(m: Option<Mutation>) -> (u64, Status, Vec<&'static str>) {
    scoped(m, || {
        let w = echo_world();
        let (release, held) = futures::channel::oneshot::channel();
        let held = Mutex::new(Some(held));
        w.committer.set_fault_plan(Box::new(move |call| {
            let hold = if is_pending(&call.kind) { held.lock().unwrap().take() } else { None };
            hold.map_or(Fault::Pass, Fault::Hold)
        }));
        let engine = w.engine();
        let handle = w.sim.block_on(engine.start(w.deployment.clone(), script_input(&[dispatch("x")]))).unwrap();
        w.sim.settle();
        let early = w.dispatches();
        release.send(()).unwrap();
        let result = w.sim.block_on(handle.await_result()).unwrap();
        (early, result.status(), w.boundaries(handle.id()))
    })
}

#[test]
fn a_dispatch_starts_while_its_pending_commit_is_held() {
    let order = vec!["start", "pending", "settled", "terminal"];
    assert_eq!(held_pending(None), (0, Status::Completed, order.clone()));
    assert_eq!(held_pending(Some(Mutation::DispatchBeforePending)), (1, Status::Completed, order));
}

/// Fails the pending commit; (dispatches, boundaries stored).
fn failed_pending(m: Option<Mutation>) -> (u64, Vec<&'static str>) {
    scoped(m, || {
        let w = echo_world();
        w.committer.set_fault_plan(Box::new(|call| if is_pending(&call.kind) { Fault::FailBefore } else { Fault::Pass }));
        let engine = w.engine();
        let handle = w.sim.block_on(engine.start(w.deployment.clone(), script_input(&[dispatch("x")]))).unwrap();
        let err = w.sim.block_on(handle.await_result()).unwrap_err();
        assert!(!err.cause.is_empty());
        (w.dispatches(), w.boundaries(handle.id()))
    })
}

#[test]
fn a_dispatch_runs_even_though_its_pending_commit_failed() {
    assert_eq!(failed_pending(None), (0, vec!["start"]), "no pending record, no dispatch");
    assert_eq!(failed_pending(Some(Mutation::DispatchBeforePending)), (1, vec!["start"]));
}
