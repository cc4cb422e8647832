//! The default campaign of `cargo test`: the README main job's code path (the `keel-sim run`
//! command over every built-in scenario), with every seed kept in `sim/regressions/` replayed
//! first, on a fixed seed range, under `--check` (each seed runs twice and must hash the same).
//! Longer campaigns: `cargo run --release -p keel-sim -- run --seeds N`.

use keel_sim::campaign::ProgressStyle;
use keel_sim::cli::{Cli, EXIT_OK};
use keel_sim::regressions::load_regressions;
use keel_sim::scenarios::builtin_registry;
use std::path::Path;

/// Seeds per built-in scenario in the default test run (debug build, 2 cores).
const DEFAULT_SEEDS: u64 = 100;

#[test]
fn the_builtin_campaign_replays_the_kept_seeds_first_and_passes() {
    let registry = builtin_registry();
    let regressions = Path::new(env!("CARGO_MANIFEST_DIR")).join("regressions");
    let kept = load_regressions(&regressions).expect("the repository's regression files load").len();
    let cli = Cli { registry: &registry, default_regressions: regressions, progress: ProgressStyle::Off };
    let args: Vec<String> = format!("run --seeds {DEFAULT_SEEDS} --check").split_whitespace().map(String::from).collect();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = cli.main(&args, &mut out, &mut err);
    let (out, err) = (String::from_utf8_lossy(&out), String::from_utf8_lossy(&err));
    assert_eq!(code, EXIT_OK, "campaign failed:\n{out}\n{err}");
    assert!(out.contains(&format!("regressions    {kept} replayed first, 0 failed")), "{out}");
    let scenarios = registry.scenarios().len() as u64;
    assert!(out.contains(&format!("{}", DEFAULT_SEEDS * scenarios)), "every scenario ran every seed:\n{out}");
}
