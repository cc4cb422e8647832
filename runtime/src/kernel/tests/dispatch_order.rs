//! No dispatch leaves the owner before the `pending` boundary of its Effect is acknowledged,
//! however the owner groups its commits (a child's start is committed together with what its
//! parent does next, never with the child's first Effect). The owner is driven by hand here:
//! each commit is held, dispatches that finished meanwhile are fed in before it is
//! acknowledged, and every Dispatch action is checked against the acknowledged boundaries.
//! Run with one boundary per commit and with chained commits (a pending boundary ends its
//! chain: no Effect is dispatched before the chain that holds its pending boundary is
//! acknowledged).

use super::*;
use crate::kernel::child::{Boundary, Condition};
use crate::kernel::commit::EffectBoundaryKind;
use crate::kernel::direct::{commit, PendingDispatch};
use crate::kernel::ids::EffectId;
use crate::kernel::owner::{Action, CommitRequest, Input};
use crate::kernel::testkit::ChildPlan;
use std::collections::{BTreeSet, VecDeque};

#[test]
fn no_dispatch_leaves_the_owner_before_its_pending_boundary_is_acknowledged() {
    dispatch_order(false);
}

#[test]
fn no_dispatch_leaves_a_chaining_owner_before_its_pending_boundary_is_acknowledged() {
    let chains = dispatch_order(true);
    assert!(chains > 0, "the chaining owner sent chains");
}

/// Runs the scripted tree; returns how many chains (commits of two or more boundaries) it sent.
fn dispatch_order(chained: bool) -> usize {
    let mut chains = 0;
    let w = echo_world();
    let d = w.deployment.reference().clone();
    let child = |key: &str| {
        let script = vec![Op::Dispatch(Json::str(format!("{key}-1"))), Op::Dispatch(Json::str(format!("{key}-2")))];
        ChildPlan::new(key, &d, script, Budget::unlimited())
    };
    let ops = [
        Op::Dispatch(Json::str("first")),
        Op::Children { children: vec![child("a"), child("b")], boundary: Boundary::TerminalResult, condition: Condition::All },
        Op::Child { deployment: d.clone(), script: vec![Op::Dispatch(Json::str("only"))], key: "c".into(), budget: Budget::unlimited() },
        Op::Dispatch(Json::str("last")),
    ];
    let mut owner = Owner::start(
        w.resolver.clone(),
        w.deployment.clone(),
        script_input(&ops),
        ProcessId::root_from_hex(&hex(1)).unwrap(),
        IncarnationId::from_hex(&hex(100)).unwrap(),
        config(Budget::unlimited()),
        now(),
    )
    .expect("start");
    if chained {
        owner.enable_chained_commits();
    }
    let mut acknowledged_pending: BTreeSet<EffectId> = BTreeSet::new();
    let mut outstanding: VecDeque<PendingDispatch> = VecDeque::new();
    let mut dispatched = 0u64;
    let mut done = false;
    for _ in 0..10_000 {
        let mut in_flight: Option<Vec<CommitRequest>> = None;
        while let Some(action) = owner.poll_action() {
            match action {
                Action::Commit(request) => {
                    assert!(in_flight.is_none(), "two commits in flight");
                    in_flight = Some(vec![request]);
                }
                Action::CommitChain(chain) => {
                    assert!(chained, "a chain from an owner that was not asked for chains");
                    assert!(in_flight.is_none(), "two commits in flight");
                    let pending_inside = chain[..chain.len() - 1]
                        .iter()
                        .any(|r| matches!(r, CommitRequest::Effect(b) if b.kind == EffectBoundaryKind::Pending));
                    assert!(!pending_inside, "a pending boundary that does not end its chain");
                    chains += 1;
                    in_flight = Some(chain);
                }
                Action::Dispatch { deployment, request, cx } => {
                    assert!(in_flight.is_none(), "dispatch of {} while a commit is in flight", request.effect_id);
                    assert!(
                        acknowledged_pending.contains(&request.effect_id),
                        "dispatch of {} before its pending boundary was acknowledged",
                        request.effect_id
                    );
                    dispatched += 1;
                    outstanding.push_back(PendingDispatch { deployment, request, cx });
                }
                Action::Publish(_) | Action::Reply { .. } => {}
            }
        }
        if let Some(request) = in_flight {
            // Work that finishes while the commit is held must wait for it.
            if let Some(job) = outstanding.pop_front() {
                let (effect, outcome) = job.run(dispatched);
                owner.handle(Input::DispatchDone { effect, outcome }, now());
                assert!(owner.poll_action().is_none(), "the owner acted while a commit was in flight");
            }
            let result = match request.as_slice() {
                [one] => futures::executor::block_on(commit(w.committer.as_ref(), one)),
                chain => futures::executor::block_on(w.committer.commit_chain(chain)),
            };
            assert!(result.is_ok(), "commit {}: {result:?}", request[0].boundary_name());
            for r in &request {
                if let CommitRequest::Effect(b) = r {
                    if b.kind == EffectBoundaryKind::Pending {
                        acknowledged_pending.insert(b.effect_id.clone());
                    }
                }
            }
            owner.handle(Input::CommitDone(result), now());
            continue;
        }
        if let Some(job) = outstanding.pop_front() {
            let (effect, outcome) = job.run(dispatched);
            owner.handle(Input::DispatchDone { effect, outcome }, now());
            continue;
        }
        done = true;
        break;
    }
    assert!(done, "the run did not come to rest");
    assert!(owner.is_finished(), "every Process ended");
    assert_eq!(dispatched, 7, "first, a-1, a-2, b-1, b-2, only, last: each once");
    assert_eq!(w.calls.load(Ordering::SeqCst), 7);
    chains
}
