//! Faults through the whole parent: Unknown tool Effects
//! (panic, host failure) until the host resolves them, kill while Unknown, finish reasons,
//! model host failures and bad advertisements.

use super::*;
use crate::chat::{ToolOutput, ToolResult};
use crate::interaction::codes;
use crate::interaction::model::ModelContextReducer;
use crate::interaction::output::CompletionSource;
use crate::interaction::protocol::ToolCallSettlement;
use crate::kernel::effect::Settlement;
use crate::kernel::ids::EffectId;
use crate::kernel::owner::{Command, Reply};
use crate::kernel::snapshot::TreeSnapshot;
use crate::kernel::status::Status;

fn resolve(r: &mut DirectRunner, process: ProcessId, effect: EffectId, settlement: Settlement) {
    let reply = r.command(Command::Resolve { process, effect, settlement });
    assert!(matches!(reply, Ok(Reply::Resolved)), "{reply:?}");
    r.run_to_idle();
}

fn tool_settlement(id: &str, name: &str, output: ToolResult) -> Settlement {
    assert!(output.id == id && output.name == name);
    ToolCallSettlement::Result(SettledToolResult::new(output, false)).to_settlement().unwrap()
}

/// `[s1, <faulty>, s3]` in one window: the siblings finish, the faulty call is Unknown.
fn unknown_in_the_middle(fault: Fault) -> (Harness, DirectRunner, Arc<FaultTool>) {
    let bad = FaultTool::new("bad", fault);
    let calls = vec![call("s1", "shared", "{}"), call("b2", "bad", "{}"), call("s3", "shared", r#"{"n":3}"#)];
    let h = harness_tools(vec![bad.clone()], vec![calls_response(calls), answer("done")], |_| {});
    let mut r = h.start("go");
    r.run_to_idle();
    assert!(root_result(&r).is_none(), "the parent waits for the Unknown sibling");
    assert_eq!(h.model.calls(), 1);
    assert_eq!(bad.count(), 1);
    let state = h.parent_state();
    assert_eq!(state.phase, crate::interaction::state::Phase::WaitingChildren);
    let batch = state.tool_round.unwrap().child_batch.unwrap();
    let settled: Vec<bool> = batch.invocations.iter().map(|i| i.result.is_some()).collect();
    assert_eq!(settled, [true, false, true], "settled siblings keep their results in the batch");
    (h, r, bad)
}

#[test]
fn a_panicking_tool_is_unknown_until_resolved_then_results_keep_call_order() {
    // It would succeed if it ran again: only a re-dispatch could complete it without the host.
    let (h, r, bad) = unknown_in_the_middle(Fault::PanicOnce);
    let unknown = unknowns(&h.head());
    assert_eq!(unknown.len(), 1);
    let (process, effect) = unknown[0].clone();
    assert_ne!(&process, r.owner.root_id(), "the tool child's Effect is Unknown, not the parent's");
    // A restore neither re-runs the panicking tool nor the settled siblings.
    let mut r2 = h.restore(200);
    r2.run_to_idle();
    assert_eq!(bad.count(), 1);
    assert_eq!(unknowns(&h.head()), unknown, "the Unknown identity survives the restore");
    drop(r);
    let out = ToolResult::ok("b2", "bad", ToolOutput::text("resolved by the host"));
    resolve(&mut r2, process, effect, tool_settlement("b2", "bad", out));
    h.check(&r2);
    assert_eq!(root_result(&r2).unwrap().status(), Status::Completed);
    assert_eq!(bad.count(), 1, "resolution never calls the tool");
    let results = results_at(&h.model.request(1), 2);
    let pairs: Vec<(&str, &str)> = results.iter().map(|r| (r.id.as_str(), r.output.content.as_str())).collect();
    assert_eq!(pairs, vec![("s1", "shared({})"), ("b2", "resolved by the host"), ("s3", r#"shared({"n":3})"#)]);
    assert!(unknowns(&h.head()).is_empty());
}

#[test]
fn a_host_failure_is_unknown_and_a_resolved_error_result_reaches_the_model() {
    let (h, mut r, bad) = unknown_in_the_middle(Fault::HostFailure);
    let (process, effect) = unknowns(&h.head())[0].clone();
    let out = ToolResult::error("b2", "bad", "error: the host gave up");
    resolve(&mut r, process, effect, tool_settlement("b2", "bad", out));
    h.check(&r);
    assert_eq!(root_result(&r).unwrap().status(), Status::Completed);
    assert_eq!(bad.count(), 1);
    let results = results_at(&h.model.request(1), 2);
    let errors: Vec<bool> = results.iter().map(|r| r.is_error).collect();
    assert_eq!(errors, [false, true, false]);
    assert_eq!(results[1].output.content, "error: the host gave up");
}

#[test]
fn killing_the_tree_keeps_the_unknown_and_never_redispatches_it() {
    let (h, mut r, bad) = unknown_in_the_middle(Fault::Panic);
    let unknown = unknowns(&h.head());
    let root = r.owner.root_id().clone();
    let reply = r.command(Command::Kill { process: root.clone(), reason: "operator stop".into() });
    assert!(reply.is_ok(), "{reply:?}");
    r.run_to_idle();
    h.check(&r);
    let result = root_result(&r).expect("the root ends");
    assert_eq!(result.status(), Status::Killed);
    assert!(result.termination.unresolved_effect_ids.is_empty(), "the root lists no child Unknown");
    let head = h.head();
    assert_eq!(unknowns(&head), unknown, "the Unknown is retained in the terminal cut");
    let child = head.processes().iter().find(|p| p.id == unknown[0].0).unwrap();
    assert!(child.is_terminal());
    let child_result = r
        .published
        .iter()
        .find_map(|p| match p {
            Publication::Finished { result } if result.process_id == child.id => Some(result.clone()),
            _ => None,
        })
        .expect("the tool child's result");
    assert_eq!(child_result.termination.unresolved_effect_ids, vec![unknown[0].1.clone()]);
    // Across a restore of the finished tree: still there, still never dispatched again.
    let bytes = head.bytes().clone();
    let mut r2 = h.restore(400);
    r2.run_to_idle();
    assert_eq!(bad.count(), 1);
    assert_eq!(unknowns(&h.head()), unknown);
    let resolved = r2.command(Command::Resolve {
        process: unknown[0].0.clone(),
        effect: unknown[0].1.clone(),
        settlement: tool_settlement("b2", "bad", ToolResult::ok("b2", "bad", ToolOutput::text("late"))),
    });
    assert!(resolved.is_err(), "a terminal Process takes no resolution: {resolved:?}");
    assert_eq!(TreeSnapshot::decode(&bytes).unwrap().bytes(), &bytes);
}

#[test]
fn tool_calls_with_refusal_or_other_fail_and_no_call_answers_complete_whatever_the_reason() {
    for finish in [FinishReason::Refusal, FinishReason::Other] {
        let h = harness(vec![with_finish(vec![call("c1", "weather", "{}")], finish)], |_| {});
        let (_r, result) = h.run("go");
        let failure = failure_of(&result);
        assert!(failure.is(codes::MODEL_TOOL_CALLS_NOT_COMPLETED), "{failure:?}");
        assert_eq!(failure.kind, crate::kernel::failure::FailureKind::External);
        assert_eq!(
            failure.message.as_str(),
            format!("model output ended with {}; tool calls were not executed", finish.as_str())
        );
    }
    for finish in [FinishReason::Refusal, FinishReason::ContentFilter, FinishReason::Other, FinishReason::Length] {
        let response = Response::new(Message::assistant("sorry"), finish, Usage::new(1, 1));
        let h = harness(vec![response], |_| {});
        let (_r, result) = h.run("go");
        assert_eq!(result.status(), Status::Completed, "{finish:?}");
        let output = output_of(&result);
        assert_eq!(output.source(), CompletionSource::ModelResponse);
        assert_eq!(output.response().unwrap().finish_reason, Some(finish));
        assert_eq!(h.model.calls(), 1, "a refusal is never retried");
    }
}

/// A client that fails every call with a host failure.
struct HostDown;

impl ModelClient for HostDown {
    fn call<'a>(&'a self, _: &'a ModelCallContext, _: Request) -> BoxFuture<'a, Result<Response, ModelError>> {
        Box::pin(async { Err(ModelError::Host("gateway unreachable".into())) })
    }
}

struct BrokenReducer;

impl ModelContextReducer for BrokenReducer {
    fn reduce<'a>(&'a self, _: &'a ModelCallContext, _: &'a Request) -> BoxFuture<'a, Result<Vec<Message>, String>> {
        Box::pin(async { Err("summary store offline".to_owned()) })
    }
}

#[test]
fn model_host_failures_fail_the_parent_with_host_failed() {
    let h = harness_full(tool_set(), vec![], |_| {}, |_| {}, |_| DispatcherConfig::complete(Arc::new(HostDown)));
    let (_r, result) = h.run("go");
    let f = failure_of(&result);
    assert!(f.is(codes::HOST_FAILED), "{f:?}");
    assert_eq!(f.kind, crate::kernel::failure::FailureKind::External);
    assert!(f.message.as_str().contains("gateway unreachable"), "{f:?}");
    // A reducer failure is a host failure too, and the model is never called.
    let h = harness_full(tool_set(), vec![answer("x")], |_| {}, |_| {}, |m| {
        DispatcherConfig::complete(m).with_reducer(Arc::new(BrokenReducer))
    });
    let (_r, result) = h.run("go");
    assert!(failure_of(&result).is(codes::HOST_FAILED));
    assert_eq!(h.model.calls(), 0);
}

/// Resolves the Unknown `b2` with a settlement payload advertising `names` (raw JSON, so
/// invalid lists can be written).
fn resolve_advertising(names: &[&str]) -> (Harness, DirectRunner) {
    let (h, mut r, _) = unknown_in_the_middle(Fault::Panic);
    let (process, effect) = unknowns(&h.head())[0].clone();
    let settled = SettledToolResult::new(ToolResult::ok("b2", "bad", ToolOutput::text("x")), false);
    let mut json = ToolCallSettlement::Result(settled).to_settlement().unwrap().payload.value().clone();
    let list = Json::Array(names.iter().map(|n| Json::str(*n)).collect());
    insert_advertised(&mut json, list);
    let settlement = Settlement {
        status: crate::kernel::signal::SettlementStatus::Succeeded,
        payload: Payload::from_json(json).unwrap(),
    };
    resolve(&mut r, process, effect, settlement);
    (h, r)
}

/// Adds `advertised_tool_names` beside the settled `result` member, wherever it is nested.
fn insert_advertised(json: &mut Json, list: Json) {
    if let Json::Object(members) = json {
        if members.contains_key("direct") && members.contains_key("result") {
            members.insert("advertised_tool_names".into(), list);
            return;
        }
        for value in members.values_mut() {
            insert_advertised(value, list.clone());
        }
    }
}

#[test]
fn an_invalid_advertisement_fails_before_the_fold_and_leaves_the_round_unchanged() {
    let (h, r) = resolve_advertising(&["hidden", "hidden"]);
    h.check(&r);
    let result = root_result(&r).expect("the parent fails");
    assert_eq!(result.status(), Status::Failed);
    assert_eq!(h.model.calls(), 1, "no model call after a failed fold");
    // The parent's last committed state is from before the fold: nothing partially applied.
    let state = h.parent_state();
    assert!(state.advertised_tool_names.is_empty());
    let round = state.tool_round.expect("the round is kept");
    assert!(round.results.is_empty());
    let settled = round.child_batch.unwrap().invocations.iter().filter(|i| i.result.is_some()).count();
    assert_eq!(settled, 2, "only the two siblings settled before");
}

#[test]
fn an_advertised_name_that_is_no_deferred_tool_leaves_the_next_model_call_unknown() {
    let (h, r) = resolve_advertising(&["ghost"]);
    h.check(&r);
    assert!(root_result(&r).is_none(), "the parent waits on its Unknown model Effect");
    assert_eq!(h.model.calls(), 1, "the client is never called with an unpreparable manifest");
    // The folding Step is prepared (its candidate declares the model call) but not adopted
    // until the host settles the Unknown model Effect.
    let head = h.head();
    let prepared = head.root().prepared.clone().expect("the folding step is prepared");
    let candidate = h.definition.restore_state(&prepared.candidate_state).unwrap();
    assert_eq!(candidate.advertised_tool_names, ["ghost"]);
    assert_eq!(candidate.phase, crate::interaction::state::Phase::AwaitingModel);
    let unknown = unknowns(&h.head());
    assert_eq!(unknown.len(), 1);
    assert_eq!(&unknown[0].0, r.owner.root_id(), "the parent's model Effect is Unknown");
}
