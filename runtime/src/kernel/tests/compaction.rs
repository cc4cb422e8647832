//! Compaction: a finished child whose Result its parent consumed leaves the cut, and the
//! parent keeps exactly its residue (identity, key, Result digest, debits); a child holding an
//! unresolved Unknown never leaves; switching compaction off changes no outcome.

use super::*;
use crate::kernel::child::{Boundary, Condition};
use crate::kernel::dispatcher::DispatchError;
use crate::kernel::owner::Command;
use crate::kernel::resource::{Allocation, Quota};
use crate::kernel::retired::result_digest;
use crate::kernel::status::Status;
use crate::kernel::testkit::ChildPlan;

/// A root that starts child `a` (parked on wait `go`) under a finite budget, waits for it to
/// drain, then parks on its own wait `more` (so the cut after consumption can be read).
fn parent_then_wait(w: &World) -> Vec<Op> {
    let child_budget = Budget { steps: Quota::Finite(5), effects: Quota::Finite(5), signals: Quota::Finite(5) };
    let a = ChildPlan::new("a", w.deployment.reference(), vec![Op::Wait("go".into())], child_budget);
    vec![
        Op::Children { children: vec![a], boundary: Boundary::SubtreeDrained, condition: Condition::All },
        Op::Wait("more".into()),
    ]
}

fn finite_root() -> Budget {
    Budget { steps: Quota::Finite(100), effects: Quota::Finite(100), signals: Quota::Finite(100) }
}

/// Runs the root until child `a` finished and the root consumed it and answered `more`.
fn run(compaction: bool) -> (World, DirectRunner, ProcessId) {
    let w = echo_world();
    let mut r = w.start(&parent_then_wait(&w), finite_root());
    r.owner.set_compaction(compaction);
    r.run_to_idle();
    let head = w.head();
    let a = child_by_key(&head, "a").id.clone();
    answer_current(&mut r, &head, &a, "signal:a", "a").unwrap();
    r.run_to_idle();
    let head = w.head();
    assert_eq!(head.root().status, Status::Waiting, "the root parks on `more`");
    answer_current(&mut r, &head, &head.root().id.clone(), "signal:more", "more").unwrap();
    r.run_to_idle();
    (w, r, a)
}

#[test]
fn a_consumed_child_leaves_the_cut_and_its_parent_keeps_its_residue() {
    let (w, r, a) = run(true);
    let result = root_result(&r).expect("the root completed");
    assert_eq!(result.status(), Status::Completed);
    let head = w.head();
    assert!(head.process(&a).is_none(), "the consumed child left the cut");
    let retired = &head.root().retired;
    assert_eq!(retired.count, 1);
    let residue = head.residue(&a).expect("the child's residue record took its place");
    assert_eq!(head.residues().len(), 1);
    assert_eq!(residue.parent_id, head.root_id);
    assert_eq!(residue.child_key.as_str(), "a");
    let child_result = result_for(&r, &a).expect("the child's Result was published");
    assert_eq!(residue.result_digest, result_digest(&child_result));
    // Same key as the child's record had.
    assert!(head.tree_cut().entries().iter().any(|e| e.key() == a.as_str()));
    // Grants are permanent debits: the aggregate keeps the child's 5/5/5.
    let debit = Allocation { steps: 5, effects: 5, signals: 5 };
    assert_eq!(retired.debits, debit);
    assert_eq!(head.root().allocated, debit);
    w.check(&r);
}

#[test]
fn compaction_off_keeps_every_child_and_changes_no_outcome() {
    let (w_on, r_on, _) = run(true);
    let (w_off, r_off, a) = run(false);
    assert_eq!(root_result(&r_on).unwrap().output, root_result(&r_off).unwrap().output);
    let off = w_off.head();
    assert!(off.process(&a).is_some(), "without compaction the child stays");
    assert!(off.root().retired.is_empty() && off.residues().is_empty());
    assert!(w_on.head().bytes().len() < off.bytes().len(), "the compacted cut is smaller");
    w_off.check(&r_off);
    w_on.check(&r_on);
}

/// Child `a` finishes and is consumed, the root answers `more` (which retires `a`), then
/// optionally a new writer restores the head before the root answers `again` and completes.
fn run_with_restore(compaction: bool, restore: bool) -> (World, DirectRunner, ProcessId) {
    let w = echo_world();
    let mut ops = parent_then_wait(&w);
    ops.push(Op::Wait("again".into()));
    let mut r = w.start(&ops, finite_root());
    r.owner.set_compaction(compaction);
    r.run_to_idle();
    let head = w.head();
    let a = child_by_key(&head, "a").id.clone();
    answer_current(&mut r, &head, &a, "signal:a", "a").unwrap();
    r.run_to_idle();
    let head = w.head();
    answer_current(&mut r, &head, &head.root().id.clone(), "signal:more", "more").unwrap();
    r.run_to_idle();
    if restore {
        r = w.restore(200);
        r.owner.set_compaction(compaction);
        r.run_to_idle();
    }
    let head = w.head();
    answer_current(&mut r, &head, &head.root().id.clone(), "signal:again", "again").unwrap();
    r.run_to_idle();
    (w, r, a)
}

#[test]
fn a_compacted_cut_restores_and_finishes_like_an_uncompacted_one() {
    let (w, restored, a) = run_with_restore(true, true);
    let (_, uncompacted, _) = run_with_restore(false, false);
    let (done, plain) = (root_result(&restored).expect("finished"), root_result(&uncompacted).expect("finished"));
    assert_eq!(done.output, plain.output);
    assert_eq!(done.termination, plain.termination);
    assert!(w.head().process(&a).is_none(), "the restored cut held the residue only");
    assert_eq!(w.head().root().retired.count, 1);
    assert_eq!(w.head().residues().len(), 1);
    w.check(&restored);
}

#[test]
fn a_child_holding_an_unknown_is_never_retired() {
    // The child's dispatch is uncertain (Unknown); the host kills the child, the parent
    // consumes its drained outcome, and the child stays with its Unknown in every later cut.
    let w = world(Arc::new(|_: u64| Err(DispatchError::Failed("uncertain".into()))));
    let child = ChildPlan::new("u", w.deployment.reference(), vec![Op::Dispatch(Json::str("x"))], Budget::unlimited());
    let ops = vec![
        Op::Children { children: vec![child], boundary: Boundary::SubtreeDrained, condition: Condition::All },
        Op::Wait("more".into()),
    ];
    let mut r = w.start(&ops, Budget::unlimited());
    r.run_to_idle();
    let head = w.head();
    let u = child_by_key(&head, "u").id.clone();
    assert_eq!(head.process(&u).unwrap().unknown_effect_ids().len(), 1);
    r.command(Command::Kill { process: u.clone(), reason: "give up".into() }).unwrap();
    r.run_to_idle();
    let head = w.head();
    answer_current(&mut r, &head, &head.root().id.clone(), "signal:more", "more").unwrap();
    r.run_to_idle();
    assert!(root_result(&r).is_some());
    let head = w.head();
    let kept = head.process(&u).expect("a child with an Unknown stays in the cut");
    assert_eq!(kept.finish.as_ref().unwrap().termination.unresolved_effect_ids.len(), 1);
    assert!(head.root().retired.is_empty() && head.residues().is_empty());
    w.check(&r);
}

#[test]
fn the_oracle_catches_a_child_that_left_with_its_unknown() {
    // The same run with the Unknown-holding child dropped from the final cut by hand: the
    // transition check names invariant 4.
    let w = world(Arc::new(|_: u64| Err(DispatchError::Failed("uncertain".into()))));
    let child = ChildPlan::new("u", w.deployment.reference(), vec![Op::Dispatch(Json::str("x"))], Budget::unlimited());
    let ops = vec![Op::Children { children: vec![child], boundary: Boundary::SubtreeDrained, condition: Condition::All }];
    let mut r = w.start(&ops, Budget::unlimited());
    r.run_to_idle();
    let head = w.head();
    let u = child_by_key(&head, "u").id.clone();
    r.command(Command::Kill { process: u.clone(), reason: "give up".into() }).unwrap();
    r.run_to_idle();
    let before = w.head();
    let child = before.process(&u).unwrap().clone();
    let mut processes: Vec<_> = before.processes().iter().filter(|p| p.id != u).cloned().collect();
    let root = processes.iter_mut().find(|p| p.relation.is_root()).unwrap();
    root.retired.count += 1;
    let residue = crate::kernel::retired::RetiredChild {
        parent_id: root.id.clone(),
        process_id: u.clone(),
        child_key: child.relation.child_key.clone().unwrap(),
        result_digest: result_digest(&result_for(&r, &u).unwrap()),
    };
    let after = TreeSnapshot::build_unchecked_for_tests(before.root_id.clone(), before.incarnation.clone(), before.limits, processes, vec![residue]);
    let violations = crate::kernel::invariants::check_transition(&before, &after);
    assert!(violations.iter().any(|v| v.invariant == 4), "{violations:?}");
}
