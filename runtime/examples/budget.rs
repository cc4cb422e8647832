//! Budgets: a coordinator and its researcher share one budget of tokens, cost and tool calls.
//! The first run fits and reports what it spent; the second gets a budget too small for its
//! second model call and fails with the budget's code and figures, keeping what it spent; the
//! third has 200 ms and a lookup that takes 300 ms, so its next model call is refused; the
//! fourth has the tight budget with `OnExhausted::AskHuman`: it asks the host, which grants
//! 2000 tokens, and completes.
//!
//! Run: `cargo run -p keel-runtime --example budget`

use keel::chat::{Request, Response, Usage};
use keel::env::BoxFuture;
use keel::interaction::model::ModelIdentity;
use keel::prelude::*;
use std::time::Duration;

/// A scripted model that reports provider-like usage (ScriptedModel reports 1 + 1 tokens).
struct Metered(ScriptedModel, Usage);

impl ModelClient for Metered {
    fn call<'a>(&'a self, cx: &'a ModelCallContext, request: Request) -> BoxFuture<'a, Result<Response, ModelError>> {
        Box::pin(async move {
            let mut response = self.0.call(cx, request).await?;
            response.usage = self.1;
            Ok(response)
        })
    }

    fn identity(&self) -> ModelIdentity {
        ModelIdentity::new("example", "small-model")
    }
}

/// $0.50 per million input tokens, $1.50 per million output tokens. Each agent prices its own
/// calls: a delegate under a cost limit needs a price for its model too.
fn prices() -> Prices {
    Prices::new().model("small-model", Price::per_million_usd_micros(500_000, 1_500_000))
}

fn coordinator(budget: Budget) -> Result<Agent, BuildError> {
    let researcher = Agent::builder("researcher")
        .version("1.0.0")
        .description("Finds facts.")
        .model(Metered(ScriptedModel::new().then_text("About 2.1 million."), Usage::new(400, 20)))
        // Its calls reserve 200 output tokens too (a delegate reserves by its own budget).
        .budget(Budget::new().reserve_output_tokens(200))
        .prices(prices())
        .build()?;
    let task = r#"{"messages":[{"role":"user","parts":[{"type":"text","text":"How many people live in Paris?"}]}]}"#;
    Agent::builder("coordinator")
        .version("1.0.0")
        .model(Metered(ScriptedModel::new().call_tool("research", task).then_text("Paris: about 2.1 million."), Usage::new(1_000, 50)))
        .delegate("research", "Ask the researcher.", researcher)
        .budget(budget)
        .prices(prices())
        .build()
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Output reservations of 200 tokens per call (a request's max_output_tokens would set it).
    let roomy = Budget::new().total_tokens(10_000).cost_usd_micros(10_000).tool_calls(10).reserve_output_tokens(200);
    let run = Runtime::in_memory(coordinator(roomy)?)?.start("How big is Paris?").await?;
    let mut events = run.events();
    while let Some(event) = events.next().await {
        if let RunEvent::UsageUpdated { process, usage, run: so_far } = event {
            println!("[{process}] {} tokens; the run so far: {}", usage.total(), so_far.total());
        }
    }
    let result = run.result().await?;
    println!("{} -- {} tokens, {} micro-dollars", result.text(), result.usage().total(), result.cost_usd_micros());
    // Coordinator 2 × (1000 + 50), researcher 400 + 20.
    assert_eq!(result.usage(), Usage::new(2_400, 120));
    // Per call, rounded up: 1000 × 0.5 + 50 × 1.5 = 575 (twice), 400 × 0.5 + 20 × 1.5 = 230.
    assert_eq!(result.cost_usd_micros(), 2 * 575 + 230);

    // 1500 tokens: the coordinator's first call (1050) fits; the researcher gets what remains
    // (450) and spends 420; the coordinator's second call no longer fits its reservation.
    let tight = Budget::new().total_tokens(1_500).reserve_output_tokens(200);
    let run = Runtime::in_memory(coordinator(tight)?)?.start("How big is Paris?").await?;
    match run.result().await {
        Err(RunError::NotCompleted(failure)) => {
            println!("stopped: {} ({}), spent {} tokens", failure.code(), failure.message(), failure.usage().total());
            assert_eq!(failure.code(), "interaction.budget.total_tokens");
            assert_eq!(failure.usage(), Usage::new(1_400, 70));
        }
        other => panic!("expected the budget to stop the run, got {other:?}"),
    }

    // Time, on the runtime's clock from the run's start (a resumed run keeps its start).
    let lookup = tool_fn("lookup", "Looks it up, slowly.", r#"{"type":"object"}"#, |_args| async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        Ok("About 2.1 million.".to_owned())
    });
    let timed = Agent::builder("timed")
        .version("1.0.0")
        .model(ScriptedModel::new().call_tool("lookup", "{}").then_text("Paris: about 2.1 million."))
        .tool(lookup)
        .budget(Budget::new().time(Duration::from_millis(200)))
        .build()?;
    let run = Runtime::in_memory(timed)?.start("How big is Paris?").await?;
    match run.result().await {
        Err(RunError::NotCompleted(failure)) => {
            println!("stopped: {} ({})", failure.code(), failure.message());
            assert_eq!(failure.code(), "interaction.budget.time");
        }
        other => panic!("expected the time budget to stop the run, got {other:?}"),
    }

    // Ask the host instead of failing: the run parks on a durable question (like a tool's
    // question: an InputRequested event, pending_inputs, Idle::NeedsInput) and goes on from
    // the call that did not fit once the host grants more.
    let asking = Budget::new().total_tokens(1_500).reserve_output_tokens(200).on_exhausted(OnExhausted::AskHuman);
    let run = Runtime::in_memory(coordinator(asking)?)?.start("How big is Paris?").await?;
    let Idle::NeedsInput(questions) = run.idle().await? else { panic!("expected the budget question") };
    let question = questions[0].budget_question().expect("a budget question");
    println!("asked: {}", questions[0].prompt_text());
    assert_eq!((question.kind, question.limit, question.spent), (BudgetKind::TotalTokens, 1_500, 1_470));
    run.answer(&questions[0], BudgetExtension::new().total_tokens(2_000).to_json()).await?;
    // (`BudgetAnswer::Decline.to_json()` would end it with interaction.budget.total_tokens.)
    let result = run.result().await?;
    println!("{} -- {} tokens after the extension", result.text(), result.usage().total());
    assert_eq!(result.usage(), Usage::new(2_400, 120));
    Ok(())
}
