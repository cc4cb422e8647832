//! Delegate batches wait for every child: condition `all`, one
//! satisfaction whose outcome count equals the waited children, results in call order.

use super::*;
use crate::kernel::ids::WaitId;
use crate::kernel::owner::Command;
use crate::kernel::signal::SignalRequest;
use crate::kernel::status::Status;

fn harness_upper(responses: Vec<Response>) -> Harness {
    let upper = upper_deployment(b"upper");
    let u = upper.clone();
    harness_with(responses, move |c| c.delegates = vec![delegate("upper", &u)], move |set| set.insert(upper))
}

#[test]
fn a_delegate_batch_settles_every_waited_child_at_once_in_call_order() {
    let calls = vec![
        call("d1", "upper", r#"{"text":"wait"}"#),
        call("d2", "upper", r#"{"text":"fast"}"#),
        call("d3", "upper", r#"{"text":"fail"}"#),
    ];
    let h = harness_upper(vec![calls_response(calls), answer("done")]);
    let mut r = h.start("go");
    r.run_to_idle();
    assert!(root_result(&r).is_none());
    assert_eq!(h.model.calls(), 1);
    // d2 and d3 are finished, but nothing is settled in the batch until d1 is.
    let state = h.parent_state();
    assert_eq!(state.phase, crate::interaction::state::Phase::WaitingChildren);
    let batch = state.tool_round.unwrap().child_batch.unwrap();
    assert_eq!(batch.active_children().len(), 3, "all three are waited for");
    assert!(batch.invocations.iter().all(|i| i.result.is_none()));
    let head = h.head();
    let finished = head.processes().iter().filter(|p| p.is_terminal()).count();
    assert_eq!(finished, 2, "d2 completed, d3 failed");
    let waiting = head.processes().iter().find(|p| p.current_wait_id.is_some() && !p.relation.is_root()).unwrap();
    let wait: WaitId = waiting.current_wait_id.clone().unwrap();
    let answer = SignalRequest::new(
        SignalId::external("go-ahead").unwrap(),
        Some(wait),
        Payload::from_json(Json::str("slow")).unwrap(),
    )
    .unwrap();
    r.command(Command::Deliver { process: waiting.id.clone(), requests: vec![answer] }).unwrap();
    r.run_to_idle();
    h.check(&r);
    assert_eq!(root_result(&r).unwrap().status(), Status::Completed);
    let results = results_at(&h.model.request(1), 2);
    let ids: Vec<&str> = results.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["d1", "d2", "d3"]);
    let details = |i: usize| results[i].output.details.as_ref().map(Json::to_canonical_string);
    assert_eq!(details(0).as_deref(), Some(r#"{"value":"SLOW"}"#));
    assert_eq!(details(1).as_deref(), Some(r#"{"value":"FAST"}"#));
    assert!(results[2].is_error);
    // One satisfaction settled all three (a short one would be a step error, see
    // direct.rs): the parent stepped exactly model, starts, wait-open, parked, settle.
    assert_eq!(*h.model.steps.lock().unwrap(), vec![1, 5]);
}

#[test]
fn a_delegate_run_ignores_the_tool_concurrency_limit() {
    let upper = upper_deployment(b"upper");
    let u = upper.clone();
    let calls: Vec<ToolCall> = (1..=3).map(|n| call(&format!("d{n}"), "upper", r#"{"text":"wait"}"#)).collect();
    let h = harness_with(
        vec![calls_response(calls), answer("done")],
        move |c| {
            c.delegates = vec![delegate("upper", &u)];
            c.max_concurrent_tool_calls = 1;
        },
        move |set| set.insert(upper),
    );
    let mut r = h.start("go");
    r.run_to_idle();
    let head = h.head();
    let parked = head.processes().iter().filter(|p| !p.relation.is_root() && p.current_wait_id.is_some()).count();
    assert_eq!(parked, 3, "all three delegate children run at once under a tool limit of 1");
    assert_eq!(h.parent_state().tool_round.unwrap().child_batch.unwrap().active_children().len(), 3);
}
