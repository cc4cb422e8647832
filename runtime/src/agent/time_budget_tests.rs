//! Time budgets through the front door, on a clock the tests move by hand (the runtime's
//! abstract clock; a slow tool moves it forward): a run past its time fails with
//! `interaction.budget.time` before its next model call, a resumed run counts from the start
//! its first writer recorded, and a delegate must stop by its parent's deadline.

use super::delegation_fixture::{boss, calls_helper};
use crate::chat::Usage;
use crate::env::{BoxFuture, Clock, Env, Timestamp, TokioEnv};
use crate::kernel::commit::{Committer, MemoryCommitter};
use crate::prelude::*;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use super::test_runtime::block_on;

const T0: u64 = 1_800_000_000_000;

/// The runtime's clock, moved only by the test and its tools.
#[derive(Default)]
struct HandClock(AtomicU64);

impl HandClock {
    fn advance(&self, ms: u64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for HandClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_millis(T0 + self.0.load(Ordering::SeqCst)).unwrap()
    }
    // Real sleeping, on the runtime's own clock: only `now` is driven by hand.
    fn sleep(&self, d: Duration) -> BoxFuture<'static, ()> {
        TokioEnv::current().unwrap().sleep(d)
    }
}

fn env(clock: &Arc<HandClock>) -> Env {
    let tokio = Arc::new(TokioEnv::current().unwrap());
    Env::new(clock.clone(), tokio.clone(), tokio)
}

/// A tool that takes `ms` of the runtime's clock.
fn slow(clock: &Arc<HandClock>, ms: u64) -> FnTool {
    let clock = clock.clone();
    tool_fn("slow", "Takes a while.", r#"{"type":"object"}"#, move |_| {
        clock.advance(ms);
        async move { Ok("done slowly".to_owned()) }
    })
}

/// Counts the calls that reached the model.
struct Counted {
    inner: ScriptedModel,
    calls: Arc<AtomicU32>,
}

impl ModelClient for Counted {
    fn call<'a>(&'a self, cx: &'a ModelCallContext, request: crate::chat::Request) -> BoxFuture<'a, Result<crate::chat::Response, ModelError>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.call(cx, request)
    }
    fn identity(&self) -> crate::interaction::model::ModelIdentity {
        ModelClient::identity(&self.inner)
    }
}

fn failure_of(result: Result<RunResult, RunError>) -> RunFailure {
    match result {
        Err(RunError::NotCompleted(f)) => f,
        other => panic!("expected a run that did not complete, got {other:?}"),
    }
}

/// An agent whose model asks for one `slow` call (2 s on `clock`), then answers "Done.", under
/// `budget`; `calls` counts the model calls that went out.
fn slow_then_done(clock: &Arc<HandClock>, calls: &Arc<AtomicU32>, budget: Budget) -> Agent {
    let model = Counted { inner: ScriptedModel::new().call_tool("slow", "{}").then_text("Done."), calls: calls.clone() };
    Agent::builder("a").version("1").model(model).tool(slow(clock, 2_000)).budget(budget).build().unwrap()
}

#[test]
fn a_run_past_its_time_fails_before_the_next_model_call_with_what_to_do() {
    block_on(async {
        let clock = Arc::new(HandClock::default());
        let calls = Arc::new(AtomicU32::new(0));
        let agent = slow_then_done(&clock, &calls, Budget::new().time(Duration::from_secs(1)));
        let run = Runtime::with_store(agent, Arc::new(MemoryCommitter::new()), env(&clock)).start("Hi.").await.unwrap();
        let failure = failure_of(run.result().await);
        assert_eq!(failure.code(), "interaction.budget.time");
        assert!(failure.message().contains("time limit 1000 ms, 2000 ms elapsed"), "{}", failure.message());
        assert!(failure.message().contains("raise the agent's Budget::time"), "{}", failure.message());
        assert_eq!(calls.load(Ordering::SeqCst), 1, "the second call never reached the model");
        assert_eq!(failure.result().tool_calls(), 1);
    });
}

#[test]
fn a_run_within_its_time_completes_and_the_budget_is_part_of_the_identity() {
    block_on(async {
        let clock = Arc::new(HandClock::default());
        let build = |limit: Option<Duration>| {
            let b = Agent::builder("a").version("1").model(ScriptedModel::new().call_tool("slow", "{}").then_text("Done.")).tool(slow(&clock, 500));
            match limit {
                Some(l) => b.budget(Budget::new().time(l)),
                None => b,
            }
            .build()
            .unwrap()
        };
        let agent = build(Some(Duration::from_secs(1)));
        assert_ne!(agent.deployment_ref(), build(Some(Duration::from_secs(2))).deployment_ref());
        assert_ne!(agent.deployment_ref(), build(None).deployment_ref());
        let run = Runtime::with_store(agent, Arc::new(MemoryCommitter::new()), env(&clock)).start("Hi.").await.unwrap();
        assert_eq!(run.result().await.unwrap().text(), "Done.");
    });
}

fn asking() -> Agent {
    Agent::builder("asker")
        .version("1")
        .model(ScriptedModel::new().call_tool("ask_user", r#"{"question":"Which city?"}"#).then_text("Done."))
        .tool(AskHuman::new("ask_user", "Asks the user."))
        .budget(Budget::new().time(Duration::from_secs(60)))
        .build()
        .unwrap()
}

#[test]
fn a_resumed_run_counts_from_the_start_its_first_writer_recorded() {
    block_on(async {
        let clock = Arc::new(HandClock::default());
        let store: Arc<dyn Committer> = Arc::new(MemoryCommitter::new());
        let first = Runtime::with_store(asking(), store.clone(), env(&clock));
        let run = first.start("Weather?").await.unwrap();
        assert!(matches!(run.idle().await.unwrap(), Idle::NeedsInput(_)));
        let id = run.id();
        drop(run);
        drop(first);
        // The human answers 90 s later, to a new process.
        clock.advance(90_000);
        let second = Runtime::with_store(asking(), store, env(&clock));
        let resumed = second.resume(&id).await.unwrap();
        let input = resumed.pending_inputs()[0].clone();
        assert!(resumed.answer_text(&input, "Oslo").await.unwrap());
        let failure = failure_of(resumed.result().await);
        assert_eq!(failure.code(), "interaction.budget.time");
        assert!(failure.message().contains("time limit 60000 ms, 90000 ms elapsed"), "{}", failure.message());
        assert_eq!(failure.usage(), Usage::new(1, 1), "one call settled (a scripted call reports 1 + 1 tokens)");
    });
}

#[test]
fn a_delegate_stops_at_its_parents_deadline() {
    block_on(async {
        let clock = Arc::new(HandClock::default());
        let helper_calls = Arc::new(AtomicU32::new(0));
        // The helper has no time budget of its own: only its parent's deadline can stop it.
        let helper = Agent::builder("helper")
            .version("1")
            .description("Helps.")
            .model(Counted { inner: ScriptedModel::new().call_tool("slow", "{}").then_text("Found it."), calls: helper_calls.clone() })
            .tool(slow(&clock, 5_000))
            .build()
            .unwrap();
        let parent = boss(calls_helper(), helper)
            .budget(Budget::new().time(Duration::from_secs(3)))
            .build()
            .unwrap();
        let run = Runtime::with_store(parent, Arc::new(MemoryCommitter::new()), env(&clock)).start("Go.").await.unwrap();
        let root = run.id().process_id().clone();
        let mut refused = Vec::new();
        let mut events = run.events();
        while let Some(e) = events.next().await {
            if let RunEvent::ModelFailed { process, error, .. } = e {
                refused.push((process == root, error));
            }
        }
        // The helper's second call and then the parent's were refused at the parent's deadline.
        let deadline = format!("the time budget ended at {} ms", T0 + 3_000);
        assert_eq!(refused.len(), 2, "{refused:?}");
        assert!(!refused[0].0 && refused[0].1.contains(&deadline), "{refused:?}");
        assert!(refused[1].0 && refused[1].1.contains(&deadline), "{refused:?}");
        assert_eq!(helper_calls.load(Ordering::SeqCst), 1, "the helper's second call never reached its model");
        let failure = failure_of(run.result().await);
        assert_eq!(failure.code(), "interaction.budget.time", "{failure}");
    });
}

#[test]
fn a_run_past_its_time_asks_and_an_extension_lets_the_refused_call_go_out() {
    block_on(async {
        let clock = Arc::new(HandClock::default());
        let calls = Arc::new(AtomicU32::new(0));
        let agent = slow_then_done(&clock, &calls, Budget::new().time(Duration::from_secs(1)).on_exhausted(OnExhausted::AskHuman));
        let run = Runtime::with_store(agent, Arc::new(MemoryCommitter::new()), env(&clock)).start("Hi.").await.unwrap();
        let Idle::NeedsInput(questions) = run.idle().await.unwrap() else { panic!("expected the time question") };
        let asked = questions[0].budget_question().expect("a budget question");
        assert_eq!((asked.kind, asked.limit, asked.spent, asked.needs), (BudgetKind::Time, 1_000, 2_000, None));
        assert_eq!(calls.load(Ordering::SeqCst), 1, "the refused call never reached the model");
        // The answer comes 500 ms later: that wait counts too, so 2 s more covers it (the deadline moves to 3 s from the start).
        clock.advance(500);
        let grant = BudgetExtension::new().time(Duration::from_millis(2_000)).to_json();
        assert!(run.answer(&questions[0], grant).await.unwrap());
        assert_eq!(run.result().await.unwrap().text(), "Done.");
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    });
}
