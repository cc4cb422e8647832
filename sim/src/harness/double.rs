//! Tool doubles: under the simulator, the code of a named tool is replaced by a function of its
//! arguments, or by the results a recorded transcript holds, while everything the agent
//! declares about the tool (name, schema, options, concurrency) stays the user's own. This is
//! the seam for tools that do real I/O (HTTP through reqwest, sockets, a database): madsim
//! replaces Tokio's reactor, so such code cannot run inside a simulated run.

use keel::json::Json;
use keel::transcript::{ToolOutcome, Transcript};
use std::collections::BTreeMap;
use std::sync::Arc;

pub(crate) type DoubleFn = dyn Fn(Json) -> Result<String, String> + Send + Sync;

/// What answers a doubled tool's calls.
#[derive(Clone)]
pub(crate) enum Double {
    /// `Ok(text)`: the tool's result; `Err(text)`: the tool failed with that message.
    Function(Arc<DoubleFn>),
    /// Recorded outcomes by the canonical text of the call's arguments.
    Recorded(Arc<BTreeMap<String, Result<String, String>>>),
}

/// The canonical text of a call's arguments (so `{"a":1, "b":2}` and `{"b":2,"a":1}` match).
pub(crate) fn canonical_arguments(arguments: &str) -> String {
    keel::json::parse(arguments.as_bytes())
        .map(|j| j.to_canonical_string())
        .unwrap_or_else(|_| arguments.to_owned())
}

impl Double {
    /// The tool's outcome for these arguments; `Err` names what the harness is missing (a
    /// configuration error, not an agent bug).
    pub fn answer(&self, tool: &str, arguments: &Json) -> Result<Result<String, String>, String> {
        match self {
            Double::Function(f) => Ok(f(arguments.clone())),
            Double::Recorded(results) => {
                let key = arguments.to_canonical_string();
                results.get(&key).cloned().ok_or_else(|| {
                    format!(
                        "tool `{tool}` is served from a recorded transcript, which holds no call with arguments {key}: record a run that makes this call, or give a function double: Campaign::double(\"{tool}\", |args| ...)"
                    )
                })
            }
        }
    }
}

/// One double per tool the transcript recorded a definite outcome for (a result or a tool
/// failure; cancellations and host failures are not outcomes of the tool's code, and calls
/// that asked for input belong to tools that ask: all left out).
pub(crate) fn doubles_of_transcript(transcript: &Transcript) -> BTreeMap<String, Double> {
    let mut by_tool: BTreeMap<String, BTreeMap<String, Result<String, String>>> = BTreeMap::new();
    // A call that asked for input belongs to a tool that asks (a human): it runs as itself and
    // the recorded answer is given again, so its result is no double.
    let asked: Vec<&str> = transcript
        .tool_calls
        .iter()
        .filter(|c| matches!(&c.outcome, ToolOutcome::Error { class, .. } if class == "input_required"))
        .map(|c| c.id.as_str())
        .collect();
    for call in &transcript.tool_calls {
        if asked.contains(&call.id.as_str()) {
            continue;
        }
        let outcome = match &call.outcome {
            ToolOutcome::Result(text) => Ok(text.clone()),
            ToolOutcome::Error { class, message } if class == "failed" => Err(message.clone()),
            ToolOutcome::Error { .. } => continue,
        };
        by_tool
            .entry(call.name.clone())
            .or_default()
            .entry(canonical_arguments(&call.arguments))
            .or_insert(outcome);
    }
    by_tool
        .into_iter()
        .map(|(name, results)| (name, Double::Recorded(Arc::new(results))))
        .collect()
}

/// Whether a panic message says the code needed a Tokio runtime (its reactor or timer): what
/// reqwest, hyper, `tokio::net` and `tokio::time` report when they run under the simulator.
pub(crate) fn needs_tokio_runtime(message: &str) -> bool {
    message.contains("no reactor running")
        || message.contains("must be called from the context of a Tokio")
        || message.contains("there is no reactor")
}
