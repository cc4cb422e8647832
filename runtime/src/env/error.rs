//! Errors of constructing an environment.

/// Why an environment could not be created.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EnvError {
    /// The constructor must run inside the runtime it captures.
    #[error("no {runtime} runtime is running on this thread")]
    NoRuntime { runtime: &'static str },
    /// The operating system refused to provide random bytes.
    #[error("operating-system randomness is unavailable: {reason}")]
    RandomnessUnavailable { reason: String },
}
