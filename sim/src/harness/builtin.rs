//! The facade agent of keel-sim's own default campaign: a small agent built with
//! `keel::agent` (a weather tool declared idempotent, a booking tool whose Unknowns are
//! reported to the model, a tool that asks a human, two calls at a time), run by the harness
//! as the `facade-agent` scenario, so every `cargo test` of keel-sim drives the facade's host
//! (start, resume, answers, Unknown policies) under every fault.

use super::campaign::{HostAction, Setup};
use super::faults::Faults;
use super::run::run_seed;
use crate::coverage::Coverage;
use crate::world::{RunOptions, RunReport, Scenario};
use keel::agent::{
    tool_fn, Agent, AgentBuilder, AskHuman, ScriptedModel, ToolOptions, UnknownPolicy,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

fn agent() -> AgentBuilder {
    let weather = tool_fn(
        "get_weather",
        "The current weather of a city.",
        r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#,
        |args| async move {
            let city = args
                .get("city")
                .and_then(|c| c.as_str())
                .unwrap_or("?")
                .to_owned();
            Ok(format!("sunny, 21 °C in {city}"))
        },
    );
    // A real side effect: each booking gets the next number, so running it twice shows.
    let bookings = Arc::new(AtomicU64::new(0));
    let book = tool_fn(
        "book_table",
        "Books a table for tonight.",
        r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#,
        move |args| {
            let bookings = bookings.clone();
            async move {
                let n = bookings.fetch_add(1, Ordering::SeqCst) + 1;
                let city = args
                    .get("city")
                    .and_then(|c| c.as_str())
                    .unwrap_or("?")
                    .to_owned();
                Ok(format!("booking #{n} in {city}"))
            }
        },
    );
    Agent::builder("facade-agent")
        .version("1")
        .tool_with(weather, ToolOptions::new().shared().idempotent())
        .tool_with(
            book,
            ToolOptions::new()
                .shared()
                .on_unknown(UnknownPolicy::ReportToModel),
        )
        .tool(AskHuman::new("ask_user", "Asks the user a question."))
        .max_concurrent_tool_calls(2)
        .max_model_calls(6)
}

fn script() -> ScriptedModel {
    ScriptedModel::new()
        .call_tool("ask_user", r#"{"question":"Which city?"}"#)
        .call_tools([
            ("get_weather", r#"{"city":"Paris"}"#),
            ("book_table", r#"{"city":"Paris"}"#),
        ])
        .then_text("It is sunny in Paris and your table is booked.")
}

/// The built-in facade scenario.
pub struct FacadeScenario {
    setup: Arc<Setup>,
}

/// The `facade-agent` scenario of the default campaign.
pub fn facade_scenario() -> FacadeScenario {
    FacadeScenario {
        setup: Arc::new(Setup {
            name: "facade-agent".into(),
            agent: Box::new(agent),
            script: super::model::Script::Scripted(script()),
            message: "Book me a table where the weather is nice.".into(),
            answers: vec![keel::json::Json::str("Paris")],
            actions: vec![
                (2, HostAction::Steer("Somewhere warm, please.".into())),
                (3, HostAction::Cancel),
            ],
            faults: Faults::all(),
            doubles: Default::default(),
            tool_actions: Vec::new(),
        }),
    }
}

impl Scenario for FacadeScenario {
    fn name(&self) -> &str {
        "facade-agent"
    }

    fn description(&self) -> &str {
        "an agent built with keel::agent (idempotent, report-to-model and ask-human tools) run by the public harness under every tool and commit fault"
    }

    fn run(&self, seed: u64, options: &RunOptions) -> RunReport {
        run_seed(&self.setup, seed, options)
    }

    fn coverage(&self) -> Option<&'static Coverage> {
        Some(&super::COVERAGE)
    }
}
