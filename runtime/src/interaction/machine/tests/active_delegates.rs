//! `active_delegate_children` over real parent Processes.

use super::*;
use crate::interaction::active_delegates::{
    active_delegate_children, active_delegate_children_from_snapshot, active_delegate_children_in,
};
use crate::interaction::error::ErrorKind;
use crate::interaction::ids::delegate_child_key;
use crate::interaction::state::ParentState;
use crate::kernel::process::Process;
use crate::kernel::snapshot::TreeSnapshot;

fn with_upper(responses: Vec<Response>) -> Harness {
    let upper = upper_deployment(b"upper");
    let u = upper.clone();
    harness_with(responses, move |c| c.delegates = vec![delegate("upper", &u)], move |set| set.insert(upper))
}

fn head(h: &Harness, r: &DirectRunner) -> TreeSnapshot {
    let head = futures::executor::block_on(h.committer.load_tree(r.owner.root_id())).unwrap().unwrap();
    TreeSnapshot::from_cut(&head.cut).unwrap()
}

fn root(snapshot: &TreeSnapshot) -> Process {
    snapshot.processes().iter().find(|p| p.relation.child_key.is_none()).map(|p| (**p).clone()).unwrap()
}

/// [tool, delegate (waits), delegate (bad arguments, never started), delegate (waits)],
/// parked while both started delegates wait.
fn running_delegates() -> (Harness, DirectRunner, Vec<ToolCall>) {
    let calls = vec![
        call("w", "weather", "{}"),
        call("u1", "upper", r#"{"text":"wait"}"#),
        call("u2", "upper", "{not json"),
        call("u3", "upper", r#"{"text":"wait"}"#),
    ];
    let h = with_upper(vec![calls_response(calls.clone()), answer("done")]);
    let mut r = h.start("go");
    r.run_to_idle();
    assert!(root_result(&r).is_none(), "the parent waits for its delegates");
    (h, r, calls)
}

#[test]
fn running_delegates_come_back_in_call_order_with_absolute_indices_and_valid_keys() {
    let (h, r, calls) = running_delegates();
    let snapshot = head(&h, &r);
    let children = active_delegate_children(&root(&snapshot)).unwrap().expect("an active delegate batch");
    assert_eq!(children.len(), 2, "the call that never started has no child");
    for (child, index) in children.iter().zip([1u32, 3]) {
        let call = &calls[index as usize];
        assert_eq!(child.model_call_sequence(), 1);
        assert_eq!(child.tool_call_index(), index);
        assert_eq!(child.tool_call(), call);
        assert_eq!(*child.child_key(), delegate_child_key(1, call).unwrap());
        assert!(child.is_valid());
        let process = snapshot.process(child.process_id()).expect("the child exists");
        assert_eq!(process.relation.child_key.as_ref(), Some(child.child_key()));
    }
    assert_ne!(children[0].process_id(), children[1].process_id());
}

#[test]
fn a_non_interaction_process_is_not_found() {
    let (h, r, _) = running_delegates();
    let snapshot = head(&h, &r);
    let child = snapshot.processes().iter().find(|p| p.relation.child_key.is_some()).unwrap();
    assert_eq!(child.committed_state.kind.as_str(), "test.upper");
    assert_eq!(active_delegate_children(child).unwrap(), None);
}

#[test]
fn a_tool_batch_and_a_tool_child_are_not_found() {
    let h = harness(vec![calls_response(vec![call("a1", "ask", "{}")]), answer("done")], |_| {});
    let mut r = h.start("go");
    r.run_to_idle();
    assert!(root_result(&r).is_none(), "the tool child waits for input");
    let snapshot = head(&h, &r);
    let parent = root(&snapshot);
    let state = ParentState::from_execution_state(&parent.committed_state).unwrap();
    assert!(state.tool_round.as_ref().and_then(|t| t.child_batch.as_ref()).is_some(), "a tool batch is active");
    assert_eq!(active_delegate_children(&parent).unwrap(), None);
    let tool_child = snapshot.processes().iter().find(|p| p.relation.child_key.is_some()).unwrap();
    assert_eq!(tool_child.committed_state.kind.as_str(), "interaction.tool_call");
    assert_eq!(active_delegate_children(tool_child).unwrap(), None);
}

#[test]
fn a_parent_without_a_round_is_not_found() {
    let h = with_upper(vec![answer("done")]);
    let (r, result) = h.run("go");
    assert_eq!(result.status(), crate::kernel::status::Status::Completed);
    assert_eq!(active_delegate_children(&root(&head(&h, &r))).unwrap(), None);
}

#[test]
fn a_corrupted_parent_state_is_an_error() {
    let (h, r, _) = running_delegates();
    let parent = root(&head(&h, &r));
    // Structurally invalid: waiting_children without its wait id.
    let mut state = ParentState::from_execution_state(&parent.committed_state).unwrap();
    state.tool_round.as_mut().unwrap().child_batch.as_mut().unwrap().wait_id = None;
    let mut broken = parent.clone();
    broken.committed_state.payload = Payload::from_json(state.to_json()).unwrap();
    let err = active_delegate_children(&broken).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidExecutionState);
    // Not decodable at all.
    let mut garbage = parent.clone();
    garbage.committed_state.payload = Payload::from_json(Json::str("nope")).unwrap();
    assert_eq!(active_delegate_children(&garbage).unwrap_err().kind(), ErrorKind::InvalidExecutionState);
}

#[test]
fn the_snapshot_entry_points_agree_with_the_process_one() {
    let (h, r, calls) = running_delegates();
    let snapshot = head(&h, &r);
    let parent = root(&snapshot);
    let direct = active_delegate_children(&parent).unwrap();
    assert_eq!(active_delegate_children_in(&snapshot, &parent.id).unwrap(), direct);
    let from_bytes = active_delegate_children_from_snapshot(snapshot.bytes(), &parent.id).unwrap().expect("found");
    assert_eq!(Some(from_bytes.clone()), direct);
    let ids: Vec<&str> = from_bytes.iter().map(|c| c.tool_call().id.as_str()).collect();
    assert_eq!(ids, [calls[1].id.as_str(), calls[3].id.as_str()]);
    // A child Process of the same tree is not an Interaction parent: found = false.
    let child = from_bytes[0].process_id().clone();
    assert_eq!(active_delegate_children_from_snapshot(snapshot.bytes(), &child).unwrap(), None);
}

#[test]
fn an_invalid_snapshot_or_a_missing_process_is_an_error() {
    let (h, r, _) = running_delegates();
    let snapshot = head(&h, &r);
    let parent = root(&snapshot).id;
    let bytes = snapshot.bytes().to_vec();
    // Not JSON; not canonical (a trailing space); cut short.
    let mut spaced = bytes.clone();
    spaced.push(b' ');
    for bad in [b"nope".to_vec(), spaced, bytes[..bytes.len() / 2].to_vec()] {
        let err = active_delegate_children_from_snapshot(&bad, &parent).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidExecutionState, "{err}");
        assert!(err.to_string().contains("invalid tree snapshot"), "{err}");
    }
    let stranger = ProcessId::root_from_hex(&hex(999)).unwrap();
    let err = active_delegate_children_from_snapshot(&bytes, &stranger).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidExecutionState, "{err}");
    assert_eq!(active_delegate_children_in(&snapshot, &stranger).unwrap_err().kind(), ErrorKind::InvalidExecutionState);
}
