use keel_sim::minimize::{ddmin, minimize, MinimizeError};
use keel_sim::scenarios::ClockAndRng;
use keel_sim::world::{RunOptions, Scenario};

use crate::support::{cli, test_registry, Culprits, Flaky, CULPRITS};

#[test]
fn ddmin_finds_the_minimal_failing_subset() {
    let input: Vec<u32> = (0..100).collect();
    let needed = [13, 42, 77];
    let fails = |v: &Vec<u32>| needed.iter().all(|n| v.contains(n));
    let out = ddmin(&input, 10_000, fails);
    assert_eq!(out.minimal, vec![13, 42, 77]);
    assert!(!out.budget_exhausted);
    // 1-minimal: dropping any one part makes it pass.
    for i in 0..out.minimal.len() {
        let mut smaller = out.minimal.clone();
        smaller.remove(i);
        assert!(!fails(&smaller));
    }
}

#[test]
fn ddmin_keeps_one_of_several_sufficient_parts() {
    let input: Vec<u32> = (0..50).collect();
    let out = ddmin(&input, 10_000, |v| v.contains(&5) || v.contains(&40));
    assert!(
        out.minimal == vec![5] || out.minimal == vec![40],
        "{:?}",
        out.minimal
    );
}

#[test]
fn minimize_shrinks_a_schedule_to_its_culprits() {
    let m = minimize(&Culprits, 1).unwrap();
    assert_eq!(m.invariant, "needs_culprits");
    assert_eq!(m.original.len(), 20);
    let ats: Vec<u64> = m.minimal.events.iter().map(|e| e.at).collect();
    assert_eq!(ats, CULPRITS);
    assert!(!m.report.passed());
    assert!(m.report.trace.is_some());
    assert!(m.runs > 3);
}

#[test]
fn minimize_refuses_what_it_cannot_shrink() {
    assert_eq!(
        minimize(&Flaky { fail_every: 1 }, 0),
        Err(MinimizeError::NotSchedulable {
            scenario: "flaky".into()
        })
    );
    let passing = (0..50)
        .find(|&s| ClockAndRng.run(s, &RunOptions::default()).passed())
        .unwrap();
    assert_eq!(
        minimize(&ClockAndRng, passing),
        Err(MinimizeError::Passes {
            scenario: "clock-and-rng".into(),
            seed: passing
        })
    );
}

#[test]
fn cli_minimize_prints_a_schedule_that_replays() {
    let registry = test_registry();
    let out = cli(&registry, "minimize --seed 2 --scenario culprits");
    assert_eq!(out.code, 0, "{}", out.err);
    assert!(out
        .out
        .contains("minimize seed=2 scenario=culprits invariant=needs_culprits"));
    assert!(
        out.out
            .contains("minimal schedule   (3 events) 3:f,11:f,17:f"),
        "{}",
        out.out
    );
    assert!(out.out.contains("replay: cargo run -p keel-sim -- replay --seed 2 --scenario culprits --schedule 3:f,11:f,17:f"));

    let replay = cli(
        &registry,
        "replay --seed 2 --scenario culprits --schedule 3:f,11:f,17:f",
    );
    assert_eq!(replay.code, 1);
    assert!(replay
        .out
        .contains("needs_culprits: all three culprits present"));
    let fewer = cli(
        &registry,
        "replay --seed 2 --scenario culprits --schedule 3:f,17:f",
    );
    assert_eq!(fewer.code, 0);
    let none = cli(
        &registry,
        "replay --seed 2 --scenario culprits --schedule none",
    );
    assert_eq!(none.code, 0);
}

#[test]
fn cli_replay_refuses_bad_schedules() {
    let registry = test_registry();
    let out = cli(
        &registry,
        "replay --seed 2 --scenario culprits --schedule 30:f",
    );
    assert_eq!(out.code, 2);
    assert!(out.err.contains("fault at decision 30"), "{}", out.err);
    let out = cli(&registry, "replay --seed 2 --scenario flaky --schedule 1:f");
    assert_eq!(out.code, 2);
    assert!(
        out.err.contains("cannot run an explicit fault schedule"),
        "{}",
        out.err
    );
    let out = cli(&registry, "minimize --seed 2 --scenario flaky");
    assert_eq!(out.code, 2);
}
