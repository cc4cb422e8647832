//! The simulation environment: madsim's virtual clock, its single-threaded scheduler and its
//! seeded global RNG, so one seed replays one exact run.
//!
//! Under `--cfg madsim` (always the case inside this workspace) everything goes through
//! madsim. Without the cfg, madsim itself is a thin layer over tokio, so `MadsimEnv` simply
//! delegates to [`TokioEnv`](super::tokio_env::TokioEnv).

#[cfg(not(madsim))]
pub use real::MadsimEnv;
#[cfg(madsim)]
pub use simulated::MadsimEnv;

#[cfg(madsim)]
mod simulated {
    use std::time::Duration;

    use madsim::rand::RngCore as _;

    use crate::env::executor::catch_panic;
    use crate::env::{
        BoxFuture, Clock, Env, EnvError, Executor, JoinError, Rng, TaskControl, TaskHandle,
        Timestamp,
    };
    use crate::limits::MAX_SLEEP;

    /// Clock, executor and rng of the madsim runtime this is used in.
    ///
    /// madsim keeps its state in a per-thread context, so there is nothing to capture: the
    /// environment is valid while the runtime that was current at construction is running
    /// (using it after `block_on` returns panics inside madsim, as madsim's own API does).
    /// Randomness comes from madsim's global RNG, so it is part of the seeded run.
    #[derive(Clone, Debug)]
    pub struct MadsimEnv {
        _inside_runtime: (),
    }

    impl MadsimEnv {
        /// [`EnvError::NoRuntime`] unless called inside a madsim runtime.
        pub fn current() -> Result<MadsimEnv, EnvError> {
            madsim::runtime::Handle::try_current()
                .map_err(|_| EnvError::NoRuntime { runtime: "madsim" })?;
            Ok(MadsimEnv { _inside_runtime: () })
        }

        /// This environment as an [`Env`].
        pub fn env(&self) -> Env {
            Env::from_shared(std::sync::Arc::new(self.clone()))
        }
    }

    impl Clock for MadsimEnv {
        fn now(&self) -> Timestamp {
            // Simulated time only moves forward.
            Timestamp::from_system_time(madsim::time::TimeHandle::current().now_time())
        }

        fn sleep(&self, d: Duration) -> BoxFuture<'static, ()> {
            // Clamped: madsim adds the duration to an Instant, which would overflow.
            Box::pin(madsim::time::sleep(d.min(MAX_SLEEP)))
        }
    }

    impl Executor for MadsimEnv {
        fn spawn(&self, task: BoxFuture<'static, ()>) -> TaskHandle {
            // Panics must be caught inside the task: madsim re-raises an escaped task panic
            // out of `block_on`, ending the whole simulation.
            TaskHandle::new(Box::new(MadsimTask(madsim::task::spawn(catch_panic(task)))))
        }
    }

    impl Rng for MadsimEnv {
        fn next_u64(&self) -> u64 {
            madsim::rand::thread_rng().next_u64()
        }
        fn fill_bytes(&self, buf: &mut [u8]) {
            madsim::rand::thread_rng().fill_bytes(buf);
        }
    }

    struct MadsimTask(madsim::task::JoinHandle<Result<(), JoinError>>);

    impl TaskControl for MadsimTask {
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
                    // Panics never reach madsim (caught above): a join error is an abort or a
                    // killed node.
                    Err(_) => Err(JoinError::Aborted),
                }
            })
        }
    }
}

#[cfg(not(madsim))]
mod real {
    use std::time::Duration;

    use crate::env::tokio_env::TokioEnv;
    use crate::env::{BoxFuture, Clock, Env, EnvError, Executor, Rng, TaskHandle, Timestamp};

    /// Without `--cfg madsim`: the tokio environment under madsim's name.
    #[derive(Clone, Debug)]
    pub struct MadsimEnv {
        inner: TokioEnv,
    }

    impl MadsimEnv {
        /// [`EnvError::NoRuntime`] unless called inside a tokio runtime.
        pub fn current() -> Result<MadsimEnv, EnvError> {
            Ok(MadsimEnv { inner: TokioEnv::current()? })
        }

        /// This environment as an [`Env`].
        pub fn env(&self) -> Env {
            Env::from_shared(std::sync::Arc::new(self.clone()))
        }
    }

    impl Clock for MadsimEnv {
        fn now(&self) -> Timestamp {
            self.inner.now()
        }
        fn sleep(&self, d: Duration) -> BoxFuture<'static, ()> {
            self.inner.sleep(d)
        }
    }

    impl Executor for MadsimEnv {
        fn spawn(&self, task: BoxFuture<'static, ()>) -> TaskHandle {
            self.inner.spawn(task)
        }
    }

    impl Rng for MadsimEnv {
        fn next_u64(&self) -> u64 {
            self.inner.next_u64()
        }
        fn fill_bytes(&self, buf: &mut [u8]) {
            self.inner.fill_bytes(buf);
        }
    }
}

#[cfg(all(test, madsim))]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::MadsimEnv;
    use crate::env::{random_hex, spawn_with_result, Clock, EnvError, Executor, JoinError, Rng};

    fn run<F: std::future::Future>(seed: u64, fut: impl FnOnce() -> F) -> F::Output {
        madsim::runtime::Runtime::with_seed_and_config(seed, madsim::Config::default())
            .block_on(fut())
    }

    #[test]
    fn outside_a_runtime_is_a_typed_error() {
        assert_eq!(MadsimEnv::current().err(), Some(EnvError::NoRuntime { runtime: "madsim" }));
    }

    #[test]
    fn join_error_mapping() {
        run(1, || async {
            let env = MadsimEnv::current().unwrap().env();
            assert_eq!(env.executor.spawn(Box::pin(async {})).join().await, Ok(()));

            // Without the catch inside the task, this panic would end the simulation.
            let boom = env.executor.spawn(Box::pin(async { panic!("madsim boom") }));
            assert_eq!(
                boom.join().await,
                Err(JoinError::Panicked { message: "madsim boom".into() })
            );

            let clock = env.clock.clone();
            let stuck = env
                .executor
                .spawn(Box::pin(async move { clock.sleep(Duration::from_secs(3600)).await }));
            env.clock.sleep(Duration::from_millis(10)).await;
            assert!(!stuck.is_finished());
            stuck.abort();
            assert_eq!(stuck.join().await, Err(JoinError::Aborted));

            let value = spawn_with_result(&*env.executor, async { 7u8 });
            assert_eq!(value.join().await, Ok(7));
        });
    }

    #[test]
    fn sleep_advances_virtual_time_exactly() {
        run(2, || async {
            let env = MadsimEnv::current().unwrap();
            let before = env.now();
            env.sleep(Duration::from_secs(3600)).await; // instant in real time
            let slept = env.now().saturating_duration_since(before);
            assert!(
                slept >= Duration::from_secs(3600) && slept < Duration::from_millis(3_600_010),
                "{slept:?}"
            );
            let task = env.spawn(env.sleep(Duration::MAX));
            task.abort();
            assert_eq!(task.join().await, Err(JoinError::Aborted));
        });
    }

    #[test]
    fn randomness_and_time_follow_the_seed() {
        let draw = |seed| {
            run(seed, || async {
                let env = MadsimEnv::current().unwrap();
                (env.now(), env.next_u64(), random_hex(&env, 8))
            })
        };
        assert_eq!(draw(5), draw(5));
        assert_ne!(draw(5), draw(6));
    }

    #[test]
    fn tasks_share_the_seeded_rng() {
        let trace = |seed| {
            run(seed, || async {
                let env = MadsimEnv::current().unwrap().env();
                let seen = Arc::new(Mutex::new(Vec::new()));
                let tasks: Vec<_> = (0..4)
                    .map(|i| {
                        let (env, seen) = (env.clone(), seen.clone());
                        env.executor.clone().spawn(Box::pin(async move {
                            env.clock.sleep(Duration::from_millis(env.rng.next_u64() % 50)).await;
                            seen.lock().unwrap().push(i);
                        }))
                    })
                    .collect();
                for t in tasks {
                    t.join().await.unwrap();
                }
                Arc::try_unwrap(seen).unwrap().into_inner().unwrap()
            })
        };
        assert_eq!(trace(11), trace(11));
    }
}
