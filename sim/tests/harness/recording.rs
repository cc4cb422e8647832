//! `run` keeps every new failing seed: appended to the regressions directory's `seeds.txt`
//! with the date and what broke, once, and replayed first by the next campaign.

use std::fs;

use keel_sim::regressions::load_regressions;

use crate::support::{cli_with_regressions, temp_dir, test_registry};

#[test]
fn a_failing_seed_is_recorded_once_and_replayed_first_from_then_on() {
    let dir = temp_dir("record");
    fs::write(dir.join("seeds.txt"), "# kept seeds\nclock-and-rng 3").unwrap();
    let registry = test_registry();
    let out = cli_with_regressions(&registry, "run --seeds 15 --scenario flaky", dir.clone());
    assert_eq!(out.code, 1, "{}", out.err);
    assert!(
        out.out.contains(&format!(
            "recorded       3 failing seed(s) in {} (replayed first from now on; `--no-record` skips)",
            dir.join("seeds.txt").display()
        )),
        "{}",
        out.out
    );
    let text = fs::read_to_string(dir.join("seeds.txt")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[..2], ["# kept seeds", "clock-and-rng 3"], "{text}");
    assert_eq!(lines.len(), 5, "{text}");
    for (line, seed) in lines[2..].iter().zip([0, 7, 14]) {
        let (entry, comment) = line.split_once("  # ").unwrap();
        assert_eq!(entry, format!("flaky {seed}"));
        // `YYYY-MM-DD invariant: detail`
        let (date, what) = comment.split_once(' ').unwrap();
        assert!(date.len() == 10 && date.as_bytes()[4] == b'-' && date.as_bytes()[7] == b'-', "{line}");
        assert_eq!(what, format!("synthetic: seed {seed} is a multiple of 7"));
    }
    let stored: Vec<(String, u64)> =
        load_regressions(&dir).unwrap().into_iter().map(|r| (r.scenario, r.seed)).collect();
    assert_eq!(stored.len(), 4);

    // The next campaign replays them first and records nothing twice.
    let out = cli_with_regressions(&registry, "run --seeds 15 --scenario flaky", dir.clone());
    assert!(out.out.contains("regressions    3 replayed first, 3 failed"), "{}", out.out);
    assert!(!out.out.contains("recorded"), "{}", out.out);
    assert_eq!(fs::read_to_string(dir.join("seeds.txt")).unwrap(), text);

    // New seeds of a longer range are added, the old ones are not repeated.
    let out = cli_with_regressions(&registry, "run --seeds 22 --scenario flaky", dir.clone());
    assert!(out.out.contains("recorded       1 failing seed(s)"), "{}", out.out);
    let again = fs::read_to_string(dir.join("seeds.txt")).unwrap();
    assert_eq!(again.lines().count(), 6);
    assert!(again.lines().last().unwrap().starts_with("flaky 21  # "));
}

#[test]
fn no_record_no_regressions_and_mutations_record_nothing() {
    let dir = temp_dir("no-record");
    let registry = test_registry();
    let out = cli_with_regressions(&registry, "run --seeds 8 --scenario flaky --no-record", dir.clone());
    assert_eq!(out.code, 1);
    assert!(!out.out.contains("recorded"), "{}", out.out);
    let out = cli_with_regressions(&registry, "run --seeds 8 --scenario flaky --no-regressions", dir.clone());
    assert_eq!(out.code, 1);
    assert!(
        out.out.contains("recorded       nothing: no regressions directory to keep failing seeds in"),
        "{}",
        out.out
    );
    assert!(!dir.join("seeds.txt").exists());
    // A passing campaign writes nothing either.
    let out = cli_with_regressions(&registry, "run --seeds 5 --scenario clock-and-rng", dir.clone());
    assert_eq!(out.code, 0);
    assert!(!dir.join("seeds.txt").exists());
}
