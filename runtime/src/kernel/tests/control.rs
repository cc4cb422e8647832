//! Terminal intents that meet work in flight.

use super::*;
use crate::kernel::effect::EffectPhase;
use crate::kernel::owner::{Command, CommandError, Reply};
use crate::kernel::status::{Cause, Status};

#[test]
fn kill_during_a_running_dispatch_collects_the_outcome_then_ends_killed() {
    let w = echo_world();
    let mut r = w.start(&[Op::Dispatch(Json::str("x")), Op::Checkpoint], Budget::unlimited());
    let mut held = r.take_dispatches();
    assert_eq!(held.len(), 1);
    let pid = r.owner.root_id().clone();
    let before = w.head();
    assert!(matches!(r.command(Command::Kill { process: pid.clone(), reason: "operator".into() }), Ok(Reply::IntentRecorded)));
    assert!(held[0].cx.cancel.is_cancelled(), "the dispatch is asked to stop");
    assert!(root_result(&r).is_none(), "not terminal while its dispatch runs");
    assert_eq!(w.head().digest(), before.digest(), "nothing committed while the job runs");
    // Adjudication is refused once terminal intent exists.
    let effect = before.root().prepared.as_ref().unwrap().effects[0].id.clone();
    let resolve = r.command(Command::Resolve { process: pid.clone(), effect, settlement: ok_settlement("h").unwrap() });
    assert!(matches!(resolve, Err(CommandError::ProcessFinished(_))), "{resolve:?}");

    let (effect, outcome) = held.pop().unwrap().run(1);
    r.complete(effect, outcome);
    r.run_to_idle();
    let result = root_result(&r).expect("killed");
    assert_eq!(result.termination.cause, Cause::EngineKill);
    assert_eq!(result.termination.reason, "operator");
    assert!(result.termination.unresolved_effect_ids.is_empty(), "the outcome was definite");
    let names: Vec<&str> = r.commits.iter().map(|(c, _)| c.boundary_name()).collect();
    assert_eq!(names, ["start", "pending", "settled", "terminal"], "the outcome is recorded before the end");
    let end = w.head();
    let root = end.root();
    assert_eq!(root.status, Status::Killed);
    // Evidence: the settled batch stays; the candidate was never adopted, nothing consumed.
    let batch = root.prepared.as_ref().expect("the interrupted batch is kept");
    match &batch.effects[0].phase {
        EffectPhase::Settled(s) => assert_eq!(s.payload.value().to_canonical_string(), r#""answer-1""#),
        other => panic!("expected the collected settlement, got {other:?}"),
    }
    assert_eq!(root.committed_steps, before.root().committed_steps);
    assert_eq!(root.mailbox.len(), before.root().mailbox.len(), "the settlement Signal is never appended");
    assert_eq!(w.dispatches(), 1);
    w.check(&r);
}

#[test]
fn cancel_during_a_running_dispatch_that_fails_uncertainly_keeps_the_unknown() {
    let w = world(Arc::new(|_| Err(DispatchError::Canceled)));
    let mut r = w.start(&[Op::Dispatch(Json::str("x"))], Budget::unlimited());
    let mut held = r.take_dispatches();
    let pid = r.owner.root_id().clone();
    r.command(Command::Cancel { process: pid, reason: "stop".into() }).unwrap();
    let (effect, outcome) = held.pop().unwrap().run(1);
    r.complete(effect.clone(), outcome);
    r.run_to_idle();
    let result = root_result(&r).expect("canceled");
    assert_eq!(result.termination.cause, Cause::HostCancellation);
    assert_eq!(result.termination.unresolved_effect_ids, [effect]);
    w.check(&r);
}
