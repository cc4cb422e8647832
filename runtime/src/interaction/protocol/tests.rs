//! Protocol tests: wire shapes, round trips, every strict rejection, every validity rule, and
//! proptests for canonical idempotence.

use super::*;
use crate::chat::{
    FinishReason, Message, Request, Response, ResponseDelta, ToolCall, ToolResult, Usage,
};
use crate::interaction::error::ErrorKind;
use crate::interaction::testutil::*;
use crate::interaction::wire::Wire;
use crate::json::codec::DecodeErrorKind;
use crate::json::{Json, ObjectBuilder, Payload, ToJson};
use crate::kernel::effect::Settlement;
use crate::kernel::engine_signal::WaitOpened;
use crate::kernel::ids::{EffectId, SignalId, WaitKey};
use crate::kernel::signal::{SettlementStatus, Signal};
use crate::limits::MAX_TOOL_INPUT_PAUSES;
use proptest::prelude::*;

// ---------------------------------------------------------------- samples

fn model_call() -> ModelCallEffect {
    ModelCallEffect::naming(2, &rich_context(), vec!["search_archive".into()], vec![sid("signal:user-correction")])
        .unwrap()
        .0
}

fn model_call_minimal() -> ModelCallEffect {
    ModelCallEffect::naming(1, &Request::new(vec![Message::user("hi")]), vec![], vec![]).unwrap().0
}

fn model_results() -> Vec<ModelResult> {
    vec![
        ModelResult::response(tool_calls_response(vec![call("call_1", "weather")])),
        ModelResult::Response {
            response: final_response("done"),
            replacement_messages: Some(vec![Message::system("summary"), Message::user("q")]),
            clock: None,
        },
        ModelResult::Response {
            response: final_response("done"),
            replacement_messages: None,
            clock: Some(crate::interaction::run_clock::CallClock { started_ms: 10, settled_ms: 12 }),
        },
        ModelResult::OutOfTime { at_ms: 20, deadline_ms: 20 },
        ModelResult::provider_error("rate limited"),
        ModelResult::host_error("network down"),
    ]
}

fn tool_input() -> ToolCallInput {
    ToolCallInput { model_call_sequence: 3, tool_call_index: 1, call: call("call_2", "weather") }
}

fn checkpoint(pause_count: u32) -> ToolCheckpoint {
    ToolCheckpoint { pause_count, input_request: input_request(r#"{"type":"boolean"}"#) }
}

fn tool_effects() -> Vec<ToolCallEffect> {
    vec![
        ToolCallEffect { input: tool_input(), resume: None },
        ToolCallEffect {
            input: tool_input(),
            resume: Some(ToolResume { checkpoint: checkpoint(2), response: payload("true") }),
        },
    ]
}

fn settlements() -> Vec<ToolCallSettlement> {
    vec![
        ToolCallSettlement::Result(SettledToolResult {
            result: ok_result("call_2", "weather", "18C"),
            direct: true,
            advertised_tool_names: vec!["search_archive".into(), "fetch".into()],
        }),
        ToolCallSettlement::Result(SettledToolResult::new(ToolResult::error("call_2", "weather", "boom"), false)),
        ToolCallSettlement::Checkpoint(checkpoint(1)),
    ]
}

fn steer() -> Steer {
    Steer { messages: vec![Message::user("Use the newer requirements."), Message::user("And be brief.")] }
}

fn delta() -> ModelResponseDelta {
    ModelResponseDelta {
        response_delta: ResponseDelta {
            text: Some("hel".into()),
            tool_calls: vec![crate::chat::ToolCallDelta {
                index: 0,
                id: Some("c1".into()),
                name: Some("weather".into()),
                arguments: Some("{\"ci".into()),
            }],
            reasoning: vec![],
            finish_reason: Some(FinishReason::ToolCalls),
            usage: Some(Usage::new(1, 2)),
        },
    }
}

fn input() -> InteractionInput {
    InteractionInput { messages: rich_context().messages, options: rich_context().options, lineage: None, budget: None, started_ms: None, deadline_ms: None }
}

// ---------------------------------------------------------------- wire shapes

#[test]
fn pinned_wire_text() {
    assert_eq!(
        model_call_minimal().to_canonical_string(),
        format!(
            r#"{{"model_call":{{"context":{{"chain":"{}","messages":1}},"model_call_sequence":1}},"operation":"model_call"}}"#,
            crate::kernel::segment::chain_digest(&[crate::kernel::segment::Segment::from_canonical(
                r#"[{"parts":[{"text":"hi","type":"text"}],"role":"user"}]"#.to_owned()
            )])
            .to_string()
        )
    );
    assert_eq!(
        ModelResult::provider_error(" boom ").to_canonical_string(),
        r#"{"model_result":{"error":"boom"},"operation":"model_call"}"#
    );
    assert_eq!(
        ModelResult::host_error("down").to_canonical_string(),
        r#"{"model_result":{"host_error":"down"},"operation":"model_call"}"#
    );
    assert_eq!(
        ToolCallEffect { input: tool_input(), resume: None }.to_canonical_string(),
        r#"{"operation":"tool_call","tool_call":{"call":{"arguments":"{\"q\":\"x\"}","id":"call_2","name":"weather"},"model_call_sequence":3,"tool_call_index":1}}"#
    );
    assert_eq!(
        tool_input().to_canonical_string(),
        r#"{"call":{"arguments":"{\"q\":\"x\"}","id":"call_2","name":"weather"},"model_call_sequence":3,"tool_call_index":1}"#
    );
    assert_eq!(
        settlements()[1].to_canonical_string(),
        r#"{"operation":"tool_call","tool_result":{"direct":false,"result":{"id":"call_2","is_error":true,"name":"weather","output":{"content":"boom"}}}}"#
    );
    assert_eq!(
        settlements()[2].to_canonical_string(),
        r#"{"operation":"tool_call","tool_result":{"checkpoint":{"input_request":{"continuation_state":{"n":1e400,"step":1},"prompt":{"question":"approve?"},"response_schema":{"type":"boolean"}},"pause_count":1}}}"#
    );
    assert_eq!(
        WaitOpenedPayload { input_request: input_request("true") }.to_canonical_string(),
        r#"{"input_request":{"continuation_state":{"n":1e400,"step":1},"prompt":{"question":"approve?"},"response_schema":true},"operation":"wait_opened"}"#
    );
    assert_eq!(
        InputResponse { response: Payload::null() }.to_canonical_string(),
        r#"{"input_response":null,"operation":"input_response"}"#
    );
    assert_eq!(
        Steer { messages: vec![Message::user("a")] }.to_canonical_string(),
        r#"{"operation":"steer","steer":{"messages":[{"parts":[{"text":"a","type":"text"}],"role":"user"}]}}"#
    );
    assert_eq!(
        ModelResponseDelta { response_delta: ResponseDelta::text("x") }.to_canonical_string(),
        r#"{"response_delta":{"text":"x"}}"#
    );
    assert_eq!(
        InteractionInput::new(vec![Message::user("a")]).to_canonical_string(),
        r#"{"messages":[{"parts":[{"text":"a","type":"text"}],"role":"user"}]}"#
    );
}

#[test]
fn round_trips() {
    assert_round_trip(&model_call());
    assert_round_trip(&model_call_minimal());
    let timed = ModelCallEffect { time: Some(crate::interaction::run_clock::CallTime { deadline_ms: Some(9) }), ..model_call_minimal() };
    assert_round_trip(&timed);
    assert!(timed.to_canonical_string().contains(r#""time":{"deadline_ms":9}"#));
    model_results().iter().for_each(assert_round_trip);
    assert_round_trip(&tool_input());
    tool_effects().iter().for_each(assert_round_trip);
    settlements().iter().for_each(assert_round_trip);
    assert_round_trip(&checkpoint(MAX_TOOL_INPUT_PAUSES));
    assert_round_trip(&WaitOpenedPayload { input_request: input_request("true") });
    assert_round_trip(&InputResponse { response: payload(r#"{"n":9007199254740993}"#) });
    assert_round_trip(&InputResponse { response: Payload::null() });
    assert_round_trip(&steer());
    assert_round_trip(&delta());
    assert_round_trip(&input());
    assert_round_trip(&InteractionInput::new(vec![Message::user("a")]));
}

#[test]
fn unknown_members_are_rejected_at_every_level() {
    let mut probed = 0;
    probed += assert_rejects_unknown_members_everywhere(&model_call());
    for r in model_results() {
        probed += assert_rejects_unknown_members_everywhere(&r);
    }
    probed += assert_rejects_unknown_members_everywhere(&tool_input());
    for e in tool_effects() {
        probed += assert_rejects_unknown_members_everywhere(&e);
    }
    for s in settlements() {
        probed += assert_rejects_unknown_members_everywhere(&s);
    }
    probed += assert_rejects_unknown_members_everywhere(&WaitOpenedPayload { input_request: input_request("true") });
    probed += assert_rejects_unknown_members_everywhere(&InputResponse { response: payload("1") });
    probed += assert_rejects_unknown_members_everywhere(&steer());
    probed += assert_rejects_unknown_members_everywhere(&delta());
    probed += assert_rejects_unknown_members_everywhere(&input());
    // Envelope, body, request, options, messages, parts, tool outputs, usage, input requests...
    assert!(probed > 60, "probed only {probed} objects");
}

/// Every envelope: exactly `{operation, member}`.
#[test]
fn envelope_member_set_is_exact() {
    fn check<T: Wire + std::fmt::Debug>(value: &T, member: &str) {
        let without = edited(value, |j| {
            obj(j, &[]).remove(member);
        });
        let e = assert_rejected::<T>(&without);
        assert_eq!(e.decode_error().unwrap().kind, DecodeErrorKind::MissingMember(member.into()), "{without}");
        let no_op = edited(value, |j| {
            obj(j, &[]).remove("operation");
        });
        assert_rejected::<T>(&no_op);
        let wrong_op = edited(value, |j| {
            obj(j, &[]).insert("operation".into(), Json::str("steer_all"));
        });
        assert_eq!(assert_rejected::<T>(&wrong_op).decode_error().unwrap().path, "$.operation");
        let null_body = edited(value, |j| {
            obj(j, &[]).insert(member.into(), Json::Null);
        });
        if member != "input_response" {
            assert_rejected::<T>(&null_body);
        }
        for other in super::BODY_MEMBERS.iter().filter(|m| **m != member) {
            let extra = edited(value, |j| {
                obj(j, &[]).insert((*other).into(), Json::object());
            });
            let e = assert_rejected::<T>(&extra);
            assert_eq!(e.decode_error().unwrap().kind, DecodeErrorKind::UnknownMember((*other).into()));
        }
    }
    check(&model_call(), "model_call");
    for r in model_results() {
        check(&r, "model_result");
    }
    for e in tool_effects() {
        check(&e, "tool_call");
    }
    for s in settlements() {
        check(&s, "tool_result");
    }
    check(&WaitOpenedPayload { input_request: input_request("true") }, "input_request");
    check(&InputResponse { response: payload("1") }, "input_response");
    check(&steer(), "steer");
    // Same operation, other direction: an effect is not a settlement and vice versa.
    assert_rejected::<ModelResult>(&model_call().to_canonical_string());
    assert_rejected::<ModelCallEffect>(&model_results()[0].to_canonical_string());
    assert_rejected::<ToolCallSettlement>(&tool_effects()[0].to_canonical_string());
    assert_rejected::<ToolCallEffect>(&settlements()[0].to_canonical_string());
    // Not an object at all.
    assert_rejected::<Steer>("[]");
    assert_rejected::<Steer>("null");
}

#[test]
fn present_but_empty_lists_are_rejected() {
    let cases = [
        edited(&model_call(), |j| {
            obj(j, &["model_call"]).insert("advertised_tool_names".into(), Json::Array(vec![]));
        }),
        edited(&model_call(), |j| {
            obj(j, &["model_call"]).insert("applied_steer_signal_ids".into(), Json::Array(vec![]));
        }),
    ];
    for text in &cases {
        assert!(assert_rejected::<ModelCallEffect>(text).detail().contains("present but empty"), "{text}");
    }
    // Absent is accepted and means "none".
    let absent = model_call_minimal();
    assert!(absent.advertised_tool_names.is_empty() && absent.applied_steer_signal_ids.is_empty());
    assert_round_trip(&absent);

    let empty_replacement = edited(&model_results()[0], |j| {
        obj(j, &["model_result"]).insert("replacement_messages".into(), Json::Array(vec![]));
    });
    assert!(assert_rejected::<ModelResult>(&empty_replacement).detail().contains("replacement_messages"));
    let empty_names = edited(&settlements()[0], |j| {
        obj(j, &["tool_result"]).insert("advertised_tool_names".into(), Json::Array(vec![]));
    });
    assert_rejected::<ToolCallSettlement>(&empty_names);
    // Absent replacement and a present one differ.
    let with = &model_results()[1];
    let without = ModelResult::response(final_response("done"));
    assert_ne!(with.to_canonical_string(), without.to_canonical_string());
}

// ---------------------------------------------------------------- validity rules

#[test]
fn model_call_rules() {
    let bad = |edit: fn(&mut ModelCallEffect)| {
        let mut e = model_call();
        edit(&mut e);
        let err = e.validate().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidExecutionState);
        assert_rejected::<ModelCallEffect>(&e.to_canonical_string());
        assert!(e.to_payload().is_err(), "to_payload validates first");
    };
    bad(|e| e.model_call_sequence = 0);
    bad(|e| e.context.messages = 0);
    bad(|e| e.advertised_tool_names = vec!["a".into(), "a".into()]);
    bad(|e| e.advertised_tool_names = vec![" a".into()]);
    bad(|e| e.advertised_tool_names = vec!["".into()]);
    bad(|e| e.advertised_tool_names = vec!["a/b".into()]);
    bad(|e| e.applied_steer_signal_ids = vec![sid("s1"), sid("s1")]);
    // Number text survives exactly.
    let text = model_call().to_canonical_string();
    assert!(text.contains(r#""temperature":0.70"#), "{text}");
    // The call names its context: the segments it was declared with rebuild the request, any
    // other list is refused.
    let (effect, segments) = ModelCallEffect::naming(2, &rich_context(), vec![], vec![]).unwrap();
    assert_eq!(effect.request(&segments).unwrap(), rich_context());
    let (_, other) = ModelCallEffect::naming(2, &Request::new(vec![Message::user("other")]), vec![], vec![]).unwrap();
    assert!(effect.request(&other).is_err());
    assert!(effect.request(&[]).is_err());
}

#[test]
fn model_result_rules() {
    let body = |members: &[(&str, Json)]| {
        let mut b = ObjectBuilder::new();
        for (k, v) in members {
            b = b.value(k, v.clone());
        }
        ObjectBuilder::new()
            .field("operation", "model_call")
            .value("model_result", b.build())
            .build()
            .to_canonical_string()
    };
    let response = final_response("done").to_json();
    let messages = Json::Array(vec![Message::user("q").to_json()]);
    let rejected = [
        body(&[]),
        body(&[("response", response.clone()), ("error", Json::str("e"))]),
        body(&[("response", response.clone()), ("host_error", Json::str("e"))]),
        body(&[("error", Json::str("e")), ("host_error", Json::str("e"))]),
        body(&[("error", Json::str("e")), ("replacement_messages", messages.clone())]),
        body(&[("host_error", Json::str("e")), ("replacement_messages", messages.clone())]),
        body(&[("replacement_messages", messages.clone())]),
        body(&[
            ("response", response.clone()),
            ("replacement_messages", Json::Array(vec![Message::user("").to_json()])),
        ]),
        // Error texts must already be normalized diagnostics.
        body(&[("error", Json::str(""))]),
        body(&[("error", Json::str(" padded "))]),
        body(&[("host_error", Json::str("x".repeat(2049)))]),
        // A response whose message is not an assistant message.
        body(&[("response", Response { message: Some(Message::user("u")), ..Response::default() }.to_json())]),
        body(&[("response", Json::Null)]),
    ];
    for text in &rejected {
        assert_rejected::<ModelResult>(text);
    }
    assert!(ModelResult::from_wire_bytes(
        body(&[("response", response), ("replacement_messages", messages)]).as_bytes()
    )
    .is_ok());
    assert_eq!(
        ModelResult::provider_error("").to_canonical_string(),
        body(&[("error", Json::str("Interaction operation failed"))])
    );
    // Status follows the variant.
    let statuses: Vec<_> = model_results().iter().map(ModelResult::status).collect();
    use SettlementStatus::*;
    assert_eq!(statuses, [Succeeded, Succeeded, Succeeded, Failed, Failed, Failed]);
    // Readings and a refusal before the deadline are refused.
    assert_rejected::<ModelResult>(&body(&[("out_of_time", crate::json::parse(br#"{"at_ms":1,"deadline_ms":2}"#).unwrap())]));
    assert_rejected::<ModelResult>(&body(&[("error", Json::str("x")), ("clock", crate::json::parse(br#"{"settled_ms":2,"started_ms":1}"#).unwrap())]));
    for r in model_results() {
        let s = r.to_settlement().unwrap();
        assert_eq!(s.status, r.status());
        assert_eq!(ModelResult::from_payload(&s.payload).unwrap(), r);
    }
}

fn settlement_signal(payload: Payload, status: SettlementStatus, addressed: bool) -> Signal {
    let effect = EffectId::parse("effect:e1").unwrap();
    let wait = addressed.then(|| crate::kernel::ids::WaitId::of_effect(&effect));
    let id = if addressed { SignalId::wait_opening(wait.as_ref().unwrap()) } else { SignalId::settlement(&effect) };
    Signal::new(id, wait, payload, (!addressed).then_some(status)).unwrap()
}

#[test]
fn model_result_from_signal() {
    let ok = &model_results()[0];
    let sig = settlement_signal(ok.to_payload().unwrap(), SettlementStatus::Succeeded, false);
    assert_eq!(&ModelResult::from_signal(&sig).unwrap(), ok);
    let mismatch = settlement_signal(ok.to_payload().unwrap(), SettlementStatus::Failed, false);
    assert!(ModelResult::from_signal(&mismatch).unwrap_err().detail().contains("status"));
    let addressed = settlement_signal(ok.to_payload().unwrap(), SettlementStatus::Succeeded, true);
    assert!(ModelResult::from_signal(&addressed).unwrap_err().detail().contains("wait-addressed"));
    let external = Signal::new(sid("s1"), None, ok.to_payload().unwrap(), None).unwrap();
    assert!(ModelResult::from_signal(&external).is_err());
}

#[test]
fn tool_call_input_rules() {
    for bad in [
        ToolCallInput { model_call_sequence: 0, ..tool_input() },
        ToolCallInput { call: ToolCall::new("", "weather", ""), ..tool_input() },
        ToolCallInput { call: ToolCall::new("c", "bad name", ""), ..tool_input() },
    ] {
        assert_eq!(bad.validate().unwrap_err().kind(), ErrorKind::InvalidInput);
        assert_rejected::<ToolCallInput>(&bad.to_canonical_string());
    }
    // The stored call never carries a continuation.
    let resumed_body = edited(&tool_effects()[1], |j| *j = j.get("tool_call").unwrap().clone());
    let e = assert_rejected::<ToolCallInput>(&resumed_body);
    assert!(matches!(e.decode_error().unwrap().kind, DecodeErrorKind::UnknownMember(_)));
    // Blank and invalid-JSON arguments are the model's text and are carried unchanged.
    for args in ["", "{not json", "  "] {
        assert_round_trip(&ToolCallInput { call: ToolCall::new("c", "t", args), ..tool_input() });
    }
}

#[test]
fn tool_call_effect_rules() {
    let resumed = &tool_effects()[1];
    let no_response = edited(resumed, |j| {
        obj(j, &["tool_call"]).remove("input_response");
    });
    assert!(assert_rejected::<ToolCallEffect>(&no_response).detail().contains("requires an input_response"));
    let no_checkpoint = edited(resumed, |j| {
        obj(j, &["tool_call"]).remove("checkpoint");
    });
    assert!(assert_rejected::<ToolCallEffect>(&no_checkpoint).detail().contains("requires a checkpoint"));
    // The response must satisfy the checkpoint's schema (boolean here).
    let wrong_type = edited(resumed, |j| {
        obj(j, &["tool_call"]).insert("input_response".into(), Json::str("yes"));
    });
    assert_rejected::<ToolCallEffect>(&wrong_type);
    let null_response = edited(resumed, |j| {
        obj(j, &["tool_call"]).insert("input_response".into(), Json::Null);
    });
    assert_rejected::<ToolCallEffect>(&null_response);
    // `null` is accepted where the schema accepts it.
    let any = ToolCallEffect {
        input: tool_input(),
        resume: Some(ToolResume {
            checkpoint: ToolCheckpoint { pause_count: 1, input_request: input_request("true") },
            response: Payload::null(),
        }),
    };
    assert_round_trip(&any);
    for count in [0, u32::MAX] {
        let bad = edited(resumed, |j| {
            obj(j, &["tool_call", "checkpoint"]).insert("pause_count".into(), Json::u64(u64::from(count)));
        });
        assert_rejected::<ToolCallEffect>(&bad);
    }
    let mut invalid = resumed.clone();
    invalid.resume.as_mut().unwrap().response = payload("3");
    assert!(invalid.validate().is_err());
    assert!(invalid.to_payload().is_err());
}

#[test]
fn checkpoint_rules() {
    for count in [0, u32::MAX] {
        let c = checkpoint(count);
        assert_eq!(c.validate().unwrap_err().kind(), ErrorKind::InvalidToolInputRequest);
        assert_rejected::<ToolCheckpoint>(&c.to_canonical_string());
    }
    assert!(checkpoint(1).validate().is_ok());
    assert!(checkpoint(MAX_TOOL_INPUT_PAUSES).validate().is_ok());
    // The counter never wraps.
    let req = input_request("true");
    assert_eq!(ToolCheckpoint::next(None, req.clone()).unwrap().pause_count, 1);
    assert_eq!(ToolCheckpoint::next(Some(&checkpoint(4)), req.clone()).unwrap().pause_count, 5);
    assert!(ToolCheckpoint::next(Some(&checkpoint(MAX_TOOL_INPUT_PAUSES)), req.clone()).is_none());
    assert!(ToolCheckpoint::next(Some(&checkpoint(u32::MAX)), req).is_none());
    // An invalid request (schema that does not compile) is rejected by the request codec.
    let bad_schema = edited(&checkpoint(1), |j| {
        obj(j, &["input_request"]).insert("response_schema".into(), json(r#"{"type":"nope"}"#));
    });
    assert_rejected::<ToolCheckpoint>(&bad_schema);
    let missing_state = edited(&checkpoint(1), |j| {
        obj(j, &["input_request"]).remove("continuation_state");
    });
    assert_rejected::<ToolCheckpoint>(&missing_state);
}

#[test]
fn settled_result_rules() {
    let bad = [
        SettledToolResult { result: ToolResult::error("c", "t", "x"), direct: true, advertised_tool_names: vec![] },
        SettledToolResult {
            result: ToolResult::error("c", "t", "x"),
            direct: false,
            advertised_tool_names: vec!["later".into()],
        },
        SettledToolResult {
            result: ok_result("c", "t", "x"),
            direct: false,
            advertised_tool_names: vec!["a".into(), "a".into()],
        },
        SettledToolResult { result: ok_result("c", "t", "x"), direct: false, advertised_tool_names: vec!["a ".into()] },
        SettledToolResult { result: ok_result("", "t", "x"), direct: false, advertised_tool_names: vec![] },
    ];
    for s in bad {
        assert!(s.validate().is_err(), "{s:?}");
        assert_rejected::<SettledToolResult>(&s.to_canonical_string());
        assert_rejected::<ToolCallSettlement>(&ToolCallSettlement::Result(s).to_canonical_string());
    }
    // A successful direct result with advertisements is fine.
    let good =
        SettledToolResult { result: ok_result("c", "t", "x"), direct: true, advertised_tool_names: vec!["a".into()] };
    assert_round_trip(&good);
    // `toolCallResult` is the settlement body without the envelope.
    let body = edited(&ToolCallSettlement::Result(good.clone()), |j| *j = j.get("tool_result").unwrap().clone());
    assert_eq!(body, good.to_canonical_string());
}

#[test]
fn settlement_variants_do_not_mix() {
    let mixed = edited(&settlements()[2], |j| {
        obj(j, &["tool_result"]).insert("direct".into(), Json::Bool(false));
    });
    let e = assert_rejected::<ToolCallSettlement>(&mixed);
    assert_eq!(e.decode_error().unwrap().kind, DecodeErrorKind::UnknownMember("direct".into()));
    let mixed = edited(&settlements()[0], |j| {
        obj(j, &["tool_result"]).insert("checkpoint".into(), checkpoint(1).to_json());
    });
    assert!(matches!(
        assert_rejected::<ToolCallSettlement>(&mixed).decode_error().unwrap().kind,
        DecodeErrorKind::UnknownMember(_)
    ));
    let no_direct = edited(&settlements()[0], |j| {
        obj(j, &["tool_result"]).remove("direct");
    });
    assert_rejected::<ToolCallSettlement>(&no_direct);
    let bad_checkpoint = ToolCallSettlement::Checkpoint(checkpoint(0));
    assert_eq!(bad_checkpoint.validate().unwrap_err().kind(), ErrorKind::InvalidExecutionState);
    assert_rejected::<ToolCallSettlement>(&bad_checkpoint.to_canonical_string());
}

#[test]
fn settlement_from_signal() {
    for s in settlements() {
        let settlement = s.to_settlement().unwrap();
        assert_eq!(settlement.status, SettlementStatus::Succeeded, "both variants succeed");
        let sig = settlement_signal(settlement.payload.clone(), SettlementStatus::Succeeded, false);
        assert_eq!(ToolCallSettlement::from_signal(&sig).unwrap(), s);
        let failed = settlement_signal(settlement.payload.clone(), SettlementStatus::Failed, false);
        assert!(ToolCallSettlement::from_signal(&failed).is_err());
        let addressed = settlement_signal(settlement.payload, SettlementStatus::Succeeded, true);
        assert!(ToolCallSettlement::from_signal(&addressed).is_err());
    }
}

#[test]
fn wait_opened_from_kernel_opening() {
    let echoed = WaitOpenedPayload { input_request: input_request(r#"{"type":"boolean"}"#) };
    let effect = EffectId::parse("effect:e1").unwrap();
    let wait = crate::kernel::ids::WaitId::of_effect(&effect);
    let key = WaitKey::parse("interaction.input.k").unwrap();
    let opening = |echo: Option<&Payload>| {
        Signal::new(
            SignalId::wait_opening(&wait),
            Some(wait.clone()),
            Payload::from_json(WaitOpened::payload_json(&key, echo)).unwrap(),
            None,
        )
        .unwrap()
    };
    let parsed = WaitOpenedPayload::from_signal(&opening(Some(&echoed.to_payload().unwrap()))).unwrap();
    assert_eq!(parsed.wait_id, wait);
    assert_eq!(parsed.key, key);
    assert_eq!(parsed.payload, echoed);
    let e = WaitOpenedPayload::from_signal(&opening(None)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidToolInputRequest);
    let e = WaitOpenedPayload::from_signal(&opening(Some(&steer().to_payload().unwrap()))).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidToolInputRequest);
    // Not an opening at all (an unaddressed settlement).
    let s = settlement_signal(echoed.to_payload().unwrap(), SettlementStatus::Succeeded, false);
    assert!(WaitOpenedPayload::from_signal(&s).is_err());
    let bad_request = edited(&echoed, |j| {
        obj(j, &["input_request"]).insert("response_schema".into(), json(r#"{"minimum":"x"}"#));
    });
    assert_rejected::<WaitOpenedPayload>(&bad_request);
}

#[test]
fn input_response_rules() {
    let wait = crate::kernel::ids::WaitId::of_effect(&EffectId::parse("effect:e1").unwrap());
    let answer = InputResponse::new(&json(r#"{"approved":true}"#)).unwrap();
    let sig = Signal::new(sid("a1"), Some(wait.clone()), answer.to_payload().unwrap(), None).unwrap();
    assert_eq!(InputResponse::from_signal(&sig).unwrap(), (wait, answer.clone()));
    let unaddressed = Signal::new(sid("a1"), None, answer.to_payload().unwrap(), None).unwrap();
    assert_eq!(InputResponse::from_signal(&unaddressed).unwrap_err().kind(), ErrorKind::InvalidToolInputRequest);
    let settled = settlement_signal(answer.to_payload().unwrap(), SettlementStatus::Succeeded, false);
    assert!(InputResponse::from_signal(&settled).is_err());
    let deep = (0..200).fold(Json::Null, |v, _| Json::Array(vec![v]));
    assert_eq!(InputResponse::new(&deep).unwrap_err().kind(), ErrorKind::InvalidToolInputRequest);
}

#[test]
fn steer_rules() {
    for messages in [
        vec![],
        vec![Message::assistant("a")],
        vec![Message::user("a"), Message::system("s")],
        vec![Message::tool_results(vec![ToolResult::error("c", "t", "x")])],
        vec![Message::user("")],
    ] {
        let s = Steer { messages };
        assert_eq!(s.validate().unwrap_err().kind(), ErrorKind::InvalidSteer);
        assert_rejected::<Steer>(&s.to_canonical_string());
    }
}

#[test]
fn delta_rules() {
    assert_rejected::<ModelResponseDelta>(r#"{"response_delta":{}}"#);
    assert_rejected::<ModelResponseDelta>(r#"{"response_delta":{"tool_calls":[{"index":0}]}}"#);
    assert_rejected::<ModelResponseDelta>(r#"{"response_delta":{"text":"a"},"operation":"model_call"}"#);
    assert_rejected::<ModelResponseDelta>(r#"{"delta":{"text":"a"}}"#);
    assert_rejected::<ModelResponseDelta>(r#"{"response_delta":{"usage":{"input_tokens":1}}}"#);
}

#[test]
fn input_rules() {
    for bad in [
        r#"{"messages":[]}"#,
        r#"{"messages":[{"role":"user","parts":[{"type":"text","text":"a"}]},{"role":"system","parts":[{"type":"text","text":"s"}]}]}"#,
        r#"{"messages":[{"role":"user","parts":[{"type":"text","text":"a"}]}],"options":{"top_p":2}}"#,
        r#"{"messages":[{"role":"user","parts":[{"type":"text","text":"a"}]}],"tools":[]}"#,
        r#"{"messages":[{"role":"user","parts":[{"type":"text","text":"a"}]}],"options":null}"#,
        r#"{"options":{}}"#,
    ] {
        assert_rejected::<InteractionInput>(bad);
    }
    let i = input();
    let wc = i.working_context();
    assert!(wc.tools.is_empty());
    assert_eq!(wc.messages, i.messages);
    assert_eq!(wc.options, i.options);
}

#[test]
fn operation_names() {
    for op in Operation::ALL {
        assert_eq!(Operation::from_name(op.as_str()), Some(op));
    }
    assert_eq!(Operation::from_name("start_child"), None);
}

// ---------------------------------------------------------------- proptests

fn arb_model_call() -> impl Strategy<Value = ModelCallEffect> {
    (1u32.., arb_context(), arb_names(), arb_signal_ids()).prop_map(|(model_call_sequence, request, names, ids)| {
        ModelCallEffect::naming(model_call_sequence, &request, names, ids).unwrap().0
    })
}

fn arb_model_result() -> impl Strategy<Value = ModelResult> {
    prop_oneof![
        (arb_response(), proptest::option::of(prop::collection::vec(arb_message(), 1..3)))
            .prop_map(|(response, replacement_messages)| ModelResult::Response { response, replacement_messages, clock: None }),
        "[ a-z\u{1}é]{0,12}".prop_map(|t| ModelResult::provider_error(&t)),
        "[ a-z]{0,12}".prop_map(|t| ModelResult::host_error(&t)),
    ]
}

fn arb_tool_input() -> impl Strategy<Value = ToolCallInput> {
    (1u32.., any::<u32>(), arb_call()).prop_map(|(model_call_sequence, tool_call_index, call)| ToolCallInput {
        model_call_sequence,
        tool_call_index,
        call,
    })
}

fn arb_checkpoint() -> impl Strategy<Value = (ToolCheckpoint, Json)> {
    (1..=MAX_TOOL_INPUT_PAUSES, arb_request_and_answer())
        .prop_map(|(pause_count, (input_request, answer))| (ToolCheckpoint { pause_count, input_request }, answer))
}

fn arb_tool_effect() -> impl Strategy<Value = ToolCallEffect> {
    (arb_tool_input(), proptest::option::of(arb_checkpoint())).prop_map(|(input, resume)| ToolCallEffect {
        input,
        resume: resume
            .map(|(checkpoint, answer)| ToolResume { checkpoint, response: Payload::from_json(answer).unwrap() }),
    })
}

fn arb_settled() -> impl Strategy<Value = SettledToolResult> {
    (arb_result(), any::<bool>(), arb_names()).prop_map(|(result, direct, names)| {
        let error = result.is_error;
        SettledToolResult {
            result,
            direct: direct && !error,
            advertised_tool_names: if error { vec![] } else { names },
        }
    })
}

fn arb_settlement() -> impl Strategy<Value = ToolCallSettlement> {
    prop_oneof![
        arb_settled().prop_map(ToolCallSettlement::Result),
        arb_checkpoint().prop_map(|(c, _)| ToolCallSettlement::Checkpoint(c)),
    ]
}

/// decode → encode → decode → encode is idempotent, starting from arbitrary valid values.
fn idempotent<T: Wire + PartialEq + std::fmt::Debug>(value: &T) -> Result<(), TestCaseError> {
    prop_assert!(value.validate().is_ok(), "generated an invalid value: {:?}", value);
    let first = value.to_canonical_string();
    let decoded = T::from_wire_bytes(first.as_bytes()).map_err(|e| TestCaseError::fail(format!("{first}: {e}")))?;
    prop_assert_eq!(&decoded, value);
    let second = decoded.to_canonical_string();
    prop_assert_eq!(&second, &first);
    let again = T::from_wire_bytes(second.as_bytes()).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(again.to_canonical_string(), second);
    Ok(())
}

/// A settlement's remembered value (what its receiver takes instead of decoding) is exactly
/// what the payload's stored bytes decode to, and what `from_signal` returns either way.
fn remembered_equals_decoded<T>(value: &T, settlement: &Settlement, from_signal: impl Fn(&Signal) -> T) -> Result<(), TestCaseError>
where
    T: Wire + Clone + PartialEq + std::fmt::Debug + Send + Sync + 'static,
{
    let payload = &settlement.payload;
    let remembered = payload.decoded::<T>().ok_or_else(|| TestCaseError::fail("the settlement remembers its value"))?;
    let stored = Payload::from_bytes(payload.canonical().as_bytes()).unwrap();
    prop_assert!(stored.decoded::<T>().is_none(), "a payload read from bytes remembers nothing");
    let strict = T::from_payload(&stored).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(remembered.as_ref(), &strict);
    prop_assert_eq!(&strict, value);
    prop_assert_eq!(from_signal(&settlement_signal(payload.clone(), settlement.status, false)), strict.clone());
    prop_assert_eq!(from_signal(&settlement_signal(stored, settlement.status, false)), strict);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn a_remembered_model_result_is_its_decoding(v in arb_model_result()) {
        let settlement = v.to_settlement().unwrap();
        remembered_equals_decoded(&v, &settlement, |s| ModelResult::from_signal(s).unwrap())?;
    }

    #[test]
    fn an_output_built_around_a_remembered_response_is_its_encoding(
        response in arb_response(),
        calls in 1u32..1000,
        (input, output, cost, tools) in (0u64..3, 0u64..100_000, 0u64..3, 0u64..2),
        more in proptest::option::of(prop::collection::vec(arb_message(), 1..2)),
    ) {
        let usage = Usage::new(input, output);
        let spending = crate::interaction::budget::Spending { cost_micros: cost, tool_calls: tools, ..Default::default() };
        let out = crate::interaction::output::Output::model_response(response.clone(), calls).with_usage(usage).with_spending(spending);
        // A response alone is remembered with its encoding; one beside replacement messages
        // is not (its text has more members), and an Output encodes its response itself.
        let result = ModelResult::Response { response, replacement_messages: more.clone(), clock: None };
        let settlement = result.to_settlement().unwrap();
        let encoded = ModelResult::remembered_response(&settlement.payload);
        prop_assert_eq!(encoded.is_some(), more.is_none());
        let stored = Payload::from_bytes(settlement.payload.canonical().as_bytes()).unwrap();
        prop_assert!(ModelResult::remembered_response(&stored).is_none(), "bytes carry no encoding to reuse");
        if out.validate().is_ok() {
            let built = out.payload_of_valid(encoded).unwrap();
            let plain = out.to_payload().unwrap();
            prop_assert_eq!(built.canonical(), plain.canonical());
            prop_assert_eq!(built.value(), plain.value());
            let alone = out.payload_of_valid(None).unwrap();
            prop_assert_eq!(alone.canonical(), plain.canonical());
        }
    }

    #[test]
    fn a_remembered_tool_settlement_is_its_decoding(v in arb_settlement()) {
        let settlement = v.to_settlement().unwrap();
        remembered_equals_decoded(&v, &settlement, |s| ToolCallSettlement::from_signal(s).unwrap())?;
    }

    #[test]
    fn model_call_idempotent(v in arb_model_call()) { idempotent(&v)?; }

    #[test]
    fn model_result_idempotent(v in arb_model_result()) { idempotent(&v)?; }

    #[test]
    fn tool_input_idempotent(v in arb_tool_input()) { idempotent(&v)?; }

    #[test]
    fn tool_effect_idempotent(v in arb_tool_effect()) { idempotent(&v)?; }

    #[test]
    fn settlement_idempotent(v in arb_settlement()) { idempotent(&v)?; }

    #[test]
    fn wait_opened_idempotent((request, _) in arb_request_and_answer()) {
        idempotent(&WaitOpenedPayload { input_request: request })?;
    }

    #[test]
    fn input_response_idempotent(v in arb_json()) {
        idempotent(&InputResponse::new(&v).unwrap())?;
    }

    #[test]
    fn steer_idempotent(messages in prop::collection::vec(arb_user_message(), 1..4)) {
        idempotent(&Steer { messages })?;
    }

    #[test]
    fn input_idempotent(context in arb_context()) {
        idempotent(&InteractionInput { messages: context.messages, options: context.options, lineage: None, budget: None, started_ms: None, deadline_ms: None })?;
    }

    /// Every accepted value rejects an unknown member in every strict object.
    #[test]
    fn generated_values_reject_unknown_members(v in arb_model_call(), r in arb_model_result(), s in arb_settlement(), e in arb_tool_effect()) {
        assert_rejects_unknown_members_everywhere(&v);
        assert_rejects_unknown_members_everywhere(&r);
        assert_rejects_unknown_members_everywhere(&s);
        assert_rejects_unknown_members_everywhere(&e);
    }

    /// Decoding arbitrary JSON never panics, and whatever is accepted is canonical-stable.
    #[test]
    fn arbitrary_json_never_panics(v in arb_json()) {
        let text = v.to_canonical_string();
        let _ = ModelCallEffect::from_wire_bytes(text.as_bytes());
        let _ = ModelResult::from_wire_bytes(text.as_bytes());
        let _ = ToolCallSettlement::from_wire_bytes(text.as_bytes());
        if let Ok(r) = InputResponse::from_wire_bytes(text.as_bytes()) {
            prop_assert_eq!(r.to_canonical_string(), text);
        }
    }
}
