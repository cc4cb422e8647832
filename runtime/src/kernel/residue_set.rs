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
use std::sync::{Arc, OnceLock};

/// Residue records sorted by the retired child's id, each with its canonical encoding.
#[derive(Debug, Default)]
pub struct ResidueSet {
    residues: Vec<Arc<RetiredChild>>,
    encoded: Vec<Arc<EncodedProcess>>,
    /// The residue-only rules' outcome, computed once (module docs).
    index: OnceLock<Option<ResidueIndex>>,
}

/// What the residue-only rules leave for the tree-wide ones: the residues sorted by (parent,
/// child key), so a parent's count and a key's use are binary searches. Exists only for a set
/// with no repeated id and no child key repeated under one parent. Holds the residues by
/// `Arc`: extending it by one residue copies pointers, not ids.
#[derive(Debug, Default, Clone)]
pub struct ResidueIndex {
    by_key: Vec<Arc<RetiredChild>>,
}

fn key_order(r: &RetiredChild) -> (&ProcessId, &ChildKey) {
    (&r.parent_id, &r.child_key)
}

impl ResidueSet {
    /// A set of `residues` (any order; sorted here by id).
    pub fn new(mut residues: Vec<(Arc<RetiredChild>, Arc<EncodedProcess>)>) -> ResidueSet {
        if !residues.is_sorted_by(|a, b| a.0.process_id <= b.0.process_id) {
            residues.sort_by(|a, b| a.0.process_id.cmp(&b.0.process_id));
        }
        let (residues, encoded) = residues.into_iter().unzip();
        ResidueSet {
            residues,
            encoded,
            index: OnceLock::new(),
        }
    }

    /// This set plus one residue (a child just retired): O(residues) pointer copies. When
    /// this set's index is known, the new one is derived from it by one insertion (the new
    /// residue's id and key are looked up, not every residue's again); it is the index
    /// [`ResidueSet::index`] would compute from the new set's records.
    pub fn adding(&self, residue: Arc<RetiredChild>, encoded: Arc<EncodedProcess>) -> ResidueSet {
        // After any equal id, as a stable sort of the records with this one last places it.
        let at = self
            .residues
            .partition_point(|r| r.process_id <= residue.process_id);
        let repeated_id = at > 0 && self.residues[at - 1].process_id == residue.process_id;
        let mut residues = Vec::with_capacity(self.residues.len() + 1);
        residues.extend_from_slice(&self.residues[..at]);
        residues.push(residue.clone());
        residues.extend_from_slice(&self.residues[at..]);
        let mut all_encoded = Vec::with_capacity(self.encoded.len() + 1);
        all_encoded.extend_from_slice(&self.encoded[..at]);
        all_encoded.push(encoded);
        all_encoded.extend_from_slice(&self.encoded[at..]);
        let index = OnceLock::new();
        if let Some(known) = self.index.get() {
            let derived = known.as_ref().and_then(|old| {
                let key = key_order(&residue);
                let at = old.by_key.partition_point(|r| key_order(r) < key);
                let repeated_key = old.by_key.get(at).is_some_and(|r| key_order(r) == key);
                (!repeated_id && !repeated_key).then(|| {
                    let mut by_key = Vec::with_capacity(old.by_key.len() + 1);
                    by_key.extend_from_slice(&old.by_key[..at]);
                    by_key.push(residue.clone());
                    by_key.extend_from_slice(&old.by_key[at..]);
                    ResidueIndex { by_key }
                })
            });
            let _ = index.set(derived);
        }
        ResidueSet {
            residues,
            encoded: all_encoded,
            index,
        }
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

    /// Whether `id` is a retired child's id of this set.
    pub fn holds_id(&self, id: &ProcessId) -> bool {
        self.residues
            .binary_search_by(|r| r.process_id.cmp(id))
            .is_ok()
    }

    /// The index of a set that keeps the residue-only rules (no id twice, no child key twice
    /// under one parent), or `None` when it breaks one (the caller then walks the records to
    /// name the fault). Computed once per set.
    pub fn index(&self) -> Option<&ResidueIndex> {
        self.index
            .get_or_init(|| {
                // Sorted by id: a repeated id is adjacent.
                if self
                    .residues
                    .windows(2)
                    .any(|w| w[0].process_id == w[1].process_id)
                {
                    return None;
                }
                let mut by_key = self.residues.clone();
                by_key.sort_by(|a, b| key_order(a).cmp(&key_order(b)));
                if by_key
                    .windows(2)
                    .any(|w| key_order(&w[0]) == key_order(&w[1]))
                {
                    return None;
                }
                Some(ResidueIndex { by_key })
            })
            .as_ref()
    }
}

impl ResidueIndex {
    /// Every parent some residue names (each once).
    pub fn parents(&self) -> impl Iterator<Item = &ProcessId> {
        let mut last: Option<&ProcessId> = None;
        self.by_key.iter().filter_map(move |r| {
            let fresh = last != Some(&r.parent_id);
            last = Some(&r.parent_id);
            fresh.then_some(&r.parent_id)
        })
    }
    /// How many residues name `parent`.
    pub fn count(&self, parent: &ProcessId) -> u64 {
        let start = self.by_key.partition_point(|r| r.parent_id < *parent);
        let end = self.by_key.partition_point(|r| r.parent_id <= *parent);
        (end - start) as u64
    }
    /// Whether a residue of `parent` holds `key`.
    pub fn holds_key(&self, parent: &ProcessId, key: &ChildKey) -> bool {
        self.by_key
            .binary_search_by(|r| key_order(r).cmp(&(parent, key)))
            .is_ok()
    }
}

impl PartialEq for ResidueSet {
    fn eq(&self, other: &ResidueSet) -> bool {
        self.residues == other.residues && self.encoded == other.encoded
    }
}
impl Eq for ResidueSet {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::Digest;

    fn residue(parent: &str, id: &str, key: &str) -> (Arc<RetiredChild>, Arc<EncodedProcess>) {
        let r = RetiredChild {
            parent_id: ProcessId::parse(parent).unwrap(),
            process_id: ProcessId::parse(id).unwrap(),
            child_key: ChildKey::parse(key).unwrap(),
            result_digest: Digest::of(id.as_bytes()),
        };
        let e = Arc::new(EncodedProcess::encode_residue(&r));
        (Arc::new(r), e)
    }

    fn index_of(set: &ResidueSet) -> Option<Vec<(String, String)>> {
        set.index().map(|i| {
            i.by_key
                .iter()
                .map(|r| (r.parent_id.to_string(), r.child_key.to_string()))
                .collect()
        })
    }

    /// A set extended by one residue is the set built from scratch, and its derived index is
    /// the one its records give (refused exactly when the new residue repeats an id or a key).
    #[test]
    fn adding_equals_building_from_scratch() {
        let base = vec![
            residue("process:p", "process:c1", "a"),
            residue("process:q", "process:c3", "a"),
        ];
        let cases = [
            (residue("process:p", "process:c2", "b"), true),
            (residue("process:p", "process:c0", "a"), false),
            (residue("process:q", "process:c1", "z"), false),
            (residue("process:r", "process:c9", "a"), true),
        ];
        for (extra, valid) in cases {
            let set = ResidueSet::new(base.clone());
            assert!(set.index().is_some());
            let added = set.adding(extra.0.clone(), extra.1.clone());
            let mut all = base.clone();
            all.push(extra.clone());
            let scratch = ResidueSet::new(all);
            assert_eq!(added, scratch);
            assert_eq!(index_of(&added), index_of(&scratch));
            assert_eq!(added.index().is_some(), valid, "{:?}", extra.0);
            // Without a known index, the new set computes its own.
            let unindexed = ResidueSet::new(base.clone()).adding(extra.0.clone(), extra.1.clone());
            assert_eq!(index_of(&unindexed), index_of(&scratch));
        }
        let set = ResidueSet::new(base);
        let index = set.index().unwrap();
        let p = ProcessId::parse("process:p").unwrap();
        assert_eq!(index.count(&p), 1);
        assert!(index.holds_key(&p, &ChildKey::parse("a").unwrap()));
        assert!(!index.holds_key(&p, &ChildKey::parse("b").unwrap()));
        assert_eq!(index.parents().count(), 2);
        assert!(set.holds_id(&ProcessId::parse("process:c3").unwrap()));
    }
}
