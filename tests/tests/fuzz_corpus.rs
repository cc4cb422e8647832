//! Replays every committed fuzz corpus file (`fuzz/corpus/<target>/`) through the same
//! property the fuzz target runs (`keel_tests::fuzz_props`), so `cargo test` keeps every seed,
//! minimized fuzzer find and fixed crash passing without libFuzzer.

use keel_tests::fuzz_props::{self, TARGETS};
use std::path::{Path, PathBuf};

/// The committed corpus stays small so this replay stays fast.
const MAX_FILES_PER_TARGET: usize = 200;
const MAX_FILE_BYTES: u64 = 64 * 1024;

fn corpus_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus")
}

fn files(target: &str) -> Vec<PathBuf> {
    let dir = corpus_root().join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("corpus entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// Runs every file of `target` through its property; reports all failing files at once.
fn replay(target: &str) {
    let files = files(target);
    assert!(!files.is_empty(), "{target}: the seed corpus is empty");
    assert!(files.len() <= MAX_FILES_PER_TARGET, "{target}: {} files (limit {MAX_FILES_PER_TARGET}); run `cargo fuzz cmin`", files.len());
    let mut failures = Vec::new();
    for file in &files {
        let len = std::fs::metadata(file).expect("metadata").len();
        assert!(len <= MAX_FILE_BYTES, "{}: {len} bytes (limit {MAX_FILE_BYTES})", file.display());
        let data = std::fs::read(file).expect("read corpus file");
        if std::panic::catch_unwind(|| assert!(fuzz_props::run_target(target, &data), "unknown target")).is_err() {
            failures.push(file.display().to_string());
        }
    }
    assert!(failures.is_empty(), "{target}: properties broke on {failures:#?}");
}

#[test]
fn corpus_json_parse() {
    replay("json_parse");
}

#[test]
fn corpus_tree_snapshot() {
    replay("tree_snapshot");
}

#[test]
fn corpus_kernel_values() {
    replay("kernel_values");
}

#[test]
fn corpus_chat_types() {
    replay("chat_types");
}

#[test]
fn corpus_tool_input_request() {
    replay("tool_input_request");
}

#[test]
fn corpus_snapshot_mutation() {
    replay("snapshot_mutation");
}

#[test]
fn corpus_interaction_state() {
    replay("interaction_state");
}

#[test]
fn corpus_interaction_protocol() {
    replay("interaction_protocol");
}

#[test]
fn corpus_interaction_mutation() {
    replay("interaction_mutation");
}

#[test]
fn corpus_process_record() {
    replay("process_record");
}

/// Writes the `process_record` seeds: every Process record of the captured cuts
/// (`fuzz/corpus/tree_snapshot/real-*` and `sim-*`), split out of each whole cut, one file per
/// distinct record (the first 120). The `seed-*` files beside them are hand-written variants
/// (whitespace, trailing byte, duplicate or unknown member, payloads with and without a
/// non-canonical escape, a `null` payload). Run with `--ignored` after a format change (after
/// deleting the old `record-*` files).
#[test]
#[ignore]
fn write_process_record_seeds() {
    use keel::kernel::commit::TreeCut;
    let out = corpus_root().join("process_record");
    std::fs::create_dir_all(&out).unwrap();
    let mut cuts = real_files("tree_snapshot");
    cuts.extend(prefixed_files("tree_snapshot", "sim-"));
    let mut seen = std::collections::BTreeSet::new();
    for file in cuts {
        let Ok(cut) = TreeCut::from_whole(&std::fs::read(&file).unwrap()) else { continue };
        for entry in cut.entries().iter().filter(|e| e.key().starts_with("process:")) {
            let Some(bytes) = entry.bytes() else { continue };
            let digest = keel::json::Digest::of(bytes);
            if seen.insert(digest) && seen.len() <= 120 && bytes.len() as u64 <= MAX_FILE_BYTES {
                std::fs::write(out.join(format!("record-{}", &digest.to_string()[7..19])), &bytes[..]).unwrap();
            }
        }
    }
}

#[test]
fn corpus_commit_log() {
    replay("commit_log");
}

/// Writes the `commit_log` seeds: every record payload of a real v3 log (deltas of a kernel
/// run, then the compacted base record) and a few whole cuts. Run with `--ignored` after a
/// format change (after deleting the old `log-*` and `cut-*` files).
#[test]
#[ignore]
fn write_commit_log_seeds() {
    use keel::kernel::commit::{FileCommitter, LOG_FILE_NAME};
    let out = corpus_root().join("commit_log");
    std::fs::create_dir_all(&out).unwrap();
    let dir = std::env::temp_dir().join(format!("keel-commit-log-seeds-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let world = keel_tests::durable_world::World::new(&dir);
    let committer = std::sync::Arc::new(FileCommitter::open(&dir).unwrap());
    let owner = keel::kernel::owner::Owner::start(
        world.resolver.clone(),
        world.root.clone(),
        keel::kernel::testkit::script_input(&world.script()),
        keel_tests::durable_world::root_id(),
        keel_tests::durable_world::incarnation(100),
        keel_tests::durable_world::root_config(),
        keel_tests::durable_world::now(),
    )
    .unwrap();
    let mut runner = keel::kernel::direct::DirectRunner::new(owner, committer.clone(), keel_tests::durable_world::now());
    keel_tests::durable_world::drive_to_completion(&mut runner).unwrap();
    let frames = |log: &[u8]| -> Vec<Vec<u8>> {
        let mut at = 16;
        let mut out = Vec::new();
        // Frames follow one another up to the free space (zeros) after the last one.
        while at + 56 <= log.len() && &log[at..at + 8] == b"KEELREC\n" {
            let len = u64::from_le_bytes(log[at + 8..at + 16].try_into().unwrap()) as usize;
            out.push(log[at + 56..at + 56 + len].to_vec());
            at += 56 + len;
        }
        out
    };
    let mut payloads = frames(&std::fs::read(dir.join(LOG_FILE_NAME)).unwrap());
    committer.compact_now().unwrap();
    payloads.extend(frames(&std::fs::read(dir.join(LOG_FILE_NAME)).unwrap()));
    for (i, p) in payloads.iter().enumerate().filter(|(_, p)| p.len() <= MAX_FILE_BYTES as usize) {
        std::fs::write(out.join(format!("log-{i:02}")), p).unwrap();
    }
    let head = committer.head(&keel_tests::durable_world::root_id()).unwrap();
    std::fs::write(out.join("cut-head"), &*head.cut.bytes().unwrap()).unwrap();
    for (i, cut) in runner.acknowledged_cuts().iter().enumerate().take(3) {
        std::fs::write(out.join(format!("cut-{i:02}")), &*cut.bytes().unwrap()).unwrap();
    }
    drop(runner);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_corpus_directory_is_a_target() {
    let mut dirs: Vec<String> = std::fs::read_dir(corpus_root())
        .expect("fuzz/corpus")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    dirs.sort();
    let mut targets: Vec<String> = TARGETS.iter().map(|t| t.to_string()).collect();
    targets.sort();
    assert_eq!(dirs, targets);
}

/// Every target has its `[[bin]]` in `fuzz/Cargo.toml` and its file in `fuzz/fuzz_targets/`,
/// calling the `fuzz_props` function of the same name.
#[test]
fn every_target_has_a_cargo_fuzz_binary() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let manifest = std::fs::read_to_string(fuzz.join("Cargo.toml")).expect("fuzz/Cargo.toml");
    let mut bins: Vec<String> = manifest
        .lines()
        .filter_map(|l| l.strip_prefix("name = \""))
        .filter_map(|l| l.strip_suffix('"'))
        .filter(|name| *name != "keel-fuzz")
        .map(str::to_owned)
        .collect();
    bins.sort();
    let mut targets: Vec<String> = TARGETS.iter().map(|t| t.to_string()).collect();
    targets.sort();
    assert_eq!(bins, targets, "[[bin]] entries of fuzz/Cargo.toml");
    for target in TARGETS {
        let source = std::fs::read_to_string(fuzz.join("fuzz_targets").join(format!("{target}.rs")))
            .unwrap_or_else(|e| panic!("fuzz_targets/{target}.rs: {e}"));
        assert!(source.contains(&format!("keel_tests::fuzz_props::{target}(data)")), "{target}.rs runs its property");
    }
}

/// The fuzz targets link this crate's library, built by cargo-fuzz without `--cfg madsim`;
/// the simulator calls madsim's runtime, which only exists under that cfg, so the library
/// must not depend on it (it did, and the fuzz build broke as soon as the simulator grew).
#[test]
fn the_library_the_fuzz_targets_link_does_not_need_the_simulator() {
    let manifest = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).expect("Cargo.toml");
    let dependencies = manifest
        .split("\n[")
        .find(|section| section.starts_with("dependencies]"))
        .expect("a [dependencies] table");
    assert!(!dependencies.contains("keel-sim"), "keel-sim belongs in [dev-dependencies]");
}

/// The captured snapshots (`real-*`) must stay real: if the snapshot format changes they stop
/// decoding and only exercise the first rejection. Re-capture them with
/// `cargo run -p keel-tests --bin capture-corpus` (after deleting the old `real-*` files).
#[test]
fn captured_snapshots_still_decode() {
    let real = real_files("tree_snapshot");
    assert!(real.len() >= 20, "expected the captured snapshots in fuzz/corpus/tree_snapshot");
    all_decode(&real, "capture-corpus");
}

/// The same for the simulator's cuts (`sim-*`, one per feature), re-captured with
/// `cargo run --release -p keel-sim --bin capture-cuts` (after deleting the old `sim-*` files).
#[test]
fn simulated_snapshots_still_decode() {
    let sim = prefixed_files("tree_snapshot", "sim-");
    for feature in ["unknown", "inputwait", "restored", "wide", "terminal"] {
        let found = sim.iter().any(|p| p.to_string_lossy().contains(&format!("sim-{feature}-")));
        assert!(found, "no simulated cut with feature {feature} in fuzz/corpus/tree_snapshot");
    }
    all_decode(&sim, "capture-cuts");
}

fn all_decode(files: &[PathBuf], recapture: &str) {
    for file in files {
        let bytes = std::fs::read(file).expect("read");
        if let Err(e) = keel::kernel::snapshot::TreeSnapshot::decode(&bytes) {
            panic!("{} no longer decodes ({e}): re-run {recapture}", file.display());
        }
    }
}

fn prefixed_files(target: &str, prefix: &str) -> Vec<PathBuf> {
    files(target).into_iter().filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(prefix))).collect()
}

fn real_files(target: &str) -> Vec<PathBuf> {
    prefixed_files(target, "real-")
}

/// The captured Interaction inputs (`real-*`) must stay real, like the snapshots: each one is
/// still accepted by the decoder its selector names (re-capture with `capture-corpus` after
/// deleting the old `real-*` files of these directories when a format changes).
#[test]
fn captured_interaction_inputs_still_decode() {
    use keel::interaction::protocol::*;
    use keel::interaction::state::{ParentState, ToolCallState};
    use keel::json::FromJson;
    fn accepts<T: FromJson>(bytes: &[u8]) -> Result<(), String> {
        T::from_json_bytes(bytes).map(drop).map_err(|e| e.to_string())
    }
    let world = fuzz_props::interaction_world::fuzz_world();
    for (target, minimum) in [("interaction_state", 40), ("interaction_protocol", 40)] {
        let real = real_files(target);
        assert!(real.len() >= minimum, "{target}: expected the captured inputs (got {})", real.len());
        for file in real {
            let bytes = std::fs::read(&file).expect("read");
            let (&selector, json) = bytes.split_first().expect("a selector byte");
            let verdict = match (target, usize::from(selector)) {
                ("interaction_state", 0) => accepts::<ParentState>(json),
                ("interaction_state", 1) => accepts::<ToolCallState>(json),
                ("interaction_state", 2) => {
                    let state = keel::kernel::waist::ExecutionState::from_json_bytes(json).map_err(|e| e.to_string());
                    state.and_then(|s| restorable(world, &s))
                }
                ("interaction_state", _) => {
                    let value = keel::json::parse(json).map_err(|e| e.to_string());
                    let state = value.and_then(|v| {
                        let state = v.get("state").ok_or("no state")?;
                        keel::kernel::waist::ExecutionState::from_json(state).map_err(|e| e.to_string())
                    });
                    state.and_then(|s| restorable(world, &s))
                }
                (_, n) => match fuzz_props::PROTOCOL_TYPES[n] {
                    "ModelCallEffect" => accepts::<ModelCallEffect>(json),
                    "ModelResult" => accepts::<ModelResult>(json),
                    "ToolCallEffect" => accepts::<ToolCallEffect>(json),
                    "ToolCallSettlement" => accepts::<ToolCallSettlement>(json),
                    "SettledToolResult" => accepts::<SettledToolResult>(json),
                    "ToolCallInput" => accepts::<ToolCallInput>(json),
                    "ToolCheckpoint" => accepts::<ToolCheckpoint>(json),
                    "WaitOpenedPayload" => accepts::<WaitOpenedPayload>(json),
                    "InputResponse" => accepts::<InputResponse>(json),
                    "Steer" => accepts::<Steer>(json),
                    "ModelResponseDelta" => accepts::<ModelResponseDelta>(json),
                    "InteractionInput" => accepts::<InteractionInput>(json),
                    "Output" => accepts::<keel::interaction::output::Output>(json),
                    "Artifact" => accepts::<keel::interaction::artifact::Artifact>(json),
                    _ => accepts::<keel::kernel::signal::Signal>(json),
                },
            };
            if let Err(e) = verdict {
                panic!("{} no longer decodes ({e}): re-run capture-corpus", file.display());
            }
        }
    }
    assert!(real_files("tree_snapshot").iter().filter(|p| p.to_string_lossy().contains("real-interaction-")).count() >= 20);
}

/// Some Definition of the Interaction world restores `state`.
fn restorable(world: &fuzz_props::interaction_world::InteractionWorld, state: &keel::kernel::waist::ExecutionState) -> Result<(), String> {
    let cx = keel::kernel::waist::StepContext::default();
    let roots = world.definitions.iter().any(|d| keel::kernel::waist::Definition::restore(d, &cx, state).is_ok());
    if roots || world.tool_child.definition().restore(&cx, state).is_ok() {
        Ok(())
    } else {
        Err(format!("no Definition restores a state of kind {}", state.kind.as_str()))
    }
}

/// The structured Interaction target picks its base with one byte, and every base is a valid
/// input of its own target as captured.
#[test]
fn interaction_mutation_bases_are_reachable_and_pass() {
    let bases = fuzz_props::interaction_mutation::interaction_mutation_bases();
    assert!((40..=256).contains(&bases.len()), "{} bases", bases.len());
    for base in bases {
        let mut bytes: Vec<u8> = base.selector.into_iter().collect();
        bytes.extend(base.json.to_canonical_bytes());
        assert!(fuzz_props::run_target(base.target, &bytes));
    }
}

/// The mutation target edits the seed scenarios' cuts; they must all be accepted as they are.
#[test]
fn mutation_bases_are_accepted_snapshots() {
    let bases = fuzz_props::mutation_bases();
    assert!(bases.len() >= 20);
    for base in bases {
        let bytes = base.to_canonical_bytes();
        keel::kernel::snapshot::TreeSnapshot::decode(&bytes).expect("a captured cut decodes");
    }
}

// ---------------------------------------------------------------------------------------------
// Regressions for bugs the fuzzers and properties found (outside this crate).

/// Found by `properties::every_cut_of_a_generated_run_round_trips`: the testkit encoded
/// `Op::Dispatch(Json::Null)` as `"payload":null` but decoded it with `required`, which
/// rejects an explicit null, so a script dispatching `null` failed to start.
#[test]
fn testkit_dispatch_of_null_round_trips() {
    use keel::json::{FromJson, Json, ToJson};
    use keel::kernel::testkit::Op;
    let op = Op::Dispatch(Json::Null);
    assert_eq!(Op::from_json(&op.to_json()).expect("decodes"), op);
    let scenario = fuzz_props::runs::Scenario {
        ops: vec![op],
        dispatch: vec![],
        host: vec![],
        budget: keel::kernel::resource::Budget::unlimited(),
    };
    assert!(!fuzz_props::runs::run(&scenario).is_empty(), "the run starts and commits");
}

/// Found by `properties::every_cut_of_a_generated_run_round_trips`: `null` is a payload like
/// any other in memory (`Payload::null()`), and every encoder writes it as `"payload":null`,
/// but the decoders read payload members as required non-null typed members. A strategy that
/// dispatched `null`, a dispatcher that settled with `null` or a host that delivered a `null`
/// Signal made the owner commit cuts that no longer decoded: the tree could not be restored.
#[test]
fn null_payloads_round_trip_through_every_decoder() {
    use keel::json::{FromJson, Payload, ToJson};
    use keel::kernel::child::ChildSpec;
    use keel::kernel::effect::{Effect, FrameworkEffect, Settlement};
    use keel::kernel::ids::{ChildKey, SignalId, WaitKey};
    use keel::kernel::signal::{SettlementStatus, Signal, SignalRequest};
    use keel::kernel::transition::Transition;
    use keel::kernel::waist::ExecutionState;
    use std::fmt::Debug;

    fn round_trip<T: FromJson + ToJson + PartialEq + Debug>(value: T) {
        let json = value.to_json();
        let decoded = T::from_json(&json).unwrap_or_else(|e| panic!("{} with a null payload: {e}", json.to_canonical_string()));
        assert_eq!(decoded, value);
    }
    let null = Payload::null();
    round_trip(Effect::Dispatcher(null.clone()));
    round_trip(Effect::Framework(FrameworkEffect::Wait { key: WaitKey::parse("k").unwrap(), payload: Some(null.clone()) }));
    round_trip(Settlement { status: SettlementStatus::Succeeded, payload: null.clone() });
    round_trip(Signal::new(SignalId::external("signal:a").unwrap(), None, null.clone(), None).unwrap());
    round_trip(SignalRequest::new(SignalId::external("signal:a").unwrap(), None, null.clone()).unwrap());
    round_trip(ExecutionState { kind: keel::text::QualifiedName::parse("keel.fuzz.state").unwrap(), payload: null.clone(), segments: Vec::new() });
    round_trip(Transition::Complete { consumed: 0, output: null.clone() });
    let world = fuzz_props::runs::World::new(&[]);
    round_trip(ChildSpec {
        key: ChildKey::parse("c").unwrap(),
        deployment_ref: world.child.reference().clone(),
        input: null,
        budget: keel::kernel::resource::Budget::unlimited(),
        capabilities: keel::kernel::capability::CapabilitySet::empty(),
    });
}

/// The same bug end to end: every cut of a run full of `null` payloads decodes and restores.
#[test]
fn runs_with_null_payloads_commit_decodable_cuts() {
    use fuzz_props::runs::{DispatchOutcome, HostAction, Scenario};
    use keel::json::Json;
    use keel::kernel::testkit::Op;
    let scenario = Scenario {
        ops: vec![Op::Dispatch(Json::Null), Op::Wait("k".into()), Op::Checkpoint],
        dispatch: vec![DispatchOutcome::Echo],
        host: vec![HostAction::Restore, HostAction::AnswerWaits(Json::Null), HostAction::Restore],
        budget: keel::kernel::resource::Budget::unlimited(),
    };
    let cuts = fuzz_props::runs::run(&scenario);
    assert!(cuts.len() >= 4, "the run gets past its first dispatch ({} cuts)", cuts.len());
    for cut in &cuts {
        if let Err(e) = keel::kernel::snapshot::TreeSnapshot::decode(cut) {
            panic!("a committed cut must decode: {e}");
        }
        fuzz_props::tree_snapshot(cut);
    }
}
