//! What every `agent` test file runs on: a current-thread tokio runtime with time, and the
//! keel environment of the runtime it is called on.

use crate::env::{Env, TokioEnv};

/// Runs `f` to completion on a fresh current-thread runtime (timers enabled).
pub(super) fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(f)
}

/// The environment of the tokio runtime this is called on (inside [`block_on`]).
pub(super) fn env() -> Env {
    TokioEnv::current().unwrap().env()
}
