//! Tool input waits through the whole parent: siblings paused at once,
//! answers in any order, repeated pauses, and steers that arrive during a wait.

use super::*;
use crate::interaction::pending_inputs::{pending_tool_inputs, PendingToolInput};
use crate::interaction::signals::steer_signal;
use crate::kernel::owner::Command;
use crate::kernel::status::Status;

/// Pauses `PAUSES` times (continuation state = pauses so far), then answers with every
/// response it got, in order.
struct Asker;

const PAUSES: u64 = 2;

impl Tool for Asker {
    fn spec(&self) -> ToolDefinitionInput {
        ToolDefinitionInput {
            name: "asker".into(),
            description: "Asks for input twice.".into(),
            input_schema: crate::json::parse(br#"{"type":"object"}"#).unwrap(),
        }
    }
    fn call<'a>(&'a self, _: &'a Invocation, cx: ToolContext) -> BoxFuture<'a, Result<crate::chat::ToolOutput, ToolError>> {
        // State: the answers so far, as a JSON array.
        let answers: Vec<Json> = match cx.continuation() {
            None => Vec::new(),
            Some(c) => {
                let mut seen = c.state().value().as_array().map(<[Json]>::to_vec).unwrap_or_default();
                seen.push(c.response().value().clone());
                seen
            }
        };
        let result = if (answers.len() as u64) < PAUSES {
            let state = Json::Array(answers).to_canonical_string();
            Err(crate::tool::require_tool_input(br#""Next word?""#, br#"{"type":"string"}"#, state.as_bytes()))
        } else {
            let words: Vec<String> = answers.iter().map(|a| a.as_str().unwrap_or_default().to_owned()).collect();
            Ok(crate::chat::ToolOutput::text(words.join(" ")))
        };
        Box::pin(async move { result })
    }
    fn concurrency(&self, _: &Invocation) -> Option<Concurrency> {
        Some(Concurrency::shared())
    }
}

/// The pending inputs at the head, keyed by the call id their tool child runs.
fn pending_by_call(h: &Harness) -> Vec<(String, PendingToolInput)> {
    let state = h.parent_state();
    let round = state.tool_round.expect("a round");
    let batch = round.child_batch.expect("a batch");
    let calls: Vec<String> = round.response.tool_calls().iter().map(|c| c.id.clone()).collect();
    let next = round.results.len();
    pending_tool_inputs(&h.head())
        .unwrap()
        .into_iter()
        .map(|p| {
            let j = batch.invocations.iter().position(|i| i.process_id.as_ref() == Some(p.process_id())).unwrap();
            (calls[next + j].clone(), p)
        })
        .collect()
}

fn answer_call(h: &Harness, r: &mut DirectRunner, call_id: &str, signal: &str, value: &str) {
    let pending = pending_by_call(h);
    let (_, p) = pending.iter().find(|(c, _)| c == call_id).unwrap_or_else(|| panic!("{call_id} is not waiting"));
    let request = p.response_signal(SignalId::parse(signal).unwrap(), &Json::str(value)).unwrap();
    let reply = r.command(Command::Deliver { process: p.process_id().clone(), requests: vec![request] });
    assert!(reply.is_ok(), "{reply:?}");
    r.run_to_idle();
}

#[test]
fn siblings_waiting_at_once_answered_in_reverse_keep_call_order() {
    let calls = vec![call("a1", "ask", "{}"), call("a2", "ask", r#"{"n":2}"#), call("s3", "shared", "{}")];
    let h = harness(vec![calls_response(calls), answer("done")], |_| {});
    let mut r = h.start("go");
    r.run_to_idle();
    let waiting: Vec<String> = pending_by_call(&h).into_iter().map(|(c, _)| c).collect();
    assert_eq!(waiting.len(), 2, "both ask siblings wait at once: {waiting:?}");
    assert_eq!(h.parent_state().phase, crate::interaction::state::Phase::WaitingChildren);
    answer_call(&h, &mut r, "a2", "signal:answer-2", "blue");
    assert!(root_result(&r).is_none(), "a1 still waits");
    assert_eq!(h.model.calls(), 1);
    let waiting: Vec<String> = pending_by_call(&h).into_iter().map(|(c, _)| c).collect();
    assert_eq!(waiting, ["a1"]);
    answer_call(&h, &mut r, "a1", "signal:answer-1", "red");
    h.check(&r);
    assert_eq!(root_result(&r).unwrap().status(), Status::Completed);
    let results = results_at(&h.model.request(1), 2);
    let pairs: Vec<(&str, &str)> = results.iter().map(|r| (r.id.as_str(), r.output.content.as_str())).collect();
    assert_eq!(pairs, vec![("a1", r#"picked "red""#), ("a2", r#"picked "blue""#), ("s3", "shared({})")]);
}

#[test]
fn repeated_pauses_of_two_siblings_interleave_and_keep_call_order() {
    let calls = vec![call("x", "asker", "{}"), call("y", "asker", r#"{"n":2}"#)];
    let h = harness_tools(vec![Arc::new(Asker)], vec![calls_response(calls), answer("done")], |_| {});
    let mut r = h.start("go");
    r.run_to_idle();
    assert_eq!(pending_by_call(&h).len(), 2);
    // y pauses twice before x is answered once; every pause has a fresh wait.
    let first_y = pending_by_call(&h).into_iter().find(|(c, _)| c == "y").unwrap().1.wait_id().clone();
    answer_call(&h, &mut r, "y", "signal:y1", "late");
    let second_y = pending_by_call(&h).into_iter().find(|(c, _)| c == "y").unwrap().1.wait_id().clone();
    assert_ne!(first_y, second_y, "a second pause waits on a new WaitId");
    answer_call(&h, &mut r, "y", "signal:y2", "bird");
    assert_eq!(pending_by_call(&h).into_iter().map(|(c, _)| c).collect::<Vec<_>>(), ["x"]);
    answer_call(&h, &mut r, "x", "signal:x1", "early");
    assert!(root_result(&r).is_none());
    answer_call(&h, &mut r, "x", "signal:x2", "worm");
    h.check(&r);
    assert_eq!(root_result(&r).unwrap().status(), Status::Completed);
    let contents: Vec<String> = results_at(&h.model.request(1), 2).into_iter().map(|r| r.output.content).collect();
    assert_eq!(contents, ["early worm", "late bird"]);
    assert_eq!(h.model.calls(), 2);
}

#[test]
fn a_steer_during_an_input_wait_is_applied_once_after_the_round() {
    let h = harness(vec![calls_response(vec![call("a1", "ask", "{}")]), answer("done")], |_| {});
    let mut r = h.start("go");
    r.run_to_idle();
    let steer = steer_signal(SignalId::parse("signal:steer").unwrap(), vec![Message::user("be brief")]).unwrap();
    r.command(Command::Deliver { process: r.owner.root_id().clone(), requests: vec![steer] }).unwrap();
    r.run_to_idle();
    assert_eq!(h.model.calls(), 1, "the steer does not end the wait");
    // The parked parent does not step: the steer waits, unconsumed, in its snapshot mailbox.
    assert_eq!(h.head().root().mailbox.pending_count(), 1, "the steer is pending in the snapshot while the round runs");
    // The pending steer survives a restore with the wait still open.
    let mut r = h.restore(300);
    r.run_to_idle();
    answer_call(&h, &mut r, "a1", "signal:answer", "green");
    h.check(&r);
    assert_eq!(root_result(&r).unwrap().status(), Status::Completed);
    assert_eq!(h.model.calls(), 2);
    let texts: Vec<String> = h.model.request(1).messages.iter().map(Message::text).collect();
    assert_eq!(texts.len(), 4, "[user, assistant(call), tool(result), user(steer)]: {texts:?}");
    assert_eq!(texts[3], "be brief");
    assert_eq!(results_at(&h.model.request(1), 2)[0].output.content, r#"picked "green""#);
    let applied = h.model.applied.lock().unwrap().clone();
    assert_eq!(applied, vec![vec![], vec![SignalId::parse("signal:steer").unwrap()]], "applied exactly once");
}
