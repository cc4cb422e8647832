//! The clock port: wall-clock reads and timers.

use std::time::Duration;

use super::{BoxFuture, Timestamp};

/// Wall-clock time and sleeping. Implementations: `TokioEnv` (real), `MadsimEnv`
/// (simulated); the simulator's direct mode may supply its own.
///
/// Object-safe so an [`Env`](super::Env) can hold it as `Arc<dyn Clock>`.
pub trait Clock: Send + Sync {
    /// The current time. Implementations in this module never go backwards.
    fn now(&self) -> Timestamp;

    /// A future that resolves once `d` has elapsed on this clock. Durations above
    /// [`crate::limits::MAX_SLEEP`] are clamped to it.
    fn sleep(&self, d: Duration) -> BoxFuture<'static, ()>;
}
