//! Kernel deviations from its behavioral contract that the simulator's authors found building the
//! kernel world, each pinned by a test of how it was resolved: fixed in the kernel
//! (`step.finished`), or settled as a documented layering decision (who emits
//! `runtime.stopped`, what a failed start hands its driver). A new finding starts here as an
//! `#[ignore]`d failing test.

use keel::env::Timestamp;
use keel::json::Json;
use keel::kernel::binding::DeploymentSet;
use keel::kernel::capability::CapabilitySet;
use keel::kernel::commit::{CheckpointKind, CommitCallKind, Committer, Fault, FaultyCommitter, MemoryCommitter};
use keel::kernel::direct::commit;
use keel::kernel::event::names;
use keel::kernel::ids::{IncarnationId, ProcessId};
use keel::kernel::owner::{Action, Input, Owner, Publication, RootConfig};
use keel::kernel::resource::Budget;
use keel::kernel::testkit::{script_deployment, script_input, FnDispatcher, Op};
use keel::kernel::tree_limits::TreeLimits;
use std::sync::Arc;

fn now() -> Timestamp {
    Timestamp::saturating_from_millis(1_700_000_000_000)
}

/// Runs a one-dispatch script with `fault` on the first commit of checkpoint kind `at`
/// (dispatches echo inline); returns every publication of the owner.
fn publications(at: CheckpointKind, fault: fn() -> Fault) -> Vec<Publication> {
    let deployment = script_deployment("keel.sim.finding", Some(Arc::new(FnDispatcher::echo())), vec![]);
    let resolver = Arc::new(DeploymentSet::new().with(deployment.clone()));
    let committer = Arc::new(FaultyCommitter::new(MemoryCommitter::new()));
    let mut fired = false;
    committer.set_fault_plan(Box::new(move |call| {
        if !fired && call.kind == CommitCallKind::Checkpoint(at) {
            fired = true;
            return fault();
        }
        Fault::Pass
    }));
    let config = RootConfig { budget: Budget::unlimited(), capabilities: CapabilitySet::empty(), limits: TreeLimits::default() };
    let mut owner = Owner::start(
        resolver,
        deployment.clone(),
        script_input(&[Op::Dispatch(Json::str("work"))]),
        ProcessId::root_from_hex(&format!("{:032x}", 1)).unwrap(),
        IncarnationId::from_hex(&format!("{:032x}", 2)).unwrap(),
        config,
        now(),
    )
    .unwrap();
    let mut out = Vec::new();
    for _ in 0..1_000 {
        let Some(action) = owner.poll_action() else { break };
        match action {
            Action::Commit(request) => {
                let result = futures::executor::block_on(commit(committer.as_ref() as &dyn Committer, &request));
                owner.handle(Input::CommitDone(result), now());
            }
            Action::CommitChain(chain) => {
                let result = futures::executor::block_on((committer.as_ref() as &dyn Committer).commit_chain(&chain));
                owner.handle(Input::CommitDone(result), now());
            }
            Action::Dispatch { request, .. } => {
                let outcome = Ok(keel::kernel::effect::Settlement {
                    status: keel::kernel::signal::SettlementStatus::Succeeded,
                    payload: request.payload.clone(),
                });
                owner.handle(Input::DispatchDone { effect: request.effect_id, outcome }, now());
            }
            Action::Publish(p) => out.push(p),
            Action::Reply { .. } => {}
        }
    }
    out
}

fn event_names(ps: &[Publication]) -> Vec<&'static str> {
    ps.iter()
        .filter_map(|p| match p {
            Publication::Event(e) => Some(e.name),
            _ => None,
        })
        .collect()
}

/// Finding: a commit fault stops the writer, and `agent.runtime.stopped` must reach listeners
/// once per published member. Resolved
/// as a layering decision (ARCHITECTURE.md): the owner hands its driver one
/// `Publication::Stopped` carrying the RuntimeError, and the Engine driver, which knows which
/// members were published to the host, emits `agent.runtime.stopped` once per such member
/// (tested in `keel::kernel::engine::tests`). The owner itself must not emit it too, or
/// listeners would see it twice.
#[test]
fn a_stopped_writer_hands_the_driver_one_stop_and_no_event_of_its_own() {
    let ps = publications(CheckpointKind::Terminal, || Fault::CrashAfter);
    let stops = ps.iter().filter(|p| matches!(p, Publication::Stopped { .. })).count();
    assert_eq!(stops, 1, "the writer stopped once");
    assert!(!event_names(&ps).contains(&names::RUNTIME_STOPPED), "{:?}", event_names(&ps));
}

/// Finding: a start whose commit fails returns the error and publishes nothing. The owner still hands its driver a `Stopped` (the cue that the writer is gone);
/// nothing reaches the host because no member was ever published — the Engine returns the
/// commit error and emits no event (`a_start_whose_commit_fails_publishes_nothing_and_returns_
/// the_commit_error` in the engine tests). Here: nothing but that cue.
#[test]
fn a_start_whose_commit_fails_hands_over_only_the_stop() {
    let ps = publications(CheckpointKind::Start, || Fault::FailBefore);
    let kinds: Vec<String> = ps
        .iter()
        .map(|p| match p {
            Publication::Started { .. } => "started".to_owned(),
            Publication::Finished { .. } => "finished".to_owned(),
            Publication::Stopped { .. } => "stopped".to_owned(),
            Publication::Event(e) => e.name.to_owned(),
        })
        .collect();
    assert_eq!(kinds, vec!["stopped".to_owned()], "published {kinds:?}");
}

/// `agent.step.finished` (attempt phase, step scope: step status, duration) is part of every
/// Step's observation; the owner emits `step.started` and `step.prepared` but
/// never `step.finished`.
#[test]
fn every_step_emits_step_finished() {
    let ps = publications(CheckpointKind::Parked, || Fault::Pass);
    let names_seen = event_names(&ps);
    let started = names_seen.iter().filter(|n| **n == names::STEP_STARTED).count();
    let finished = names_seen.iter().filter(|n| **n == names::STEP_FINISHED).count();
    assert!(started > 0);
    assert_eq!(finished, started, "{names_seen:?}");
}
