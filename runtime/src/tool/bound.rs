//! A tool bound to its frozen, validated definition: the only way calls reach a tool.

use super::diagnostic::{bounded, excerpt};
use super::{Concurrency, Invocation, SpecError, Tool, ToolContext, ToolError, ToolSpec};
use crate::chat::{ToolCall, ToolOutput};
use crate::env::BoxFuture;
use crate::json::Payload;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// A tool with its definition validated and frozen and its capabilities read once.
/// Cheap to clone (shared).
#[derive(Clone)]
pub struct BoundTool {
    inner: Arc<Inner>,
}

struct Inner {
    tool: Arc<dyn Tool>,
    spec: ToolSpec,
    returns_direct_result: bool,
}

/// Why [`bind`] refused a tool.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BindError {
    #[error("invalid tool definition: {0}")]
    InvalidSpec(#[from] SpecError),
    /// The tool panicked while answering `method` (a construction error, not a crash).
    #[error("tool panicked in `{method}` while being bound")]
    Panicked { method: &'static str },
}

/// Why a model tool call could not be prepared. The tool is not called.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PrepareError {
    /// The call names a different tool (a routing error of the caller).
    #[error("tool call names `{found}`, not `{expected}`")]
    NameMismatch { expected: String, found: String },
    /// The arguments are not one strict JSON value within the payload limits.
    #[error("{diagnostic}")]
    InvalidJson { diagnostic: String },
    /// The arguments are JSON but do not satisfy the input schema.
    #[error("{diagnostic}")]
    SchemaViolation { diagnostic: String },
}

impl PrepareError {
    /// The bounded diagnostic, for [`super::invalid_arguments_result`].
    pub fn diagnostic(&self) -> String {
        bounded(&self.to_string(), "invalid arguments")
    }
}

/// Why a call could not be classified for scheduling: a planning error, never permission to
/// overlap.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClassifyError {
    #[error("tool `{tool}` panicked while classifying a call's concurrency")]
    Panicked { tool: String },
}

/// Validates and freezes `tool`'s definition, compiles its input schema and reads its
/// direct-result capability, each exactly once. A panic in the tool's `spec` or
/// `returns_direct_result` is a [`BindError::Panicked`].
pub fn bind(tool: Arc<dyn Tool>) -> Result<BoundTool, BindError> {
    let input = catch_unwind(AssertUnwindSafe(|| tool.spec()))
        .map_err(|_| BindError::Panicked { method: "spec" })?;
    let spec = ToolSpec::from_input(&input)?;
    let returns_direct_result = catch_unwind(AssertUnwindSafe(|| tool.returns_direct_result()))
        .map_err(|_| BindError::Panicked {
            method: "returns_direct_result",
        })?;
    Ok(BoundTool {
        inner: Arc::new(Inner {
            tool,
            spec,
            returns_direct_result,
        }),
    })
}

impl BoundTool {
    pub fn spec(&self) -> &ToolSpec {
        &self.inner.spec
    }
    pub fn name(&self) -> &str {
        self.inner.spec.name()
    }
    /// The frozen `DirectResultTool` answer.
    pub fn returns_direct_result(&self) -> bool {
        self.inner.returns_direct_result
    }

    /// Promotes an untrusted model call into an [`Invocation`]: the name must be this tool's,
    /// blank (all-whitespace) arguments become `{}`, and the arguments must be strict JSON
    /// within the payload limits that satisfies the input schema.
    pub fn prepare(&self, call: &ToolCall) -> Result<Invocation, PrepareError> {
        if call.name != self.name() {
            return Err(PrepareError::NameMismatch {
                expected: self.name().to_owned(),
                found: excerpt(&call.name),
            });
        }
        let raw = if call.arguments.trim().is_empty() {
            "{}"
        } else {
            call.arguments.as_str()
        };
        let arguments =
            Payload::from_bytes(raw.as_bytes()).map_err(|e| PrepareError::InvalidJson {
                diagnostic: bounded(&format!("invalid JSON: {e}"), "invalid JSON"),
            })?;
        self.inner
            .spec
            .input_schema()
            .validate(arguments.value())
            .map_err(|v| PrepareError::SchemaViolation {
                diagnostic: bounded(v.diagnostic(), "schema violation"),
            })?;
        Ok(Invocation::new(call, arguments))
    }

    /// How `invocation` may overlap its siblings. Without the capability the call is
    /// exclusive; an empty key is normalized to no key.
    pub fn classify(&self, invocation: &Invocation) -> Result<Concurrency, ClassifyError> {
        let tool = &self.inner.tool;
        match catch_unwind(AssertUnwindSafe(|| tool.concurrency(invocation))) {
            Ok(None) => Ok(Concurrency::Exclusive),
            Ok(Some(declared)) => Ok(declared.normalized()),
            Err(_panic) => Err(ClassifyError::Panicked {
                tool: self.name().to_owned(),
            }),
        }
    }

    /// Runs the tool on a prepared invocation. An invocation prepared by another tool is
    /// refused as a host failure (a routing bug must never run the wrong tool). Panics are
    /// not caught here: the dispatcher polling the future treats them as unknown.
    pub fn call<'a>(
        &'a self,
        invocation: &'a Invocation,
        cx: ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        if invocation.name() != self.name() {
            let message = format!(
                "invocation of `{}` routed to tool `{}`",
                excerpt(invocation.name()),
                self.name()
            );
            return Box::pin(async move { Err(ToolError::host_failure(message)) });
        }
        self.inner.tool.call(invocation, cx)
    }
}

impl std::fmt::Debug for BoundTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoundTool")
            .field("spec", &self.inner.spec)
            .field("returns_direct_result", &self.inner.returns_direct_result)
            .finish()
    }
}
