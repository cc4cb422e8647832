//! One rich run (steer during an input wait, an advertisement, a delegate, a restore in the
//! middle) and, at every acknowledged commit, snapshot → restore → snapshot byte-stability of
//! the cut and of every Process's committed and candidate state.

use super::*;
use crate::interaction::pending_inputs::pending_tool_inputs;
use crate::interaction::signals::steer_signal;
use crate::kernel::binding::DeploymentResolver;
use crate::kernel::owner::Command;
use crate::kernel::snapshot::TreeSnapshot;
use crate::kernel::status::Status;

fn rich_harness() -> Harness {
    let upper = upper_deployment(b"upper");
    let u = upper.clone();
    harness_with(
        vec![
            calls_response(vec![call("c1", "secret", "{}"), call("a2", "ask", "{}")]),
            calls_response(vec![call("d1", "upper", r#"{"text":"hi"}"#), call("w2", "hidden", "{}")]),
            answer("done"),
        ],
        move |c| c.delegates = vec![delegate("upper", &u)],
        move |set| set.insert(upper),
    )
}

/// The same state, restored by its Definition and snapshotted again, is byte-identical.
fn assert_state_round_trips(h: &Harness, process: &crate::kernel::process::Process, state: &ExecutionState, at: usize) {
    let deployment = h.resolver.resolve(&process.deployment_ref).expect("resolvable");
    let cx = StepContext { cancel: crate::env::CancelToken::new() };
    let restored = deployment.definition().restore(&cx, state).unwrap_or_else(|e| panic!("commit {at}: {e}"));
    let again = restored.snapshot().unwrap();
    assert_eq!(again.kind, state.kind, "commit {at}");
    assert_eq!(again.payload.canonical(), state.payload.canonical(), "commit {at}: {}", process.id);
}

fn assert_cuts_round_trip(h: &Harness, r: &DirectRunner, seen: &mut usize) {
    for cut in r.acknowledged_cuts() {
        *seen += 1;
        let bytes = cut.bytes().unwrap();
        let snapshot = TreeSnapshot::decode(&bytes).unwrap();
        assert_eq!(*snapshot.bytes(), bytes, "commit {seen}: the cut re-encodes byte-identically");
        for p in snapshot.processes() {
            assert_state_round_trips(h, p, &p.committed_state, *seen);
            if let Some(prepared) = &p.prepared {
                assert_state_round_trips(h, p, &prepared.candidate_state, *seen);
            }
        }
        // The whole tree restores from every acknowledged cut.
        let owner = Owner::restore(h.resolver.clone(), h.parent.clone(), &snapshot, IncarnationId::from_hex(&hex(999)).unwrap(), now());
        assert!(owner.is_ok(), "commit {seen}: {:?}", owner.err());
    }
}

#[test]
fn every_acknowledged_cut_of_a_rich_run_round_trips_byte_identically() {
    let h = rich_harness();
    let mut r = h.start("go");
    run_held(&mut r, 1);
    r.run_to_idle();
    assert!(root_result(&r).is_none(), "a2 waits for input");
    let steer = steer_signal(SignalId::parse("signal:steer").unwrap(), vec![Message::user("hurry")]).unwrap();
    r.command(Command::Deliver { process: r.owner.root_id().clone(), requests: vec![steer] }).unwrap();
    let mut seen = 0;
    assert_cuts_round_trip(&h, &r, &mut seen);
    // A new writer takes over in the middle of the wait.
    let mut r2 = h.restore(200);
    let pending = pending_tool_inputs(&h.head()).unwrap();
    assert_eq!(pending.len(), 1);
    let answer = pending[0].response_signal(SignalId::parse("signal:answer").unwrap(), &Json::str("teal")).unwrap();
    r2.command(Command::Deliver { process: pending[0].process_id().clone(), requests: vec![answer] }).unwrap();
    r2.run_to_idle();
    h.check(&r2);
    let result = root_result(&r2).expect("finished");
    assert_eq!(result.status(), Status::Completed);
    assert_eq!(h.model.calls(), 3);
    // The steer came after the first round; the advertised tool ran in the second.
    let second: Vec<String> = h.model.request(1).messages.iter().map(Message::text).collect();
    assert_eq!(second.last().unwrap(), "hurry");
    let results = results_at(&h.model.request(2), 5);
    assert_eq!(results.len(), 2);
    assert_eq!(results[0].output.details.as_ref().map(Json::to_canonical_string).as_deref(), Some(r#"{"value":"HI"}"#));
    assert_cuts_round_trip(&h, &r2, &mut seen);
    assert!(seen > 20, "a rich run: {seen} acknowledged commits");
}

#[test]
fn finished_trees_restore_to_the_same_result_without_any_model_call() {
    let weather = || calls_response(vec![call("c1", "weather", "{}")]);
    let cases = [
        (vec![weather(), answer("done")], Status::Completed),
        (vec![with_finish(vec![call("c1", "weather", "{}")], FinishReason::Refusal)], Status::Failed),
        (vec![weather()], Status::Failed),
    ];
    for (n, (script, status)) in cases.into_iter().enumerate() {
        // Streaming for the completed case: a restore must not replay a call (or its deltas).
        let streaming = status == Status::Completed;
        let h = harness_full(tool_set(), script, |c| c.max_model_calls = 1 + u32::from(streaming), |_| {}, move |m| {
            if streaming {
                DispatcherConfig::stream(Arc::new(super::streaming::Chunked(m)))
            } else {
                DispatcherConfig::complete(m)
            }
        });
        let (_r, result) = h.run("go");
        assert_eq!(result.status(), status, "case {n}");
        let calls = h.model.calls();
        // The failed parent's last committed state is still a valid, restorable state.
        let state = h.parent_state();
        let mut r = h.restore(500 + n as u64);
        r.run_to_idle();
        h.check(&r);
        assert_eq!(h.model.calls(), calls, "case {n}: nothing is called again");
        assert_eq!(h.parent_state(), state, "case {n}");
        let again = root_result(&r).expect("a restored finished root publishes its Result");
        assert_eq!(again, result, "case {n}: the same Result, byte for byte");
        if let Some(output) = &again.output {
            assert_eq!(output.canonical(), result.output.as_ref().unwrap().canonical());
        }
    }
}

/// A snapshot carries the state it encoded ([`crate::interaction::machine::Snapshotted`]); the
/// restore that follows reuses it only under the same rules and with the very segments the
/// state names. Anything else (bytes read back, other rules, other or re-read segments, another
/// kind) is decoded and validated strictly, and gives the same state.
#[test]
fn a_snapshot_restores_without_decoding_only_with_its_own_rules_and_segments() {
    use crate::interaction::machine::Snapshotted;
    use crate::kernel::segment::Segment;
    use crate::kernel::waist::Definition as _;
    let h = harness(vec![answer("done")], |_| {});
    let cx = StepContext { cancel: crate::env::CancelToken::new() };
    let started = h.definition.start(&user_input("go")).unwrap();
    let state = started.snapshot().unwrap();
    let rules = h.definition.rules();
    let reused = Snapshotted::reusable(&state, rules).expect("its own snapshot is reusable");
    assert_eq!(*reused, h.definition.restore_state(&state).unwrap(), "the attached state is the strict decoding");
    let canonical = |e: &dyn crate::kernel::waist::Execution| e.snapshot().unwrap().payload.canonical().to_owned();
    let expected = canonical(h.definition.restore(&cx, &state).unwrap().as_ref());
    assert_eq!(expected, state.payload.canonical());

    // The same bytes read back (no attached state): strict, and the same state.
    let read = ExecutionState {
        kind: state.kind.clone(),
        payload: Payload::from_bytes(state.payload.canonical().as_bytes()).unwrap(),
        segments: state.segments.iter().map(|s| Segment::from_canonical(s.text().to_owned())).collect(),
    };
    assert!(Snapshotted::reusable(&read, rules).is_none());
    assert_eq!(canonical(h.definition.restore(&cx, &read).unwrap().as_ref()), expected);
    // Re-read segments under the attached payload: not the state's own segments, so strict.
    let reread = ExecutionState { segments: read.segments.clone(), ..state.clone() };
    assert!(Snapshotted::reusable(&reread, rules).is_none());
    assert_eq!(canonical(h.definition.restore(&cx, &reread).unwrap().as_ref()), expected);
    // Another Definition of the same configuration: other rules, so strict.
    let other = Definition::new(base_config(&tool_set())).unwrap();
    assert!(Snapshotted::reusable(&state, other.rules()).is_none());
    assert_eq!(canonical(other.restore(&cx, &state).unwrap().as_ref()), expected);
    // Lost segments or another kind under the attached payload are refused, as for any state.
    let lost = ExecutionState { segments: Vec::new(), ..state.clone() };
    assert!(Snapshotted::reusable(&lost, rules).is_none());
    assert!(h.definition.restore(&cx, &lost).is_err(), "the segments do not match the chain digest");
    let kind = ExecutionState { kind: crate::text::QualifiedName::parse("interaction.tool_call").unwrap(), ..state.clone() };
    assert!(Snapshotted::reusable(&kind, rules).is_none());
    assert!(h.definition.restore(&cx, &kind).is_err());
}
