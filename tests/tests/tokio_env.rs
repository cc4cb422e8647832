//! Smoke test of the production environment on a real (multi-threaded) tokio runtime.

use std::time::Duration;

use keel::env::{random_hex, spawn_with_result, EnvError, JoinError, TokioEnv};

#[test]
fn tokio_env_smoke() {
    assert_eq!(TokioEnv::current().err(), Some(EnvError::NoRuntime { runtime: "tokio" }));

    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let env = TokioEnv::current().unwrap().env();

        // spawn + join, with a value.
        let task = spawn_with_result(&*env.executor, async { 40 + 2 });
        assert_eq!(task.join().await, Ok(42));

        // panic → Panicked, with the message.
        let boom = env.executor.spawn(Box::pin(async { panic!("smoke panic") }));
        assert_eq!(boom.join().await, Err(JoinError::Panicked { message: "smoke panic".into() }));

        // abort → Aborted.
        let clock = env.clock.clone();
        let stuck =
            env.executor.spawn(Box::pin(async move { clock.sleep(Duration::from_secs(60)).await }));
        stuck.abort();
        assert_eq!(stuck.join().await, Err(JoinError::Aborted));

        // sleep advances the clock.
        let before = env.clock.now();
        env.clock.sleep(Duration::from_millis(30)).await;
        let elapsed = env.clock.now().saturating_duration_since(before);
        assert!(elapsed >= Duration::from_millis(29), "slept 30ms, clock moved {elapsed:?}");

        assert_eq!(random_hex(&*env.rng, 16).len(), 32);
    });
}
