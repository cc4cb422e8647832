//! The default campaign of `cargo test`: the README main job's code path (the `keel-sim run`
//! command over every built-in scenario), with every seed kept in `sim/regressions/` replayed
//! first, on a fixed seed range, under `--check` (each seed runs twice and must hash the same).
//! It must also exercise everything the worlds declare: every fault kind fires and every crash
//! boundary is hit at least once (the summary flags `never fired`), and no world reports a
//! kind it does not declare. Longer campaigns: `cargo run --release -p keel-sim -- run --seeds N`.

use keel_sim::campaign::ProgressStyle;
use keel_sim::cli::{Cli, EXIT_OK};
use keel_sim::limits::TEST_CAMPAIGN_SEEDS;
use keel_sim::regressions::load_regressions;
use keel_sim::scenarios::builtin_registry;
use std::path::Path;

#[test]
fn the_builtin_campaign_replays_the_kept_seeds_first_passes_and_covers_every_declared_fault() {
    let registry = builtin_registry();
    let regressions = Path::new(env!("CARGO_MANIFEST_DIR")).join("regressions");
    let kept = load_regressions(&regressions).expect("the repository's regression files load").len();
    let cli = Cli { registry: &registry, default_regressions: regressions, progress: ProgressStyle::Off };
    let args: Vec<String> =
        format!("run --seeds {TEST_CAMPAIGN_SEEDS} --check").split_whitespace().map(String::from).collect();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = cli.main(&args, &mut out, &mut err);
    let (out, err) = (String::from_utf8_lossy(&out), String::from_utf8_lossy(&err));
    println!("{out}");
    assert_eq!(code, EXIT_OK, "campaign failed:\n{out}\n{err}");
    assert!(out.contains(&format!("regressions    {kept} replayed first, 0 failed")), "{out}");
    let scenarios = registry.scenarios().len() as u64;
    let runs = TEST_CAMPAIGN_SEEDS * scenarios + kept as u64;
    assert!(out.contains(&format!("runs           {runs}\n")), "every scenario ran every seed:\n{out}");
    // Every built-in scenario declares its world's vocabulary, so nothing is left unjudged.
    assert!(registry.scenarios().iter().all(|s| s.coverage().is_some()));
    let gaps: Vec<&str> = out.lines().filter(|l| l.ends_with("  never fired")).collect();
    assert!(gaps.is_empty(), "declared but never exercised by the default campaign:\n{}", gaps.join("\n"));
    let strangers: Vec<&str> = out.lines().filter(|l| l.ends_with("  undeclared")).collect();
    assert!(strangers.is_empty(), "reported but not declared by their world:\n{}", strangers.join("\n"));
    for declared in registry.scenarios().iter().filter_map(|s| s.coverage()) {
        for kind in declared.fault_kinds {
            assert!(out.contains(&format!("    {kind} ")), "{kind} missing from the summary:\n{out}");
        }
        for point in declared.crash_points() {
            assert!(out.contains(&format!("    {point} ")), "{point} missing from the summary:\n{out}");
        }
    }
}
