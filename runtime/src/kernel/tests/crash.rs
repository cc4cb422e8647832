//! The crash matrix with the scripted single-Effect fixture: crash before/after
//! each commit boundary, lost acknowledgement, stale writer fenced.

use super::*;
use crate::kernel::commit::{CheckpointKind, CommitCall, CommitCallKind, EffectBoundaryKind, Fault, FaultyCommitter};
use crate::kernel::owner::{Command, Reply};
use crate::kernel::status::Status;

/// Which call to fault: the `nth` (0-based) call of this boundary kind.
#[derive(Clone, Copy, Debug)]
enum At {
    Checkpoint(CheckpointKind),
    Effect(EffectBoundaryKind),
}

fn matches(call: &CommitCall, at: At) -> bool {
    match (&call.kind, at) {
        (CommitCallKind::Checkpoint(k), At::Checkpoint(want)) => *k == want,
        (CommitCallKind::Effect { kind, .. }, At::Effect(want)) => *kind == want,
        _ => false,
    }
}

/// Starts the fixture on a faulty committer over `w.committer`; the first call matching `at`
/// gets `fault`. Returns the dead (or finished) runner.
fn run_with_fault(w: &World, ops: &[Op], at: At, fault: fn() -> Fault) -> DirectRunner {
    let faulty = Arc::new(FaultyCommitter::new(w.committer.clone()));
    let mut fired = false;
    faulty.set_fault_plan(Box::new(move |call| {
        if !fired && matches(call, at) {
            fired = true;
            return fault();
        }
        Fault::Pass
    }));
    let owner = Owner::start(
        w.resolver.clone(),
        w.deployment.clone(),
        script_input(ops),
        ProcessId::root_from_hex(&hex(1)).unwrap(),
        IncarnationId::from_hex(&hex(100)).unwrap(),
        config(Budget::unlimited()),
        now(),
    )
    .unwrap();
    let mut r = DirectRunner::new(owner, faulty as Arc<dyn Committer>, now());
    r.run_to_idle();
    r
}

fn one_effect() -> Vec<Op> {
    vec![Op::Dispatch(Json::str("work"))]
}

fn resolve_root_unknown(r: &mut DirectRunner, w: &World) {
    let head = w.head();
    let unknown = head.root().prepared.as_ref().expect("batch").unknown_ids();
    assert_eq!(unknown.len(), 1, "exactly one unknown");
    let reply = r.command(Command::Resolve {
        process: head.root_id.clone(),
        effect: unknown[0].clone(),
        settlement: ok_settlement("host").unwrap(),
    });
    assert!(matches!(reply, Ok(Reply::Resolved)), "{reply:?}");
    r.run_to_idle();
}

fn assert_dead(r: &DirectRunner) {
    assert!(stopped(r), "the dead instance gets a RuntimeError");
    assert!(root_result(r).is_none(), "a RuntimeError never coexists with a Result");
}

fn assert_usage(w: &World, steps: u64, effects: u64, signals: u64) {
    let u = w.head().root().usage();
    assert_eq!((u.committed_steps, u.prepared_effects, u.accepted_signals), (steps, effects, signals));
}

#[test]
fn pending_before_commit_recomputes_the_step_and_dispatches_once() {
    let w = echo_world();
    let dead = run_with_fault(&w, &one_effect(), At::Effect(EffectBoundaryKind::Pending), || Fault::FailBefore);
    assert_dead(&dead);
    assert_eq!(w.dispatches(), 0, "nothing dispatched before the pending commit");
    assert_eq!(w.head().root().committed_steps, 0);
    let mut r = w.restore(200);
    r.run_to_idle();
    assert_eq!(root_result(&r).unwrap().status(), Status::Completed);
    assert_eq!(w.dispatches(), 1);
    assert_usage(&w, 2, 1, 1);
    w.check(&dead);
    w.check(&r);
}

#[test]
fn pending_after_commit_before_dispatch_becomes_unknown_with_zero_dispatches() {
    let w = echo_world();
    let dead = run_with_fault(&w, &one_effect(), At::Effect(EffectBoundaryKind::Pending), || Fault::CrashAfter);
    assert_dead(&dead);
    let mut r = w.restore(200);
    r.run_to_idle();
    assert_eq!(w.dispatches(), 0, "policy never: a restored pending attempt is not re-dispatched");
    resolve_root_unknown(&mut r, &w);
    assert_eq!(root_result(&r).unwrap().status(), Status::Completed);
    assert_eq!(w.dispatches(), 0);
    assert_usage(&w, 2, 1, 1);
    w.check(&dead);
    w.check(&r);
}

#[test]
fn after_dispatch_before_settled_commit_stays_at_one_dispatch() {
    let w = echo_world();
    let dead = run_with_fault(&w, &one_effect(), At::Effect(EffectBoundaryKind::Settled), || Fault::FailBefore);
    assert_dead(&dead);
    assert_eq!(w.dispatches(), 1);
    let mut r = w.restore(200);
    r.run_to_idle();
    resolve_root_unknown(&mut r, &w);
    assert_eq!(root_result(&r).unwrap().status(), Status::Completed);
    assert_eq!(w.dispatches(), 1, "never a second dispatch");
    w.check(&dead);
    w.check(&r);
}

#[test]
fn settled_after_commit_completes_without_redispatch() {
    let w = echo_world();
    let dead = run_with_fault(&w, &one_effect(), At::Effect(EffectBoundaryKind::Settled), || Fault::CrashAfter);
    assert_dead(&dead);
    let mut r = w.restore(200);
    r.run_to_idle();
    assert_eq!(root_result(&r).unwrap().status(), Status::Completed);
    assert_eq!(w.dispatches(), 1);
    w.check(&dead);
    w.check(&r);
}

fn unknown_world() -> World {
    // First attempt is uncertain; the host resolves it.
    world(Arc::new(|_| Err(DispatchError::Failed("timeout".into()))))
}

#[test]
fn resolved_before_commit_shows_the_same_unknown_again() {
    let w = unknown_world();
    let mut r = w.start(&one_effect(), Budget::unlimited());
    r.run_to_idle();
    let unknown_before = w.head().root().prepared.as_ref().unwrap().unknown_ids();
    drop(r);
    // A restored writer whose resolved boundary fails before commit.
    let faulty = Arc::new(FaultyCommitter::new(w.committer.clone()));
    faulty.set_fault_plan(Box::new(|call| {
        if matches(call, At::Effect(EffectBoundaryKind::Resolved)) { Fault::FailBefore } else { Fault::Pass }
    }));
    let owner = Owner::restore(w.resolver.clone(), w.deployment.clone(), &w.head(), IncarnationId::from_hex(&hex(300)).unwrap(), now()).unwrap();
    let mut dead = DirectRunner::new(owner, faulty as Arc<dyn Committer>, now());
    dead.run_to_idle();
    let reply = dead.command(Command::Resolve {
        process: w.head().root_id.clone(),
        effect: unknown_before[0].clone(),
        settlement: ok_settlement("host").unwrap(),
    });
    assert!(reply.is_err(), "the caller of a failed resolution gets an error");
    assert_dead(&dead);
    assert_eq!(w.head().root().prepared.as_ref().unwrap().unknown_ids(), unknown_before, "same unknown id reappears");
    let mut r2 = w.restore(400);
    r2.run_to_idle();
    resolve_root_unknown(&mut r2, &w);
    assert_eq!(root_result(&r2).unwrap().status(), Status::Completed);
    assert_eq!(w.dispatches(), 1);
    assert_usage(&w, 2, 1, 1);
    w.check(&dead);
    w.check(&r2);
}

#[test]
fn resolved_after_commit_with_lost_ack_continues_after_restore() {
    let w = unknown_world();
    let mut r = w.start(&one_effect(), Budget::unlimited());
    r.run_to_idle();
    let unknown = w.head().root().prepared.as_ref().unwrap().unknown_ids();
    let faulty = Arc::new(FaultyCommitter::new(w.committer.clone()));
    faulty.set_fault_plan(Box::new(|call| {
        if matches(call, At::Effect(EffectBoundaryKind::Resolved)) { Fault::LoseAck } else { Fault::Pass }
    }));
    let owner = Owner::restore(w.resolver.clone(), w.deployment.clone(), &w.head(), IncarnationId::from_hex(&hex(300)).unwrap(), now()).unwrap();
    let mut dead = DirectRunner::new(owner, faulty as Arc<dyn Committer>, now());
    dead.run_to_idle();
    let reply = dead.command(Command::Resolve { process: w.head().root_id.clone(), effect: unknown[0].clone(), settlement: ok_settlement("host").unwrap() });
    assert!(reply.is_err(), "the caller of the lost acknowledgement gets an error");
    assert!(w.head().root().prepared.as_ref().unwrap().unknown_ids().is_empty(), "the resolution is in the head");
    let mut r2 = w.restore(400);
    r2.run_to_idle();
    assert_eq!(root_result(&r2).unwrap().status(), Status::Completed);
    assert_eq!(w.dispatches(), 1);
    assert_usage(&w, 2, 1, 1);
    w.check(&r);
    w.check(&dead);
    w.check(&r2);
}

#[test]
fn terminal_after_commit_before_publication_restores_as_completed() {
    let w = echo_world();
    let dead = run_with_fault(&w, &one_effect(), At::Checkpoint(CheckpointKind::Terminal), || Fault::CrashAfter);
    assert_dead(&dead);
    let r = w.restore(200);
    let result = root_result(&r).expect("restored terminal processes publish their results");
    assert_eq!(result.status(), Status::Completed);
    assert_eq!(w.dispatches(), 1);
    w.check(&dead);
    w.check(&r);
}

#[test]
fn start_before_commit_publishes_nothing_and_after_commit_restores() {
    let w = echo_world();
    let dead = run_with_fault(&w, &one_effect(), At::Checkpoint(CheckpointKind::Start), || Fault::FailBefore);
    assert!(dead.published.iter().all(|p| !matches!(p, Publication::Started { .. })), "nothing published");
    let root = ProcessId::root_from_hex(&hex(1)).unwrap();
    assert!(futures::executor::block_on(w.committer.load_tree(&root)).unwrap().is_none());
    let w2 = echo_world();
    let dead2 = run_with_fault(&w2, &one_effect(), At::Checkpoint(CheckpointKind::Start), || Fault::CrashAfter);
    assert_dead(&dead2);
    let mut r = w2.restore(200);
    r.run_to_idle();
    assert_eq!(root_result(&r).unwrap().status(), Status::Completed);
    assert_eq!(w2.dispatches(), 1);
    w.check(&dead);
    w2.check(&dead2);
    w2.check(&r);
}

#[test]
fn progress_checkpoint_crash_keeps_the_committed_step_count() {
    for fault in [(|| Fault::FailBefore) as fn() -> Fault, || Fault::CrashAfter] {
        let w = echo_world();
        let ops = [Op::Checkpoint, Op::Checkpoint];
        let dead = run_with_fault(&w, &ops, At::Checkpoint(CheckpointKind::Progress), fault);
        let mut r = w.restore(200);
        r.run_to_idle();
        assert_eq!(root_result(&r).unwrap().status(), Status::Completed);
        assert_eq!(w.head().root().committed_steps, 3, "same step count as an uncrashed run");
        w.check(&dead);
        w.check(&r);
    }
}

#[test]
fn stale_writer_is_fenced_after_activation() {
    let w = world(Arc::new(|_| Err(DispatchError::Failed("lost".into()))));
    let mut a = w.start(&[Op::Wait("w".into())], Budget::unlimited());
    a.run_to_idle();
    // A second engine restores the same head: activation fences the first writer.
    let mut b = w.restore(200);
    b.run_to_idle();
    let head = w.head();
    let wait = head.root().current_wait_id.clone().unwrap();
    let answer = crate::kernel::signal::SignalRequest::new(
        crate::kernel::ids::SignalId::external("signal:late").unwrap(),
        Some(wait),
        Payload::from_json(Json::str("ok")).unwrap(),
    )
    .unwrap();
    let reply = a.command(Command::Deliver { process: head.root_id.clone(), requests: vec![answer] });
    assert!(reply.is_err(), "the fenced writer's commit fails");
    assert_dead(&a);
    assert_eq!(w.head().incarnation, b.owner.incarnation().clone(), "the head stays the winner's");
    w.check(&a);
    w.check(&b);
}

#[test]
fn child_start_crash_restarts_under_the_same_derived_process_id() {
    for fault in [(|| Fault::FailBefore) as fn() -> Fault, || Fault::CrashAfter] {
        let child = script_deployment("keel.test.child", None, vec![]);
        let parent = script_deployment("keel.test.parent", None, vec![child.reference().clone()]);
        let resolver = Arc::new(DeploymentSet::new().with(child.clone()).with(parent.clone()));
        let committer = Arc::new(MemoryCommitter::new());
        let ops = [Op::Child { deployment: child.reference().clone(), script: vec![Op::Checkpoint], key: "c".into(), budget: Budget::finite(3, 0, 3) }];
        let faulty = Arc::new(FaultyCommitter::new(committer.clone()));
        let mut fired = false;
        faulty.set_fault_plan(Box::new(move |call| {
            if !fired && matches(call, At::Checkpoint(CheckpointKind::ChildStart)) {
                fired = true;
                return fault();
            }
            Fault::Pass
        }));
        let root = ProcessId::root_from_hex(&hex(1)).unwrap();
        let owner = Owner::start(resolver.clone(), parent.clone(), script_input(&ops), root.clone(), IncarnationId::from_hex(&hex(9)).unwrap(), config(Budget::finite(10, 5, 10)), now()).unwrap();
        let mut dead = DirectRunner::new(owner, faulty as Arc<dyn Committer>, now());
        dead.run_to_idle();
        assert!(stopped(&dead));
        let head = futures::executor::block_on(committer.load_tree(&root)).unwrap().unwrap();
        let snap = TreeSnapshot::from_cut(&head.cut).unwrap();
        let owner = Owner::restore(resolver, parent, &snap, IncarnationId::from_hex(&hex(10)).unwrap(), now()).unwrap();
        let mut r = DirectRunner::new(owner, committer.clone() as Arc<dyn Committer>, now());
        r.run_to_idle();
        assert_eq!(root_result(&r).unwrap().status(), Status::Completed);
        let head = futures::executor::block_on(committer.load_tree(&root)).unwrap().unwrap();
        let snap = TreeSnapshot::from_cut(&head.cut).unwrap();
        assert_eq!(snap.processes().len(), 2);
        let child_p = snap.processes().iter().find(|p| !p.relation.is_root()).unwrap();
        let start_effect = crate::kernel::ids::EffectId::derive(&root, 1, 0);
        assert_eq!(child_p.id, ProcessId::child(&start_effect), "same derived child id");
        assert_eq!((snap.root().allocated.steps, snap.root().allocated.signals), (3, 3), "grant unchanged");
        check_run(&dead, &committer);
        check_run(&r, &committer);
    }
}

#[test]
fn a_command_whose_commit_fails_gets_an_error_reply() {
    // A deliver whose `signals` checkpoint fails must still be answered (with the stop).
    let w = echo_world();
    let faulty = Arc::new(FaultyCommitter::new(w.committer.clone()));
    faulty.set_fault_plan(Box::new(|call| {
        if matches(call, At::Checkpoint(CheckpointKind::Signals)) { Fault::FailBefore } else { Fault::Pass }
    }));
    let owner = Owner::start(w.resolver.clone(), w.deployment.clone(), script_input(&[Op::Wait("k".into())]), ProcessId::root_from_hex(&hex(1)).unwrap(), IncarnationId::from_hex(&hex(100)).unwrap(), config(Budget::unlimited()), now()).unwrap();
    let mut r = DirectRunner::new(owner, faulty as Arc<dyn Committer>, now());
    r.run_to_idle();
    let head = w.head();
    let wait = head.root().current_wait_id.clone().unwrap();
    let answer = crate::kernel::signal::SignalRequest::new(crate::kernel::ids::SignalId::external("signal:a").unwrap(), Some(wait), Payload::from_json(Json::str("x")).unwrap()).unwrap();
    let reply = r.command(Command::Deliver { process: head.root_id.clone(), requests: vec![answer] });
    assert!(matches!(reply, Err(crate::kernel::owner::CommandError::Stopped(Some(_)))), "{reply:?}");
}

#[test]
fn activation_after_cas_before_publication_fences_the_source_and_restores_again() {
    let w = echo_world();
    let mut source = w.start(&[Op::Wait("w".into())], Budget::unlimited());
    source.run_to_idle();
    // A restore whose activation is stored but whose acknowledgement is lost.
    let faulty = Arc::new(FaultyCommitter::new(w.committer.clone()));
    faulty.set_fault_plan(Box::new(|call| {
        if matches!(call.kind, CommitCallKind::Activation) { Fault::CrashAfter } else { Fault::Pass }
    }));
    let owner = Owner::restore(w.resolver.clone(), w.deployment.clone(), &w.head(), IncarnationId::from_hex(&hex(300)).unwrap(), now()).unwrap();
    let dead = DirectRunner::new(owner, faulty as Arc<dyn Committer>, now());
    assert_dead(&dead);
    assert!(dead.published.iter().all(|p| !matches!(p, Publication::Started { .. })), "nothing published by the failed restore");
    assert_eq!(w.head().incarnation, IncarnationId::from_hex(&hex(300)).unwrap(), "the activation is in the head");
    // A further restore from the new head works.
    let mut again = w.restore(400);
    again.run_to_idle();
    assert!(!stopped(&again));
    // The original source writer is fenced when it next commits.
    let wait = w.head().root().current_wait_id.clone().unwrap();
    let answer = crate::kernel::signal::SignalRequest::new(crate::kernel::ids::SignalId::external("signal:a").unwrap(), Some(wait), Payload::from_json(Json::str("x")).unwrap()).unwrap();
    assert!(source.command(Command::Deliver { process: w.head().root_id.clone(), requests: vec![answer] }).is_err());
    assert_dead(&source);
}

#[test]
fn parked_after_commit_restores_waiting_without_events_from_the_dead_instance() {
    let w = echo_world();
    let dead = run_with_fault(&w, &[Op::Wait("w".into())], At::Checkpoint(CheckpointKind::Parked), || Fault::CrashAfter);
    assert_dead(&dead);
    let staged_after_crash = dead.published.iter().any(|p| matches!(p, Publication::Event(e) if e.name == crate::kernel::event::names::STEP_COMMITTED && e.step_sequence == Some(2)));
    assert!(!staged_after_crash, "committed events of the unacknowledged cut are never published");
    let r = w.restore(200);
    assert!(!stopped(&r));
    assert_eq!(w.head().root().status, Status::Waiting);
}

#[test]
fn subtree_cancellation_after_commit_restores_the_canceled_child_and_the_parent_continues() {
    let child = script_deployment("keel.test.child", None, vec![]);
    let parent = script_deployment("keel.test.parent", None, vec![child.reference().clone()]);
    let resolver = Arc::new(DeploymentSet::new().with(child.clone()).with(parent.clone()));
    let committer = Arc::new(MemoryCommitter::new());
    let ops = [Op::Child { deployment: child.reference().clone(), script: vec![Op::Wait("forever".into())], key: "c".into(), budget: Budget::unlimited() }];
    let faulty = Arc::new(FaultyCommitter::new(committer.clone()));
    let armed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let a = armed.clone();
    faulty.set_fault_plan(Box::new(move |_| {
        if a.swap(false, Ordering::SeqCst) { Fault::CrashAfter } else { Fault::Pass }
    }));
    let root = ProcessId::root_from_hex(&hex(1)).unwrap();
    let owner = Owner::start(resolver.clone(), parent.clone(), script_input(&ops), root.clone(), IncarnationId::from_hex(&hex(9)).unwrap(), config(Budget::unlimited()), now()).unwrap();
    let mut r = DirectRunner::new(owner, faulty as Arc<dyn Committer>, now());
    r.run_to_idle();
    let head = TreeSnapshot::from_cut(&futures::executor::block_on(committer.load_tree(&root)).unwrap().unwrap().cut).unwrap();
    let child_id = head.processes().iter().find(|p| !p.relation.is_root()).unwrap().id.clone();
    // Cancel only the child; the next commit (the cut with the canceled child) crashes.
    armed.store(true, Ordering::SeqCst);
    let _ = r.command(Command::Cancel { process: child_id.clone(), reason: "host".into() });
    r.run_to_idle();
    assert!(stopped(&r));
    let head = TreeSnapshot::from_cut(&futures::executor::block_on(committer.load_tree(&root)).unwrap().unwrap().cut).unwrap();
    let owner = Owner::restore(resolver, parent, &head, IncarnationId::from_hex(&hex(10)).unwrap(), now()).unwrap();
    let mut r2 = DirectRunner::new(owner, committer.clone() as Arc<dyn Committer>, now());
    r2.run_to_idle();
    let child_result = r2.published.iter().find_map(|p| match p {
        Publication::Finished { result } if result.process_id == child_id => Some(result.clone()),
        _ => None,
    });
    assert_eq!(child_result.unwrap().termination.cause, crate::kernel::status::Cause::HostCancellation);
    let parent_result = root_result(&r2).expect("the parent continues and completes");
    assert_eq!(parent_result.status(), Status::Completed);
}
