//! Writes the captured part of the seed corpus (`real-*` files):
//! * every acknowledged cut of the fixed testkit scenarios
//!   (`keel_tests::fuzz_props::runs::seed_scenarios`) into `tree_snapshot/`, named
//!   `real-<scenario>-<digest prefix>`;
//! * the real Interaction runs (`keel_tests::fuzz_props::interaction_corpus`): states and Step
//!   windows into `interaction_state/`, protocol payloads and Signals into
//!   `interaction_protocol/`, and a spread of their cuts into `tree_snapshot/`
//!   (`real-interaction-<scenario>-<digest prefix>`).
//!
//! Run from the workspace root: `cargo run -p keel-tests --bin capture-corpus`
//! (an optional argument overrides the corpus root, `fuzz/corpus`). Delete the old `real-*`
//! files first when a format changed.

use keel::json::Digest;
use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let root = std::env::args().nth(1).map(PathBuf::from).unwrap_or_else(|| PathBuf::from("fuzz/corpus"));
    let snapshots = root.join("tree_snapshot");
    std::fs::create_dir_all(&snapshots)?;
    let cuts = keel_tests::fuzz_props::runs::seed_cuts();
    for (name, bytes) in &cuts {
        let digest = Digest::of(bytes).hex();
        std::fs::write(snapshots.join(format!("real-{name}-{}", &digest[..12])), bytes)?;
    }
    println!("wrote {} testkit snapshots to {}", cuts.len(), snapshots.display());
    let files = keel_tests::fuzz_props::interaction_corpus::interaction_corpus();
    let mut counts = std::collections::BTreeMap::new();
    for file in &files {
        let dir = root.join(file.target);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join(&file.name), &file.bytes)?;
        *counts.entry(file.target).or_insert(0) += 1;
    }
    for (target, n) in counts {
        println!("wrote {n} Interaction inputs to {}", root.join(target).display());
    }
    Ok(())
}
