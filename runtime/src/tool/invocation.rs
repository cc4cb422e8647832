//! A model tool call promoted to a trusted, prepared invocation.

use crate::chat::ToolCall;
use crate::json::{Json, Payload};

/// One prepared call: the name matched its tool, and the arguments are strict JSON that
/// satisfies the tool's input schema. Only [`super::BoundTool::prepare`] creates one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invocation {
    call: ToolCall,
    arguments: Payload,
}

impl Invocation {
    pub(crate) fn new(call: &ToolCall, arguments: Payload) -> Invocation {
        // The call carries the normalized argument text, so every consumer of the invocation
        // sees the same bytes whatever whitespace or escaping the model produced.
        let call = ToolCall {
            id: call.id.clone(),
            name: call.name.clone(),
            arguments: arguments.canonical().to_owned(),
        };
        Invocation { call, arguments }
    }

    /// The call with its arguments replaced by their canonical encoding (blank → `{}`).
    pub fn call(&self) -> &ToolCall {
        &self.call
    }
    pub fn id(&self) -> &str {
        &self.call.id
    }
    pub fn name(&self) -> &str {
        &self.call.name
    }
    /// The validated, normalized argument document (always an object).
    pub fn arguments(&self) -> &Payload {
        &self.arguments
    }
    /// Shortcut for `self.arguments().value()`.
    pub fn arguments_json(&self) -> &Json {
        self.arguments.value()
    }
}
