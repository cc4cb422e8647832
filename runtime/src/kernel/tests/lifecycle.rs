//! Effects, waits, children, terminal precedence, budgets and signal admission.

use super::*;
use crate::kernel::commit::CheckpointKind;
use crate::kernel::effect::EffectPhase;
use crate::kernel::owner::{Command, CommandError, CommitRequest, Reply};
use crate::kernel::resource::Quota;
use crate::kernel::signal::SignalRequest;
use crate::kernel::ids::SignalId;
use crate::kernel::status::{Cause, Status};

fn dispatch_op(v: &str) -> Op {
    Op::Dispatch(Json::str(v))
}

#[test]
fn one_effect_round_trip_commits_each_boundary_in_order() {
    let w = echo_world();
    let mut r = w.start(&[dispatch_op("hello")], Budget::unlimited());
    r.run_to_idle();
    let result = root_result(&r).expect("finished");
    assert_eq!(result.status(), Status::Completed);
    assert_eq!(w.dispatches(), 1);
    let names: Vec<&str> = r.commits.iter().map(|(c, _)| c.boundary_name()).collect();
    assert_eq!(names, ["start", "pending", "settled", "terminal"], "boundary order");
    let root = w.head().root().clone();
    let usage = root.usage();
    assert_eq!((usage.committed_steps, usage.prepared_effects, usage.accepted_signals), (2, 1, 1));
    // Sequences are consecutive from 1 for this incarnation.
    let seqs: Vec<u64> = r.commits.iter().filter_map(|(c, _)| match c {
        CommitRequest::Checkpoint(c) => Some(c.sequence),
        CommitRequest::Effect(b) => Some(b.sequence),
        CommitRequest::Activation(_) => None,
    }).collect();
    assert_eq!(seqs, [1, 2, 3, 4]);
    w.check(&r);
}

#[test]
fn no_dispatch_before_the_pending_boundary_is_acknowledged() {
    let w = echo_world();
    let mut r = w.start(&[dispatch_op("x")], Budget::unlimited());
    // Take dispatches manually: at the moment the dispatch exists, the pending commit must
    // already be in the committer's history.
    let ds = r.take_dispatches();
    assert_eq!(ds.len(), 1);
    let history = w.committer.history(r.owner.root_id());
    assert!(history.iter().any(|c| matches!(&c.kind, crate::kernel::commit::CommitRecordKind::Effect { kind, .. } if kind.as_str() == "pending")));
    w.check(&r);
}

#[test]
fn dispatch_error_becomes_a_sticky_unknown_until_resolved() {
    let w = world(Arc::new(|_| Err(DispatchError::Failed("socket reset".into()))));
    let mut r = w.start(&[dispatch_op("x")], Budget::unlimited());
    r.run_to_idle();
    assert!(root_result(&r).is_none(), "parked, not finished");
    let head = w.head();
    let root = head.root();
    let prepared = root.prepared.as_ref().expect("batch retained");
    let unknown = prepared.unknown_ids();
    assert_eq!(unknown.len(), 1);
    assert_eq!(prepared.effects[0].phase, EffectPhase::Unknown);
    assert_eq!(prepared.effects[0].diagnostic.as_ref().unwrap().code.as_str(), "engine.dispatch.failed");
    // Still unknown after a restore: never replayed silently.
    let mut r2 = w.restore(200);
    r2.run_to_idle();
    assert_eq!(w.dispatches(), 1, "an unknown is never re-dispatched");
    let pid = r2.owner.root_id().clone();
    let reply = r2.command(Command::Resolve {
        process: pid.clone(),
        effect: unknown[0].clone(),
        settlement: ok_settlement("settled by host").unwrap(),
    });
    assert!(matches!(reply, Ok(Reply::Resolved)), "{reply:?}");
    r2.run_to_idle();
    let result = root_result(&r2).expect("completes after resolution");
    assert_eq!(result.status(), Status::Completed);
    let usage = w.head().root().usage();
    assert_eq!((usage.committed_steps, usage.prepared_effects, usage.accepted_signals), (2, 1, 1));
    // Resolving again is refused: the process is finished.
    let again = r2.command(Command::Resolve { process: pid, effect: unknown[0].clone(), settlement: ok_settlement("x").unwrap() });
    assert!(matches!(again, Err(CommandError::ProcessFinished(_))));
    w.check(&r);
    w.check(&r2);
}

#[test]
fn kill_while_parked_on_unknown_keeps_the_unknown_in_the_termination() {
    let w = world(Arc::new(|_| Err(DispatchError::Canceled)));
    let mut r = w.start(&[dispatch_op("x")], Budget::unlimited());
    r.run_to_idle();
    let pid = r.owner.root_id().clone();
    assert!(matches!(r.command(Command::Kill { process: pid, reason: "operator".into() }), Ok(Reply::IntentRecorded)));
    r.run_to_idle();
    let result = root_result(&r).expect("killed");
    assert_eq!(result.termination.cause, Cause::EngineKill);
    assert_eq!(result.termination.unresolved_effect_ids.len(), 1);
    let head = w.head();
    assert_eq!(head.root().prepared.as_ref().unwrap().unknown_ids(), result.termination.unresolved_effect_ids);
    w.check(&r);
}

#[test]
fn external_wait_is_answered_once_and_only_by_its_wait_id() {
    let w = echo_world();
    let mut r = w.start(&[Op::Wait("approval".into())], Budget::unlimited());
    r.run_to_idle();
    let head = w.head();
    let root = head.root();
    assert_eq!(root.status, Status::Waiting);
    let wait = root.current_wait_id.clone().expect("current wait");
    let pid = root.id.clone();
    // Unaddressed input is rejected while an external wait is current.
    let unaddressed = SignalRequest::new(SignalId::external("signal:u1").unwrap(), None, Payload::from_json(Json::str("x")).unwrap()).unwrap();
    assert!(matches!(r.command(Command::Deliver { process: pid.clone(), requests: vec![unaddressed] }), Err(CommandError::Signal(_))));
    let answer = SignalRequest::new(SignalId::external("signal:a1").unwrap(), Some(wait.clone()), Payload::from_json(Json::str("yes")).unwrap()).unwrap();
    assert!(matches!(r.command(Command::Deliver { process: pid.clone(), requests: vec![answer.clone()] }), Ok(Reply::Delivered { accepted: true })));
    // Identical redelivery is a silent no-op; conflicting content is rejected.
    r.run_to_idle();
    let dup = r.command(Command::Deliver { process: pid.clone(), requests: vec![answer] });
    assert!(matches!(dup, Ok(Reply::Delivered { accepted: false }) | Err(CommandError::ProcessFinished(_))), "{dup:?}");
    let result = root_result(&r).expect("finished");
    assert_eq!(result.status(), Status::Completed);
    assert_eq!(result.output.unwrap().value().to_canonical_string(), r#"[{"payload":"yes"}]"#);
    w.check(&r);
}

#[test]
fn conflicting_signal_content_under_one_id_is_rejected() {
    let w = echo_world();
    let mut r = w.start(&[Op::Wait("k".into())], Budget::unlimited());
    r.run_to_idle();
    let head = w.head();
    let root = head.root();
    let wait = root.current_wait_id.clone().unwrap();
    let a = |v: &str| SignalRequest::new(SignalId::external("signal:same").unwrap(), Some(wait.clone()), Payload::from_json(Json::str(v)).unwrap()).unwrap();
    let both = r.command(Command::Deliver { process: root.id.clone(), requests: vec![a("one"), a("two")] });
    assert!(matches!(both, Err(CommandError::Signal(_))), "same id twice in one batch conflicts");
    assert_eq!(w.head().root().mailbox.len(), 1, "an atomic batch that fails appends nothing (only the opening)");
    w.check(&r);
}

#[test]
fn child_runs_drains_and_its_budget_is_debited_permanently() {
    let calls = Arc::new(AtomicU64::new(0));
    let c = calls.clone();
    let dispatcher: Arc<dyn Dispatcher> = Arc::new(FnDispatcher::new(Arc::new(move |_, _| {
        c.fetch_add(1, Ordering::SeqCst);
        ok_settlement("child-work")
    })));
    let child = script_deployment("keel.test.child", Some(dispatcher), vec![]);
    let parent = script_deployment("keel.test.parent", None, vec![child.reference().clone()]);
    let resolver = Arc::new(DeploymentSet::new().with(child.clone()).with(parent.clone()));
    let committer = Arc::new(MemoryCommitter::new());
    let child_budget = Budget::finite(5, 2, 5);
    let ops = [Op::Child { deployment: child.reference().clone(), script: vec![dispatch_op("c")], key: "worker".into(), budget: child_budget }];
    let owner = Owner::start(resolver, parent, script_input(&ops), ProcessId::root_from_hex(&hex(1)).unwrap(), IncarnationId::from_hex(&hex(9)).unwrap(), config(Budget::finite(20, 10, 20)), now()).unwrap();
    let mut r = DirectRunner::new(owner, committer.clone() as Arc<dyn Committer>, now());
    r.run_to_idle();
    let result = root_result(&r).expect("parent finished");
    assert_eq!(result.status(), Status::Completed, "{:?}", result.termination);
    assert_eq!(result.output.unwrap().value().to_canonical_string(), r#"[{"child":"completed"}]"#);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let root = ProcessId::root_from_hex(&hex(1)).unwrap();
    let head = futures::executor::block_on(committer.load_tree(&root)).unwrap().unwrap();
    let snap = TreeSnapshot::from_cut(&head.cut).unwrap();
    assert_eq!(snap.processes().len(), 2);
    let parent_p = snap.root();
    assert_eq!((parent_p.allocated.steps, parent_p.allocated.effects, parent_p.allocated.signals), (5, 2, 5));
    assert!(r.commits.iter().any(|(c, _)| matches!(c, CommitRequest::Checkpoint(cp) if cp.kind == CheckpointKind::ChildStart)));
    check_run(&r, &committer);
}

#[test]
fn kill_propagates_to_descendants_as_parent_cancellation() {
    let child = script_deployment("keel.test.child", None, vec![]);
    let parent = script_deployment("keel.test.parent", None, vec![child.reference().clone()]);
    let resolver = Arc::new(DeploymentSet::new().with(child.clone()).with(parent.clone()));
    let committer = Arc::new(MemoryCommitter::new());
    let ops = [Op::Child { deployment: child.reference().clone(), script: vec![Op::Wait("forever".into())], key: "w".into(), budget: Budget::unlimited() }];
    let owner = Owner::start(resolver, parent, script_input(&ops), ProcessId::root_from_hex(&hex(1)).unwrap(), IncarnationId::from_hex(&hex(9)).unwrap(), config(Budget::unlimited()), now()).unwrap();
    let mut r = DirectRunner::new(owner, committer.clone() as Arc<dyn Committer>, now());
    r.run_to_idle();
    let pid = r.owner.root_id().clone();
    r.command(Command::Kill { process: pid, reason: "stop".into() }).unwrap();
    r.run_to_idle();
    let finished: Vec<(Cause, bool)> = r.published.iter().filter_map(|p| match p {
        Publication::Finished { result } => Some((result.termination.cause, result.process_id == *r.owner.root_id())),
        _ => None,
    }).collect();
    assert!(finished.contains(&(Cause::EngineKill, true)));
    assert!(finished.contains(&(Cause::ParentCancellation, false)));
    check_run(&r, &committer);
}

#[test]
fn steps_quota_exhaustion_fails_with_the_limit_code() {
    let w = echo_world();
    let budget = Budget { steps: Quota::Finite(1), effects: Quota::Unlimited, signals: Quota::Unlimited };
    let mut r = w.start(&[dispatch_op("a")], budget);
    r.run_to_idle();
    let result = root_result(&r).expect("failed");
    assert_eq!(result.status(), Status::Failed);
    assert_eq!(result.termination.failure.unwrap().code.as_str(), "engine.limit.steps");
    w.check(&r);
}

#[test]
fn effects_quota_zero_forbids_the_effect_but_not_pure_steps() {
    let w = echo_world();
    let budget = Budget { steps: Quota::Unlimited, effects: Quota::Finite(0), signals: Quota::Unlimited };
    let mut r = w.start(&[dispatch_op("a")], budget);
    r.run_to_idle();
    let f = root_result(&r).unwrap().termination.failure.unwrap();
    assert_eq!(f.code.as_str(), "engine.limit.effects");
    assert_eq!(w.dispatches(), 0);
    let w2 = echo_world();
    let mut r2 = w2.start(&[Op::Checkpoint], budget);
    r2.run_to_idle();
    assert_eq!(root_result(&r2).unwrap().status(), Status::Completed);
    w.check(&r);
    w2.check(&r2);
}

#[test]
fn a_fail_transition_adopts_its_state_and_fails() {
    let w = echo_world();
    let mut r = w.start(&[Op::Fail("nope".into())], Budget::unlimited());
    r.run_to_idle();
    let result = root_result(&r).unwrap();
    assert_eq!(result.status(), Status::Failed);
    assert_eq!(result.termination.cause, Cause::ExecutionFailure);
    assert_eq!(w.head().root().committed_steps, 1, "fail adopts the candidate");
    w.check(&r);
}

#[test]
fn dispatcher_effect_without_a_dispatcher_is_an_invalid_effect() {
    let d = script_deployment("keel.test.nodispatch", None, vec![]);
    let resolver = Arc::new(DeploymentSet::new().with(d.clone()));
    let committer = Arc::new(MemoryCommitter::new());
    let owner = Owner::start(resolver, d, script_input(&[dispatch_op("x")]), ProcessId::root_from_hex(&hex(1)).unwrap(), IncarnationId::from_hex(&hex(9)).unwrap(), config(Budget::unlimited()), now()).unwrap();
    let mut r = DirectRunner::new(owner, committer.clone() as Arc<dyn Committer>, now());
    r.run_to_idle();
    let f = root_result(&r).unwrap().termination.failure.unwrap();
    assert_eq!(f.code.as_str(), "execution.effect.invalid");
    assert_eq!(r.owner.head().unwrap().root().committed_steps, 0, "a rejected candidate is not adopted");
    check_run(&r, &committer);
}

#[test]
fn unaddressed_signals_are_checked_against_the_signal_schema() {
    // The default signal schema is `false`: every unaddressed host signal is rejected.
    let w = echo_world();
    let mut r = w.start(&[Op::Checkpoint, Op::Wait("w".into())], Budget::unlimited());
    r.run_to_idle();
    let pid = r.owner.root_id().clone();
    let s = SignalRequest::new(SignalId::external("signal:x").unwrap(), None, Payload::from_json(Json::u64(1)).unwrap()).unwrap();
    assert!(matches!(r.command(Command::Deliver { process: pid, requests: vec![s] }), Err(CommandError::Signal(_))));
    w.check(&r);
}

/// A strategy whose first Step declares an Effect with a payload far larger than its state.
struct Inflating;
struct InflatingExecution;

impl crate::kernel::waist::Execution for InflatingExecution {
    fn step(&mut self, _: &crate::kernel::waist::StepContext, _: &[crate::kernel::signal::Signal]) -> Result<crate::kernel::transition::Transition, crate::kernel::waist::StepError> {
        let payload = Payload::from_json(Json::str("x".repeat(32 * 1024))).unwrap();
        Ok(crate::kernel::transition::Transition::Continue { consumed: 0, effects: vec![crate::kernel::effect::Effect::Dispatcher(payload)] })
    }
    fn snapshot(&self) -> Result<crate::kernel::waist::ExecutionState, crate::kernel::waist::StepError> {
        Ok(crate::kernel::waist::ExecutionState { kind: crate::text::QualifiedName::parse("keel.test.inflating").unwrap(), payload: Payload::from_json(Json::Null).unwrap() })
    }
}

impl crate::kernel::waist::Definition for Inflating {
    fn descriptor(&self) -> &crate::kernel::descriptor::Descriptor {
        static D: std::sync::OnceLock<crate::kernel::descriptor::Descriptor> = std::sync::OnceLock::new();
        D.get_or_init(|| crate::kernel::descriptor::Descriptor::new("keel.test.inflating", "Declares one oversized effect.", Json::Bool(true), Json::Bool(true), None).unwrap())
    }
    fn start(&self, _: &Payload) -> Result<Box<dyn crate::kernel::waist::Execution>, crate::kernel::waist::StepError> {
        Ok(Box::new(InflatingExecution))
    }
    fn restore(&self, _: &crate::kernel::waist::StepContext, _: &crate::kernel::waist::ExecutionState) -> Result<Box<dyn crate::kernel::waist::Execution>, crate::kernel::waist::StepError> {
        Ok(Box::new(InflatingExecution))
    }
}

#[test]
fn a_step_whose_cut_would_exceed_the_snapshot_cap_fails_with_the_limit_code() {
    let dispatcher: Arc<dyn Dispatcher> = Arc::new(FnDispatcher::echo());
    let d = Deployment::new(Arc::new(Inflating), Some(dispatcher), crate::json::Digest::of(b"i"), crate::json::Digest::of(b"c"));
    let resolver = Arc::new(DeploymentSet::new().with(d.clone()));
    let committer = Arc::new(MemoryCommitter::new());
    let limits = TreeLimits::default().with_max_snapshot_bytes(Quota::Finite(16 * 1024));
    let owner = Owner::start(
        resolver,
        d,
        Payload::from_json(Json::Null).unwrap(),
        ProcessId::root_from_hex(&hex(1)).unwrap(),
        IncarnationId::from_hex(&hex(100)).unwrap(),
        RootConfig { budget: Budget::unlimited(), capabilities: CapabilitySet::empty(), limits },
        now(),
    )
    .unwrap();
    let mut r = DirectRunner::new(owner, committer as Arc<dyn Committer>, now());
    r.run_to_idle();
    assert!(!stopped(&r), "the writer keeps running");
    let result = root_result(&r).expect("the process fails gracefully");
    assert_eq!(result.termination.failure.unwrap().code.as_str(), "engine.limit.snapshot");
    assert_eq!(r.owner.head().unwrap().root().committed_steps, 0, "the oversized candidate was not adopted");
}

#[test]
fn the_scripted_strategy_passes_the_definition_conformance_helper() {
    use crate::kernel::conformance::check_definition;
    use crate::kernel::ids::EffectId;
    use crate::kernel::signal::Signal;
    let d = crate::kernel::testkit::ScriptDefinition::new("keel.test.conformance", vec![]);
    let input = script_input(&[dispatch_op("a"), Op::Checkpoint]);
    let root = ProcessId::root_from_hex(&hex(1)).unwrap();
    let settlement = Signal::new(
        SignalId::settlement(&EffectId::derive(&root, 1, 0)),
        None,
        Payload::from_json(Json::str("answer")).unwrap(),
        Some(SettlementStatus::Succeeded),
    )
    .unwrap();
    check_definition(&d, &input, &[vec![vec![], vec![settlement.clone()], vec![]], vec![vec![], vec![]]]).unwrap();
    // A non-conforming Definition is caught: its restore drops state.
    struct Forgetful(crate::kernel::testkit::ScriptDefinition);
    impl crate::kernel::waist::Definition for Forgetful {
        fn descriptor(&self) -> &crate::kernel::descriptor::Descriptor { self.0.descriptor() }
        fn start(&self, i: &Payload) -> Result<Box<dyn crate::kernel::waist::Execution>, crate::kernel::waist::StepError> { self.0.start(i) }
        fn restore(&self, _: &crate::kernel::waist::StepContext, _: &crate::kernel::waist::ExecutionState) -> Result<Box<dyn crate::kernel::waist::Execution>, crate::kernel::waist::StepError> {
            self.0.start(&script_input(&[]))
        }
    }
    assert!(check_definition(&Forgetful(crate::kernel::testkit::ScriptDefinition::new("keel.test.forgetful", vec![])), &input, &[]).is_err());
}
