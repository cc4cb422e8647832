//! The model boundary: the Dispatcher that executes `model_call` Effects with a
//! consumer-owned model.
//!
//! * [`ModelDispatcher`]: decodes the Effect, prepares the request with the call's tool
//!   manifest, runs the optional [`ModelContextReducer`], calls the model in the configured
//!   [`ModelMode`], observes the response, and settles a [`ModelResult`];
//! * [`ModelClient`] / [`ModelStreamer`]: the two model shapes; [`ModelCallContext`] carries
//!   the call's [`ModelInvocation`] and cancellation into them;
//! * [`ModelObserver`]: observational callback, its panics counted in
//!   [`ModelObservationFailures`];
//! * [`ModelError`]: provider failure vs host failure vs unknown outcome.
//!
//! | what happens | outcome |
//! |---|---|
//! | foreign operation, malformed payload, unknown advertised name, invalid prepared request | `Err(DispatchError)` (Effect unknown) |
//! | reducer error or invalid reduced context | failed settlement, `host_error` (a reducer's own model call failing definitely: `error`); model not called |
//! | the reducer's own model call ends [`ModelError::Unknown`] | `Err(DispatchError)` (Effect unknown) |
//! | [`ModelError::Unknown`] (timeout or connection lost after the request was sent) | `Err(DispatchError)` (Effect unknown) |
//! | [`ModelError::Host`] | failed settlement, `host_error` |
//! | [`ModelError::Provider`], [`ModelError::Transient`] (once any retry policy gave up), invalid response, stream error, empty stream, cancellation | failed settlement, `error` |
//! | valid response | observer, then succeeded settlement (`replacement_messages` only if reduced and changed; usage includes the reducer's own model call) |
//!
//! [`ModelResult`]: crate::interaction::protocol::ModelResult
//! [`ModelInvocation`]: crate::interaction::attribution::ModelInvocation

mod client;
mod config;
mod context;
mod dispatcher;
mod error;
mod identity;
mod observer;
mod prepare;
mod reducer;
mod stream;

#[cfg(test)]
mod tests;

pub use client::{ModelClient, ModelDeltaStream, ModelMode, ModelStreamer};
pub use config::DispatcherConfig;
pub use context::ModelCallContext;
pub use dispatcher::ModelDispatcher;
pub use error::ModelError;
pub use identity::ModelIdentity;
pub use observer::{ModelObservationFailures, ModelObserver};
pub use reducer::{ModelContextReducer, Reduction};
pub(crate) use dispatcher::call_model_once;
