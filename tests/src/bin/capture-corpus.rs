//! Writes the seed corpus of real snapshots: every acknowledged cut of the fixed testkit
//! scenarios (`keel_tests::fuzz_props::runs::seed_scenarios`) becomes one file in
//! `fuzz/corpus/tree_snapshot/` named `<scenario>-<digest prefix>`.
//!
//! Run from the workspace root: `cargo run -p keel-tests --bin capture-corpus`
//! (an optional argument overrides the output directory).

use keel::json::Digest;
use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let dir = std::env::args().nth(1).map(PathBuf::from).unwrap_or_else(|| PathBuf::from("fuzz/corpus/tree_snapshot"));
    std::fs::create_dir_all(&dir)?;
    let cuts = keel_tests::fuzz_props::runs::seed_cuts();
    for (name, bytes) in &cuts {
        let digest = Digest::of(bytes).hex();
        std::fs::write(dir.join(format!("real-{name}-{}", &digest[..12])), bytes)?;
    }
    println!("wrote {} snapshots to {}", cuts.len(), dir.display());
    Ok(())
}
