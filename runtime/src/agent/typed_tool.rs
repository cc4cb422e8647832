//! A tool from an async function over a typed argument: the argument's JSON Schema is derived
//! by `schemars`, the arguments are decoded by `serde`, and any `Serialize` value is returned.

use super::json_schema::schema_of;
use super::tool_fn::FnTool;
use crate::chat::ToolOutput;
use crate::env::BoxFuture;
use crate::json::Json;
use crate::tool::ToolError;
use std::future::Future;
use std::sync::Arc;

/// Builds a tool from a name, a description and an async function of its typed arguments
/// `A` (`serde::Deserialize` + `schemars::JsonSchema`), returning any `serde::Serialize`
/// value.
///
/// What the model sees: the tool's name, description and the JSON Schema `schemars` derives
/// for `A` (doc comments on its fields become their descriptions). Arguments that do not
/// decode into `A` are answered to the model as a tool error carrying serde's message (the
/// model can correct itself); a returned `Err(e)` is a tool error with `e`'s text. A string
/// answer reaches the model as that text, any other value as its JSON text.
///
/// The schema is part of the agent's configuration digest: changing `A` changes the agent's
/// identity, and a run started under the old schema is not resumed silently.
///
/// Add it with [`AgentBuilder::tool`](super::AgentBuilder::tool), or with
/// [`AgentBuilder::tool_with`](super::AgentBuilder::tool_with) to declare its concurrency and
/// Unknown policy ([`ToolOptions`](super::ToolOptions)).
///
/// ```
/// use keel::prelude::*;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Deserialize, schemars::JsonSchema)]
/// struct WeatherArgs {
///     /// The city, for example "Paris".
///     city: String,
/// }
///
/// #[derive(Serialize)]
/// struct Weather {
///     city: String,
///     celsius: i32,
/// }
///
/// let weather = tool("get_weather", "The current weather of a city.", |args: WeatherArgs| async move {
///     if args.city.is_empty() {
///         return Err("name a city".to_owned()); // the model sees this as the tool's error
///     }
///     Ok(Weather { city: args.city, celsius: 21 })
/// });
/// let agent = Agent::builder("weather")
///     .version("1")
///     .model(ScriptedModel::new().then_text("ok"))
///     .tool_with(weather, ToolOptions::new().idempotent())
///     .build()?;
/// # let _ = agent;
/// # Ok::<(), BuildError>(())
/// ```
pub fn tool<A, O, E, F, Fut>(name: impl Into<String>, description: impl Into<String>, f: F) -> FnTool
where
    A: serde::de::DeserializeOwned + schemars::JsonSchema + Send + 'static,
    O: serde::Serialize + 'static,
    E: std::fmt::Display + 'static,
    F: Fn(A) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, E>> + Send + 'static,
{
    let name = name.into();
    let schema = schema_of::<A>().map_err(|e| format!("tool `{name}`: {e}"));
    let tool_name = name.clone();
    let f = Arc::new(f);
    let handler = move |json: Json| -> BoxFuture<'static, Result<ToolOutput, ToolError>> {
        let args = match decode::<A>(&json) {
            Ok(args) => args,
            Err(e) => {
                let message = format!("the arguments of `{tool_name}` do not fit its schema: {e}");
                return Box::pin(std::future::ready(Err(ToolError::failed(message))));
            }
        };
        let future = f(args);
        Box::pin(async move {
            match future.await {
                Ok(value) => encode(&value).map(ToolOutput::text).map_err(ToolError::failed),
                Err(e) => Err(ToolError::failed(e.to_string())),
            }
        })
    };
    FnTool::from_parts(name, description.into(), schema, Arc::new(handler))
}

fn decode<A: serde::de::DeserializeOwned>(json: &Json) -> Result<A, String> {
    let value = json.to_serde_value().map_err(|e| e.to_string())?;
    serde_json::from_value(value).map_err(|e| e.to_string())
}

/// A string answer as its text; anything else as its JSON text.
fn encode<O: serde::Serialize>(value: &O) -> Result<String, String> {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(text)) => Ok(text),
        Ok(other) => Ok(other.to_string()),
        Err(e) => Err(format!("the tool's answer could not be written as JSON: {e}")),
    }
}
