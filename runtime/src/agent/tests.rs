//! The facade through the real Engine on tokio: events, inputs, deltas, build checks,
//! restore refusal, answers deduplicated across a resume, and every Unknown policy after a
//! crash at each dispatch boundary (before the pending commit, in flight, after the settled one).

use super::recovery::UNKNOWN_TOOL_TEXT;
use super::tracker::MAX_RUN_DELTAS;
use crate::kernel::commit::{Committer, MemoryCommitter};
use crate::kernel::status::Status;
use crate::prelude::*;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use super::test_runtime::{block_on, env};

fn weather() -> FnTool {
    tool_fn(
        "get_weather",
        "The weather of a city.",
        r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#,
        |args| async move { Ok(format!("sunny in {}", args.get("city").and_then(|c| c.as_str()).unwrap_or("?"))) },
    )
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
fn a_tool_round_reports_model_tool_and_finish_events_and_the_text() {
    block_on(async {
        let agent = Agent::builder("weather")
            .version("1")
            .model(ScriptedModel::new().call_tool("get_weather", r#"{"city":"Paris"}"#).then_text("Sunny."))
            .tool(weather())
            .build()
            .unwrap();
        let runtime = Runtime::with_store(agent, Arc::new(MemoryCommitter::new()), env());
        let run = runtime.start("Weather in Paris?").await.unwrap();
        let result = run.result().await.unwrap();
        assert_eq!(result.text(), "Sunny.");
        let events = collect(&run).await;
        let kinds: Vec<&str> = events
            .iter()
            .map(|e| match e {
                RunEvent::ModelResponse { .. } => "model",
                RunEvent::UsageUpdated { .. } => "usage",
                RunEvent::ToolStarted { tool, .. } if tool == "get_weather" => "tool_started",
                RunEvent::ToolSettled { tool, text, is_error: false, .. } if tool == "get_weather" && text == "sunny in Paris" => {
                    "tool_settled"
                }
                RunEvent::Finished(r) if r.text() == "Sunny." => "finished",
                other => panic!("unexpected event {other:?}"),
            })
            .collect();
        assert_eq!(kinds, ["model", "usage", "tool_started", "tool_settled", "model", "usage", "finished"]);
        let totals: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                RunEvent::UsageUpdated { usage, run, .. } => Some((usage.total(), run.total())),
                _ => None,
            })
            .collect();
        assert_eq!(totals, [(2, 2), (4, 4)], "each settled call raises the process's and the run's running total");
        assert_eq!(run.usage(), crate::chat::Usage::new(2, 2));
        match &events[0] {
            RunEvent::ModelResponse { tool_calls, usage, .. } => {
                assert_eq!(tool_calls, &vec!["get_weather".to_owned()]);
                assert_eq!(usage, &crate::chat::Usage::new(1, 1), "each call's own tokens");
            }
            _ => unreachable!(),
        }
    });
}

fn asking_agent(max_model_calls: u32) -> Agent {
    Agent::builder("asker")
        .version("1")
        .model(
            ScriptedModel::new()
                .call_tool("ask_user", r#"{"question":"Which city?"}"#)
                .call_tool("get_weather", r#"{"city":"Oslo"}"#)
                .then_text("Done."),
        )
        .tool(AskHuman::new("ask_user", "Asks the user."))
        .tool(weather())
        .max_model_calls(max_model_calls)
        .build()
        .unwrap()
}

#[test]
fn input_requests_are_answered_once_wrong_waits_refused_and_steers_applied() {
    block_on(async {
        let runtime = Runtime::with_store(asking_agent(4), Arc::new(MemoryCommitter::new()), env());
        let run = runtime.start("Weather?").await.unwrap();
        let Idle::NeedsInput(inputs) = run.idle().await.unwrap() else { panic!("expected an input request") };
        assert_eq!(inputs.len(), 1);
        let input = inputs[0].clone();
        assert_eq!(input.prompt_text(), "Which city?");
        assert_eq!(input.response_schema.to_canonical_string(), r#"{"type":"string"}"#);
        // A schema violation is refused locally.
        let invalid = run.answer(&input, Json::u64(7)).await.unwrap_err();
        assert!(matches!(invalid, AnswerError::Invalid { .. }), "{invalid}");
        // A wait the run is not on is refused.
        let mut wrong = input.clone();
        wrong.wait = crate::kernel::ids::WaitId::parse(&format!("wait:{}", "0".repeat(64))).unwrap();
        assert_ne!(wrong.wait, input.wait);
        let refused = run.answer_text(&wrong, "Oslo").await.unwrap_err();
        assert!(matches!(refused, AnswerError::WrongWait { .. }), "{refused}");
        assert!(refused.to_string().contains("pending_inputs"), "{refused}");
        // A steer while the tool waits is applied at the next model call.
        run.steer("Prefer Celsius.").await.unwrap();
        assert!(run.answer_text(&input, "Oslo").await.unwrap(), "the first answer is new");
        assert!(!run.answer_text(&input, "Oslo").await.unwrap(), "a retried answer is deduplicated");
        // Another answer to the answered question: a wrong wait while the call still runs,
        // refused as ended once it has finished.
        let other = run.answer_text(&input, "Bergen").await.unwrap_err();
        assert!(matches!(other, AnswerError::WrongWait { .. } | AnswerError::CallEnded { .. }), "{other}");
        let result = run.result().await.unwrap();
        assert_eq!(result.text(), "Done.");
        let events = collect(&run).await;
        assert!(events.iter().any(|e| matches!(e, RunEvent::InputRequested(i) if i.wait == input.wait)));
        assert!(events.iter().any(|e| matches!(e, RunEvent::SteerApplied { signals } if signals.len() == 1)));
        assert!(events.iter().any(|e| matches!(e, RunEvent::ToolSettled { tool, text, .. } if tool == "ask_user" && text == "Oslo")));
        // The conversation continues in a new run.
        // The conversation continues in a new run that starts from the whole conversation.
        let next = run.continue_with("And tomorrow?").await.unwrap();
        assert_ne!(next.id(), run.id());
        let head = next.shared_for_tests().lock().head.clone().unwrap();
        let state = crate::interaction::state::ParentState::from_execution_state(&head.root().committed_state).unwrap();
        let texts: Vec<String> = state.working_context.messages().map(|m| m.text()).collect();
        assert_eq!(texts.first().map(String::as_str), Some("Weather?"));
        assert!(texts.iter().any(|t| t == "Done."), "{texts:?}");
        assert_eq!(texts.last().map(String::as_str), Some("And tomorrow?"));
        next.kill("test over").await.unwrap();
        let killed = next.result().await.unwrap_err();
        assert_eq!(killed.failure().map(RunFailure::status), Some(Status::Killed), "{killed}");
    });
}

#[test]
fn a_full_delta_queue_drops_oldest_counts_and_reports_once_and_the_output_is_complete() {
    block_on(async {
        let text = "abcdefghij".repeat(150); // 1500 one-byte deltas
        let agent = Agent::builder("streamer")
            .version("1")
            .streaming_model(ScriptedModel::new().then_text(text.clone()).chunk_bytes(1))
            .build()
            .unwrap();
        let runtime = Runtime::with_store(agent, Arc::new(MemoryCommitter::new()), env());
        let run = runtime.start("Stream.").await.unwrap();
        let result = run.result().await.unwrap();
        assert_eq!(result.text(), text, "the committed output is complete");
        let events = collect(&run).await;
        let deltas = events.iter().filter(|e| matches!(e, RunEvent::ModelDelta { .. })).count();
        let drops: Vec<u64> = events.iter().filter_map(|e| if let RunEvent::DeltasDropped { dropped } = e { Some(*dropped) } else { None }).collect();
        assert_eq!(deltas, MAX_RUN_DELTAS, "the queue keeps the newest deltas");
        assert_eq!(drops.len(), 1, "one dropped-deltas event");
        assert_eq!(drops[0] as usize + deltas, text.len(), "every text delta is either delivered or counted (the finish-only increment is not a delta)");
        assert_eq!(run.dropped_deltas(), drops[0]);
        // The kept deltas are the newest, in order.
        let kept: String = events.iter().filter_map(|e| if let RunEvent::ModelDelta { text, .. } = e { Some(text.as_str()) } else { None }).collect();
        assert!(text.ends_with(&kept), "oldest dropped first");
    });
}

#[test]
fn mistakes_are_refused_at_build_time_with_what_to_change() {
    let no_version = Agent::builder("a").model(ScriptedModel::new()).build().unwrap_err();
    assert!(matches!(no_version, BuildError::NoVersion { .. }));
    assert!(no_version.to_string().contains(".version("), "{no_version}");
    let no_model = Agent::builder("a").version("1").build().unwrap_err();
    assert!(matches!(no_model, BuildError::NoModel { .. }), "{no_model}");
    let empty = Agent::builder("").version("1").model(ScriptedModel::new()).build().unwrap_err();
    assert!(matches!(empty, BuildError::Name { .. }), "{empty}");
    let duplicate = Agent::builder("a").version("1").model(ScriptedModel::new()).tool(weather()).tool(weather()).build().unwrap_err();
    assert!(matches!(duplicate, BuildError::DuplicateName { ref name, .. } if name == "get_weather"), "{duplicate}");
    let undeclared =
        Agent::builder("a").version("1").model(ScriptedModel::new()).tool(weather()).max_concurrent_tool_calls(2).build().unwrap_err();
    assert!(matches!(undeclared, BuildError::ConcurrencyUndeclared { limit: 2, .. }));
    assert!(undeclared.to_string().contains("ToolOptions::new().shared()"), "{undeclared}");
    Agent::builder("a")
        .version("1")
        .model(ScriptedModel::new())
        .tool_with(weather(), ToolOptions::new().shared())
        .max_concurrent_tool_calls(2)
        .build()
        .expect("declared concurrency is accepted");
    let bad_schema = Agent::builder("a")
        .version("1")
        .model(ScriptedModel::new())
        .tool(tool_fn("t", "A tool.", "{not json", |_| async { Ok(String::new()) }))
        .build()
        .unwrap_err();
    assert!(matches!(bad_schema, BuildError::Tool { ref tool, .. } if tool == "t"), "{bad_schema}");
    let no_calls = Agent::builder("a").version("1").model(ScriptedModel::new()).max_model_calls(0).build().unwrap_err();
    assert!(matches!(no_calls, BuildError::NoModelCalls { .. }));
    for bytes in [0, crate::limits::MAX_CONTEXT_BYTES_CEILING + 1] {
        let bad = Agent::builder("a").version("1").model(ScriptedModel::new()).max_context_bytes(bytes).build().unwrap_err();
        assert!(matches!(bad, BuildError::ContextLimit { .. }), "{bad}");
        assert!(bad.to_string().contains("max_context_bytes"), "{bad}");
    }
}

#[test]
fn the_deployment_identity_follows_every_behavioral_setting() {
    let base = || Agent::builder("a").version("1").model(ScriptedModel::new()).tool(weather());
    let reference = base().build().unwrap().deployment_ref().clone();
    assert_eq!(base().build().unwrap().deployment_ref(), &reference, "same configuration, same ref");
    let changed = [
        base().max_model_calls(9).build().unwrap(),
        Agent::builder("a").version("2").model(ScriptedModel::new()).tool(weather()).build().unwrap(),
        Agent::builder("a").version("1").model(ScriptedModel::new()).tool_with(weather(), ToolOptions::new().idempotent()).build().unwrap(),
        base().on_model_unknown(UnknownPolicy::ReportToModel).build().unwrap(),
        base().description("Other.").build().unwrap(),
        base().max_context_bytes(1 << 20).build().unwrap(),
    ];
    for agent in changed {
        assert_ne!(agent.deployment_ref(), &reference, "{agent:?}");
    }
}

#[test]
fn a_changed_configuration_is_refused_at_restore_naming_both_refs() {
    block_on(async {
        let store: Arc<dyn Committer> = Arc::new(MemoryCommitter::new());
        let first = Runtime::with_store(asking_agent(4), store.clone(), env());
        let run = first.start("Weather?").await.unwrap();
        assert!(matches!(run.idle().await.unwrap(), Idle::NeedsInput(_)));
        let id = run.id();
        drop(run);
        drop(first);
        let changed = asking_agent(5);
        let second = Runtime::with_store(changed.clone(), store.clone(), env());
        let refused = second.resume(&id).await.unwrap_err();
        let RunError::Refused(r) = &refused else { panic!("expected a refusal, got {refused}") };
        assert_eq!(&r.current, changed.deployment_ref(), "both references are kept in the fields");
        assert_ne!(r.stored, r.current);
        // One line that says what differs (the settings, naming the model), not two references
        // full of digests (they were ~1,500 characters).
        let text = refused.to_string();
        assert!(!text.contains('\n') && text.len() < 400, "{} chars: {text}", text.len());
        assert!(text.contains("the settings") && !text.contains("version given"), "{text}");
        assert!(!text.contains(&r.stored.to_string()), "{text}");
        assert_eq!(format!("{refused:?}"), text, "Debug prints the message");
        // The original configuration resumes, and the parked input is still there.
        let third = Runtime::with_store(asking_agent(4), store, env());
        let resumed = third.resume(&id).await.unwrap();
        assert_eq!(resumed.pending_inputs().len(), 1);
    });
}

/// A tool that hangs forever while `hang` is set (a crash while its call is in flight).
fn flaky(hang: Arc<AtomicBool>, calls: Arc<AtomicU32>) -> FnTool {
    tool_fn("charge", "Charges a card.", r#"{"type":"object"}"#, move |_| {
        let (hang, calls) = (hang.clone(), calls.clone());
        async move {
            calls.fetch_add(1, Ordering::SeqCst);
            if hang.load(Ordering::SeqCst) {
                futures::future::pending::<()>().await;
            }
            Ok("charged".to_owned())
        }
    })
}

fn charging(policy: UnknownPolicy, hang: Arc<AtomicBool>, calls: Arc<AtomicU32>) -> Agent {
    Agent::builder("shop")
        .version("1")
        .model(ScriptedModel::new().call_tool("charge", "{}").then_text("Finished."))
        .tool_with(flaky(hang, calls), ToolOptions::new().on_unknown(policy))
        .build()
        .unwrap()
}

/// Starts a run until the tool call is dispatched (its pending boundary acknowledged), then
/// abandons that writer and resumes from the store with a fresh runtime.
async fn crash_in_tool_and_resume(policy: UnknownPolicy) -> (Run, Arc<AtomicU32>, Runtime) {
    let store: Arc<dyn Committer> = Arc::new(MemoryCommitter::new());
    let hang = Arc::new(AtomicBool::new(true));
    let calls = Arc::new(AtomicU32::new(0));
    let first = Runtime::with_store(charging(policy, hang.clone(), calls.clone()), store.clone(), env());
    let run = first.start("Buy.").await.unwrap();
    let mut events = run.events();
    while let Some(e) = events.next().await {
        if matches!(e, RunEvent::ToolStarted { .. }) {
            break;
        }
    }
    let id = run.id();
    drop((events, run, first));
    hang.store(false, Ordering::SeqCst);
    let second = Runtime::with_store(charging(policy, hang, calls.clone()), store, env());
    let resumed = second.resume(&id).await.unwrap();
    (resumed, calls, second)
}

#[test]
fn usage_is_durable_state_summed_per_run_and_read_the_same_after_a_crash() {
    block_on(async {
        // The first model call (Usage 1 + 1) settled before the writer was abandoned; its
        // tokens come back from the store, and the second call's are added by the new runtime.
        let (run, _calls, _rt) = crash_in_tool_and_resume(UnknownPolicy::ReportToModel).await;
        let result = run.result().await.unwrap();
        assert_eq!(result.text(), "Finished.");
        assert_eq!(result.usage(), crate::chat::Usage::new(2, 2));
        assert_eq!(result.interaction_output().unwrap().model_calls, 2);
    });
}

#[test]
fn a_held_unknown_is_visible_when_resume_returns_and_resolve_finishes_the_run() {
    block_on(async {
        let (run, calls, _rt) = crash_in_tool_and_resume(UnknownPolicy::Hold).await;
        let unknowns = run.unknowns();
        assert_eq!(unknowns.len(), 1, "visible before resume returned");
        assert_eq!(unknowns[0].kind, UnknownKind::Tool("charge".into()));
        let events = run.events();
        drop(events);
        assert!(matches!(run.idle().await.unwrap(), Idle::NeedsResolution(u) if u.len() == 1));
        run.resolve(&unknowns[0], Resolution::Succeeded("charged (confirmed by the bank)".into())).await.unwrap();
        assert_eq!(run.result().await.unwrap().text(), "Finished.");
        assert_eq!(calls.load(Ordering::SeqCst), 1, "the call never ran twice");
        let events = collect(&run).await;
        assert!(events.iter().any(|e| matches!(e, RunEvent::Unknown(u) if u.policy == UnknownPolicy::Hold)));
    });
}

#[test]
fn report_to_model_settles_the_unknown_as_an_error_result_without_running_it_again() {
    block_on(async {
        let (run, calls, _rt) = crash_in_tool_and_resume(UnknownPolicy::ReportToModel).await;
        assert!(run.unknowns().is_empty(), "nothing left for the host");
        let result = run.result().await.unwrap();
        assert_eq!(result.text(), "Finished.");
        assert_eq!(calls.load(Ordering::SeqCst), 1, "the call never ran twice");
        let events = collect(&run).await;
        assert!(events.iter().any(|e| matches!(e, RunEvent::ToolSettled { text, is_error: true, .. } if text.contains(UNKNOWN_TOOL_TEXT))));
    });
}

#[test]
fn retry_performs_an_idempotent_call_again_and_settles_it_explicitly() {
    block_on(async {
        let (run, calls, _rt) = crash_in_tool_and_resume(UnknownPolicy::Retry).await;
        assert!(run.unknowns().is_empty());
        assert_eq!(run.result().await.unwrap().text(), "Finished.");
        assert_eq!(calls.load(Ordering::SeqCst), 2, "performed again once, by the host");
        let events = collect(&run).await;
        assert!(events.iter().any(|e| matches!(e, RunEvent::ToolSettled { text, is_error: false, .. } if text == "charged")));
    });
}

/// A model that hangs on its first call while `hang` is set.
struct HangingModel {
    hang: Arc<AtomicBool>,
    inner: ScriptedModel,
}

impl ModelClient for HangingModel {
    fn call<'a>(
        &'a self,
        cx: &'a ModelCallContext,
        request: crate::chat::Request,
    ) -> crate::env::BoxFuture<'a, Result<crate::chat::Response, ModelError>> {
        Box::pin(async move {
            if self.hang.load(Ordering::SeqCst) {
                futures::future::pending::<()>().await;
            }
            self.inner.call(cx, request).await
        })
    }
}

#[test]
fn a_model_call_unknown_after_a_crash_follows_the_model_policy() {
    for policy in [UnknownPolicy::Hold, UnknownPolicy::ReportToModel, UnknownPolicy::Retry] {
        block_on(async {
            let agent = |hang: Arc<AtomicBool>| {
                Agent::builder("m")
                    .version("1")
                    .model(HangingModel { hang, inner: ScriptedModel::new().then_text("Hello.") })
                    .on_model_unknown(policy)
                    .build()
                    .unwrap()
            };
            let store: Arc<dyn Committer> = Arc::new(MemoryCommitter::new());
            let hang = Arc::new(AtomicBool::new(true));
            let first = Runtime::with_store(agent(hang.clone()), store.clone(), env());
            let run = first.start("Hi.").await.unwrap();
            // Wait until the model call's pending boundary is in the store.
            crate::agent::run::wait_until(&run.shared_for_tests(), |s| !s.pending.is_empty()).await;
            let id = run.id();
            drop((run, first));
            hang.store(false, Ordering::SeqCst);
            let second = Runtime::with_store(agent(hang), store, env());
            let run = second.resume(&id).await.unwrap();
            match policy {
                UnknownPolicy::Hold => {
                    let unknowns = run.unknowns();
                    assert_eq!(unknowns.len(), 1);
                    assert_eq!(unknowns[0].kind, UnknownKind::Model);
                    run.kill("operator gave up").await.unwrap();
                    let killed = run.result().await.unwrap_err();
                    assert_eq!(killed.failure().map(RunFailure::status), Some(Status::Killed), "{killed}");
                }
                UnknownPolicy::ReportToModel => {
                    let failed = run.result().await.unwrap_err();
                    let failure = failed.failure().expect("a failed model call fails the run");
                    assert_eq!(failure.status(), Status::Failed);
                    assert_eq!(failure.code(), "interaction.model.failed");
                }
                UnknownPolicy::Retry => assert_eq!(run.result().await.unwrap().text(), "Hello."),
            }
        });
    }
}

#[test]
fn the_readme_quickstart_is_the_quickstart_example_verbatim() {
    let readme = include_str!("../../../README.md");
    let example = include_str!("../../examples/quickstart.rs");
    assert!(readme.contains(example), "README.md must hold runtime/examples/quickstart.rs as written");
}

#[test]
fn a_malformed_run_id_says_what_a_run_id_looks_like() {
    let error = "not a run id".parse::<RunId>().unwrap_err();
    assert!(matches!(error, RunError::InvalidRunId(_)));
    assert!(error.to_string().contains("process:"), "{error}");
}

/// A tool that asks twice: after the first answer it parks on a second wait, so its child (and
/// the consumed first answer in its mailbox) stays in the head.
struct AskTwice;

impl crate::tool::Tool for AskTwice {
    fn spec(&self) -> crate::tool::ToolDefinitionInput {
        crate::tool::ToolDefinitionInput {
            name: "ask_twice".into(),
            description: "Asks two questions.".into(),
            input_schema: crate::json::parse(br#"{"type":"object"}"#).unwrap(),
        }
    }

    fn call<'a>(
        &'a self,
        _invocation: &'a crate::tool::Invocation,
        cx: crate::tool::ToolContext,
    ) -> crate::env::BoxFuture<'a, Result<crate::chat::ToolOutput, crate::tool::ToolError>> {
        let ask = |question: &str, step: &str| Err(crate::tool::require_tool_input(question.as_bytes(), br#"{"type":"string"}"#, step.as_bytes()));
        let outcome = match cx.continuation() {
            None => ask(r#""First?""#, r#"{"step":1}"#),
            Some(c) if c.state().value().get("step").and_then(|s| s.as_u64()) == Some(1) => ask(r#""Second?""#, r#"{"step":2}"#),
            Some(c) => Ok(crate::chat::ToolOutput::text(c.response().canonical().to_owned())),
        };
        Box::pin(async move { outcome })
    }
}

fn asking_twice() -> Agent {
    Agent::builder("twice")
        .version("1")
        .model(ScriptedModel::new().call_tool("ask_twice", "{}").then_text("Done."))
        .tool(AskTwice)
        .build()
        .unwrap()
}

#[test]
fn a_retried_answer_is_a_duplicate_after_resume_and_a_different_one_is_refused() {
    block_on(async {
        let store: Arc<dyn Committer> = Arc::new(MemoryCommitter::new());
        let first_rt = Runtime::with_store(asking_twice(), store.clone(), env());
        let run = first_rt.start("Go.").await.unwrap();
        let Idle::NeedsInput(inputs) = run.idle().await.unwrap() else { panic!("expected the first question") };
        let first = inputs[0].clone();
        assert_eq!(first.prompt_text(), "First?");
        assert!(run.answer_text(&first, "A").await.unwrap(), "the first answer is new");
        // The tool parks again on its second question; the first answer is consumed.
        crate::agent::run::wait_until(&run.shared_for_tests(), |s| s.inputs.iter().any(|i| i.wait != first.wait)).await;
        let id = run.id();
        drop((run, first_rt));
        // A new process: nothing in memory knows the first answer.
        let second_rt = Runtime::with_store(asking_twice(), store, env());
        let run = second_rt.resume(&id).await.unwrap();
        let pending = run.pending_inputs();
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].prompt_text(), "Second?");
        assert!(!run.answer_text(&first, "A").await.unwrap(), "the identical retry is a duplicate, nothing applied");
        let other = run.answer_text(&first, "B").await.unwrap_err();
        assert!(matches!(other, AnswerError::WrongWait { .. }), "{other}");
        assert!(run.answer_text(&pending[0], "C").await.unwrap());
        assert_eq!(run.result().await.unwrap().text(), "Done.");
        let events = collect(&run).await;
        let settled: Vec<&str> = events
            .iter()
            .filter_map(|e| if let RunEvent::ToolSettled { text, .. } = e { Some(text.as_str()) } else { None })
            .collect();
        assert_eq!(settled, [r#""C""#], "the tool saw each answer once, in order");
    });
}

#[test]
fn an_answer_to_a_call_that_ended_is_refused_as_ended_also_after_compaction_and_resume() {
    block_on(async {
        let store: Arc<dyn Committer> = Arc::new(MemoryCommitter::new());
        let first_rt = Runtime::with_store(asking_agent(4), store.clone(), env());
        let run = first_rt.start("Weather?").await.unwrap();
        let Idle::NeedsInput(inputs) = run.idle().await.unwrap() else { panic!("expected an input request") };
        let input = inputs[0].clone();
        assert!(run.answer_text(&input, "Oslo").await.unwrap());
        assert_eq!(run.result().await.unwrap().text(), "Done.");
        let head = run.shared_for_tests().lock().head.clone().unwrap();
        assert!(head.process(&input.process).is_none() && head.residue(&input.process).is_some(), "the asking call was retired");
        // This runtime delivered "Oslo": a retry is still a duplicate.
        assert!(!run.answer_text(&input, "Oslo").await.unwrap());
        let other = run.answer_text(&input, "Bergen").await.unwrap_err();
        assert!(matches!(other, AnswerError::CallEnded { .. }), "{other}");
        assert!(other.to_string().contains("already answered or its call ended"), "{other}");
        // A question this run never asked is still a wrong wait.
        let mut never = input.clone();
        never.process = crate::kernel::ids::ProcessId::root_from_hex(&"0".repeat(32)).unwrap();
        let refused = run.answer_text(&never, "Bergen").await.unwrap_err();
        assert!(matches!(refused, AnswerError::WrongWait { .. }), "{refused}");
        let id = run.id();
        drop((run, first_rt));
        // A new process knows the call only from its residue.
        let second_rt = Runtime::with_store(asking_agent(4), store, env());
        let run = second_rt.resume(&id).await.unwrap();
        let late = run.answer_text(&input, "Oslo").await.unwrap_err();
        assert!(matches!(late, AnswerError::CallEnded { .. }), "{late}");
    });
}

/// A model that counts its physical calls.
struct CountingModel {
    calls: Arc<AtomicU32>,
    inner: ScriptedModel,
}

impl ModelClient for CountingModel {
    fn call<'a>(
        &'a self,
        cx: &'a ModelCallContext,
        request: crate::chat::Request,
    ) -> crate::env::BoxFuture<'a, Result<crate::chat::Response, ModelError>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.call(cx, request)
    }
}

/// Where the first writer crashes, relative to one dispatched call.
#[derive(Clone, Copy, Debug)]
enum Boundary {
    /// Its pending boundary is never stored: the call never ran.
    BeforePending,
    /// Its settled boundary is stored, then the writer crashes: the result is durable.
    AfterSettled,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Target {
    /// The first model call (the first pending boundary).
    Model,
    /// The `charge` tool call (the second pending boundary).
    Tool,
}

#[test]
fn a_crash_before_the_pending_commit_or_after_the_settled_commit_needs_no_policy() {
    use crate::kernel::commit::{CommitCallKind, EffectBoundaryKind, Fault, FaultyCommitter};
    let policies = [UnknownPolicy::Hold, UnknownPolicy::ReportToModel, UnknownPolicy::Retry];
    for target in [Target::Model, Target::Tool] {
        for boundary in [Boundary::BeforePending, Boundary::AfterSettled] {
            for policy in policies {
                let case = format!("{target:?} {boundary:?} {policy:?}");
                block_on(async {
                    let (model_calls, tool_calls) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
                    let agent = || {
                        Agent::builder("shop")
                            .version("1")
                            .model(CountingModel {
                                calls: model_calls.clone(),
                                inner: ScriptedModel::new().call_tool("charge", "{}").then_text("Finished."),
                            })
                            .on_model_unknown(policy)
                            .tool_with(flaky(Arc::new(AtomicBool::new(false)), tool_calls.clone()), ToolOptions::new().on_unknown(policy))
                            .build()
                            .unwrap()
                    };
                    let store = Arc::new(FaultyCommitter::new(MemoryCommitter::new()));
                    let ordinal = if target == Target::Model { 0 } else { 1 };
                    let (mut pendings, mut crashed_effect) = (0, None);
                    store.set_fault_plan(Box::new(move |call| {
                        let CommitCallKind::Effect { effect_id, kind } = &call.kind else { return Fault::Pass };
                        match (kind, boundary) {
                            (EffectBoundaryKind::Pending, _) => {
                                pendings += 1;
                                if pendings - 1 != ordinal {
                                    return Fault::Pass;
                                }
                                if let Boundary::BeforePending = boundary {
                                    return Fault::FailBefore;
                                }
                                crashed_effect = Some(effect_id.clone());
                                Fault::Pass
                            }
                            (EffectBoundaryKind::Settled, Boundary::AfterSettled) if crashed_effect.as_ref() == Some(effect_id) => {
                                Fault::CrashAfter
                            }
                            _ => Fault::Pass,
                        }
                    }));
                    let first = Runtime::with_store(agent(), store.clone(), env());
                    let run = first.start("Buy.").await.unwrap();
                    let stopped = run.result().await.unwrap_err();
                    assert!(matches!(stopped, RunError::Stopped(_) | RunError::Store(_)), "{case}: {stopped}");
                    let id = run.id();
                    drop((run, first));
                    let ran_before = match target {
                        Target::Model => model_calls.load(Ordering::SeqCst),
                        Target::Tool => tool_calls.load(Ordering::SeqCst),
                    };
                    let expected_before = match boundary {
                        Boundary::BeforePending => 0,
                        Boundary::AfterSettled => 1,
                    };
                    assert_eq!(ran_before, expected_before, "{case}: calls before the crash");
                    store.clear_fault_plan();
                    let second = Runtime::with_store(agent(), store.clone(), env());
                    let run = second.resume(&id).await.unwrap();
                    assert!(run.unknowns().is_empty(), "{case}: no Unknown");
                    assert_eq!(run.result().await.unwrap().text(), "Finished.", "{case}");
                    assert_eq!(tool_calls.load(Ordering::SeqCst), 1, "{case}: the tool ran exactly once");
                    assert_eq!(model_calls.load(Ordering::SeqCst), 2, "{case}: each model call ran exactly once");
                    let events = collect(&run).await;
                    assert!(!events.iter().any(|e| matches!(e, RunEvent::Unknown(_))), "{case}: {events:?}");
                });
            }
        }
    }
}

#[test]
fn a_run_started_under_a_chosen_id_is_found_by_it_and_cannot_start_twice() {
    block_on(async {
        let id = RunId::from_key("queue/job-17");
        assert_eq!(id, RunId::from_key("queue/job-17"), "the same key names the same run");
        assert_ne!(id, RunId::from_key("queue/job-18"));
        assert_eq!(id.to_string().parse::<RunId>().unwrap(), id);
        let agent = || Agent::builder("weather").version("1").model(ScriptedModel::new().then_text("Hi.")).build().unwrap();
        let store = Arc::new(MemoryCommitter::new());
        let runtime = Runtime::with_store(agent(), store.clone(), env());
        let run = runtime.start_with_id(&id, "Hello?").await.unwrap();
        assert_eq!(run.id(), id);
        assert_eq!(run.result().await.unwrap().text(), "Hi.");
        assert!(store.head(id.process_id()).is_some());
        // A second start of the same id (another worker, say) makes no second tree.
        let other = Runtime::with_store(agent(), store.clone(), env());
        let again = other.start_with_id(&id, "Hello?").await.unwrap_err();
        assert!(matches!(again, RunError::AlreadyExists(_)), "{again}");
        let text = again.to_string();
        assert!(text.contains("already exists") && text.contains("Runtime::resume"), "{text}");
        assert!(!text.contains("disk space"), "{text}");
        assert_eq!(store.roots(), vec![id.process_id().clone()]);
    });
}
