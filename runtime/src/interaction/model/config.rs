//! The external capabilities bound into one model Dispatcher.

use super::client::{ModelClient, ModelMode, ModelStreamer};
use super::observer::ModelObserver;
use super::reducer::ModelContextReducer;
use crate::json::Json;
use std::sync::Arc;

/// What a [`super::ModelDispatcher`] owns besides the manifest: exactly one model (the
/// [`ModelMode`]), plus an optional observer and an optional context reducer. Immutable once
/// the Dispatcher is built.
#[derive(Clone)]
pub struct DispatcherConfig {
    pub mode: ModelMode,
    pub observer: Option<Arc<dyn ModelObserver>>,
    pub reducer: Option<Arc<dyn ModelContextReducer>>,
    /// The agent's instructions: sent as a system message at the head of every request
    /// (after any reduction, so a reducer never drops them). Configuration, not state: they
    /// belong in the deployment's configuration digest.
    pub instructions: Option<String>,
    /// The JSON Schema of a typed final answer, handed to the model client in
    /// [`ModelCallContext::output_schema`](super::ModelCallContext::output_schema).
    pub output_schema: Option<Json>,
    /// The clock a call under a time budget is checked and timed with (the host's abstract
    /// clock; [`crate::interaction::run_clock`]). A time-budgeted call without one settles as a
    /// host failure saying so.
    pub clock: Option<Arc<dyn crate::env::Clock>>,
}

impl DispatcherConfig {
    /// Complete mode, no observer, no reducer.
    pub fn complete(client: Arc<dyn ModelClient>) -> DispatcherConfig {
        DispatcherConfig { mode: ModelMode::Complete(client), observer: None, reducer: None, instructions: None, output_schema: None, clock: None }
    }

    /// Streaming mode, no observer, no reducer.
    pub fn stream(streamer: Arc<dyn ModelStreamer>) -> DispatcherConfig {
        DispatcherConfig { mode: ModelMode::Stream(streamer), observer: None, reducer: None, instructions: None, output_schema: None, clock: None }
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

    /// The clock time budgets are checked and measured with.
    pub fn with_clock(mut self, clock: Arc<dyn crate::env::Clock>) -> DispatcherConfig {
        self.clock = Some(clock);
        self
    }
}

impl std::fmt::Debug for DispatcherConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DispatcherConfig")
            .field("mode", &self.mode)
            .field("observer", &self.observer.is_some())
            .field("reducer", &self.reducer.is_some())
            .field("instructions", &self.instructions)
            .field("output_schema", &self.output_schema.is_some())
            .field("clock", &self.clock.is_some())
            .finish()
    }
}
