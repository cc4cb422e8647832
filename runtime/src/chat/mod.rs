//! Provider-neutral chat types: messages, tool calls/results, requests, responses and
//! streaming deltas. Every type validates and decodes strictly (unknown members rejected).
//!
//! (Data model fixed here; codecs, validation and the delta accumulator are being
//! implemented.)

use crate::json::Json;

/// Who authored a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

/// A model-requested tool invocation. `arguments` is the raw argument text exactly as the
/// model produced it: it may be blank or even invalid JSON (tool preparation decides).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// What a tool produced: model-visible text `content` plus optional structured `details`.
/// The zero value (empty content, no details) is a valid, empty output.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ToolOutput {
    pub content: String,
    pub details: Option<Json>,
}

/// The answer to one [`ToolCall`], matched by `id` and `name`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ToolResult {
    pub id: String,
    pub name: String,
    pub output: ToolOutput,
    pub is_error: bool,
}

/// One part of a message.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Part {
    Text(String),
    ToolCall(ToolCall),
    ToolResult(ToolResult),
}

/// A message: a role and its ordered parts.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Message {
    pub role: Role,
    pub parts: Vec<Part>,
}
