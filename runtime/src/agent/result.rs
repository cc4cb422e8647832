//! The final result of a run.

use crate::chat::Message;
use crate::interaction::output::Output;
use crate::interaction::wire::Wire;
use crate::kernel::ids::EffectId;
use crate::kernel::result::ProcessResult;
use crate::kernel::status::Status;

/// How a run ended, with its output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunResult {
    result: ProcessResult,
}

impl RunResult {
    pub(crate) fn new(result: ProcessResult) -> RunResult {
        RunResult { result }
    }

    /// The final text: the model's final message, or the direct tool results' texts (one per
    /// line). Empty when the run did not complete.
    pub fn text(&self) -> String {
        let Some(output) = self.output() else { return String::new() };
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

    /// The Interaction output of a completed run.
    pub fn output(&self) -> Option<Output> {
        self.result.output.as_ref().and_then(|p| Output::from_payload(p).ok())
    }

    /// The kernel's Result.
    pub fn process_result(&self) -> &ProcessResult {
        &self.result
    }
}

impl std::fmt::Display for RunResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_completed() {
            f.write_str(&self.text())
        } else {
            write!(f, "run ended {}: {}", self.status().as_str(), self.reason())
        }
    }
}
