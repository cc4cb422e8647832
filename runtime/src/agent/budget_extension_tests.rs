//! `OnExhausted::AskHuman` through the front door: a run whose own limit ran out parks on a
//! budget question the host sees like a tool's question; an extension lets it go on where it
//! stopped, a decline ends it with the budget failure, a malformed answer is refused before
//! anything is committed, and a question and its grants survive restarts on a file store.

use crate::chat::{Request, Response, Usage};
use crate::env::BoxFuture;
use crate::interaction::model::ModelIdentity;
use crate::kernel::commit::MemoryCommitter;
use crate::prelude::*;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use super::test_runtime::{block_on, env};

/// A scripted model reporting `usage` for every call, counting the calls that reached it.
struct Metered {
    inner: ScriptedModel,
    usage: Usage,
    calls: Arc<AtomicU32>,
}

impl ModelClient for Metered {
    fn call<'a>(&'a self, cx: &'a ModelCallContext, request: Request) -> BoxFuture<'a, Result<Response, ModelError>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            let mut response = self.inner.call(cx, request).await?;
            response.usage = self.usage;
            Ok(response)
        })
    }

    fn identity(&self) -> ModelIdentity {
        ModelIdentity::new("test", "metered")
    }
}

fn counting_echo(ran: &Arc<AtomicU32>) -> FnTool {
    let ran = ran.clone();
    tool_fn("echo", "Echoes.", r#"{"type":"object"}"#, move |_args| {
        ran.fetch_add(1, Ordering::SeqCst);
        async move { Ok("echoed".to_owned()) }
    })
}

/// One tool round at 1000 + 10 tokens a call: the second call does not fit 1050 tokens.
fn token_agent(calls: &Arc<AtomicU32>, ran: &Arc<AtomicU32>) -> Agent {
    let model = Metered {
        inner: ScriptedModel::new().call_tool("echo", "{}").then_text("Done."),
        usage: Usage::new(1000, 10),
        calls: calls.clone(),
    };
    Agent::builder("a")
        .version("1")
        .model(model)
        .tool(counting_echo(ran))
        .budget(Budget::new().total_tokens(1050).reserve_output_tokens(5).on_exhausted(OnExhausted::AskHuman))
        .build()
        .unwrap()
}

async fn the_question(run: &Run) -> InputRequest {
    let idle = run.idle().await.unwrap();
    let Idle::NeedsInput(mut inputs) = idle else { panic!("expected the budget question, got {idle:?}") };
    assert_eq!(inputs.len(), 1);
    inputs.remove(0)
}

fn failure_of(result: Result<RunResult, RunError>) -> RunFailure {
    match result {
        Err(RunError::NotCompleted(f)) => f,
        other => panic!("expected a run that did not complete, got {other:?}"),
    }
}

#[test]
fn an_extended_run_goes_on_from_the_call_that_did_not_fit() {
    block_on(async {
        let (calls, ran) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
        let run = Runtime::with_store(token_agent(&calls, &ran), Arc::new(MemoryCommitter::new()), env()).start("Hi.").await.unwrap();
        let question = the_question(&run).await;
        let asked = question.budget_question().expect("a budget question");
        assert_eq!((asked.kind, asked.limit, asked.spent), (BudgetKind::TotalTokens, 1050, 1010));
        assert!(asked.needs.is_some_and(|n| n > 40), "{asked:?}");
        assert_eq!(question.process, *run.id().process_id(), "the run whose budget ran out asks");
        assert!(question.prompt_text().contains("total_tokens budget is exhausted"), "{}", question.prompt_text());
        assert!(run.events().any(|e| async move { matches!(e, RunEvent::InputRequested(_)) }).await);
        assert_eq!(calls.load(Ordering::SeqCst), 1, "the call that did not fit was not made");

        let extension = BudgetExtension::new().total_tokens(5_000).to_json();
        assert!(run.answer(&question, extension.clone()).await.unwrap());
        let result = run.result().await.unwrap();
        assert_eq!(result.text(), "Done.");
        assert_eq!((calls.load(Ordering::SeqCst), ran.load(Ordering::SeqCst)), (2, 1));
        assert_eq!(result.usage(), Usage::new(2000, 20));
        // The same answer again is recognized, never applied twice.
        assert!(!run.answer(&question, extension).await.unwrap());
    });
}

#[test]
fn a_declined_question_ends_the_run_with_the_budget_failure() {
    block_on(async {
        let (calls, ran) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
        let run = Runtime::with_store(token_agent(&calls, &ran), Arc::new(MemoryCommitter::new()), env()).start("Hi.").await.unwrap();
        let question = the_question(&run).await;
        assert!(run.answer(&question, BudgetAnswer::Decline.to_json()).await.unwrap());
        let failure = failure_of(run.result().await);
        assert_eq!(failure.code(), "interaction.budget.total_tokens");
        assert!(failure.message().contains("total_tokens limit 1050, spent 1010"), "{}", failure.message());
        assert!(failure.message().contains("the host declined to extend it"), "{}", failure.message());
        assert_eq!(failure.usage(), Usage::new(1000, 10));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    });
}

#[test]
fn a_malformed_answer_is_refused_and_the_question_stays_open() {
    block_on(async {
        let (calls, ran) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
        let run = Runtime::with_store(token_agent(&calls, &ran), Arc::new(MemoryCommitter::new()), env()).start("Hi.").await.unwrap();
        let question = the_question(&run).await;
        for bad in [
            Json::str("yes, more"),
            crate::json::parse(br#"{"extend":{}}"#).unwrap(),
            crate::json::parse(br#"{"extend":{"total_tokens":0}}"#).unwrap(),
            crate::json::parse(br#"{"extend":{"tokens":100}}"#).unwrap(),
            crate::json::parse(br#"{"decline":false}"#).unwrap(),
        ] {
            let refused = run.answer(&question, bad.clone()).await.unwrap_err();
            assert!(matches!(refused, AnswerError::Invalid { .. }), "{bad:?}: {refused}");
        }
        assert_eq!(run.pending_inputs(), vec![question.clone()], "nothing was committed");
        assert!(run.answer(&question, BudgetExtension::new().total_tokens(10).to_json()).await.unwrap());
        // 10 more tokens are still not enough: the run asks again, with the raised limit.
        let again = the_question(&run).await;
        assert_ne!(again.wait, question.wait);
        let asked = again.budget_question().unwrap();
        assert_eq!((asked.limit, asked.spent), (1060, 1010));
        assert!(run.answer(&again, BudgetExtension::new().total_tokens(1_000).to_json()).await.unwrap());
        assert_eq!(run.result().await.unwrap().text(), "Done.");
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    });
}

/// Three tool calls, one allowed: every further call asks.
fn tool_agent(ran: &Arc<AtomicU32>) -> Agent {
    let script = ScriptedModel::new().call_tool("echo", "{}").call_tool("echo", "{}").call_tool("echo", "{}").then_text("Done.");
    Agent::builder("a")
        .version("1")
        .model(script)
        .tool(counting_echo(ran))
        .budget(Budget::new().tool_calls(1).on_exhausted(OnExhausted::AskHuman))
        .build()
        .unwrap()
}

#[test]
fn a_question_and_its_grants_survive_restarts_on_a_file_store() {
    let dir = std::env::temp_dir().join(format!("keel-budget-extension-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let ran = Arc::new(AtomicU32::new(0));
    // First process: one tool call, then the question about the second; it exits unanswered.
    let (id, first_question) = block_on(async {
        let runtime = Runtime::on_disk(tool_agent(&ran), &dir).unwrap();
        let run = runtime.start("Hi.").await.unwrap();
        let question = the_question(&run).await;
        (run.id(), question)
    });
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    let asked = first_question.budget_question().unwrap();
    assert_eq!((asked.kind, asked.limit, asked.spent, asked.needs), (BudgetKind::ToolCalls, 1, 1, Some(1)));
    // Second process: the same question is open; one more tool call is granted, the second
    // call runs and the third asks again under the raised limit.
    let second_question = block_on(async {
        let runtime = Runtime::on_disk(tool_agent(&ran), &dir).unwrap();
        let run = runtime.resume(&id).await.unwrap();
        assert_eq!(run.pending_inputs(), vec![first_question.clone()]);
        assert!(run.answer(&first_question, BudgetExtension::new().tool_calls(1).to_json()).await.unwrap());
        let question = the_question(&run).await;
        assert_ne!(question.wait, first_question.wait);
        question
    });
    assert_eq!(ran.load(Ordering::SeqCst), 2, "the granted call ran once");
    let asked = second_question.budget_question().unwrap();
    assert_eq!((asked.limit, asked.spent), (2, 2), "the grant is durable: the limit is 1 declared + 1 granted");
    // Third process: the first answer again is no longer for an open wait; a decline ends
    // the run with the tool-call failure.
    block_on(async {
        let runtime = Runtime::on_disk(tool_agent(&ran), &dir).unwrap();
        let run = runtime.resume(&id).await.unwrap();
        assert_eq!(run.pending_inputs(), vec![second_question.clone()]);
        assert!(!run.answer(&first_question, BudgetExtension::new().tool_calls(1).to_json()).await.unwrap(), "answered before");
        assert!(run.answer(&second_question, BudgetAnswer::Decline.to_json()).await.unwrap());
        let failure = failure_of(run.result().await);
        assert_eq!(failure.code(), "interaction.budget.tool_calls");
        assert!(failure.message().contains("tool_calls limit 2, spent 2"), "{}", failure.message());
        assert_eq!(failure.result().tool_calls(), 2);
    });
    assert_eq!(ran.load(Ordering::SeqCst), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_default_policy_still_fails_and_the_policy_is_part_of_the_identity() {
    let ran = Arc::new(AtomicU32::new(0));
    let asks = tool_agent(&ran);
    let fails = Agent::builder("a")
        .version("1")
        .model(ScriptedModel::new().call_tool("echo", "{}").call_tool("echo", "{}").call_tool("echo", "{}").then_text("Done."))
        .tool(counting_echo(&ran))
        .budget(Budget::new().tool_calls(1))
        .build()
        .unwrap();
    assert_ne!(asks.deployment_ref(), fails.deployment_ref());
    block_on(async {
        let run = Runtime::with_store(fails, Arc::new(MemoryCommitter::new()), env()).start("Hi.").await.unwrap();
        assert_eq!(failure_of(run.result().await).code(), "interaction.budget.tool_calls");
    });
}

#[test]
fn a_delegate_asks_for_its_own_budget_and_goes_on_once_extended() {
    block_on(async {
        let ran = Arc::new(AtomicU32::new(0));
        let researcher = Agent::builder("researcher")
            .version("1")
            .description("Finds facts.")
            .model(ScriptedModel::new().call_tool("echo", "{}").then_text("Found."))
            .tool(counting_echo(&ran))
            .budget(Budget::new().tool_calls(0).on_exhausted(OnExhausted::AskHuman))
            .build()
            .unwrap();
        let task = r#"{"messages":[{"role":"user","parts":[{"type":"text","text":"Find it."}]}]}"#;
        let coordinator = Agent::builder("coordinator")
            .version("1")
            .model(ScriptedModel::new().call_tool("research", task).then_text("Done."))
            .delegate("research", "Ask the researcher.", researcher)
            .build()
            .unwrap();
        let run = Runtime::with_store(coordinator, Arc::new(MemoryCommitter::new()), env()).start("Hi.").await.unwrap();
        let question = the_question(&run).await;
        assert_ne!(question.process, *run.id().process_id(), "the delegate whose own budget ran out asks");
        let asked = question.budget_question().unwrap();
        assert_eq!((asked.kind, asked.limit, asked.spent), (BudgetKind::ToolCalls, 0, 0));
        assert_eq!(ran.load(Ordering::SeqCst), 0);
        assert!(run.answer(&question, BudgetExtension::new().tool_calls(1).to_json()).await.unwrap());
        assert_eq!(run.result().await.unwrap().text(), "Done.");
        assert_eq!(ran.load(Ordering::SeqCst), 1);
    });
}
