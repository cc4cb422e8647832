use keel_sim::scenarios::builtin_registry;

use crate::support::{cli, test_registry};

#[test]
fn help_names_the_self_test_plainly() {
    let out = cli(&builtin_registry(), "--help");
    assert_eq!(out.code, 0);
    assert!(out.out.contains("USAGE:"));
    let line = out.out.lines().find(|l| l.starts_with("  clock-and-rng ")).unwrap();
    assert!(line.trim_start_matches("  clock-and-rng").trim_start().starts_with("harness self-test"));
    assert!(out.out.contains("not a kernel test"));
    assert_eq!(cli(&builtin_registry(), "help").out, out.out);
}

#[test]
fn list_prints_every_scenario() {
    let registry = builtin_registry();
    let out = cli(&registry, "list");
    assert_eq!(out.code, 0);
    let (builtin, bundled) = out.out.split_once("\n\n").expect("a heading before the bundled files");
    assert_eq!(builtin.lines().count(), registry.scenarios().len());
    assert!(out.out.starts_with("clock-and-rng "));
    assert!(out.out.contains("kernel-swarm"));
    let (heading, files) = bundled.split_once('\n').unwrap();
    assert_eq!(heading, keel_sim::cli::BUNDLED_HEADING);
    assert_eq!(files.lines().count(), registry.bundled().len());
    assert!(files.lines().any(|l| l.starts_with("tool-loop ")));
    // Every scenario says what it is, and the descriptions start in one column.
    let columns: Vec<usize> = builtin
        .lines()
        .chain(files.lines())
        .map(|line| {
            let name_end = line.find(' ').unwrap();
            let description = line[name_end..].trim_start();
            assert!(!description.is_empty(), "no description: {line:?}");
            line.len() - description.len()
        })
        .collect();
    assert!(columns.windows(2).all(|w| w[0] == w[1]), "misaligned:\n{}", out.out);
    assert_eq!(cli(&test_registry(), "list").out.lines().count(), 5);
}

#[test]
fn bad_arguments_exit_2_with_a_message() {
    for (line, message) in [
        ("", "error: no command given"),
        ("frobnicate", "error: unknown command `frobnicate`"),
        ("run", "error: `run` needs `--seeds`"),
        (
            "run --seeds ten",
            "error: `--seeds` wants a non-negative decimal integer, got `ten`",
        ),
        (
            "run --seeds 1 --jobs 0",
            "error: `--jobs` must be at least 1",
        ),
        (
            "run --seeds 1 --bogus",
            "error: `run` does not take `--bogus`",
        ),
        (
            "replay --seed 1 --scenario nope",
            "error: unknown scenario `nope` (known: clock-and-rng",
        ),
        (
            "run --seeds 1 --scenario scenarios/a.scn",
            "looks like a scenario file, but no registered world loads scenario files yet",
        ),
        ("replay --seed 1", "say which with `--scenario`"),
    ] {
        let out = cli(&builtin_registry(), line);
        assert_eq!(out.code, 2, "{line}");
        assert!(out.err.contains(message), "{line}: {}", out.err);
        assert!(out.out.is_empty(), "{line}");
    }
}

#[test]
fn scenario_may_be_omitted_only_when_one_is_registered() {
    let mut single = keel_sim::registry::Registry::new();
    single.register(std::sync::Arc::new(keel_sim::scenarios::ClockAndRng)).unwrap();
    let out = cli(&single, "replay --seed 1");
    assert_eq!(out.code, 0, "{}", out.err);
    assert!(out.out.starts_with("trace ("));
    assert!(out
        .out
        .contains("scenario       clock-and-rng\nseed           1\n"));
    let out = cli(&test_registry(), "replay --seed 1");
    assert_eq!(out.code, 2);
    assert!(out.err.contains("say which with `--scenario`"));
}
