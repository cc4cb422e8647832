//! The default campaign: the README main job's code path (the `keel-sim run` command over
//! every built-in scenario), with every seed kept in `sim/regressions/` replayed first, on a
//! fixed seed range, under `--check` (each seed runs twice and must hash the same), and no
//! world may report a kind it does not declare.
//!
//! Plain `cargo test` runs the short campaign ([`QUICK_CAMPAIGN_SEEDS`] seeds per scenario).
//! The long one ([`TEST_CAMPAIGN_SEEDS`]) is ignored unless asked for, as `.ci/run` does
//! (`cargo test -p keel-sim --test default_campaign -- --ignored`), and must also exercise
//! everything the worlds declare: every fault kind fires and every crash boundary is hit at
//! least once (the summary flags `never fired`). The rarest ones (a model stopping with
//! `stop` calls, a crash after a progress or terminal commit of the facade) need more than
//! the short campaign's seeds. Longer campaigns: `cargo run --release -p keel-sim -- run --seeds N`.

use keel_sim::campaign::ProgressStyle;
use keel_sim::cli::{Cli, EXIT_OK};
use keel_sim::limits::{QUICK_CAMPAIGN_SEEDS, TEST_CAMPAIGN_SEEDS};
use keel_sim::regressions::load_regressions;
use keel_sim::scenarios::builtin_registry;
use std::path::Path;

#[test]
fn the_short_builtin_campaign_replays_the_kept_seeds_first_and_passes() {
    campaign(QUICK_CAMPAIGN_SEEDS, false);
}

#[test]
#[ignore = "long campaign (about 6 min on 2 cores): run with -- --ignored, as .ci/run does"]
fn the_long_builtin_campaign_replays_the_kept_seeds_first_passes_and_covers_every_declared_fault() {
    campaign(TEST_CAMPAIGN_SEEDS, true);
}

/// Runs the default campaign at `seeds` per scenario; `full_coverage`: every declared fault
/// kind and crash point must have fired.
fn campaign(seeds: u64, full_coverage: bool) {
    let registry = builtin_registry();
    let regressions = Path::new(env!("CARGO_MANIFEST_DIR")).join("regressions");
    let kept = load_regressions(&regressions).expect("the repository's regression files load").len();
    let cli = Cli { registry: &registry, default_regressions: regressions, progress: ProgressStyle::Off };
    let args: Vec<String> = format!("run --seeds {seeds} --check").split_whitespace().map(String::from).collect();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = cli.main(&args, &mut out, &mut err);
    let (out, err) = (String::from_utf8_lossy(&out), String::from_utf8_lossy(&err));
    println!("{out}");
    assert_eq!(code, EXIT_OK, "campaign failed:\n{out}\n{err}");
    assert!(out.contains(&format!("regressions    {kept} replayed first, 0 failed")), "{out}");
    let scenarios = registry.scenarios().len() as u64;
    let runs = seeds * scenarios + kept as u64;
    assert!(out.contains(&format!("runs           {runs}\n")), "every scenario ran every seed:\n{out}");
    // Every built-in scenario declares its world's vocabulary, so nothing is left unjudged.
    assert!(registry.scenarios().iter().all(|s| s.coverage().is_some()));
    let strangers: Vec<&str> = out.lines().filter(|l| l.ends_with("  undeclared")).collect();
    assert!(strangers.is_empty(), "reported but not declared by their world:\n{}", strangers.join("\n"));
    if !full_coverage {
        return;
    }
    let gaps: Vec<&str> = out.lines().filter(|l| l.ends_with("  never fired")).collect();
    assert!(gaps.is_empty(), "declared but never exercised by the default campaign:\n{}", gaps.join("\n"));
    for declared in registry.scenarios().iter().filter_map(|s| s.coverage()) {
        for kind in declared.fault_kinds {
            assert!(out.contains(&format!("    {kind} ")), "{kind} missing from the summary:\n{out}");
        }
        for point in declared.crash_points() {
            assert!(out.contains(&format!("    {point} ")), "{point} missing from the summary:\n{out}");
        }
    }
}
