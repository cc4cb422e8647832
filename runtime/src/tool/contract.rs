//! The executable tool contract.

use super::{Concurrency, Invocation, ToolContext, ToolDefinitionInput, ToolError};
use crate::chat::ToolOutput;
use crate::env::BoxFuture;

/// An executable tool. Used as `Arc<dyn Tool>` and bound once with [`super::bind`].
///
/// # Optional capabilities are default methods
/// The optional capabilities (direct results, concurrency classification) are default methods
/// of this trait rather than separate traits discovered at run time: a tool opts in by
/// overriding one, and a wrapper decides explicitly whether to forward or override the inner
/// tool's answer. The outermost wrapper wins (its method is the one called), there is no
/// wrapper chain to walk, and nothing can fail to resolve.
///
/// # Example
/// ```
/// use keel::chat::ToolOutput;
/// use keel::env::BoxFuture;
/// use keel::json::Json;
/// use keel::tool::{Invocation, Tool, ToolContext, ToolDefinitionInput, ToolError};
///
/// struct Clock;
/// impl Tool for Clock {
///     fn spec(&self) -> ToolDefinitionInput {
///         let mut schema = keel::json::Object::new();
///         schema.insert("type".into(), Json::str("object"));
///         ToolDefinitionInput {
///             name: "clock".into(),
///             description: "Tells the time.".into(),
///             input_schema: Json::Object(schema),
///         }
///     }
///     fn call<'a>(
///         &'a self,
///         _invocation: &'a Invocation,
///         _cx: ToolContext,
///     ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
///         Box::pin(async { Ok(ToolOutput { content: "noon".into(), details: None }) })
///     }
/// }
/// ```
pub trait Tool: Send + Sync + 'static {
    /// The tool's definition. Read once by [`super::bind`], which validates and freezes it;
    /// later changes to what this returns are never seen.
    fn spec(&self) -> ToolDefinitionInput;

    /// Runs one prepared call. The tool may be called again from the start with the same
    /// invocation after an input pause; [`ToolContext::continuation`] then carries the answer.
    ///
    /// Return [`ToolError`] for everything that is not a definite output: see that type for
    /// which errors the model sees and which leave the call unknown.
    fn call<'a>(
        &'a self,
        invocation: &'a Invocation,
        cx: ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>>;

    /// The `ConcurrentTool` capability: how this exact call may overlap its siblings.
    /// `None` (the default) means the tool has no such capability and every call is
    /// [`Concurrency::Exclusive`]. It is consulted only for calls whose arguments passed
    /// preparation, before any call of the batch runs, and may be re-evaluated during
    /// recovery: it must be deterministic and side-effect-free. A panic is a planning error,
    /// never permission to overlap.
    fn concurrency(&self, _invocation: &Invocation) -> Option<Concurrency> {
        None
    }

    /// The `DirectResultTool` capability: whether a successful call may end the Interaction
    /// with its result, when every call of the batch is such a tool and succeeds. Read once by
    /// [`super::bind`] and frozen, so it must not depend on mutable state.
    fn returns_direct_result(&self) -> bool {
        false
    }
}

/// A shared tool is a tool: what `AgentBuilder::wrap_tools` hands a wrapper (an
/// `Arc<dyn Tool>`) can be wrapped again by any generic tool wrapper, such as
/// `transcript::RecordingTool`.
impl<T: Tool + ?Sized> Tool for std::sync::Arc<T> {
    fn spec(&self) -> ToolDefinitionInput {
        (**self).spec()
    }

    fn call<'a>(&'a self, invocation: &'a Invocation, cx: ToolContext) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        (**self).call(invocation, cx)
    }

    fn concurrency(&self, invocation: &Invocation) -> Option<Concurrency> {
        (**self).concurrency(invocation)
    }

    fn returns_direct_result(&self) -> bool {
        (**self).returns_direct_result()
    }
}
