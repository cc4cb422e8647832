//! The production environment: the system clock, tasks on a real tokio runtime, OS randomness.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::runtime::Handle;

use super::executor::{catch_panic, panicked};
use super::{
    BoxFuture, Clock, Env, EnvError, Executor, JoinError, Rng, SeededRng, TaskControl, TaskHandle,
    Timestamp,
};
use crate::limits::MAX_SLEEP;

/// Clock, executor and rng on the tokio runtime that was current at construction.
///
/// * `now()` reads `SystemTime` but never goes backwards (a wall-clock step back is held at
///   the last value returned by this environment and its clones).
/// * `sleep()` uses the captured runtime's timer, which must be enabled (`enable_time` /
///   `enable_all`, as `#[tokio::main]` does); otherwise tokio panics when the sleep is made.
/// * `spawn()` spawns on the captured runtime, so it works from any thread.
#[derive(Clone)]
pub struct TokioEnv {
    handle: Handle,
    floor_millis: Arc<AtomicU64>,
    rng: Arc<OsRng>,
}

impl TokioEnv {
    /// Captures the current tokio runtime; [`EnvError::NoRuntime`] outside one.
    pub fn current() -> Result<TokioEnv, EnvError> {
        let handle = Handle::try_current().map_err(|_| EnvError::NoRuntime { runtime: "tokio" })?;
        TokioEnv::with_handle(handle)
    }

    /// Uses the runtime behind `handle`.
    pub fn with_handle(handle: Handle) -> Result<TokioEnv, EnvError> {
        Ok(TokioEnv {
            handle,
            floor_millis: Arc::new(AtomicU64::new(0)),
            rng: Arc::new(OsRng::new()?),
        })
    }

    /// This environment as an [`Env`].
    pub fn env(&self) -> Env {
        Env::from_shared(Arc::new(self.clone()))
    }
}

impl std::fmt::Debug for TokioEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokioEnv").finish_non_exhaustive()
    }
}

impl Clock for TokioEnv {
    fn now(&self) -> Timestamp {
        let read = Timestamp::from_system_time(SystemTime::now()).as_millis();
        let floor = self.floor_millis.fetch_max(read, Ordering::Relaxed);
        Timestamp::saturating_from_millis(read.max(floor))
    }

    fn sleep(&self, d: Duration) -> BoxFuture<'static, ()> {
        // Entering binds the timer to the captured runtime even when called from elsewhere.
        let _entered = self.handle.enter();
        Box::pin(tokio::time::sleep(d.min(MAX_SLEEP)))
    }
}

impl Executor for TokioEnv {
    fn spawn(&self, task: BoxFuture<'static, ()>) -> TaskHandle {
        TaskHandle::new(Box::new(TokioTask(self.handle.spawn(catch_panic(task)))))
    }
}

impl Rng for TokioEnv {
    fn next_u64(&self) -> u64 {
        self.rng.next_u64()
    }
    fn fill_bytes(&self, buf: &mut [u8]) {
        self.rng.fill_bytes(buf);
    }
}

struct TokioTask(tokio::task::JoinHandle<Result<(), JoinError>>);

impl TaskControl for TokioTask {
    fn abort(&self) {
        self.0.abort();
    }
    fn is_finished(&self) -> bool {
        self.0.is_finished()
    }
    fn join(self: Box<Self>) -> BoxFuture<'static, Result<(), JoinError>> {
        Box::pin(async move {
            match self.0.await {
                Ok(outcome) => outcome,
                // catch_panic already catches task panics; this covers anything tokio saw.
                Err(e) if e.is_panic() => Err(panicked(e.into_panic().as_ref())),
                Err(_) => Err(JoinError::Aborted),
            }
        })
    }
}

/// OS randomness via `getrandom`. The OS is checked once at construction; should it fail
/// later, bytes come from a generator seeded from the OS at construction instead of panicking.
struct OsRng {
    fallback: SeededRng,
}

impl OsRng {
    fn new() -> Result<OsRng, EnvError> {
        let mut seed = [0u8; 8];
        getrandom::fill(&mut seed)
            .map_err(|e| EnvError::RandomnessUnavailable { reason: e.to_string() })?;
        Ok(OsRng { fallback: SeededRng::new(u64::from_le_bytes(seed)) })
    }

    fn next_u64(&self) -> u64 {
        let mut word = [0u8; 8];
        self.fill_bytes(&mut word);
        u64::from_le_bytes(word)
    }

    fn fill_bytes(&self, buf: &mut [u8]) {
        if getrandom::fill(buf).is_err() {
            self.fallback.fill_bytes(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::{random_hex, spawn_with_result};

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap()
    }

    #[test]
    fn outside_a_runtime_is_a_typed_error() {
        assert_eq!(TokioEnv::current().err(), Some(EnvError::NoRuntime { runtime: "tokio" }));
    }

    #[test]
    fn join_error_mapping() {
        runtime().block_on(async {
            let env = TokioEnv::current().unwrap().env();
            assert_eq!(env.executor.spawn(Box::pin(async {})).join().await, Ok(()));

            let boom = env.executor.spawn(Box::pin(async { panic!("tokio boom") }));
            assert_eq!(
                boom.join().await,
                Err(JoinError::Panicked { message: "tokio boom".into() })
            );

            let clock = env.clock.clone();
            let stuck = env
                .executor
                .spawn(Box::pin(async move { clock.sleep(Duration::from_secs(3600)).await }));
            assert!(!stuck.is_finished());
            stuck.abort();
            assert_eq!(stuck.join().await, Err(JoinError::Aborted));

            let value = spawn_with_result(&*env.executor, async { "done" });
            assert_eq!(value.join().await, Ok("done"));
        });
    }

    #[test]
    fn abort_after_completion_keeps_the_outcome() {
        runtime().block_on(async {
            let env = TokioEnv::current().unwrap();
            let task = env.spawn(Box::pin(async {}));
            while !task.is_finished() {
                tokio::task::yield_now().await;
            }
            task.abort();
            assert_eq!(task.join().await, Ok(()));
        });
    }

    #[test]
    fn spawn_and_sleep_work_from_outside_the_runtime_thread() {
        let rt = runtime();
        let env = rt.block_on(async { TokioEnv::current().unwrap() });
        // Not inside block_on: the captured handle must carry the runtime.
        let sleep = env.sleep(Duration::from_millis(5));
        let task = env.spawn(sleep);
        rt.block_on(async { assert_eq!(task.join().await, Ok(())) });
    }

    #[test]
    fn clock_is_monotonic_and_sleep_advances_it() {
        runtime().block_on(async {
            let env = TokioEnv::current().unwrap();
            let before = env.now();
            env.sleep(Duration::from_millis(20)).await;
            let after = env.now();
            assert!(
                after.saturating_duration_since(before) >= Duration::from_millis(19),
                "{before} → {after}"
            );
            // A floor above the wall clock (as after a clock step back) holds now() there.
            let ahead = after.as_millis() + 60_000;
            env.floor_millis.store(ahead, Ordering::Relaxed);
            assert_eq!(env.now().as_millis(), ahead);
        });
    }

    #[test]
    fn huge_sleeps_are_clamped_not_overflowed() {
        runtime().block_on(async {
            let env = TokioEnv::current().unwrap();
            let task = env.spawn(env.sleep(Duration::MAX));
            task.abort();
            assert_eq!(task.join().await, Err(JoinError::Aborted));
        });
    }

    #[test]
    fn os_randomness_varies() {
        runtime().block_on(async {
            let env = TokioEnv::current().unwrap();
            assert_ne!(random_hex(&env, 16), random_hex(&env, 16));
            assert_ne!(env.next_u64(), env.next_u64());
        });
    }
}
