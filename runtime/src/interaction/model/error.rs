//! How a model call can fail: a provider failure or a host failure, both definite failed
//! settlements that end the Interaction with an External failure.

/// A failure reported by a [`super::ModelClient`], a [`super::ModelStreamer`] or one of its
/// stream items. `Provider` and `Host` become definite failed settlements; `Unknown` leaves
/// the Effect unknown.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// An ordinary model failure (refusal, rate limit, transport error, cancellation seen by
    /// the provider): settled as `error` → `interaction.model.failed`.
    #[error("model failed: {0}")]
    Provider(String),
    /// A definite failure that may not happen again if the call is repeated: the provider was
    /// overloaded, rate limited or had a server error, before or during a stream. Nothing was
    /// answered. The agent facade repeats the call per its model error policy
    /// (`AgentBuilder::on_model_error`); otherwise, and once the attempts are used up, it
    /// settles like [`ModelError::Provider`].
    #[error("model failed (may succeed if repeated): {0}")]
    Transient(String),
    /// Host infrastructure failed (not the model's answer): settled as `host_error` →
    /// `interaction.host.failed`.
    #[error("host failure: {0}")]
    Host(String),
    /// The client cannot tell whether the model received and answered the request (a timeout
    /// or a connection lost after the request was sent): the Dispatcher returns a dispatch
    /// error, so the Effect stays unknown until the host resolves it. Never retried: the model
    /// may already have answered (and charged) once.
    #[error("model outcome unknown: {0}")]
    Unknown(String),
}
