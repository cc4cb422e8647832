//! The residue records of one cut (`kernel::retired`), as one immutable, shared value.
//!
//! A long-lived parent retires one child per finished tool call, so a cut can hold hundreds of
//! residue records while only one changes per round, and most commits change none. A
//! [`ResidueSet`] is built once per distinct set of residues and shared (one `Arc`) by every
//! snapshot holding exactly those residues, so copying or dropping a snapshot costs O(1) for
//! them, and the rules that concern the residues alone are checked once per set, not once
//! per cut.
//!
//! Invariant (what the cached check relies on): a `ResidueSet` is never mutated after
//! [`ResidueSet::new`]; there is no `&mut` access to its records. Its [`ResidueIndex`] is a
//! pure function of those records, computed on first use, so it is true of the set for the
//! set's whole life. A cut with other residues (a tampered, added or lost one) is a different
//! set, whose index is computed from its own records. The rules that relate residues to the
//! live Processes of a cut (parent present, id not live, key not reused by a live child,
//! count) are checked for every cut (`TreeSnapshot::validate`), through the index.

use super::ids::{ChildKey, ProcessId};
use super::retired::RetiredChild;
use super::snapshot::EncodedProcess;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock};

/// Residue records sorted by the retired child's id, each with its canonical encoding.
#[derive(Debug, Default)]
pub struct ResidueSet {
    residues: Vec<Arc<RetiredChild>>,
    encoded: Vec<Arc<EncodedProcess>>,
    /// The residue-only rules' outcome, computed once (module docs).
    index: OnceLock<Option<ResidueIndex>>,
}

/// What the residue-only rules leave for the tree-wide ones: per parent, how many residues
/// name it and the child keys they hold, and the residues' ids. Exists only for a set with no
/// repeated id and no child key repeated under one parent.
#[derive(Debug, Default)]
pub struct ResidueIndex {
    by_parent: BTreeMap<ProcessId, (u64, BTreeSet<ChildKey>)>,
    ids: BTreeSet<ProcessId>,
}

impl ResidueSet {
    /// A set of `residues` (any order; sorted here by id).
    pub fn new(mut residues: Vec<(Arc<RetiredChild>, Arc<EncodedProcess>)>) -> ResidueSet {
        if !residues.is_sorted_by(|a, b| a.0.process_id <= b.0.process_id) {
            residues.sort_by(|a, b| a.0.process_id.cmp(&b.0.process_id));
        }
        let (residues, encoded) = residues.into_iter().unzip();
        ResidueSet { residues, encoded, index: OnceLock::new() }
    }

    pub fn residues(&self) -> &[Arc<RetiredChild>] {
        &self.residues
    }
    /// The canonical bytes of each residue record, in the order of [`ResidueSet::residues`].
    pub fn encoded(&self) -> &[Arc<EncodedProcess>] {
        &self.encoded
    }
    pub fn len(&self) -> usize {
        self.residues.len()
    }
    pub fn is_empty(&self) -> bool {
        self.residues.is_empty()
    }

    /// The index of a set that keeps the residue-only rules (no id twice, no child key twice
    /// under one parent), or `None` when it breaks one (the caller then walks the records to
    /// name the fault). Computed once per set.
    pub fn index(&self) -> Option<&ResidueIndex> {
        self.index
            .get_or_init(|| {
                let mut index = ResidueIndex::default();
                for r in &self.residues {
                    if !index.ids.insert(r.process_id.clone()) {
                        return None;
                    }
                    let (count, keys) = index.by_parent.entry(r.parent_id.clone()).or_default();
                    if !keys.insert(r.child_key.clone()) {
                        return None;
                    }
                    *count += 1;
                }
                Some(index)
            })
            .as_ref()
    }
}

impl ResidueIndex {
    /// Every parent some residue names.
    pub fn parents(&self) -> impl Iterator<Item = &ProcessId> {
        self.by_parent.keys()
    }
    /// How many residues name `parent`.
    pub fn count(&self, parent: &ProcessId) -> u64 {
        self.by_parent.get(parent).map_or(0, |(n, _)| *n)
    }
    /// Whether a residue of `parent` holds `key`.
    pub fn holds_key(&self, parent: &ProcessId, key: &ChildKey) -> bool {
        self.by_parent.get(parent).is_some_and(|(_, keys)| keys.contains(key))
    }
    /// Whether `id` is a retired child's id.
    pub fn holds_id(&self, id: &ProcessId) -> bool {
        self.ids.contains(id)
    }
}

impl PartialEq for ResidueSet {
    fn eq(&self, other: &ResidueSet) -> bool {
        self.residues == other.residues && self.encoded == other.encoded
    }
}
impl Eq for ResidueSet {}
