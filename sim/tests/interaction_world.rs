//! Campaign-level tests of the Interaction world: the swarm passes on a fixed seed range and
//! covers every fault kind and crash boundary, the same seed gives the same trace hash, the
//! crash matrix passes, and the world runs on tokio too.

use keel_sim::interaction_world::{
    matrix_case, run_on_madsim, run_on_tokio, scenarios, swarm_run, Spec, INTERACTION_BOUNDARIES, INTERACTION_FAULT_KINDS,
    MATRIX_FILES,
};
use keel_sim::world::{RunOptions, RunReport, Scenario};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

/// Seeds of this swarm campaign: enough for every declared kind to fire (each run is a full
/// async Engine; about 5 s at the test profile's opt-level 1).
const SEEDS: u64 = 200;

fn campaign(seeds: std::ops::Range<u64>, run: impl Fn(u64) -> RunReport + Sync) -> Vec<RunReport> {
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).clamp(1, 2) as u64;
    let all: Vec<u64> = seeds.collect();
    let mut reports: Vec<RunReport> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let mine: Vec<u64> = all.iter().copied().filter(|seed| seed % threads == t).collect();
                let run = &run;
                s.spawn(move || mine.into_iter().map(run).collect::<Vec<_>>())
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("a campaign thread panicked")).collect()
    });
    reports.sort_by_key(|r| r.seed);
    reports
}

fn describe_failures(reports: &[RunReport]) -> String {
    let failing: Vec<&RunReport> = reports.iter().filter(|r| !r.passed()).collect();
    let mut text = format!("{} of {} seeds violated invariants\n", failing.len(), reports.len());
    for r in failing.iter().take(6) {
        text.push_str(&format!(
            "{r}\n  replay: KEEL_SEED={} KEEL_SCENARIO={} cargo test -p keel-sim --test interaction_world -- --ignored --nocapture replay_one\n",
            r.seed, r.scenario
        ));
    }
    text
}

#[test]
fn swarm_passes_and_covers_every_fault_kind_and_crash_boundary() {
    let started = Instant::now();
    let reports = campaign(0..SEEDS, |seed| swarm_run(seed, &RunOptions::default()));
    let elapsed = started.elapsed();
    assert!(reports.iter().all(RunReport::passed), "{}", describe_failures(&reports));
    let mut faults: BTreeMap<String, u64> = BTreeMap::new();
    let mut points: BTreeMap<String, u64> = BTreeMap::new();
    let mut outcomes: BTreeMap<String, u64> = BTreeMap::new();
    let mut checks = 0;
    for r in &reports {
        for (k, v) in &r.faults_fired {
            *faults.entry(k.clone()).or_insert(0) += v;
        }
        for (k, v) in &r.crash_points_hit {
            *points.entry(k.clone()).or_insert(0) += v;
        }
        *outcomes.entry(r.outcome.split(':').next().unwrap_or("").to_owned()).or_insert(0) += 1;
        checks += r.invariants_checked;
    }
    println!("{SEEDS} seeds in {elapsed:?}, {checks} invariant checks\noutcomes {outcomes:?}\nfaults {faults:?}\ncrash points {points:?}");
    let missing: Vec<&&str> = INTERACTION_FAULT_KINDS.iter().filter(|k| !faults.contains_key(**k)).collect();
    assert!(missing.is_empty(), "fault kinds never fired: {missing:?}");
    let hit: BTreeSet<&str> = points.keys().filter_map(|k| k.split('.').next()).collect();
    let unhit: Vec<&&str> = INTERACTION_BOUNDARIES.iter().filter(|b| !hit.contains(**b)).collect();
    assert!(unhit.is_empty(), "crash boundaries never hit: {unhit:?}");
    let completed = outcomes.get("completed").copied().unwrap_or(0);
    assert!(completed * 2 >= SEEDS, "only {completed} of {SEEDS} runs completed: {outcomes:?}");
}

#[test]
fn equal_seeds_give_equal_traces_and_different_seeds_differ() {
    let first = campaign(0..20, |seed| swarm_run(seed, &RunOptions::default()));
    let second = campaign(0..20, |seed| swarm_run(seed, &RunOptions::default()));
    for (a, b) in first.iter().zip(&second) {
        assert_eq!(a.trace_hash, b.trace_hash, "seed {} is not deterministic", a.seed);
        assert_eq!((&a.faults_fired, &a.outcome, a.invariants_checked), (&b.faults_fired, &b.outcome, b.invariants_checked));
    }
    let distinct: BTreeSet<[u8; 32]> = first.iter().map(|r| r.trace_hash).collect();
    assert_eq!(distinct.len(), first.len(), "different seeds produced identical traces");
    let kept = swarm_run(3, &RunOptions { keep_trace: true });
    assert_eq!(kept.trace_hash, first[3].trace_hash, "keeping lines changes the hash");
    assert!(kept.trace.is_some_and(|t| !t.is_empty()));
}

/// A run that keeps no trace or timeline skips building their labels (and the dispatch
/// wrapper skips decoding settlements for the timeline): everything a report judges must be
/// what the same run keeping both reports.
#[test]
fn keeping_the_trace_and_timeline_changes_nothing_a_run_reports() {
    let dropped = campaign(0..24, |seed| swarm_run(seed, &RunOptions { keep_trace: false }));
    let kept = campaign(0..24, |seed| swarm_run(seed, &RunOptions { keep_trace: true }));
    for (d, k) in dropped.iter().zip(&kept) {
        assert_eq!(d.trace_hash, k.trace_hash, "seed {}", d.seed);
        assert_eq!(
            (&d.outcome, &d.faults_fired, &d.crash_points_hit, &d.violations, d.invariants_checked, &d.swarm),
            (&k.outcome, &k.faults_fired, &k.crash_points_hit, &k.violations, k.invariants_checked, &k.swarm),
            "seed {}",
            d.seed
        );
        assert!(d.timeline.is_none() && k.timeline.as_ref().is_some_and(|t| !t.events.is_empty()), "seed {}", d.seed);
    }
}

fn scenario(name: &str) -> Box<dyn Scenario> {
    scenarios().into_iter().find(|s| s.name() == name).unwrap_or_else(|| panic!("no scenario {name}"))
}

#[test]
fn the_crash_matrix_passes_its_first_cases() {
    let matrix = scenario("interaction-crash-matrix");
    // Every file at its first commits, both faults.
    let seeds = 0..(MATRIX_FILES.len() as u64 * 2 * 3);
    let reports = campaign(seeds, |seed| matrix.run(seed, &RunOptions::default()));
    assert!(reports.iter().all(RunReport::passed), "{}", describe_failures(&reports));
    let files: BTreeSet<usize> = reports.iter().map(|r| matrix_case(r.seed).0).collect();
    assert_eq!(files.len(), MATRIX_FILES.len());
    assert!(reports.iter().all(|r| r.faults_fired.contains_key("host.crash")), "every case stops a writer");
}

#[test]
fn the_same_world_runs_on_tokio() {
    let spec = keel_sim::interaction_world::decode_bytes("tool-loop", MATRIX_FILES[0].1.as_bytes()).unwrap();
    let tokio = run_on_tokio(&spec, 5, &RunOptions::default());
    assert!(tokio.passed(), "{tokio}");
    let madsim = run_on_madsim(&spec, 5, &RunOptions::default());
    assert!(madsim.passed(), "{madsim}");
    assert_eq!(tokio.outcome, madsim.outcome, "both runtimes end the scenario the same way");
    let minimal = run_on_tokio(&Spec::minimal("hello"), 1, &RunOptions::default());
    assert!(minimal.passed(), "{minimal}");
}

#[test]
fn scenario_names_are_unique_and_registered() {
    let registry = keel_sim::scenarios::builtin_registry();
    for name in ["interaction-swarm", "interaction-crash-matrix"] {
        assert!(registry.get(name).is_some(), "{name} is not registered");
    }
}

/// `KEEL_SEED=17 KEEL_SCENARIO=interaction-swarm cargo test -p keel-sim --test interaction_world -- --ignored --nocapture replay_one`
#[test]
#[ignore]
fn replay_one() {
    let seed: u64 = std::env::var("KEEL_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0);
    let name = std::env::var("KEEL_SCENARIO").unwrap_or_else(|_| "interaction-swarm".into());
    let r = scenario(&name).run(seed, &RunOptions { keep_trace: true });
    for line in r.trace.iter().flatten() {
        println!("{line}");
    }
    if name == "interaction-swarm" {
        println!("{:#?}", keel_sim::interaction_world::generate::generate(seed).0);
    }
    println!("{r}");
}

/// `restore_decodes_alike` judges a held head against the decoding of its stored bytes: a
/// head and its own decoding agree, two different heads of a real run differ record by record,
/// and a head with no acknowledged cut of the same writer and digest is not judged.
#[test]
fn restore_decodes_alike_compares_a_held_head_with_its_decoding() {
    use keel::kernel::snapshot::TreeSnapshot;
    use keel_sim::interaction_world::oracle::{differences, restore_decodes_alike};
    use std::sync::Arc;
    let (spec, _) = keel_sim::interaction_world::generate::generate(3);
    let outcome = keel_sim::interaction_world::run_outcome_on_madsim(&spec, &spec.name, 3, &RunOptions { keep_trace: false });
    let cuts: Vec<TreeSnapshot> = outcome.acknowledged_cuts().iter().map(|b| TreeSnapshot::decode(b).expect("decodes")).collect();
    assert!(cuts.len() >= 3, "seed 3 makes several commits");
    let (first, last) = (&cuts[0], &cuts[cuts.len() - 1]);
    assert!(differences(first, first).is_empty());
    let differ = differences(first, last);
    assert!(differ.iter().any(|d| d.starts_with("record ")), "the first and last heads differ in records: {differ:?}");
    let decoded: Vec<Option<TreeSnapshot>> = cuts.iter().cloned().map(Some).collect();
    let (violations, checks) = restore_decodes_alike(&[Arc::new(last.clone())], &decoded);
    assert!(violations.is_empty() && checks == 1, "{violations:?} {checks}");
    let (violations, checks) = restore_decodes_alike(&[Arc::new(last.clone())], &decoded[..1]);
    assert!(violations.is_empty() && checks == 0, "another cut is not the head's decoding");
}
