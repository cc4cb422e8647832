//! Fault-testing this crate's own agent with keel-sim's harness: 1,000 seeds of crashes, lost
//! acknowledgements, failed commits and tool faults around the real tool code, then two
//! deliberately broken setups the oracle must catch.
//!
//! A failing seed prints its replay command, e.g.
//! `KEEL_SEED=17 cargo test --test campaign -- weather_campaign --exact --nocapture`, and is
//! kept in `tests/regressions.txt`, which later runs replay first.

use harness_campaign::{booking_tool, script, weather_agent, weather_tool, Bookings};
use keel::prelude::*;
use keel_sim::harness::{Campaign, FaultKind, Faults};

#[test]
fn weather_campaign() {
    let report = Campaign::new(|| weather_agent(Bookings::default()), script())
        .name("weather")
        .user_message("Book me a table where the weather is nice.")
        .answers(["Paris"])
        .steer_at(2, "Somewhere warm, please.")
        .cancel_at(3)
        .seeds(0..1000)
        .faults(Faults::all())
        .regressions("tests/regressions.txt")
        .run();
    println!("{report}");
    report.assert_ok();
    // Every fault kind, Unknown policy and crash boundary the agent can meet was exercised
    // (a miss names what would make it fire).
    report.assert_every_fault_fired();
}

/// In the application the weather tool calls an HTTP service, which cannot run under the
/// simulator (madsim replaces Tokio's reactor; the harness would report a configuration
/// error naming the tool). A double answers for it; the agent's definition is unchanged, and
/// the double is faulted like the real tool. The report counts the agent states the seeds
/// reached (an Unknown while the question waits, a steer during the batch, a crash at each
/// boundary kind, a restore settling an Unknown under each policy) and writes them, with
/// what would reach the rest, to an HTML index.
#[test]
fn weather_campaign_with_a_double_and_its_coverage() {
    let report = Campaign::new(|| weather_agent(Bookings::default()), script())
        .name("weather-double")
        .user_message("Book me a table where the weather is nice.")
        .double("get_weather", |args| {
            let city = args.get("city").and_then(|c| c.as_str()).unwrap_or("?").to_owned();
            Ok(format!("sunny, 24 °C in {city}"))
        })
        .answers(["Paris"])
        .steer_during("book_table", "A table by the window, please.")
        .seeds(0..1000)
        .regressions("tests/regressions.txt")
        .run();
    println!("{report}");
    report.assert_ok();
    report.assert_every_fault_fired();
    for state in ["crash.parked", "restore.unknown.report_to_model", "steer.during_batch"] {
        assert!(report.states_reached().contains_key(state), "{state} not reached:\n{report}");
    }
    let index = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("weather-campaign.html");
    report.write_html(&index).unwrap();
    println!("coverage index: {}", index.display());
}

/// Broken on purpose: the booking tool is declared idempotent, but every call books again.
fn booking_declared_idempotent() -> AgentBuilder {
    Agent::builder("weather")
        .version("1.0.0")
        .tool_with(weather_tool(), ToolOptions::new().shared().idempotent())
        .tool_with(booking_tool(Bookings::default()), ToolOptions::new().shared().idempotent())
        .tool(AskHuman::new("ask_user", "Asks the user a question."))
        .max_concurrent_tool_calls(2)
        .max_model_calls(6)
}

#[test]
fn a_tool_declared_idempotent_that_is_not_is_caught() {
    let report = Campaign::new(booking_declared_idempotent, script())
        .name("broken-idempotent")
        .answers(["Paris"])
        .seeds(0..200)
        .no_regressions()
        .run();
    assert!(!report.passed(), "the campaign should have failed:\n{report}");
    // The dispatch boundary ran the call twice and the ledger saw two different bookings.
    assert!(report.broken_invariants().contains("idempotent_declared"), "{report}");
    let failure = &report.failures()[0];
    assert!(report.replay_command(failure.seed).starts_with(&format!("KEEL_SEED={} cargo test --test campaign", failure.seed)));
}

/// Broken on purpose: an Unknown booking is re-performed by the host after a crash.
fn booking_retried_on_unknown() -> AgentBuilder {
    Agent::builder("weather")
        .version("1.0.0")
        .tool_with(weather_tool(), ToolOptions::new().shared().idempotent())
        .tool_with(booking_tool(Bookings::default()), ToolOptions::new().shared().on_unknown(UnknownPolicy::Retry))
        .tool(AskHuman::new("ask_user", "Asks the user a question."))
        .max_concurrent_tool_calls(2)
        .max_model_calls(6)
}

#[test]
fn a_retry_policy_on_a_non_idempotent_tool_is_caught() {
    // No repeat probe: only the Unknown policy may run a call twice here.
    let report = Campaign::new(booking_retried_on_unknown, script())
        .name("broken-retry")
        .answers(["Paris"])
        .seeds(0..200)
        .faults(Faults::all().without(FaultKind::Repeat))
        .no_regressions()
        .run();
    assert!(!report.passed(), "the campaign should have failed:\n{report}");
    assert!(report.broken_invariants().contains("retry_safe"), "{report}");
    println!("{report}");
}

#[test]
fn an_answer_the_response_schema_refuses_is_a_setup_error() {
    // `ask_user` answers must be strings; 42 is not.
    let report = Campaign::new(|| weather_agent(Bookings::default()), script())
        .name("bad-answer")
        .answer_json("42")
        .seeds(0..5)
        .faults(Faults::none())
        .no_regressions()
        .run();
    assert!(report.broken_invariants().contains("answer_matches_schema"), "{report}");
}

#[test]
fn failing_seeds_are_kept_and_replayed_first() {
    let dir = std::env::temp_dir().join(format!("harness-campaign-regressions-{}", std::process::id()));
    let file = dir.join("regressions.txt");
    let campaign = || Campaign::new(booking_declared_idempotent, script()).name("kept").answers(["Paris"]).regressions(&file);
    let first = campaign().seeds(0..100).run();
    assert!(!first.recorded().is_empty(), "{first}");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.lines().all(|l| l.starts_with("kept ")), "{text}");
    // A campaign over other seeds replays the kept ones first, and they still fail.
    let second = campaign().seeds(1000..1010).run();
    assert_eq!(second.regressions_replayed(), first.recorded().len(), "{second}");
    assert!(second.failures().iter().any(|f| first.recorded().contains(&f.seed)), "{second}");
    std::fs::remove_dir_all(&dir).unwrap();
}
