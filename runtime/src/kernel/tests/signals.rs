//! Signal admission and waits: dedup charges nothing, early answers, waits across restore.

use super::*;
use crate::kernel::event::names;
use crate::kernel::ids::{EffectId, SignalId, WaitId};
use std::collections::BTreeMap;
use crate::kernel::owner::{Command, CommandError, Reply};
use crate::kernel::status::Status;

fn accepted_events(r: &DirectRunner) -> usize {
    r.published.iter().filter(|p| matches!(p, Publication::Event(e) if e.name == names::SIGNAL_ACCEPTED)).count()
}

/// Starts `ops` (the first op must be a wait), answers that first wait with the external
/// signal `signal:a1` = "yes" (accepted), and runs to idle.
fn answer_first_wait(w: &World, ops: &[Op]) -> (DirectRunner, ProcessId, WaitId, crate::kernel::signal::SignalRequest) {
    let mut r = w.start(ops, Budget::unlimited());
    r.run_to_idle();
    let pid = r.owner.root_id().clone();
    let wait_a = w.head().root().current_wait_id.clone().unwrap();
    let answer = request("signal:a1", Some(&wait_a), "yes");
    let first = r.command(Command::Deliver { process: pid.clone(), requests: vec![answer.clone()] });
    assert!(matches!(first, Ok(Reply::Delivered { accepted: true })), "{first:?}");
    r.run_to_idle();
    (r, pid, wait_a, answer)
}

#[test]
fn identical_redelivery_charges_nothing_and_commits_nothing() {
    let w = echo_world();
    let (mut r, pid, wait_a, answer) = answer_first_wait(&w, &[Op::Wait("a".into()), Op::Wait("b".into())]);
    let before = w.head();
    assert_eq!(before.root().status, Status::Waiting);
    assert_ne!(before.root().current_wait_id.as_ref(), Some(&wait_a), "now parked on the second wait");
    let (commits, events) = (r.commits.len(), accepted_events(&r));

    // The identical request again: silently skipped, no charge, no commit, no event.
    let dup = r.command(Command::Deliver { process: pid.clone(), requests: vec![answer.clone()] });
    assert!(matches!(dup, Ok(Reply::Delivered { accepted: false })), "{dup:?}");
    assert_eq!(r.commits.len(), commits, "a duplicate commits nothing");
    assert_eq!(accepted_events(&r), events, "a duplicate publishes no accepted event");
    assert_eq!(w.head().digest(), before.digest());
    assert_eq!(w.head().root().usage().accepted_signals, before.root().usage().accepted_signals);

    // A batch of the duplicate plus one new answer charges exactly one signal.
    let wait_b = before.root().current_wait_id.clone().unwrap();
    let mixed = vec![answer.clone(), request("signal:b1", Some(&wait_b), "also")];
    assert!(matches!(r.command(Command::Deliver { process: pid.clone(), requests: mixed }), Ok(Reply::Delivered { accepted: true })));
    r.run_to_idle();
    let after = w.head().root().usage().accepted_signals;
    // +1 for the answer; the last Step's Complete adds nothing to the mailbox.
    assert_eq!(after, before.root().usage().accepted_signals + 1);

    // Different content under the admitted id is a conflict even after the process finished
    // (finished is reported first: nothing is admitted to a terminal process).
    let conflict = r.command(Command::Deliver { process: pid, requests: vec![request("signal:a1", Some(&wait_a), "no")] });
    assert!(matches!(conflict, Err(CommandError::ProcessFinished(_))), "{conflict:?}");
    let result = root_result(&r).unwrap();
    assert_eq!(output_text(&result), r#"[{"payload":"yes"},{"payload":"also"}]"#);
    w.check(&r);
}

#[test]
fn conflicting_redelivery_to_a_live_process_is_rejected_and_changes_nothing() {
    let w = echo_world();
    let mut r = w.start(&[Op::Wait("a".into()), Op::Wait("b".into())], Budget::unlimited());
    r.run_to_idle();
    let pid = r.owner.root_id().clone();
    let wait_a = w.head().root().current_wait_id.clone().unwrap();
    r.command(Command::Deliver { process: pid.clone(), requests: vec![request("signal:a1", Some(&wait_a), "yes")] }).unwrap();
    r.run_to_idle();
    let before = w.head();
    let conflict = r.command(Command::Deliver { process: pid, requests: vec![request("signal:a1", Some(&wait_a), "no")] });
    assert!(matches!(conflict, Err(CommandError::Signal(_))), "{conflict:?}");
    assert_eq!(w.head().digest(), before.digest());
    w.check(&r);
}

#[test]
fn an_answer_before_the_wait_transition_is_consumed_by_the_next_step() {
    let w = echo_world();
    let mut r = w.start(&[Op::WaitAfter { key: "k".into(), then: Json::str("work") }], Budget::unlimited());
    // Step 1 opened the wait, step 2 consumed the opening and dispatched: hold the dispatch.
    let mut held = r.take_dispatches();
    assert_eq!(held.len(), 1);
    let pid = r.owner.root_id().clone();
    let head = w.head();
    let wait = WaitId::of_effect(&EffectId::derive(&pid, 1, 0));
    let state = head.root().mailbox.wait(&wait).expect("the wait is open");
    assert!(!state.closed && state.answered_by.is_none());
    assert_eq!(head.root().status, Status::Running);
    assert!(head.root().current_wait_id.is_none(), "not parked yet");

    let early = r.command(Command::Deliver { process: pid.clone(), requests: vec![request("signal:early", Some(&wait), "early")] });
    assert!(matches!(early, Ok(Reply::Delivered { accepted: true })), "{early:?}");
    assert_eq!(w.head().root().status, Status::Running, "an early answer does not change the status");

    let d = held.pop().unwrap();
    let (effect, outcome) = d.run(1);
    r.complete(effect, outcome);
    r.run_to_idle();
    let result = root_result(&r).expect("finished");
    assert_eq!(result.status(), Status::Completed, "{:?}", result.termination);
    assert_eq!(output_text(&result), r#"[{"payload":"early"},{"payload":"answer-1","status":"succeeded"}]"#);
    // The Wait transition found its answer already there: the process never parked.
    for whole in r.acknowledged_cuts() {
        let cut = TreeSnapshot::from_cut(&whole).unwrap();
        assert_ne!(cut.root().status, Status::Waiting, "cut at {} shows Waiting", whole.digest);
    }
    // Open (1), dispatch (2), Wait with the early answer queued: stays Running (3), then the
    // next Step consumes the answer (4).
    assert_eq!(w.head().root().committed_steps, 4);
    assert_eq!(w.head().root().mailbox.cursor(), w.head().root().mailbox.len(), "everything consumed");
    w.check(&r);
}

#[test]
fn a_restored_waiting_tree_keeps_its_wait_ids_and_takes_answers() {
    let w = echo_world();
    let d = w.deployment.reference().clone();
    let ops = [Op::Child { deployment: d, script: vec![Op::Wait("child-k".into())], key: "c".into(), budget: Budget::unlimited() }];
    let mut r = w.start(&ops, Budget::unlimited());
    r.run_to_idle();
    let before = w.head();
    let child = child_by_key(&before, "c").clone();
    assert_eq!(child.status, Status::Waiting);
    assert_eq!(before.root().status, Status::Waiting);
    let child_wait = child.current_wait_id.clone().unwrap();
    assert_eq!(child_wait, WaitId::of_effect(&EffectId::derive(&child.id, 1, 0)), "derived from the wait effect");
    let root_wait = before.root().current_wait_id.clone().unwrap();
    w.check(&r);
    drop(r);

    let mut r2 = w.restore(200);
    r2.run_to_idle();
    let restored = w.head();
    assert_eq!(restored.incarnation, r2.owner.incarnation().clone());
    assert_eq!(child_by_key(&restored, "c").current_wait_id.as_ref(), Some(&child_wait), "same WaitId after restore");
    assert_eq!(restored.root().current_wait_id.as_ref(), Some(&root_wait));
    let reply = answer_current(&mut r2, &restored, &child.id, "signal:go", "go");
    assert!(matches!(reply, Ok(Reply::Delivered { accepted: true })), "{reply:?}");
    r2.run_to_idle();
    assert_eq!(output_text(&result_for(&r2, &child.id).unwrap()), r#"[{"payload":"go"}]"#);
    let result = root_result(&r2).expect("parent finished");
    assert_eq!(output_text(&result), r#"[{"child":"completed"}]"#);
    w.check(&r2);
}

fn acknowledged(r: &DirectRunner) -> Vec<TreeSnapshot> {
    r.acknowledged_cuts().iter().map(|c| TreeSnapshot::from_cut(c).unwrap()).collect()
}

/// The host's view of one redelivery round against a live root: the identical answer is a
/// duplicate (nothing committed), other content under its id is a conflict, and a new answer
/// to the closed wait is refused.
fn assert_redelivery_refused(r: &mut DirectRunner, w: &World, answer: &crate::kernel::signal::SignalRequest, wait: &WaitId) {
    let pid = r.owner.root_id().clone();
    let (before, commits) = (w.head(), r.commits.len());
    let dup = r.command(Command::Deliver { process: pid.clone(), requests: vec![answer.clone()] });
    assert!(matches!(dup, Ok(Reply::Delivered { accepted: false })), "{dup:?}");
    let conflict = r.command(Command::Deliver { process: pid.clone(), requests: vec![request("signal:a1", Some(wait), "no")] });
    assert!(matches!(conflict, Err(CommandError::Signal(_))), "{conflict:?}");
    let again = r.command(Command::Deliver { process: pid, requests: vec![request("signal:a2", Some(wait), "yes")] });
    assert!(matches!(again, Err(CommandError::Signal(_))), "{again:?}");
    assert_eq!(r.commits.len(), commits, "nothing was admitted");
    assert_eq!(w.head().digest(), before.digest());
}

#[test]
fn compaction_keeps_external_dedup_across_restore_and_never_readmits_engine_ids() {
    let w = echo_world();
    let ops = [Op::Wait("a".into()), Op::Dispatch(Json::str("x")), Op::Checkpoint, Op::Wait("b".into())];
    let (mut r, pid, wait_a, answer) = answer_first_wait(&w, &ops);
    // Parked on `b`: wait `a` closed and its opening, the settlement of `x` and the opening
    // consumed with it are gone; the external answer is kept.
    let head = w.head();
    let m = &head.root().mailbox;
    assert_eq!(head.root().status, Status::Waiting);
    assert!(m.is_compacted() && !m.has_droppable());
    assert!(m.wait(&wait_a).is_none(), "the closed wait's opening was dropped");
    assert!(m.contains(answer.id()) && m.is_answered(&wait_a));
    assert!(m.records().iter().filter(|r| r.id().is_engine_owned()).all(|r| !r.is_consumed() || r.opens().is_some()));
    assert_redelivery_refused(&mut r, &w, &answer, &wait_a);
    w.check(&r);
    let mut cuts: Vec<TreeSnapshot> = acknowledged(&r);
    drop(r);
    // The same after a restore from the compacted cut.
    let mut r2 = w.restore(200);
    r2.run_to_idle();
    assert_redelivery_refused(&mut r2, &w, &answer, &wait_a);
    let wait_b = w.head().root().current_wait_id.clone().unwrap();
    let reply = r2.command(Command::Deliver { process: pid.clone(), requests: vec![request("signal:b1", Some(&wait_b), "done")] });
    assert!(matches!(reply, Ok(Reply::Delivered { accepted: true })), "{reply:?}");
    r2.run_to_idle();
    let result = root_result(&r2).expect("finished");
    assert_eq!(output_text(&result), r#"[{"payload":"yes"},{"payload":"answer-1","status":"succeeded"},{"payload":"done"}]"#);
    w.check(&r2);
    cuts.extend(acknowledged(&r2));

    // Engine ids are derived from (process, step, batch index) and from wait ids, which are
    // fresh for every Step: across every acknowledged head of both writers, an Engine id
    // only ever had one arrival, so none was admitted again after compaction dropped it.
    let mut seen: BTreeMap<SignalId, u64> = BTreeMap::new();
    for snap in &cuts {
        for rec in snap.root().mailbox.records().iter().filter(|r| r.id().is_engine_owned()) {
            let first = *seen.entry(rec.id().clone()).or_insert(rec.arrival());
            assert_eq!(first, rec.arrival(), "engine id {} admitted twice", rec.id());
        }
    }
    assert!(seen.len() >= 2, "openings and settlements were seen: {seen:?}");
    // Every admission counts (usage `accepted_signals`): the uncompacted twin admitted exactly
    // as many records, so no dropped Engine record came back.
    let twin = echo_world();
    let mut t = twin.start(&ops, Budget::unlimited());
    t.owner.set_compaction(false);
    t.run_to_idle();
    t.command(Command::Deliver { process: pid.clone(), requests: vec![answer.clone()] }).unwrap();
    t.run_to_idle();
    let wait_b = twin.head().root().current_wait_id.clone().unwrap();
    t.command(Command::Deliver { process: pid, requests: vec![request("signal:b1", Some(&wait_b), "done")] }).unwrap();
    t.run_to_idle();
    let (full, compacted) = (twin.head(), w.head());
    assert!(!full.root().mailbox.is_compacted());
    assert_eq!(full.root().mailbox.len(), compacted.root().mailbox.len());
    assert_eq!(full.root().usage(), compacted.root().usage());
    assert_eq!(full.root().committed_state, compacted.root().committed_state);
    assert!(compacted.root().mailbox.records().len() < full.root().mailbox.records().len());
}
