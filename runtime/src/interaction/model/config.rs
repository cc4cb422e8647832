//! The external capabilities bound into one model Dispatcher.

use super::client::{ModelClient, ModelMode, ModelStreamer};
use super::observer::ModelObserver;
use super::reducer::ModelContextReducer;
use std::sync::Arc;

/// What a [`super::ModelDispatcher`] owns besides the manifest: exactly one model (the
/// [`ModelMode`]), plus an optional observer and an optional context reducer. Immutable once
/// the Dispatcher is built.
#[derive(Clone)]
pub struct DispatcherConfig {
    pub mode: ModelMode,
    pub observer: Option<Arc<dyn ModelObserver>>,
    pub reducer: Option<Arc<dyn ModelContextReducer>>,
}

impl DispatcherConfig {
    /// Complete mode, no observer, no reducer.
    pub fn complete(client: Arc<dyn ModelClient>) -> DispatcherConfig {
        DispatcherConfig { mode: ModelMode::Complete(client), observer: None, reducer: None }
    }

    /// Streaming mode, no observer, no reducer.
    pub fn stream(streamer: Arc<dyn ModelStreamer>) -> DispatcherConfig {
        DispatcherConfig { mode: ModelMode::Stream(streamer), observer: None, reducer: None }
    }

    /// The identity of the model this configuration calls.
    pub fn identity(&self) -> super::ModelIdentity {
        match &self.mode {
            ModelMode::Complete(client) => client.identity(),
            ModelMode::Stream(streamer) => streamer.identity(),
        }
    }

    pub fn with_observer(mut self, observer: Arc<dyn ModelObserver>) -> DispatcherConfig {
        self.observer = Some(observer);
        self
    }

    pub fn with_reducer(mut self, reducer: Arc<dyn ModelContextReducer>) -> DispatcherConfig {
        self.reducer = Some(reducer);
        self
    }
}

impl std::fmt::Debug for DispatcherConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DispatcherConfig")
            .field("mode", &self.mode)
            .field("observer", &self.observer.is_some())
            .field("reducer", &self.reducer.is_some())
            .finish()
    }
}
