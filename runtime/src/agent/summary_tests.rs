//! Summaries through a model call: the rules on their own (what is summarized, what is kept,
//! when nothing is), then whole runs with `ScriptedModel`: a summary made once and used by
//! every later call, counted in usage, kept across a restart on a file store, never kept from
//! a call a crash interrupted, and carried by a summarizing continue-as-new.

use super::context_policy_tests::conversation;
use super::continue_as_new::ContinueAsNew;
use super::summary::{splice, transcript, Plan, Summarizer, CARRIED_MARKER, SUMMARY_HEADING};
use crate::chat::{Message, Request, Response, Role, Usage};
use crate::env::BoxFuture;
use crate::interaction::model::{ModelCallContext, ModelClient, ModelError, ModelMode};
use crate::interaction::state::ParentState;
use crate::kernel::commit::{Committer, MemoryCommitter};
use crate::kernel::snapshot::TreeSnapshot;
use crate::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use super::test_runtime::{block_on, env};

fn bytes(messages: &[Message]) -> u64 {
    super::continue_as_new::context_bytes(messages)
}

fn summarizer(after: u64, recent: u64) -> Summarizer {
    Summarize::after_bytes(after).keep_recent_bytes(recent).summarizer(&ModelMode::Complete(Arc::new(ScriptedModel::new())))
}

#[test]
fn past_the_threshold_all_but_the_recent_whole_exchanges_are_summarized_and_then_nothing_until_new_messages() {
    let all = conversation(10); // ~11 KB
    let s = summarizer(8_000, 2_500);
    assert_eq!(s.plan(&conversation(6)), None, "below the threshold nothing is summarized");
    let plan = s.plan(&all).expect("past the threshold");
    assert_eq!(plan.drop, None);
    assert_eq!(plan.older.start, 2, "the system prompt and the task are never summarized");
    let recent = &all[plan.older.end..];
    assert_eq!(recent[0].role, Role::Assistant, "the kept part starts at a whole exchange");
    assert!(bytes(recent) <= 2_500, "{} bytes kept", bytes(recent));
    assert!(bytes(&all[plan.older.end - 2..]) > 2_500, "one more exchange would not fit");

    let summary = Message::user(format!("{SUMMARY_HEADING}\nNothing on pages 0-7. {}", "z".repeat(2_000)));
    let shortened = splice(all.clone(), &plan, Some(summary.clone()));
    assert_eq!(shortened[..2], all[..2]);
    assert_eq!(shortened[2], summary);
    assert_eq!(shortened[3..], all[plan.older.end..]);
    assert_eq!(s.plan(&shortened), None, "the summarized context is below the threshold");

    // Over the threshold again only through the kept part: the summary alone is older, so
    // there is nothing new to summarize.
    let tight = summarizer(3_000, 2_500);
    let plan = tight.plan(&all).unwrap();
    let shortened = splice(all.clone(), &plan, Some(summary.clone()));
    assert!(bytes(&shortened) > 3_000);
    assert_eq!(tight.plan(&shortened), None);
    // New exchanges after it: the previous summary is summarized again with the newer ones.
    let mut grown = shortened.clone();
    grown.extend_from_slice(&conversation(12)[22..]);
    let again = tight.plan(&grown).unwrap();
    assert_eq!(again.older.start, 2);
    assert!(again.older.end > 3);
}

#[test]
fn the_transcript_names_calls_and_results_and_gives_the_task_apart() {
    let all = conversation(3);
    let text = transcript(&all, &(2..6));
    assert!(text.starts_with("The task (kept as it is, do not summarize it):\nFind it.\n"), "{text}");
    assert!(text.contains("assistant: looking at page 0\nassistant called tool `search` with {\"page\":0}\ntool `search` returned: 0:xxx"));
    assert!(text.contains("page 1") && !text.contains("page 2"), "only the older range: {text}");
}

#[test]
fn a_summarizing_carry_marks_where_the_verbatim_part_starts_and_the_successor_summarizes_up_to_it() {
    let all = conversation(5);
    let carried = ContinueAsNew::on_request().keep_last_messages(2).carry_summary().carry(&all);
    assert_eq!(carried.len(), all.len() + 1, "the whole conversation and the marker");
    let marker = carried.len() - 3;
    assert_eq!(carried[marker].text(), CARRIED_MARKER);
    assert_eq!(carried[marker + 1..], all[all.len() - 2..]);
    // Without the summary the carry is unchanged: the task and the last exchange.
    let plain = ContinueAsNew::on_request().keep_last_messages(2).carry(&all);
    assert_eq!(plain.len(), 2 + 2);
    // A carried conversation is summarized whatever its size, even with no threshold.
    let carry_only = Summarizer::carry_only(&ModelMode::Complete(Arc::new(ScriptedModel::new())));
    assert_eq!(carry_only.plan(&carried), Some(Plan { older: 2..marker, drop: Some(marker) }));
    assert_eq!(carry_only.plan(&all), None);
    let summary = Message::user(format!("{SUMMARY_HEADING}\nfour pages"));
    let started = splice(carried.clone(), &carry_only.plan(&carried).unwrap(), Some(summary.clone()));
    assert_eq!(started, [&all[..2], &[summary][..], &all[all.len() - 2..]].concat());
    // A carry of a conversation that still has a marker folds it into the new one.
    let twice = ContinueAsNew::on_request().keep_last_messages(2).carry_summary().carry(&carried);
    assert_eq!(twice, carried);
}

#[test]
fn summaries_are_part_of_the_identity_and_impossible_options_are_refused_at_build() {
    let build = |policy: ContextPolicy, c: Option<ContinueAsNew>| {
        let b = Agent::builder("a").version("1").model(ScriptedModel::new()).context_policy(policy);
        match c {
            Some(c) => b.continue_as_new(c),
            None => b,
        }
        .build()
        .map(|a| a.deployment_ref().to_string())
    };
    let s = || Summarize::after_bytes(10_000);
    let refs = [
        build(ContextPolicy::new(), None).unwrap(),
        build(ContextPolicy::summarize(s()), None).unwrap(),
        build(ContextPolicy::summarize(s().keep_recent_bytes(1_000)), None).unwrap(),
        build(ContextPolicy::summarize(s().instructions("Short.")), None).unwrap(),
        build(ContextPolicy::summarize(s().model(ModelNamed("cheap"))), None).unwrap(),
        build(ContextPolicy::new(), Some(ContinueAsNew::after_model_calls(3))).unwrap(),
        build(ContextPolicy::new(), Some(ContinueAsNew::after_model_calls(3).carry_summary())).unwrap(),
    ];
    let distinct: std::collections::BTreeSet<&String> = refs.iter().collect();
    assert_eq!(distinct.len(), refs.len(), "each setting has its own identity: {refs:?}");
    assert_eq!(build(ContextPolicy::summarize(s()), None), build(ContextPolicy::summarize(s().keep_recent_bytes(2_500)), None), "the default keeps a quarter");
    assert_eq!(
        ContinueAsNew::after_model_calls(3).to_json().to_canonical_string(),
        r#"{"after_model_calls":3,"keep_last_messages":20}"#,
        "an agent without a summary keeps the identity it had"
    );
    for (policy, words) in [
        (ContextPolicy::summarize(Summarize::after_bytes(1_000).keep_recent_bytes(1_000)), "not below the threshold"),
        (ContextPolicy::summarize(Summarize::after_bytes(0)), "before every call"),
        (ContextPolicy::summarize(s().instructions(" ")), "instructions are empty"),
    ] {
        let refused = build(policy, None).unwrap_err();
        assert!(matches!(refused, BuildError::ContextPolicy { .. }) && refused.to_string().contains(words), "{refused}");
    }
}

/// A model with another identity.
struct ModelNamed(&'static str);

impl ModelClient for ModelNamed {
    fn call<'a>(&'a self, cx: &'a ModelCallContext, request: Request) -> BoxFuture<'a, Result<Response, ModelError>> {
        let _ = request;
        let response = ScriptedModel::new().answer(cx.invocation.model_call_sequence());
        Box::pin(async move { Ok(response) })
    }

    fn identity(&self) -> crate::interaction::model::ModelIdentity {
        crate::interaction::model::ModelIdentity::new("test", self.0)
    }
}

/// A model recording its requests, answering from a script with a fixed usage; it hangs
/// while `hang` is set (a crash while its call is in flight).
#[derive(Clone)]
struct Recording {
    script: ScriptedModel,
    usage: Usage,
    requests: Arc<Mutex<Vec<Request>>>,
    hang: Arc<AtomicBool>,
    /// Answers "Found." to any request that holds a summary (a successor restarts the sequence).
    done_after_summary: bool,
}

impl Recording {
    fn new(script: ScriptedModel, usage: Usage) -> Recording {
        Recording { script, usage, requests: Arc::default(), hang: Arc::default(), done_after_summary: false }
    }

    fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }
}

impl ModelClient for Recording {
    fn call<'a>(&'a self, cx: &'a ModelCallContext, request: Request) -> BoxFuture<'a, Result<Response, ModelError>> {
        let summarized = self.done_after_summary && summary_in(&request).is_some();
        self.requests.lock().unwrap().push(request);
        let mut response = self.script.answer(cx.invocation.model_call_sequence());
        if summarized {
            response = ScriptedModel::new().then_text("Found.").answer(1);
        }
        response.usage = self.usage;
        let hang = self.hang.load(Ordering::SeqCst);
        Box::pin(async move {
            if hang {
                futures::future::pending::<()>().await;
            }
            Ok(response)
        })
    }

    fn identity(&self) -> crate::interaction::model::ModelIdentity {
        crate::interaction::model::ModelIdentity::new("keel", "scripted")
    }
}

const PAGE: usize = 2_000;

/// Six searches with ~2 KB results, then (optionally) a question to the user, then the answer.
fn main_model(ask: bool) -> Recording {
    let mut script = ScriptedModel::new();
    for i in 0..6 {
        script = script.call_tool("search", format!(r#"{{"page":{i}}}"#));
    }
    if ask {
        script = script.call_tool("ask_user", r#"{"question":"Which one?"}"#);
    }
    Recording::new(script.then_text("Found."), Usage::new(1, 1))
}

/// An agent summarizing past 8 KB, keeping ~2.5 KB verbatim, with `summaries` as its summary model.
fn agent(main: Recording, summaries: Recording) -> Agent {
    let search = tool_fn("search", "Searches.", r#"{"type":"object"}"#, |args| async move {
        Ok(format!("{}:{}", args.to_canonical_string(), "y".repeat(PAGE)))
    });
    Agent::builder("searcher")
        .version("1")
        .model(main)
        .tool(search)
        .tool(AskHuman::new("ask_user", "Asks the user."))
        .max_model_calls(12)
        .context_policy(ContextPolicy::summarize(Summarize::after_bytes(8_000).keep_recent_bytes(2_500).model(summaries)))
        .build()
        .unwrap()
}

fn summary_model(text: &str) -> Recording {
    Recording::new(ScriptedModel::new().then_text(text), Usage::new(100, 10))
}

/// The index of the summary message in `request`, if it has one.
fn summary_in(request: &Request) -> Option<(usize, String)> {
    request.messages.iter().position(|m| m.text().starts_with(SUMMARY_HEADING)).map(|i| (i, request.messages[i].text()))
}

fn stored(store: &dyn Committer, run: &RunId) -> Vec<Message> {
    let head = futures::executor::block_on(store.load_tree(run.process_id())).unwrap().expect("stored");
    let snapshot = TreeSnapshot::from_cut(&head.cut).unwrap();
    ParentState::from_execution_state(&snapshot.root().committed_state).unwrap().working_context.to_messages()
}

#[test]
fn a_summary_is_made_once_inside_the_call_used_by_every_later_call_and_counted_in_usage() {
    block_on(async {
        let (main, summaries) = (main_model(false), summary_model("Pages 0-3 had nothing."));
        let store = Arc::new(MemoryCommitter::new());
        let runtime = Runtime::with_store(agent(main.clone(), summaries.clone()), store.clone(), env());
        let run = runtime.start("Find it.").await.unwrap();
        let result = run.result().await.unwrap();
        assert_eq!(result.text(), "Found.");

        // Calls 1-5 see the whole growing conversation; the fifth passes 8 KB, so its call
        // first summarizes: exactly one summary over the run.
        assert_eq!(summaries.requests().len(), 1, "one summary");
        let asked = &summaries.requests()[0];
        assert_eq!(asked.messages[0].role, Role::System);
        assert!(asked.messages[1].text().contains("tool `search` returned: {\"page\":0}"), "{}", asked.messages[1].text());
        let requests = main.requests();
        assert_eq!(requests.len(), 7);
        for (i, request) in requests.iter().enumerate() {
            assert_eq!(request.messages[0].text(), "Find it.", "the task stays");
            match summary_in(request) {
                None => assert!(i < 4, "call {} has no summary", i + 1),
                Some((at, text)) => {
                    assert!(i >= 4, "call {} has a summary too early", i + 1);
                    assert_eq!((at, text.as_str()), (1, "[Summary of the earlier conversation]\nPages 0-3 had nothing."));
                }
            }
        }
        // The fifth call saw the summary and the newest exchange only, not the older searches.
        assert!(!requests[4].messages.iter().any(|m| m.results().any(|r| r.output.content.starts_with("{\"page\":0}"))));
        // Durable: the stored context is the summarized one.
        let messages = stored(store.as_ref(), &run.id());
        assert_eq!(messages[1].text(), "[Summary of the earlier conversation]\nPages 0-3 had nothing.");
        assert!(bytes(&messages) < 12_000, "{} stored bytes", bytes(&messages));
        // Usage: seven calls at (1, 1) and one summary at (100, 10).
        assert_eq!((result.usage().input_tokens, result.usage().output_tokens), (107, 17));
    });
}

#[test]
fn a_summary_survives_a_restart_on_a_file_store_and_is_not_made_again() {
    let dir = std::env::temp_dir().join(format!("keel-summary-restart-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // The first process (its own tokio runtime: every task of it ends with it) runs until the
    // model asks the user, after the summary, and exits.
    let (main, summaries) = (main_model(true), summary_model("SUMMARY-A"));
    let (id, question) = block_on(async {
        let first = Runtime::on_disk(agent(main.clone(), summaries.clone()), &dir).unwrap();
        let run = first.start("Find it.").await.unwrap();
        let Idle::NeedsInput(questions) = run.idle().await.unwrap() else { panic!("the run asks the user") };
        (run.id(), questions[0].prompt_text().to_owned())
    });
    assert_eq!(summaries.requests().len(), 1);
    assert_eq!(main.requests().len(), 7);

    // A new process: its summary model would answer otherwise, and must not be asked.
    let (main2, summaries2) = (main_model(true), summary_model("SUMMARY-B"));
    block_on(async {
        let second = Runtime::on_disk(agent(main2.clone(), summaries2.clone()), &dir).unwrap();
        let run = second.resume(&id).await.unwrap();
        let pending = run.pending_inputs();
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].prompt_text(), question);
        run.answer_text(&pending[0], "The first.").await.unwrap();
        let result = run.result().await.unwrap();
        assert_eq!(result.text(), "Found.");
        assert!(summaries2.requests().is_empty(), "the summary is not made again");
        let last = main2.requests().pop().expect("the final call ran in the new process");
        assert_eq!(main2.requests().len(), 1);
        assert_eq!(summary_in(&last).map(|(_, t)| t), Some(format!("{SUMMARY_HEADING}\nSUMMARY-A")));
        // Eight calls at (1, 1) and the one summary, read from the durable state.
        assert_eq!((result.usage().input_tokens, result.usage().output_tokens), (108, 18));
    });
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_crash_during_the_summarizing_call_keeps_nothing_and_the_call_is_reissued_whole() {
    block_on(async {
        let store: Arc<dyn Committer> = Arc::new(MemoryCommitter::new());
        let (main, summaries) = (main_model(false), summary_model("SUMMARY-A"));
        summaries.hang.store(true, Ordering::SeqCst);
        let first = Runtime::with_store(agent(main.clone(), summaries.clone()), store.clone(), env());
        let run = first.start("Find it.").await.unwrap();
        // Wait until the summarizing call is in flight, then abandon the process.
        while summaries.requests().is_empty() {
            env().clock.sleep(std::time::Duration::from_millis(5)).await;
        }
        assert_eq!(main.requests().len(), 4, "the fifth call is summarizing first");
        let id = run.id();
        drop((run, first));
        let messages = stored(store.as_ref(), &id);
        assert!(!messages.iter().any(|m| m.text().starts_with(SUMMARY_HEADING)), "nothing of the unsettled summary is stored");

        // The model call was Unknown; the default policy re-issues it, summary included.
        let (main2, summaries2) = (main_model(false), summary_model("SUMMARY-B"));
        let second = Runtime::with_store(agent(main2.clone(), summaries2.clone()), store.clone(), env());
        let run = second.resume(&id).await.unwrap();
        let result = run.result().await.unwrap();
        assert_eq!(result.text(), "Found.");
        assert_eq!(summaries2.requests().len(), 1);
        let messages = stored(store.as_ref(), &id);
        assert_eq!(messages[1].text(), format!("{SUMMARY_HEADING}\nSUMMARY-B"));
        assert!(main2.requests().iter().all(|r| summary_in(r).is_some_and(|(_, t)| t.ends_with("SUMMARY-B"))));
    });
}

#[test]
fn a_summarizing_continue_as_new_starts_the_successor_from_a_summary_made_at_its_first_call() {
    block_on(async {
        let (mut main, summaries) = (main_model(false), summary_model("Pages 0-2 had nothing."));
        main.done_after_summary = true;
        let build = |main: Recording, summaries: Recording| {
            let search = tool_fn("search", "Searches.", r#"{"type":"object"}"#, |args| async move {
                Ok(format!("{}:{}", args.to_canonical_string(), "y".repeat(100)))
            });
            Agent::builder("searcher")
                .version("1")
                .model(main)
                .tool(search)
                .max_model_calls(8)
                // A policy whose threshold is never reached: its summary model writes the carried summary.
                .context_policy(ContextPolicy::summarize(Summarize::after_bytes(1 << 20).model(summaries)))
                .continue_as_new(ContinueAsNew::after_model_calls(4).keep_last_messages(2).carry_summary())
                .build()
                .unwrap()
        };
        let store = Arc::new(MemoryCommitter::new());
        let runtime = Runtime::with_store(build(main.clone(), summaries.clone()), store.clone(), env());
        let run = runtime.start("Find it.").await.unwrap();
        let Err(RunError::ContinuedAs { .. }) = run.result().await else { panic!("the run hands over") };
        let next = run.successor().await.unwrap();
        next.result().await.unwrap();
        assert_eq!(summaries.requests().len(), 1, "one summary, at the successor's first call");
        assert!(main.requests()[..4].iter().all(|r| summary_in(r).is_none()), "the predecessor's calls have none");
        let transcript = summaries.requests()[0].messages[1].text();
        assert!(transcript.contains("{\"page\":0}") && transcript.contains("{\"page\":2}"), "{transcript}");
        assert!(!transcript.contains("{\"page\":3}"), "the last exchange is carried verbatim: {transcript}");
        // The successor's first request: task, summary, the predecessor's last exchange.
        let first = &main.requests()[4];
        assert_eq!(first.messages.len(), 4, "{:?}", first.messages);
        assert_eq!(first.messages[1].text(), format!("{SUMMARY_HEADING}\nPages 0-2 had nothing."));
        assert!(first.messages[3].results().any(|r| r.output.content.starts_with("{\"page\":3}")));
        assert!(!first.messages.iter().any(|m| m.text() == CARRIED_MARKER));
        let messages = stored(store.as_ref(), &next.id());
        assert_eq!(messages[1].text(), format!("{SUMMARY_HEADING}\nPages 0-2 had nothing."));
        assert_eq!(main.requests().len(), 5, "four calls, the hand-over, one call of the successor");
        assert_eq!(next.result().await.unwrap().usage().input_tokens, 100 + 1, "the successor's call and its summary");
    });
}
