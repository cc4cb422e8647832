//! Run events as a host counts them: one `ToolStarted` per tool call (also for a tool that
//! asks the host and is dispatched again with the answer), no empty deltas, and every delta
//! naming the model call whose response it streams.

use crate::env::TokioEnv;
use crate::kernel::commit::MemoryCommitter;
use crate::prelude::*;
use std::collections::BTreeMap;
use std::sync::Arc;

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(f)
}

async fn collect(run: &Run) -> Vec<RunEvent> {
    let mut events = run.events();
    let mut out = Vec::new();
    while let Some(e) = events.next().await {
        out.push(e);
    }
    out
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
        let runtime = Runtime::with_store(agent, Arc::new(MemoryCommitter::new()), TokioEnv::current().unwrap().env());
        let run = runtime.start("Go.").await.unwrap();
        assert_eq!(run.result().await.unwrap().text(), "the answer, in pieces");
        let events = collect(&run).await;
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
