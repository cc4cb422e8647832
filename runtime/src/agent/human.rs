//! A ready-made tool that asks a human and returns the answer to the model.

use crate::chat::ToolOutput;
use crate::env::BoxFuture;
use crate::json::{Json, ObjectBuilder};
use crate::tool::{require_tool_input, Invocation, Tool, ToolContext, ToolDefinitionInput, ToolError};

/// A tool the model calls with `{"question": "..."}`. The call parks the run on an input wait
/// (a [`RunEvent::InputRequested`](super::RunEvent::InputRequested) with the question as the
/// prompt and `{"type":"string"}` as the response schema); once the host
/// [answers](super::Run::answer), the answer text is the tool's result. The wait is durable: the
/// process may exit and a new one [resume](super::Runtime::resume) the run and answer it.
#[derive(Clone, Debug)]
pub struct AskHuman {
    name: String,
    description: String,
}

impl AskHuman {
    /// A tool named `name` (for example `"ask_user"`) described to the model by `description`.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> AskHuman {
        AskHuman { name: name.into(), description: description.into() }
    }
}

const ARGUMENTS: &str = r#"{"type":"object","properties":{"question":{"type":"string"}},"required":["question"]}"#;
const ANSWER_SCHEMA: &[u8] = br#"{"type":"string"}"#;

impl Tool for AskHuman {
    fn spec(&self) -> ToolDefinitionInput {
        ToolDefinitionInput {
            name: self.name.clone(),
            description: self.description.clone(),
            // A constant, valid schema text.
            input_schema: crate::json::parse(ARGUMENTS.as_bytes()).unwrap_or_else(|_| Json::object()),
        }
    }

    fn call<'a>(&'a self, invocation: &'a Invocation, cx: ToolContext) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        let outcome = match cx.continuation() {
            Some(answer) => {
                let text = match answer.response().value().as_str() {
                    Some(text) => text.to_owned(),
                    None => answer.response().canonical().to_owned(),
                };
                Ok(ToolOutput::text(text))
            }
            None => {
                let question = invocation.arguments_json().get("question").and_then(Json::as_str).unwrap_or("?");
                let prompt = Json::str(question).to_canonical_string();
                let state = ObjectBuilder::new().build().to_canonical_string();
                Err(require_tool_input(prompt.as_bytes(), ANSWER_SCHEMA, state.as_bytes()))
            }
        };
        Box::pin(async move { outcome })
    }
}
