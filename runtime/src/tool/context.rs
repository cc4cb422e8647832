//! What one tool call receives besides its invocation.

use super::{AdvertiseError, Advertiser, Extensions, ToolInputContinuation};
use crate::env::CancelToken;
use std::any::Any;

/// The context of one call attempt, passed by value. The tool dispatcher builds it; a tool
/// only reads it (and stages advertisements through it).
#[derive(Clone, Debug)]
pub struct ToolContext {
    cancellation: CancelToken,
    continuation: Option<ToolInputContinuation>,
    advertiser: Advertiser,
    extensions: Extensions,
}

impl ToolContext {
    /// A first-attempt context: no continuation, no extensions.
    pub fn new(cancellation: CancelToken, advertiser: Advertiser) -> ToolContext {
        ToolContext {
            cancellation,
            continuation: None,
            advertiser,
            extensions: Extensions::new(),
        }
    }

    /// A context with no active tool call behind it (tests, direct use): never cancelled
    /// unless `cancellation` is, and advertising is unavailable.
    pub fn detached(cancellation: CancelToken) -> ToolContext {
        ToolContext::new(cancellation, Advertiser::unavailable())
    }

    /// The context of a call resumed after an input pause.
    pub fn with_continuation(mut self, continuation: ToolInputContinuation) -> ToolContext {
        self.continuation = Some(continuation);
        self
    }

    /// Attaches a typed value (replacing any previous value of that type).
    pub fn with_extension<T: Any + Send + Sync>(mut self, value: T) -> ToolContext {
        self.extensions.insert(value);
        self
    }

    /// Cooperative cancellation of this call: a tool that observes it should return
    /// [`super::ToolError::Canceled`].
    pub fn cancellation(&self) -> &CancelToken {
        &self.cancellation
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancellation.is_cancelled()
    }

    /// The input answer, present only while re-entering a call that asked for input.
    pub fn continuation(&self) -> Option<&ToolInputContinuation> {
        self.continuation.as_ref()
    }

    /// Stages deferred tools for model visibility (see [`Advertiser::advertise`]). They commit
    /// only if this call ends with a successful, non-error result.
    pub fn advertise(&self, names: &[&str]) -> Result<(), AdvertiseError> {
        self.advertiser.advertise(names)
    }

    pub fn advertiser(&self) -> &Advertiser {
        &self.advertiser
    }

    pub fn extension<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.extensions.get::<T>()
    }

    pub fn extensions(&self) -> &Extensions {
        &self.extensions
    }

    pub fn extensions_mut(&mut self) -> &mut Extensions {
        &mut self.extensions
    }
}
