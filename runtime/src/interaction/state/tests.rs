//! State tests: codecs, byte-stable restore, every structural restore rule, the
//! configuration rules through a table-driven [`StateRules`], and the tool child's phase table.

use super::*;
use crate::chat::{FinishReason, Message, ToolCall, ToolDefinition, ToolOutput, ToolResult, Usage};
use crate::interaction::artifact::Artifact;
use crate::interaction::error::{ErrorKind, InteractionError};
use crate::interaction::ids::{delegate_child_key, tool_child_key};
use crate::interaction::output::Output;
use crate::interaction::protocol::{InteractionInput, SettledToolResult, ToolCallInput, ToolCheckpoint};
use crate::interaction::signals::SteerSignal;
use crate::interaction::testutil::*;
use crate::interaction::wire::Wire;
use crate::json::codec::DecodeErrorKind;
use crate::json::{Json, Payload};
use crate::kernel::ids::ChildKey;
use crate::kernel::waist::ExecutionState;
use crate::schema::Schema;
use crate::text::QualifiedName;
use proptest::prelude::*;

// ---------------------------------------------------------------- fixtures

const SEQ: u32 = 1;

fn tkey(id: &str) -> ChildKey {
    tool_child_key(SEQ, id).unwrap()
}
fn dkey(c: &ToolCall) -> ChildKey {
    delegate_child_key(SEQ, c).unwrap()
}
fn keyed(key: ChildKey) -> BatchInvocation {
    BatchInvocation { child_key: Some(key), ..BatchInvocation::default() }
}
fn started(key: ChildKey, process: &str) -> BatchInvocation {
    BatchInvocation { child_key: Some(key), process_id: Some(pid(process)), ..BatchInvocation::default() }
}
fn settled(id: &str, name: &str) -> SettledToolResult {
    SettledToolResult::new(ok_result(id, name, "r"), false)
}
fn delegate_output() -> Json {
    json(r#"{"value":"FIRST"}"#)
}
fn delegate_result(id: &str) -> ToolResult {
    ToolResult::ok(id, "research", ToolOutput { content: String::new(), details: Some(delegate_output()) })
}
fn artifact(seq: u32, index: u32, id: &str) -> Artifact {
    Artifact::new(seq, index, id, "research", Payload::from_json(delegate_output()).unwrap()).unwrap()
}

fn base(phase: Phase) -> ParentState {
    ParentState {
        phase,
        model_call_count: SEQ,
        ..ParentState::start(&InteractionInput { messages: context().messages, options: Default::default(), lineage: None, budget: None, started_ms: None, deadline_ms: None })
    }
}

fn ready() -> ParentState {
    ParentState { model_call_count: 0, ..base(Phase::ReadyModel) }
}

fn awaiting_model() -> ParentState {
    ParentState {
        advertised_tool_names: vec!["search_archive".into()],
        usage: Usage::new(7, 3),
        ..base(Phase::AwaitingModel)
    }
}

fn weather_calls() -> Vec<ToolCall> {
    vec![call("c1", "weather"), call("c2", "weather"), call("c3", "weather")]
}

/// Three tool calls in one window; two planned, none started.
fn tool_starts() -> ParentState {
    ParentState {
        tool_round: Some(ToolRound {
            child_batch: Some(ChildBatch {
                kind: BatchKind::Tool,
                invocations: vec![keyed(tkey("c1")), keyed(tkey("c2")), BatchInvocation::default()],
                next_start_index: 2,
                wait_id: None,
            }),
            ..ToolRound::new(tool_calls_response(weather_calls()))
        }),
        pending_steer: Some(PendingSteer { messages: vec![Message::user("hurry")], signal_ids: vec![sid("s1")] }),
        ..base(Phase::AwaitingChildStarts)
    }
}

/// The same window: c1 settled, c2 and c3 running, parked on the wait.
fn tool_waiting() -> ParentState {
    let mut s = tool_starts();
    s.phase = Phase::WaitingChildren;
    let batch = s.tool_round.as_mut().unwrap().child_batch.as_mut().unwrap();
    batch.invocations = vec![
        BatchInvocation { result: Some(settled("c1", "weather")), ..started(tkey("c1"), "process:p1") },
        started(tkey("c2"), "process:p2"),
        started(tkey("c3"), "process:p3"),
    ];
    batch.next_start_index = 3;
    batch.wait_id = Some(wid("wait:w1"));
    s
}

fn tool_wait_open() -> ParentState {
    let mut s = tool_waiting();
    s.phase = Phase::AwaitingChildWaitOpen;
    s.tool_round.as_mut().unwrap().child_batch.as_mut().unwrap().wait_id = None;
    s
}

fn mixed_calls() -> Vec<ToolCall> {
    vec![call("t1", "weather"), call("d1", "research"), call("d2", "research")]
}

/// [tool, delegate, delegate]: the tool settled; d1 planned, d2 rejected before starting.
fn delegate_starts() -> ParentState {
    let calls = mixed_calls();
    ParentState {
        tool_round: Some(ToolRound {
            response: tool_calls_response(calls.clone()),
            results: vec![ok_result("t1", "weather", "18C")],
            direct_result_eligible: false,
            child_batch: Some(ChildBatch {
                kind: BatchKind::Delegate,
                invocations: vec![
                    keyed(dkey(&calls[1])),
                    BatchInvocation {
                        result: Some(SettledToolResult::new(ToolResult::error("d2", "research", "error: bad"), false)),
                        ..BatchInvocation::default()
                    },
                ],
                next_start_index: 2,
                wait_id: None,
            }),
        }),
        ..base(Phase::AwaitingChildStarts)
    }
}

fn delegate_waiting() -> ParentState {
    let mut s = delegate_starts();
    s.phase = Phase::WaitingChildren;
    let batch = s.tool_round.as_mut().unwrap().child_batch.as_mut().unwrap();
    batch.invocations[0].process_id = Some(pid("process:d1"));
    batch.wait_id = Some(wid("wait:w2"));
    s
}

/// [delegate, tool, tool]: the delegate completed (artifact recorded), the tools run.
fn artifact_round() -> ParentState {
    let calls = vec![call("d1", "research"), call("t1", "weather"), call("t2", "weather")];
    ParentState {
        tool_round: Some(ToolRound {
            response: tool_calls_response(calls),
            results: vec![delegate_result("d1")],
            direct_result_eligible: false,
            child_batch: Some(ChildBatch {
                kind: BatchKind::Tool,
                invocations: vec![started(tkey("t1"), "process:t1"), started(tkey("t2"), "process:t2")],
                next_start_index: 2,
                wait_id: None,
            }),
        }),
        artifact_records: vec![artifact(1, 0, "d1")],
        ..base(Phase::AwaitingChildWaitOpen)
    }
}

fn detailed_usage() -> Usage {
    Usage { cache_read_tokens: 60, cache_write_tokens: 30, reasoning_tokens: 25, ..Usage::new(100, 40) }
}

fn completed_model() -> ParentState {
    ParentState {
        model_call_count: 2,
        usage: detailed_usage(),
        final_output: Some(Output::model_response(final_response("sunny"), 2).with_usage(detailed_usage())),
        artifact_records: vec![artifact(1, 0, "d1"), artifact(1, 2, "d3"), artifact(2, 0, "d1")],
        advertised_tool_names: vec!["a".into(), "b".into()],
        ..base(Phase::Completed)
    }
}

fn completed_direct() -> ParentState {
    ParentState {
        final_output: Some(Output::direct_tool_results(vec![ok_result("c1", "lookup", "42")], 1)),
        ..base(Phase::Completed)
    }
}

fn all_states() -> Vec<ParentState> {
    vec![
        ready(),
        awaiting_model(),
        tool_starts(),
        tool_wait_open(),
        tool_waiting(),
        delegate_starts(),
        delegate_waiting(),
        artifact_round(),
        completed_model(),
        completed_direct(),
    ]
}

/// Configuration as a table.
struct Rules {
    max_calls: u32,
    max_concurrent: u32,
    tools: Vec<&'static str>,
    delegates: Vec<(&'static str, Schema)>,
    window: Option<usize>,
}

impl Rules {
    fn new() -> Rules {
        Rules {
            max_calls: 4,
            max_concurrent: 2,
            tools: vec!["weather", "lookup"],
            delegates: vec![("research", Schema::compile(&json(r#"{"type":"object","required":["value"]}"#)).unwrap())],
            window: Some(3),
        }
    }
}

impl StateRules for Rules {
    fn max_model_calls(&self) -> u32 {
        self.max_calls
    }
    fn max_concurrent_tool_calls(&self) -> u32 {
        self.max_concurrent
    }
    fn is_tool(&self, name: &str) -> bool {
        self.tools.contains(&name)
    }
    fn delegate_output_schema(&self, name: &str) -> Option<&Schema> {
        self.delegates.iter().find(|(n, _)| *n == name).map(|(_, s)| s)
    }
    fn plan_window(&self, calls: &[ToolCall]) -> Result<usize, InteractionError> {
        // Windows end at a delegate, like real planning.
        let run = calls.iter().take_while(|c| !self.is_delegate(&c.name)).count();
        self.window.map(|w| w.min(run)).ok_or_else(|| InteractionError::invalid_state("classifier panicked"))
    }
}

fn structure_error(state: &ParentState) -> InteractionError {
    let e = state.validate_structure().expect_err("structure accepted");
    assert_eq!(e.kind(), ErrorKind::InvalidExecutionState);
    // Decoding runs the same rules.
    let d = ParentState::from_wire_bytes(state.to_canonical_string().as_bytes()).expect_err("decode accepted");
    assert_eq!(d.kind(), ErrorKind::InvalidExecutionState);
    e
}

fn reject(state: ParentState, needle: &str) {
    let e = structure_error(&state);
    assert!(e.detail().contains(needle), "expected `{needle}` in `{}`", e.detail());
}

fn edit(mut state: ParentState, f: impl FnOnce(&mut ParentState)) -> ParentState {
    f(&mut state);
    state
}

fn round(state: &mut ParentState) -> &mut ToolRound {
    state.tool_round.as_mut().unwrap()
}

fn batch(state: &mut ParentState) -> &mut ChildBatch {
    round(state).child_batch.as_mut().unwrap()
}

// ---------------------------------------------------------------- codecs

#[test]
fn every_fixture_is_valid_and_round_trips_byte_identically() {
    let rules = Rules::new();
    for state in all_states() {
        state.validate(&rules).unwrap_or_else(|e| panic!("{:?}: {e}", state.phase));
        assert_round_trip(&state);
        let snapshot = state.to_execution_state().unwrap();
        assert_eq!(snapshot.kind.as_str(), "interaction");
        let restored = ParentState::from_execution_state(&snapshot).unwrap();
        assert_eq!(restored, state);
        let again = restored.to_execution_state().unwrap();
        assert_eq!(again.payload.canonical(), snapshot.payload.canonical(), "restore → snapshot is byte-identical");
    }
}

/// The snapshot's direct writer equals the encoding of the members' tree byte for byte, for
/// every fixture with every optional member absent and present (the Output both encoded by
/// the writer and copied from the Complete transition's payload).
#[test]
fn the_direct_payload_writer_equals_the_tree_encoding() {
    let options = crate::chat::Options { model: Some("m".into()), max_output_tokens: Some(64), ..Default::default() };
    for state in all_states() {
        let mut full = state.clone();
        full.working_context.options = options.clone();
        full.advertised_tool_names = vec!["weather".into(), "lookup".into()];
        full.granted = Some(crate::interaction::budget::Limits { total_tokens: Some(10), ..Default::default() });
        full.clock = crate::interaction::run_clock::RunClock::start(Some(5), Some(90));
        full.budget_questions = 2;
        full.lineage = Some(crate::interaction::protocol::Lineage::first("v2"));
        full.usage = detailed_usage();
        full.pending_steer = Some(PendingSteer { messages: vec![Message::user("steer")], signal_ids: vec![sid("signal:s")] });
        if full.artifact_records.is_empty() {
            full.artifact_records = vec![artifact(SEQ, 0, "d1")];
        }
        for mut s in [state, full] {
            s.working_context.seal().unwrap();
            assert_eq!(s.direct_encoding(None), s.tree_encoding(None), "{:?}", s.phase);
            let snapshot = s.encode_valid(None).unwrap();
            assert_eq!(snapshot.payload.canonical(), s.tree_encoding(None));
            assert_eq!(snapshot.payload.value(), &json(&s.tree_encoding(None)), "the value parses from the text");
            if let Some(output) = &s.final_output {
                let encoded = output.to_payload().unwrap();
                assert_eq!(s.direct_encoding(Some(&encoded)), s.tree_encoding(None), "{:?}", s.phase);
            }
        }
    }
}

/// The writer's depth check counts as `Json::depth` (brackets in strings and escaped quotes
/// do not count), and a state nested too deep is refused with the tree path's error.
#[test]
fn the_direct_writer_checks_the_depth_as_the_tree_does() {
    use crate::json::canonical::depth as canonical_depth;
    for text in [r#"1"#, r#"{}"#, r#"[[],{"a":[1,{"b":"]}[{"}]}]"#, r#"{"a":"\"[[[\\","b":[[[]]]}"#, r#""{[""#] {
        assert_eq!(canonical_depth(text), json(text).depth(), "{text}");
    }
    for state in all_states() {
        let text = state.to_execution_state().unwrap().payload.canonical().to_owned();
        assert_eq!(canonical_depth(&text), json(&text).depth());
    }
    let mut deep = Json::Null;
    for _ in 0..crate::limits::MAX_JSON_DEPTH {
        deep = Json::Array(vec![deep]);
    }
    let mut s = ready();
    s.working_context.options.extra = Some([("x".to_owned(), deep)].into_iter().collect());
    s.working_context.seal().unwrap();
    let error = s.encode_valid(None).map(|_| ()).unwrap_err();
    assert!(error.to_string().contains("deep"), "{error}");
}

#[test]
fn usage_is_omitted_when_zero_refused_as_explicit_zero_and_must_match_the_output() {
    let text = crate::json::ToJson::to_json(&ready()).to_canonical_string();
    assert!(!text.contains("usage"), "a state without tokens keeps its earlier bytes: {text}");
    let mut explicit = crate::json::ToJson::to_json(&ready());
    if let Json::Object(o) = &mut explicit {
        o.insert("usage".into(), crate::json::ToJson::to_json(&Usage::default()));
    }
    let decoded = <ParentState as crate::json::FromJson>::from_json(&explicit);
    assert!(decoded.is_err(), "an explicit zero would not re-encode");
    let mismatch = ParentState { usage: Usage::new(1, 1), ..completed_model() };
    let e = mismatch.validate_structure().unwrap_err();
    assert!(e.to_string().contains("final_output.usage"), "{e}");
}

#[test]
fn unknown_members_are_rejected_at_every_level() {
    let probed: usize = all_states().iter().map(assert_rejects_unknown_members_everywhere).sum();
    assert!(probed > 150, "probed only {probed}");
}

#[test]
fn kind_must_be_exact() {
    let snapshot = ready().to_execution_state().unwrap();
    for kind in ["interaction.tool_call", "interaction2", "keel.testkit.script"] {
        let wrong = ExecutionState { kind: QualifiedName::parse(kind).unwrap(), payload: snapshot.payload.clone(), segments: Vec::new() };
        let e = ParentState::from_execution_state(&wrong).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidExecutionState);
        assert!(e.detail().contains("state kind"));
    }
    // A tool child state is not a parent state even under the right kind.
    let child = ToolCallState::start(tool_input()).to_execution_state().unwrap();
    let disguised = ExecutionState { kind: QualifiedName::parse("interaction").unwrap(), payload: child.payload, segments: Vec::new() };
    assert!(ParentState::from_execution_state(&disguised).is_err());
}

#[test]
fn present_but_empty_lists_are_rejected() {
    for member in ["advertised_tool_names", "artifact_records"] {
        let text = edited(&ready(), |j| {
            obj(j, &[]).insert(member.into(), Json::Array(vec![]));
        });
        let e = assert_rejected::<ParentState>(&text);
        assert!(e.detail().contains("present but empty"), "{member}: {e}");
    }
    // Required lists are always present, `[]` included.
    let text = tool_starts().to_canonical_string();
    assert!(text.contains(r#""results":[]"#), "{text}");
    let without_results = edited(&tool_starts(), |j| {
        obj(j, &["tool_round"]).remove("results");
    });
    let e = assert_rejected::<ParentState>(&without_results);
    assert_eq!(e.decode_error().unwrap().kind, DecodeErrorKind::MissingMember("results".into()));
}

#[test]
fn nulls_and_unknown_phases_are_rejected() {
    for (path, member) in [(&[][..], "tool_round"), (&[][..], "final_output"), (&["tool_round"][..], "child_batch")] {
        let text = edited(&tool_starts(), |j| {
            obj(j, path).insert(member.into(), Json::Null);
        });
        assert_rejected::<ParentState>(&text);
    }
    let text = edited(&ready(), |j| {
        obj(j, &[]).insert("phase".into(), Json::str("failed"));
    });
    assert_eq!(assert_rejected::<ParentState>(&text).decode_error().unwrap().path, "$.phase");
    for phase in Phase::ALL {
        assert_eq!(Phase::from_name(phase.as_str()), Some(phase));
    }
}

// ---------------------------------------------------------------- envelope rules

#[test]
fn envelope_rules() {
    reject(edit(ready(), |s| s.working_context.replace(Vec::new())), "working_context");
    // The full wire form names a request; one with tool definitions is refused.
    let mut j = crate::json::ToJson::to_json(&ready());
    if let Json::Object(o) = &mut j {
        if let Some(Json::Object(w)) = o.get_mut("working_context") {
            let tool = ToolDefinition::new("t", "d", json(r#"{"type":"object"}"#));
            w.insert("tools".into(), Json::Array(vec![crate::json::ToJson::to_json(&tool)]));
        }
    }
    let err = <ParentState as crate::json::FromJson>::from_json(&j).unwrap_err();
    assert!(err.to_string().contains("tool definitions"), "{err}");
    reject(edit(ready(), |s| s.advertised_tool_names = vec!["a".into(), "a".into()]), "repeated");
    reject(edit(ready(), |s| s.advertised_tool_names = vec![" a".into()]), "whitespace");
    reject(edit(ready(), |s| s.advertised_tool_names = vec![String::new()]), "empty");
    let steer = |messages: Vec<Message>, ids: Vec<&str>| {
        edit(tool_starts(), |s| {
            s.pending_steer = Some(PendingSteer { messages, signal_ids: ids.into_iter().map(sid).collect() })
        })
    };
    reject(steer(vec![], vec!["s1"]), "no messages");
    reject(steer(vec![Message::user("a")], vec![]), "no signal ids");
    reject(steer(vec![Message::assistant("a")], vec!["s1"]), "expected user");
    reject(steer(vec![Message::user("a")], vec!["s1", "s1"]), "repeated");
    reject(steer(vec![Message::user("")], vec!["s1"]), "message 0");
    assert!(steer(vec![Message::user("a"), Message::user("b")], vec!["s1"]).validate_structure().is_ok());
}

#[test]
fn pending_steer_admission_is_atomic() {
    let steer = |id: &str, text: &str| SteerSignal { id: sid(id), messages: vec![Message::user(text)] };
    let mut pending = PendingSteer::default();
    pending.admit(&[steer("s1", "a"), steer("s2", "b")]).unwrap();
    pending.admit(&[steer("s3", "c")]).unwrap();
    assert_eq!(pending.signal_ids, vec![sid("s1"), sid("s2"), sid("s3")]);
    assert_eq!(pending.messages.iter().map(Message::text).collect::<Vec<_>>(), ["a", "b", "c"]);
    let before = pending.clone();
    assert!(pending.admit(&[steer("s4", "d"), steer("s2", "again")]).is_err());
    assert_eq!(pending, before, "a rejected admission changes nothing");
    assert!(pending.admit(&[steer("s5", "e"), steer("s5", "e")]).is_err());
    assert_eq!(pending, before);
}

// ---------------------------------------------------------------- phase rules

#[test]
fn phase_rules() {
    let with_round = |phase| edit(tool_starts(), |s| s.phase = phase);
    for phase in [Phase::ReadyModel, Phase::AwaitingModel, Phase::Completed] {
        reject(
            edit(with_round(phase), |s| s.final_output = Some(Output::model_response(final_response("x"), 1))),
            "tool_round",
        );
    }
    reject(edit(ready(), |s| s.pending_steer = tool_starts().pending_steer), "pending_steer");
    reject(edit(awaiting_model(), |s| s.pending_steer = tool_starts().pending_steer), "pending_steer");
    reject(edit(ready(), |s| s.final_output = completed_direct().final_output), "final_output");
    reject(edit(awaiting_model(), |s| s.final_output = completed_direct().final_output), "final_output");
    reject(edit(awaiting_model(), |s| s.model_call_count = 0), "model_call_count");
    for child in [tool_starts(), tool_wait_open(), tool_waiting()] {
        reject(edit(child.clone(), |s| s.final_output = completed_direct().final_output), "final_output");
        reject(edit(child.clone(), |s| s.tool_round = None), "needs a tool_round");
        reject(edit(child, |s| s.model_call_count = 0), "model_call_count");
    }
    reject(edit(completed_model(), |s| s.final_output = None), "needs a final_output");
    reject(edit(completed_model(), |s| s.model_call_count = 3), "differs from model_call_count");
    reject(edit(completed_direct(), |s| s.pending_steer = tool_starts().pending_steer), "pending_steer");
    // A restored completed state holding a failed direct result is rejected.
    reject(
        edit(completed_direct(), |s| {
            s.final_output = Some(Output::direct_tool_results(vec![ToolResult::error("c1", "lookup", "x")], 1))
        }),
        "is an error",
    );
    // ready_model with a count is fine (after a rejected completion, for example).
    assert!(edit(ready(), |s| s.model_call_count = 3).validate_structure().is_ok());
}

// ---------------------------------------------------------------- round and batch rules

#[test]
fn round_rules() {
    let response = |s: &mut ParentState, calls: Vec<ToolCall>, reason| {
        round(s).response = tool_calls_response(calls);
        round(s).response.finish_reason = reason;
    };
    reject(edit(tool_starts(), |s| response(s, vec![], Some(FinishReason::ToolCalls))), "no tool calls");
    reject(
        edit(tool_starts(), |s| {
            response(
                s,
                vec![call("c1", "weather"), call("c1", "weather"), call("c3", "weather")],
                Some(FinishReason::ToolCalls),
            )
        }),
        "repeated",
    );
    for reason in [None, Some(FinishReason::Stop), Some(FinishReason::Length), Some(FinishReason::ContentFilter)] {
        reject(edit(tool_starts(), |s| response(s, weather_calls(), reason)), "finish reason");
    }
    reject(edit(tool_starts(), |s| round(s).response.message = Some(Message::user("not an assistant"))), "response");
    reject(edit(tool_starts(), |s| round(s).child_batch = None), "need a child_batch");
    reject(edit(tool_starts(), |s| batch(s).invocations.clear()), "no invocations");
    reject(
        edit(tool_starts(), |s| batch(s).invocations.push(BatchInvocation::default())),
        "exceed the number of calls",
    );
    reject(edit(delegate_starts(), |s| round(s).results = vec![ok_result("t9", "weather", "x")]), "does not answer");
    reject(edit(delegate_starts(), |s| round(s).results = vec![ok_result("t1", "other", "x")]), "does not answer");
    reject(edit(delegate_starts(), |s| round(s).results = vec![ok_result("", "weather", "x")]), "results[0]");
    // The fresh-batch direct guard: only at index 0, in the first starts of a tool batch.
    reject(edit(tool_starts(), |s| round(s).direct_result_eligible = false), "lost its direct-result candidate");
    assert!(edit(tool_waiting(), |s| round(s).direct_result_eligible = false).validate_structure().is_ok());
    assert!(edit(delegate_starts(), |s| round(s).direct_result_eligible = false).validate_structure().is_ok());
}

#[test]
fn batch_shape_rules() {
    reject(edit(tool_starts(), |s| batch(s).next_start_index = 0), "next_start_index");
    reject(edit(tool_starts(), |s| batch(s).next_start_index = 4), "next_start_index");
    reject(
        edit(delegate_starts(), |s| {
            batch(s).next_start_index = 1;
            batch(s).invocations[1] = BatchInvocation::default();
        }),
        "plans every invocation",
    );
    reject(edit(tool_starts(), |s| batch(s).wait_id = Some(wid("wait:w"))), "must not hold a wait_id");
    reject(edit(tool_wait_open(), |s| batch(s).wait_id = Some(wid("wait:w"))), "must not hold a wait_id");
    reject(edit(tool_waiting(), |s| batch(s).wait_id = None), "needs a wait_id");
}

#[test]
fn invocation_rules() {
    // Keys are the derived keys.
    reject(edit(tool_starts(), |s| batch(s).invocations[0].child_key = Some(tkey("c2"))), "derived key");
    reject(
        edit(tool_starts(), |s| batch(s).invocations[0].child_key = Some(tool_child_key(2, "c1").unwrap())),
        "derived key",
    );
    reject(
        edit(delegate_starts(), |s| batch(s).invocations[0].child_key = Some(tool_child_key(SEQ, "d1").unwrap())),
        "derived key",
    );
    // A tool invocation always has a key once planned; only a delegate rejected before
    // starting (error result, no process) may lack one.
    reject(edit(tool_starts(), |s| batch(s).invocations[0].child_key = None), "needs a child_key");
    reject(
        edit(delegate_starts(), |s| batch(s).invocations[1].result = Some(settled("d2", "research"))),
        "needs a child_key",
    );
    // Unplanned invocations carry nothing.
    reject(edit(tool_starts(), |s| batch(s).invocations[2].child_key = Some(tkey("c3"))), "unplanned");
    reject(edit(tool_starts(), |s| batch(s).invocations[2].process_id = Some(pid("process:x"))), "unplanned");
    // Process ids are unique.
    reject(
        edit(tool_waiting(), |s| batch(s).invocations[2].process_id = Some(pid("process:p2"))),
        "repeats a process_id",
    );
    // Results answer their own call and are valid.
    reject(
        edit(tool_waiting(), |s| batch(s).invocations[0].result = Some(settled("c2", "weather"))),
        "does not answer",
    );
    reject(
        edit(tool_waiting(), |s| {
            batch(s).invocations[0].result = Some(SettledToolResult {
                result: ToolResult::error("c1", "weather", "x"),
                direct: true,
                advertised_tool_names: vec![],
            })
        }),
        "direct",
    );
    // A tool result needs its process.
    reject(edit(tool_waiting(), |s| batch(s).invocations[0].process_id = None), "needs a process_id");
    // A delegate result kept in the batch is a non-direct error without process/advertisements.
    let mut ok = SettledToolResult::new(ok_result("d2", "research", "x"), false);
    reject(
        edit(delegate_starts(), |s| {
            batch(s).invocations[1] =
                BatchInvocation {
                child_key: Some(dkey(&mixed_calls()[2])),
                result: Some(ok.clone()),
                ..BatchInvocation::default()
            }
        }),
        "delegate result",
    );
    ok = SettledToolResult::new(ToolResult::error("d2", "research", "x"), false);
    reject(
        edit(delegate_waiting(), |s| {
            batch(s).invocations[1] =
                BatchInvocation { result: Some(ok.clone()), ..started(dkey(&mixed_calls()[2]), "process:d2") }
        }),
        "delegate result",
    );
    // A start failure (key, no process, error result) is fine.
    assert!(edit(delegate_waiting(), |s| {
        batch(s).invocations[1] =
            BatchInvocation { child_key: Some(dkey(&mixed_calls()[2])), result: Some(ok), ..BatchInvocation::default() }
    })
    .validate_structure()
    .is_ok());
}

#[test]
fn pending_and_active_counts() {
    // Starts need something pending.
    reject(
        edit(tool_starts(), |s| {
            batch(s).invocations[0].process_id = Some(pid("process:p1"));
            batch(s).invocations[1].process_id = Some(pid("process:p2"));
        }),
        "needs a pending start",
    );
    // Starting more tools while others run is fine.
    assert!(edit(tool_starts(), |s| batch(s).invocations[0].process_id = Some(pid("process:p1")))
        .validate_structure()
        .is_ok());
    // Delegates start all at once: nothing active while starting.
    reject(
        edit(delegate_starts(), |s| {
            let calls = mixed_calls();
            batch(s).invocations.push(BatchInvocation::default());
            round(s).response =
                tool_calls_response(vec![calls[0].clone(), calls[1].clone(), calls[2].clone(), call("d3", "research")]);
            batch(s).invocations[2] = started(dkey(&call("d3", "research")), "process:d3");
            batch(s).next_start_index = 3;
        }),
        "active children while starting",
    );
    // Wait phases: nothing pending, something active.
    reject(edit(tool_waiting(), |s| batch(s).invocations[1].process_id = None), "pending starts");
    reject(
        edit(tool_waiting(), |s| {
            batch(s).invocations[1].result = Some(settled("c2", "weather"));
            batch(s).invocations[2].result = Some(settled("c3", "weather"));
        }),
        "needs an active child",
    );
    let b = tool_waiting().tool_round.unwrap().child_batch.unwrap();
    assert_eq!((b.pending_count(), b.active_count(), b.settled_count()), (0, 2, 1));
    assert_eq!(b.active_children(), vec![pid("process:p2"), pid("process:p3")]);
    let b = tool_starts().tool_round.unwrap().child_batch.unwrap();
    assert_eq!((b.pending_count(), b.active_count(), b.settled_count()), (2, 0, 0));
    // The wait key embeds the first index of the batch and the settled count.
    assert_eq!(tool_waiting().tool_round.unwrap().child_wait_key(1).unwrap().as_str(), "interaction.children:1:0:1");
    assert_eq!(
        delegate_waiting().tool_round.unwrap().child_wait_key(1).unwrap().as_str(),
        "interaction.children:1:1:1"
    );
}

// ---------------------------------------------------------------- artifacts

#[test]
fn artifact_ordering_rules() {
    reject(edit(completed_model(), |s| s.artifact_records.push(artifact(3, 0, "d9"))), "exceeds model_call_count");
    reject(
        edit(completed_model(), |s| s.artifact_records = vec![artifact(2, 0, "a"), artifact(1, 0, "b")]),
        "strictly increasing",
    );
    reject(
        edit(completed_model(), |s| s.artifact_records = vec![artifact(1, 2, "a"), artifact(1, 2, "b")]),
        "strictly increasing",
    );
    reject(
        edit(completed_model(), |s| s.artifact_records = vec![artifact(1, 1, "a"), artifact(1, 0, "b")]),
        "strictly increasing",
    );
    reject(edit(completed_model(), |s| s.artifact_records = vec![artifact(1, 0, "a"), artifact(1, 1, "a")]), "repeats");
    // Same call id in another model call is fine.
    assert!(edit(completed_model(), |s| s.artifact_records = vec![artifact(1, 0, "a"), artifact(2, 0, "a")])
        .validate_structure()
        .is_ok());
    // A record with sequence 0 cannot be built or decoded.
    assert_eq!(Artifact::new(0, 0, "a", "research", Payload::null()).unwrap_err().kind(), ErrorKind::InvalidArtifact);
    let text = edited(&completed_model(), |j| {
        let records = obj(j, &[]).get_mut("artifact_records").unwrap();
        if let Json::Array(items) = records {
            if let Json::Object(o) = &mut items[0] {
                o.insert("model_call_sequence".into(), Json::u64(0));
            }
        }
    });
    assert_rejected::<ParentState>(&text);
}

#[test]
fn current_round_artifacts_point_at_settled_delegate_results() {
    reject(edit(artifact_round(), |s| s.artifact_records = vec![artifact(1, 0, "zz")]), "does not match");
    reject(edit(artifact_round(), |s| s.artifact_records = vec![artifact(1, 5, "d1")]), "not settled");
    reject(
        edit(artifact_round(), |s| {
            round(s).results[0] = ToolResult::error("d1", "research", "x");
        }),
        "not a successful result",
    );
    reject(
        edit(artifact_round(), |s| round(s).results[0].output.details = Some(json(r#"{"value":"OTHER"}"#))),
        "exactly the artifact output",
    );
    reject(
        edit(artifact_round(), |s| round(s).results[0].output.content = "text".into()),
        "exactly the artifact output",
    );
    // Exact JSON (number text included) is compared, not an equivalent value.
    let a = Artifact::new(1, 0, "d1", "research", payload(r#"{"value":1.0}"#)).unwrap();
    reject(
        edit(artifact_round(), |s| {
            s.artifact_records = vec![a.clone()];
            round(s).results[0].output.details = Some(json(r#"{"value":1}"#));
        }),
        "exactly the artifact output",
    );
    // Records of an earlier model call are not checked against the current round.
    let mut later = artifact_round();
    later.model_call_count = 2;
    for (inv, id) in batch(&mut later).invocations.iter_mut().zip(["t1", "t2"]) {
        inv.child_key = Some(tool_child_key(2, id).unwrap());
    }
    later.artifact_records = vec![artifact(1, 7, "old")];
    assert!(later.validate_structure().is_ok());
}

// ---------------------------------------------------------------- configuration rules

#[test]
fn validate_against_rules() {
    let rules = Rules::new();
    let against = |s: &ParentState, r: &Rules| s.validate(r).expect_err("accepted").detail().to_owned();
    assert!(against(&edit(ready(), |s| s.model_call_count = 5), &rules).contains("MaxModelCalls"));
    assert!(edit(ready(), |s| s.model_call_count = 4).validate(&rules).is_ok());
    // Artifacts: configured delegate, schema-valid output.
    let unknown = Artifact::new(1, 0, "d1", "summarize", Payload::from_json(delegate_output()).unwrap()).unwrap();
    assert!(against(&edit(completed_model(), |s| s.artifact_records = vec![unknown]), &rules)
        .contains("no configured delegate"));
    let wrong = Artifact::new(1, 0, "d1", "research", payload(r#"{"other":1}"#)).unwrap();
    assert!(against(&edit(completed_model(), |s| s.artifact_records = vec![wrong]), &rules).contains("output schema"));
    // Bindings: delegate batch ⇔ delegate names; tool batch names tools.
    let mut no_delegates = Rules::new();
    no_delegates.delegates.clear();
    assert!(against(&delegate_starts(), &no_delegates).contains("names no delegate"));
    let mut research_is_tool = Rules::new();
    research_is_tool.tools.push("research");
    research_is_tool.delegates.clear();
    let tool_batch_with_delegate = edit(tool_starts(), |s| {
        round(s).response =
            tool_calls_response(vec![call("c1", "weather"), call("c2", "research"), call("c3", "weather")]);
    });
    assert!(tool_batch_with_delegate.validate(&research_is_tool).is_ok());
    assert!(against(&tool_batch_with_delegate, &rules).contains("names a delegate"));
    let mut no_weather = Rules::new();
    no_weather.tools = vec!["lookup"];
    assert!(against(&tool_starts(), &no_weather).contains("names no tool"));
    // The segment is exactly one planning window.
    let mut window2 = Rules::new();
    window2.window = Some(2);
    assert!(against(&tool_starts(), &window2).contains("window of 2"));
    let mut planning_fails = Rules::new();
    planning_fails.window = None;
    assert!(against(&tool_starts(), &planning_fails).contains("classifier panicked"));
    // MaxConcurrentToolCalls 1: windows of one call only.
    let mut serial = Rules::new();
    serial.max_concurrent = 1;
    assert!(against(&tool_starts(), &serial).contains("MaxConcurrentToolCalls 1"));
    // Keyed-but-unsettled invocations within the limit.
    let three_started = edit(tool_starts(), |s| {
        batch(s).invocations[2] = keyed(tkey("c3"));
        batch(s).next_start_index = 3;
    });
    assert!(three_started.validate_structure().is_ok());
    assert!(against(&three_started, &rules).contains("exceed MaxConcurrentToolCalls"));
    let mut wide = Rules::new();
    wide.max_concurrent = 3;
    assert!(three_started.validate(&wide).is_ok());
}

// ---------------------------------------------------------------- tool child

fn tool_input() -> ToolCallInput {
    ToolCallInput { model_call_sequence: 2, tool_call_index: 0, call: call("c1", "weather") }
}

fn child(phase: ToolChildPhase, checkpoint: bool, wait: bool, result: bool) -> ToolCallState {
    ToolCallState {
        phase,
        call: tool_input(),
        checkpoint: checkpoint
            .then(|| ToolCheckpoint { pause_count: 1, input_request: input_request(r#"{"type":"boolean"}"#) }),
        wait_id: wait.then(|| wid("wait:input")),
        result: result.then(|| SettledToolResult::new(ok_result("c1", "weather", "18C"), true)),
    }
}

#[test]
fn tool_child_phase_table() {
    let allowed = |phase: ToolChildPhase, c: bool, w: bool, r: bool| match phase {
        ToolChildPhase::Ready => !c && !w && !r,
        ToolChildPhase::AwaitingResult => !w && !r,
        ToolChildPhase::AwaitingWaitOpen => c && !w && !r,
        ToolChildPhase::WaitingInput => c && w && !r,
        ToolChildPhase::Completed => !c && !w && r,
    };
    let mut accepted = 0;
    for phase in ToolChildPhase::ALL {
        for bits in 0..8u8 {
            let (c, w, r) = (bits & 1 != 0, bits & 2 != 0, bits & 4 != 0);
            let state = child(phase, c, w, r);
            let text = state.to_canonical_string();
            if allowed(phase, c, w, r) {
                accepted += 1;
                assert_round_trip(&state);
                let snapshot = state.to_execution_state().unwrap();
                assert_eq!(snapshot.kind.as_str(), "interaction.tool_call");
                assert_eq!(ToolCallState::from_execution_state(&snapshot).unwrap(), state);
                assert_rejects_unknown_members_everywhere(&state);
            } else {
                assert_eq!(state.validate().unwrap_err().kind(), ErrorKind::InvalidExecutionState);
                assert_rejected::<ToolCallState>(&text);
                assert!(state.to_execution_state().is_err());
            }
        }
        assert_eq!(ToolChildPhase::from_name(phase.as_str()), Some(phase));
    }
    assert_eq!(accepted, 6);
}

#[test]
fn tool_child_rules() {
    let mut s = child(ToolChildPhase::Completed, false, false, true);
    s.result = Some(SettledToolResult::new(ok_result("c2", "weather", "x"), false));
    assert!(s.validate().unwrap_err().detail().contains("does not answer"));
    let mut s = child(ToolChildPhase::AwaitingWaitOpen, true, false, false);
    s.checkpoint.as_mut().unwrap().pause_count = 0;
    assert!(s.validate().is_err());
    let mut s = child(ToolChildPhase::Ready, false, false, false);
    s.call.model_call_sequence = 0;
    assert!(s.validate().is_err());
    // The stored call never carries a continuation.
    let text = edited(&child(ToolChildPhase::Ready, false, false, false), |j| {
        obj(j, &["call"]).insert("input_response".into(), Json::Bool(true));
    });
    assert!(matches!(
        assert_rejected::<ToolCallState>(&text).decode_error().unwrap().kind,
        DecodeErrorKind::UnknownMember(_)
    ));
    let snapshot = child(ToolChildPhase::Ready, false, false, false).to_execution_state().unwrap();
    let wrong = ExecutionState { kind: QualifiedName::parse("interaction").unwrap(), payload: snapshot.payload, segments: Vec::new() };
    assert!(ToolCallState::from_execution_state(&wrong).is_err());
    // The wait key of the current pause.
    let waiting = child(ToolChildPhase::WaitingInput, true, true, false);
    assert_eq!(waiting.input_wait_key().unwrap(), crate::interaction::ids::tool_input_wait_key(2, "c1", 1).unwrap());
    assert!(child(ToolChildPhase::Ready, false, false, false).input_wait_key().is_err());
    assert_eq!(ToolCallState::start(tool_input()), child(ToolChildPhase::Ready, false, false, false));
}

// ---------------------------------------------------------------- proptests

fn arb_simple_state() -> impl Strategy<Value = ParentState> {
    (arb_context(), arb_names(), 0u32..5, 0u8..3).prop_map(|(working_context, names, count, shape)| {
        let working_context = WorkingContext::from_request(&working_context);
        let mut s = ParentState { working_context, advertised_tool_names: names, model_call_count: count, ..ready() };
        match shape {
            0 => {}
            1 => {
                s.phase = Phase::AwaitingModel;
                s.model_call_count = count.max(1);
            }
            _ => {
                s.phase = Phase::Completed;
                s.model_call_count = count.max(1);
                s.final_output = Some(Output::model_response(final_response("done"), s.model_call_count));
            }
        }
        s
    })
}

/// A tool window over arbitrary calls: `settled` of the planned invocations have results.
fn arb_tool_batch_state() -> impl Strategy<Value = ParentState> {
    (arb_calls(4), any::<prop::sample::Index>(), any::<prop::sample::Index>(), arb_signal_ids()).prop_map(
        |(calls, planned, settled_n, ids)| {
            let planned = planned.index(calls.len()) + 1;
            let settled_n = settled_n.index(planned);
            let invocations = (0..calls.len())
                .map(|j| {
                    if j >= planned {
                        return BatchInvocation::default();
                    }
                    let c = &calls[j];
                    BatchInvocation {
                        result: (j < settled_n).then(|| SettledToolResult::new(ok_result(&c.id, &c.name, "r"), false)),
                        ..started(tkey(&c.id), &format!("process:{j}"))
                    }
                })
                .collect();
            let mut s = base(Phase::WaitingChildren);
            s.tool_round = Some(ToolRound {
                child_batch: Some(ChildBatch {
                    kind: BatchKind::Tool,
                    invocations,
                    next_start_index: u32::try_from(planned).unwrap(),
                    wait_id: Some(wid("wait:w")),
                }),
                ..ToolRound::new(tool_calls_response(calls))
            });
            if !ids.is_empty() {
                let messages = ids.iter().map(|_| Message::user("steer")).collect();
                s.pending_steer = Some(PendingSteer { messages, signal_ids: ids });
            }
            s
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// snapshot → restore → snapshot is a fixed point.
    #[test]
    fn simple_states_are_fixed_points(s in arb_simple_state()) {
        let snapshot = s.to_execution_state().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut sealed = s.clone();
        sealed.working_context.seal().unwrap();
        prop_assert_eq!(snapshot.payload.canonical(), sealed.tree_encoding(None));
        let restored = ParentState::from_execution_state(&snapshot).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&restored, &s);
        let again = restored.to_execution_state().unwrap();
        prop_assert_eq!(again.payload.canonical(), snapshot.payload.canonical());
    }

    #[test]
    fn tool_batch_states_are_fixed_points(s in arb_tool_batch_state()) {
        s.validate_structure().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let snapshot = s.to_execution_state().unwrap();
        let restored = ParentState::from_execution_state(&snapshot).unwrap();
        prop_assert_eq!(&restored, &s);
        let again = restored.to_execution_state().unwrap();
        prop_assert_eq!(again.payload.canonical(), snapshot.payload.canonical());
        assert_rejects_unknown_members_everywhere(&s);
    }
}

// ---------------------------------------------------------------- segments keep decode kinds

/// `ready()`'s snapshot with its context replaced by the single segment `messages` (any
/// JSON), under a head whose chain and count match, so only the segment's content is wrong.
fn with_segment(messages: Json) -> ExecutionState {
    use crate::json::ToJson;
    use crate::kernel::segment::{chain_digest, Segment};
    let snapshot = ready().to_execution_state().unwrap();
    let segments = vec![Segment::from_canonical(messages.to_canonical_string())];
    let head = ContextHead { chain: chain_digest(&segments), messages: 1, options: Default::default() };
    let mut payload = snapshot.payload.value().clone();
    let Json::Object(o) = &mut payload else { panic!("the payload is an object") };
    o.insert("working_context".into(), head.to_json());
    ExecutionState { kind: snapshot.kind, payload: Payload::from_json(payload).unwrap(), segments }
}

#[test]
fn a_segment_that_does_not_decode_keeps_the_codec_kind_with_its_index_in_the_path() {
    use crate::json::ToJson;
    let message = Message::user("hi").to_json();
    let mut extra_member = message.clone();
    obj(&mut extra_member, &[]).insert("x".into(), Json::Bool(true));
    let mut extra_in_part = message.clone();
    match &mut extra_in_part {
        Json::Object(o) => match o.get_mut("parts") {
            Some(Json::Array(parts)) => obj(&mut parts[0], &[]).insert("y".into(), Json::Bool(true)),
            _ => panic!("a message has parts"),
        },
        _ => panic!("a message is an object"),
    };
    let mut wrong_type = message.clone();
    obj(&mut wrong_type, &[]).insert("parts".into(), Json::str("not a list"));
    let cases = [
        (extra_member, DecodeErrorKind::UnknownMember("x".into()), "$.working_context.segments[0][0]"),
        (extra_in_part, DecodeErrorKind::UnknownMember("y".into()), "$.working_context.segments[0][0].parts[0]"),
        (wrong_type, DecodeErrorKind::WrongType { expected: "array", found: "string" }, "$.working_context.segments[0][0].parts"),
    ];
    for (bad, kind, path) in cases {
        // In a segment (what a restore reads).
        let e = ParentState::from_execution_state(&with_segment(Json::Array(vec![bad.clone()]))).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidExecutionState, "{e}");
        let d = e.decode_error().expect("the decode error is kept");
        assert_eq!((&d.kind, d.path.as_str()), (&kind, path), "{e}");
        // The same fault inline (the full wire form) gets the same kind.
        let inline = edited(&ready(), |j| match obj(j, &["working_context"]).get_mut("messages") {
            Some(Json::Array(m)) => m[0] = bad.clone(),
            _ => panic!("an inline context has messages"),
        });
        let e = assert_rejected::<ParentState>(&inline);
        assert_eq!(e.decode_error().map(|d| &d.kind), Some(&kind), "{e}");
    }
    // A segment that is not JSON messages at all keeps the codec's kind too.
    let e = ParentState::from_execution_state(&with_segment(Json::Array(vec![Json::Bool(true)]))).unwrap_err();
    let d = e.decode_error().expect("kept");
    assert_eq!((&d.kind, d.path.as_str()), (&DecodeErrorKind::WrongType { expected: "object", found: "boolean" }, "$.working_context.segments[0][0]"));
}
