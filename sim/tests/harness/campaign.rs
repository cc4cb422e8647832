use std::sync::Arc;

use keel_sim::campaign::{Campaign, CampaignError, Origin, ProgressStyle};
use keel_sim::limits::{MAX_KEPT_FAILURES, MAX_PRINTED_FAILURES};
use keel_sim::scenarios::clock_and_rng::TASK_ABORT;
use keel_sim::scenarios::ClockAndRng;
use keel_sim::world::{Scenario, PANIC_INVARIANT};

use crate::support::{cli, test_registry, without_timing, Flaky, Panicky};

fn quiet(c: Campaign) -> keel_sim::campaign::CampaignSummary {
    c.progress(ProgressStyle::Off)
        .run(&mut std::io::sink())
        .unwrap()
}

#[test]
fn self_test_passes_200_seeds() {
    let s = quiet(
        Campaign::new(vec![Arc::new(ClockAndRng)])
            .seeds(0, 200)
            .jobs(2),
    );
    assert!(s.all_passed(), "{s}");
    assert_eq!((s.runs, s.passed, s.failed), (200, 200, 0));
    assert!(
        s.faults_fired().get(TASK_ABORT).is_some_and(|&n| n > 0),
        "{s}"
    );
    assert!(s.invariants_checked > 200 * 3);
    assert!(s.crash_points_hit().is_empty());
}

fn mixed(jobs: usize) -> keel_sim::campaign::CampaignSummary {
    let scenarios: Vec<Arc<dyn Scenario>> = vec![
        Arc::new(ClockAndRng),
        Arc::new(Flaky { fail_every: 7 }),
        Arc::new(Panicky),
    ];
    let regressions: Vec<(Arc<dyn Scenario>, u64)> = vec![
        (Arc::new(Flaky { fail_every: 7 }), 700),
        (Arc::new(ClockAndRng), 3),
    ];
    quiet(
        Campaign::new(scenarios)
            .seeds(10, 60)
            .jobs(jobs)
            .replay_regressions_first(regressions),
    )
}

#[test]
fn summary_is_identical_for_one_and_two_jobs() {
    let (one, two) = (mixed(1), mixed(2));
    assert_eq!(one.render_results(), two.render_results());
    assert_eq!(one.failures, two.failures);
    assert_eq!(one.runs, 2 + 60 * 3);
    assert!(one.failed > 0);
    // And through the CLI, timing lines aside.
    let registry = test_registry();
    let line =
        "run --seeds 40 --from 3 --scenario clock-and-rng --scenario flaky --scenario panicky";
    let a = cli(&registry, &format!("{line} --jobs 1"));
    let b = cli(&registry, &format!("{line} --jobs 2"));
    assert_eq!(a.code, 1);
    assert_eq!(without_timing(&a.out), without_timing(&b.out));
}

#[test]
fn failures_are_ordered_regressions_first_then_by_seed() {
    let s = mixed(2);
    let order: Vec<(Origin, u64, String)> = s
        .failures
        .iter()
        .map(|f| (f.origin, f.report.seed, f.report.scenario.clone()))
        .collect();
    assert_eq!(order[0], (Origin::Regression, 700, "flaky".to_string()));
    assert_eq!(s.regression_runs, 2);
    assert_eq!(s.regression_failed, 1);
    let seeds: Vec<u64> = order[1..].iter().map(|o| o.1).collect();
    let mut sorted = seeds.clone();
    sorted.sort();
    assert_eq!(seeds, sorted);
}

#[test]
fn tallies_add_up() {
    let s = quiet(
        Campaign::new(vec![Arc::new(Flaky { fail_every: 5 })])
            .seeds(0, 10)
            .jobs(2),
    );
    assert_eq!(s.failed, 2); // seeds 0 and 5
    assert_eq!(s.passed, 8);
    assert_eq!(s.invariants_checked, 20);
    assert_eq!(
        s.faults_fired().get("fault_a"),
        Some(&(0..10).map(|x| x % 3).sum::<u64>())
    );
    assert_eq!(s.crash_points_hit().get("after_pending"), Some(&5));
}

#[test]
fn a_panicking_seed_fails_without_ending_the_campaign() {
    let s = quiet(Campaign::new(vec![Arc::new(Panicky)]).seeds(0, 8).jobs(2));
    assert_eq!(s.runs, 8);
    assert_eq!(s.failed, 2); // seeds 1 and 5
    let f = &s.failures[0].report;
    assert_eq!(f.seed, 1);
    assert_eq!(f.violations[0].invariant, PANIC_INVARIANT);
    assert!(
        f.violations[0]
            .detail
            .starts_with("synthetic panic at seed 1 (at sim/tests/harness/support.rs:"),
        "{}",
        f.violations[0].detail
    );
}

#[test]
fn cli_prints_fail_line_then_replay_command_and_exits_nonzero() {
    let out = cli(
        &test_registry(),
        "run --seeds 10 --from 1 --scenario flaky --jobs 2",
    );
    assert_eq!(out.code, 1, "{}{}", out.out, out.err);
    let lines: Vec<&str> = out.out.lines().collect();
    let at = lines.iter().position(|l| l.starts_with("FAIL")).unwrap();
    assert_eq!(
        lines[at],
        "FAIL seed=7 scenario=flaky invariant=synthetic: seed 7 is a multiple of 7"
    );
    assert_eq!(
        lines[at + 1],
        "  cargo run -p keel-sim -- replay --seed 7 --scenario flaky"
    );
    assert_eq!(lines[at + 2], "  swarm: p=2");
    assert_eq!(lines.iter().filter(|l| l.starts_with("FAIL")).count(), 1);
    for want in [
        "runs           10",
        "passed         9",
        "failed         1",
        "faults fired",
        "  fault_a",
        "crash boundaries hit",
        "  after_pending  5",
        "wall time",
        "runs/s",
    ] {
        assert!(out.out.contains(want), "missing {want:?} in\n{}", out.out);
    }
}

#[test]
fn cli_passing_campaign_exits_zero() {
    let out = cli(
        &test_registry(),
        "run --seeds 20 --scenario clock-and-rng --check",
    );
    assert_eq!(out.code, 0, "{}{}", out.out, out.err);
    assert!(out.out.contains("determinism    checked (every run twice)"));
    assert!(!out.out.contains("FAIL"));
}

#[test]
fn only_the_lowest_failures_are_kept_whatever_the_jobs() {
    let n = MAX_KEPT_FAILURES as u64 + 100;
    let run = |jobs| {
        quiet(
            Campaign::new(vec![Arc::new(Flaky { fail_every: 1 })])
                .seeds(0, n)
                .jobs(jobs),
        )
    };
    let (one, two) = (run(1), run(2));
    assert_eq!(one.failed, n);
    assert_eq!(one.failures.len(), MAX_KEPT_FAILURES);
    assert_eq!(
        one.failures.last().unwrap().report.seed,
        MAX_KEPT_FAILURES as u64 - 1
    );
    assert_eq!(one.render_results(), two.render_results());
    let printed = MAX_PRINTED_FAILURES as u64;
    assert!(one.render_results().contains(&format!(
        "... and {} more failing runs (the first {printed} are printed)",
        n - printed
    )));
    assert_eq!(
        one.render_results().lines().filter(|l| l.starts_with("FAIL")).count(),
        MAX_PRINTED_FAILURES
    );
    assert!(one
        .render_results()
        .contains(&format!("broken invariants (failing runs)\n  synthetic  {n}\n")));
}

#[test]
fn fail_fast_stops_at_the_same_first_failure_whatever_the_jobs() {
    let run = |jobs| {
        quiet(
            Campaign::new(vec![Arc::new(ClockAndRng), Arc::new(Flaky { fail_every: 7 })])
                .seeds(1, 40)
                .jobs(jobs)
                .fail_fast(true),
        )
    };
    let (one, two) = (run(1), run(3));
    // Seed 7 of `flaky` is run 13 (seeds 1..7 of two scenarios, then clock-and-rng 7).
    assert_eq!(one.runs, 14);
    assert_eq!(one.failed, 1);
    assert!(one.stopped_at_first_failure);
    assert_eq!(one.failures[0].report.seed, 7);
    assert_eq!(one.render_results(), two.render_results());
    assert!(one
        .render_results()
        .contains("stopped        at the first failing run (--fail-fast)"));
    let all = quiet(
        Campaign::new(vec![Arc::new(Flaky { fail_every: 7 })])
            .seeds(1, 40)
            .fail_fast(false),
    );
    assert_eq!((all.runs, all.failed), (40, 5));
    assert!(!all.stopped_at_first_failure);
}

#[test]
fn the_traces_line_is_the_same_for_any_jobs_and_moves_with_the_seeds() {
    let run = |from, jobs| {
        quiet(
            Campaign::new(vec![Arc::new(ClockAndRng)])
                .seeds(from, 30)
                .jobs(jobs),
        )
        .traces_digest
    };
    assert_eq!(run(0, 1), run(0, 2));
    assert_ne!(run(0, 1), run(1, 1));
}

#[test]
fn bad_campaigns_are_refused() {
    let run = |c: Campaign| c.run(&mut std::io::sink()).err();
    assert_eq!(
        run(Campaign::new(vec![]).seeds(0, 1)),
        Some(CampaignError::NoScenarios)
    );
    assert_eq!(
        run(Campaign::new(vec![Arc::new(ClockAndRng)])
            .seeds(0, 1)
            .jobs(0)),
        Some(CampaignError::ZeroJobs)
    );
    assert_eq!(
        run(Campaign::new(vec![Arc::new(ClockAndRng)]).seeds(u64::MAX, 2)),
        Some(CampaignError::SeedRangeOverflow {
            from: u64::MAX,
            seeds: 2
        })
    );
    assert!(matches!(
        run(Campaign::new(vec![Arc::new(ClockAndRng), Arc::new(Panicky)]).seeds(0, u64::MAX)),
        Some(CampaignError::TooManyRuns { .. })
    ));
}

#[test]
fn zero_seeds_runs_only_regressions() {
    let regs: Vec<(Arc<dyn Scenario>, u64)> = vec![(Arc::new(ClockAndRng), 9)];
    let s = quiet(
        Campaign::new(vec![Arc::new(ClockAndRng)])
            .seeds(0, 0)
            .replay_regressions_first(regs),
    );
    assert_eq!((s.runs, s.regression_runs), (1, 1));
}

/// The self-test with its trace hash and outcome written into a violation, so a summary shows
/// every run's hash: equal summaries then mean equal hashes whichever worker ran a seed.
struct ExposeHashes;

impl Scenario for ExposeHashes {
    fn name(&self) -> &str {
        "expose-hashes"
    }
    fn run(&self, seed: u64, options: &keel_sim::world::RunOptions) -> keel_sim::world::RunReport {
        let mut r = ClockAndRng.run(seed, options);
        let detail = format!("{} {}", r.trace_hash_hex(), r.outcome);
        r.violations
            .push(keel_sim::world::Violation::new("hash", detail));
        r
    }
}

#[test]
fn self_test_hashes_do_not_depend_on_the_worker_thread() {
    let run = |jobs| {
        quiet(
            Campaign::new(vec![Arc::new(ExposeHashes)])
                .seeds(0, 60)
                .jobs(jobs),
        )
    };
    let (one, two) = (run(1), run(2));
    assert_eq!(one.failed, 60);
    assert_eq!(one.render_results(), two.render_results());
    let again = run(2);
    assert_eq!(two.render_results(), again.render_results());
}
