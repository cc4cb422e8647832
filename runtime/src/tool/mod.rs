//! The executable tool contract that the Interaction strategy runs.
//!
//! * [`Tool`]: what a tool implements (definition, async call, optional capabilities).
//! * [`bind`] → [`BoundTool`]: the definition validated and frozen as a [`ToolSpec`], the input
//!   schema compiled, the direct-result capability read once.
//! * [`BoundTool::prepare`]: an untrusted model [`ToolCall`](crate::chat::ToolCall) becomes an
//!   [`Invocation`] (or a [`PrepareError`] the model sees via [`invalid_arguments_result`]).
//! * [`BoundTool::classify`]: the call's [`Concurrency`] for batch scheduling.
//! * [`ToolContext`]: cancellation, the input continuation of a resumed call, the
//!   [`Advertiser`] for deferred tools, and typed [`Extensions`] for higher layers.
//! * [`ToolError`], [`ToolInputRequest`] and [`classify_outcome`]: how a finished call maps to a
//!   model-visible result, an input pause, or an unknown outcome.
//!
//! ```
//! use std::sync::Arc;
//! use keel::chat::{ToolCall, ToolOutput};
//! use keel::env::{BoxFuture, CancelToken};
//! use keel::json::Json;
//! use keel::tool::{self, Invocation, Tool, ToolContext, ToolDefinitionInput, ToolError};
//!
//! struct Shout;
//! impl Tool for Shout {
//!     fn spec(&self) -> ToolDefinitionInput {
//!         ToolDefinitionInput {
//!             name: "shout".into(),
//!             description: "Upper-cases `text`.".into(),
//!             input_schema: keel::json::parse(
//!                 br#"{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}"#,
//!             )
//!             .unwrap(),
//!         }
//!     }
//!     fn call<'a>(&'a self, inv: &'a Invocation, _cx: ToolContext) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
//!         Box::pin(async move {
//!             let text = inv.arguments_json().get("text").and_then(Json::as_str).unwrap_or_default();
//!             Ok(ToolOutput { content: text.to_uppercase(), details: None })
//!         })
//!     }
//! }
//!
//! let bound = tool::bind(Arc::new(Shout)).unwrap();
//! let call = ToolCall { id: "c1".into(), name: "shout".into(), arguments: r#"{"text":"hi"}"#.into() };
//! let invocation = bound.prepare(&call).unwrap();
//! let cx = ToolContext::detached(CancelToken::new());
//! let output = futures::executor::block_on(bound.call(&invocation, cx)).unwrap();
//! assert_eq!(output.content, "HI");
//! ```

mod advertise;
mod bound;
mod concurrency;
mod context;
mod contract;
mod diagnostic;
mod error;
mod extensions;
mod input;
mod invocation;
mod outcome;
mod spec;

pub use advertise::{AdvertiseError, Advertiser, InvalidAdvertisement};
pub use bound::{bind, BindError, BoundTool, ClassifyError, PrepareError};
pub use concurrency::Concurrency;
pub use context::ToolContext;
pub use contract::Tool;
pub use error::ToolError;
pub use extensions::Extensions;
pub use input::{
    require_tool_input, InvalidToolInputRequest, InvalidToolInputResponse, RequestPart,
    ToolInputContinuation, ToolInputRequest,
};
pub use invocation::Invocation;
pub use outcome::{
    classify_outcome, invalid_arguments_result, unknown_tool_result, ModelVisibleResult,
    ToolOutcome,
};
pub use spec::{is_valid_tool_name, SpecError, ToolDefinitionInput, ToolSpec};

#[cfg(test)]
mod tests;
