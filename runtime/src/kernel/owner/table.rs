//! The owner's Process records with their cached canonical encodings.
//!
//! Invariants:
//! * a cached encoding is always the canonical encoding of the record beside it: every way to
//!   reach a record mutably (`get_mut`, `insert`, `remove`) drops that record's encoding first,
//!   and reads go through `Deref` to the map, which cannot mutate;
//! * `changed` is set by every mutable access and cleared only when a cut is assembled, so a
//!   table that is not `changed` holds exactly the records of the last assembled cut, whose
//!   digest is `last_cut`;
//! * `valid` holds only records that passed the per-record rules in a cut that validated (or
//!   came from a validated snapshot) and were not reached mutably since, so assembling a cut
//!   checks the per-record rules only for the others (tree-wide rules always run).
//!
//! * residue records (`kernel::retired`) are immutable: each is encoded once, when its child
//!   is retired, and leaves only with its parent; `by_parent` indexes exactly the residues.
//!
//! So a cut costs one encoding per *changed* record plus a copy of the others' bytes, and an
//! idle owner can tell that nothing differs from its head without building anything.

use crate::json::Digest;
use crate::kernel::commit::{CutEnvelope, TreeCut};
use crate::kernel::ids::{ChildKey, IncarnationId, ProcessId};
use crate::kernel::process::Process;
use crate::kernel::residue_set::ResidueSet;
use crate::kernel::retired::RetiredChild;
use crate::kernel::snapshot::{EncodedProcess, SnapshotError, TreeSnapshot};
use crate::kernel::tree_limits::TreeLimits;
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Default)]
pub(super) struct ProcessTable {
    /// Each record is shared with the cuts that hold it: a cut copies none, and the first
    /// mutable access after a cut copies only the record it changes (`Arc::make_mut`).
    map: BTreeMap<ProcessId, Arc<Process>>,
    encoded: BTreeMap<ProcessId, Arc<EncodedProcess>>,
    changed: bool,
    valid: std::collections::BTreeSet<ProcessId>,
    /// Digest of the last assembled cut (valid while `changed` is false).
    last_cut: Option<Digest>,
    /// Cuts assembled so far (observation for tests: an idle owner assembles none).
    builds: u64,
    /// Residue records of retired children by child id, each with its encoding.
    residues: BTreeMap<ProcessId, (Arc<RetiredChild>, Arc<EncodedProcess>)>,
    /// Per parent: the keys of its retired children, with their ids.
    by_parent: BTreeMap<ProcessId, BTreeMap<ChildKey, ProcessId>>,
    /// `residues` as the immutable set a cut holds, shared by every cut until a residue comes
    /// (the set is then extended by it) or leaves (`None`: rebuilt at the next cut).
    residue_set: Option<Arc<ResidueSet>>,
    /// The envelope of the last assembled cut, with the root, writer and limits it is the
    /// keel envelope of (rebuilt only when one of them changes: a new writer).
    envelope: Option<(ProcessId, IncarnationId, TreeLimits, CutEnvelope)>,
    /// The last assembled cut: the next one takes the digests of its unchanged chunks from it
    /// (a cache only; the digest is the same without it).
    last: Option<TreeCut>,
}

impl std::ops::Deref for ProcessTable {
    type Target = BTreeMap<ProcessId, Arc<Process>>;
    fn deref(&self) -> &Self::Target {
        &self.map
    }
}

impl ProcessTable {
    /// One record (the map's `get` through the shared pointer; inherent, so it wins over
    /// `Deref`'s).
    pub(super) fn get(&self, id: &ProcessId) -> Option<&Process> {
        self.map.get(id).map(|p| &**p)
    }

    /// Every record in id order.
    pub(super) fn values(&self) -> impl Iterator<Item = &Process> {
        self.map.values().map(|p| &**p)
    }

    /// Mutable access to one record; its cached encoding is dropped.
    pub(super) fn get_mut(&mut self, id: &ProcessId) -> Option<&mut Process> {
        self.encoded.remove(id);
        self.valid.remove(id);
        self.changed = true;
        self.map.get_mut(id).map(Arc::make_mut)
    }

    pub(super) fn insert(&mut self, id: ProcessId, p: Process) -> Option<Process> {
        self.encoded.remove(&id);
        self.valid.remove(&id);
        self.changed = true;
        self.map.insert(id, Arc::new(p)).map(Arc::unwrap_or_clone)
    }

    /// Inserts a record together with its known canonical encoding (restore: the records come
    /// from a validated snapshot that already holds their bytes).
    pub(super) fn insert_encoded(&mut self, p: Arc<Process>, encoded: Arc<EncodedProcess>) {
        self.changed = true;
        self.valid.insert(p.id.clone());
        self.encoded.insert(p.id.clone(), encoded);
        self.map.insert(p.id.clone(), p);
    }

    #[allow(dead_code)] // compaction removes finished records
    pub(super) fn remove(&mut self, id: &ProcessId) -> Option<Process> {
        self.encoded.remove(id);
        self.valid.remove(id);
        self.changed = true;
        self.map.remove(id).map(Arc::unwrap_or_clone)
    }

    /// Replaces a retired child's record by its residue record (same key). The residues of
    /// its own retired children leave with it: nothing under it can ever start again.
    pub(super) fn retire(&mut self, residue: RetiredChild) {
        let id = residue.process_id.clone();
        self.remove(&id);
        for (_, grandchild) in self.by_parent.remove(&id).unwrap_or_default() {
            self.residues.remove(&grandchild);
            self.residue_set = None;
        }
        let encoded = Arc::new(EncodedProcess::encode_residue(&residue));
        self.insert_residue_encoded(Arc::new(residue), encoded);
    }

    /// Inserts a residue record with its known encoding (restore).
    pub(super) fn insert_residue_encoded(&mut self, residue: Arc<RetiredChild>, encoded: Arc<EncodedProcess>) {
        self.changed = true;
        let (parent, key, id) = (residue.parent_id.clone(), residue.child_key.clone(), residue.process_id.clone());
        self.by_parent.entry(parent).or_default().insert(key, id.clone());
        let replaced = self.residues.insert(id, (residue.clone(), encoded.clone())).is_some();
        self.residue_set = match &self.residue_set {
            Some(set) if !replaced => Some(Arc::new(set.adding(residue, encoded))),
            _ => None,
        };
    }

    /// The residue record of retired child `id`.
    pub(super) fn residue(&self, id: &ProcessId) -> Option<&RetiredChild> {
        self.residues.get(id).map(|(r, _)| &**r)
    }

    /// Whether `parent` retired a child under `key`.
    pub(super) fn retired_key(&self, parent: &ProcessId, key: &ChildKey) -> bool {
        self.by_parent.get(parent).is_some_and(|keys| keys.contains_key(key))
    }

    /// Every residue record (for a fresh build).
    pub(super) fn residues(&self) -> impl Iterator<Item = &RetiredChild> {
        self.residues.values().map(|(r, _)| &**r)
    }

    /// Whether the records may differ from the cut whose digest is `head`. `false` is exact
    /// (nothing was touched since a cut with that digest was assembled); `true` may be a
    /// false alarm (a record was touched but ended up equal), settled by building the cut.
    pub(super) fn may_differ_from(&self, head: Option<Digest>) -> bool {
        self.changed || head.is_none() || self.last_cut != head
    }

    /// The encoding of record `p` (keyed `id`) from `cache`, encoding and caching it if it
    /// changed. Takes the cache alone, so callers iterate the records in place while filling it.
    fn encoded_of(
        cache: &mut BTreeMap<ProcessId, Arc<EncodedProcess>>,
        id: &ProcessId,
        p: &Process,
    ) -> Arc<EncodedProcess> {
        if let Some(e) = cache.get(id) {
            return e.clone();
        }
        let e = Arc::new(EncodedProcess::encode(p));
        cache.insert(id.clone(), e.clone());
        e
    }

    /// Checks the byte limits of the cut these records would make, without assembling it:
    /// changed records are encoded (and cached, so the commit that follows reuses them) and
    /// the sizes are summed. Returns the same `TooLarge` error cut validation would.
    pub(super) fn check_byte_limits(
        &mut self,
        root_id: &ProcessId,
        incarnation: &IncarnationId,
        limits: TreeLimits,
    ) -> Result<(), SnapshotError> {
        let tree_limit = limits.max_snapshot_bytes().maximum();
        let record_limit = limits.max_process_snapshot_bytes().maximum();
        if tree_limit.is_none() && record_limit.is_none() {
            return Ok(());
        }
        let mut records: Vec<(u32, ProcessId, u64, u64)> = Vec::with_capacity(self.map.len());
        let mut encoded = Vec::with_capacity(self.map.len());
        for (id, p) in &self.map {
            let e = Self::encoded_of(&mut self.encoded, id, p);
            records.push((p.relation.depth, id.clone(), e.len() as u64, e.size()));
            encoded.push(e);
        }
        records.sort();
        // The cut holds every Process record, the residue records, then each referenced
        // segment record once.
        let residues = self.residues.values().map(|(_, e)| e.len() as u64);
        let segments = crate::kernel::snapshot::segment_records(&encoded);
        let lens: Vec<u64> = records
            .iter()
            .map(|r| r.2)
            .chain(residues)
            .chain(segments.iter().map(|r| r.len() as u64))
            .collect();
        let total = crate::kernel::snapshot::cut_len(root_id, incarnation, &limits, &lens);
        if let Some(limit) = tree_limit {
            if total > limit {
                return Err(SnapshotError::TooLarge { what: "tree snapshot".into(), bytes: total, limit });
            }
        }
        // A Process's size is its record plus the segment records it references.
        if let Some(limit) = record_limit {
            if let Some((_, id, _, bytes)) = records.iter().find(|r| r.3 > limit) {
                return Err(SnapshotError::TooLarge { what: format!("process {id}"), bytes: *bytes, limit });
            }
        }
        Ok(())
    }

    /// Assembles and validates the cut of every record, encoding only changed records.
    pub(super) fn cut(
        &mut self,
        root_id: &ProcessId,
        incarnation: &IncarnationId,
        limits: TreeLimits,
    ) -> Result<TreeSnapshot, SnapshotError> {
        // No id is cloned: the encodings of unchanged records are looked up in place, and only
        // a changed record's id is copied, into the cache.
        let mut members = Vec::with_capacity(self.map.len());
        for (id, p) in &self.map {
            members.push((Arc::clone(p), Self::encoded_of(&mut self.encoded, id, p)));
        }
        let residues = self
            .residue_set
            .get_or_insert_with(|| {
                Arc::new(ResidueSet::new(self.residues.values().map(|(r, e)| (r.clone(), e.clone())).collect()))
            })
            .clone();
        let envelope = match &self.envelope {
            Some((r, i, l, e)) if r == root_id && i == incarnation && *l == limits => e.clone(),
            _ => {
                let e = CutEnvelope::keel(root_id, incarnation, &crate::json::ToJson::to_json(&limits));
                self.envelope = Some((root_id.clone(), incarnation.clone(), limits, e.clone()));
                e
            }
        };
        self.builds += 1;
        let valid = &self.valid;
        let fresh = |id: &ProcessId| !valid.contains(id);
        let cut = TreeSnapshot::assemble_changed(
            root_id.clone(),
            incarnation.clone(),
            limits,
            envelope,
            members,
            residues,
            &fresh,
            self.last.as_ref(),
        );
        match &cut {
            Ok(c) => {
                self.last = Some(c.tree_cut().clone());
                self.changed = false;
                self.last_cut = Some(c.digest());
                // Every record is valid now: add the ones that were not (no set rebuilt).
                for id in self.map.keys() {
                    if !self.valid.contains(id) {
                        self.valid.insert(id.clone());
                    }
                }
            }
            Err(_) => self.last_cut = None,
        }
        cut
    }

    pub(super) fn builds(&self) -> u64 {
        self.builds
    }

}
