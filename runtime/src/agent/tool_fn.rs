//! A tool from a name, a description, an argument schema and an async function.

use crate::chat::ToolOutput;
use crate::env::BoxFuture;
use crate::json::Json;
use crate::tool::{Invocation, Tool, ToolContext, ToolDefinitionInput, ToolError};
use std::future::Future;
use std::sync::Arc;

pub(crate) type Handler = dyn Fn(Json) -> BoxFuture<'static, Result<ToolOutput, ToolError>> + Send + Sync;

/// A tool made of a name, a description, an argument schema and an async function. Build one
/// with [`tool`](super::tool) (typed arguments, schema derived by `schemars`) or [`tool_fn`]
/// (a JSON Schema text and untyped [`Json`] arguments). An error is reported to the model as
/// the tool's error.
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
        handler: Arc::new(move |args| {
            let future = f(args);
            Box::pin(async move { future.await.map(ToolOutput::text).map_err(ToolError::failed) })
        }),
    }
}

impl FnTool {
    pub(crate) fn from_parts(name: String, description: String, schema: Result<Json, String>, handler: Arc<Handler>) -> FnTool {
        FnTool { name, description, schema, handler }
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The argument schema as the model sees it (`None` if it could not be read: `build`
    /// reports why).
    pub fn input_schema(&self) -> Option<&Json> {
        self.schema.as_ref().ok()
    }

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
        (self.handler)(invocation.arguments_json().clone())
    }
}
