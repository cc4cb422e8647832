//! The model dependency of a Dispatcher: exactly one of a complete-call client or a streamer.

use super::context::ModelCallContext;
use super::error::ModelError;
use super::identity::ModelIdentity;
use crate::chat::{Request, Response, ResponseDelta};
use crate::env::BoxFuture;
use futures::stream::BoxStream;
use std::sync::Arc;

/// A model that answers one request with one complete response. Consumer-owned, so the
/// Interaction depends on no concrete provider.
pub trait ModelClient: Send + Sync + 'static {
    /// Calls the model once. The request already carries the call's tool manifest.
    fn call<'a>(&'a self, cx: &'a ModelCallContext, request: Request) -> BoxFuture<'a, Result<Response, ModelError>>;

    /// Which model this client calls (recorded in an agent's configuration digest, so a run is
    /// never resumed by another model unnoticed). The default is the client's type name:
    /// override it to name the provider, model and answer-changing settings.
    fn identity(&self) -> ModelIdentity {
        ModelIdentity::of_type::<Self>()
    }
}

/// The increments of one streamed model response.
pub type ModelDeltaStream<'a> = BoxStream<'a, Result<ResponseDelta, ModelError>>;

/// A model that answers one request with a stream of increments.
pub trait ModelStreamer: Send + Sync + 'static {
    /// Opens the stream. An error opening it, or any error item, fails the call.
    fn stream<'a>(
        &'a self,
        cx: &'a ModelCallContext,
        request: Request,
    ) -> BoxFuture<'a, Result<ModelDeltaStream<'a>, ModelError>>;

    /// Which model this streamer calls: see [`ModelClient::identity`].
    fn identity(&self) -> ModelIdentity {
        ModelIdentity::of_type::<Self>()
    }
}

/// The single response lifecycle of a Dispatcher. Both settle the same complete Response;
/// streaming only adds observational deltas. An enum makes "neither" and "both" (a Dispatcher has
/// exactly one way to call the model) unrepresentable.
#[derive(Clone)]
pub enum ModelMode {
    Complete(Arc<dyn ModelClient>),
    Stream(Arc<dyn ModelStreamer>),
}

impl ModelMode {
    /// `"complete"` or `"stream"`.
    pub fn name(&self) -> &'static str {
        match self {
            ModelMode::Complete(_) => "complete",
            ModelMode::Stream(_) => "stream",
        }
    }
}

impl std::fmt::Debug for ModelMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ModelMode::{}", self.name())
    }
}
