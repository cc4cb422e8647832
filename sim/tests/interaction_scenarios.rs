//! Every scenario file in `sim/scenarios/`: (a) its fault-free run passes every invariant and
//! matches its expectations; (b) crashed (and with a lost ack) after each commit of that run,
//! restored and settled from truth, it still passes and ends with the same output. Plus the
//! rejection paths of the file format.

use keel_sim::interaction_world::spec::CommitFaultKind;
use keel_sim::interaction_world::{crash_after_clean, decode_bytes, load_file, run_outcome_on_madsim, Spec, SpecFileError};
use keel_sim::world::{RunOptions, RunReport};
use std::path::PathBuf;

fn scenario_files() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("scenarios/ exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
}

fn specs() -> Vec<Spec> {
    scenario_files().iter().map(|p| load_file(p).unwrap_or_else(|e| panic!("{e}"))).collect()
}

fn describe(r: &RunReport) -> String {
    format!("{r}\n  replay: KEEL_FILE={} KEEL_SEED={} cargo test -p keel-sim --test interaction_scenarios -- --ignored --nocapture replay_file", r.scenario, r.seed)
}

#[test]
fn every_file_passes_without_faults() {
    let specs = specs();
    assert!(specs.len() >= 5, "only {} scenario files", specs.len());
    let mut failures = Vec::new();
    for spec in &specs {
        let out = run_outcome_on_madsim(spec, &spec.name, 1, &RunOptions::default());
        println!("{:<40} {}", spec.name, out.report.outcome);
        if !out.report.passed() {
            failures.push(describe(&out.report));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Runs `jobs` on two threads (every run is independent and single-threaded).
fn parallel<T: Send, R: Send>(jobs: Vec<T>, run: impl Fn(T) -> R + Sync) -> Vec<R> {
    let mut halves: [Vec<(usize, T)>; 2] = [Vec::new(), Vec::new()];
    for (i, j) in jobs.into_iter().enumerate() {
        halves[i % 2].push((i, j));
    }
    let run = &run;
    let mut out: Vec<(usize, R)> = std::thread::scope(|s| {
        let handles: Vec<_> = halves.into_iter().map(|h| s.spawn(move || h.into_iter().map(|(i, j)| (i, run(j))).collect::<Vec<_>>())).collect();
        handles.into_iter().flat_map(|h| h.join().expect("a worker panicked")).collect()
    });
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, r)| r).collect()
}

#[test]
fn every_file_survives_every_commit_fault_at_every_commit() {
    let specs: Vec<Spec> = specs().into_iter().filter(|s| s.faults == Default::default()).collect();
    let cleans = parallel(specs.iter().collect(), |spec| run_outcome_on_madsim(spec, &spec.name, 1, &RunOptions::default()));
    let mut cases = Vec::new();
    for (spec, clean) in specs.iter().zip(&cleans) {
        // Every commit under every commit fault: a crash after it, its acknowledgement lost,
        // and the commit failing before it is stored (about 1,500 runs, a few seconds).
        for commit in 0..clean.commits {
            for fault in CommitFaultKind::ALL {
                cases.push((spec, clean, commit, fault));
            }
        }
    }
    let runs = cases.len();
    let reports = parallel(cases, |(spec, clean, commit, fault)| {
        let r = crash_after_clean(spec, clean, &spec.name, 1, commit, fault, &RunOptions::default());
        (spec.name.clone(), commit, fault, r)
    });
    let mut points = std::collections::BTreeSet::new();
    let mut failures = Vec::new();
    for (name, commit, fault, r) in &reports {
        points.extend(r.crash_points_hit.keys().filter_map(|k| k.split('.').next().map(str::to_owned)));
        if !r.passed() {
            failures.push(format!("{name} at commit {commit} ({}): {}", fault.as_str(), describe(r)));
        }
    }
    println!("{runs} crash runs; boundaries crashed: {points:?}");
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.iter().take(8).cloned().collect::<Vec<_>>().join("\n"));
    for b in ["start", "child_start", "signals", "pending", "settled", "resolved", "progress", "parked", "terminal"] {
        assert!(points.contains(b), "no file crashed at {b}: {points:?}");
    }
}

/// Compaction changes what a cut keeps, never what a host sees: every fault-free file ends
/// with the same summary (status, output, failure, model calls) and the same number of
/// commits with compaction switched off, and some file really retired a child (its final
/// cut is smaller than the uncompacted one).
#[test]
fn every_file_ends_alike_without_compaction() {
    use keel::kernel::snapshot::TreeSnapshot;
    let specs: Vec<Spec> = specs().into_iter().filter(|s| s.faults == Default::default()).collect();
    let pairs = parallel(specs.iter().collect(), |spec| {
        let compacted = run_outcome_on_madsim(spec, &spec.name, 1, &RunOptions::default());
        let mut off = spec.clone();
        off.compaction = false;
        let plain = run_outcome_on_madsim(&off, &spec.name, 1, &RunOptions::default());
        (spec.name.clone(), compacted, plain)
    });
    let mut retired_somewhere = false;
    for (name, compacted, plain) in &pairs {
        assert!(compacted.report.passed() && plain.report.passed(), "{name}: {}
{}", describe(&compacted.report), describe(&plain.report));
        assert_eq!(compacted.summary, plain.summary, "{name}: compaction changed the outcome");
        assert_eq!(compacted.commits, plain.commits, "{name}: compaction changed the commits");
        let last = |o: &keel_sim::interaction_world::RunOutcome| o.acknowledged_cuts().last().and_then(|c| TreeSnapshot::decode(c).ok());
        if let (Some(c), Some(p)) = (last(compacted), last(plain)) {
            if !c.residues().is_empty() {
                retired_somewhere = true;
                assert!(c.bytes().len() < p.bytes().len(), "{name}: a compacted cut is smaller");
            }
            assert!(p.residues().is_empty() && p.processes().iter().all(|p| p.retired.is_empty()), "{name}: compaction was off");
        }
    }
    assert!(retired_somewhere, "no scenario file retired a child");
}

/// Issue 4's "Done when" list, one file per behavior (each is run above, fault-free and
/// crashed after every commit).
#[test]
fn every_issue_behavior_has_a_scenario_file() {
    let names: std::collections::BTreeSet<String> = specs().into_iter().map(|s| s.name).collect();
    let required = [
        "tool-loop",
        "parallel-keys",
        "out-of-order-completion",
        "truncation-length",
        "refusal-with-calls",
        "unknown-tool",
        "invalid-arguments",
        "tool-error",
        "tool-host-failure-unknown",
        "tool-panic-unknown",
        "unknown-left-retained",
        "kill-with-unknowns",
        "model-error",
        "model-host-failure",
        "max-model-calls",
        "input-wait",
        "two-siblings-input-answered-in-reverse",
        "steer-during-model-call",
        "steer-during-tool-batch",
        "steer-during-input-wait",
        "delegates",
        "delegate-failure",
        "validator-rejection",
        "direct-results",
        "deferred-tools",
        "reducer",
        "streaming",
    ];
    let missing: Vec<&str> = required.iter().copied().filter(|n| !names.contains(*n)).collect();
    assert!(missing.is_empty(), "no scenario file for {missing:?}");
}

fn invalid(text: &str) -> (String, String) {
    match decode_bytes("x.json", text.as_bytes()) {
        Err(SpecFileError::Invalid { file, path, reason }) => {
            assert_eq!(file, "x.json");
            (path, reason)
        }
        other => panic!("expected a rejection of {text}, got {other:?}"),
    }
}

const BASE: &str = r#"{"name":"n","user":"u","model":{"turns":[]}}"#;

#[test]
fn the_minimal_file_decodes() {
    let spec = decode_bytes("x.json", BASE.as_bytes()).unwrap();
    assert_eq!(spec.name, "n");
    assert_eq!(spec.user, "u");
}

#[test]
fn unknown_members_are_rejected_with_their_path() {
    let (path, reason) = invalid(r#"{"name":"n","user":"u","model":{"turns":[]},"extra":1}"#);
    assert_eq!(path, "$.extra");
    assert!(reason.contains("unknown member"), "{reason}");
    let (path, _) = invalid(r#"{"name":"n","user":"u","model":{"turns":[{"text":"a","colour":"red"}]}}"#);
    assert_eq!(path, "$.model.turns[0].colour");
    let (path, _) = invalid(r#"{"name":"n","user":"u","model":{"turns":[]},"tools":[{"name":"t","speed":3}]}"#);
    assert_eq!(path, "$.tools[0].speed");
}

#[test]
fn bad_values_are_rejected_with_their_path() {
    let cases: &[(&str, &str)] = &[
        (r#"{"user":"u","model":{"turns":[]}}"#, "$.name"),
        (r#"{"name":"a b","user":"u","model":{"turns":[]}}"#, "$.name"),
        (r#"{"name":"n","user":"","model":{"turns":[]}}"#, "$.user"),
        (r#"{"name":"n","user":"u","model":{"turns":[{"text":"a","finish":"maybe"}]}}"#, "$.model.turns[0].finish"),
        (r#"{"name":"n","user":"u","model":{"turns":[{}]}}"#, "$.model.turns[0]"),
        (r#"{"name":"n","user":"u","model":{"turns":[{"calls":[]}]}}"#, "$.model.turns[0].calls"),
        (r#"{"name":"n","user":"u","model":{"turns":[],"latency_ms":[5,1]}}"#, "$.model.latency_ms"),
        (r#"{"name":"n","user":"u","model":{"turns":[],"mode":"batch"}}"#, "$.model.mode"),
        (r#"{"name":"n","user":"u","model":{"turns":[]},"tools":[{"name":"t","outcome":"explode"}]}"#, "$.tools[0].outcome"),
        (r#"{"name":"n","user":"u","model":{"turns":[]},"tools":[{"name":"t","concurrency":"parallel"}]}"#, "$.tools[0].concurrency"),
        (r#"{"name":"n","user":"u","model":{"turns":[]},"tools":[{"name":"t","pauses":99}]}"#, "$.tools[0].pauses"),
        (r#"{"name":"n","user":"u","model":{"turns":[]},"tools":[{"name":"t"},{"name":"t"}]}"#, "$.tools"),
        (r#"{"name":"n","user":"u","model":{"turns":[]},"tools":[{"name":"t","advertises":["z"]}]}"#, "$.tools"),
        (r#"{"name":"n","user":"u","model":{"turns":[]},"host":[{"at":{"model_call":0},"do":"kill"}]}"#, "$.host[0].at.model_call"),
        (r#"{"name":"n","user":"u","model":{"turns":[]},"host":[{"at":{"model_call":1},"do":"dance"}]}"#, "$.host[0].do"),
        (r#"{"name":"n","user":"u","model":{"turns":[]},"host":[{"at":{"model_call":1},"do":{"steer":{"id":"a b","text":"t"}}}]}"#, "$.host[0].do.steer.id"),
        (r#"{"name":"n","user":"u","model":{"turns":[]},"unknown_policy":"pray"}"#, "$.unknown_policy"),
        (r#"{"name":"n","user":"u","model":{"turns":[]},"faults":{"crash_per_mille":1001}}"#, "$.faults.crash_per_mille"),
        (r#"{"name":"n","user":"u","model":{"turns":[]},"faults":{"at":[{"commit":1,"fault":"meteor"}]}}"#, "$.faults.at[0].fault"),
        (r#"{"name":"n","user":"u","model":{"turns":[]},"expect":{"status":"happy"}}"#, "$.expect.status"),
        (r#"{"name":"n","user":"u","model":{"turns":[]},"max_model_calls":0}"#, "$.max_model_calls"),
        (r#"{"name":"n","user":"u","model":{"turns":[]},"description":null}"#, "$.description"),
        (r#"{"name":"n","user":"u","model":{"turns":[{"calls":[{"id":"c","name":"t","arguments":{},"raw_arguments":"{"}]}]}}"#, "$.model.turns[0].calls[0]"),
    ];
    for (text, want) in cases {
        let (path, reason) = invalid(text);
        assert_eq!(&path, want, "{text}: {reason}");
    }
    assert!(matches!(decode_bytes("x.json", b"{"), Err(SpecFileError::Invalid { .. })));
}

#[test]
fn unreadable_and_oversized_files_are_typed_errors() {
    let missing = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/does-not-exist.json");
    match load_file(&missing) {
        Err(SpecFileError::Read { file, .. }) => assert!(file.contains("does-not-exist.json")),
        other => panic!("{other:?}"),
    }
    let dir = std::env::temp_dir().join(format!("keel-iworld-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let big = dir.join("big.json");
    std::fs::write(&big, vec![b' '; (keel_sim::limits::MAX_SCENARIO_FILE_BYTES + 1) as usize]).unwrap();
    assert!(matches!(load_file(&big), Err(SpecFileError::TooLarge { .. })));
    let other = dir.join("x.scn");
    std::fs::write(&other, b"{}").unwrap();
    assert!(matches!(load_file(&other), Err(SpecFileError::Extension { .. })));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_registry_loads_scenario_files() {
    let registry = keel_sim::scenarios::builtin_registry();
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/tool-loop.json");
    let scenario = registry.resolve(path.to_str().unwrap()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(scenario.name(), "tool-loop");
    let report = scenario.run(3, &RunOptions::default());
    assert!(report.passed(), "{report}");
    assert!(registry.resolve("scenarios/does-not-exist.json").is_err());
}

/// `KEEL_FILE=tool-loop KEEL_SEED=1 cargo test -p keel-sim --test interaction_scenarios -- --ignored --nocapture replay_file`
#[test]
#[ignore]
fn replay_file() {
    let name = std::env::var("KEEL_FILE").unwrap_or_else(|_| "tool-loop".into());
    let seed: u64 = std::env::var("KEEL_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(1);
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("scenarios/{name}.json"));
    let mut spec = load_file(&path).unwrap_or_else(|e| panic!("{e}"));
    if let (Ok(commit), Ok(fault)) = (std::env::var("KEEL_COMMIT"), std::env::var("KEEL_FAULT")) {
        spec.faults.at = vec![(commit.parse().unwrap(), CommitFaultKind::from_name(&fault).unwrap())];
    }
    let out = run_outcome_on_madsim(&spec, &spec.name, seed, &RunOptions { keep_trace: true });
    for line in out.report.trace.iter().flatten() {
        println!("{line}");
    }
    println!("{}", out.report);
}

#[test]
fn every_scenario_file_is_bundled_and_listed() {
    let on_disk: Vec<String> =
        scenario_files().iter().map(|p| p.file_stem().unwrap().to_string_lossy().into_owned()).collect();
    let bundled: Vec<&str> = keel_sim::interaction_world::BUNDLED_FILES.iter().map(|(n, _)| *n).collect();
    assert_eq!(bundled, on_disk, "add new sim/scenarios/*.json files to BUNDLED_FILES");
    let registry = keel_sim::scenarios::builtin_registry();
    let names: Vec<&str> = registry.bundled().iter().map(|s| s.name()).collect();
    assert_eq!(names, on_disk, "every bundled file decodes and keeps its file name as its scenario name");
    for s in registry.bundled() {
        assert_eq!(s.replay_name(), s.name(), "a bundled file replays by name");
    }
}

/// What a file declares (derived from its content) is what its runs fire: a short campaign
/// over each bundled file shows no `never fired` and no `undeclared` row.
#[test]
fn each_bundled_file_fires_what_it_declares() {
    use keel_sim::campaign::{Campaign, ProgressStyle};
    let registry = keel_sim::scenarios::builtin_registry();
    let results = parallel(registry.bundled().to_vec(), |scenario| {
        let name = scenario.name().to_string();
        let summary = Campaign::new(vec![scenario]).seeds(0, 4).jobs(1).progress(ProgressStyle::Off).run(&mut std::io::sink()).unwrap();
        let w = &summary.worlds[0];
        (name, w.never_fired(), w.undeclared())
    });
    let gaps: Vec<String> = results
        .into_iter()
        .filter(|(_, never, stray)| !never.is_empty() || !stray.is_empty())
        .map(|(name, never, stray)| format!("{name}: never fired {never:?}, undeclared {stray:?}"))
        .collect();
    assert!(gaps.is_empty(), "{}", gaps.join("\n"));
}
