//! Provider-neutral chat types: messages, tool calls/results, requests, responses and
//! streaming deltas.
//!
//! Every type has a hand-written strict codec ([`ToJson`]/[`FromJson`]: unknown members and
//! explicit `null` for optional members are rejected) and a `validate()` for values built in
//! memory. Decoding runs the same validation, so a decoded value is always valid.
//!
//! ```
//! use keel::chat::{Message, Request, ToolCall};
//! let request = Request::new(vec![
//!     Message::system("You are terse."),
//!     Message::user("Weather in Paris?"),
//!     Message::assistant_with_calls("", vec![ToolCall::new("call_1", "weather", r#"{"city":"Paris"}"#)]),
//! ]);
//! assert!(request.validate().is_ok());
//! ```
//!
//! A streamed response arrives as [`ResponseDelta`]s that an [`Accumulator`] folds back into a
//! [`Response`]; [`ResponseDelta::split`] goes the other way (the simulator uses it to stream
//! any scripted response).
//!
//! [`ToJson`]: crate::json::ToJson
//! [`FromJson`]: crate::json::FromJson

mod accumulate;
mod delta;
mod error;
mod finish_reason;
mod message;
mod name;
mod options;
mod part;
mod reasoning;
mod request;
mod response;
mod role;
mod tool_call;
mod tool_choice;
mod tool_definition;
mod tool_result;
mod usage;

#[cfg(test)]
mod tests;

pub use accumulate::Accumulator;
pub use delta::{ReasoningDelta, ResponseDelta, SummaryDelta, ToolCallDelta};
pub use error::ChatError;
pub use finish_reason::FinishReason;
pub use message::Message;
pub use name::{validate_call_id, validate_tool_name};
pub use options::Options;
pub use part::{Part, PartKind};
pub use reasoning::Reasoning;
pub use request::Request;
pub use response::Response;
pub use role::Role;
pub use tool_call::ToolCall;
pub use tool_choice::ToolChoice;
pub use tool_definition::ToolDefinition;
pub use tool_result::{ToolOutput, ToolResult};
pub use usage::Usage;

/// Parses `bytes` strictly and decodes a chat value, as a [`ChatError`].
pub fn decode<T: crate::json::FromJson>(bytes: &[u8]) -> Result<T, ChatError> {
    Ok(T::from_json_bytes(bytes)?)
}
