//! Transcripts: what a real run asked its model and tools and what they answered, written to a
//! JSON file so the simulator can replay the run as a scenario under seeded faults.
//!
//! Wrap the model client in [`RecordingModel`] and each tool in [`RecordingTool`], all sharing
//! one [`TranscriptRecorder`]; run the agent as usual; then [`TranscriptRecorder::write`] the
//! transcript. `keel-sim run --scenario FILE` accepts such a file: the model's answers are
//! served from it in call order, tool results by call id.
//!
//! # Format (`keel.transcript.v1`, canonical JSON)
//!
//! ```json
//! {
//!   "format": "keel.transcript.v1",
//!   "model_calls": [
//!     {"sequence": 1, "started_ms": 0, "ended_ms": 12,
//!      "request": {...keel chat Request...},
//!      "response": {...keel chat Response...}},
//!     {"sequence": 2, "started_ms": 20, "ended_ms": 31,
//!      "request": {...},
//!      "error": {"class": "provider", "message": "rate limited"}}
//!   ],
//!   "tool_calls": [
//!     {"id": "call_paris", "name": "weather", "arguments": "{\"city\": \"Paris\"}",
//!      "started_ms": 12, "ended_ms": 13, "result": "Paris: 18°C, clear"},
//!     {"id": "call_x", "name": "send", "arguments": "{}", "started_ms": 13, "ended_ms": 14,
//!      "error": {"class": "failed", "message": "mailbox full"}}
//!   ]
//! }
//! ```
//!
//! * `model_calls` are in the order the calls started; `sequence` counts them from 1. A call
//!   has exactly one of `response` (keel's provider-neutral Response: message, finish reason,
//!   usage) or `error` (`class`: `provider` a definite model failure, `host` a host
//!   failure, `unknown` an outcome the client could not tell).
//! * `tool_calls` are in the order the calls started. `arguments` is the model's raw argument
//!   text. A call has exactly one of `result` (the text the model saw) or `error` (`class`:
//!   `failed`, `host_failure`, `canceled`, `deadline`, `input_required`, `denied`).
//! * A call that asked for input is recorded twice under its id: first with the `error` class
//!   `input_required`, then, resumed with the answer, with its outcome and `answer` (the
//!   answer's canonical JSON text), which a replay gives again.
//! * `started_ms` / `ended_ms` are milliseconds on the recorder's clock (keel's abstract
//!   clock) since the recorder was made. They are observation only: a replay never waits
//!   for them, so recorded timing cannot change simulated behavior.
//! * Unknown members are refused, so a misspelt file fails loudly instead of replaying
//!   something else.

mod record;

pub use record::{RecordingModel, RecordingStreamer, RecordingTool, TranscriptRecorder};

use crate::chat::{Request, Response};
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ToJson};

/// The `format` member of every transcript this version writes and reads.
pub const TRANSCRIPT_FORMAT: &str = "keel.transcript.v1";

/// Model calls plus tool calls one transcript keeps; later calls are not recorded (the
/// recorder counts them in [`Transcript::dropped`] and the file refuses to load).
pub const MAX_TRANSCRIPT_CALLS: usize = 10_000;

/// How a model call ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelOutcome {
    Response(Response),
    /// `class` is `provider`, `host` or `unknown`.
    Error { class: String, message: String },
}

/// One recorded model call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelCallRecord {
    pub sequence: u64,
    pub started_ms: u64,
    pub ended_ms: u64,
    pub request: Request,
    pub outcome: ModelOutcome,
}

/// How a tool call ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolOutcome {
    /// The text the model saw.
    Result(String),
    /// `class` is `failed`, `host_failure`, `canceled`, `deadline`, `input_required` or
    /// `denied`.
    Error { class: String, message: String },
}

/// One recorded tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCallRecord {
    pub id: String,
    pub name: String,
    /// The model's raw argument text.
    pub arguments: String,
    pub started_ms: u64,
    pub ended_ms: u64,
    pub outcome: ToolOutcome,
    /// The answer (canonical JSON) this call was resumed with, when it continues an input
    /// request it made before (a human's answer to `AskHuman`): a replay gives it again.
    pub answer: Option<String>,
}

/// A recorded run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Transcript {
    pub model_calls: Vec<ModelCallRecord>,
    pub tool_calls: Vec<ToolCallRecord>,
    /// Calls not recorded past [`MAX_TRANSCRIPT_CALLS`] (never written: a file with dropped
    /// calls would replay a different run, so [`TranscriptRecorder::write`] refuses it).
    pub dropped: u64,
}

/// Why a transcript could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum TranscriptError {
    #[error("transcript is not valid JSON: {0}")]
    Json(#[from] crate::json::JsonError),
    #[error("transcript does not match the format `{TRANSCRIPT_FORMAT}`: {0}")]
    Decode(#[from] DecodeError),
    #[error("the run made more than {MAX_TRANSCRIPT_CALLS} model and tool calls; {0} were not recorded, so the transcript would replay a different run")]
    Incomplete(u64),
    #[error("cannot write the transcript to {path}: {source}")]
    Write {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn error_json(class: &str, message: &str) -> Json {
    ObjectBuilder::new().field("class", class).field("message", message).build()
}

fn error_of(value: &Json) -> Result<(String, String), DecodeError> {
    let mut r = ObjectReader::new(value)?;
    let class: String = r.required("class")?;
    let message: String = r.required("message")?;
    r.finish()?;
    Ok((class, message))
}

fn invalid(message: String) -> DecodeError {
    DecodeError::invalid(message)
}

impl ToJson for ModelCallRecord {
    fn to_json(&self) -> Json {
        let b = ObjectBuilder::new()
            .field("sequence", &self.sequence)
            .field("started_ms", &self.started_ms)
            .field("ended_ms", &self.ended_ms)
            .field("request", &self.request);
        match &self.outcome {
            ModelOutcome::Response(r) => b.field("response", r),
            ModelOutcome::Error { class, message } => b.value("error", error_json(class, message)),
        }
        .build()
    }
}

impl FromJson for ModelCallRecord {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let sequence = r.required("sequence")?;
        let started_ms = r.required("started_ms")?;
        let ended_ms = r.required("ended_ms")?;
        let request = r.required("request")?;
        let response: Option<Response> = r.optional("response")?;
        let error = r.optional_value("error")?.map(error_of).transpose()?;
        r.finish()?;
        let outcome = match (response, error) {
            (Some(resp), None) => ModelOutcome::Response(resp),
            (None, Some((class, message))) if ["provider", "transient", "host", "unknown"].contains(&class.as_str()) => {
                ModelOutcome::Error { class, message }
            }
            (None, Some((class, _))) => {
                return Err(invalid(format!("model call error class `{class}` (expected provider, host or unknown)")))
            }
            _ => return Err(invalid("a model call has exactly one of `response` and `error`".into())),
        };
        Ok(ModelCallRecord { sequence, started_ms, ended_ms, request, outcome })
    }
}

/// The tool error classes a transcript names.
pub const TOOL_ERROR_CLASSES: [&str; 6] = ["failed", "host_failure", "canceled", "deadline", "input_required", "denied"];

impl ToJson for ToolCallRecord {
    fn to_json(&self) -> Json {
        let b = ObjectBuilder::new()
            .field("id", &self.id)
            .field("name", &self.name)
            .field("arguments", &self.arguments)
            .field("started_ms", &self.started_ms)
            .field("ended_ms", &self.ended_ms)
            .opt_field("answer", self.answer.as_ref());
        match &self.outcome {
            ToolOutcome::Result(text) => b.field("result", text),
            ToolOutcome::Error { class, message } => b.value("error", error_json(class, message)),
        }
        .build()
    }
}

impl FromJson for ToolCallRecord {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let id = r.required("id")?;
        let name = r.required("name")?;
        let arguments = r.required("arguments")?;
        let started_ms = r.required("started_ms")?;
        let ended_ms = r.required("ended_ms")?;
        let answer: Option<String> = r.optional("answer")?;
        let result: Option<String> = r.optional("result")?;
        let error = r.optional_value("error")?.map(error_of).transpose()?;
        r.finish()?;
        let outcome = match (result, error) {
            (Some(text), None) => ToolOutcome::Result(text),
            (None, Some((class, message))) if TOOL_ERROR_CLASSES.contains(&class.as_str()) => ToolOutcome::Error { class, message },
            (None, Some((class, _))) => {
                return Err(invalid(format!("tool call error class `{class}` (expected one of {})", TOOL_ERROR_CLASSES.join(", "))))
            }
            _ => return Err(invalid("a tool call has exactly one of `result` and `error`".into())),
        };
        Ok(ToolCallRecord { id, name, arguments, started_ms, ended_ms, outcome, answer })
    }
}

impl ToJson for Transcript {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .field("format", TRANSCRIPT_FORMAT)
            .field("model_calls", &self.model_calls)
            .field("tool_calls", &self.tool_calls)
            .build()
    }
}

impl FromJson for Transcript {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let format: String = r.required("format")?;
        if format != TRANSCRIPT_FORMAT {
            return Err(invalid(format!("format `{format}` (this keel reads `{TRANSCRIPT_FORMAT}`)")));
        }
        let model_calls: Vec<ModelCallRecord> = r.required("model_calls")?;
        let tool_calls: Vec<ToolCallRecord> = r.required("tool_calls")?;
        r.finish()?;
        if model_calls.len() + tool_calls.len() > MAX_TRANSCRIPT_CALLS {
            return Err(invalid(format!("more than {MAX_TRANSCRIPT_CALLS} calls")));
        }
        Ok(Transcript { model_calls, tool_calls, dropped: 0 })
    }
}

/// Whether `bytes` look like a transcript (a JSON object whose `format` is
/// [`TRANSCRIPT_FORMAT`]), so a loader can tell it from other scenario files.
pub fn is_transcript(bytes: &[u8]) -> bool {
    crate::json::parse_with(bytes, &transcript_parse_limits()).ok().and_then(|v| v.get("format").and_then(Json::as_str).map(|f| f == TRANSCRIPT_FORMAT)) == Some(true)
}

impl Transcript {
    /// Parses and checks a transcript file's bytes.
    pub fn decode(bytes: &[u8]) -> Result<Transcript, TranscriptError> {
        let value = crate::json::parse_with(bytes, &transcript_parse_limits())?;
        Ok(Transcript::from_json(&value)?)
    }

    /// The canonical JSON text.
    pub fn encode(&self) -> String {
        self.to_json().to_canonical_string()
    }
}

/// Bytes of one transcript file a reader accepts: a long run's requests repeat the growing
/// context, so this is larger than one payload.
pub const MAX_TRANSCRIPT_BYTES: usize = 64 << 20;

fn transcript_parse_limits() -> crate::json::ParseLimits {
    crate::json::ParseLimits { max_bytes: MAX_TRANSCRIPT_BYTES, ..crate::json::ParseLimits::default() }
}
