//! How a model call can fail (spec §6 "Model call failures").

/// A failure reported by a [`super::ModelClient`], a [`super::ModelStreamer`] or one of its
/// stream items. Both become definite failed settlements; neither leaves the Effect unknown.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// An ordinary model failure (refusal, rate limit, transport error, cancellation seen by
    /// the provider): settled as `error` → `interaction.model.failed`.
    #[error("model failed: {0}")]
    Provider(String),
    /// Host infrastructure failed (the reference's `HostFailure`): settled as `host_error` →
    /// `interaction.host.failed`.
    #[error("host failure: {0}")]
    Host(String),
}
