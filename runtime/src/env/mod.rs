//! The abstract environment: clock, executor and randomness. No other module reads time or
//! randomness or spawns tasks; the kernel core reads none of them at all (the Engine driver
//! passes `now` and minted ids in).
//!
//! (Clock/Executor/Rng traits and the tokio/madsim implementations are being implemented.)

mod cancel;

pub use cancel::CancelToken;

/// A boxed, sendable future (executor-agnostic).
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;
