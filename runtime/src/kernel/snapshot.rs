//! TreeSnapshot: the recovery unit, with strict canonical encoding, a
//! tree digest over its envelope and per-record digests (see `kernel::commit::cut`), and full
//! validation on decode (pair assertion: the owner
//! validates every cut before committing it, and restore validates it again after reading).
//!
//! Decision: live child-wait registrations are *derived* from the parents' mailboxes (an open,
//! unanswered child-wait opening in a non-terminal Process) rather than stored beside them, so
//! they can never disagree with the mailbox.

use super::effect::{EffectPhase, FrameworkEffect, Effect};
use super::ids::{IncarnationId, ProcessId};
use super::process::Process;
use super::resource::Allocation;
use super::residue_set::ResidueSet;
use super::retired::RetiredChild;
use super::status::Status;
use super::tree_limits::TreeLimits;
use super::commit::{CutEntry, CutEnvelope, TreeCut};
use super::segment_record::{RecordSink, SegmentRecord, SegmentRecordError, SegmentTable};
use crate::json::{with_scratch, DecodeError, Digest, FromJson, Json, ObjectBuilder, ObjectReader, ToJson};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Why a snapshot was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    #[error("snapshot does not decode: {0}")]
    Decode(#[from] DecodeError),
    #[error("process {process}: {reason}")]
    Process { process: String, reason: String },
    #[error("tree: {0}")]
    Tree(String),
    #[error("{what} is {bytes} bytes, over its limit of {limit}")]
    TooLarge { what: String, bytes: u64, limit: u64 },
    /// The cut's segment records do not resolve into its states' segment chains.
    #[error("segments: {0}")]
    Segments(#[from] SegmentRecordError),
    /// A retired child's residue record disagrees with the tree (`kernel::retired`).
    #[error("retired child {process}: {fault}")]
    Residue { process: String, fault: ResidueFault },
}

/// How a residue record can disagree with the tree around it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ResidueFault {
    /// Its parent is not a Process of the cut (a retired parent's residues leave with it).
    #[error("its parent {0} is not in the tree")]
    ParentAbsent(String),
    /// A retired id never appears again as a live Process.
    #[error("the retired id is a live Process of the cut")]
    LiveId,
    /// Two residue records of one id.
    #[error("retired twice")]
    DuplicateId,
    /// A child key stays used under its parent for the parent's whole life.
    #[error("its child key {0:?} is used twice under its parent")]
    DuplicateChildKey(String),
    /// The parent's `retired_children.count` differs from its residue records (one was lost
    /// or added).
    #[error("its parent {parent} records {recorded} retired children, the cut holds {counted}")]
    CountMismatch { parent: String, recorded: u64, counted: u64 },
}

fn rerr(r: &RetiredChild, fault: ResidueFault) -> SnapshotError {
    SnapshotError::Residue { process: r.process_id.to_string(), fault }
}

/// The root, writer and limits of a keel cut's envelope, read from the envelope's own bytes
/// (the cut's text with no records); `None` unless that text is canonical and the envelope is
/// exactly the keel envelope of what it names.
fn decode_envelope(cut: &TreeCut) -> Option<(ProcessId, IncarnationId, TreeLimits)> {
    let envelope = cut.envelope();
    let mut text = Vec::with_capacity(envelope.len());
    text.extend_from_slice(envelope.head());
    text.extend_from_slice(envelope.tail());
    let value = crate::json::parse_with(&text, &crate::json::ParseLimits::default()).ok()?;
    if value.to_canonical_bytes() != text {
        return None;
    }
    let mut r = ObjectReader::new(&value).ok()?;
    let root_id: ProcessId = r.required("root_id").ok()?;
    let incarnation: IncarnationId = r.required("incarnation_id").ok()?;
    let limits: TreeLimits = r.required("tree_limits").ok()?;
    let records: Vec<Json> = r.required("process_snapshots").ok()?;
    r.finish().ok()?;
    let keel = CutEnvelope::keel(&root_id, &incarnation, &limits.to_json());
    (records.is_empty() && keel == *envelope).then_some((root_id, incarnation, limits))
}

fn perr(p: &Process, reason: impl Into<String>) -> SnapshotError {
    SnapshotError::Process { process: p.id.to_string(), reason: reason.into() }
}

/// One cut record's canonical bytes (a Process record, or a retired child's residue record),
/// encoded once and shared by every cut that holds the unchanged record (the owner caches one
/// per record and re-encodes only changed ones), with the segment records a Process record's
/// states reference. The digest is computed once, on first use, and the tree digest is built
/// from these.
#[derive(Debug)]
pub struct EncodedProcess {
    /// The record's key in a cut: the Process id text (a residue's: the retired child's id).
    key: Arc<str>,
    /// Canonical UTF-8 text, held as bytes so a decoded record can share the stored bytes.
    text: Arc<[u8]>,
    digest: std::sync::OnceLock<Digest>,
    /// The record as a cut entry, built once (on first use) and lent to every cut holding it.
    entry: std::sync::OnceLock<CutEntry>,
    /// The distinct segment records the committed and candidate states reference.
    segments: Vec<Arc<SegmentRecord>>,
    /// The record's bytes plus those of its segment records (what the per-Process byte limit
    /// counts).
    size: u64,
}

impl EncodedProcess {
    /// Encodes `p` canonically (its states' payload text copied verbatim, its segments named
    /// by reference: O(1) bytes whatever their number or size).
    pub fn encode(p: &Process) -> EncodedProcess {
        EncodedProcess::encode_with(p, RecordSink::default())
    }

    /// [`EncodedProcess::encode`] building every segment record anew instead of taking the
    /// segments' cached ones (a check that the caches agree with a fresh encoding).
    pub fn encode_fresh(p: &Process) -> EncodedProcess {
        EncodedProcess::encode_with(p, RecordSink { fresh: true, ..Default::default() })
    }

    fn encode_with(p: &Process, mut sink: RecordSink) -> EncodedProcess {
        // Written into this thread's scratch buffer, then copied once into the shared text.
        let text: Arc<[u8]> = with_scratch(p.record_len_hint(), |buf| {
            p.write_record(buf, &mut sink);
            // Test builds check every record any test encodes against the tree encoding the
            // direct writer replaced (kept as the oracle): the bytes of a cut never change.
            #[cfg(test)]
            assert_eq!(*buf, p.to_record_json().to_canonical_string(), "direct record writer differs from the tree encoding");
            Arc::from(buf.as_bytes())
        });
        EncodedProcess::with_text(p, text, &sink)
    }

    /// The encoding of `p` when it is exactly `stored` (the decode check of a stored record),
    /// else `None`. The record is encoded into this thread's scratch buffer and compared
    /// there, and a match shares `stored` instead of a copy of the same bytes: the verdict is
    /// [`EncodedProcess::encode`]'s bytes compared with `stored`, without allocating them.
    pub(crate) fn encode_matching(p: &Process, stored: &Arc<[u8]>) -> Option<EncodedProcess> {
        let mut sink = RecordSink::default();
        let same = with_scratch(stored.len(), |buf| {
            p.write_record(buf, &mut sink);
            #[cfg(test)]
            assert_eq!(*buf, p.to_record_json().to_canonical_string(), "direct record writer differs from the tree encoding");
            buf.as_bytes() == &**stored
        });
        same.then(|| EncodedProcess::with_text(p, Arc::clone(stored), &sink))
    }

    /// The encoding of `p` whose record text is `text`, with the segment records `sink`
    /// collected while writing it.
    fn with_text(p: &Process, text: Arc<[u8]>, sink: &RecordSink) -> EncodedProcess {
        let committed = p.committed_state.segments.len().min(sink.records.len());
        let segments = super::segment_record::union_of_two(&sink.records[..committed], &sink.records[committed..]);
        let size = segments.iter().fold(text.len() as u64, |sum, r| sum.saturating_add(r.len() as u64));
        EncodedProcess {
            key: Arc::from(p.id.as_str()),
            text,
            digest: std::sync::OnceLock::new(),
            entry: std::sync::OnceLock::new(),
            segments,
            size,
        }
    }
    /// The segment records this Process references (committed chain, then the candidate's
    /// records beyond their common prefix).
    pub fn segments(&self) -> &[Arc<SegmentRecord>] {
        &self.segments
    }
    /// The record's bytes plus its segment records' bytes (a Process's size for
    /// `max_process_snapshot_bytes`).
    pub fn size(&self) -> u64 {
        self.size
    }
    /// Encodes a retired child's residue record canonically.
    pub fn encode_residue(r: &RetiredChild) -> EncodedProcess {
        let text = String::from_utf8(r.canonical()).unwrap_or_default();
        let size = text.len() as u64;
        EncodedProcess {
            key: Arc::from(r.process_id.as_str()),
            text: Arc::from(text.into_bytes()),
            digest: std::sync::OnceLock::new(),
            entry: std::sync::OnceLock::new(),
            segments: Vec::new(),
            size,
        }
    }
    /// The record as a cut entry carrying its bytes.
    pub fn entry(&self) -> CutEntry {
        self.cut_entry().clone()
    }
    /// The record as a cut entry, borrowed (built on first use).
    pub fn cut_entry(&self) -> &CutEntry {
        self.entry.get_or_init(|| CutEntry::trusted(self.key.clone(), self.text.clone(), self.digest()))
    }
    /// The canonical bytes of the record.
    pub fn bytes(&self) -> &[u8] {
        &self.text
    }
    pub fn len(&self) -> usize {
        self.text.len()
    }
    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }
    /// SHA-256 of the record's canonical bytes.
    pub fn digest(&self) -> Digest {
        *self.digest.get_or_init(|| Digest::of(&self.text))
    }
}

impl PartialEq for EncodedProcess {
    fn eq(&self, other: &EncodedProcess) -> bool {
        self.text == other.text
    }
}
impl Eq for EncodedProcess {}

/// A validated, canonical tree cut.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeSnapshot {
    pub root_id: ProcessId,
    pub incarnation: IncarnationId,
    pub limits: TreeLimits,
    /// Sorted by (depth, ProcessId). Each record is shared (`Arc`) with the owner's table and
    /// with the other snapshots that hold it unchanged, so a cut copies no Process.
    processes: Vec<Arc<Process>>,
    /// The canonical bytes of each record of `processes`, in the same order.
    encoded: Vec<Arc<EncodedProcess>>,
    /// The residue records of retired children, sorted by ProcessId, with their canonical
    /// bytes; in the cut they follow every Process record. Shared by every snapshot holding
    /// the same residues (`kernel::residue_set`).
    residues: Arc<ResidueSet>,
    /// The cut of these records (whole); its digest is the snapshot's.
    cut: TreeCut,
}

impl TreeSnapshot {
    /// Builds and validates a snapshot from in-memory state (its Processes and the residue
    /// records of its retired children), encoding every record.
    pub fn build(
        root_id: ProcessId,
        incarnation: IncarnationId,
        limits: TreeLimits,
        processes: impl IntoIterator<Item = Process>,
        residues: impl IntoIterator<Item = RetiredChild>,
    ) -> Result<TreeSnapshot, SnapshotError> {
        let members = processes.into_iter().map(|p| {
            let encoded = Arc::new(EncodedProcess::encode(&p));
            (Arc::new(p), encoded)
        });
        TreeSnapshot::assemble_shared(root_id, incarnation, limits, members.collect(), encode_residues(residues))
    }

    /// Assembles and validates a snapshot from records whose canonical bytes are already
    /// encoded (the owner's pre-commit path: only changed records were re-encoded). Each
    /// `EncodedProcess` must be the encoding of the Process beside it; the owner keeps that
    /// true by dropping a record's encoding whenever it hands out the record mutably.
    pub fn assemble(
        root_id: ProcessId,
        incarnation: IncarnationId,
        limits: TreeLimits,
        members: Vec<(Process, Arc<EncodedProcess>)>,
        residues: Vec<(Arc<RetiredChild>, Arc<EncodedProcess>)>,
    ) -> Result<TreeSnapshot, SnapshotError> {
        let members = members.into_iter().map(|(p, e)| (Arc::new(p), e)).collect();
        TreeSnapshot::assemble_shared(root_id, incarnation, limits, members, residues)
    }

    /// [`TreeSnapshot::assemble`] of records already shared (`Arc`): none is copied.
    pub fn assemble_shared(
        root_id: ProcessId,
        incarnation: IncarnationId,
        limits: TreeLimits,
        members: Vec<(Arc<Process>, Arc<EncodedProcess>)>,
        residues: Vec<(Arc<RetiredChild>, Arc<EncodedProcess>)>,
    ) -> Result<TreeSnapshot, SnapshotError> {
        let snap =
            TreeSnapshot::assemble_unchecked(root_id, incarnation, limits, members, Arc::new(ResidueSet::new(residues)), None);
        snap.validate(&|_| true)?;
        Ok(snap)
    }

    /// [`TreeSnapshot::assemble`] for records of which only those `fresh` says are new since
    /// a cut that validated: per-record rules run only for those, tree-wide rules for all.
    /// `envelope` must be `CutEnvelope::keel` of this root, writer and limits (the owner
    /// keeps it across cuts: it changes only with the writer). `previous` (the last cut the
    /// owner assembled) lends the digests of its chunks that recur (`TreeCut::new_reusing`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn assemble_changed(
        root_id: ProcessId,
        incarnation: IncarnationId,
        limits: TreeLimits,
        envelope: CutEnvelope,
        members: Vec<(Arc<Process>, Arc<EncodedProcess>)>,
        residues: Arc<ResidueSet>,
        fresh: &dyn Fn(&ProcessId) -> bool,
        previous: Option<&TreeCut>,
    ) -> Result<TreeSnapshot, SnapshotError> {
        let snap =
            TreeSnapshot::assemble_with_envelope(root_id, incarnation, limits, envelope, members, residues, previous);
        snap.validate(fresh)?;
        Ok(snap)
    }

    fn assemble_unchecked(
        root_id: ProcessId,
        incarnation: IncarnationId,
        limits: TreeLimits,
        members: Vec<(Arc<Process>, Arc<EncodedProcess>)>,
        residues: Arc<ResidueSet>,
        previous: Option<&TreeCut>,
    ) -> TreeSnapshot {
        let envelope = CutEnvelope::keel(&root_id, &incarnation, &limits.to_json());
        TreeSnapshot::assemble_with_envelope(root_id, incarnation, limits, envelope, members, residues, previous)
    }

    fn assemble_with_envelope(
        root_id: ProcessId,
        incarnation: IncarnationId,
        limits: TreeLimits,
        envelope: CutEnvelope,
        mut members: Vec<(Arc<Process>, Arc<EncodedProcess>)>,
        residues: Arc<ResidueSet>,
        previous: Option<&TreeCut>,
    ) -> TreeSnapshot {
        members.sort_by(|a, b| (a.0.relation.depth, &a.0.id).cmp(&(b.0.relation.depth, &b.0.id)));
        let (processes, encoded): (Vec<Arc<Process>>, Vec<Arc<EncodedProcess>>) = members.into_iter().unzip();
        // Process records in (depth, id) order, residue records by id, then every referenced
        // segment record once, by key. Keys are Process ids (a residue's: the retired
        // child's), unique in a validated cut (duplicates fail `validate`), and segment keys,
        // unique by construction and never a Process id.
        // Borrowed entries: only the chunks that differ from `previous` clone theirs.
        let segments = super::segment_record::sorted_distinct_refs(encoded.iter().flat_map(|e| e.segments.iter()));
        let entries: Vec<&CutEntry> = encoded
            .iter()
            .chain(residues.encoded())
            .map(|e| e.cut_entry())
            .chain(segments.iter().map(|r| r.cut_entry()))
            .collect();
        let cut = TreeCut::from_refs(root_id.clone(), incarnation.clone(), envelope, &entries, previous);
        TreeSnapshot { root_id, incarnation, limits, processes, encoded, residues, cut }
    }

    /// Strictly decodes and fully validates canonical snapshot bytes.
    pub fn decode(bytes: &[u8]) -> Result<TreeSnapshot, SnapshotError> {
        let limits = crate::json::ParseLimits { max_bytes: usize::MAX, ..Default::default() };
        let value = crate::json::parse_with(bytes, &limits).map_err(DecodeError::from)?;
        let mut r = ObjectReader::new(&value)?;
        let root_id: ProcessId = r.required("root_id")?;
        let incarnation: IncarnationId = r.required("incarnation_id")?;
        let tree_limits: TreeLimits = r.required("tree_limits")?;
        let records = r.required_value("process_snapshots")?;
        r.finish()?;
        let (processes, residues) = decode_records(records)?;
        let snap = TreeSnapshot::build(root_id, incarnation, tree_limits, processes, residues)?;
        // Canonical form is part of the contract: accepted input re-encodes byte-identically
        // (which also refuses records out of order and segment records not in canonical form).
        if **snap.bytes() != *bytes {
            return Err(SnapshotError::Tree("snapshot bytes are not in canonical form".into()));
        }
        Ok(snap)
    }

    /// The whole canonical cut text (built on first use, then shared).
    /// Decodes a stored head strictly and checks it is exactly the cut the store named: the
    /// whole text decodes, and its root, writer and tree digest are the cut's (the reading
    /// half of the pair assertion).
    pub fn from_cut(cut: &TreeCut) -> Result<TreeSnapshot, SnapshotError> {
        let bytes = cut.bytes().map_err(|e| SnapshotError::Tree(format!("a stored head is whole: {e}")))?;
        let snap = TreeSnapshot::decode(&bytes)?;
        if snap.digest() != cut.digest || snap.root_id != cut.root_id || snap.incarnation != cut.incarnation {
            return Err(SnapshotError::Tree("the cut's digest, root or writer differ from its records".into()));
        }
        Ok(snap)
    }

    /// [`TreeSnapshot::decode`] of a whole cut that reuses `previous`'s decoded records where
    /// the cut holds byte-identical ones (same key, same bytes): a reader that follows a
    /// sequence of heads parses each record once, not once per head.
    ///
    /// Same verdict as decoding the whole text: the envelope is parsed from its own bytes and
    /// must be the canonical keel envelope; every other record is parsed, must re-encode
    /// byte-identically and is hashed from its bytes; records must be in canonical order;
    /// per-record rules run for new records (for all when the tree limits changed), tree-wide
    /// rules for the whole cut. Residue records are reused likewise or decoded strictly as
    /// residues. Whenever anything falls outside that plain case (a record that decodes as
    /// neither kind, a non-canonical piece, a different order), it decodes
    /// the whole text instead, so the error a caller sees is the whole decoder's.
    pub fn decode_reusing(cut: &TreeCut, previous: Option<&TreeSnapshot>) -> Result<TreeSnapshot, SnapshotError> {
        let whole = || {
            let bytes = cut.bytes().map_err(|e| SnapshotError::Tree(format!("a cut to decode is whole: {e}")))?;
            TreeSnapshot::decode(&bytes)
        };
        let Some(previous) = previous else { return whole() };
        if !cut.is_whole() {
            return whole();
        }
        // The envelope is the same bytes as the previous head's in every commit of one writer:
        // those decode to the previous head's root, writer and limits (its envelope is the
        // keel envelope of them), so only a new envelope is parsed.
        let (root_id, incarnation, limits) = if cut.envelope() == previous.cut.envelope() {
            (previous.root_id.clone(), previous.incarnation.clone(), previous.limits)
        } else {
            let Some(decoded) = decode_envelope(cut) else { return whole() };
            decoded
        };
        let same_limits = limits == previous.limits;
        let known: BTreeMap<&str, (&Arc<Process>, &Arc<EncodedProcess>)> =
            previous.processes.iter().zip(&previous.encoded).map(|(p, e)| (&*e.key, (p, e))).collect();
        let known_residues: BTreeMap<&str, (&Arc<RetiredChild>, &Arc<EncodedProcess>)> =
            previous.residues.residues().iter().zip(previous.residues.encoded()).map(|(r, e)| (&*e.key, (r, e))).collect();
        let parse_limits = crate::json::ParseLimits { max_bytes: usize::MAX, ..Default::default() };
        // Segment records first (the Process records name them), reusing the previous head's.
        let Some(mut segments) = SegmentTable::of_cut_reusing(cut.entries(), previous.processes.iter().map(|p| &**p)) else { return whole() };
        let mut members = Vec::with_capacity(cut.entries().len());
        let mut residues = Vec::new();
        let mut fresh: BTreeSet<ProcessId> = BTreeSet::new();
        for entry in cut.entries() {
            if entry.key().starts_with(super::segment_record::KEY_PREFIX) {
                continue;
            }
            let Some(bytes) = entry.bytes() else { return whole() };
            if let Some((p, encoded)) = known.get(entry.key()) {
                if same_limits && **bytes == *encoded.bytes() {
                    if !segments.claim(p) {
                        return whole();
                    }
                    members.push((Arc::clone(p), Arc::clone(encoded)));
                    continue;
                }
            }
            // Residue records never change: an identical one is the same residue.
            if let Some((r, encoded)) = known_residues.get(entry.key()) {
                if **bytes == *encoded.bytes() {
                    residues.push((Arc::clone(r), Arc::clone(encoded)));
                    continue;
                }
            }
            // A Process record: split in place, its payloads taken as they are. Anything
            // else (a residue, text the fast decoder declines) is parsed whole.
            if let Some(p) = super::record_decoder::decode_process_record(bytes, &mut |v| segments.resolve_member(v)) {
                let Some(encoded) = EncodedProcess::encode_matching(&p, bytes) else { return whole() };
                if p.id.as_str() != entry.key() {
                    return whole();
                }
                fresh.insert(p.id.clone());
                members.push((Arc::new(p), Arc::new(encoded)));
                continue;
            }
            let Ok(value) = crate::json::parse_with(bytes, &parse_limits) else { return whole() };
            if crate::kernel::retired::is_residue(&value) {
                let Ok(r) = RetiredChild::from_json(&value) else { return whole() };
                let encoded = EncodedProcess::encode_residue(&r);
                if encoded.bytes() != &**bytes || r.process_id.as_str() != entry.key() {
                    return whole();
                }
                residues.push((Arc::new(r), Arc::new(encoded)));
                continue;
            }
            let Ok(p) = Process::decode_record(&value, &mut |v| segments.resolve_member(v)) else { return whole() };
            let Some(encoded) = EncodedProcess::encode_matching(&p, bytes) else { return whole() };
            if p.id.as_str() != entry.key() {
                return whole();
            }
            fresh.insert(p.id.clone());
            members.push((Arc::new(p), Arc::new(encoded)));
        }
        if segments.check_all_used().is_err() {
            return whole();
        }
        // The cut's envelope is the keel envelope of these (checked above), so it is reused.
        let envelope = cut.envelope().clone();
        let residues = Arc::new(ResidueSet::new(residues));
        let snap = TreeSnapshot::assemble_with_envelope(root_id, incarnation, limits, envelope, members, residues, Some(&previous.cut));
        // Canonical order: the assembled (sorted) keys are the cut's keys in the cut's order
        // (Process records, residue records, then segment records).
        if snap.cut.entries().len() != cut.entries().len()
            || snap.cut.entries().iter().zip(cut.entries()).any(|(e, c)| e.key() != c.key())
        {
            return whole();
        }
        snap.validate(&|id| !same_limits || fresh.contains(id))?;
        Ok(snap)
    }

    pub fn bytes(&self) -> &Arc<[u8]> {
        // A snapshot's cut carries every record, so it always has whole bytes; the empty text
        // (which no decoder accepts) is never returned.
        static NONE: std::sync::OnceLock<Arc<[u8]>> = std::sync::OnceLock::new();
        self.cut.whole_ref().unwrap_or_else(|| NONE.get_or_init(|| Arc::from(&[][..])))
    }
    /// The tree digest (see `kernel::commit::cut`).
    pub fn digest(&self) -> Digest {
        self.cut.digest
    }
    /// The whole cut of this snapshot, as committed.
    pub fn tree_cut(&self) -> &TreeCut {
        &self.cut
    }
    pub fn processes(&self) -> &[Arc<Process>] {
        &self.processes
    }
    /// The canonical bytes of each record, in the order of [`TreeSnapshot::processes`].
    pub fn encoded(&self) -> &[Arc<EncodedProcess>] {
        &self.encoded
    }
    /// The residue records of retired children, sorted by ProcessId.
    pub fn residues(&self) -> &[Arc<RetiredChild>] {
        self.residues.residues()
    }
    /// The canonical bytes of each residue record, in the order of [`TreeSnapshot::residues`].
    pub fn residues_encoded(&self) -> &[Arc<EncodedProcess>] {
        self.residues.encoded()
    }
    /// The residue records as the shared set they are.
    pub fn residue_set(&self) -> &Arc<ResidueSet> {
        &self.residues
    }
    /// The residue record of retired child `id`.
    pub fn residue(&self, id: &ProcessId) -> Option<&RetiredChild> {
        let residues = self.residues.residues();
        let i = residues.binary_search_by(|r| r.process_id.cmp(id)).ok()?;
        Some(&residues[i])
    }
    /// The residue records of the children `parent` retired.
    pub fn residues_of<'a>(&'a self, parent: &'a ProcessId) -> impl Iterator<Item = &'a RetiredChild> + 'a {
        self.residues.residues().iter().map(|r| &**r).filter(move |r| &r.parent_id == parent)
    }
    pub fn process(&self, id: &ProcessId) -> Option<&Process> {
        self.processes.iter().find(|p| &p.id == id).map(|p| &**p)
    }
    pub fn root(&self) -> &Process {
        // validate() guarantees the root exists.
        self.processes.iter().find(|p| p.id == self.root_id).unwrap_or(&self.processes[0])
    }
    /// Re-stamps the cut with a new writer (activation).
    pub fn with_incarnation(&self, incarnation: IncarnationId) -> Result<TreeSnapshot, SnapshotError> {
        let members = self.processes.iter().cloned().zip(self.encoded.iter().cloned()).collect();
        let snap = TreeSnapshot::assemble_unchecked(
            self.root_id.clone(),
            incarnation,
            self.limits,
            members,
            self.residues.clone(),
            None,
        );
        snap.validate(&|_| true)?;
        Ok(snap)
    }

    fn validate(&self, fresh: &dyn Fn(&ProcessId) -> bool) -> Result<(), SnapshotError> {
        // Byte limits, as simple caps in place of live byte reservations held for every
        // admission. The owner checks the candidate cut at preparation and fails the
        // Process with `engine.limit.snapshot`; this check is the backstop that keeps an
        // oversized cut from ever being committed.
        let total = self.cut.whole_len().unwrap_or(u64::MAX);
        if let Some(limit) = self.limits.max_snapshot_bytes().maximum() {
            if total > limit {
                return Err(SnapshotError::TooLarge { what: "tree snapshot".into(), bytes: total, limit });
            }
        }
        if let Some(limit) = self.limits.max_process_snapshot_bytes().maximum() {
            for (p, encoded) in self.processes.iter().zip(&self.encoded) {
                let bytes = encoded.size();
                if bytes > limit {
                    return Err(SnapshotError::TooLarge { what: format!("process {}", p.id), bytes, limit });
                }
            }
        }
        let by_id: BTreeMap<&ProcessId, &Process> = self.processes.iter().map(|p| (&p.id, &**p)).collect();
        if by_id.len() != self.processes.len() {
            return Err(SnapshotError::Tree("duplicate process ids".into()));
        }
        let root = by_id.get(&self.root_id).ok_or_else(|| SnapshotError::Tree("root missing".into()))?;
        if !root.relation.is_root() {
            return Err(SnapshotError::Tree("root process is not a root".into()));
        }
        if !self.limits.max_tree_processes().admits(0, self.processes.len() as u64) {
            return Err(SnapshotError::Tree("tree exceeds max_tree_processes".into()));
        }
        let mut child_debits: BTreeMap<&ProcessId, Allocation> = BTreeMap::new();
        // Child keys per parent (a parent has many children, a tree few parents: keying by
        // parent first keeps each lookup to one comparison of the long parent ids).
        // Child keys of live children per parent (a parent has many children, a tree few
        // parents: keying by parent first keeps each lookup to one comparison of the long
        // parent ids).
        let mut child_keys: BTreeMap<&ProcessId, BTreeSet<&str>> = BTreeMap::new();
        let mut children_of: BTreeMap<&ProcessId, Vec<&Process>> = BTreeMap::new();
        // A retired child keeps its key and identity for good and never comes back; its
        // residue lives as long as its parent does, and the parent counts its residues. The
        // rules among residues alone were checked once for this residue set (its index,
        // `kernel::residue_set`); the rules relating them to this cut's Processes run here, in
        // O(parents + Processes). Any fault sends the check through every residue in id
        // order, so the fault named is the first residue's, as it always was.
        let index = self.residues.index().filter(|index| {
            index.parents().all(|parent| by_id.contains_key(parent)) && self.processes.iter().all(|p| !self.residues.holds_id(&p.id))
        });
        let Some(index) = index else { return Err(self.residue_fault(&by_id)) };
        for p in &self.processes {
            if p.relation.root_id != self.root_id {
                return Err(perr(p, "belongs to another root"));
            }
            if fresh(&p.id) {
                validate_process(p, &self.limits)?;
            }
            if let (Some(parent_id), Some(key)) = (&p.relation.parent_id, &p.relation.child_key) {
                let parent = by_id.get(parent_id).ok_or_else(|| perr(p, "parent missing"))?;
                if p.relation.depth != parent.relation.depth + 1 {
                    return Err(perr(p, "depth is not parent depth + 1"));
                }
                if !p.capabilities.is_subset_of(&parent.capabilities) {
                    return Err(perr(p, "capabilities exceed the parent's"));
                }
                let zero = super::resource::Allocation::ZERO;
                let debit = parent
                    .budget
                    .grant_child(&super::resource::Usage::default(), &zero, &zero, &p.budget)
                    .map_err(|e| perr(p, format!("budget is not a legal grant from the parent: {e}")))?;
                let total = child_debits.entry(parent_id).or_default();
                *total = total.checked_add(&debit).ok_or_else(|| perr(p, "child debits overflow"))?;
                if index.holds_key(parent_id, key) {
                    if let Some(r) = self.residues().iter().find(|r| &r.parent_id == parent_id && r.child_key == *key) {
                        return Err(rerr(r, ResidueFault::DuplicateChildKey(key.to_string())));
                    }
                }
                if !child_keys.entry(parent_id).or_default().insert(key.as_str()) {
                    return Err(perr(p, "duplicate child key under one parent"));
                }
                children_of.entry(parent_id).or_default().push(p);
            }
        }
        for p in &self.processes {
            let counted = index.count(&p.id);
            if counted != p.retired.count {
                let fault = ResidueFault::CountMismatch { parent: p.id.to_string(), recorded: p.retired.count, counted };
                let witness = self.residues().iter().find(|r| r.parent_id == p.id);
                return Err(SnapshotError::Residue {
                    process: witness.map_or_else(|| p.id.to_string(), |r| r.process_id.to_string()),
                    fault,
                });
            }
            // Grants are permanent debits: retired children keep theirs in the aggregate.
            let debits = child_debits.remove(&p.id).unwrap_or_default();
            if debits.checked_add(&p.retired.debits) != Some(p.allocated) {
                return Err(perr(p, "allocated_resources differ from the sum of child debits"));
            }
            let children = children_of.get(&p.id).map(Vec::as_slice).unwrap_or(&[]);
            let lifetime = (children.len() as u64).saturating_add(p.retired.len());
            if !self.limits.max_children().admits(0, lifetime) {
                return Err(perr(p, "lifetime children exceed max_children"));
            }
            let active = children.iter().filter(|c| !c.is_terminal()).count();
            if active > self.limits.max_active_children() as usize {
                return Err(perr(p, "active children exceed max_active_children"));
            }
            // Framework operations inside prepared batches agree with the tree.
            if let Some(prepared) = &p.prepared {
                for e in &prepared.effects {
                    match (&e.effect, &e.phase) {
                        (Effect::Framework(FrameworkEffect::StartChild(spec)), EffectPhase::Settled(s))
                            if s.status == super::signal::SettlementStatus::Succeeded =>
                        {
                            let child_id = ProcessId::child(&e.id);
                            let child = by_id.get(&child_id).ok_or_else(|| perr(p, "a settled child start names an absent child"))?;
                            if child.relation.parent_id.as_ref() != Some(&p.id)
                                || child.relation.child_key.as_ref() != Some(&spec.key)
                                || child.deployment_ref != spec.deployment_ref
                                || child.budget != spec.budget
                                || child.capabilities != spec.capabilities
                                || child.child_request_digest != Some(spec.request_digest())
                            {
                                return Err(perr(p, "a settled child start disagrees with its child"));
                            }
                        }
                        (Effect::Framework(_), EffectPhase::Pending) => {
                            return Err(perr(p, "framework effects are never pending in a cut"));
                        }
                        _ => {}
                    }
                }
            }
        }
        if !child_debits.is_empty() {
            return Err(SnapshotError::Tree("child debits reference an absent parent".into()));
        }
        Ok(())
    }

    /// The first residue-rule fault of this cut, walking every residue in id order (the
    /// slow path of `validate`, taken only when a residue rule fails).
    fn residue_fault(&self, by_id: &BTreeMap<&ProcessId, &Process>) -> SnapshotError {
        let mut keys: BTreeMap<&ProcessId, BTreeSet<&str>> = BTreeMap::new();
        let mut previous: Option<&ProcessId> = None;
        for r in self.residues() {
            if !by_id.contains_key(&r.parent_id) {
                return rerr(r, ResidueFault::ParentAbsent(r.parent_id.to_string()));
            }
            if by_id.contains_key(&r.process_id) {
                return rerr(r, ResidueFault::LiveId);
            }
            // Residues are in id order (every set is sorted so): a repeated id is the one
            // before it.
            if previous == Some(&r.process_id) {
                return rerr(r, ResidueFault::DuplicateId);
            }
            previous = Some(&r.process_id);
            if !keys.entry(&r.parent_id).or_default().insert(r.child_key.as_str()) {
                return rerr(r, ResidueFault::DuplicateChildKey(r.child_key.to_string()));
            }
        }
        // The index refused the set, or the tree check did, so one of the rules above fails.
        SnapshotError::Tree("a residue rule failed without a residue naming it".into())
    }
}

/// Test-only escape hatches so the invariant oracle's tests can build cuts that `build`
/// would reject (a real writer can never produce them).
#[cfg(test)]
impl TreeSnapshot {
    /// Encodes `processes` canonically WITHOUT validating them.
    pub(crate) fn build_unchecked_for_tests(
        root_id: ProcessId,
        incarnation: IncarnationId,
        limits: TreeLimits,
        processes: Vec<Process>,
        residues: Vec<RetiredChild>,
    ) -> TreeSnapshot {
        let members = processes.into_iter().map(|p| {
            let encoded = Arc::new(EncodedProcess::encode(&p));
            (Arc::new(p), encoded)
        });
        TreeSnapshot::assemble_unchecked(
            root_id,
            incarnation,
            limits,
            members.collect(),
            Arc::new(ResidueSet::new(encode_residues(residues))),
            None,
        )
    }
    /// Replaces the digest WITHOUT checking it against the records.
    pub(crate) fn with_digest_unchecked_for_tests(mut self, digest: Digest) -> TreeSnapshot {
        self.cut.digest = digest;
        self
    }
}

/// The Process and residue records of a cut's record list, the Processes' segment references
/// resolved against the list's segment records (every one of which some state must
/// reference).
fn decode_records(records: &Json) -> Result<(Vec<Process>, Vec<RetiredChild>), SnapshotError> {
    let items = records.as_array().ok_or_else(|| DecodeError::invalid("an array of records").in_member("process_snapshots"))?;
    let mut table = SegmentTable::default();
    for (i, item) in items.iter().enumerate() {
        if super::segment_record::is_segment_record(item) {
            table.insert(i, item)?;
        }
    }
    let (mut processes, mut residues) = (Vec::new(), Vec::new());
    for (i, item) in items.iter().enumerate() {
        if super::segment_record::is_segment_record(item) {
            continue;
        }
        // A record is a residue exactly when it carries the residue marker; either kind
        // decodes strictly as itself (`kernel::retired`).
        if crate::kernel::retired::is_residue(item) {
            residues.push(RetiredChild::from_json(item).map_err(|e| e.in_index(i).in_member("process_snapshots"))?);
            continue;
        }
        match Process::decode_record(item, &mut |v| table.resolve_member(v)) {
            Ok(p) => processes.push(p),
            Err(e) => {
                return Err(match table.take_failure() {
                    Some(failure) => failure.into(),
                    None => e.in_index(i).in_member("process_snapshots").into(),
                })
            }
        }
    }
    table.check_all_used()?;
    Ok((processes, residues))
}

/// Every segment record the Processes of `encoded` reference, once each, sorted by key.
pub(crate) fn segment_records(encoded: &[Arc<EncodedProcess>]) -> Vec<Arc<SegmentRecord>> {
    super::segment_record::sorted_distinct(encoded.iter().flat_map(|e| e.segments.iter()))
}

/// The envelope's canonical text with no records (its length is the cut's fixed part).
fn write_cut(root: &ProcessId, inc: &IncarnationId, limits: &TreeLimits) -> String {
    use crate::json::Member;
    let records: Vec<&str> = Vec::new();
    let (root, inc, limits) = (root.to_json(), inc.to_json(), limits.to_json());
    let mut out = String::with_capacity(1024);
    crate::json::write_object(
        &mut out,
        vec![
            ("root_id", Member::Value(&root)),
            ("incarnation_id", Member::Value(&inc)),
            ("tree_limits", Member::Value(&limits)),
            ("process_snapshots", Member::CanonicalArray(&records)),
        ],
    );
    out
}

/// The byte length of the cut whose records have canonical lengths `records` (in cut order),
/// without writing it.
pub fn cut_len(root: &ProcessId, inc: &IncarnationId, limits: &TreeLimits, records: &[u64]) -> u64 {
    let envelope = write_cut(root, inc, limits).len() as u64;
    let commas = records.len().saturating_sub(1) as u64;
    records.iter().fold(envelope.saturating_add(commas), |sum, r| sum.saturating_add(*r))
}

/// Each residue record with its canonical encoding.
fn encode_residues(residues: impl IntoIterator<Item = RetiredChild>) -> Vec<(Arc<RetiredChild>, Arc<EncodedProcess>)> {
    residues
        .into_iter()
        .map(|r| {
            let encoded = Arc::new(EncodedProcess::encode_residue(&r));
            (Arc::new(r), encoded)
        })
        .collect()
}

/// The cut as a JSON value, built from the Processes' record forms, the residue records and
/// the segment records (an encoding independent of the cached record bytes).
fn encode(
    root: &ProcessId,
    inc: &IncarnationId,
    limits: &TreeLimits,
    processes: &[Arc<Process>],
    residues: &[Arc<RetiredChild>],
) -> Json {
    let mut records: Vec<Json> =
        processes.iter().map(|p| p.to_record_json()).chain(residues.iter().map(|r| r.to_json())).collect();
    let mut sink = RecordSink { fresh: true, ..Default::default() };
    for p in processes {
        sink.chain(&p.committed_state.segments);
        if let Some(prepared) = &p.prepared {
            sink.chain(&prepared.candidate_state.segments);
        }
    }
    for r in super::segment_record::sorted_distinct(&sink.records) {
        let unbounded = crate::json::ParseLimits { max_bytes: usize::MAX, ..Default::default() };
        records.push(crate::json::parse_with(r.bytes(), &unbounded).unwrap_or(Json::Null));
    }
    ObjectBuilder::new()
        .field("root_id", root)
        .field("incarnation_id", inc)
        .field("tree_limits", limits)
        .value("process_snapshots", Json::Array(records))
        .build()
}

/// Per-Process validation.
pub fn validate_process(p: &Process, limits: &TreeLimits) -> Result<(), SnapshotError> {
    p.relation.validate(&p.id).map_err(|e| perr(p, e.to_string()))?;
    if p.relation.is_root() == p.child_request_digest.is_some() {
        return Err(perr(p, "child_request_digest is present iff the process is a child"));
    }
    if p.relation.depth > limits.max_depth() {
        return Err(perr(p, "depth exceeds max_depth"));
    }
    p.budget.check(&p.usage(), &p.allocated).map_err(|e| perr(p, e.to_string()))?;
    if p.mailbox.pending_count() > u64::from(limits.max_pending_signals()) {
        return Err(perr(p, "pending signals exceed max_pending_signals"));
    }
    let terminal = p.is_terminal();
    match (&p.finish, terminal) {
        (Some(f), true) => {
            if f.termination.status() != p.status {
                return Err(perr(p, "termination status differs from status"));
            }
            if (p.status == Status::Completed) != f.output.is_some() {
                return Err(perr(p, "exactly Completed has output"));
            }
            if !p.pending_control.is_empty() {
                return Err(perr(p, "a terminal process has no pending control"));
            }
            let unknown = p.prepared.as_ref().map(|s| s.unknown_ids()).unwrap_or_default();
            if f.termination.unresolved_effect_ids != unknown {
                return Err(perr(p, "termination unresolved ids differ from the batch's unknowns"));
            }
            if p.current_wait_id.is_some() {
                return Err(perr(p, "a terminal process has no current wait"));
            }
        }
        (None, false) => {}
        _ => return Err(perr(p, "terminal ⇔ finish facts present")),
    }
    if let Some(prepared) = &p.prepared {
        if p.status == Status::Completed {
            return Err(perr(p, "a completed process has no prepared step"));
        }
        if p.status == Status::Waiting || p.status == Status::Paused {
            return Err(perr(p, "a waiting or paused process has no prepared step"));
        }
        if prepared.sequence != p.committed_steps.checked_add(1).ok_or_else(|| perr(p, "step counter overflow"))? {
            return Err(perr(p, "prepared sequence must be committed_steps + 1"));
        }
        if u64::from(prepared.intent.consumed()) > p.mailbox.pending_count() {
            return Err(perr(p, "prepared consumption exceeds pending signals"));
        }
        if p.prepared_effects < prepared.effects.len() as u64 {
            return Err(perr(p, "prepared_effects is smaller than the batch"));
        }
        if terminal && prepared.has_pending() {
            return Err(perr(p, "a terminal process has no pending effect"));
        }
        for e in &prepared.effects {
            if let Effect::Framework(FrameworkEffect::WaitChildren(spec)) = &e.effect {
                spec.validate().map_err(|err| perr(p, err.to_string()))?;
            }
        }
    }
    match p.status {
        Status::Waiting => {
            let wait = p.current_wait_id.as_ref().ok_or_else(|| perr(p, "waiting requires a current wait"))?;
            let state = p.mailbox.wait(wait).ok_or_else(|| perr(p, "current wait does not exist"))?;
            if state.closed || state.answered_by.is_some() {
                return Err(perr(p, "current wait must be open and unanswered"));
            }
        }
        Status::Running if p.current_wait_id.is_some() => {
            return Err(perr(p, "a running process has no current wait"));
        }
        _ => {}
    }
    Ok(())
}

impl ToJson for TreeSnapshot {
    fn to_json(&self) -> Json {
        encode(&self.root_id, &self.incarnation, &self.limits, &self.processes, self.residues.residues())
    }
}

impl TreeSnapshot {
    /// Rebuilds the frozen request of a dispatcher Effect in this cut (no AttemptId, this
    /// cut's incarnation), so a host or dispatcher helper can construct a valid settlement
    /// for an Unknown after a restart.
    pub fn effect_request(
        &self,
        process: &ProcessId,
        effect: &super::ids::EffectId,
    ) -> Option<super::dispatcher::EffectRequest> {
        let p = self.process(process)?;
        let prepared = p.prepared.as_ref()?;
        let index = prepared.effect_index(effect)?;
        let Effect::Dispatcher(payload) = &prepared.effects[index].effect else { return None };
        Some(super::dispatcher::EffectRequest {
            incarnation: self.incarnation.clone(),
            deployment_ref: p.deployment_ref.clone(),
            process_id: p.id.clone(),
            relation: p.relation.clone(),
            step_sequence: prepared.sequence,
            batch_index: u32::try_from(index).ok()?,
            effect_id: effect.clone(),
            attempt_id: None,
            payload: payload.clone(),
            segments: prepared.candidate_state.segments.clone(),
        })
    }
}
