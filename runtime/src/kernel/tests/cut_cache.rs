//! The owner's cut cache: an idle owner builds no cut, and every committed cut equals a fresh
//! full encoding of the in-memory records (the `DirectRunner` asserts the latter on every
//! commit of every kernel test; these tests pin it on runs that touch every kind of record).

use super::*;
use crate::kernel::child::{Boundary, Condition};
use crate::kernel::owner::{Command, CommandError, Reply};
use crate::kernel::testkit::ChildPlan;

#[test]
fn an_idle_owner_builds_no_cut() {
    let w = echo_world();
    let mut r = w.start(&[Op::Wait("k".into())], Budget::unlimited());
    r.run_to_idle();
    let builds = r.owner.cut_builds();
    let head = r.owner.head().cloned().expect("a head");
    // Capture with nothing changed replies with the head and assembles nothing.
    let Ok(Reply::Captured(captured)) = r.command(Command::Capture) else { panic!("capture") };
    assert_eq!(captured.digest(), head.digest());
    // A refused command changes nothing and builds nothing.
    let absent = ProcessId::root_from_hex(&hex(9)).unwrap();
    let refused = r.command(Command::Cancel { process: absent, reason: "x".into() });
    assert!(matches!(refused, Err(CommandError::NotFound(_))), "{refused:?}");
    r.run_to_idle();
    assert_eq!(r.owner.cut_builds(), builds, "an idle owner assembled a cut");
}

#[test]
fn an_owner_waiting_on_a_dispatch_builds_no_cut() {
    let w = echo_world();
    let mut r = w.start(&[Op::Dispatch(Json::str("x"))], Budget::unlimited());
    let dispatches = r.take_dispatches();
    assert_eq!(dispatches.len(), 1);
    assert_eq!(r.owner.jobs_in_flight(), 1);
    let builds = r.owner.cut_builds();
    let Ok(Reply::Captured(_)) = r.command(Command::Capture) else { panic!("capture") };
    assert_eq!(r.owner.cut_builds(), builds, "a capture while a job runs assembled a cut");
    // The settlement changes a record: exactly the commits that follow build cuts.
    let commits = r.commits.len();
    for d in dispatches {
        let (effect, outcome) = d.run(1);
        r.complete(effect, outcome);
    }
    r.run_to_idle();
    let new_commits = (r.commits.len() - commits) as u64;
    assert!(new_commits > 0);
    assert_eq!(r.owner.cut_builds() - builds, new_commits, "one cut build per commit");
    w.check(&r);
}

#[test]
fn cached_cuts_equal_fresh_builds_across_children_signals_and_restore() {
    let w = echo_world();
    let d = w.deployment.reference().clone();
    let child = |key: &str| ChildPlan::new(key, &d, vec![Op::Dispatch(Json::str(key)), Op::Wait("go".into())], Budget::unlimited());
    let op = Op::Children { children: vec![child("a"), child("b")], boundary: Boundary::SubtreeDrained, condition: Condition::All };
    let mut r = w.start(&[Op::Dispatch(Json::str("first")), op, Op::Checkpoint], Budget::unlimited());
    r.run_to_idle();
    // Restore mid-run (records arrive with their bytes), then answer both children.
    let mut r = w.restore(101);
    r.run_to_idle();
    let head = w.head();
    for p in head.processes().iter().filter(|p| p.current_wait_id.is_some() && p.relation.child_key.is_some()) {
        let wait = p.current_wait_id.clone().unwrap();
        let id = format!("signal:go-{}", p.relation.child_key.as_ref().map(|k| k.as_str().to_owned()).unwrap_or_default());
        let reply = r.command(Command::Deliver { process: p.id.clone(), requests: vec![request(&id, Some(&wait), "yes")] });
        assert!(reply.is_ok(), "{reply:?}");
        r.run_to_idle();
    }
    assert!(root_result(&r).is_some(), "the tree finished");
    let fresh = r.owner.fresh_cut().expect("fresh cut");
    assert_eq!(fresh.bytes(), r.owner.head().unwrap().bytes());
    // Each record's spliced encoding is the encoding of its JSON tree.
    for (p, e) in fresh.processes().iter().zip(fresh.encoded()) {
        use crate::json::ToJson;
        assert_eq!(e.bytes(), p.to_json().to_canonical_bytes().as_slice());
        assert_eq!(e.digest(), crate::json::Digest::of_json(&p.to_json()));
    }
    w.check(&r);
}

/// Cuts share Process records instead of copying them: a record no commit touched is the same
/// allocation in consecutive heads, and the oracle's decode of the next head reuses the
/// previous head's record for each byte-identical one.
#[test]
fn consecutive_cuts_share_unchanged_process_records() {
    let w = echo_world();
    let d = w.deployment.reference().clone();
    let child = |key: &str| ChildPlan::new(key, &d, vec![Op::Wait("go".into())], Budget::unlimited());
    let op = Op::Children { children: vec![child("a"), child("b")], boundary: Boundary::SubtreeDrained, condition: Condition::All };
    let mut r = w.start(&[op], Budget::unlimited());
    r.run_to_idle();
    let before = r.owner.head().cloned().expect("a head");
    let a = child_by_key(&before, "a").clone();
    let wait = a.current_wait_id.clone().expect("child a waits");
    let reply = r.command(Command::Deliver { process: a.id.clone(), requests: vec![request("signal:go-a", Some(&wait), "yes")] });
    assert!(reply.is_ok(), "{reply:?}");
    r.run_to_idle();
    let after = r.owner.head().cloned().expect("a head");
    assert_ne!(before.digest(), after.digest(), "the answer was committed");
    let b = |s: &TreeSnapshot| s.processes().iter().find(|p| p.relation.child_key.as_ref().is_some_and(|k| k.as_str() == "b")).cloned().expect("child b");
    assert!(std::sync::Arc::ptr_eq(&b(&before), &b(&after)), "the untouched child's record was copied");
    // The reader's decode against the previous head takes the untouched record from it.
    let decoded = TreeSnapshot::decode_reusing(after.tree_cut(), Some(&before)).expect("decodes");
    assert_eq!(decoded.digest(), after.digest());
    assert!(std::sync::Arc::ptr_eq(&b(&before), &b(&decoded)), "decode_reusing copied an identical record");
    w.check(&r);
}
