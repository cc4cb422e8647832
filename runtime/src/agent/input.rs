//! A tool's request for an answer from the host.

use crate::json::{Digest, Json};
use crate::kernel::ids::{ProcessId, SignalId, WaitId};

/// A tool parked on a durable wait until the host answers (see
/// [`Run::answer`](super::Run::answer)). It survives restarts: after a resume the same request
/// is listed again by [`Run::pending_inputs`](super::Run::pending_inputs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputRequest {
    /// The tool-child Process that waits.
    pub process: ProcessId,
    /// The wait the answer must address.
    pub wait: WaitId,
    /// The prompt the tool supplied (for [`AskHuman`](super::AskHuman), the question string).
    pub prompt: Json,
    /// The JSON Schema the answer must match.
    pub response_schema: Json,
}

impl InputRequest {
    /// The prompt as text: the string itself when the prompt is a JSON string, else its JSON.
    pub fn prompt_text(&self) -> String {
        match &self.prompt {
            Json::String(s) => s.clone(),
            other => other.to_canonical_string(),
        }
    }
}

/// The signal id of an answer: derived from the wait and the answer's canonical JSON, so
/// retrying the same answer is deduplicated by the kernel and never applied twice.
pub(crate) fn answer_signal_id(wait: &WaitId, answer: &Json) -> Result<SignalId, crate::kernel::ids::IdError> {
    let digest = Digest::of(format!("{}\0{}", wait.as_str(), answer.to_canonical_string()).as_bytes());
    SignalId::external(&format!("answer:{}", digest.hex()))
}
