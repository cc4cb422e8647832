//! What a model client, streamer or reducer knows about the call it serves.

use crate::env::CancelToken;
use crate::interaction::attribution::ModelInvocation;

/// The context of one actual model call: its attribution and the dispatch's cancellation.
///
/// Rust has no ambient context, so the Dispatcher passes this value explicitly to the model,
/// the reducer and the observer; it exists only while the call runs.
#[derive(Clone, Debug)]
pub struct ModelCallContext {
    /// The attribution of the call; its applied steer ids come back as a defensive copy.
    pub invocation: ModelInvocation,
    /// Cancelled when terminal intent reaches the Process. The Dispatcher stops waiting for
    /// the call once it fires (and settles it as a provider failure), so honoring it is an
    /// optimisation, not a requirement.
    pub cancel: CancelToken,
    /// The JSON Schema the final answer must match, when the agent declares a typed output
    /// (`AgentBuilder::output`). A client whose provider supports structured output passes it
    /// on (OpenAI: `response_format` `json_schema`); others may ignore it: the schema is also
    /// in the system message, and the answer is checked before the run completes.
    pub output_schema: Option<crate::json::Json>,
}
