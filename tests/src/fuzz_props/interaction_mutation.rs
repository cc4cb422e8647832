//! Fuzz target `interaction_mutation` (structured): the bytes drive an
//! [`arbitrary_json::SnapshotMutation`] of a real captured Interaction input — a parent or
//! tool-child state, a Step's (state, window), a protocol payload or Signal, or a whole
//! Interaction tree snapshot — and the result goes through the property of the target that
//! input belongs to (`interaction_state`, `interaction_protocol` or `tree_snapshot`).
//!
//! Byte-level mutation of JSON text rarely keeps a state valid enough to reach the restore checks
//! and the Step; editing real values in place (copying real ids, calls and results to the wrong
//! places, bumping counters, dropping members) does.

use super::arbitrary_json::{self, SnapshotMutation};
use super::interaction_corpus::interaction_corpus;
use super::{parse_unbounded, run_target};
use arbitrary::{Arbitrary, Unstructured};
use keel::json::Json;
use std::sync::OnceLock;

/// One mutation base: the target it belongs to, its selector byte (if the target has one) and
/// its JSON.
pub struct Base {
    pub target: &'static str,
    pub selector: Option<u8>,
    pub json: Json,
}

/// How many whole Interaction snapshots are among the bases: few, because a decoded snapshot is
/// restored and run, which costs a hundred times a state check.
const SNAPSHOT_BASES: usize = 8;

/// The captured Interaction inputs the target edits (the `real-*` files of the corpus capture).
pub fn interaction_mutation_bases() -> &'static [Base] {
    static BASES: OnceLock<Vec<Base>> = OnceLock::new();
    BASES.get_or_init(|| {
        let mut bases = Vec::new();
        let mut snapshots = 0;
        for file in interaction_corpus() {
            match file.target {
                "tree_snapshot" if snapshots < SNAPSHOT_BASES => {
                    snapshots += 1;
                    bases.push(Base { target: file.target, selector: None, json: parse_unbounded(&file.bytes) });
                }
                "tree_snapshot" => {}
                target => {
                    let Some((&selector, rest)) = file.bytes.split_first() else { continue };
                    bases.push(Base { target, selector: Some(selector), json: parse_unbounded(rest) });
                }
            }
        }
        bases
    })
}

/// Structured: picks a base (modulo the count), applies up to
/// [`arbitrary_json::MAX_EDITS`] edits and runs the base's target property on the result.
pub fn interaction_mutation(data: &[u8]) {
    let Ok(mutation) = SnapshotMutation::arbitrary_take_rest(Unstructured::new(data)) else { return };
    let bases = interaction_mutation_bases();
    let Some(base) = bases.get(usize::from(mutation.base) % bases.len().max(1)) else { return };
    let mut tree = base.json.clone();
    for edit in mutation.edits.iter().take(arbitrary_json::MAX_EDITS) {
        arbitrary_json::apply(&mut tree, edit);
    }
    let mut bytes: Vec<u8> = base.selector.into_iter().collect();
    bytes.extend(tree.to_canonical_bytes());
    assert!(run_target(base.target, &bytes), "bases belong to known targets");
}
