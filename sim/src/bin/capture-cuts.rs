//! Writes real tree snapshots from simulation runs into the fuzz seed corpus: acknowledged
//! cuts of the Interaction world on madsim (the real strategy on the real Engine, with commit
//! faults, crash/restore, Unknown Effects and host actions), one per feature below, so the
//! `tree_snapshot` target starts from the shapes the simulator reaches and `cargo test`
//! replays them (`tests/tests/fuzz_corpus.rs`).
//!
//! Run from the workspace root: `cargo run -p keel-sim --bin capture-cuts` (an optional
//! argument overrides the output directory, `fuzz/corpus/tree_snapshot`). Delete the old
//! `sim-*` files first when the snapshot format changed. The choice is deterministic: the
//! same code writes the same files.

use keel::interaction::pending_inputs::pending_tool_inputs;
use keel::json::Digest;
use keel::kernel::effect::EffectPhase;
use keel::kernel::snapshot::TreeSnapshot;
use keel_sim::interaction_world::generate::generate;
use keel_sim::interaction_world::{load_file, run_outcome_on_madsim, Spec};
use keel_sim::world::RunOptions;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Swarm seeds searched (enough to reach every feature; a few seconds in release).
const SWARM_SEEDS: u64 = 200;
/// The fuzz corpus replay limit per file (`tests/tests/fuzz_corpus.rs`).
const MAX_FILE_BYTES: usize = 64 * 1024;

/// What makes a cut worth keeping; the biggest cut with each feature is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Feature {
    /// An Effect whose outcome is Unknown (kept across restore until a host settles it).
    Unknown,
    /// A tool child parked on an input wait (`pending_tool_inputs` finds it).
    InputWait,
    /// Written by a writer after a crash/restore (not the run's first incarnation).
    Restored,
    /// Three or more Processes (tool children, a delegate).
    Wide,
    /// Every Process terminal.
    Terminal,
    /// Residue records of retired children (compaction removed finished children their parent
    /// consumed).
    Compacted,
}

const FEATURES: [Feature; 6] =
    [Feature::Unknown, Feature::InputWait, Feature::Restored, Feature::Wide, Feature::Terminal, Feature::Compacted];

fn features(snap: &TreeSnapshot, first_incarnation: bool) -> Vec<Feature> {
    let mut out = Vec::new();
    let unknown = snap.processes().iter().flat_map(|p| p.prepared.iter().flat_map(|x| &x.effects)).any(|e| e.phase == EffectPhase::Unknown);
    if unknown {
        out.push(Feature::Unknown);
    }
    if pending_tool_inputs(snap).is_ok_and(|p| !p.is_empty()) {
        out.push(Feature::InputWait);
    }
    if !first_incarnation {
        out.push(Feature::Restored);
    }
    if snap.processes().len() >= 3 {
        out.push(Feature::Wide);
    }
    if snap.processes().iter().all(|p| p.is_terminal()) {
        out.push(Feature::Terminal);
    }
    if !snap.residues().is_empty() {
        out.push(Feature::Compacted);
    }
    out
}

/// The biggest cuts seen with one feature, biggest first.
struct Best {
    feature: Feature,
    top: Vec<(usize, String, Arc<[u8]>)>,
}

/// Candidates kept per feature, so every feature can get a cut no other feature took.
const TOP: usize = FEATURES.len();

fn consider(best: &mut [Best], source: &str, cuts: &[Arc<[u8]>]) {
    let Some(first) = cuts.first().and_then(|c| TreeSnapshot::decode(c).ok()) else { return };
    for bytes in cuts.iter().filter(|c| c.len() <= MAX_FILE_BYTES) {
        let Ok(snap) = TreeSnapshot::decode(bytes) else { continue };
        for f in features(&snap, snap.incarnation == first.incarnation) {
            let Some(slot) = best.iter_mut().find(|b| b.feature == f) else { continue };
            if slot.top.iter().any(|(_, _, b)| b == bytes) {
                continue;
            }
            // Stable: a later cut of equal size goes after the earlier one.
            let at = slot.top.iter().position(|(size, _, _)| bytes.len() > *size).unwrap_or(slot.top.len());
            slot.top.insert(at, (bytes.len(), source.to_owned(), bytes.clone()));
            slot.top.truncate(TOP);
        }
    }
}

fn scenario_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(dir)?.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|e| e == "json")).collect();
    files.sort();
    Ok(files)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = std::env::args().nth(1).map(PathBuf::from).unwrap_or_else(|| PathBuf::from("fuzz/corpus/tree_snapshot"));
    keel::schema::prime();
    let mut best: Vec<Best> = FEATURES.iter().map(|&feature| Best { feature, top: Vec::new() }).collect();
    let options = RunOptions::default();
    let mut runs: Vec<(String, Spec, u64)> = Vec::new();
    for path in scenario_files(Path::new("scenarios"))? {
        let spec = load_file(&path)?;
        runs.push((spec.name.clone(), spec, 1));
    }
    for seed in 0..SWARM_SEEDS {
        runs.push((format!("swarm{seed}"), generate(seed).0, seed));
    }
    for (source, spec, seed) in &runs {
        let outcome = run_outcome_on_madsim(spec, &spec.name, *seed, &options);
        consider(&mut best, source, &outcome.acknowledged_cuts());
    }
    std::fs::create_dir_all(&out)?;
    let mut written: Vec<Arc<[u8]>> = Vec::new();
    for b in &best {
        let Some((size, source, bytes)) = b.top.iter().find(|(_, _, c)| !written.contains(c)) else {
            return Err(format!("no simulated cut had the feature {:?} (or every one was taken)", b.feature).into());
        };
        let name = format!("sim-{}-{source}-{}", format!("{:?}", b.feature).to_lowercase(), &Digest::of(bytes).hex()[..12]);
        std::fs::write(out.join(&name), &bytes[..])?;
        written.push(bytes.clone());
        println!("{name}: {size} bytes");
    }
    Ok(())
}
