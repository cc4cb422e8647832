//! Determinism proof: one seed is one run. A small scenario on madsim through `MadsimEnv`
//! (20 tasks sleeping random durations, one task aborted midway) records what every task saw;
//! the trace's SHA-256 must repeat for a seed and differ across seeds.
//!
//! Only meaningful under `--cfg madsim` (always set inside this workspace).
#![cfg(madsim)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel::env::{random_hex, JoinError, MadsimEnv};
use sha2::{Digest as _, Sha256};

const TASKS: u64 = 20;

async fn scenario() -> Vec<String> {
    let env = MadsimEnv::current().expect("inside madsim").env();
    let trace = Arc::new(Mutex::new(vec![format!("start at {}", env.clock.now())]));

    let workers: Vec<_> = (0..TASKS)
        .map(|id| {
            let (env, trace) = (env.clone(), trace.clone());
            env.executor.clone().spawn(Box::pin(async move {
                let sleep_ms = env.rng.next_u64() % 1_000;
                env.clock.sleep(Duration::from_millis(sleep_ms)).await;
                let draw = random_hex(&*env.rng, 4);
                let line = format!(
                    "task {id} slept {sleep_ms}ms, woke at {}, drew {draw}",
                    env.clock.now()
                );
                trace.lock().unwrap().push(line);
            }))
        })
        .collect();

    let victim = {
        let (env, trace) = (env.clone(), trace.clone());
        env.executor.clone().spawn(Box::pin(async move {
            env.clock.sleep(Duration::from_secs(10)).await;
            trace.lock().unwrap().push("victim finished".to_owned());
        }))
    };
    env.clock.sleep(Duration::from_millis(500)).await;
    trace.lock().unwrap().push(format!("abort victim at {}", env.clock.now()));
    victim.abort();
    assert_eq!(victim.join().await, Err(JoinError::Aborted));

    for worker in workers {
        assert_eq!(worker.join().await, Ok(()));
    }
    // Give the victim's original deadline a chance to pass: it must stay dead.
    env.clock.sleep(Duration::from_secs(11)).await;
    let trace = trace.lock().unwrap().clone();
    trace
}

fn run(seed: u64) -> Vec<String> {
    madsim::runtime::Runtime::with_seed_and_config(seed, madsim::Config::default())
        .block_on(scenario())
}

fn hash(trace: &[String]) -> String {
    let digest = Sha256::digest(trace.join("\n").as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn trace_is_complete() {
    let trace = run(1);
    assert_eq!(trace.len(), 1 + TASKS as usize + 1, "{trace:#?}");
    assert_eq!(trace.iter().filter(|l| l.starts_with("task ")).count(), TASKS as usize);
    assert!(trace.iter().any(|l| l.starts_with("abort victim at ")));
    assert!(!trace.iter().any(|l| l == "victim finished"), "an aborted task must not run on");
}

#[test]
fn same_seed_same_hash() {
    for seed in [1, 42] {
        let (first, second) = (hash(&run(seed)), hash(&run(seed)));
        println!("seed {seed}: {first}");
        println!("seed {seed}: {second}");
        assert_eq!(first, second, "seed {seed} is not reproducible");
    }
}

#[test]
fn different_seeds_different_hashes() {
    let (a, b) = (run(1), run(2));
    println!("seed 1: {}", hash(&a));
    println!("seed 2: {}", hash(&b));
    assert_ne!(hash(&a), hash(&b));
    // Not only the simulated start time differs: the tasks' observations do.
    assert_ne!(a[1..], b[1..]);
}

#[test]
fn madsim_detects_no_nondeterminism() {
    // madsim logs every RNG draw of a first run and panics if a second run deviates.
    let trace = madsim::runtime::Runtime::check_determinism(7, madsim::Config::default(), scenario);
    println!("seed 7: {}", hash(&trace));
}
