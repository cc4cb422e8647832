use std::collections::BTreeSet;
use std::sync::Arc;

use keel_sim::campaign::{run_one, Campaign, ProgressStyle};
use keel_sim::scenarios::ClockAndRng;
use keel_sim::world::{RunOptions, Scenario, DETERMINISM_INVARIANT};

use crate::support::{cli, test_registry, Nondeterministic};

#[test]
fn same_seed_twice_gives_the_same_hash() {
    for seed in [0, 1, 2, 99, u64::MAX] {
        let a = ClockAndRng.run(seed, &RunOptions::default());
        let b = ClockAndRng.run(seed, &RunOptions { keep_trace: true });
        assert_eq!(a.trace_hash, b.trace_hash, "seed {seed}");
        assert!(run_one(&ClockAndRng, seed, true).passed());
    }
}

#[test]
fn different_seeds_give_different_hashes() {
    let hashes: BTreeSet<[u8; 32]> = (0..100)
        .map(|seed| ClockAndRng.run(seed, &RunOptions::default()).trace_hash)
        .collect();
    assert_eq!(hashes.len(), 100);
}

#[test]
fn check_catches_a_nondeterministic_scenario() {
    let report = run_one(&Nondeterministic::default(), 4, true);
    assert_eq!(report.violations.len(), 1);
    assert_eq!(report.violations[0].invariant, DETERMINISM_INVARIANT);
    assert!(report.violations[0].detail.starts_with("trace sha256 "));
    // Without --check the same scenario passes: only the double run sees it.
    assert!(run_one(&Nondeterministic::default(), 4, false).passed());

    let s = Campaign::new(vec![Arc::new(Nondeterministic::default())])
        .seeds(0, 5)
        .check_determinism(true)
        .progress(ProgressStyle::Off)
        .run(&mut std::io::sink())
        .unwrap();
    assert_eq!(s.failed, 5);
}

#[test]
fn check_failures_print_a_replay_check_command() {
    let out = cli(
        &test_registry(),
        "run --seeds 1 --from 3 --scenario nondeterministic --check",
    );
    assert_eq!(out.code, 1);
    assert!(out
        .out
        .contains("FAIL seed=3 scenario=nondeterministic invariant=determinism: trace sha256 "));
    assert!(out.out.contains(
        "  cargo run -p keel-sim -- replay --seed 3 --scenario nondeterministic --check\n"
    ));
}

#[test]
fn replay_check_reports_divergence() {
    let out = cli(
        &test_registry(),
        "replay --seed 3 --scenario nondeterministic --check",
    );
    assert_eq!(out.code, 1);
    assert!(out.out.contains("determinism    DIVERGED"));
    let ok = cli(
        &test_registry(),
        "replay --seed 3 --scenario clock-and-rng --check",
    );
    assert_eq!(ok.code, 0, "{}", ok.err);
    assert!(ok.out.contains("determinism    same report twice"));
}
