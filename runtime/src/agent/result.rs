//! The final result of a run, and the typed failure of a run that did not complete.

use super::typed_output::{decode_output, OutputError};
use crate::chat::{Message, Usage};
use crate::interaction::model::ModelIdentity;
use crate::interaction::budget::Spending;
use crate::interaction::output::Output;
use crate::interaction::state::{ModelRecord, ModelSwitch};
use crate::interaction::wire::Wire;
use crate::kernel::ids::EffectId;
use crate::kernel::result::ProcessResult;
use crate::kernel::status::Status;

/// How a run ended, with its output.
///
/// [`Run::result`](super::Run::result) returns one only for a completed run (a run that failed,
/// was canceled or killed is an `Err(`[`RunError::NotCompleted`](super::RunError::NotCompleted)`)`);
/// [`Idle::Finished`](super::Idle::Finished) and [`RunEvent::Finished`](super::RunEvent::Finished)
/// carry any ending, so check [`is_completed`](RunResult::is_completed) there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunResult {
    result: ProcessResult,
    model: Option<ModelRecord>,
    usage: Usage,
    spending: Spending,
}

impl RunResult {
    /// `model`: the root's model record; `spent`: the run's durable total and spending when it ended.
    pub(crate) fn new(result: ProcessResult, model: Option<ModelRecord>, spent: (Usage, Spending)) -> RunResult {
        RunResult { result, model, usage: spent.0, spending: spent.1 }
    }

    /// The model the run called last (as its state records it; `None` for a run stored before
    /// runs recorded their model).
    pub fn model(&self) -> Option<&ModelIdentity> {
        self.model.as_ref().map(|m| &m.current)
    }

    /// Every model switch of the run, oldest first (see
    /// [`AgentBuilder::allow_model_switch`](super::AgentBuilder::allow_model_switch)): empty
    /// when one model answered every call.
    pub fn model_switches(&self) -> &[ModelSwitch] {
        self.model.as_ref().map_or(&[], |m| &m.switches)
    }

    /// The final text: the model's final message, or the direct tool results' texts (one per
    /// line). Empty when the run did not complete.
    pub fn text(&self) -> String {
        let Some(output) = self.interaction_output() else { return String::new() };
        if let Some(response) = output.response() {
            return response.message.as_ref().map(Message::text).unwrap_or_default();
        }
        output
            .tool_results()
            .map(|results| results.iter().map(|r| r.output.content.clone()).collect::<Vec<_>>().join("\n"))
            .unwrap_or_default()
    }

    /// Whether the run completed (rather than failing, being cancelled or killed).
    pub fn is_completed(&self) -> bool {
        self.result.status() == Status::Completed
    }

    /// The terminal status.
    pub fn status(&self) -> Status {
        self.result.status()
    }

    /// Why the run ended (empty for a completion).
    pub fn reason(&self) -> &str {
        &self.result.termination.reason
    }

    /// Unknown Effects the run ended with, never settled.
    pub fn unresolved(&self) -> &[EffectId] {
        &self.result.termination.unresolved_effect_ids
    }

    /// The final answer read as `T`: the structured answer of an agent built with
    /// [`AgentBuilder::output::<T>()`](super::AgentBuilder::output), which was checked against
    /// `T`'s schema before the run completed. A Markdown code fence around the JSON is
    /// ignored. Any JSON answer can be read this way; an answer that is not JSON or does not
    /// decode into `T` is an [`OutputError`] saying which.
    ///
    /// ```
    /// use keel::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build()?.block_on(async {
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// struct Verdict {
    ///     approved: bool,
    ///     reason: String,
    /// }
    /// let agent = Agent::builder("reviewer")
    ///     .version("1")
    ///     .model(ScriptedModel::new().then_text(r#"{"approved":true,"reason":"tests pass"}"#))
    ///     .output::<Verdict>()
    ///     .build()?;
    /// let run = Runtime::in_memory(agent)?.start("Review this change.").await?;
    /// let verdict: Verdict = run.result().await?.output()?;
    /// assert!(verdict.approved);
    /// # Ok(()) })
    /// # }
    /// ```
    pub fn output<T: serde::de::DeserializeOwned>(&self) -> Result<T, OutputError> {
        if !self.is_completed() {
            return Err(OutputError::NotCompleted { type_name: std::any::type_name::<T>() });
        }
        decode_output(&self.text())
    }

    /// The Interaction output of a completed run (the model's final response or the direct
    /// tool results, as the kernel stores them).
    pub fn interaction_output(&self) -> Option<Output> {
        self.result.output.as_ref().and_then(|p| Output::from_payload(p).ok())
    }

    /// The tokens of every model call of the run and of its delegates' runs, summed (cache
    /// and reasoning parts included, as each provider reports them), however the run ended.
    /// The sum is part of the run's durable state, so a run resumed after a crash reports the
    /// same total.
    pub fn usage(&self) -> Usage {
        match self.interaction_output() {
            Some(o) => o.usage,
            None => self.usage,
        }
    }

    /// The cost of the run's model calls and its delegates', in micro-dollars at the agent's
    /// `Prices` (zero without prices), plus what was charged for delegates that ended without
    /// reporting theirs (see `Budget`).
    pub fn cost_usd_micros(&self) -> u64 {
        let s = self.spending();
        s.cost_micros.saturating_add(s.charged.cost_micros)
    }

    /// The tool calls the run and its delegates started.
    pub fn tool_calls(&self) -> u64 {
        self.spending().tool_calls
    }

    fn spending(&self) -> Spending {
        match self.interaction_output() {
            Some(o) => o.spending,
            None => self.spending,
        }
    }

    /// The kernel's Result.
    pub fn process_result(&self) -> &ProcessResult {
        &self.result
    }

    /// The failure code (`interaction.model.failed`, `interaction.limit.model_calls`, ...) of
    /// a failed run; for a canceled, timed-out or killed run its status name; empty for a
    /// completion.
    pub fn code(&self) -> String {
        match (&self.result.termination.failure, self.status()) {
            (Some(failure), _) => failure.code.as_str().to_owned(),
            (None, Status::Completed) => String::new(),
            (None, status) => status.as_str().to_owned(),
        }
    }

    /// `Ok(self)` for a completed run, else the typed failure.
    pub fn into_completed(self) -> Result<RunResult, RunFailure> {
        if self.is_completed() {
            Ok(self)
        } else {
            Err(RunFailure { result: self })
        }
    }
}

/// A run that ended without completing: failed (with a failure code and message), canceled,
/// timed out or killed. Returned by [`Run::result`](super::Run::result) inside
/// [`RunError::NotCompleted`](super::RunError::NotCompleted), so a failed run can never be read
/// as an empty answer.
///
/// ```
/// use keel::prelude::*;
/// # async fn demo(run: &Run) {
/// match run.result().await {
///     Ok(result) => println!("{}", result.text()),
///     Err(RunError::NotCompleted(failure)) => {
///         eprintln!("the run {} ({}): {}", failure.status().as_str(), failure.code(), failure.message())
///     }
///     Err(other) => eprintln!("{other}"),
/// }
/// # }
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct RunFailure {
    result: RunResult,
}

impl RunFailure {
    /// The run.
    pub fn run(&self) -> &str {
        self.result.result.process_id.as_str()
    }

    /// How it ended: `Failed`, `Canceled`, `TimedOut` or `Killed`.
    pub fn status(&self) -> Status {
        self.result.status()
    }

    /// The failure code of a failed run (for example `interaction.model.failed` when the
    /// model kept failing, `interaction.limit.model_calls` when it needed more calls than
    /// allowed); for other endings the status name.
    pub fn code(&self) -> String {
        self.result.code()
    }

    /// Why it ended: the failure message, or the reason given to cancel or kill it.
    pub fn message(&self) -> &str {
        self.result.reason()
    }

    /// Calls whose outcome was never settled when the run ended.
    pub fn unresolved(&self) -> &[EffectId] {
        self.result.unresolved()
    }

    /// The tokens the run spent before it ended (its delegates' included); see
    /// [`RunResult::usage`].
    pub fn usage(&self) -> Usage {
        self.result.usage()
    }

    /// The whole result (status, reason, the kernel's Result).
    pub fn result(&self) -> &RunResult {
        &self.result
    }
}

impl std::fmt::Display for RunFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "run {} {}", self.run(), self.status().as_str())?;
        if self.status() == Status::Failed {
            write!(f, " ({})", self.code())?;
        }
        let message = self.message();
        if !message.is_empty() {
            write!(f, ": {message}")?;
        }
        Ok(())
    }
}

impl std::fmt::Debug for RunFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for RunFailure {}

impl std::fmt::Display for RunResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_completed() {
            f.write_str(&self.text())
        } else {
            write!(f, "run ended {}: {}", self.status().as_str(), self.reason())
        }
    }
}
