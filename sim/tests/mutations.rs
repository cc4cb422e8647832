//! Mutation checks (feature `mutations`): the default `cargo test` campaign — the same
//! scenarios, seed count and `--check` — run against a deliberately broken keel must fail, for
//! every mutation `keel::mutation` knows. Each test names the invariant that caught its
//! mutation and the run it stopped at (`--fail-fast`: the first failing run, in run order).
//!
//! `cargo test -p keel-sim --features mutations --test mutations -- --nocapture`

use keel::mutation::Mutation;
use keel_sim::campaign::ProgressStyle;
use keel_sim::cli::{Cli, EXIT_FAILED};
use keel_sim::limits::TEST_CAMPAIGN_SEEDS;
use keel_sim::schedule::FaultSchedule;
use keel_sim::scenarios::builtin_registry;
use std::path::Path;

/// What the default campaign found under `m`: the first failing run's FAIL lines.
fn first_failure(m: Mutation) -> Vec<String> {
    let registry = builtin_registry();
    let cli = Cli {
        registry: &registry,
        default_regressions: Path::new(env!("CARGO_MANIFEST_DIR")).join("regressions"),
        progress: ProgressStyle::Off,
    };
    let line = format!("run --seeds {TEST_CAMPAIGN_SEEDS} --check --fail-fast --mutation {}", m.name());
    let args: Vec<String> = line.split_whitespace().map(String::from).collect();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = cli.main(&args, &mut out, &mut err);
    let (out, err) = (String::from_utf8_lossy(&out), String::from_utf8_lossy(&err));
    assert_eq!(code, EXIT_FAILED, "mutation {} survived the default campaign:\n{out}\n{err}", m.name());
    assert!(out.contains(&format!("mutation       {} ", m.name())), "{out}");
    assert!(out.contains("stopped        at the first failing run"), "{out}");
    let fails: Vec<String> = out.lines().filter(|l| l.starts_with("FAIL ")).map(String::from).collect();
    println!("{}: caught by\n  {}", m.name(), fails.join("\n  "));
    fails
}

/// The invariants named by `fails` (`FAIL seed=.. scenario=.. invariant=NAME: ...`).
fn invariants(fails: &[String]) -> Vec<String> {
    fails
        .iter()
        .filter_map(|l| l.split(" invariant=").nth(1))
        .filter_map(|rest| rest.split(':').next())
        .map(String::from)
        .collect()
}

#[test]
fn every_mutation_has_a_test_below() {
    let tested = [
        Mutation::DispatchBeforePending,
        Mutation::FoldInCompletionOrder,
        Mutation::RedispatchUnknown,
        Mutation::SteerAppliedTwice,
        Mutation::DropUnknownOnCompaction,
        Mutation::DropExternalOnCompaction,
        Mutation::RetiredChildNotFound,
        Mutation::BudgetGrantedTwice,
    ];
    assert_eq!(Mutation::ALL, tested, "a new mutation needs its own `caught_by` test");
}

/// Asserts the first failing run under `m` broke one of `expected` (the invariants that
/// guard the rule `m` breaks).
fn caught_by(m: Mutation, expected: &[&str]) {
    let found = invariants(&first_failure(m));
    assert!(
        found.iter().any(|f| expected.contains(&f.as_str())),
        "{} was caught, but by {found:?}, none of {expected:?}",
        m.name()
    );
}

#[test]
fn dispatch_before_pending_is_caught() {
    // Only the async Engine has this hook: the Interaction world's recorder sees the call
    // start before its writer's pending boundary is acknowledged.
    caught_by(Mutation::DispatchBeforePending, &["pending_before_dispatch", "kernel_2"]);
}

#[test]
fn fold_in_completion_order_is_caught() {
    caught_by(Mutation::FoldInCompletionOrder, &["results_in_call_order"]);
}

#[test]
fn redispatch_unknown_is_caught() {
    caught_by(
        Mutation::RedispatchUnknown,
        &["a.pending_before_dispatch", "b.no_double_dispatch", "pending_before_dispatch", "no_double_dispatch"],
    );
}

#[test]
fn steer_applied_twice_is_caught() {
    caught_by(Mutation::SteerAppliedTwice, &["steers_once_in_order"]);
}

#[test]
fn drop_unknown_on_compaction_is_caught() {
    // A child that ended with an Unknown is retired anyway: the Unknown leaves the cut
    // without a resolved boundary (kernel invariant 4 across heads; the Interaction world's
    // own stickiness check).
    caught_by(Mutation::DropUnknownOnCompaction, &["kernel_4", "unknown_sticky", "c.unknown_sticky"]);
}

#[test]
fn drop_external_on_compaction_is_caught() {
    // Mailbox compaction drops consumed external Signals too: the record that makes a
    // redelivery a duplicate or a conflict is gone (kernel invariant 11 across heads, the
    // kernel world's mailbox history; a redelivery admitted again would fail the hosts'
    // dedup checks).
    caught_by(
        Mutation::DropExternalOnCompaction,
        &["kernel_11", "mailbox_monotone", "signal_admission", "signal_dedupe", "signal_conflict_refused"],
    );
}

#[test]
fn retired_child_not_found_is_caught() {
    // A command to a retired child is refused as if the id never existed: the kernel world's
    // probe of every retired child after the run expects `ProcessFinished`.
    caught_by(Mutation::RetiredChildNotFound, &["retired_addressing"]);
}

#[test]
fn budget_granted_twice_is_caught() {
    // A run that asked for more budget holds twice the grant: more than the host offered
    // (and, once spent, past declared + granted).
    caught_by(Mutation::BudgetGrantedTwice, &["budget_respected"]);
}

#[test]
fn the_printed_replay_command_reproduces_the_failure() {
    // The one-line command of the first failure, run through the binary this test built (the
    // same code `cargo run -p keel-sim --features mutations --` runs).
    let registry = builtin_registry();
    let cli = Cli {
        registry: &registry,
        default_regressions: Path::new(env!("CARGO_MANIFEST_DIR")).join("regressions"),
        progress: ProgressStyle::Off,
    };
    let args: Vec<String> =
        "run --seeds 20 --scenario interaction-swarm --fail-fast --mutation fold_in_completion_order --no-regressions"
            .split_whitespace()
            .map(String::from)
            .collect();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    assert_eq!(cli.main(&args, &mut out, &mut err), EXIT_FAILED);
    let out = String::from_utf8_lossy(&out);
    let fail = out.lines().find(|l| l.starts_with("FAIL ")).expect("a FAIL line");
    let command = out
        .lines()
        .find_map(|l| l.strip_prefix("  cargo run "))
        .expect("a replay command");
    let prefix = "-p keel-sim --features mutations -- ";
    assert!(command.starts_with(prefix), "{command}");
    let replay: Vec<&str> = command[prefix.len()..].split_whitespace().collect();
    assert!(replay.ends_with(&["--mutation", "fold_in_completion_order"]), "{command}");
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_keel-sim"))
        .args(&replay)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
        .output()
        .expect("the keel-sim binary runs");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(run.status.code(), Some(EXIT_FAILED), "{replay:?}\n{stdout}\n{}", String::from_utf8_lossy(&run.stderr));
    let invariant = fail.split(" invariant=").nth(1).and_then(|r| r.split(':').next()).unwrap();
    assert!(stdout.contains(&format!("  {invariant}: ")), "replay did not break {invariant}:\n{stdout}");
    // Without the mutation the same seed passes: the failure is the mutation's.
    let clean: Vec<&str> = replay[..replay.len() - 2].to_vec();
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_keel-sim")).args(&clean).output().unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", String::from_utf8_lossy(&run.stdout));
}

/// Runs the `keel-sim` binary this test built with `args` (from the repository root, like
/// `cargo run`), returning its exit code and stdout.
fn keel_sim(args: &[&str]) -> (Option<i32>, String) {
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_keel-sim"))
        .args(args)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
        .output()
        .expect("the keel-sim binary runs");
    let out = String::from_utf8_lossy(&run.stdout).into_owned();
    (run.status.code(), format!("{out}{}", String::from_utf8_lossy(&run.stderr)))
}

/// The number in `(N events)` on the line starting with `label`.
fn events(out: &str, label: &str) -> usize {
    let line = out.lines().find(|l| l.starts_with(label)).unwrap_or_else(|| panic!("no `{label}` in\n{out}"));
    let n = line.split('(').nth(1).and_then(|r| r.split(' ').next()).unwrap();
    n.parse().unwrap()
}

/// How many failing seeds `minimizes` shrinks: enough that one of them carries a fault its
/// failure does not need, few enough to stay a quick test.
const MINIMIZED_SEEDS: usize = 4;

/// Under `m`: the first failing seeds of the default range that fire at least two faults are
/// each minimized to a schedule that (a) still breaks the same invariant when the printed
/// replay line is run, and (b) is 1-minimal: dropping any one of its faults no longer breaks
/// that invariant. At least one of them must come out strictly smaller than it went in (a seed
/// whose every fault is needed is a correct answer, not a shrink, so no single seed is pinned).
fn minimizes(scenario: &str, m: Mutation) {
    let registry = builtin_registry();
    let s = registry.get(scenario).unwrap();
    let schedulable = s.schedulable().expect("the scenario replays fault schedules");
    let seeds: Vec<u64> = (0..TEST_CAMPAIGN_SEEDS)
        .filter(|&seed| {
            keel_sim::mutation::under(Some(m), || {
                !keel_sim::world::run_guarded(scenario, seed, || s.run(seed, &Default::default())).passed()
                    && schedulable.schedule_of(seed).len() >= 2
            })
        })
        .take(MINIMIZED_SEEDS)
        .collect();
    assert!(!seeds.is_empty(), "no seed of {scenario} fails under {} with two faults", m.name());
    let mut shrunk = Vec::new();
    for seed in seeds {
        let seed_text = seed.to_string();
        let (code, out) = keel_sim(&["minimize", "--seed", &seed_text, "--scenario", scenario, "--mutation", m.name()]);
        assert_eq!(code, Some(0), "{out}");
        assert!(!out.contains("run budget spent"), "{scenario} seed {seed}: the minimizer ran out of runs:\n{out}");
        let (original, minimal) = (events(&out, "original schedule"), events(&out, "minimal schedule"));
        assert!(minimal <= original, "{scenario} seed {seed}: the schedule grew:\n{out}");
        let invariant = out.lines().next().and_then(|l| l.split("invariant=").nth(1)).unwrap().to_owned();
        let command = out.lines().find_map(|l| l.strip_prefix("replay: ")).expect("a replay line");
        let args = command.strip_prefix("cargo run -p keel-sim --features mutations -- ").expect(command);
        let args: Vec<&str> = args.split_whitespace().collect();
        let (code, replayed) = keel_sim(&args);
        assert_eq!(code, Some(EXIT_FAILED), "{command}\n{replayed}");
        assert!(replayed.contains(&format!("  {invariant}: ")), "{command} did not break {invariant}:\n{replayed}");
        // 1-minimal: every fault left in the schedule is needed for this invariant.
        let schedule_text = args.iter().skip_while(|&&a| a != "--schedule").nth(1).expect("a --schedule");
        let schedule: FaultSchedule = schedule_text.parse().expect("the printed schedule parses");
        for drop in 0..schedule.len() {
            let mut events = schedule.events.clone();
            let dropped = events.remove(drop);
            let fewer = FaultSchedule::new(events);
            let still_breaks = keel_sim::mutation::under(Some(m), || {
                keel_sim::world::run_guarded_result(scenario, seed, || {
                    schedulable.run_with_schedule(seed, &fewer, &Default::default())
                })
                .is_ok_and(|r| r.violations.iter().any(|v| v.invariant == invariant))
            });
            assert!(
                !still_breaks,
                "{scenario} seed {seed}: {invariant} still breaks without {}:{}, so {schedule} is not minimal",
                dropped.at,
                dropped.kind
            );
        }
        println!("{scenario} seed {seed}: {original} -> {minimal} faults ({invariant})");
        if minimal < original {
            shrunk.push(seed);
        }
    }
    assert!(!shrunk.is_empty(), "{scenario}: none of the minimized seeds lost a fault");
}

#[test]
fn a_kernel_swarm_failure_minimizes_to_fewer_faults_that_still_fail() {
    minimizes("kernel-swarm", Mutation::RedispatchUnknown);
}

#[test]
fn an_interaction_swarm_failure_minimizes_to_fewer_faults_that_still_fail() {
    minimizes("interaction-swarm", Mutation::RedispatchUnknown);
}

/// The user-facing harness under model `Retry` (re-issued model calls are allowed there, so a
/// correct agent passes) still catches a real bug: a steer applied twice.
#[test]
fn a_model_retry_campaign_still_catches_a_steer_applied_twice() {
    use keel::prelude::*;
    use keel_sim::harness::Campaign;
    let agent = || {
        let lookup = tool_fn("lookup", "Looks a key up.", r#"{"type":"object"}"#, |_| async { Ok("value".to_string()) });
        Agent::builder("retry-agent")
            .version("1")
            .tool_with(lookup, ToolOptions::new().idempotent())
            .on_model_unknown(UnknownPolicy::Retry)
            .max_model_calls(4)
    };
    let script = || ScriptedModel::new().call_tool("lookup", "{}").then_text("done");
    let campaign = || Campaign::new(agent, script()).name("retry-mutated").steer_at(1, "hurry").no_regressions();
    // `run_one` runs on this thread, where the scoped mutation is in effect.
    let failed = keel::mutation::scoped(Some(Mutation::SteerAppliedTwice), || {
        (0..200).map(|seed| campaign().run_one(seed)).find(|r| !r.passed())
    });
    let report = failed.expect("a steer applied twice survived 200 seeds of the Retry campaign");
    assert!(report.violations.iter().any(|v| v.invariant == "steers_once_in_order"), "{report}");
    // Without the mutation the same seed passes.
    assert!(campaign().run_one(report.seed).passed());
}
