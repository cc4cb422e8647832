//! Budgets through the front door: a call that does not fit ends the run with the limit's
//! code and figures, spending is counted once (also for a model call re-issued after an
//! Unknown), a delegate works within its share of the tree's budget, and a failed run keeps
//! what it spent.

use super::delegation_fixture::{boss, calls_helper};
use crate::chat::{Request, Response, Usage};
use crate::env::BoxFuture;
use crate::interaction::model::ModelIdentity;
use crate::kernel::commit::MemoryCommitter;
use crate::prelude::*;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use super::test_runtime::{block_on, env};

/// A scripted model reporting `usage` for every call; its first `unknowns` calls end with an
/// unknown outcome (the request may have reached the provider).
struct Metered {
    inner: ScriptedModel,
    usage: Usage,
    unknowns: u32,
    calls: Arc<AtomicU32>,
}

impl Metered {
    fn new(inner: ScriptedModel, usage: Usage) -> Metered {
        Metered { inner, usage, unknowns: 0, calls: Arc::new(AtomicU32::new(0)) }
    }
}

impl ModelClient for Metered {
    fn call<'a>(&'a self, cx: &'a ModelCallContext, request: Request) -> BoxFuture<'a, Result<Response, ModelError>> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        Box::pin(async move {
            if n <= self.unknowns {
                return Err(ModelError::Unknown("connection lost after the request was sent".into()));
            }
            let mut response = self.inner.call(cx, request).await?;
            response.usage = self.usage;
            Ok(response)
        })
    }

    fn identity(&self) -> ModelIdentity {
        ModelIdentity::new("test", "metered")
    }
}

fn failure_of(result: Result<RunResult, RunError>) -> RunFailure {
    match result {
        Err(RunError::NotCompleted(f)) => f,
        other => panic!("expected a run that did not complete, got {other:?}"),
    }
}

fn echo() -> FnTool {
    tool_fn("echo", "Echoes.", r#"{"type":"object"}"#, |_args| async move { Ok("echoed".to_owned()) })
}

#[test]
fn a_model_call_that_does_not_fit_the_token_budget_fails_the_run_with_figures_and_keeps_its_usage() {
    block_on(async {
        let model = Metered::new(ScriptedModel::new().call_tool("echo", "{}").then_text("Done."), Usage::new(1000, 10));
        let calls = model.calls.clone();
        let agent = Agent::builder("a")
            .version("1")
            .model(model)
            .tool(echo())
            .budget(Budget::new().total_tokens(1050).reserve_output_tokens(5))
            .build()
            .unwrap();
        let run = Runtime::with_store(agent, Arc::new(MemoryCommitter::new()), env()).start("Hi.").await.unwrap();
        let failure = failure_of(run.result().await);
        assert_eq!(failure.code(), "interaction.budget.total_tokens");
        assert!(failure.message().contains("total_tokens limit 1050, spent 1010"), "{}", failure.message());
        assert_eq!(calls.load(Ordering::SeqCst), 1, "the second call was never made");
        assert_eq!(failure.usage(), Usage::new(1000, 10), "a failed run reports what it spent");
        assert_eq!(failure.result().tool_calls(), 1);
        assert_eq!(run.usage(), Usage::new(1000, 10));
    });
}

#[test]
fn the_tool_call_budget_stops_the_call_beyond_it() {
    block_on(async {
        let script = ScriptedModel::new().call_tool("echo", "{}").call_tool("echo", "{}").then_text("Done.");
        let ran = Arc::new(AtomicU32::new(0));
        let counted = ran.clone();
        let tool = tool_fn("echo", "Echoes.", r#"{"type":"object"}"#, move |_args| {
            counted.fetch_add(1, Ordering::SeqCst);
            async move { Ok("echoed".to_owned()) }
        });
        let agent = Agent::builder("a").version("1").model(script).tool(tool).budget(Budget::new().tool_calls(1)).build().unwrap();
        let run = Runtime::with_store(agent, Arc::new(MemoryCommitter::new()), env()).start("Hi.").await.unwrap();
        let failure = failure_of(run.result().await);
        assert_eq!(failure.code(), "interaction.budget.tool_calls");
        assert!(failure.message().contains("tool_calls limit 1, spent 1, the next tool call needs 1"), "{}", failure.message());
        assert_eq!(ran.load(Ordering::SeqCst), 1);
    });
}

#[test]
fn a_model_call_reissued_after_an_unknown_is_counted_and_priced_once() {
    block_on(async {
        let mut model = Metered::new(ScriptedModel::new().then_text("Hello."), Usage::new(1000, 100));
        model.unknowns = 1;
        let calls = model.calls.clone();
        let agent = Agent::builder("a")
            .version("1")
            .model(model)
            .budget(Budget::new().cost_usd_micros(1_000_000))
            .prices(Prices::new().model("metered", Price::per_million_usd_micros(1_000_000, 2_000_000)))
            .build()
            .unwrap();
        let run = Runtime::with_store(agent, Arc::new(MemoryCommitter::new()), env()).start("Hi.").await.unwrap();
        let result = run.result().await.unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 2, "issued again after the Unknown");
        assert_eq!(result.usage(), Usage::new(1000, 100), "one settlement, counted once");
        assert_eq!(result.cost_usd_micros(), 1000 + 200);
    });
}

#[test]
fn a_cost_budget_needs_a_price_for_the_model() {
    let e = Agent::builder("a")
        .version("1")
        .model(ScriptedModel::new())
        .budget(Budget::new().cost_usd_micros(5))
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("model `scripted` has no price"), "{e}");
}

#[test]
fn a_delegate_works_within_its_share_of_the_parent_budget_and_a_failed_one_is_charged_its_grant() {
    block_on(async {
        let child_model = Metered::new(ScriptedModel::new().then_text("Found it."), Usage::new(50, 5));
        let child_calls = child_model.calls.clone();
        // The child's own budget is generous: only the parent's grant can stop it.
        let helper = Agent::builder("helper")
            .version("1")
            .description("Helps.")
            .model(child_model)
            .budget(Budget::new().total_tokens(1_000_000).reserve_output_tokens(100))
            .build()
            .unwrap();
        let parent = boss(Metered::new(calls_helper(), Usage::new(900, 10)), helper)
            .budget(Budget::new().total_tokens(950).reserve_output_tokens(5))
            .build()
            .unwrap();
        let run = Runtime::with_store(parent, Arc::new(MemoryCommitter::new()), env()).start("Go.").await.unwrap();
        let mut events = run.events();
        let mut helper_failure = None;
        while let Some(e) = events.next().await {
            if let RunEvent::Finished(r) = &e {
                helper_failure = Some(r.clone());
            }
        }
        // 40 tokens remained after the parent's first call: less than the helper's first
        // reservation (100 output tokens), so the helper never called its model and failed on its budget.
        assert_eq!(child_calls.load(Ordering::SeqCst), 0);
        let failure = failure_of(run.result().await);
        assert_eq!(failure.code(), "interaction.budget.total_tokens", "{failure}");
        // The parent charged the whole grant (40) for the helper that reported nothing.
        assert!(failure.message().contains("total_tokens limit 950, spent 950"), "{}", failure.message());
        assert!(helper_failure.is_some());
    });
}

#[test]
fn a_delegate_that_finishes_adds_its_spending_to_the_parent() {
    block_on(async {
        let helper = Agent::builder("helper")
            .version("1")
            .description("Helps.")
            .model(Metered::new(ScriptedModel::new().call_tool("echo", "{}").then_text("Found it."), Usage::new(50, 5)))
            .tool(echo())
            .build()
            .unwrap();
        let parent = boss(Metered::new(calls_helper(), Usage::new(100, 10)), helper)
            .budget(Budget::new().total_tokens(100_000).tool_calls(5).reserve_output_tokens(5))
            .build()
            .unwrap();
        let run = Runtime::with_store(parent, Arc::new(MemoryCommitter::new()), env()).start("Go.").await.unwrap();
        let result = run.result().await.unwrap();
        assert_eq!(result.usage(), Usage::new(2 * 100 + 2 * 50, 2 * 10 + 2 * 5));
        assert_eq!(result.tool_calls(), 1, "the helper's tool call counts against the tree");
    });
}
