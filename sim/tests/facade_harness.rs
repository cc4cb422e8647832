//! The public harness (`keel_sim::harness`) from the workspace: a correct facade agent passes
//! under every fault, the same seed replays to the same trace, and a tool wrongly declared
//! idempotent is caught by name (the oracle is live). `examples/harness-campaign/` runs the
//! same API from a user's own crate at 1,000 seeds.

use keel::prelude::*;
use keel_sim::harness::{Campaign, Faults};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

fn counter_tool(name: &str) -> FnTool {
    let calls = Arc::new(AtomicU64::new(0));
    tool_fn(name, "Counts its calls.", r#"{"type":"object"}"#, move |_| {
        let calls = calls.clone();
        async move { Ok(format!("call #{}", calls.fetch_add(1, Ordering::SeqCst) + 1)) }
    })
}

fn lookup_tool() -> FnTool {
    tool_fn("lookup", "Looks a key up.", r#"{"type":"object"}"#, |args| async move { Ok(format!("value of {}", args.to_canonical_string())) })
}

fn agent(counter: ToolOptions) -> AgentBuilder {
    Agent::builder("harnessed")
        .version("1")
        .tool_with(lookup_tool(), ToolOptions::new().shared().idempotent())
        .tool_with(counter_tool("count"), counter.shared())
        .tool(AskHuman::new("ask_user", "Asks the user."))
        .max_concurrent_tool_calls(2)
}

fn script() -> ScriptedModel {
    ScriptedModel::new()
        .call_tool("ask_user", r#"{"question":"Which key?"}"#)
        .call_tools([("lookup", r#"{"key":"a"}"#), ("count", "{}")])
        .then_text("done")
}

#[test]
fn a_correct_agent_passes_under_every_fault_and_replays_exactly() {
    let campaign = || {
        Campaign::new(|| agent(ToolOptions::new().on_unknown(UnknownPolicy::ReportToModel)), script())
            .name("correct")
            .answers(["a"])
            .steer_at(2, "quickly")
            .faults(Faults::all())
            .no_regressions()
    };
    let report = campaign().seeds(0..60).run();
    report.assert_ok();
    assert_eq!(campaign().run_one(7), campaign().run_one(7), "one seed, one run");
}

#[test]
fn a_tool_declared_idempotent_that_is_not_is_caught() {
    let report = Campaign::new(|| agent(ToolOptions::new().idempotent()), script())
        .name("broken")
        .answers(["a"])
        .seeds(0..100)
        .no_regressions()
        .run();
    assert!(report.broken_invariants().contains("idempotent_declared"), "{report}");
    let seed = report.failures()[0].seed;
    assert!(report.replay_command(seed).starts_with(&format!("KEEL_SEED={seed} cargo test --test facade_harness")), "{}", report.replay_command(seed));
}

// ---- The frictions a new user met (issue: campaigns a correct agent passes) ----

/// A tool that does real I/O through Tokio (as reqwest does): under the simulator there is no
/// Tokio reactor, so its code panics with "no reactor running".
fn tokio_io_tool() -> FnTool {
    tool_fn("get_weather", "Weather from an HTTP service.", r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#, |args| async move {
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        Ok(format!("weather of {}", args.get("city").and_then(|c| c.as_str()).unwrap_or("?")))
    })
}

fn io_agent() -> AgentBuilder {
    Agent::builder("io-agent").version("1").tool_with(tokio_io_tool(), ToolOptions::new().idempotent())
}

fn io_script() -> ScriptedModel {
    ScriptedModel::new().call_tool("get_weather", r#"{"city":"Paris"}"#).then_text("sunny")
}

/// Friction 1: a tool doing network I/O under the simulator is a harness configuration error
/// naming the tool and the fix, not a panic and not a bug of the agent; a double for it (the
/// agent's definition unchanged) makes the same campaign pass.
#[test]
fn a_tool_doing_tokio_io_is_a_configuration_error_and_a_double_fixes_it() {
    let report = Campaign::new(io_agent, io_script()).name("io").seeds(0..20).faults(Faults::none()).no_regressions().run();
    assert!(!report.passed(), "{report}");
    assert!(report.failures().is_empty(), "a configuration error is no failing seed of the agent:\n{report}");
    let error = report.setup_errors().join("\n");
    assert!(error.contains("harness configuration error (not a bug of the agent)"), "{error}");
    assert!(error.contains("tool `get_weather`") && error.contains("no reactor running"), "{error}");
    assert!(error.contains("Campaign::double(\"get_weather\""), "{error}");
    assert!(report.to_string().contains("harness configuration error"), "{report}");

    let doubled = Campaign::new(io_agent, io_script())
        .name("io-double")
        .double("get_weather", |args| Ok(format!("sunny in {}", args.get("city").and_then(|c| c.as_str()).unwrap_or("?"))))
        .seeds(0..100)
        .no_regressions()
        .run();
    doubled.assert_ok();
    doubled.assert_every_fault_fired();
}

#[test]
fn a_double_for_a_tool_the_agent_does_not_have_is_a_setup_error() {
    let report = Campaign::new(io_agent, io_script()).double("get_wether", |_| Ok(String::new())).seeds(0..3).no_regressions().run();
    assert!(!report.passed());
    assert!(report.setup_errors()[0].contains("no tool named `get_wether` (its tools: `get_weather`)"), "{report}");
}

fn one_tool_retry_agent() -> AgentBuilder {
    Agent::builder("retry-agent")
        .version("1")
        .tool_with(lookup_tool(), ToolOptions::new().idempotent())
        .on_model_unknown(UnknownPolicy::Retry)
        .max_model_calls(4)
}

fn one_tool_script() -> ScriptedModel {
    ScriptedModel::new().call_tool("lookup", r#"{"key":"a"}"#).then_text("done")
}

/// Friction 2: with the model's Unknown policy `Retry`, a model call cut off by a crash is
/// issued again: a correct agent passes 200 seeds (it failed `model_call_limit: model call N
/// was made twice` on 19 of them before), and the re-issue did happen.
#[test]
fn a_one_tool_agent_with_model_retry_passes_200_seeds() {
    let report = Campaign::new(one_tool_retry_agent, one_tool_script()).name("model-retry").seeds(0..200).no_regressions().run();
    println!("{report}");
    report.assert_ok();
    assert!(report.states_reached().contains_key("model.reissued"), "no seed re-issued a model call, so the test proves nothing:\n{report}");
}

/// Friction 3: a one-tool agent without steering can pass `assert_every_fault_fired` (it
/// requires only what the agent's shape reaches: no `progress.*` crash point), and a
/// campaign too small to fire everything names, for each miss, what would make it fire.
#[test]
fn every_fault_a_one_tool_agent_can_reach_fires_and_misses_say_what_fires_them() {
    let campaign = || Campaign::new(|| Agent::builder("one").version("1").tool_with(lookup_tool(), ToolOptions::new().idempotent()), one_tool_script()).no_regressions();
    let report = campaign().name("one-tool").seeds(0..300).run();
    report.assert_ok();
    report.assert_every_fault_fired();
    assert!(!report.crash_points_hit().keys().any(|p| p.starts_with("progress.")), "{report}");

    let small = campaign().name("tiny").seeds(0..1).run();
    let missing = small.never_fired_with_reasons();
    assert!(!missing.is_empty(), "{small}");
    let message = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| small.assert_every_fault_fired()))
        .err()
        .and_then(|p| p.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    for (kind, how) in &missing {
        assert!(message.contains(&format!("{kind}: needs {how}")), "{message}");
    }
}

/// Two calls in one turn, run concurrently, do reach `progress`, and it is then required.
#[test]
fn two_concurrent_calls_reach_the_progress_boundary() {
    let agent = || Agent::builder("two").version("1").tool_with(lookup_tool(), ToolOptions::new().shared().idempotent()).max_concurrent_tool_calls(2);
    let script = ScriptedModel::new().call_tools([("lookup", r#"{"key":"a"}"#), ("lookup", r#"{"key":"b"}"#)]).then_text("done");
    let report = Campaign::new(agent, script).name("two-calls").seeds(0..300).no_regressions().run();
    report.assert_ok();
    report.assert_every_fault_fired();
    assert!(report.crash_points_hit().keys().any(|p| p.starts_with("progress.")), "{report}");
    assert!(report.states_reached().contains_key("tools.overlap"), "{report}");
}

/// Coverage: agent states reached per campaign, in the summary and the HTML index.
#[test]
fn a_campaign_counts_the_agent_states_it_reached() {
    let agent = || {
        Agent::builder("states")
            .version("1")
            .tool_with(lookup_tool(), ToolOptions::new().shared().on_unknown(UnknownPolicy::Hold))
            .tool_with(counter_tool("count"), ToolOptions::new().shared().on_unknown(UnknownPolicy::ReportToModel))
            .tool(AskHuman::new("ask_user", "Asks the user."))
            .max_concurrent_tool_calls(3)
    };
    let script = ScriptedModel::new()
        .call_tools([("ask_user", r#"{"question":"Which key?"}"#), ("lookup", r#"{"key":"a"}"#), ("count", "{}")])
        .then_text("done");
    let report = Campaign::new(agent, script)
        .name("states")
        .answers(["a"])
        .steer_during("lookup", "hurry")
        .steer_at(2, "later")
        .seeds(0..400)
        .no_regressions()
        .run();
    println!("{report}");
    report.assert_ok();
    let reached = report.states_reached();
    for state in ["unknown.while_input_waits", "steer.during_batch", "tools.overlap", "crash.parked", "crash.pending", "restore.unknown.hold", "restore.unknown.report_to_model", "answer.after_restore"] {
        assert!(reached.contains_key(state), "{state} not reached:\n{report}");
    }
    let text = report.to_string();
    assert!(text.contains("states reached (") && text.contains("steer.during_batch"), "{text}");
    let dir = std::env::temp_dir().join(format!("keel-harness-html-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join("index.html");
    report.write_html(&page).unwrap();
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<h2>agent states</h2>") && html.contains("unknown.while_input_waits") && html.contains("crash points"), "{html}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The seed search is a function of the campaign seed (and reaches what plain seeds reach).
#[test]
fn a_seed_search_is_deterministic_and_reports_its_seed() {
    let campaign = || {
        Campaign::new(|| agent(ToolOptions::new().on_unknown(UnknownPolicy::ReportToModel)), script())
            .name("search")
            .answers(["a"])
            .steer_at(2, "quickly")
            .no_regressions()
    };
    let a = campaign().search(11, 96).run();
    let b = campaign().search(11, 96).jobs(1).run();
    a.assert_ok();
    assert_eq!(a.runs(), 96);
    assert_eq!(a.states_reached(), b.states_reached(), "same campaign seed, same seeds, whatever the workers");
    assert_eq!(a.crash_points_hit(), b.crash_points_hit());
    assert!(a.to_string().contains("seeds searched from campaign seed 11"), "{a}");
}

/// The weather agent as its user defines it: a tool doing real I/O and a question to the user.
fn recorded_agent() -> AgentBuilder {
    Agent::builder("recorded")
        .version("1")
        .tool_with(tokio_io_tool(), ToolOptions::new().idempotent())
        .tool(AskHuman::new("ask_user", "Asks the user."))
        .max_model_calls(5)
}

/// Friction 4: a real run with a human answer, a streaming model and tools wrapped by
/// `wrap_tools` is recorded, and replayed from this test under faults through the harness
/// (the model's recorded responses, the recorded answer given again, the I/O tool served from
/// its recorded result, the agent's definition unchanged).
#[test]
fn a_recorded_run_with_an_answer_a_streaming_model_and_wrapped_tools_replays() {
    use keel::transcript::{RecordingStreamer, ToolOutcome, TranscriptRecorder};
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let transcript = rt.block_on(async {
        let env = keel::env::TokioEnv::current().unwrap().env();
        let recorder = TranscriptRecorder::new(env.clock.clone());
        let script = ScriptedModel::new()
            .call_tool("ask_user", r#"{"question":"Which city?"}"#)
            .call_tool("get_weather", r#"{"city":"Paris"}"#)
            .then_text("It is sunny in Paris.");
        let agent = recorded_agent()
            .streaming_model(RecordingStreamer::new(script, recorder.clone()))
            .wrap_tools(recorder.tool_wrapper())
            .build()
            .unwrap();
        let run = Runtime::in_memory(agent).unwrap().start("Weather, please.").await.unwrap();
        let result = loop {
            match run.idle().await.unwrap() {
                Idle::Finished(result) => break result,
                Idle::NeedsInput(requests) => {
                    for r in requests {
                        assert!(run.answer_text(&r, "Paris").await.unwrap());
                    }
                }
                Idle::NeedsResolution(u) => panic!("unexpected Unknowns {u:?}"),
            }
        };
        assert_eq!(result.text(), "It is sunny in Paris.");
        recorder.transcript()
    });
    // Three streamed model calls recorded whole; the question recorded twice, the second time
    // with the human's answer; the weather call's result.
    assert_eq!(transcript.model_calls.len(), 3, "{transcript:?}");
    let ask: Vec<_> = transcript.tool_calls.iter().filter(|c| c.name == "ask_user").collect();
    assert_eq!(ask.len(), 2, "{transcript:?}");
    assert!(matches!(&ask[0].outcome, ToolOutcome::Error { class, .. } if class == "input_required"));
    assert_eq!(ask[1].answer.as_deref(), Some("\"Paris\""));
    assert!(transcript.tool_calls.iter().any(|c| c.name == "get_weather" && c.outcome == ToolOutcome::Result("weather of Paris".into())));
    let decoded = keel::transcript::Transcript::decode(transcript.encode().as_bytes()).unwrap();
    assert_eq!(decoded.tool_calls, transcript.tool_calls, "the answer survives the file");

    let report = Campaign::replay(recorded_agent, &decoded).name("replayed").seeds(0..150).no_regressions().run();
    println!("{report}");
    report.assert_ok();
    assert!(report.faults_fired().contains_key("host.input.answer"), "{report}");
    report.assert_every_fault_fired();
}

#[test]
fn a_transcript_file_that_cannot_be_read_is_a_setup_error_naming_it() {
    let report = Campaign::replay_file(recorded_agent, "/nonexistent/run.json").seeds(0..2).no_regressions().run();
    assert!(!report.passed());
    assert!(report.setup_errors()[0].starts_with("transcript /nonexistent/run.json: "), "{report}");
}
