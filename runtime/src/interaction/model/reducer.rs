//! The optional context reducer: shrinks the message history right before a model call, and
//! the parent adopts the result so stored history stops growing.

use super::context::ModelCallContext;
use crate::chat::{Message, Request};
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
}
