//! The abstract environment: clock, executor and randomness. No other module reads time or
//! randomness or spawns tasks (tests/tests/architecture.rs enforces it); the kernel core reads
//! none of them at all (the Engine driver passes `now` and minted ids in).
//!
//! * [`Clock`], [`Executor`], [`Rng`]: object-safe ports, bundled in an [`Env`].
//! * `TokioEnv` (feature `tokio`): real time, real tasks, OS randomness.
//! * `MadsimEnv` (feature `madsim`): madsim's simulated time, tasks and seeded RNG under
//!   `--cfg madsim`; without that cfg madsim is plain tokio and so is `MadsimEnv`.
//! * [`SeededRng`]: deterministic randomness with no runtime at all.
//! * [`Timestamp`]: the one representation of an instant (UTC ms, RFC 3339 text).
//!
//! ```
//! # #[cfg(feature = "tokio")]
//! # fn main() {
//! use keel::env::{spawn_with_result, TokioEnv};
//! let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
//! rt.block_on(async {
//!     let env = TokioEnv::current().unwrap().env();
//!     let clock = env.clock.clone();
//!     let task = spawn_with_result(&*env.executor, async move { clock.now() });
//!     assert!(task.join().await.unwrap() >= keel::env::Timestamp::UNIX_EPOCH);
//! });
//! # }
//! # #[cfg(not(feature = "tokio"))]
//! # fn main() {}
//! ```

mod cancel;
mod clock;
mod error;
mod executor;
mod rng;
mod seeded_rng;
mod timestamp;

#[cfg(feature = "madsim")]
mod madsim_env;
// Without `--cfg madsim`, madsim is tokio, and MadsimEnv delegates to TokioEnv.
#[cfg(any(feature = "tokio", all(feature = "madsim", not(madsim))))]
#[cfg_attr(not(feature = "tokio"), allow(dead_code))]
mod tokio_env;

use std::sync::Arc;

pub use cancel::CancelToken;
pub use clock::Clock;
pub use error::EnvError;
pub use executor::{spawn_with_result, Executor, JoinError, SpawnedTask, TaskControl, TaskHandle};
#[cfg(feature = "madsim")]
pub use madsim_env::MadsimEnv;
pub use rng::{random_hex, Rng};
pub use seeded_rng::SeededRng;
pub use timestamp::{Timestamp, TimestampError};
#[cfg(feature = "tokio")]
pub use tokio_env::TokioEnv;

/// A boxed, sendable future (executor-agnostic).
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// Everything outside the pure core needs from the world: time, tasks, randomness.
#[derive(Clone)]
pub struct Env {
    pub clock: Arc<dyn Clock>,
    pub executor: Arc<dyn Executor>,
    pub rng: Arc<dyn Rng>,
}

impl Env {
    pub fn new(clock: Arc<dyn Clock>, executor: Arc<dyn Executor>, rng: Arc<dyn Rng>) -> Env {
        Env { clock, executor, rng }
    }

    /// One value serving as clock, executor and rng.
    pub fn from_shared<E: Clock + Executor + Rng + 'static>(parts: Arc<E>) -> Env {
        Env { clock: parts.clone(), executor: parts.clone(), rng: parts }
    }
}

impl std::fmt::Debug for Env {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Env").finish_non_exhaustive()
    }
}
