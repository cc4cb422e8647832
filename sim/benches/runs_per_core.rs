//! Scenario-runs per second per core for the default Interaction mix (the `interaction-swarm`
//! seeds of the default campaign), on madsim and, beside it, the same runs on a plain tokio
//! runtime (current-thread, paused timers), measured in one run and printed as a ratio.
//!
//! Run: `cargo bench -p keel-sim --bench runs_per_core` (release profile). Optional first
//! argument: seeds per round (default 200). Every run is single-threaded, so runs/s is per core.
//!
//! Beside them runs a bare madsim program with the same shape per seed (same seeds, same
//! generated spec): per model turn a sleep of the model's latency, then per tool call of the
//! turn a spawned task sleeping the tool's latency, joined before the next turn. It prints
//! `harness_overhead = X`: keel's madsim run time over the bare program's for the same seeds,
//! the price of the runtime, the world and its oracle over madsim itself, and
//! `madsim_runs_per_s_per_core = X`: keel's runs per second on madsim (one core).
//!
//! Method: R rounds; each round runs the same seeds on madsim, then on tokio, alternating the
//! order between rounds so drift (thermal, the other core's load) hits both sides alike. The
//! figure per runtime is total runs / total time. A bare run takes microseconds, so the bare
//! side runs every seed `BARE_REPEATS` times per round (its time per run is the mean): a few
//! milliseconds in all would make the ratio a measure of scheduler noise. A run that fails its invariants still
//! counts (it did the work) but is reported, since a failing mix would not be the default one.

use keel_sim::interaction_world::generate::generate;
use keel_sim::interaction_world::spec::{Spec, Turn};
use keel_sim::interaction_world::{run_on_madsim, run_on_tokio};
use keel_sim::world::{RunOptions, RunReport};
use std::time::{Duration, Instant};

const ROUNDS: usize = 3;
/// Times each seed's bare run is repeated per round (see the method above).
const BARE_REPEATS: u64 = 50;

struct Side {
    name: &'static str,
    runs: u64,
    failed: u64,
    time: Duration,
}

fn measure(side: &mut Side, seeds: u64, repeats: u64, run: &dyn Fn(u64) -> RunReport) {
    let started = Instant::now();
    for seed in 0..seeds {
        for _ in 0..repeats {
            let report = run(seed);
            side.runs += 1;
            if !report.passed() {
                side.failed += 1;
            }
        }
    }
    side.time += started.elapsed();
}

/// The bare shape of one seed's run on madsim: model sleeps and tool tasks, no runtime.
fn bare(spec: &Spec, seed: u64) -> RunReport {
    let spec = spec.clone();
    let rt = madsim::runtime::Runtime::with_seed_and_config(seed, madsim::Config::default());
    let slept = rt.block_on(async move {
        let pick = |(lo, hi): (u64, u64)| lo + madsim::rand::random::<u64>() % (hi - lo + 1);
        let mut slept = 0u64;
        let turns = spec.model.turns.len().min(spec.max_model_calls as usize);
        for turn in spec.model.turns.iter().take(turns) {
            let ms = pick(spec.model.latency_ms);
            madsim::time::sleep(Duration::from_millis(ms)).await;
            slept += ms;
            if let Turn::Calls { calls, .. } = turn {
                let mut tasks = Vec::with_capacity(calls.len());
                for call in calls {
                    let latency = spec.tools.iter().find(|t| t.name == call.name).map_or((1, 1), |t| t.latency_ms);
                    let ms = pick(latency);
                    tasks.push(madsim::task::spawn(async move {
                        madsim::time::sleep(Duration::from_millis(ms)).await;
                        ms
                    }));
                }
                for t in tasks {
                    slept += t.await.unwrap_or(0);
                }
            }
        }
        slept
    });
    let mut report = RunReport::new(spec_name(seed), seed);
    report.outcome = format!("slept {slept} ms");
    report
}

fn spec_name(seed: u64) -> String {
    format!("bare-{seed}")
}

fn main() {
    let seeds: u64 = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .and_then(|a| a.parse().ok())
        .unwrap_or(200);
    let options = RunOptions { keep_trace: false };
    let on_madsim = |seed: u64| {
        let (spec, _) = generate(seed);
        run_on_madsim(&spec, seed, &options)
    };
    let on_tokio = |seed: u64| {
        let (spec, _) = generate(seed);
        run_on_tokio(&spec, seed, &options)
    };
    keel::schema::prime();
    let on_bare = |seed: u64| {
        let (spec, _) = generate(seed);
        bare(&spec, seed)
    };
    let mut madsim = Side { name: "madsim", runs: 0, failed: 0, time: Duration::ZERO };
    let mut tokio = Side { name: "tokio", runs: 0, failed: 0, time: Duration::ZERO };
    let mut bare_side = Side { name: "bare", runs: 0, failed: 0, time: Duration::ZERO };
    for round in 0..ROUNDS {
        if round % 2 == 0 {
            measure(&mut madsim, seeds, 1, &on_madsim);
            measure(&mut tokio, seeds, 1, &on_tokio);
            measure(&mut bare_side, seeds, BARE_REPEATS, &on_bare);
        } else {
            measure(&mut bare_side, seeds, BARE_REPEATS, &on_bare);
            measure(&mut tokio, seeds, 1, &on_tokio);
            measure(&mut madsim, seeds, 1, &on_madsim);
        }
    }
    println!("interaction-swarm default mix: seeds 0..{seeds}, {ROUNDS} rounds, one core");
    println!("{:<8} {:>8} {:>8} {:>10} {:>14}", "runtime", "runs", "failed", "seconds", "runs/s/core");
    let rate = |s: &Side| s.runs as f64 / s.time.as_secs_f64().max(1e-9);
    for s in [&madsim, &tokio, &bare_side] {
        println!("{:<8} {:>8} {:>8} {:>10.2} {:>14.1}", s.name, s.runs, s.failed, s.time.as_secs_f64(), rate(s));
    }
    println!("ratio    madsim / tokio = {:.2}x", rate(&madsim) / rate(&tokio));
    println!("madsim_runs_per_s_per_core = {:.1}", rate(&madsim));
    // Time per run on each side, same seeds (the bare side ran each seed BARE_REPEATS times).
    println!("harness_overhead = {:.1}", rate(&bare_side) / rate(&madsim));
}
