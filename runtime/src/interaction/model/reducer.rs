//! The optional context reducer: shrinks the message history right before a model call, and
//! the parent adopts the result so stored history stops growing.

use super::context::ModelCallContext;
use super::error::ModelError;
use crate::chat::{Message, Request, Usage};
use crate::env::BoxFuture;

/// Replaces the message context right before one actual model call.
///
/// It sees the fully prepared request (tool manifest and options included) and returns the
/// complete replacement message list; it cannot change options or tools. The outcome must be
/// definite: an error means the model was not called and settles as a host failure, and so
/// does a result that makes the request invalid (for example no messages). When the returned
/// messages differ from the Effect's, the settlement carries them and the parent replaces its
/// WorkingContext, so later calls and snapshots never regrow the pre-reduction history.
pub trait ModelContextReducer: Send + Sync + 'static {
    fn reduce<'a>(
        &'a self,
        cx: &'a ModelCallContext,
        request: &'a Request,
    ) -> BoxFuture<'a, Result<Vec<Message>, String>>;

    /// What the Dispatcher calls: [`reduce`](Self::reduce) by default. A reducer that calls a
    /// model itself (a summary) overrides it, so that its model's failures keep their kind
    /// (an [`ModelError::Unknown`] leaves the whole call's Effect unknown, a
    /// [`ModelError::Transient`] may be repeated with the call) and its usage is added to the
    /// call's response usage (what the run counts and budgets settle).
    fn reduce_with_usage<'a>(
        &'a self,
        cx: &'a ModelCallContext,
        request: &'a Request,
    ) -> BoxFuture<'a, Result<Reduction, ModelError>> {
        Box::pin(async move {
            self.reduce(cx, request).await.map(|messages| Reduction { messages, usage: Usage::default() }).map_err(ModelError::Host)
        })
    }
}

/// A reducer's result: the replacement messages, and the usage of any model call it made.
#[derive(Clone, Debug, PartialEq)]
pub struct Reduction {
    pub messages: Vec<Message>,
    pub usage: Usage,
}
