//! The invariant oracle catches each rule it claims: every check gets a real cut or history
//! (from a DirectRunner run of the scripted strategy) mutated to break exactly that rule.

use super::*;
use crate::kernel::capability::CapabilitySet;
use crate::kernel::child::Boundary;
use crate::kernel::commit::{Checkpoint, CheckpointKind, CommitRecordKind, EffectBoundaryKind};
use crate::kernel::effect::{Effect, EffectPhase, PreparedEffect};
use crate::kernel::engine_signal::{ChildOutcome, ChildWaitSatisfied};
use crate::kernel::failure::{codes, Failure};
use crate::kernel::ids::{EffectId, SignalId, WaitId};
use crate::kernel::invariants::{
    check_commit, check_commit_reusing, check_history, check_publications, check_snapshot, check_transition, Violation,
};
use crate::kernel::mailbox::{Mailbox, RecordBody, SignalRecord};
use crate::kernel::owner::{Command, CommitRequest};
use crate::kernel::process::{Finish, Process};
use crate::kernel::resource::Quota;
use crate::kernel::result::ProcessResult;
use crate::kernel::status::{Cause, Status, Termination};
use crate::json::Digest;

/// Asserts `violations` report invariant `n` (and prints them all otherwise).
#[track_caller]
fn assert_reports(violations: &[Violation], n: u8) {
    assert!(
        violations.iter().any(|v| v.invariant == n),
        "expected an invariant {n} violation, got: {:#?}",
        violations.iter().map(ToString::to_string).collect::<Vec<_>>()
    );
}

#[track_caller]
fn assert_clean(violations: &[Violation]) {
    assert!(violations.is_empty(), "{:#?}", violations.iter().map(ToString::to_string).collect::<Vec<_>>());
}

/// Every acknowledged head a runner committed, in order.
fn heads(r: &DirectRunner) -> Vec<TreeSnapshot> {
    r.acknowledged_cuts().iter().map(|c| TreeSnapshot::from_cut(c).unwrap()).collect()
}

/// The cut with its processes mutated, built WITHOUT validation.
fn mutate(s: &TreeSnapshot, f: impl FnOnce(&mut Vec<Process>)) -> TreeSnapshot {
    let mut processes = s.processes().iter().map(|p| (**p).clone()).collect::<Vec<_>>();
    f(&mut processes);
    TreeSnapshot::build_unchecked_for_tests(s.root_id.clone(), s.incarnation.clone(), s.limits, processes, s.residues().iter().map(|r| (**r).clone()).collect())
}

fn root_mut(ps: &mut [Process]) -> &mut Process {
    ps.iter_mut().find(|p| p.relation.is_root()).unwrap()
}
fn child_mut(ps: &mut [Process]) -> &mut Process {
    ps.iter_mut().find(|p| !p.relation.is_root()).unwrap()
}

fn payload(v: &str) -> Payload {
    Payload::from_json(Json::str(v)).unwrap()
}

fn finished_run(ops: &[Op], budget: Budget) -> (World, DirectRunner) {
    let w = echo_world();
    let mut r = w.start(ops, budget);
    r.run_to_idle();
    (w, r)
}

/// [`finished_run`] without compaction: the mailbox keeps every consumed record.
fn finished_run_uncompacted(ops: &[Op], budget: Budget) -> (World, DirectRunner) {
    let w = echo_world();
    let mut r = w.start(ops, budget);
    r.owner.set_compaction(false);
    r.run_to_idle();
    (w, r)
}

/// `m`'s retained records with `extra` appended as the next arrivals, and the new count.
fn append_records(m: &Mailbox, extra: Vec<SignalRecord>) -> (Vec<SignalRecord>, u64) {
    let mut records = m.records().to_vec();
    let mut admitted = m.len();
    for mut r in extra {
        admitted += 1;
        r.set_arrival(admitted);
        records.push(r);
    }
    (records, admitted)
}

/// `m` with `extra` appended, its history checked.
fn appended(m: &Mailbox, extra: Vec<SignalRecord>) -> Mailbox {
    let (records, admitted) = append_records(m, extra);
    Mailbox::from_retained(records, m.cursor(), admitted).unwrap()
}

/// A root parked on an Unknown (its dispatch failed uncertainly).
fn unknown_head() -> TreeSnapshot {
    let w = world(Arc::new(|_| Err(DispatchError::Failed("reset".into()))));
    let mut r = w.start(&[Op::Dispatch(Json::str("x"))], Budget::unlimited());
    r.run_to_idle();
    w.head()
}

/// A parent waiting for a child that waits forever (2 processes, both live).
fn parent_child_run() -> (DirectRunner, Arc<MemoryCommitter>) {
    let d = echo_world().deployment;
    let resolver = Arc::new(DeploymentSet::new().with(d.clone()));
    let committer = Arc::new(MemoryCommitter::new());
    let ops = [Op::Child {
        deployment: d.reference().clone(),
        script: vec![Op::Wait("forever".into())],
        key: "worker".into(),
        budget: Budget::finite(5, 5, 5),
    }];
    let owner = Owner::start(
        resolver,
        d,
        script_input(&ops),
        ProcessId::root_from_hex(&hex(1)).unwrap(),
        IncarnationId::from_hex(&hex(9)).unwrap(),
        config(Budget::finite(50, 50, 50)),
        now(),
    )
    .unwrap();
    let mut r = DirectRunner::new(owner, committer.clone() as Arc<dyn Committer>, now());
    r.run_to_idle();
    (r, committer)
}

/// A parent that starts two children in one batch, run to the end.
fn two_children_run() -> DirectRunner {
    use crate::kernel::child::Condition;
    use crate::kernel::testkit::ChildPlan;
    let w = echo_world();
    let plan = |key: &str| ChildPlan::new(key, w.deployment.reference(), vec![Op::Checkpoint], Budget::unlimited());
    let op = Op::Children { children: vec![plan("a"), plan("b")], boundary: Boundary::SubtreeDrained, condition: Condition::All };
    let mut r = w.start_with(&[op], config(Budget::unlimited()));
    r.run_to_idle();
    r
}

// ------------------------------------------------------------------ check_snapshot

#[test]
fn real_heads_have_no_violations() {
    let (w, r) = finished_run(&[Op::Dispatch(Json::str("a")), Op::Wait("k".into())], Budget::finite(10, 10, 10));
    for h in heads(&r) {
        assert_clean(&check_snapshot(&h));
    }
    w.check(&r);
    assert_clean(&check_snapshot(&unknown_head()));
}

#[test]
fn frontier_violation_is_reported() {
    let head = unknown_head();
    let bad = mutate(&head, |ps| {
        let root = root_mut(ps);
        let id = root.id.clone();
        let prepared = root.prepared.as_mut().unwrap();
        let seq = prepared.sequence;
        // Unknown, then a settled Effect after it: nothing may start behind an Unknown.
        prepared.effects.push(PreparedEffect {
            id: EffectId::derive(&id, seq, 1),
            effect: Effect::Dispatcher(payload("y")),
            phase: EffectPhase::Settled(ok_settlement("z").unwrap()),
            diagnostic: None,
        });
        root.prepared_effects += 1;
    });
    assert_reports(&check_snapshot(&bad), 1);
    let diag = mutate(&head, |ps| {
        let prepared = root_mut(ps).prepared.as_mut().unwrap();
        prepared.effects[0].phase = EffectPhase::Planned;
    });
    assert_reports(&check_snapshot(&diag), 1); // a diagnostic on a planned effect
}

#[test]
fn forged_engine_signal_and_out_of_order_settlements_are_reported() {
    let (_, r) = finished_run_uncompacted(&[Op::Dispatch(Json::str("a")), Op::Dispatch(Json::str("b"))], Budget::unlimited());
    let head = heads(&r).pop().unwrap();
    // An engine-namespace record no Effect derived: `build` itself accepts it (the kernel's
    // validation does not re-derive identities); the oracle does not. Also after a gap
    // (compaction dropped the consumed settlements), where the oracle searches for it.
    let (_, compacted_run) = finished_run(&[Op::Dispatch(Json::str("a")), Op::Dispatch(Json::str("b"))], Budget::unlimited());
    let compacted = heads(&compacted_run).pop().unwrap();
    assert!(compacted.root().mailbox.is_compacted());
    for head in [&head, &compacted] {
        let forged = mutate(head, |ps| {
            let root = root_mut(ps);
            let id = SignalId::parse("signal:engine:forged").unwrap();
            let rec = SignalRecord::new(id, None, None, None, RecordBody::Pending(payload("x"))).unwrap();
            root.mailbox = appended(&root.mailbox, vec![rec]);
        });
        assert_reports(&check_snapshot(&forged), 8);
    }
    // The two settlements swapped: derived ids, wrong declaration order.
    let swapped = mutate(&head, |ps| {
        let root = root_mut(ps);
        let mut records = root.mailbox.records().to_vec();
        assert_eq!(records.len(), 2);
        records.swap(0, 1);
        root.mailbox = Mailbox::from_records(records, root.mailbox.cursor()).unwrap();
    });
    let v = check_snapshot(&swapped);
    assert_reports(&v, 7);
    assert!(!v.iter().any(|v| v.invariant == 8), "derived ids are not forgeries: {v:?}");
}

#[test]
fn consumed_record_keeping_its_payload_is_reported() {
    let (_, r) = finished_run_uncompacted(&[Op::Dispatch(Json::str("a"))], Budget::unlimited());
    let head = heads(&r).pop().unwrap();
    let bad = mutate(&head, |ps| {
        let root = root_mut(ps);
        let rec = root.mailbox.records()[0].clone();
        assert!(rec.is_consumed());
        let pending = SignalRecord::new(rec.id().clone(), None, rec.status(), None, RecordBody::Pending(payload("a"))).unwrap();
        root.mailbox = Mailbox::from_records_unchecked_for_tests(vec![pending], 1);
    });
    assert_reports(&check_snapshot(&bad), 9);
}

#[test]
fn wait_discipline_violations_are_reported() {
    let w = echo_world();
    let mut r = w.start(&[Op::Wait("k".into())], Budget::unlimited());
    r.run_to_idle();
    let head = w.head();
    assert_eq!(head.root().status, Status::Waiting);
    let no_wait = mutate(&head, |ps| root_mut(ps).current_wait_id = None);
    assert_reports(&check_snapshot(&no_wait), 13);
    let running_with_wait = mutate(&head, |ps| root_mut(ps).status = Status::Running);
    assert_reports(&check_snapshot(&running_with_wait), 13);
    let foreign = mutate(&head, |ps| {
        root_mut(ps).current_wait_id = Some(WaitId::parse("wait:elsewhere").unwrap());
    });
    assert_reports(&check_snapshot(&foreign), 13);
}

#[test]
fn budget_and_allocation_violations_are_reported() {
    let (_, r) = finished_run(&[Op::Dispatch(Json::str("a"))], Budget::finite(10, 10, 10));
    let head = heads(&r).pop().unwrap();
    let over = mutate(&head, |ps| root_mut(ps).budget.steps = Quota::Finite(1));
    assert_reports(&check_snapshot(&over), 14);
    let unlimited = mutate(&head, |ps| {
        let root = root_mut(ps);
        root.budget.effects = Quota::Unlimited;
        root.allocated.effects = 1;
    });
    assert_reports(&check_snapshot(&unlimited), 14);
    let (pr, _) = parent_child_run();
    let tree = heads(&pr).pop().unwrap();
    assert_eq!(tree.processes().len(), 2);
    assert_clean(&check_snapshot(&tree));
    let undebited = mutate(&tree, |ps| root_mut(ps).allocated.steps -= 1);
    assert_reports(&check_snapshot(&undebited), 15);
    let escalated = mutate(&tree, |ps| child_mut(ps).capabilities = CapabilitySet::from_names(&["net.fetch"]).unwrap());
    assert_reports(&check_snapshot(&escalated), 16);
}

#[test]
fn tree_limit_violations_are_reported() {
    let (pr, _) = parent_child_run();
    let tree = heads(&pr).pop().unwrap();
    let rebuild = |limits: TreeLimits| {
        TreeSnapshot::build_unchecked_for_tests(tree.root_id.clone(), tree.incarnation.clone(), limits, tree.processes().iter().map(|p| (**p).clone()).collect::<Vec<_>>(), tree.residues().iter().map(|r| (**r).clone()).collect())
    };
    assert_reports(&check_snapshot(&rebuild(TreeLimits::default().with_max_children(Quota::Finite(0)))), 17);
    assert_reports(&check_snapshot(&rebuild(TreeLimits::default().with_max_snapshot_bytes(Quota::Finite(64)))), 17);
    assert_reports(&check_snapshot(&rebuild(TreeLimits::default().with_max_process_snapshot_bytes(Quota::Finite(64)))), 17);
    let procs = TreeLimits::default().with_max_tree_processes(Quota::Finite(1)).unwrap();
    assert_reports(&check_snapshot(&rebuild(procs)), 17);
    let deep = mutate(&tree, |ps| child_mut(ps).relation.depth = 2);
    assert_reports(&check_snapshot(&deep), 17);
}

#[test]
fn terminal_inconsistency_is_reported() {
    let w = world(Arc::new(|_| Err(DispatchError::Canceled)));
    let mut r = w.start(&[Op::Dispatch(Json::str("x"))], Budget::unlimited());
    r.run_to_idle();
    let pid = r.owner.root_id().clone();
    r.command(Command::Kill { process: pid, reason: "operator".into() }).unwrap();
    r.run_to_idle();
    w.check(&r);
    let killed = w.head();
    assert_clean(&check_snapshot(&killed));
    let forgot = mutate(&killed, |ps| root_mut(ps).finish.as_mut().unwrap().termination.unresolved_effect_ids.clear());
    assert_reports(&check_snapshot(&forgot), 19);
    let unfinished = mutate(&killed, |ps| root_mut(ps).finish = None);
    assert_reports(&check_snapshot(&unfinished), 19);
    let intent = mutate(&killed, |ps| root_mut(ps).pending_control.kill = Some("again".into()));
    assert_reports(&check_snapshot(&intent), 19);
}

#[test]
fn broken_round_trip_is_reported() {
    let (_, r) = finished_run(&[Op::Dispatch(Json::str("a"))], Budget::unlimited());
    let head = heads(&r).pop().unwrap();
    let wrong = head.clone().with_digest_unchecked_for_tests(Digest::of(b"not the bytes"));
    assert_reports(&check_snapshot(&wrong), 24);
    // A cut that `build` would reject does not decode either.
    let invalid = mutate(&head, |ps| root_mut(ps).status = Status::Running);
    assert_reports(&check_snapshot(&invalid), 24);
}

#[test]
fn underived_identities_are_reported() {
    let head = unknown_head();
    let bad = mutate(&head, |ps| {
        root_mut(ps).prepared.as_mut().unwrap().effects[0].id = EffectId::parse("effect:invented").unwrap();
    });
    assert_reports(&check_snapshot(&bad), 25);
    let (pr, _) = parent_child_run();
    let tree = heads(&pr).pop().unwrap();
    let renamed = mutate(&tree, |ps| child_mut(ps).id = ProcessId::parse("process:invented").unwrap());
    assert_reports(&check_snapshot(&renamed), 25);
}

/// A cut where the child has completed and the parent holds its pending drained
/// satisfaction, built from a real parked parent/child head.
fn satisfied_tree(unresolved: Vec<(ProcessId, EffectId)>) -> TreeSnapshot {
    satisfied_tree_with(unresolved, |_| {})
}

fn satisfied_tree_with(unresolved: Vec<(ProcessId, EffectId)>, edit: impl FnOnce(&mut ChildWaitSatisfied)) -> TreeSnapshot {
    let (pr, _) = parent_child_run();
    let tree = heads(&pr).pop().unwrap();
    mutate(&tree, |ps| {
        let child = child_mut(ps);
        child.status = Status::Completed;
        child.current_wait_id = None;
        child.finish = Some(Finish {
            finished_at: now(),
            output: Some(Payload::from_json(Json::Array(vec![])).unwrap()),
            termination: Termination { cause: Cause::Completion, reason: String::new(), failure: None, unresolved_effect_ids: vec![] },
        });
        let result = ProcessResult {
            process_id: child.id.clone(),
            deployment_ref: child.deployment_ref.clone(),
            termination: child.finish.as_ref().unwrap().termination.clone(),
            output: child.finish.as_ref().unwrap().output.clone(),
        };
        let key = child.relation.child_key.clone().unwrap();
        let root = root_mut(ps);
        let wait = root.current_wait_id.take().unwrap();
        root.status = Status::Running;
        let spec_key = root.mailbox.wait(&wait).unwrap().key;
        let sat = ChildWaitSatisfied {
            wait_id: wait.clone(),
            key: spec_key,
            boundary: Boundary::SubtreeDrained,
            outcomes: vec![ChildOutcome { key, result, boundary: Boundary::SubtreeDrained, subtree_unresolved_effects: unresolved }],
        };
        let mut sat = sat;
        edit(&mut sat);
        let body = RecordBody::Pending(Payload::from_json(sat.payload_json()).unwrap());
        let rec = SignalRecord::new(SignalId::child_wait_satisfied(&wait), Some(wait), None, None, body).unwrap();
        root.mailbox = appended(&root.mailbox, vec![rec]);
    })
}

#[test]
fn drained_outcome_must_match_a_quiet_subtree() {
    assert_clean(&check_snapshot(&satisfied_tree(vec![])));
    let child = satisfied_tree(vec![]).processes().iter().find(|p| !p.relation.is_root()).unwrap().id.clone();
    let phantom = satisfied_tree(vec![(child, EffectId::parse("effect:phantom").unwrap())]);
    assert_reports(&check_snapshot(&phantom), 28);
    // The same answer while the child still runs.
    let live = mutate(&satisfied_tree(vec![]), |ps| {
        let c = child_mut(ps);
        c.status = Status::Running;
        c.finish = None;
    });
    assert_reports(&check_snapshot(&live), 28);
}

// ------------------------------------------------------------------ check_transition

#[test]
fn consecutive_real_heads_have_no_violations_and_reversed_ones_do() {
    let (_, r) = finished_run(&[Op::Dispatch(Json::str("a")), Op::Checkpoint], Budget::unlimited());
    let hs = heads(&r);
    for pair in hs.windows(2) {
        assert_clean(&check_transition(&pair[0], &pair[1]));
    }
    let (first, last) = (&hs[1], hs.last().unwrap());
    let v = check_transition(last, first);
    assert_reports(&v, 9); // the cursor moves back, records vanish
    assert_reports(&v, 14); // usage goes back
    assert_reports(&v, 18); // a terminal process became live again
}

#[test]
fn compaction_may_drop_only_consumed_engine_records() {
    // Real compacted heads are clean between each other and against their uncompacted twin's
    // history (same arrivals, records dropped).
    let ops = [Op::Dispatch(Json::str("a")), Op::Dispatch(Json::str("b")), Op::Checkpoint];
    let (_, r) = finished_run(&ops, Budget::unlimited());
    let hs = heads(&r);
    assert!(hs.last().unwrap().root().mailbox.is_compacted());
    for pair in hs.windows(2) {
        assert_clean(&check_transition(&pair[0], &pair[1]));
    }
    // Synthetic mailboxes on a live root: one consumed record, then dropped or not.
    let live = unknown_head();
    let pid = live.root().id.clone();
    let settlement = |body: RecordBody| {
        SignalRecord::new(SignalId::settlement(&EffectId::derive(&pid, 1, 0)), None, Some(crate::kernel::signal::SettlementStatus::Succeeded), None, body).unwrap()
    };
    let ext = |body: RecordBody| SignalRecord::new(SignalId::external("signal:x").unwrap(), None, None, None, body).unwrap();
    let consumed = || RecordBody::Consumed(payload("x").digest());
    let pending = || RecordBody::Pending(payload("x"));
    let with = |m: Mailbox| mutate(&live, |ps| root_mut(ps).mailbox = m);
    let dropped = |cursor: u64| with(Mailbox::from_retained_unchecked_for_tests(vec![], cursor, 1));
    // A consumed Engine record may go.
    let engine = with(Mailbox::from_records(vec![settlement(consumed())], 1).unwrap());
    assert!(!check_transition(&engine, &dropped(1)).iter().any(|v| v.invariant == 9 || v.invariant == 11));
    // An external one never: a redelivery would be admitted again.
    let external = with(Mailbox::from_records(vec![ext(consumed())], 1).unwrap());
    assert_reports(&check_transition(&external, &dropped(1)), 11);
    // A pending record never.
    let waiting = with(Mailbox::from_records(vec![settlement(pending())], 0).unwrap());
    assert_reports(&check_transition(&waiting, &dropped(0)), 9);
    // A dropped record never comes back.
    assert_reports(&check_transition(&dropped(1), &engine), 9);
}

#[test]
fn a_changed_termination_is_reported() {
    let (_, r) = finished_run(&[Op::Checkpoint], Budget::unlimited());
    let done = heads(&r).pop().unwrap();
    let rewritten = mutate(&done, |ps| {
        let root = root_mut(ps);
        root.status = Status::Killed;
        let f = root.finish.as_mut().unwrap();
        f.output = None;
        f.termination = Termination { cause: Cause::EngineKill, reason: "late".into(), failure: None, unresolved_effect_ids: vec![] };
    });
    assert_reports(&check_transition(&done, &rewritten), 18);
}

#[test]
fn an_unknown_that_regresses_or_vanishes_is_reported() {
    let head = unknown_head();
    let replanned = mutate(&head, |ps| {
        let e = &mut root_mut(ps).prepared.as_mut().unwrap().effects[0];
        e.phase = EffectPhase::Pending;
    });
    assert_reports(&check_transition(&head, &replanned), 4);
    let dropped = mutate(&head, |ps| root_mut(ps).prepared = None);
    assert_reports(&check_transition(&head, &dropped), 4);
    let undiagnosed = mutate(&head, |ps| root_mut(ps).prepared.as_mut().unwrap().effects[0].diagnostic = None);
    assert_reports(&check_transition(&head, &undiagnosed), 4);
}

#[test]
fn swallowed_input_is_reported() {
    let w = echo_world();
    let mut r = w.start(&[Op::Wait("k".into())], Budget::unlimited());
    r.run_to_idle();
    let waiting = w.head();
    let state = mutate(&waiting, |ps| {
        root_mut(ps).committed_state.payload = Payload::from_json(Json::object()).unwrap();
    });
    assert_reports(&check_transition(&waiting, &state), 10);
    // A kill that drops the interrupted batch instead of keeping it as evidence.
    let head = unknown_head();
    let killed = mutate(&head, |ps| {
        let root = root_mut(ps);
        root.prepared = None;
        root.status = Status::Killed;
        root.finish = Some(Finish {
            finished_at: now(),
            output: None,
            termination: Termination { cause: Cause::EngineKill, reason: "k".into(), failure: None, unresolved_effect_ids: vec![] },
        });
    });
    assert_reports(&check_transition(&head, &killed), 10);
}

#[test]
fn leaving_waiting_without_an_answer_is_reported() {
    let w = echo_world();
    let mut r = w.start(&[Op::Wait("k".into())], Budget::unlimited());
    r.run_to_idle();
    let waiting = w.head();
    let released = mutate(&waiting, |ps| {
        let root = root_mut(ps);
        root.status = Status::Running;
        root.current_wait_id = None;
    });
    assert_reports(&check_transition(&waiting, &released), 13);
}

#[test]
fn precedence_and_first_intent_are_enforced_across_heads() {
    let head = unknown_head();
    let intent = mutate(&head, |ps| root_mut(ps).pending_control.kill = Some("operator".into()));
    let killed = |reason: &str, cause: Cause| {
        let reason = reason.to_owned();
        mutate(&intent, move |ps| {
            let root = root_mut(ps);
            let unknown = root.prepared.as_ref().unwrap().unknown_ids();
            root.pending_control = Default::default();
            root.status = cause.status();
            let failure = (cause == Cause::ExecutionFailure).then(|| Failure::new(codes::STEP_FAILED, &reason));
            root.finish = Some(Finish {
                finished_at: now(),
                output: None,
                termination: Termination { cause, reason, failure, unresolved_effect_ids: unknown },
            });
        })
    };
    assert_clean(&check_transition(&intent, &killed("operator", Cause::EngineKill)));
    assert_reports(&check_transition(&intent, &killed("someone else", Cause::EngineKill)), 18);
    assert_reports(&check_transition(&intent, &killed("boom", Cause::ExecutionFailure)), 18);
    let dropped = mutate(&intent, |ps| root_mut(ps).pending_control.kill = None);
    assert_reports(&check_transition(&intent, &dropped), 18);
}

// ------------------------------------------------------------------ check_commit

fn checkpoint_of(previous: &TreeSnapshot, sequence: u64, cut: &TreeSnapshot) -> CommitRequest {
    CommitRequest::Checkpoint(Checkpoint {
        sequence,
        kind: CheckpointKind::Progress,
        previous_digest: Some(previous.digest()),
        cut: cut.tree_cut().clone(),
    })
}

#[test]
fn an_unknown_settles_only_through_a_resolved_boundary() {
    let w = world(Arc::new(|_| Err(DispatchError::Failed("reset".into()))));
    let mut r = w.start(&[Op::Dispatch(Json::str("x")), Op::Wait("after".into())], Budget::unlimited());
    r.run_to_idle();
    let unknown = w.head();
    let effect = unknown.root().prepared.as_ref().unwrap().unknown_ids()[0].clone();
    let reply = r.command(Command::Resolve { process: unknown.root_id.clone(), effect, settlement: ok_settlement("host").unwrap() });
    assert!(reply.is_ok(), "{reply:?}");
    w.check(&r);
    let (resolved_request, _) = r.commits.iter().find(|(c, ok)| *ok && c.boundary_name() == "resolved").unwrap();
    let resolved = TreeSnapshot::from_cut(&resolved_request.cut().resolve(Some(unknown.tree_cut())).unwrap()).unwrap();
    let (_, genuine) = check_commit(Some(&unknown), resolved_request);
    assert_clean(&genuine);
    // The same cut smuggled in as a progress checkpoint.
    let (_, v) = check_commit(Some(&unknown), &checkpoint_of(&unknown, 99, &resolved));
    assert_reports(&v, 4);
}

#[test]
fn a_settled_boundary_needs_a_pending_head_before_it() {
    let (_, r) = finished_run(&[Op::Dispatch(Json::str("a"))], Budget::unlimited());
    let acked: Vec<&CommitRequest> = r.commits.iter().map(|(c, _)| c).collect();
    assert_eq!(acked.iter().map(|c| c.boundary_name()).collect::<Vec<_>>(), ["start", "pending", "settled", "terminal"]);
    let cuts = r.acknowledged_cuts();
    assert_eq!(cuts.len(), acked.len(), "every commit acknowledged");
    let start = TreeSnapshot::from_cut(&cuts[0]).unwrap();
    let (_, v) = check_commit(Some(&start), acked[2]);
    assert_reports(&v, 2);
    // A terminal checkpoint that claims the wrong cut class.
    let settled = TreeSnapshot::from_cut(&cuts[2]).unwrap();
    let (_, v) = check_commit(Some(&start), &checkpoint_of(&start, 2, &settled));
    assert!(v.iter().all(|v| v.invariant != 23), "settled cut is progress: {v:?}");
    let terminal = TreeSnapshot::from_cut(&cuts[3]).unwrap();
    let (_, v) = check_commit(Some(&settled), &checkpoint_of(&settled, 4, &terminal));
    assert_reports(&v, 23);
}

// ------------------------------------------------------------------ check_history

#[test]
fn history_violations_are_reported() {
    let w = world(Arc::new(|_| Err(DispatchError::Failed("reset".into()))));
    let mut r = w.start(&[Op::Dispatch(Json::str("x"))], Budget::unlimited());
    r.run_to_idle();
    let mut r2 = w.restore(200);
    let effect = w.head().root().prepared.as_ref().unwrap().unknown_ids()[0].clone();
    r2.command(Command::Resolve { process: w.head().root_id.clone(), effect, settlement: ok_settlement("h").unwrap() }).unwrap();
    r2.run_to_idle();
    let history = w.committer.history(r.owner.root_id());
    assert_clean(&check_history(&history));
    let kinds: Vec<String> = history.iter().map(|h| format!("{:?}", h.kind)).collect();
    let settled_at = history
        .iter()
        .position(|h| matches!(&h.kind, CommitRecordKind::Effect { kind: EffectBoundaryKind::Settled, .. }))
        .unwrap_or_else(|| panic!("{kinds:?}"));
    // A second settled boundary for the same Effect, appended at the next sequence.
    let mut twice = history.clone();
    let mut again = history[settled_at].clone();
    again.identity.push_str(":again");
    again.sequence = twice.last().unwrap().sequence + 1;
    again.incarnation = twice.last().unwrap().incarnation.clone();
    twice.push(again);
    assert_reports(&check_history(&twice), 6);
    // A resolved boundary with no settled one before it.
    let mut unsettled = history.clone();
    let resolved_at = unsettled
        .iter()
        .position(|h| matches!(&h.kind, CommitRecordKind::Effect { kind: EffectBoundaryKind::Resolved, .. }))
        .unwrap();
    if let CommitRecordKind::Effect { kind, .. } = &mut unsettled[settled_at].kind {
        *kind = EffectBoundaryKind::Pending;
    }
    assert!(resolved_at > settled_at);
    assert_reports(&check_history(&unsettled), 6);
    // A sequence gap.
    let mut gap = history.clone();
    gap[1].sequence += 1;
    assert_reports(&check_history(&gap), 23);
    // A stale writer committing after the activation.
    let mut stale = history.clone();
    let last = stale.len() - 1;
    stale[last].incarnation = history[0].incarnation.clone();
    assert_reports(&check_history(&stale), 22);
    // A historical commit installed again.
    let mut replayed = history.clone();
    let mut old = history[1].clone();
    old.sequence = replayed.last().unwrap().sequence + 1;
    old.incarnation = replayed.last().unwrap().incarnation.clone();
    replayed.push(old);
    assert_reports(&check_history(&replayed), 22);
    // Not opening with a start.
    assert_reports(&check_history(&history[1..]), 23);
}

// ------------------------------------------------------------------ check_publications

#[test]
fn a_result_outside_every_acknowledged_head_is_reported() {
    let (_, r) = finished_run(&[Op::Dispatch(Json::str("a"))], Budget::unlimited());
    let hs = heads(&r);
    assert_clean(&check_publications(&r.published, &hs));
    assert_reports(&check_publications(&r.published, &hs[..1]), 21);
    assert_reports(&check_publications(&r.published, &[]), 21);
}

// ------------------------------------------------------------------ remaining rules, one each

fn tree_head() -> TreeSnapshot {
    heads(&parent_child_run().0).pop().unwrap()
}

fn external(id: &str) -> SignalRecord {
    SignalRecord::new(SignalId::external(id).unwrap(), None, None, None, RecordBody::Pending(payload(id))).unwrap()
}

#[test]
fn remaining_one_cut_rules_are_each_reported() {
    let unknown = unknown_head();
    let tree = tree_head();
    let (_, done_run) = finished_run(&[Op::Dispatch(Json::str("a"))], Budget::unlimited());
    let done = heads(&done_run).pop().unwrap();
    let w = echo_world();
    let mut wr = w.start(&[Op::Wait("k".into())], Budget::unlimited());
    wr.run_to_idle();
    let waiting = w.head();

    // 10: the prepared step consumes input that is not pending.
    let v = check_snapshot(&mutate(&unknown, |ps| {
        root_mut(ps).prepared.as_mut().unwrap().intent = crate::kernel::transition::Transition::Continue { consumed: 5, effects: vec![] };
    }));
    assert_reports(&v, 10);
    // 13: an open child wait names a process that is not a direct child.
    let v = check_snapshot(&mutate(&tree, |ps| ps.retain(|p| p.relation.is_root())));
    assert_reports(&v, 13);
    // 13: a wait key open twice.
    let v = check_snapshot(&mutate(&waiting, |ps| {
        let root = root_mut(ps);
        let key = root.mailbox.wait(root.current_wait_id.as_ref().unwrap()).unwrap().key;
        let other = WaitId::parse("wait:other").unwrap();
        let opens = crate::kernel::mailbox::WaitOpening::External { key };
        let rec = SignalRecord::new(SignalId::wait_opening(&other), Some(other), None, Some(opens), RecordBody::Pending(payload("o"))).unwrap();
        let (records, admitted) = append_records(&root.mailbox, vec![rec]);
        root.mailbox = Mailbox::from_retained_unchecked_for_tests(records, root.mailbox.cursor(), admitted);
    }));
    assert_reports(&v, 13);
    // 14: the budget no longer holds the prepared batch's settlement signal.
    let v = check_snapshot(&mutate(&unknown, |ps| root_mut(ps).budget.signals = Quota::Finite(0)));
    assert_reports(&v, 14);
    // 16: a child start that succeeded with capabilities the parent lacks. The parent starts
    // two children: the first child's checkpoint is committed before the second starts, so
    // it holds the batch with the first start settled (a batch's last start is committed
    // with the parent's finalization, which leaves no prepared batch to mutate).
    let pr = two_children_run();
    let acked: Vec<&CommitRequest> = pr.commits.iter().filter(|(_, ok)| *ok).map(|(c, _)| c).collect();
    let at = acked
        .iter()
        .position(|c| matches!(c, CommitRequest::Checkpoint(cp) if cp.kind == CheckpointKind::ChildStart))
        .unwrap();
    let start_cut = TreeSnapshot::from_cut(&pr.acknowledged_cuts()[at]).unwrap();
    let v = check_snapshot(&mutate(&start_cut, |ps| {
        let e = &mut root_mut(ps).prepared.as_mut().unwrap().effects[0];
        if let Effect::Framework(crate::kernel::effect::FrameworkEffect::StartChild(spec)) = &mut e.effect {
            spec.capabilities = CapabilitySet::from_names(&["net.fetch"]).unwrap();
        }
    }));
    assert_reports(&v, 16);
    // 17: pending signals over max_pending_signals.
    let crowded = mutate(&done, |ps| {
        let root = root_mut(ps);
        root.mailbox = appended(&root.mailbox, vec![external("signal:u1"), external("signal:u2")]);
    });
    assert_clean(&check_snapshot(&crowded));
    let tight = TreeSnapshot::build_unchecked_for_tests(
        crowded.root_id.clone(),
        crowded.incarnation.clone(),
        TreeLimits::default().with_max_pending_signals(1),
        crowded.processes().iter().map(|p| (**p).clone()).collect::<Vec<_>>(),
        crowded.residues().iter().map(|r| (**r).clone()).collect(),
    );
    assert_reports(&check_snapshot(&tight), 17);
    // 19: a completed process holding a prepared step; a terminal one holding a pending effect.
    let v = check_snapshot(&mutate(&done, |ps| root_mut(ps).prepared = unknown.root().prepared.clone()));
    assert_reports(&v, 19);
    let v = check_snapshot(&mutate(&done, |ps| {
        let root = root_mut(ps);
        root.status = Status::Failed;
        let mut prepared = unknown.root().prepared.clone().unwrap();
        prepared.effects[0].phase = EffectPhase::Pending;
        prepared.effects[0].diagnostic = None;
        root.prepared = Some(prepared);
    }));
    assert_reports(&v, 19);
    // 7 and 13 on a child-wait answer: the same child twice, and a foreign key.
    let v = check_snapshot(&satisfied_tree_with(vec![], |sat| {
        let o = sat.outcomes[0].clone();
        sat.outcomes.push(o);
    }));
    assert_reports(&v, 7);
    let v = check_snapshot(&satisfied_tree_with(vec![], |sat| sat.key = crate::kernel::ids::WaitKey::parse("not-mine").unwrap()));
    assert_reports(&v, 13);
    w.check(&wr);
}

/// The acknowledged cuts of a one-dispatch run: start, pending, settled, terminal.
fn dispatch_cuts() -> (Vec<TreeSnapshot>, Vec<CommitRequest>) {
    let (_, r) = finished_run(&[Op::Dispatch(Json::str("a"))], Budget::unlimited());
    (heads(&r), r.commits.iter().map(|(c, _)| c.clone()).collect())
}

/// A cut with a two-effect batch: the first child start settled, the second still planned.
fn half_started_cut() -> TreeSnapshot {
    let w = echo_world();
    let plan = |k: &str| crate::kernel::testkit::ChildPlan::new(k, w.deployment.reference(), vec![Op::Checkpoint], Budget::unlimited());
    let op = Op::Children { children: vec![plan("a"), plan("b")], boundary: Boundary::SubtreeDrained, condition: crate::kernel::child::Condition::All };
    let mut r = w.start(&[op], Budget::unlimited());
    r.run_to_idle();
    w.check(&r);
    heads(&r)
        .into_iter()
        .find(|h| h.root().prepared.as_ref().is_some_and(|s| s.effects.len() == 2 && s.effects[1].phase == EffectPhase::Planned))
        .expect("a cut between the two starts")
}

#[test]
fn remaining_transition_rules_are_each_reported() {
    let tree = tree_head();
    let unknown = unknown_head();
    let (cuts, _) = dispatch_cuts();
    let (pending, settled) = (&cuts[1], &cuts[2]);
    assert_eq!(pending.root().prepared.as_ref().unwrap().effects[0].phase, EffectPhase::Pending);
    let half = half_started_cut();

    assert_reports(&check_transition(&tree, &mutate(&tree, |ps| root_mut(ps).allocated.steps -= 1)), 15);
    assert_reports(&check_transition(&tree, &mutate(&tree, |ps| root_mut(ps).capabilities = CapabilitySet::from_names(&["x"]).unwrap())), 16);
    let later = crate::env::Timestamp::from_millis(1_800_000_000_000).unwrap();
    assert_reports(&check_transition(&tree, &mutate(&tree, |ps| child_mut(ps).started_at = later)), 25);
    let relimited = TreeSnapshot::build_unchecked_for_tests(tree.root_id.clone(), tree.incarnation.clone(), TreeLimits::default().with_max_depth(3), tree.processes().iter().map(|p| (**p).clone()).collect::<Vec<_>>(), tree.residues().iter().map(|r| (**r).clone()).collect());
    assert_reports(&check_transition(&tree, &relimited), 17);
    // 1: a pending permission revoked while the process lives.
    let revoked = mutate(pending, |ps| root_mut(ps).prepared.as_mut().unwrap().effects[0].phase = EffectPhase::Planned);
    assert_reports(&check_transition(pending, &revoked), 1);
    // 2: a planned Effect becoming unknown with no pending head in between.
    let jumped = mutate(&half, |ps| root_mut(ps).prepared.as_mut().unwrap().effects[1].phase = EffectPhase::Unknown);
    assert_reports(&check_transition(&half, &jumped), 2);
    // 6: a definite settlement rewritten.
    let rewritten = mutate(settled, |ps| {
        root_mut(ps).prepared.as_mut().unwrap().effects[0].phase = EffectPhase::Settled(ok_settlement("other").unwrap());
    });
    assert_reports(&check_transition(settled, &rewritten), 6);
    // 10: a batch dropped without being adopted.
    let dropped = mutate(&half, |ps| root_mut(ps).prepared = None);
    assert_reports(&check_transition(&half, &dropped), 10);
    // 14: prepared_effects charged again while the same step stays prepared (a replay).
    let recharged = mutate(&unknown, |ps| root_mut(ps).prepared_effects += 1);
    assert_reports(&check_transition(&unknown, &recharged), 14);
    // 18: a child appearing under a parent that was already terminal.
    let ended = mutate(&tree, |ps| {
        ps.retain(|p| p.relation.is_root());
        let root = root_mut(ps);
        root.status = Status::Canceled;
        root.current_wait_id = None;
        root.finish = Some(Finish {
            finished_at: now(),
            output: None,
            termination: Termination { cause: Cause::HostCancellation, reason: "x".into(), failure: None, unresolved_effect_ids: vec![] },
        });
    });
    let reborn = mutate(&tree, |ps| {
        let root = root_mut(ps);
        *root = ended.root().clone();
    });
    let v = check_transition(&ended, &reborn);
    assert!(v.iter().any(|v| v.invariant == 18 && v.detail.contains("terminal parent")), "{v:?}");
}

#[test]
fn remaining_commit_rules_are_each_reported() {
    let (cuts, requests) = dispatch_cuts();
    let with_cut = |request: &CommitRequest, cut: &TreeSnapshot| -> CommitRequest {
        let tree_cut = cut.tree_cut().clone();
        match request.clone() {
            CommitRequest::Effect(mut b) => {
                b.cut = tree_cut;
                CommitRequest::Effect(b)
            }
            CommitRequest::Checkpoint(mut c) => {
                c.cut = tree_cut;
                CommitRequest::Checkpoint(c)
            }
            CommitRequest::Activation(mut a) => {
                a.cut = tree_cut;
                CommitRequest::Activation(a)
            }
        }
    };
    // 2: a pending boundary whose cut does not hold the Effect pending.
    let (_, v) = check_commit(Some(&cuts[0]), &with_cut(&requests[1], &cuts[0]));
    assert_reports(&v, 2);
    // 6: a settled boundary whose cut still holds the Effect pending.
    let (_, v) = check_commit(Some(&cuts[1]), &with_cut(&requests[2], &cuts[1]));
    assert_reports(&v, 6);
    // 4: a resolved boundary for an Effect that was not unknown before it.
    let CommitRequest::Effect(mut resolved) = requests[2].clone() else { panic!("settled boundary") };
    resolved.kind = EffectBoundaryKind::Resolved;
    let (_, v) = check_commit(Some(&cuts[1]), &CommitRequest::Effect(resolved));
    assert_reports(&v, 4);
    // 22: an activation that changes more than the incarnation.
    let activation = CommitRequest::Activation(crate::kernel::commit::Activation {
        previous_incarnation: cuts[1].incarnation.clone(),
        previous_digest: cuts[1].digest(),
        new_incarnation: cuts[2].incarnation.clone(),
        cut: cuts[2].tree_cut().clone(),
    });
    let (_, v) = check_commit(Some(&cuts[1]), &activation);
    assert_reports(&v, 22);
    // 22: a start after an acknowledged head.
    let (_, v) = check_commit(Some(&cuts[3]), &requests[0]);
    assert_reports(&v, 22);
}

/// `check_commit_reusing` only caches: a new writer's activation checked with the previous
/// writer's last head as known records gives exactly `check_commit`'s snapshot and findings,
/// on a genuine activation and on one whose digest lies.
#[test]
fn a_known_head_of_another_writer_changes_no_verdict() {
    let w = world(Arc::new(|_| Err(DispatchError::Failed("reset".into()))));
    let mut r = w.start(&[Op::Dispatch(Json::str("x"))], Budget::unlimited());
    r.run_to_idle();
    let known = heads(&r).pop().expect("the first writer committed");
    let r2 = w.restore(200);
    let activation = r2
        .commits
        .iter()
        .map(|(c, _)| c.clone())
        .find(|c| matches!(c, CommitRequest::Activation(_)))
        .expect("the restore activated");
    let plain = check_commit(None, &activation);
    assert!(plain.0.is_some());
    assert_clean(&plain.1);
    assert_eq!(check_commit_reusing(None, Some(&known), &activation), plain);
    let CommitRequest::Activation(mut lying) = activation else { unreachable!() };
    lying.cut.digest = Digest::of(b"another cut");
    let lying = CommitRequest::Activation(lying);
    let plain = check_commit(None, &lying);
    assert_reports(&plain.1, 24);
    assert_eq!(check_commit_reusing(None, Some(&known), &lying), plain);
}

#[test]
fn remaining_history_rules_are_each_reported() {
    let w = echo_world();
    let mut r = w.start(&[Op::Wait("k".into())], Budget::unlimited());
    r.run_to_idle();
    let mut r2 = w.restore(200);
    r2.run_to_idle();
    w.check(&r2);
    let history = w.committer.history(r.owner.root_id());
    let at = history.iter().position(|h| matches!(h.kind, CommitRecordKind::Activation { .. })).unwrap();
    let mut seq = history.clone();
    seq[at].sequence = 7;
    assert_reports(&check_history(&seq), 23);
    let mut wrong = history.clone();
    wrong[at].kind = CommitRecordKind::Activation { previous_incarnation: IncarnationId::from_hex(&hex(77)).unwrap() };
    assert_reports(&check_history(&wrong), 22);
    let mut reused = history.clone();
    reused[at].incarnation = history[0].incarnation.clone();
    if let CommitRecordKind::Activation { previous_incarnation } = &mut reused[at].kind {
        *previous_incarnation = history[0].incarnation.clone();
    }
    assert_reports(&check_history(&reused), 22);
    let mut restart = history.clone();
    let mut start = history[0].clone();
    start.identity.push_str(":again");
    restart.push(start);
    assert_reports(&check_history(&restart), 22);
}
