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
