//! The one error type of the chat boundary.

use super::{PartKind, Role};
use crate::json::DecodeError;

/// Why a chat value is invalid, or why a stream of deltas cannot be accumulated.
///
/// Positional context (`Message`, `Part`, `Tool`, `ToolCallDelta`) wraps the underlying rule
/// violation; [`ChatError::root`] strips it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChatError {
    /// Strict decoding failed (wrong type, unknown or null member, malformed JSON).
    #[error(transparent)]
    Decode(#[from] DecodeError),

    // --- names and ids
    #[error("invalid tool name `{name}`: must match ^[A-Za-z0-9_-]{{1,64}}$")]
    InvalidToolName { name: String },
    #[error("invalid tool call id: {reason}")]
    InvalidCallId { reason: &'static str },

    // --- parts and messages
    #[error("text must not be empty")]
    EmptyText,
    #[error("{what} is {len} bytes, above the limit of {limit} bytes")]
    TooLarge {
        what: &'static str,
        len: usize,
        limit: usize,
    },
    #[error("tool output details must not be null (omit them instead)")]
    NullDetails,
    #[error("message has no parts")]
    EmptyMessage,
    #[error("message has {count} parts, above the limit of {limit}")]
    TooManyParts { count: usize, limit: usize },
    #[error("part {index}: a {role} message cannot hold a {part} part")]
    PartNotAllowed {
        index: usize,
        role: Role,
        part: PartKind,
    },
    #[error("reasoning carries no text, summary, signature, redacted or encrypted content, nor an id")]
    EmptyReasoning,
    #[error("reasoning `{member}` must not be empty (omit it instead)")]
    EmptyReasoningMember { member: &'static str },
    #[error("invalid reasoning id `{}`: control characters are not allowed", quote(.id))]
    InvalidReasoningId { id: String },
    #[error("part {index}: {source}")]
    Part {
        index: usize,
        source: Box<ChatError>,
    },

    // --- options, tool definitions, tool choice
    #[error("invalid option `{member}`: {reason}")]
    InvalidOption {
        member: &'static str,
        reason: &'static str,
    },
    #[error("invalid tool description: {reason}")]
    InvalidDescription { reason: &'static str },
    #[error("invalid tool input schema: {reason}")]
    InvalidInputSchema { reason: &'static str },

    // --- requests
    #[error("request has no messages")]
    NoMessages,
    #[error("message {index}: {source}")]
    Message {
        index: usize,
        source: Box<ChatError>,
    },
    #[error("message {index} is a system message after a non-system message")]
    SystemNotInPrefix { index: usize },
    #[error("request has {count} tools, above the limit of {limit}")]
    TooManyTools { count: usize, limit: usize },
    #[error("tool {index}: {source}")]
    Tool {
        index: usize,
        source: Box<ChatError>,
    },
    #[error("tool name `{name}` is defined more than once")]
    DuplicateToolName { name: String },
    #[error("tool choice names `{name}`, which is not a tool of the request")]
    UnknownToolChoice { name: String },
    #[error("tool choice `required` needs at least one tool")]
    RequiredChoiceWithoutTools,

    // --- responses
    #[error("response message has role {role}, expected assistant")]
    ResponseNotAssistant { role: Role },

    // --- deltas and accumulation
    #[error("response delta carries no member")]
    EmptyDelta,
    #[error("tool call delta carries no id, name or arguments")]
    EmptyToolCallDelta,
    #[error("tool call {index}: {source}")]
    ToolCallDelta { index: u32, source: Box<ChatError> },
    #[error("reasoning delta carries no member")]
    EmptyReasoningDelta,
    #[error("reasoning {index}: {source}")]
    ReasoningDelta { index: u32, source: Box<ChatError> },
    #[error("reasoning {index}: {member} was changed")]
    ConflictingReasoning { index: u32, member: &'static str },
    #[error("reasoning indices are not dense: index {missing} is missing")]
    ReasoningIndexGap { missing: u32 },
    #[error("no deltas were accumulated")]
    NoDeltas,
    #[error("tool call {index}: {member} `{first}` was changed to `{second}`")]
    ConflictingToolCall {
        index: u32,
        member: &'static str,
        first: String,
        second: String,
    },
    #[error("finish reason was given more than once")]
    DuplicateFinishReason,
    #[error("tool call {index} never received its {member}")]
    IncompleteToolCall { index: u32, member: &'static str },
    #[error("tool call indices are not dense: index {missing} is missing")]
    ToolCallIndexGap { missing: u32 },
}

impl ChatError {
    /// The rule violation underneath any positional context.
    pub fn root(&self) -> &ChatError {
        match self {
            ChatError::Part { source, .. }
            | ChatError::Message { source, .. }
            | ChatError::Tool { source, .. }
            | ChatError::ToolCallDelta { source, .. }
            | ChatError::ReasoningDelta { source, .. } => source.root(),
            other => other,
        }
    }

    pub(crate) fn in_part(index: usize, source: ChatError) -> ChatError {
        ChatError::Part {
            index,
            source: Box::new(source),
        }
    }
    pub(crate) fn in_message(index: usize, source: ChatError) -> ChatError {
        ChatError::Message {
            index,
            source: Box::new(source),
        }
    }
    pub(crate) fn in_tool(index: usize, source: ChatError) -> ChatError {
        ChatError::Tool {
            index,
            source: Box::new(source),
        }
    }
    pub(crate) fn in_reasoning_delta(index: u32, source: ChatError) -> ChatError {
        ChatError::ReasoningDelta {
            index,
            source: Box::new(source),
        }
    }
    pub(crate) fn in_tool_call_delta(index: u32, source: ChatError) -> ChatError {
        ChatError::ToolCallDelta {
            index,
            source: Box::new(source),
        }
    }
}

/// Decoders run validation too; a rule violation becomes an `Invalid` decode error at the
/// path of the value being decoded.
impl From<ChatError> for DecodeError {
    fn from(e: ChatError) -> DecodeError {
        match e {
            ChatError::Decode(d) => d,
            other => DecodeError::invalid(other.to_string()),
        }
    }
}

/// Bounds untrusted text quoted in an error message (a name can be a megabyte of garbage).
pub(crate) fn quote(text: &str) -> String {
    const MAX: usize = 80;
    if text.len() <= MAX {
        return text.to_owned();
    }
    let mut end = MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}
