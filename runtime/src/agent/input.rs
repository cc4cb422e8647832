//! A tool's request for an answer from the host.

use crate::json::{Digest, Json};
use crate::kernel::ids::{ProcessId, SignalId, WaitId};

/// A tool, or a run whose budget ran out under [`OnExhausted::AskHuman`](super::OnExhausted),
/// parked on a durable wait until the host answers (see [`Run::answer`](super::Run::answer)).
/// It survives restarts: after a resume the same request is listed again by
/// [`Run::pending_inputs`](super::Run::pending_inputs). A budget question is told apart by
/// [`InputRequest::budget_question`] and answered with a
/// [`BudgetExtension`](super::BudgetExtension) or a [`BudgetAnswer::Decline`](super::BudgetAnswer).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputRequest {
    /// The Process that waits: the tool child, or the run (root or delegate) whose budget
    /// ran out.
    pub process: ProcessId,
    /// The wait the answer must address.
    pub wait: WaitId,
    /// The prompt the tool supplied (for [`AskHuman`](super::AskHuman), the question string).
    pub prompt: Json,
    /// The JSON Schema the answer must match.
    pub response_schema: Json,
}

impl InputRequest {
    /// The prompt as text: the string itself when the prompt is a JSON string, a budget
    /// question's sentence, else its JSON.
    pub fn prompt_text(&self) -> String {
        match &self.prompt {
            Json::String(s) => s.clone(),
            other => match other.get("question").and_then(Json::as_str).filter(|_| self.budget_question().is_some()) {
                Some(text) => text.to_owned(),
                None => other.to_canonical_string(),
            },
        }
    }

    /// The budget question this request asks, or `None` for a tool's request: which limit ran
    /// out, its value, what was spent and what the next step needs.
    pub fn budget_question(&self) -> Option<crate::interaction::budget_question::BudgetQuestion> {
        crate::interaction::budget_question::BudgetQuestion::from_prompt(&self.prompt)
    }
}

/// The signal id of an answer: derived from the wait and the answer's canonical JSON, so
/// retrying the same answer is deduplicated by the kernel and never applied twice.
pub(crate) fn answer_signal_id(wait: &WaitId, answer: &Json) -> Result<SignalId, crate::kernel::ids::IdError> {
    let digest = Digest::of(format!("{}\0{}", wait.as_str(), answer.to_canonical_string()).as_bytes());
    SignalId::external(&format!("answer:{}", digest.hex()))
}
