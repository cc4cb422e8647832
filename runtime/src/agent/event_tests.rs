//! Run events as a host counts them: one `ToolStarted` per tool call (also for a tool that
//! asks the host and is dispatched again with the answer), no empty deltas, every delta
//! naming the model call whose response it streams, and a delegate's deltas in its parent
//! run's events, tagged with the delegate.

use crate::env::TokioEnv;
use crate::kernel::commit::MemoryCommitter;
use crate::kernel::ids::{EffectId, ProcessId};
use crate::prelude::*;
use std::collections::BTreeMap;
use std::sync::Arc;
use super::test_runtime::block_on;

async fn collect(run: &Run) -> Vec<RunEvent> {
    let mut events = run.events();
    let mut out = Vec::new();
    while let Some(e) = events.next().await {
        out.push(e);
    }
    out
}

/// Runs `agent` on "Go." until it answers `answer`; its run and every event of it.
async fn answered(agent: Agent, answer: &str) -> (Run, Vec<RunEvent>) {
    let runtime = Runtime::with_store(agent, Arc::new(MemoryCommitter::new()), TokioEnv::current().unwrap().env());
    let run = runtime.start("Go.").await.unwrap();
    assert_eq!(run.result().await.unwrap().text(), answer);
    let events = collect(&run).await;
    (run, events)
}

#[test]
fn a_tool_that_asks_the_host_starts_once() {
    block_on(async {
        let agent = Agent::builder("asker")
            .version("1")
            .model(ScriptedModel::new().call_tool("ask_user", r#"{"question":"Which city?"}"#).then_text("Done."))
            .tool(AskHuman::new("ask_user", "Asks the user."))
            .build()
            .unwrap();
        let runtime = Runtime::with_store(agent, Arc::new(MemoryCommitter::new()), TokioEnv::current().unwrap().env());
        let run = runtime.start("Weather?").await.unwrap();
        let Idle::NeedsInput(inputs) = run.idle().await.unwrap() else { panic!("expected an input request") };
        run.answer_text(&inputs[0], "Oslo").await.unwrap();
        assert_eq!(run.result().await.unwrap().text(), "Done.");
        let events = collect(&run).await;
        let mut started: BTreeMap<String, usize> = BTreeMap::new();
        for e in &events {
            if let RunEvent::ToolStarted { call_id, .. } = e {
                *started.entry(call_id.clone()).or_default() += 1;
            }
        }
        assert_eq!(started.len(), 1, "{events:#?}");
        assert!(started.values().all(|n| *n == 1), "one ToolStarted per call: {started:?}");
        let settled = events.iter().filter(|e| matches!(e, RunEvent::ToolSettled { .. })).count();
        assert_eq!(settled, 1);
    });
}

#[test]
fn deltas_are_never_empty_and_name_their_model_call() {
    block_on(async {
        // Two model calls: a streamed tool call (no text, only tool-call and finish data),
        // then a streamed answer.
        let agent = Agent::builder("streamer")
            .version("1")
            .streaming_model(ScriptedModel::new().call_tool("echo", r#"{"x":1}"#).then_text("the answer, in pieces").chunk_bytes(4))
            .tool(tool_fn("echo", "Echoes.", r#"{"type":"object"}"#, |_| async { Ok("echoed".to_owned()) }))
            .build()
            .unwrap();
        let (_, events) = answered(agent, "the answer, in pieces").await;
        let responses: Vec<_> = events
            .iter()
            .filter_map(|e| if let RunEvent::ModelResponse { call, text, .. } = e { Some((call.clone(), text.clone())) } else { None })
            .collect();
        assert_eq!(responses.len(), 2);
        assert_ne!(responses[0].0, responses[1].0, "each model call has its own id");
        let mut by_call: BTreeMap<_, String> = BTreeMap::new();
        for e in &events {
            if let RunEvent::ModelDelta { call, text, .. } = e {
                assert!(!text.is_empty(), "an empty delta was reported: {events:#?}");
                by_call.entry(call.clone()).or_default().push_str(text);
            }
        }
        // Only the answering call streamed text, and its deltas add up to its response.
        assert_eq!(by_call.len(), 1, "{by_call:?}");
        assert_eq!(by_call.get(&responses[1].0).map(String::as_str), Some("the answer, in pieces"));
    });
}

#[test]
fn a_delegates_deltas_reach_the_run_tagged_with_the_delegate() {
    block_on(async {
        // The parent streams a call of its delegate, then its answer; the delegate (an agent
        // named "researcher", called as the tool "research") streams its own answer.
        let researcher = Agent::builder("researcher")
            .version("1")
            .description("Researches.")
            .streaming_model(ScriptedModel::new().then_text("found it, in pieces").chunk_bytes(4))
            .build()
            .unwrap();
        let task = r#"{"messages":[{"role":"user","parts":[{"type":"text","text":"Find it."}]}]}"#;
        let boss = Agent::builder("boss")
            .version("1")
            .streaming_model(ScriptedModel::new().call_tool("research", task).then_text("done, in pieces").chunk_bytes(4))
            .delegate("research", "Ask the researcher.", researcher)
            .build()
            .unwrap();
        let (run, events) = answered(boss, "done, in pieces").await;
        let root = run.id().process_id().clone();

        // Each settled model call by (Process, call id), and the text its deltas streamed.
        let responses: Vec<(ProcessId, EffectId, String)> = events
            .iter()
            .filter_map(|e| match e {
                RunEvent::ModelResponse { process, call, text, .. } if !text.is_empty() => Some((process.clone(), call.clone(), text.clone())),
                _ => None,
            })
            .collect();
        let mut streamed: BTreeMap<(Option<String>, ProcessId, EffectId), String> = BTreeMap::new();
        for e in &events {
            if let RunEvent::ModelDelta { process, delegate, call, text } = e {
                streamed.entry((delegate.clone(), process.clone(), call.clone())).or_default().push_str(text);
            }
        }
        let answer = |text: &str| responses.iter().find(|r| r.2 == text).cloned().unwrap_or_else(|| panic!("no response {text:?}: {events:#?}"));
        let (own_process, own_call, _) = answer("done, in pieces");
        let (delegate_process, delegate_call, _) = answer("found it, in pieces");
        assert_eq!(own_process, root);
        assert_ne!(delegate_process, root, "the delegate runs in a Process of its own");
        let expected = BTreeMap::from([
            ((None, root.clone(), own_call), "done, in pieces".to_owned()),
            ((Some("researcher".to_owned()), delegate_process, delegate_call), "found it, in pieces".to_owned()),
        ]);
        assert_eq!(streamed, expected, "the parent's deltas untagged, the delegate's tagged with its agent: {events:#?}");
    });
}
