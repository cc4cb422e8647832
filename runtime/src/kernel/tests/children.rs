//! Children: wait conditions and boundaries, and every definite start refusal (capability
//! escalation, budget, tree limits, unresolvable deployment) leaving the parent running.

use super::*;
use crate::kernel::child::{Boundary, Condition};
use crate::kernel::commit::CheckpointKind;
use crate::kernel::effect::EffectPhase;
use crate::kernel::owner::{Command, CommitRequest, Reply};
use crate::kernel::resource::{Allocation, Quota};
use crate::kernel::status::{Cause, Status};
use crate::kernel::testkit::ChildPlan;

fn waiting_child(w: &World, key: &str) -> ChildPlan {
    ChildPlan::new(key, w.deployment.reference(), vec![Op::Wait("go".into())], Budget::unlimited())
}

fn two_children(condition: Condition) -> (World, DirectRunner) {
    let w = echo_world();
    let op = Op::Children {
        children: vec![waiting_child(&w, "a"), waiting_child(&w, "b")],
        boundary: Boundary::SubtreeDrained,
        condition,
    };
    let mut r = w.start(&[op], Budget::unlimited());
    r.run_to_idle();
    let head = w.head();
    assert_eq!(head.processes().len(), 3);
    assert_eq!(head.root().status, Status::Waiting);
    (w, r)
}

#[test]
fn wait_any_is_satisfied_by_the_first_child_to_finish() {
    let (w, mut r) = two_children(Condition::Any);
    let head = w.head();
    let (a, b) = (child_by_key(&head, "a").id.clone(), child_by_key(&head, "b").id.clone());
    answer_current(&mut r, &head, &b, "signal:b", "b").unwrap();
    r.run_to_idle();
    let result = root_result(&r).expect("any: the parent continues after the first child");
    assert_eq!(result.status(), Status::Completed);
    assert_eq!(output_text(&result), r#"[{"child":"completed","key":"b"}]"#, "only the child at the boundary");
    // The kernel never cancels losers on its own; the parent's completion does.
    assert_eq!(result_for(&r, &a).unwrap().termination.cause, Cause::ParentCancellation);
    w.check(&r);
}

#[test]
fn wait_all_lists_every_child_in_request_order_not_finishing_order() {
    let (w, mut r) = two_children(Condition::All);
    let head = w.head();
    let (a, b) = (child_by_key(&head, "a").id.clone(), child_by_key(&head, "b").id.clone());
    answer_current(&mut r, &head, &b, "signal:b", "b").unwrap();
    r.run_to_idle();
    assert!(root_result(&r).is_none(), "all: one finished child is not enough");
    let mid = w.head();
    assert_eq!(mid.root().status, Status::Waiting);
    assert!(child_by_key(&mid, "b").is_terminal());
    answer_current(&mut r, &mid, &a, "signal:a", "a").unwrap();
    r.run_to_idle();
    let result = root_result(&r).expect("all children finished");
    assert_eq!(output_text(&result), r#"[{"child":"completed","key":"a"},{"child":"completed","key":"b"}]"#);
    w.check(&r);
}

/// A parent waiting under `boundary` on child `c`, whose own child `g` holds a running
/// dispatch when `c` is canceled.
fn grandchild_scenario(boundary: Boundary) {
    let w = echo_world();
    let d = w.deployment.reference().clone();
    let g = Op::Child { deployment: d.clone(), script: vec![Op::Dispatch(Json::str("g-work"))], key: "g".into(), budget: Budget::unlimited() };
    let op = Op::Children { children: vec![ChildPlan::new("c", &d, vec![g], Budget::unlimited())], boundary, condition: Condition::All };
    let mut r = w.start(&[op], Budget::unlimited());
    let mut held = r.take_dispatches();
    assert_eq!(held.len(), 1, "the grandchild's dispatch is in flight");
    let head = w.head();
    let (c, g) = (child_by_key(&head, "c").id.clone(), child_by_key(&head, "g").id.clone());
    assert!(matches!(r.command(Command::Cancel { process: c.clone(), reason: "enough".into() }), Ok(Reply::IntentRecorded)));
    assert!(held[0].cx.cancel.is_cancelled(), "the subtree's dispatch is asked to stop");
    assert_eq!(result_for(&r, &c).unwrap().termination.cause, Cause::HostCancellation);
    assert!(result_for(&r, &g).is_none(), "the grandchild still owns its dispatch");
    match boundary {
        Boundary::TerminalResult => {
            let result = root_result(&r).expect("terminal_result counts the child at once");
            assert_eq!(output_text(&result), r#"[{"child":"canceled","key":"c"}]"#);
        }
        Boundary::SubtreeDrained => {
            assert!(root_result(&r).is_none(), "subtree_drained waits for the grandchild");
            assert_eq!(w.head().root().status, Status::Waiting);
        }
    }
    let (effect, outcome) = held.pop().unwrap().run(1);
    r.complete(effect, outcome);
    r.run_to_idle();
    // The started external work still settles and is recorded before the grandchild ends.
    let end = w.head();
    let gp = end.process(&g).unwrap();
    assert_eq!(gp.status, Status::Canceled);
    assert!(matches!(gp.prepared.as_ref().unwrap().effects[0].phase, EffectPhase::Settled(_)));
    let result = root_result(&r).expect("parent finished");
    assert_eq!(output_text(&result), r#"[{"child":"canceled","key":"c"}]"#);
    assert_eq!(w.dispatches(), 1);
    w.check(&r);
}

#[test]
fn terminal_result_boundary_counts_a_child_before_its_subtree_drains() {
    grandchild_scenario(Boundary::TerminalResult);
}

#[test]
fn subtree_drained_boundary_waits_for_the_whole_subtree() {
    grandchild_scenario(Boundary::SubtreeDrained);
}

/// Runs a parent that starts `plans` then completes; returns the runner and the final head.
fn start_children(w: &World, plans: Vec<ChildPlan>, config: crate::kernel::owner::RootConfig) -> DirectRunner {
    let op = Op::Children { children: plans, boundary: Boundary::SubtreeDrained, condition: Condition::All };
    let mut r = w.start_with(&[op], config);
    r.run_to_idle();
    r
}

/// The child-start checkpoint cuts' view of the parent's start effects: (index, status).
fn start_settlements(r: &DirectRunner) -> Vec<(usize, crate::kernel::signal::SettlementStatus)> {
    let mut out = Vec::new();
    // Commits are deltas against the acknowledged head: resolve each acknowledged one in turn.
    let mut head: Option<crate::kernel::commit::TreeCut> = None;
    for (c, ok) in &r.commits {
        if !*ok {
            continue;
        }
        let whole = c.cut().resolve(head.as_ref()).unwrap();
        head = Some(whole.clone());
        let CommitRequest::Checkpoint(cp) = c else { continue };
        if cp.kind != CheckpointKind::ChildStart {
            continue;
        }
        let cut = TreeSnapshot::from_cut(&whole).unwrap();
        // A batch's last child start is committed with the parent's finalization: no batch.
        let Some(prepared) = cut.root().prepared.as_ref() else { continue };
        for (i, e) in prepared.effects.iter().enumerate() {
            if let EffectPhase::Settled(s) = &e.phase {
                if !out.iter().any(|(j, _)| *j == i) {
                    out.push((i, s.status));
                }
            }
        }
    }
    out
}

#[test]
fn capability_escalation_is_a_definite_failed_start_and_the_parent_continues() {
    use crate::kernel::signal::SettlementStatus::Failed;
    let w = echo_world();
    let mut greedy = ChildPlan::new("greedy", w.deployment.reference(), vec![Op::Checkpoint], Budget::unlimited());
    greedy.capabilities = CapabilitySet::from_names(&["net.fetch"]).unwrap();
    let modest = ChildPlan::new("modest", w.deployment.reference(), vec![Op::Checkpoint], Budget::unlimited());
    let r = start_children(&w, vec![greedy, modest], config(Budget::unlimited()));
    let result = root_result(&r).expect("parent finished");
    assert_eq!(result.status(), Status::Completed);
    assert_eq!(
        output_text(&result),
        r#"[{"child_start_failed":"engine.child.capability_escalation","key":"greedy"},{"child":"completed","key":"modest"}]"#
    );
    // The second start's checkpoint holds the parent's finalized batch (the start results are
    // consumed); its success is the output's `{"child":"completed"}` above.
    assert_eq!(start_settlements(&r), [(0, Failed)], "a definite failure, never unknown");
    let head = w.head();
    assert_eq!(head.processes().len(), 2, "the refused child never existed");
    w.check(&r);
}

#[test]
fn a_grant_the_finite_parent_cannot_afford_is_refused_without_a_debit() {
    let w = echo_world();
    let plans = vec![
        // The parent needs one Step of its own reserved: 10 of 10 does not fit.
        ChildPlan::new("whole", w.deployment.reference(), vec![Op::Checkpoint], Budget::finite(10, 0, 10)),
        ChildPlan::new("bigger", w.deployment.reference(), vec![Op::Checkpoint], Budget::finite(100, 0, 0)),
        ChildPlan::new("unlimited", w.deployment.reference(), vec![Op::Checkpoint], Budget::unlimited()),
    ];
    let r = start_children(&w, plans, config(Budget::finite(10, 10, 10)));
    let result = root_result(&r).expect("parent finished");
    assert_eq!(result.status(), Status::Completed, "{:?}", result.termination);
    let failed = r#"{"child_start_failed":"engine.child.budget_exhausted","key":"#;
    assert_eq!(output_text(&result), format!(r#"[{failed}"whole"}},{failed}"bigger"}},{failed}"unlimited"}}]"#));
    let head = w.head();
    assert_eq!(head.processes().len(), 1);
    assert_eq!(head.root().allocated, Allocation::ZERO, "refused grants leave no debit");
    w.check(&r);
}

#[test]
fn max_active_children_refuses_the_second_concurrent_child() {
    let w = echo_world();
    let limits = TreeLimits::default().with_max_active_children(1);
    let cfg = crate::kernel::owner::RootConfig { budget: Budget::unlimited(), capabilities: CapabilitySet::empty(), limits };
    let op = Op::Children { children: vec![waiting_child(&w, "a"), waiting_child(&w, "b")], boundary: Boundary::SubtreeDrained, condition: Condition::All };
    let mut r = w.start_with(&[op], cfg);
    r.run_to_idle();
    let head = w.head();
    assert_eq!(head.processes().len(), 2);
    let a = child_by_key(&head, "a").id.clone();
    answer_current(&mut r, &head, &a, "signal:a", "a").unwrap();
    r.run_to_idle();
    let result = root_result(&r).expect("parent finished");
    assert_eq!(
        output_text(&result),
        r#"[{"child_start_failed":"engine.child.tree_limit","key":"b"},{"child":"completed","key":"a"}]"#
    );
    w.check(&r);
}

#[test]
fn max_depth_refuses_a_grandchild_below_the_limit() {
    let w = echo_world();
    let d = w.deployment.reference().clone();
    let limits = TreeLimits::default().with_max_depth(1);
    let cfg = crate::kernel::owner::RootConfig { budget: Budget::unlimited(), capabilities: CapabilitySet::empty(), limits };
    let grandchild = Op::Child { deployment: d.clone(), script: vec![Op::Checkpoint], key: "g".into(), budget: Budget::unlimited() };
    let ops = [Op::Child { deployment: d, script: vec![grandchild], key: "c".into(), budget: Budget::unlimited() }];
    let mut r = w.start_with(&ops, cfg);
    r.run_to_idle();
    let head = w.head();
    // `c` ended before its parent consumed its Result, so it may be retired (a residue).
    assert!(head.processes().iter().all(|p| p.relation.depth < 2), "nothing at depth 2");
    assert_eq!(head.processes().len() + head.residues().len(), 2, "the root and c, nothing else");
    let c = match head.residues().iter().find(|c| c.child_key.as_str() == "c") {
        Some(retired) => retired.process_id.clone(),
        None => child_by_key(&head, "c").id.clone(),
    };
    assert_eq!(output_text(&result_for(&r, &c).unwrap()), r#"[{"child_start_failed":"engine.child.tree_limit"}]"#);
    assert_eq!(output_text(&root_result(&r).unwrap()), r#"[{"child":"completed"}]"#);
    w.check(&r);
}

#[test]
fn max_children_lifetime_quota_refuses_even_after_the_first_child_ended() {
    let w = echo_world();
    let d = w.deployment.reference().clone();
    let limits = TreeLimits::default().with_max_children(Quota::Finite(1));
    let cfg = crate::kernel::owner::RootConfig { budget: Budget::unlimited(), capabilities: CapabilitySet::empty(), limits };
    let child = |key: &str| Op::Child { deployment: d.clone(), script: vec![Op::Checkpoint], key: key.into(), budget: Budget::unlimited() };
    let mut r = w.start_with(&[child("one"), child("two")], cfg);
    r.run_to_idle();
    let result = root_result(&r).expect("parent finished");
    assert_eq!(output_text(&result), r#"[{"child":"completed"},{"child_start_failed":"engine.child.tree_limit"}]"#);
    w.check(&r);
}

#[test]
fn an_unresolvable_child_deployment_is_a_definite_failed_start() {
    let w = echo_world();
    let absent = script_deployment("keel.test.absent", None, vec![]);
    let plans = vec![ChildPlan::new("ghost", absent.reference(), vec![Op::Checkpoint], Budget::unlimited())];
    let r = start_children(&w, plans, config(Budget::unlimited()));
    let result = root_result(&r).expect("parent finished");
    assert_eq!(result.status(), Status::Completed);
    assert_eq!(output_text(&result), r#"[{"child_start_failed":"engine.child.deployment_unavailable","key":"ghost"}]"#);
    assert_eq!(w.head().processes().len(), 1);
    w.check(&r);
}

#[test]
fn canceling_only_a_child_hands_its_outcome_to_the_parent() {
    let w = echo_world();
    let d = w.deployment.reference().clone();
    let ops = [
        Op::Child { deployment: d, script: vec![Op::Wait("forever".into())], key: "c".into(), budget: Budget::unlimited() },
        Op::Dispatch(Json::str("after")),
    ];
    let mut r = w.start(&ops, Budget::unlimited());
    r.run_to_idle();
    let head = w.head();
    let c = child_by_key(&head, "c").id.clone();
    assert!(matches!(r.command(Command::Cancel { process: c.clone(), reason: "not needed".into() }), Ok(Reply::IntentRecorded)));
    r.run_to_idle();
    let child = result_for(&r, &c).expect("child ended");
    assert_eq!(child.termination.cause, Cause::HostCancellation);
    assert_eq!(child.termination.reason, "not needed");
    let result = root_result(&r).expect("the parent decides and continues");
    assert_eq!(result.termination.cause, Cause::Completion);
    assert_eq!(output_text(&result), r#"[{"child":"canceled"},{"payload":"answer-1","status":"succeeded"}]"#);
    w.check(&r);
}
