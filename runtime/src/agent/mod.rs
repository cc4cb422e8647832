//! The front door: build an agent, run it durably, stream what it does, answer its questions
//! and recover it after a crash, without wiring the kernel by hand.
//!
//! An [`Agent`] is built from a model client, tools, delegates and limits. A [`Runtime`] runs
//! it over a store (in memory or on disk). Each [`Run`] is one durable conversation: its
//! [`events`](Run::events) are a stream of [`RunEvent`]s, delivered only once the store has
//! acknowledged the state that makes them true (model deltas excepted: they describe an attempt
//! in progress); [`pending_inputs`](Run::pending_inputs) and [`answer`](Run::answer) serve tools
//! that ask a human; [`result`](Run::result) waits for the final [`RunResult`].
//!
//! ```
//! use keel::prelude::*;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let rt = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
//! rt.block_on(async {
//!     // An offline model that calls the weather tool once, then answers.
//!     let model = ScriptedModel::new()
//!         .call_tool("get_weather", r#"{"city":"Paris"}"#)
//!         .then_text("It is sunny in Paris.");
//!     let weather = tool_fn(
//!         "get_weather",
//!         "The current weather of a city.",
//!         r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#,
//!         |args| async move {
//!             let city = args.get("city").and_then(|c| c.as_str()).unwrap_or("?").to_owned();
//!             Ok(format!("sunny, 21 °C in {city}"))
//!         },
//!     );
//!     let agent = Agent::builder("weather")
//!         .version("1.0.0")
//!         .model(model)
//!         .tool(weather)
//!         .max_model_calls(4)
//!         .build()?;
//!     let runtime = Runtime::in_memory(agent)?;
//!     let run = runtime.start("What is the weather in Paris?").await?;
//!     let result = run.result().await?;
//!     assert_eq!(result.text(), "It is sunny in Paris.");
//!     Ok::<(), Box<dyn std::error::Error>>(())
//! })
//! # }
//! ```
//!
//! The kernel (`keel::kernel`) and the Interaction strategy (`keel::interaction`) stay public
//! for programs that need what this module hides.
#![warn(missing_docs)]

mod build_error;
mod budget;
mod builder;
mod context_policy;
mod continue_as_new;
mod summary;
mod deltas;
mod events;
mod handover;
mod human;
mod identity;
mod input;
mod model_retry;
mod model_switch;
mod policy;
mod recovery;
mod result;
mod run;
mod run_error;
mod runtime;
mod scripted;
mod tool_fn;
mod tool_options;
mod trace;
mod tracker;
mod json_schema;
mod typed_output;
mod typed_tool;
mod upgrade;
mod versions;
#[cfg(test)]
mod context_policy_tests;
#[cfg(test)]
mod delegation_fixture;
#[cfg(test)]
mod test_runtime;
#[cfg(test)]
mod summary_tests;
#[cfg(test)]
mod event_tests;
#[cfg(test)]
mod model_identity_tests;
#[cfg(test)]
mod outcome_tests;
#[cfg(test)]
mod budget_tests;
#[cfg(test)]
mod budget_extension_tests;
#[cfg(test)]
mod time_budget_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod typed_tests;
#[cfg(test)]
mod versions_tests;

pub use build_error::BuildError;
pub use builder::{Agent, AgentBuilder, ToolWrapper};
pub use crate::interaction::budget::{Budget, BudgetKind, OnExhausted, Price, Prices};
pub use crate::interaction::budget_question::{BudgetAnswer, BudgetExtension, BudgetQuestion};
pub use context_policy::ContextPolicy;
pub use continue_as_new::{ContinueAsNew, DEFAULT_KEEP_LAST_MESSAGES};
pub use summary::{Summarize, BYTES_PER_TOKEN, DEFAULT_SUMMARY_INSTRUCTIONS};
pub use handover::parse_message as parse_handover_message;
pub use upgrade::successor_of;
pub use events::{Events, RunEvent, UnknownKind};
pub use human::AskHuman;
pub use input::InputRequest;
pub use model_retry::{ModelErrorPolicy, MAX_MODEL_ATTEMPTS};
pub use model_switch::ModelChanged;
pub use crate::interaction::state::ModelSwitch;
pub use policy::UnknownPolicy;
pub use recovery::{Resolution, UnknownEffect};
pub use result::{RunFailure, RunResult};
pub use run::{Idle, Run, RunId};
pub use run_error::{AnswerError, RestoreRefused, RunError};
pub use runtime::Runtime;
pub use scripted::ScriptedModel;
pub use tool_fn::{tool_fn, FnTool};
pub use tool_options::{ToolConcurrency, ToolOptions};
pub use trace::TRACE_TARGET;
pub use typed_output::OutputError;
pub use typed_tool::tool;
