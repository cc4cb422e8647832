//! The working context through the real owner: contexts far beyond one payload, one segment
//! per appending Step, the context limit, and stored cuts whose segments were tampered with.

use super::*;
use crate::interaction::codes;
use crate::interaction::state::{ParentState, SealedMessages};
use crate::kernel::owner::{RestoreError, StartError};
use crate::kernel::segment::Segment;
use crate::kernel::snapshot::TreeSnapshot;
use crate::kernel::status::Status;
use crate::limits::MAX_PAYLOAD_BYTES;

/// `n` alternating user/assistant messages of about 200 bytes, ending with a user message.
fn messages(n: usize) -> Vec<Message> {
    (0..n)
        .map(|i| {
            let text = format!("message {i:05}: {}", "lorem ipsum dolor sit amet ".repeat(6));
            if (n - i) % 2 == 1 {
                Message::user(text)
            } else {
                Message::assistant(text)
            }
        })
        .collect()
}

fn input(messages: Vec<Message>) -> Payload {
    InteractionInput::new(messages).to_payload().unwrap()
}

/// Runs the first `k` dispatches of `r` (in order), completing each.
fn dispatch(r: &mut DirectRunner, k: usize) {
    for _ in 0..k {
        let mut pending = r.take_dispatches();
        assert_eq!(pending.len(), 1, "one model dispatch at a time");
        let (effect, outcome) = pending.remove(0).run(1);
        r.complete(effect, outcome);
    }
}

#[test]
fn a_context_of_more_than_4000_messages_of_200_bytes_runs_and_restores() {
    const N: usize = 5_000;
    let script = vec![with_finish(vec![call("c1", "weather", r#"{"city":"Os"#)], FinishReason::Length), answer("done")];
    let h = harness(script, |_| {});
    let start = input(messages(N));
    assert!(start.len() > MAX_PAYLOAD_BYTES, "the context is larger than one payload: {}", start.len());
    let mut r = h.start_input(start).expect("start");
    r.run_to_idle();
    let result = root_result(&r).expect("finished");
    assert_eq!(result.status(), Status::Completed, "{result:?}");
    h.check(&r);
    assert_eq!(h.model.request(0).messages.len(), N, "the model saw the whole context");
    assert_eq!(h.model.request(1).messages.len(), N + 2, "then the truncation feedback appended");
    let head = h.head();
    let state = &head.root().committed_state;
    // The payload holds only the small mutable state; the messages are two segments: the
    // start input and the one Step that appended.
    assert!(state.payload.len() < 4096, "payload of {} bytes", state.payload.len());
    assert_eq!(state.segments.len(), 2);
    assert!(state.byte_len() > MAX_PAYLOAD_BYTES);
    let parent = h.parent_state();
    assert_eq!(parent.working_context.len(), N + 2);
    assert_eq!(parent.working_context.to_messages()[..N], messages(N)[..]);
    // The head restores under a new writer, parsing the stored segments.
    let restored = h.restore(200);
    assert_eq!(root_result(&restored).map(|r| r.status()), Some(Status::Completed));
}

#[test]
fn each_appending_step_seals_exactly_what_it_appended() {
    let script = vec![
        with_finish(vec![call("c1", "weather", r#"{"city":"Os"#)], FinishReason::Length),
        with_finish(vec![call("c2", "weather", r#"{"city":"Os"#)], FinishReason::Length),
        answer("done"),
    ];
    let h = harness(script, |_| {});
    let (_r, result) = h.run("go");
    assert_eq!(result.status(), Status::Completed);
    let head = h.head();
    let segments = &head.root().committed_state.segments;
    assert_eq!(segments.len(), 3, "the start input, then one segment per truncation round");
    let sizes: Vec<usize> = segments.iter().map(|s| s.len()).collect();
    assert_eq!(sizes[1], sizes[2], "two rounds of the same shape seal the same number of bytes");
    let first = Segment::seal(&Json::Array(vec![Message::user("go").to_json()]));
    assert_eq!(segments[0].digest(), first.digest(), "the start input is one segment of its messages");
}

/// A head whose root holds a prepared candidate with two segments (a model call in flight
/// after one truncation round).
fn head_with_two_segments() -> (Harness, TreeSnapshot) {
    let script = vec![with_finish(vec![call("c1", "weather", r#"{"city":"Os"#)], FinishReason::Length), answer("done")];
    let h = harness(script, |_| {});
    let mut r = h.start("go");
    dispatch(&mut r, 1);
    let head = h.head();
    let prepared = head.root().prepared.as_ref().expect("the second model call is prepared");
    assert_eq!(prepared.candidate_state.segments.len(), 2);
    (h, head)
}

fn with_candidate_segments(head: &TreeSnapshot, edit: impl FnOnce(&mut Vec<Arc<Segment>>)) -> TreeSnapshot {
    let mut processes = head.processes().iter().map(|p| (**p).clone()).collect::<Vec<_>>();
    let root = processes.iter_mut().find(|p| p.id == head.root_id).unwrap();
    edit(&mut root.prepared.as_mut().unwrap().candidate_state.segments);
    TreeSnapshot::build(head.root_id.clone(), head.incarnation.clone(), head.limits, processes, head.residues().iter().map(|r| (**r).clone())).expect("structurally valid")
}

#[test]
fn a_stored_cut_with_lost_reordered_added_or_changed_segments_is_refused_on_restore() {
    let (h, head) = head_with_two_segments();
    let restore = |snapshot: &TreeSnapshot| {
        Owner::restore(h.resolver.clone(), h.parent.clone(), snapshot, IncarnationId::from_hex(&hex(300)).unwrap(), now())
    };
    // The untouched head, read back from its bytes, restores.
    assert!(restore(&TreeSnapshot::decode(head.bytes()).unwrap()).is_ok());
    let other = Segment::seal(&Json::Array(vec![Message::user("injected").to_json()]));
    let cases: Vec<(&str, TreeSnapshot)> = vec![
        ("lost", with_candidate_segments(&head, |s| drop(s.remove(1)))),
        ("reordered", with_candidate_segments(&head, |s| s.swap(0, 1))),
        ("added", with_candidate_segments(&head, |s| s.push(other.clone()))),
        ("changed", with_candidate_segments(&head, |s| s[1] = other.clone())),
    ];
    for (what, tampered) in cases {
        // Through the stored bytes: every segment is parsed afresh, nothing cached is trusted.
        let stored = TreeSnapshot::decode(tampered.bytes()).expect("the cut itself decodes");
        match restore(&stored) {
            Err(RestoreError::Unrestorable { failure, .. }) => {
                assert!(failure.message.as_str().contains("chain digest"), "{what}: {failure:?}")
            }
            Err(other) => panic!("{what}: {other:?}"),
            Ok(_) => panic!("{what}: a tampered cut restored"),
        }
    }
}

#[test]
fn restore_before_adopt_reuses_the_decoded_segments() {
    let (h, head) = head_with_two_segments();
    let candidate = &head.root().prepared.as_ref().unwrap().candidate_state;
    // A state read from storage has no decoded form: restore parses it once and remembers.
    assert!(candidate.segments.iter().all(|s| s.decoded::<SealedMessages>().is_none()));
    let first = h.definition.restore_state(candidate).unwrap();
    let cached: Vec<Arc<SealedMessages>> =
        candidate.segments.iter().map(|s| s.decoded::<SealedMessages>().expect("remembered")).collect();
    // The next restore of the same segments reuses those messages instead of parsing again.
    let again = h.definition.restore_state(candidate).unwrap();
    for (s, c) in candidate.segments.iter().zip(&cached) {
        assert!(Arc::ptr_eq(&s.decoded::<SealedMessages>().unwrap(), c));
    }
    assert_eq!(first, again);
    // Snapshot of the restored state is byte-identical and shares the segments.
    let snapshot = again.to_execution_state().unwrap();
    assert_eq!(&snapshot, candidate);
    assert!(snapshot.segments.iter().zip(&candidate.segments).all(|(a, b)| Arc::ptr_eq(a, b)));
}

#[test]
fn one_message_is_bounded_by_the_payload_limit_and_the_context_by_max_context_bytes() {
    // A single message above 1 MiB is refused however large the context may be.
    let huge = Message::user("x".repeat(MAX_PAYLOAD_BYTES + 1));
    assert!(InteractionInput::new(vec![huge]).to_payload().is_err());
    // Many messages together may exceed 1 MiB (each fits).
    let h = harness(vec![answer("done")], |_| {});
    let big = vec![Message::user("y".repeat(MAX_PAYLOAD_BYTES - 100)), Message::assistant("ok"), Message::user("z".repeat(MAX_PAYLOAD_BYTES - 100))];
    let mut r = h.start_input(input(big)).expect("a context above one payload starts");
    r.run_to_idle();
    assert_eq!(root_result(&r).unwrap().status(), Status::Completed);
    // The context limit: a start input above it is refused with the Interaction's code.
    let small = harness(vec![answer("done")], |c| c.max_context_bytes = 10_000);
    match small.start_input(input(messages(100))) {
        Err(StartError::Initialization(f)) => {
            assert!(f.is(codes::LIMIT_CONTEXT), "{f:?}");
            assert!(f.message.as_str().contains("max_context_bytes"), "the error says what to change: {f:?}");
        }
        Err(other) => panic!("{other:?}"),
        Ok(_) => panic!("a context above max_context_bytes started"),
    }
    // A configuration above the ceiling is refused.
    let mut config = base_config(&tool_set());
    config.max_context_bytes = crate::limits::MAX_CONTEXT_BYTES_CEILING + 1;
    assert!(Definition::new(config).is_err());
}

#[test]
fn a_context_that_outgrows_its_limit_fails_the_run_with_the_context_code() {
    let script = vec![with_finish(vec![call("c1", "weather", r#"{"city":"Os"#)], FinishReason::Length), answer("done")];
    let h = harness(script, |c| c.max_context_bytes = 200);
    let (_r, result) = h.run("go");
    assert_eq!(result.status(), Status::Failed);
    let f = failure_of(&result);
    assert!(f.is(codes::LIMIT_CONTEXT), "{f:?}");
    // The failed Step adopted nothing: the committed context is still the start input.
    let state: ParentState = h.parent_state();
    assert_eq!(state.working_context.len(), 1);
}
