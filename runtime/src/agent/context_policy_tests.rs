//! Context policies: the rules on their own (order kept, tool results never without their
//! call, budget met), then a long tool loop that fails at the context limit without a policy
//! and completes with one, its stored context shortened durably.

use super::context_policy::ContextPolicy;
use crate::chat::{Message, Part, Request, Role, ToolCall, ToolOutput, ToolResult};
use crate::env::{BoxFuture, TokioEnv};
use crate::interaction::model::{ModelCallContext, ModelClient, ModelError};
use crate::interaction::state::ParentState;
use crate::json::ToJson;
use crate::kernel::commit::{Committer, MemoryCommitter};
use crate::prelude::*;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use super::test_runtime::block_on;

/// A conversation: system, task, then `rounds` exchanges of one tool call with a ~1 KB result
/// (the summary tests shorten it too).
pub(super) fn conversation(rounds: usize) -> Vec<Message> {
    let mut messages = vec![Message::system("Be brief."), Message::user("Find it.")];
    for i in 0..rounds {
        let call = ToolCall::new(format!("c{i}"), "search", format!(r#"{{"page":{i}}}"#));
        messages.push(Message::assistant_with_calls(format!("looking at page {i}"), vec![call]));
        let output = ToolOutput::text(format!("{i}:{}", "x".repeat(1000)));
        messages.push(Message::tool_results(vec![ToolResult::ok(format!("c{i}"), "search", output)]));
    }
    messages
}

/// Every tool result answers a call made earlier in the same context, and the shortened
/// context is an order-preserving subsequence of the original (outputs aside).
fn assert_well_formed(original: &[Message], shortened: &[Message]) {
    let mut calls = BTreeSet::new();
    for m in shortened {
        for part in &m.parts {
            match part {
                Part::ToolCall(c) => {
                    calls.insert(c.id.clone());
                }
                Part::ToolResult(r) => assert!(calls.contains(&r.id), "result {} without its call in {shortened:#?}", r.id),
                Part::Text(_) | Part::Reasoning(_) => {}
            }
        }
    }
    let key = |m: &Message| (m.role, m.text(), m.tool_calls().map(|c| c.id.clone()).collect::<Vec<_>>(), m.results().map(|r| r.id.clone()).collect::<Vec<_>>());
    let mut rest = original.iter().map(key);
    for m in shortened {
        let k = key(m);
        assert!(rest.any(|o| o == k), "message out of order or invented: {m:?}");
    }
    Request { messages: shortened.to_vec(), ..Request::default() }.validate().unwrap();
}

fn bytes(messages: &[Message]) -> u64 {
    messages.iter().map(|m| m.to_json().to_canonical_string().len() as u64).sum()
}

#[test]
fn keep_last_bytes_drops_whole_exchanges_oldest_first_within_the_budget() {
    let original = conversation(20);
    for budget in [500, 3_000, 7_777, 15_000] {
        let shortened = ContextPolicy::new().keep_last_bytes(budget).apply(&original);
        assert_well_formed(&original, &shortened);
        assert_eq!(&shortened[..2], &original[..2], "the system prompt and the task stay");
        assert_eq!(shortened.last(), original.last(), "the newest exchange stays");
        let newest_exchange = bytes(&original[..2]) + bytes(&original[original.len() - 2..]);
        assert!(bytes(&shortened) <= budget.max(newest_exchange), "{} bytes over {budget}", bytes(&shortened));
        assert!(shortened.len() < original.len());
        // Deterministic, and a second application changes nothing.
        assert_eq!(ContextPolicy::new().keep_last_bytes(budget).apply(&shortened), shortened);
    }
    let all = ContextPolicy::new().keep_last_bytes(1 << 30).apply(&original);
    assert_eq!(all, original, "a context within the budget is left alone");
}

#[test]
fn trim_tool_outputs_keeps_the_newest_whole_and_every_call_paired() {
    let original = conversation(6);
    let trimmed = ContextPolicy::new().trim_tool_outputs(2).apply(&original);
    assert_eq!(trimmed.len(), original.len(), "trimming drops no message");
    assert_well_formed(&original, &trimmed);
    let results: Vec<&ToolResult> = trimmed.iter().flat_map(|m| m.results()).collect();
    assert_eq!(results.len(), 6);
    for (i, r) in results.iter().enumerate() {
        assert_eq!(r.id, format!("c{i}"));
        if i < 4 {
            assert_eq!(r.output.content, "[output trimmed to save context: 1002 bytes]");
        } else {
            assert!(r.output.content.starts_with(&format!("{i}:xxx")), "the newest outputs stay whole");
        }
    }
    assert_eq!(ContextPolicy::new().trim_tool_outputs(2).apply(&trimmed), trimmed, "idempotent");
    // Both steps: trimming first leaves more exchanges within the byte budget.
    let both = ContextPolicy::new().trim_tool_outputs(1).keep_last_bytes(4_000).apply(&conversation(20));
    let bytes_only = ContextPolicy::new().keep_last_bytes(4_000).apply(&conversation(20));
    assert_well_formed(&conversation(20), &both);
    assert!(both.len() > bytes_only.len());
}

#[test]
fn a_policy_is_part_of_the_identity_and_conflicts_with_a_hand_built_reducer() {
    let build = |policy: Option<ContextPolicy>| {
        let b = Agent::builder("a").version("1").model(ScriptedModel::new());
        match policy {
            Some(p) => b.context_policy(p),
            None => b,
        }
        .build()
        .unwrap()
        .deployment_ref()
        .clone()
    };
    let none = build(None);
    assert_eq!(none, build(Some(ContextPolicy::new())), "keep-all is the default");
    let trim = build(Some(ContextPolicy::new().trim_tool_outputs(3)));
    let bytes = build(Some(ContextPolicy::new().keep_last_bytes(10_000)));
    let other = build(Some(ContextPolicy::new().keep_last_bytes(10_001)));
    let refs = [&none, &trim, &bytes, &other];
    let distinct: BTreeSet<String> = refs.iter().map(|r| r.to_string()).collect();
    assert_eq!(distinct.len(), 4, "each policy has its own deployment identity");

    struct Keep;
    impl crate::interaction::model::ModelContextReducer for Keep {
        fn reduce<'a>(&'a self, _: &'a ModelCallContext, r: &'a Request) -> BoxFuture<'a, Result<Vec<Message>, String>> {
            let m = r.messages.clone();
            Box::pin(async move { Ok(m) })
        }
    }
    let config = crate::interaction::model::DispatcherConfig::complete(Arc::new(ScriptedModel::new())).with_reducer(Arc::new(Keep));
    let both = Agent::builder("a").version("1").model_config(config).context_policy(ContextPolicy::new().trim_tool_outputs(1)).build();
    assert!(matches!(both, Err(BuildError::ContextPolicyWithReducer { .. })), "{both:?}");
    let zero = Agent::builder("a").version("1").model(ScriptedModel::new()).context_policy(ContextPolicy::new().keep_last_bytes(0)).build();
    assert!(matches!(zero, Err(BuildError::ContextPolicy { .. })), "{zero:?}");
}

/// The scripted model, recording every request it is sent.
struct Recording {
    script: ScriptedModel,
    requests: Arc<Mutex<Vec<Request>>>,
}

impl ModelClient for Recording {
    fn call<'a>(&'a self, cx: &'a ModelCallContext, request: Request) -> BoxFuture<'a, Result<crate::chat::Response, ModelError>> {
        self.requests.lock().unwrap().push(request.clone());
        self.script.call(cx, request)
    }
}

const ROUNDS: usize = 12;

fn looping_agent(policy: Option<ContextPolicy>, requests: Arc<Mutex<Vec<Request>>>) -> Agent {
    let mut script = ScriptedModel::new();
    for i in 0..ROUNDS {
        script = script.call_tool("search", format!(r#"{{"page":{i}}}"#));
    }
    let search = tool_fn("search", "Searches.", r#"{"type":"object"}"#, |args| async move {
        Ok(format!("{}:{}", args.to_canonical_string(), "y".repeat(2_000)))
    });
    let builder = Agent::builder("looper")
        .version("1")
        .model(Recording { script: script.then_text("Found."), requests })
        .tool(search)
        .max_model_calls(ROUNDS as u32 + 1)
        .max_context_bytes(12_000);
    match policy {
        Some(p) => builder.context_policy(p),
        None => builder,
    }
    .build()
    .unwrap()
}

async fn run_loop(policy: Option<ContextPolicy>) -> (Result<RunResult, RunError>, Vec<Request>, Option<ParentState>) {
    let requests = Arc::new(Mutex::new(Vec::new()));
    let store = Arc::new(MemoryCommitter::new());
    let runtime = Runtime::with_store(looping_agent(policy, requests.clone()), store.clone(), TokioEnv::current().unwrap().env());
    let run = runtime.start("Find it.").await.unwrap();
    let result = run.result().await;
    let head = store.load_tree(run.id().process_id()).await.unwrap().unwrap();
    let snapshot = crate::kernel::snapshot::TreeSnapshot::from_cut(&head.cut).unwrap();
    let state = ParentState::from_execution_state(&snapshot.root().committed_state).ok();
    let requests = requests.lock().unwrap().clone();
    (result, requests, state)
}

#[test]
fn a_long_tool_loop_fails_at_the_context_limit_without_a_policy_and_completes_with_one() {
    block_on(async {
        let (failed, _, _) = run_loop(None).await;
        let failure = failed.unwrap_err();
        assert_eq!(failure.failure().map(|f| f.code()).as_deref(), Some("interaction.limit.context"), "{failure}");

        for policy in [ContextPolicy::new().trim_tool_outputs(2), ContextPolicy::new().keep_last_bytes(8_000)] {
            let (result, requests, state) = run_loop(Some(policy.clone())).await;
            assert_eq!(result.unwrap().text(), "Found.", "{policy:?}");
            assert_eq!(requests.len(), ROUNDS + 1);
            for request in &requests {
                let original: Vec<Message> = request.messages.clone();
                assert_well_formed(&original, &request.messages);
                assert_eq!(request.messages[0].role, Role::User);
                assert_eq!(request.messages[0].text(), "Find it.", "the task is always kept");
            }
            // The model saw the tool calls in their original order.
            let last = requests.last().unwrap();
            let ids: Vec<String> = last.messages.iter().flat_map(|m| m.tool_calls().map(|c| c.id.clone())).collect();
            let mut sorted = ids.clone();
            sorted.sort_by_key(|id| id.trim_start_matches("call_").split('_').next().unwrap().parse::<u32>().unwrap());
            assert_eq!(ids, sorted);
            // Durable: the stored context is the shortened one, not the whole history.
            let stored: Vec<Message> = state.expect("the root state decodes").working_context.messages().cloned().collect();
            assert!(bytes(&stored) < 12_000, "{} stored bytes", bytes(&stored));
        }
    });
}
