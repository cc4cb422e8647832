//! Compaction: a finished child whose Result its parent consumed leaves the cut, and the
//! parent keeps exactly its residue (identity, key, Result digest, debits); a child holding an
//! unresolved Unknown never leaves; switching compaction off changes no outcome.

use super::*;
use crate::kernel::child::{Boundary, Condition};
use crate::kernel::dispatcher::DispatchError;
use crate::kernel::owner::{Command, CommandError};
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
    let mut processes: Vec<_> = before.processes().iter().filter(|p| p.id != u).map(|p| (**p).clone()).collect();
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

// ------------------------------------------------------------ residue records in the cut

use crate::kernel::retired::RetiredChild;
use crate::kernel::snapshot::{ResidueFault, SnapshotError};

fn residue_of(s: &TreeSnapshot, parent: &ProcessId, id: &str, key: &str) -> RetiredChild {
    RetiredChild {
        parent_id: parent.clone(),
        process_id: ProcessId::parse(id).unwrap(),
        child_key: crate::kernel::ids::ChildKey::parse(key).unwrap(),
        result_digest: crate::json::Digest::of(s.root_id.as_str().as_bytes()),
    }
}

fn residues(s: &TreeSnapshot) -> Vec<RetiredChild> {
    s.residues().iter().map(|r| (**r).clone()).collect()
}

/// Builds (and validates) `s` with its root's retired count set to `count` and `residues`.
fn forged(s: &TreeSnapshot, count: u64, residues: Vec<RetiredChild>) -> Result<TreeSnapshot, SnapshotError> {
    let mut processes = s.processes().iter().map(|p| (**p).clone()).collect::<Vec<_>>();
    processes.iter_mut().find(|p| p.relation.is_root()).unwrap().retired.count = count;
    TreeSnapshot::build(s.root_id.clone(), s.incarnation.clone(), s.limits, processes, residues)
}

fn fault(e: Result<TreeSnapshot, SnapshotError>) -> ResidueFault {
    match e {
        Err(SnapshotError::Residue { fault, .. }) => fault,
        other => panic!("expected a residue refusal, got {other:?}"),
    }
}

#[test]
fn the_residue_record_replaces_the_childs_record_under_its_key_and_round_trips() {
    let (w, _r, a) = run(true);
    let head = w.head();
    let residue_entry = head.tree_cut().entries().iter().find(|e| e.key() == a.as_str()).unwrap();
    let text = String::from_utf8(residue_entry.bytes().unwrap().to_vec()).unwrap();
    assert!(text.contains("\"retired\":true") && text.len() < 400, "{text}");
    // The whole text splits into the same records, and decodes to the same snapshot.
    let split = crate::kernel::commit::TreeCut::from_whole(head.bytes()).unwrap();
    assert_eq!(split.digest, head.digest());
    assert_eq!(TreeSnapshot::decode(head.bytes()).unwrap(), head);
    assert!(!head.root().retired.is_empty());
    // Rebuilt as is, the forgery helper accepts the real cut.
    assert_eq!(forged(&head, 1, residues(&head)).unwrap(), head);
}

#[test]
fn validation_refuses_a_residue_whose_parent_is_absent() {
    let (w, _r, _a) = run(true);
    let head = w.head();
    let ghost = ProcessId::parse("process:ghost").unwrap();
    let mut rs = residues(&head);
    rs.push(residue_of(&head, &ghost, "process:orphan", "x"));
    assert_eq!(fault(forged(&head, 1, rs)), ResidueFault::ParentAbsent(ghost.to_string()));
}

#[test]
fn validation_refuses_a_lost_or_extra_residue_record() {
    let (w, _r, _a) = run(true);
    let head = w.head();
    // Lost: the root counts one retired child, the cut holds no residue.
    let lost = fault(forged(&head, 1, vec![]));
    assert!(matches!(lost, ResidueFault::CountMismatch { recorded: 1, counted: 0, .. }), "{lost:?}");
    // Extra: the root counts one, the cut holds two.
    let mut rs = residues(&head);
    rs.push(residue_of(&head, &head.root_id, "process:extra", "x"));
    let extra = fault(forged(&head, 1, rs));
    assert!(matches!(extra, ResidueFault::CountMismatch { recorded: 1, counted: 2, .. }), "{extra:?}");
}

#[test]
fn validation_refuses_a_child_key_used_twice_under_one_parent() {
    // Two residues under one key.
    let (w, _r, _a) = run(true);
    let head = w.head();
    let mut rs = residues(&head);
    rs.push(residue_of(&head, &head.root_id, "process:again", "a"));
    assert_eq!(fault(forged(&head, 2, rs)), ResidueFault::DuplicateChildKey("a".into()));
    // A live child and a residue under one key.
    let (w, _r, _a) = run(false);
    let head = w.head();
    let rs = vec![residue_of(&head, &head.root_id, "process:again", "a")];
    assert_eq!(fault(forged(&head, 1, rs)), ResidueFault::DuplicateChildKey("a".into()));
}

#[test]
fn validation_refuses_a_retired_id_that_is_live_or_retired_twice() {
    let (w, _r, a) = run(false);
    let head = w.head();
    let rs = vec![residue_of(&head, &head.root_id, a.as_str(), "z")];
    assert_eq!(fault(forged(&head, 1, rs)), ResidueFault::LiveId);
    let (w, _r, a) = run(true);
    let head = w.head();
    let mut rs = residues(&head);
    rs.push(residue_of(&head, &head.root_id, a.as_str(), "z"));
    assert_eq!(fault(forged(&head, 2, rs)), ResidueFault::DuplicateId);
}

#[test]
fn decoding_refuses_a_marked_record_that_is_not_a_residue_and_residues_out_of_order() {
    let (w, _r, _a) = run(true);
    let head = w.head();
    let text = String::from_utf8(head.bytes().to_vec()).unwrap();
    let unmarked = text.replace("\"retired\":true", "\"retired\":false");
    assert!(matches!(TreeSnapshot::decode(unmarked.as_bytes()), Err(SnapshotError::Decode(_))));
    // Two residues, swapped out of their canonical (id) order: not canonical, refused.
    let mut rs = residues(&head);
    rs.push(residue_of(&head, &head.root_id, "process:zzz", "zz"));
    let two = forged(&head, 2, rs).unwrap();
    let records: Vec<String> = two.residues_encoded().iter().map(|e| String::from_utf8(e.bytes().to_vec()).unwrap()).collect();
    let bytes = String::from_utf8(two.bytes().to_vec()).unwrap();
    let pair = format!("{},{}", records[0], records[1]);
    let swapped = bytes.replace(&pair, &format!("{},{}", records[1], records[0]));
    assert_ne!(swapped, bytes);
    assert!(TreeSnapshot::decode(swapped.as_bytes()).is_err());
    assert_eq!(TreeSnapshot::decode(two.bytes()).unwrap(), two);
}

/// A root that starts and consumes `n` children one after the other (each completes at once),
/// then parks on `more` until answered (the last child retires at that finalization: its
/// terminal cut was not yet acknowledged when its Result was consumed).
fn sequential_children(n: usize) -> TreeSnapshot {
    let w = echo_world();
    let ops: Vec<Op> = (0..n)
        .map(|i| {
            let c = ChildPlan::new(&format!("c{i}"), w.deployment.reference(), vec![], Budget::unlimited());
            Op::Children { children: vec![c], boundary: Boundary::SubtreeDrained, condition: Condition::All }
        })
        .chain([Op::Wait("more".into()), Op::Wait("end".into())])
        .collect();
    let mut r = w.start(&ops, Budget::unlimited());
    r.run_to_idle();
    let head = w.head();
    answer_current(&mut r, &head, &head.root_id.clone(), "signal:more", "more").unwrap();
    r.run_to_idle();
    let head = w.head();
    assert_eq!(head.root().status, Status::Waiting, "parked on `end`");
    assert_eq!((head.processes().len(), head.residues().len()), (1, n), "every child retired");
    w.check(&r);
    head
}

/// The root's record without its strategy state (the scripted strategy logs every step, so
/// its state grows whatever compaction does).
fn root_record_without_state(s: &TreeSnapshot) -> usize {
    let mut root = s.root().clone();
    root.committed_state = crate::kernel::waist::ExecutionState::new(root.committed_state.kind.clone(), Payload::from_json(Json::Null).unwrap());
    crate::kernel::snapshot::EncodedProcess::encode(&root).len()
}

#[test]
fn the_parents_record_does_not_grow_with_its_retired_children() {
    let (ten, hundred) = (sequential_children(10), sequential_children(100));
    let (small, large) = (root_record_without_state(&ten), root_record_without_state(&hundred));
    // Only counters gain digits (steps, arrivals, the retired count).
    if large > small + 8 {
        let mut root = hundred.root().clone();
        root.committed_state = ten.root().committed_state.clone();
        eprintln!("{}", String::from_utf8_lossy(crate::kernel::snapshot::EncodedProcess::encode(&root).bytes()));
    }
    assert!(large <= small + 8, "root record {small} B with 10 retired children, {large} B with 100");
    // Each residue is its own small record, carried as kept once written.
    let sizes: Vec<usize> = hundred.residues_encoded().iter().map(|e| e.len()).collect();
    assert!(sizes.iter().all(|&n| n < 400), "{sizes:?}");
}

#[test]
fn a_retired_parents_residues_leave_with_it_and_a_retired_key_stays_used() {
    let w = echo_world();
    let grandchild = ChildPlan::new("g", w.deployment.reference(), vec![], Budget::unlimited());
    // Each parent parks once after consuming its child, so that finalization retires it.
    let b_script = vec![
        Op::Children { children: vec![grandchild], boundary: Boundary::SubtreeDrained, condition: Condition::All },
        Op::Wait("b_more".into()),
    ];
    let b = ChildPlan::new("b", w.deployment.reference(), b_script, Budget::unlimited());
    let b_again = ChildPlan::new("b", w.deployment.reference(), vec![], Budget::unlimited());
    let ops = vec![
        Op::Children { children: vec![b], boundary: Boundary::SubtreeDrained, condition: Condition::All },
        Op::Wait("more".into()),
        Op::Children { children: vec![b_again], boundary: Boundary::SubtreeDrained, condition: Condition::All },
        Op::Wait("end".into()),
    ];
    let mut r = w.start(&ops, Budget::unlimited());
    r.run_to_idle();
    let b_id = child_by_key(&w.head(), "b").id.clone();
    answer_current(&mut r, &w.head(), &b_id, "signal:b", "b").unwrap();
    r.run_to_idle();
    let root_id = w.head().root_id.clone();
    answer_current(&mut r, &w.head(), &root_id, "signal:more", "more").unwrap();
    r.run_to_idle();
    let heads: Vec<TreeSnapshot> = r.acknowledged_cuts().iter().map(|c| TreeSnapshot::from_cut(c).unwrap()).collect();
    // Some head held the grandchild's residue under `b`.
    let under_b = heads.iter().find_map(|h| h.residues().iter().find(|res| res.parent_id != h.root_id).map(|res| (**res).clone()));
    let under_b = under_b.expect("b retired its child");
    let head = w.head();
    assert!(head.process(&under_b.parent_id).is_none(), "b retired");
    assert_eq!(head.residue(&under_b.parent_id).map(|res| res.child_key.as_str()), Some("b"));
    assert!(head.residue(&under_b.process_id).is_none(), "the grandchild's residue left with b");
    assert_eq!(head.residues().len(), 1);
    // Starting `b` again under the root is an identity conflict: the key stays used.
    assert_eq!(head.root().status, Status::Waiting);
    let log = head.root().committed_state.payload.value().to_canonical_string();
    assert!(log.contains("child_start_failed") && log.contains("identity_conflict"), "{log}");
    w.check(&r);
}

#[test]
fn the_oracle_catches_a_residue_that_changed_left_or_came_back() {
    let (w_on, _r_on, a) = run(true);
    let (w_off, _r_off, _) = run(false);
    let (compacted, plain) = (w_on.head(), w_off.head());
    let details = |before: &TreeSnapshot, after: &TreeSnapshot| -> Vec<String> {
        crate::kernel::invariants::check_transition(before, after).iter().map(|v| v.detail.clone()).collect()
    };
    // The retired child is live again, its residue left while its parent stayed.
    let back = details(&compacted, &plain);
    assert!(back.iter().any(|d| d.contains("live again")), "{back:?}");
    assert!(back.iter().any(|d| d.contains("did not retire")), "{back:?}");
    // A residue record rewritten between heads.
    let mut changed = residues(&compacted);
    changed[0].result_digest = crate::json::Digest::of(b"another result");
    let rewritten = forged(&compacted, 1, changed).unwrap();
    let d = details(&compacted, &rewritten);
    assert!(d.iter().any(|d| d.contains("changed between heads")), "{d:?}");
    // One cut: the root counts two retired children but the cut holds one residue.
    let mut processes = compacted.processes().iter().map(|p| (**p).clone()).collect::<Vec<_>>();
    processes[0].retired.count = 2;
    let miscounted = TreeSnapshot::build_unchecked_for_tests(compacted.root_id.clone(), compacted.incarnation.clone(), compacted.limits, processes, residues(&compacted));
    let v = crate::kernel::invariants::check_snapshot(&miscounted);
    assert!(v.iter().any(|v| v.invariant == 25 && v.detail.contains("residues")), "{v:?}");
    assert!(compacted.residue(&a).is_some());
}

/// The residue-only rules are checked once per residue set and the set is shared by later
/// cuts (`kernel::residue_set`): a later cut reusing a checked set still has its
/// tree-relative rules checked, and a cut whose residues differ (a tampered record) is a new
/// set, checked from its own records, even when decoded reusing a validated head.
#[test]
fn a_residue_set_checked_once_still_refuses_a_tampered_or_misplaced_residue() {
    let head = sequential_children(3);
    let set = head.residue_set().clone();
    assert!(set.index().is_some(), "the head validated, so its set's index exists");
    let members = |processes: Vec<crate::kernel::process::Process>| {
        processes.into_iter().map(|p| {
            let e = Arc::new(crate::kernel::snapshot::EncodedProcess::encode(&p));
            (Arc::new(p), e)
        })
    };
    let reassemble = |processes: Vec<crate::kernel::process::Process>| {
        TreeSnapshot::assemble_changed(
            head.root_id.clone(),
            head.incarnation.clone(),
            head.limits,
            crate::kernel::commit::CutEnvelope::keel(&head.root_id, &head.incarnation, &crate::json::ToJson::to_json(&head.limits)),
            members(processes).collect(),
            set.clone(),
            &|_| false,
            Some(head.tree_cut()),
        )
    };
    // The same set under the same Processes: the same cut, sharing the set.
    let again = reassemble(head.processes().iter().map(|p| (**p).clone()).collect::<Vec<_>>()).unwrap();
    assert_eq!(again.digest(), head.digest());
    assert!(Arc::ptr_eq(again.residue_set(), &set));
    // Reused set, but the parent's count no longer matches it: refused.
    let mut processes = head.processes().iter().map(|p| (**p).clone()).collect::<Vec<_>>();
    processes[0].retired.count = 2;
    assert!(matches!(fault(reassemble(processes)), ResidueFault::CountMismatch { recorded: 2, counted: 3, .. }));
    // Reused set, but the parent is gone (another root in its place): refused.
    let mut processes = head.processes().iter().map(|p| (**p).clone()).collect::<Vec<_>>();
    processes[0].id = ProcessId::parse("process:other").unwrap();
    assert!(reassemble(processes).is_err());
    // A tampered residue record (the second child's key made the first's), decoded reusing
    // the validated head whose other records it shares: refused by the new set's own check.
    let records: Vec<String> = head.residues_encoded().iter().map(|e| String::from_utf8(e.bytes().to_vec()).unwrap()).collect();
    let (first, second) = (&head.residues()[0], &head.residues()[1]);
    let tampered_record = records[1].replace(
        &format!("\"child_key\":\"{}\"", second.child_key),
        &format!("\"child_key\":\"{}\"", first.child_key),
    );
    assert_ne!(tampered_record, records[1]);
    let text = String::from_utf8(head.bytes().to_vec()).unwrap().replace(&records[1], &tampered_record);
    let cut = crate::kernel::commit::TreeCut::from_whole(text.as_bytes()).unwrap();
    let refused = TreeSnapshot::decode_reusing(&cut, Some(&head));
    assert_eq!(fault(refused), ResidueFault::DuplicateChildKey(first.child_key.to_string()));
    assert_eq!(fault(TreeSnapshot::decode(text.as_bytes())), ResidueFault::DuplicateChildKey(first.child_key.to_string()));
}

// ------------------------------------------------------------ addressing a retired child

/// Every command that names one Process, addressed to `pid`.
fn commands_to(pid: &ProcessId) -> Vec<Command> {
    let settlement = Settlement { status: SettlementStatus::Succeeded, payload: Payload::from_json(Json::str("late")).unwrap() };
    vec![
        Command::Deliver { process: pid.clone(), requests: vec![request("signal:late", None, "late")] },
        Command::Cancel { process: pid.clone(), reason: "late".into() },
        Command::Kill { process: pid.clone(), reason: "late".into() },
        Command::Resolve { process: pid.clone(), effect: crate::kernel::ids::EffectId::derive(pid, 1, 0), settlement },
    ]
}

/// Sends every command of [`commands_to`] to the retired child `a` and to an id that never
/// existed: the first is `ProcessFinished`, the second `NotFound`, and nothing is committed.
fn assert_retired_is_finished(w: &World, r: &mut DirectRunner, a: &ProcessId) {
    let before = w.head().digest();
    let never = ProcessId::root_from_hex(&hex(0xdead)).unwrap();
    for command in commands_to(a) {
        let what = format!("{command:?}");
        assert_eq!(r.command(command).err(), Some(CommandError::ProcessFinished(a.clone())), "{what}");
    }
    for command in commands_to(&never) {
        let what = format!("{command:?}");
        assert_eq!(r.command(command).err(), Some(CommandError::NotFound(never.clone())), "{what}");
    }
    assert_eq!(w.head().digest(), before, "a refused command commits nothing");
}

#[test]
fn commands_to_a_retired_child_answer_process_finished_also_after_a_restore() {
    let w = echo_world();
    let mut ops = parent_then_wait(&w);
    ops.push(Op::Wait("again".into()));
    let mut r = w.start(&ops, finite_root());
    r.run_to_idle();
    let head = w.head();
    let a = child_by_key(&head, "a").id.clone();
    answer_current(&mut r, &head, &a, "signal:a", "a").unwrap();
    r.run_to_idle();
    let head = w.head();
    answer_current(&mut r, &head, &head.root().id.clone(), "signal:more", "more").unwrap();
    r.run_to_idle();
    assert!(w.head().process(&a).is_none() && w.head().residue(&a).is_some(), "`a` is retired");
    // The writer that retired it.
    assert_retired_is_finished(&w, &mut r, &a);
    // A new writer that knows `a` only from its residue record.
    let mut r = w.restore(300);
    r.run_to_idle();
    assert_retired_is_finished(&w, &mut r, &a);
    // Uncompacted, the same child answers the same.
    let (w_off, mut r_off, a_off) = run(false);
    assert!(w_off.head().process(&a_off).is_some_and(|p| p.is_terminal()));
    for command in commands_to(&a_off) {
        assert_eq!(r_off.command(command).err(), Some(CommandError::ProcessFinished(a_off.clone())));
    }
    let head = w.head();
    answer_current(&mut r, &head, &head.root().id.clone(), "signal:again", "again").unwrap();
    r.run_to_idle();
    assert!(root_result(&r).is_some());
    w.check(&r);
}
