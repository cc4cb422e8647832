//! A tool from a name, a description, an argument schema and an async function.

use crate::chat::ToolOutput;
use crate::env::BoxFuture;
use crate::json::Json;
use crate::tool::{Invocation, Tool, ToolContext, ToolDefinitionInput, ToolError};
use std::future::Future;
use std::sync::Arc;

type Handler = dyn Fn(Json) -> BoxFuture<'static, Result<String, String>> + Send + Sync;

/// A tool whose call is an async function of its JSON arguments returning text. Build one with
/// [`tool_fn`]. An `Err(text)` is reported to the model as the tool's error.
#[derive(Clone)]
pub struct FnTool {
    name: String,
    description: String,
    schema: Result<Json, String>,
    handler: Arc<Handler>,
}

/// Builds a [`FnTool`]. `schema` is the JSON Schema text of the arguments; an invalid schema
/// is reported by [`AgentBuilder::build`](super::AgentBuilder::build), naming the tool.
///
/// ```
/// use keel::prelude::*;
/// let echo = tool_fn("echo", "Repeats its text.", r#"{"type":"object"}"#, |args| async move {
///     Ok(args.to_canonical_string())
/// });
/// # let _ = echo;
/// ```
pub fn tool_fn<F, Fut>(name: impl Into<String>, description: impl Into<String>, schema: &str, f: F) -> FnTool
where
    F: Fn(Json) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<String, String>> + Send + 'static,
{
    let name = name.into();
    let schema = crate::json::parse(schema.as_bytes()).map_err(|e| format!("tool `{name}`: argument schema is not JSON: {e}"));
    FnTool {
        name,
        description: description.into(),
        schema,
        handler: Arc::new(move |args| Box::pin(f(args))),
    }
}

impl FnTool {
    pub(crate) fn schema_error(&self) -> Option<&str> {
        self.schema.as_ref().err().map(String::as_str)
    }
}

impl Tool for FnTool {
    fn spec(&self) -> ToolDefinitionInput {
        ToolDefinitionInput {
            name: self.name.clone(),
            description: self.description.clone(),
            input_schema: self.schema.clone().unwrap_or_else(|_| Json::object()),
        }
    }

    fn call<'a>(&'a self, invocation: &'a Invocation, _cx: ToolContext) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        let future = (self.handler)(invocation.arguments_json().clone());
        Box::pin(async move {
            match future.await {
                Ok(text) => Ok(ToolOutput::text(text)),
                Err(text) => Err(ToolError::failed(text)),
            }
        })
    }
}
