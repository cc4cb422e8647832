//! Versions side by side, upgrades and continue-as-new through the real Engine on tokio,
//! including a crash after every commit of a chain of hand-overs.

use super::upgrade::successor_of;
use crate::chat::{FinishReason, Part, Request, Response, ToolCall, Usage};
use crate::env::BoxFuture;
use crate::interaction::protocol::Lineage;
use crate::interaction::state::ParentState;
use crate::kernel::commit::{Committer, Fault, FaultyCommitter, MemoryCommitter};
use crate::kernel::snapshot::TreeSnapshot;
use crate::prelude::*;
use std::collections::BTreeMap;
use std::sync::Arc;

#[path = "versions_fixture.rs"]
mod fixture;
use fixture::{concierge, v1, v2};
use super::test_runtime::{block_on, env};

/// The stored messages and lineage of `run`'s root.
fn stored(store: &dyn Committer, run: &RunId) -> (Vec<String>, Option<Lineage>) {
    let head = futures::executor::block_on(store.load_tree(run.process_id())).unwrap().expect("the run is stored");
    let snapshot = TreeSnapshot::from_cut(&head.cut).unwrap();
    let state = ParentState::from_execution_state(&snapshot.root().committed_state).unwrap();
    let messages = state.working_context.to_messages().iter().map(|m| crate::json::ToJson::to_json(m).to_canonical_string()).collect();
    (messages, state.lineage)
}

#[test]
fn a_parked_run_finishes_under_version_1_and_another_is_upgraded_to_version_2() {
    block_on(async {
        let store = Arc::new(MemoryCommitter::new());
        // Two runs park under version 1, waiting for the user; the process exits.
        let first = Runtime::with_store(v1(), store.clone(), env());
        let (a, b) = (first.start("Book a hotel.").await.unwrap(), first.start("Book a flight.").await.unwrap());
        assert!(matches!(a.idle().await.unwrap(), Idle::NeedsInput(_)));
        assert!(matches!(b.idle().await.unwrap(), Idle::NeedsInput(_)));
        assert_eq!(a.version(), "1");
        let (a, b) = (a.id(), b.id());
        drop(first);

        // Version 2 is deployed beside version 1: new runs start under 2.
        let (v1, v2) = (v1(), v2());
        let second = Runtime::with_store(v2.clone(), store.clone(), env());
        second.register(&v1).unwrap();
        assert_eq!(second.versions(), vec!["2".to_owned(), "1".to_owned()]);

        // The first run finishes under its own version.
        let run = second.resume(&a).await.unwrap();
        assert_eq!(run.version(), "1");
        let question = run.pending_inputs().remove(0);
        run.answer_text(&question, "Lyon").await.unwrap();
        assert_eq!(run.result().await.unwrap().text(), "Booked by v1.");

        // The second is upgraded: the request waits for the answer, then hands over at the
        // next model call.
        let run = second.resume(&b).await.unwrap();
        let early = run.upgrade(&v2).await.unwrap_err();
        assert!(matches!(early, RunError::NotAtBoundary { .. }), "{early}");
        assert!(early.to_string().contains("Which city?"), "{early}");
        let question = run.pending_inputs().remove(0);
        run.answer_text(&question, "Paris").await.unwrap();
        let next = run.upgrade(&v2).await.unwrap();
        assert_eq!(next.id(), successor_of(&b));
        assert_eq!(next.version(), "2");
        assert_eq!(next.result().await.unwrap().text(), "Booked by v2.");
        match run.result().await.unwrap_err() {
            RunError::ContinuedAs { successor, version, reason, .. } => {
                assert_eq!((successor, version.as_str(), reason.as_str()), (next.id(), "2", "upgrade"));
            }
            other => panic!("{other}"),
        }
        // Again: the same successor, never a second one.
        assert_eq!(run.upgrade(&v2).await.unwrap().id(), next.id());
        assert_eq!(run.successor().await.unwrap().id(), next.id());
        assert_eq!(store.roots().len(), 3, "two runs and one successor");

        // The successor carries the whole conversation and records its predecessor.
        let (old, _) = stored(store.as_ref(), &b);
        let (new, lineage) = stored(store.as_ref(), &next.id());
        // (A completed run's final answer is its output, not part of its working context.)
        assert_eq!(new, old, "the conversation is carried whole, in order");
        assert_eq!(old.len(), 3, "the task, the question and its answer");
        assert_eq!(lineage, Some(Lineage::continuing("2", b.process_id().clone(), "upgrade")));
        assert_eq!(stored(store.as_ref(), &a).1, Some(Lineage::first("1")));

        // After a restart with both versions, the ended run still leads to the same successor.
        let third = Runtime::with_store(v2.clone(), store.clone(), env());
        third.register(&v1).unwrap();
        let again = third.resume(&b).await.unwrap().successor().await.unwrap();
        assert_eq!(again.id(), next.id());
        assert_eq!(again.result().await.unwrap().text(), "Booked by v2.");
        assert_eq!(store.roots().len(), 3);
    });
}

#[test]
fn a_run_of_a_version_that_is_not_registered_is_refused_listing_the_registered_ones() {
    block_on(async {
        let store = Arc::new(MemoryCommitter::new());
        let first = Runtime::with_store(v1(), store.clone(), env());
        let id = first.start("Book.").await.unwrap().id();
        drop(first);
        let only_v2 = Runtime::with_store(v2(), store.clone(), env());
        let refused = only_v2.resume(&id).await.unwrap_err();
        match &refused {
            RunError::VersionNotRegistered { version, registered, .. } => assert_eq!((version.as_str(), registered.as_str()), ("1", "`2`")),
            other => panic!("{other}"),
        }
        let text = refused.to_string();
        assert!(text.contains("version `1`") && text.contains("registered: `2`") && text.contains("Runtime::register"), "{text}");
        // Upgrading to a version the runtime does not have is refused the same way.
        only_v2.register(&v1()).unwrap();
        let run = only_v2.resume(&id).await.unwrap();
        let v3 = concierge("3", ScriptedModel::new().then_text("v3"));
        let text = run.upgrade(&v3).await.unwrap_err().to_string();
        assert!(text.contains("`3`") && text.contains("registered: `2`, `1`"), "{text}");
    });
}

#[test]
fn registering_another_agent_or_another_configuration_under_a_version_is_refused() {
    block_on(async {
        let runtime = Runtime::in_memory(v1()).unwrap();
        runtime.register(&v1()).unwrap();
        let other = Agent::builder("weather").version("1").model(ScriptedModel::new()).build().unwrap();
        let text = runtime.register(&other).unwrap_err().to_string();
        assert!(text.contains("`weather`") && text.contains("another `Runtime`"), "{text}");
        let changed = Agent::builder("concierge").version("1").model(ScriptedModel::new()).max_model_calls(3).build().unwrap();
        let text = runtime.register(&changed).unwrap_err().to_string();
        assert!(text.contains("already registered") && text.contains("new `.version(..)`"), "{text}");
        assert_eq!(runtime.versions(), vec!["1".to_owned()]);
    });
}

/// A model that works through `STEPS` steps, one tool call each, reading the step reached
/// from the newest tool result in the request (so a successor carrying the last exchange
/// goes on where its predecessor stopped), then answers.
struct Stepper;
const STEPS: u32 = 5;

impl ModelClient for Stepper {
    fn call<'a>(&'a self, _cx: &'a ModelCallContext, request: Request) -> BoxFuture<'a, Result<Response, ModelError>> {
        let last = request.messages.iter().rev().find_map(|m| {
            m.parts.iter().find_map(|p| match p {
                Part::ToolResult(r) => r.output.content.strip_prefix("step ").and_then(|n| n.parse::<u32>().ok()),
                _ => None,
            })
        });
        let step = last.unwrap_or(0);
        let response = if step < STEPS {
            let call = ToolCall::new(format!("call_{}", step + 1), "work", format!(r#"{{"step":{}}}"#, step + 1));
            Response::new(Message::assistant_with_calls("", vec![call]), FinishReason::ToolCalls, Usage::new(1, 1))
        } else {
            Response::new(Message::assistant(format!("finished after {step} steps")), FinishReason::Stop, Usage::new(1, 1))
        };
        Box::pin(async move { Ok(response) })
    }
}

fn worker() -> Agent {
    let work = tool_fn(
        "work",
        "Does one step.",
        r#"{"type":"object","properties":{"step":{"type":"integer"}},"required":["step"]}"#,
        |args| async move { Ok(format!("step {}", args.get("step").and_then(|s| s.as_u64()).unwrap_or(0))) },
    );
    Agent::builder("worker")
        .version("1")
        .model(Stepper)
        .tool_with(work, ToolOptions::new().on_unknown(UnknownPolicy::Retry))
        .max_model_calls(4)
        .continue_as_new(ContinueAsNew::after_model_calls(2).keep_last_messages(2))
        .build()
        .unwrap()
}

/// Follows `id` and its successors to the end in `runtime`; the final text.
async fn follow(runtime: &Runtime, id: &RunId) -> Result<String, RunError> {
    let mut run = runtime.resume(id).await?;
    for _ in 0..10 {
        match run.result().await {
            Ok(result) => return Ok(result.text()),
            Err(RunError::ContinuedAs { .. }) => run = run.successor().await?,
            Err(other) => return Err(other),
        }
    }
    panic!("more than 10 successors")
}

/// Every run of the store: its messages and lineage.
fn runs(store: &dyn Committer, roots: Vec<crate::kernel::ids::ProcessId>) -> BTreeMap<String, (Vec<String>, Option<Lineage>)> {
    roots.into_iter().map(|r| (r.to_string(), stored(store, &RunId::from_process(r)))).collect()
}

#[test]
fn a_long_run_continues_as_new_runs_and_a_crash_after_any_commit_of_the_chain_loses_and_repeats_nothing() {
    block_on(async {
        let id = RunId::from_key("continue-as-new");
        // The run without faults: three runs, each at most two model calls.
        let counted = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let store = Arc::new(FaultyCommitter::new(MemoryCommitter::new()));
        let count = counted.clone();
        store.set_fault_plan(Box::new(move |call| {
            if !matches!(call.kind, crate::kernel::commit::CommitCallKind::Load) {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            Fault::Pass
        }));
        let runtime = Runtime::with_store(worker(), store.clone(), env());
        let run = runtime.start_with_id(&id, "Do the five steps.").await.unwrap();
        let err = run.result().await.unwrap_err();
        let RunError::ContinuedAs { successor, reason, .. } = &err else { panic!("{err}") };
        assert_eq!((successor, reason.as_str()), (&successor_of(&id), "continue-as-new after 2 model calls"));
        drop(run);
        assert_eq!(follow(&runtime, &id).await.unwrap(), "finished after 5 steps");
        let reference = runs(store.inner(), store.inner().roots());
        let (b, c) = (successor_of(&id), successor_of(&successor_of(&id)));
        assert_eq!(reference.len(), 3, "{reference:?}");
        let (b_messages, b_lineage) = &reference[&b.to_string()];
        assert_eq!(b_lineage, &Some(Lineage::continuing("1", id.process_id().clone(), "continue-as-new after 2 model calls")));
        // The task, then the last exchange (call 2 and its result), then its own calls.
        let (a_messages, _) = &reference[&id.to_string()];
        assert_eq!(b_messages[0], a_messages[0]);
        assert_eq!(&b_messages[1..3], &a_messages[a_messages.len() - 2..]);
        let (c_messages, c_lineage) = &reference[&c.to_string()];
        assert_eq!(c_lineage.as_ref().and_then(|l| l.predecessor.clone()), Some(b.process_id().clone()));
        assert_eq!(&c_messages[1..3], &b_messages[b_messages.len() - 2..]);
        assert!(c_messages.last().unwrap().contains("step 5"), "{c_messages:?}");
        let commits = counted.load(std::sync::atomic::Ordering::SeqCst);
        assert!(commits > 20, "{commits} commits");
        drop(runtime);

        // A crash after each commit of the whole chain, then a restart that follows it.
        for crash in 0..commits {
            let store = Arc::new(FaultyCommitter::new(MemoryCommitter::new()));
            let mut commit = 0;
            store.set_fault_plan(Box::new(move |call| {
                if matches!(call.kind, crate::kernel::commit::CommitCallKind::Load) {
                    return Fault::Pass;
                }
                commit += 1;
                if commit - 1 == crash { Fault::CrashAfter } else { Fault::Pass }
            }));
            let first = Runtime::with_store(worker(), store.clone(), env());
            if let Ok(mut run) = first.start_with_id(&id, "Do the five steps.").await {
                loop {
                    match run.result().await {
                        Err(RunError::ContinuedAs { .. }) => match run.successor().await {
                            Ok(next) => run = next,
                            Err(_) => break,
                        },
                        _ => break,
                    }
                }
            }
            drop(first);
            store.clear_fault_plan();
            let second = Runtime::with_store(worker(), store.clone(), env());
            let text = follow(&second, &id).await.unwrap_or_else(|e| panic!("crash after commit {crash}: {e}"));
            assert_eq!(text, "finished after 5 steps", "crash after commit {crash}");
            let inner = store.inner();
            assert_eq!(runs(inner, inner.roots()), reference, "crash after commit {crash}: the same runs, messages and links");
        }
    });
}

#[test]
fn a_requested_continue_as_new_carries_the_policy_and_a_bad_policy_is_refused_at_build() {
    block_on(async {
        let runtime = Runtime::in_memory(v1()).unwrap();
        let run = runtime.start("Book.").await.unwrap();
        let question = run.pending_inputs();
        let question = if question.is_empty() {
            let Idle::NeedsInput(mut q) = run.idle().await.unwrap() else { panic!() };
            q.remove(0)
        } else {
            question[0].clone()
        };
        assert!(matches!(run.continue_as_new().await, Err(RunError::NotAtBoundary { .. })));
        run.answer_text(&question, "Rome").await.unwrap();
        let next = run.continue_as_new().await.unwrap();
        assert_eq!(next.version(), "1");
        // Version 1's script answers its second call in the new run... its first call asks again.
        assert!(matches!(next.idle().await.unwrap(), Idle::NeedsInput(_)));
        let refused = Agent::builder("w").version("1").model(ScriptedModel::new()).max_model_calls(3)
            .continue_as_new(ContinueAsNew::after_model_calls(3)).build().unwrap_err();
        assert!(refused.to_string().contains("never reached"), "{refused}");
        let refused = Agent::builder("w").version("a\u{7}").model(ScriptedModel::new()).build().unwrap_err();
        assert!(refused.to_string().contains("version is not usable"), "{refused}");
    });
}
