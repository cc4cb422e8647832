//! Output and Artifact tests (the values validators and hosts see).

use super::artifact::{Artifact, Artifacts};
use super::error::ErrorKind;
use super::output::{Completion, CompletionSource, Output};
use super::testutil::*;
use super::wire::Wire;
use crate::chat::{FinishReason, Message, Response, ToolResult, Usage};
use crate::json::codec::DecodeErrorKind;
use crate::json::{FromJson, Json, Payload, ToJson};
use proptest::prelude::*;

fn model_output() -> Output {
    Output::model_response(final_response("sunny"), 3)
}

fn direct_output() -> Output {
    Output::direct_tool_results(vec![ok_result("c1", "lookup", "42"), ok_result("c2", "lookup", "43")], 1)
}

#[test]
fn output_wire_and_accessors() {
    assert_eq!(
        direct_output().to_canonical_string(),
        r#"{"direct_tool_results":[{"id":"c1","is_error":false,"name":"lookup","output":{"content":"42"}},{"id":"c2","is_error":false,"name":"lookup","output":{"content":"43"}}],"model_calls":1,"source":"direct_tool_results"}"#
    );
    assert_eq!(
        model_output().to_canonical_string(),
        r#"{"model_calls":3,"model_response":{"finish_reason":"stop","message":{"parts":[{"text":"sunny","type":"text"}],"role":"assistant"},"usage":{"input_tokens":3,"output_tokens":2}},"source":"model_response"}"#
    );
    assert_eq!(model_output().source(), CompletionSource::ModelResponse);
    assert_eq!(direct_output().source(), CompletionSource::DirectToolResults);
    assert!(model_output().response().is_some() && model_output().tool_results().is_none());
    assert_eq!(direct_output().tool_results().unwrap().len(), 2);
    assert!(direct_output().response().is_none());
    for source in CompletionSource::ALL {
        assert_eq!(CompletionSource::from_name(source.as_str()), Some(source));
    }
    for o in [model_output(), direct_output()] {
        assert_round_trip(&o);
        assert_rejects_unknown_members_everywhere(&o);
    }
}

#[test]
fn output_member_must_match_source() {
    let swapped = edited(&model_output(), |j| {
        obj(j, &[]).insert("source".into(), Json::str("direct_tool_results"));
    });
    let e = assert_rejected::<Output>(&swapped);
    assert_eq!(e.decode_error().unwrap().kind, DecodeErrorKind::MissingMember("direct_tool_results".into()));
    let both = edited(&model_output(), |j| {
        obj(j, &[]).insert("direct_tool_results".into(), Json::Array(vec![ok_result("c", "t", "x").to_json()]));
    });
    let e = assert_rejected::<Output>(&both);
    assert_eq!(e.decode_error().unwrap().kind, DecodeErrorKind::UnknownMember("direct_tool_results".into()));
    assert_rejected::<Output>(&edited(&model_output(), |j| {
        obj(j, &[]).insert("source".into(), Json::str("tool_results"));
    }));
    assert_rejected::<Output>(&edited(&model_output(), |j| {
        obj(j, &[]).remove("model_calls");
    }));
}

#[test]
fn output_rules() {
    let with_call =
        Response::new(Message::assistant_with_calls("x", vec![call("c", "t")]), FinishReason::Stop, Usage::default());
    let invalid = [
        Output::model_response(final_response("x"), 0),
        Output::direct_tool_results(vec![ok_result("c", "t", "x")], 0),
        Output::model_response(Response { message: None, ..final_response("x") }, 1),
        Output::model_response(Response { finish_reason: None, ..final_response("x") }, 1),
        Output::model_response(with_call, 1),
        Output::model_response(Response { message: Some(Message::user("u")), ..final_response("x") }, 1),
        Output::direct_tool_results(vec![], 1),
        Output::direct_tool_results(vec![ToolResult::error("c", "t", "x")], 1),
        Output::direct_tool_results(vec![ok_result("c", "t", "x"), ok_result("c", "u", "y")], 1),
        Output::direct_tool_results(vec![ok_result("c", "bad name", "x")], 1),
    ];
    for o in invalid {
        assert_eq!(o.validate().unwrap_err().kind(), ErrorKind::InvalidExecutionState, "{o:?}");
        assert_rejected::<Output>(&o.to_canonical_string());
        assert!(o.to_payload().is_err());
    }
    // A final answer may finish with `length` (or even `tool_calls`) when it has no calls.
    for reason in [FinishReason::Length, FinishReason::ToolCalls] {
        let o = Output::model_response(Response { finish_reason: Some(reason), ..final_response("x") }, 1);
        assert!(o.validate().is_ok());
    }
    let o = Output { completion: Completion::DirectToolResults(vec![ok_result("c", "t", "x")]), model_calls: u32::MAX, usage: Default::default(), spending: Default::default() };
    assert_round_trip(&o);
}

#[test]
fn artifact_rules_and_decode() {
    let a = Artifact::new(2, 1, "call_9", "research", payload(r#"{"value":"FIRST","n":1.50}"#)).unwrap();
    assert_eq!(
        a.to_canonical_string(),
        r#"{"delegate_name":"research","model_call_sequence":2,"output":{"n":1.50,"value":"FIRST"},"tool_call_id":"call_9","tool_call_index":1}"#
    );
    assert_round_trip(&a);
    // (The output is the delegate's own value, so the probe runs on a scalar output.)
    assert_rejects_unknown_members_everywhere(&Artifact::new(2, 1, "call_9", "research", payload("7")).unwrap());
    assert_eq!(
        (a.model_call_sequence(), a.tool_call_index(), a.tool_call_id(), a.delegate_name()),
        (2, 1, "call_9", "research")
    );
    // Typed decode.
    #[derive(Debug, PartialEq)]
    struct Found {
        value: String,
    }
    impl FromJson for Found {
        fn from_json(value: &Json) -> Result<Self, crate::json::DecodeError> {
            let mut r = crate::json::ObjectReader::new(value)?;
            let found = Found { value: r.required("value")? };
            let _: Json = r.required("n")?;
            r.finish()?;
            Ok(found)
        }
    }
    assert_eq!(a.decode::<Found>().unwrap(), Found { value: "FIRST".into() });
    let e = a.decode::<u64>().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArtifact);
    assert!(e.detail().contains("execution.output.invalid"), "{}", e.detail());
    assert!(e.decode_error().is_some());
    // Construction rules: there is no zero or invalid Artifact.
    for (seq, id, name) in
        [(0, "c", "research"), (1, "", "research"), (1, "c\u{0}", "research"), (1, "c", "bad/name"), (1, "c", "")]
    {
        assert_eq!(Artifact::new(seq, 0, id, name, Payload::null()).unwrap_err().kind(), ErrorKind::InvalidArtifact);
    }
    // Output may be any JSON value, `null` included; it is required.
    let null = Artifact::new(1, 0, "c", "research", Payload::null()).unwrap();
    assert_round_trip(&null);
    assert_rejected::<Artifact>(&edited(&null, |j| {
        obj(j, &[]).remove("output");
    }));
}

#[test]
fn artifacts_are_ordered_copies() {
    let items = vec![
        Artifact::new(1, 0, "a", "research", payload("1")).unwrap(),
        Artifact::new(1, 2, "b", "summarize", payload("2")).unwrap(),
        Artifact::new(2, 0, "c", "research", payload("3")).unwrap(),
    ];
    let artifacts = Artifacts::new(items.clone());
    assert_eq!(artifacts.len(), 3);
    assert!(!artifacts.is_empty());
    assert!(Artifacts::default().is_empty());
    let mut all = artifacts.all();
    assert_eq!(all, items);
    all.clear();
    assert_eq!(artifacts.len(), 3, "all() returns a copy");
    assert_eq!(artifacts.get(1).unwrap().tool_call_id(), "b");
    assert!(artifacts.get(3).is_none());
    let research: Vec<&str> = artifacts.by_delegate("research").map(Artifact::tool_call_id).collect();
    assert_eq!(research, ["a", "c"]);
    let ids: Vec<&str> = (&artifacts).into_iter().map(Artifact::tool_call_id).collect();
    assert_eq!(ids, ["a", "b", "c"]);
    assert_eq!(artifacts.iter().count(), 3);
}

fn arb_output() -> impl Strategy<Value = Output> {
    prop_oneof![
        (arb_text(), proptest::sample::select(FinishReason::ALL.to_vec()), 1u32..).prop_map(|(text, reason, calls)| {
            Output::model_response(Response::new(Message::assistant(text), reason, Usage::new(1, 2)), calls)
        }),
        (prop::collection::vec(arb_result(), 1..4), 1u32..).prop_map(|(results, calls)| {
            let results = results
                .into_iter()
                .enumerate()
                .map(|(i, r)| ToolResult { id: format!("{}{i}", r.id), is_error: false, ..r })
                .collect();
            Output::direct_tool_results(results, calls)
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// The Output round-trips canonically.
    #[test]
    fn output_idempotent(o in arb_output()) {
        let first = o.to_canonical_string();
        let decoded = Output::from_wire_bytes(first.as_bytes()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&decoded, &o);
        prop_assert_eq!(decoded.to_canonical_string(), first);
    }
}
