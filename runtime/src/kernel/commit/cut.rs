//! A tree cut as the committer sees it: an envelope plus an ordered list of keyed records.
//!
//! * The **envelope** is the cut's canonical text around its records: `head`, then the
//!   records' canonical bytes joined by `,`, then `tail` (for a keel cut: the JSON object up
//!   to `"process_snapshots":[` and from its `]` on; that member holds every record, the name
//!   is historical). It names the root, the writer incarnation and the tree limits.
//! * Each **entry** is `(key, digest, bytes)`: `key` names the record (the Process id text for
//!   a Process record, `segment:<hex of the record digest>` for a segment record, see
//!   `kernel::segment_record`; keys are free text), `digest` is SHA-256 of the record's
//!   canonical bytes.
//! * The **tree digest** is `SHA-256("tree-cut/2" ‖ 0 ‖ root ‖ 0 ‖ incarnation ‖ 0 ‖ H(head)
//!   ‖ H(tail) ‖ n ‖ C₁ ‖ … ‖ Cₘ)` with `H` a raw 32-byte SHA-256, `n` the record count as 8
//!   bytes big-endian and `Cᵢ` the **chunk digests**: the ordered entry list is split into
//!   content-defined chunks, a chunk ending after every entry whose record digest's last byte
//!   has its low four bits zero (about one entry in 16) and at the end of the list, and
//!   `Cᵢ = SHA-256("tree-cut-chunk" ‖ (key ‖ 0 ‖ D)*)` over the chunk's entries with `D` the
//!   record's raw 32-byte digest (keys cannot contain NUL and digests have a fixed length, so
//!   the encoding is unambiguous). Root and incarnation ids contain no NUL either.
//!
//!   It covers the whole cut (envelope, every key, every record digest, their order: a chunk
//!   list determines the entry list) and is a deterministic function of
//!   `(root, incarnation, envelope digests, [(key, digest)])`, since where a chunk ends
//!   depends only on the entries. What chunking buys is reuse: an insertion, removal or change
//!   alters only the chunks holding it, so a cut built from the previous one
//!   ([`TreeCut::new_reusing`]) rehashes only its changed chunks and takes the others'
//!   digests from the previous cut (after checking their entries' keys and digests are
//!   equal, a comparison of 64-byte pieces). Deltas and resolution match chunks by digest
//!   the same way, so a commit's cost is O(changed records) hashing plus O(records) pointer
//!   copies and comparisons. The boundary uses the digest's last byte, not its first: segment
//!   records are ordered by digest, so a first-byte rule would put every boundary among the
//!   first segments. Every tree digest, from scratch or reusing, is computed by the one
//!   function [`tree_digest_chunks`] (`tree_digest` is it without a previous cut).
//!
//!   This definition replaced (as a format break) an earlier one hashing every entry's key
//!   and `sha256:<hex>` digest text in one pass: stored heads whose digests were computed the
//!   old way no longer verify.
//!
//! A cut is **whole** when every entry carries its bytes, and a **delta** when some entries
//! carry only `(key, digest)`: "unchanged from the head this commit advances from". The kernel
//! commits deltas; a store resolves them against its head ([`TreeCut::resolve`]) and refuses
//! one naming a record its head lacks ([`CutError::MissingRecord`]). Heads are always whole.
//!
//! Invariants: keys are non-empty, at most [`MAX_KEY_BYTES`], free of NUL and control
//! characters, and unique within a cut; `digest` is the tree digest of the envelope and
//! entries (every constructor computes it); a carried record's digest is the SHA-256 of its
//! bytes (checked by [`CutEntry::new`], trusted from the kernel's cache otherwise).

use crate::json::{Digest, Json, Member};
use crate::kernel::ids::{IncarnationId, ProcessId};
use sha2::{Digest as _, Sha256};
use std::sync::{Arc, OnceLock};

/// The longest record key.
pub const MAX_KEY_BYTES: usize = 512;

/// Why a cut could not be built, split or resolved.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CutError {
    #[error("invalid record key {key:?}: {reason}")]
    BadKey { key: String, reason: &'static str },
    #[error("record key {key:?} appears twice in one cut")]
    DuplicateKey { key: String },
    /// A delta names a record (by key and digest) that the head it advances from lacks.
    #[error("the cut keeps record {key:?} ({digest}) unchanged, but the head it advances from lacks it")]
    MissingRecord { key: String, digest: Digest },
    /// The whole cut text does not split into an envelope and keyed records.
    #[error("whole cut does not split into records: {0}")]
    Malformed(String),
}

/// The canonical text around a cut's records, with its two digests cached.
#[derive(Clone, PartialEq, Eq)]
pub struct CutEnvelope {
    head: Arc<[u8]>,
    tail: Arc<[u8]>,
    head_digest: Digest,
    tail_digest: Digest,
}

impl CutEnvelope {
    pub fn new(head: impl Into<Arc<[u8]>>, tail: impl Into<Arc<[u8]>>) -> CutEnvelope {
        let (head, tail) = (head.into(), tail.into());
        let (head_digest, tail_digest) = (Digest::of(&head), Digest::of(&tail));
        CutEnvelope { head, tail, head_digest, tail_digest }
    }

    /// The envelope of a keel tree cut: the canonical JSON object
    /// `{"incarnation_id":…,"process_snapshots":[…],"root_id":…,"tree_limits":…}` split around
    /// the records.
    pub fn keel(root: &ProcessId, incarnation: &IncarnationId, limits: &Json) -> CutEnvelope {
        use crate::json::ToJson;
        let (root, incarnation) = (root.to_json(), incarnation.to_json());
        let mut text = String::with_capacity(256);
        crate::json::write_object(
            &mut text,
            vec![
                ("root_id", Member::Value(&root)),
                ("incarnation_id", Member::Value(&incarnation)),
                ("tree_limits", Member::Value(limits)),
                ("process_snapshots", Member::CanonicalArray(&[])),
            ],
        );
        // The member name is a canonical JSON string, so it occurs once, outside any value.
        const SPLIT: &str = "\"process_snapshots\":[";
        let at = text.find(SPLIT).map_or(text.len(), |i| i + SPLIT.len());
        CutEnvelope::new(text.as_bytes()[..at].to_vec(), text.as_bytes()[at..].to_vec())
    }

    pub fn head(&self) -> &[u8] {
        &self.head
    }
    pub fn tail(&self) -> &[u8] {
        &self.tail
    }
    /// The head text as the shared buffer it is held in (a record lists it without a copy).
    pub(crate) fn head_shared(&self) -> &Arc<[u8]> {
        &self.head
    }
    /// The tail text as the shared buffer it is held in.
    pub(crate) fn tail_shared(&self) -> &Arc<[u8]> {
        &self.tail
    }
    pub fn len(&self) -> usize {
        self.head.len() + self.tail.len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl std::fmt::Debug for CutEnvelope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CutEnvelope").field("bytes_len", &self.len()).finish()
    }
}

/// One keyed record of a cut; `bytes` is `None` when the record is kept from the head.
#[derive(Clone, PartialEq, Eq)]
pub struct CutEntry {
    key: Arc<str>,
    digest: Digest,
    bytes: Option<Arc<[u8]>>,
}

impl CutEntry {
    /// A carried record; its digest is computed here.
    pub fn new(key: impl Into<Arc<str>>, bytes: impl Into<Arc<[u8]>>) -> CutEntry {
        let bytes = bytes.into();
        CutEntry { key: key.into(), digest: Digest::of(&bytes), bytes: Some(bytes) }
    }
    /// A carried record whose digest the caller already computed from `bytes` (the kernel's
    /// per-record cache).
    pub(crate) fn trusted(key: Arc<str>, bytes: Arc<[u8]>, digest: Digest) -> CutEntry {
        CutEntry { key, digest, bytes: Some(bytes) }
    }
    /// A record kept unchanged from the head the commit advances from.
    pub fn kept(key: impl Into<Arc<str>>, digest: Digest) -> CutEntry {
        CutEntry { key: key.into(), digest, bytes: None }
    }
    pub fn key(&self) -> &str {
        &self.key
    }
    pub fn digest(&self) -> Digest {
        self.digest
    }
    /// The record's bytes, if this entry carries them.
    pub fn bytes(&self) -> Option<&Arc<[u8]>> {
        self.bytes.as_ref()
    }
}

impl std::fmt::Debug for CutEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CutEntry")
            .field("key", &self.key)
            .field("digest", &self.digest)
            .field("bytes_len", &self.bytes.as_ref().map(|b| b.len()))
            .finish()
    }
}

/// An already-encoded tree cut as produced by the kernel: the unit a committer stores as
/// head. `digest` is the tree digest (module docs); stores compare cuts by it and never parse
/// records.
#[derive(Clone)]
pub struct TreeCut {
    pub root_id: ProcessId,
    pub incarnation: IncarnationId,
    pub digest: Digest,
    envelope: CutEnvelope,
    /// The content-defined chunks of the entry list with their digests (module docs), in
    /// order, each holding its entries. A chunk's entries are shared (one `Arc`) by every
    /// cut that holds the chunk unchanged, so copying, diffing, resolving and dropping a cut
    /// costs O(chunks) plus O(entries of changed chunks), not O(entries).
    chunks: Arc<[Chunk]>,
    /// The number of entries.
    len: usize,
    /// Whether every entry carries its bytes (no kept chunk, no kept entry).
    carries_all: bool,
    /// The flat entry list, built on first request (`entries`) and shared by clones.
    flat: Arc<OnceLock<Arc<[CutEntry]>>>,
    /// The whole canonical text, built on first request and shared by clones.
    whole: Arc<OnceLock<Arc<[u8]>>>,
}

impl PartialEq for TreeCut {
    fn eq(&self, other: &TreeCut) -> bool {
        self.same_cut(other)
            && self.envelope == other.envelope
            && self.len == other.len
            && self.views().zip(other.views()).all(|(a, b)| {
                a.0.key == b.0.key && a.0.digest == b.0.digest && a.1 == b.1 && (!a.1 || a.0.bytes == b.0.bytes)
            })
    }
}
impl Eq for TreeCut {}

impl std::fmt::Debug for TreeCut {
    // The bytes can be a megabyte; their sizes are what a diagnostic needs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TreeCut")
            .field("root_id", &self.root_id)
            .field("incarnation", &self.incarnation)
            .field("digest", &self.digest)
            .field("records", &self.len)
            .field("carried_bytes", &self.carried_bytes())
            .finish()
    }
}

impl TreeCut {
    /// Builds a cut (whole or delta), checking the keys and computing the tree digest.
    pub fn new(
        root_id: ProcessId,
        incarnation: IncarnationId,
        envelope: CutEnvelope,
        entries: Vec<CutEntry>,
    ) -> Result<TreeCut, CutError> {
        let mut seen = std::collections::BTreeSet::new();
        for e in &entries {
            check_key(&e.key)?;
            if !seen.insert(&*e.key) {
                return Err(CutError::DuplicateKey { key: e.key.to_string() });
            }
        }
        Ok(TreeCut::new_unchecked(root_id, incarnation, envelope, entries))
    }

    /// Builds a cut whose keys the caller guarantees valid and unique (the kernel: Process
    /// ids, unique by construction of its table).
    pub(crate) fn new_unchecked(
        root_id: ProcessId,
        incarnation: IncarnationId,
        envelope: CutEnvelope,
        entries: Vec<CutEntry>,
    ) -> TreeCut {
        TreeCut::new_reusing(root_id, incarnation, envelope, entries, None)
    }

    /// [`TreeCut::new_unchecked`] taking the digests of chunks that recur unchanged from
    /// `previous` (the last cut the caller built): only changed chunks are hashed. The digest
    /// is the one a from-scratch build computes (same function, module docs).
    pub(crate) fn new_reusing(
        root_id: ProcessId,
        incarnation: IncarnationId,
        envelope: CutEnvelope,
        entries: Vec<CutEntry>,
        previous: Option<&TreeCut>,
    ) -> TreeCut {
        TreeCut::from_refs(root_id, incarnation, envelope, &entries, previous)
    }

    /// [`TreeCut::new_reusing`] over borrowed entries: a chunk that recurs from `previous`
    /// (same keys and digests, every record carried in both) shares `previous`'s entries
    /// instead of copying them, so only the entries of changed chunks are cloned.
    pub(crate) fn from_refs<E: std::borrow::Borrow<CutEntry>>(
        root_id: ProcessId,
        incarnation: IncarnationId,
        envelope: CutEnvelope,
        entries: &[E],
        previous: Option<&TreeCut>,
    ) -> TreeCut {
        let (digest, chunks) =
            tree_digest_chunks(&root_id, &incarnation, &envelope, entries, previous.map(|p| &p.chunks[..]));
        TreeCut::of_chunks(root_id, incarnation, digest, envelope, chunks)
    }

    fn of_chunks(
        root_id: ProcessId,
        incarnation: IncarnationId,
        digest: Digest,
        envelope: CutEnvelope,
        chunks: Vec<Chunk>,
    ) -> TreeCut {
        let len = chunks.last().map_or(0, |c| c.end);
        let carries_all = chunks.iter().all(|c| c.carries_all && !c.kept);
        TreeCut {
            root_id,
            incarnation,
            digest,
            envelope,
            chunks: chunks.into(),
            len,
            carries_all,
            flat: Arc::new(OnceLock::new()),
            whole: Arc::new(OnceLock::new()),
        }
    }

    /// Every entry in cut order, with whether this cut carries its bytes (an entry of a kept
    /// chunk holds the base's bytes in memory but is not carried).
    fn views(&self) -> impl Iterator<Item = (&CutEntry, bool)> + '_ {
        self.chunks.iter().flat_map(|c| c.entries.iter().map(move |e| (e, !c.kept && e.bytes.is_some())))
    }

    /// A cut known only by its root, writer and digest, holding no records: what a store that
    /// keeps records on disk hands the rules when the request carries every record (the rules
    /// compare digests; a delta resolved against it is refused with `MissingRecord`).
    pub fn named(root_id: ProcessId, incarnation: IncarnationId, digest: Digest) -> TreeCut {
        TreeCut {
            root_id,
            incarnation,
            digest,
            envelope: CutEnvelope::new(Vec::new(), Vec::new()),
            chunks: Arc::from(Vec::new()),
            len: 0,
            carries_all: true,
            flat: Arc::new(OnceLock::new()),
            whole: Arc::new(OnceLock::new()),
        }
    }

    /// Whether two cuts name the same snapshot of the same writer ("head == snapshot").
    pub fn same_cut(&self, other: &TreeCut) -> bool {
        self.digest == other.digest
            && self.incarnation == other.incarnation
            && self.root_id == other.root_id
    }

    pub fn envelope(&self) -> &CutEnvelope {
        &self.envelope
    }
    /// Every entry, in cut order (the flat list is built on first use and shared by clones).
    pub fn entries(&self) -> &[CutEntry] {
        self.flat.get_or_init(|| {
            self.views().map(|(e, carried)| if carried { e.clone() } else { CutEntry::kept(e.key.clone(), e.digest) }).collect()
        })
    }
    /// The number of entries.
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Whether every entry carries its bytes.
    pub fn is_whole(&self) -> bool {
        self.carries_all
    }
    /// The entries that carry bytes (in a delta: the changed records).
    pub fn carried(&self) -> impl Iterator<Item = &CutEntry> {
        self.chunks.iter().filter(|c| !c.kept).flat_map(|c| c.entries.iter().filter(|e| e.bytes.is_some()))
    }
    /// Bytes this cut carries: the envelope plus every carried record (what a delta store
    /// writes for it).
    pub fn carried_bytes(&self) -> u64 {
        let records: usize = self.carried().map(|e| e.bytes.as_ref().map_or(0, |b| b.len())).sum();
        u64::try_from(self.envelope.len() + records).unwrap_or(u64::MAX)
    }

    /// The length of the whole canonical text, without building it (`None` for a delta).
    pub fn whole_len(&self) -> Option<u64> {
        if !self.carries_all {
            return None;
        }
        let mut sum = self.envelope.len() + self.len.saturating_sub(1);
        for c in self.chunks.iter() {
            sum += c.bytes_len;
        }
        u64::try_from(sum).ok()
    }

    /// The whole canonical cut text (`head`, records joined by `,`, `tail`), built on first
    /// use. A delta has no whole text: it names the record it lacks.
    pub fn bytes(&self) -> Result<Arc<[u8]>, CutError> {
        if let Some(b) = self.whole.get() {
            return Ok(b.clone());
        }
        let mut out = Vec::with_capacity(usize::try_from(self.whole_len().unwrap_or(0)).unwrap_or(0));
        out.extend_from_slice(&self.envelope.head);
        for (i, (e, carried)) in self.views().enumerate() {
            let (true, Some(b)) = (carried, &e.bytes) else {
                return Err(CutError::MissingRecord { key: e.key.to_string(), digest: e.digest });
            };
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(b);
        }
        out.extend_from_slice(&self.envelope.tail);
        Ok(self.whole.get_or_init(|| out.into()).clone())
    }

    /// The whole text by reference (built on first use), or `None` for a delta.
    pub fn whole_ref(&self) -> Option<&Arc<[u8]>> {
        if self.whole.get().is_none() {
            self.bytes().ok()?;
        }
        self.whole.get()
    }

    /// The delta of this cut against `base`: every entry whose key and digest `base` holds
    /// drops its bytes. Same tree digest.
    ///
    /// A chunk whose digest `base` also has is kept whole-sale (equal chunk digests mean equal
    /// `(key, digest)` lists): it shares this cut's entries, marked kept, in O(1). Only
    /// entries of the other chunks are looked up, among the entries of `base`'s chunks this
    /// cut lacks (keys are unique within a cut, so a record of a changed chunk that `base`
    /// holds sits in one of those).
    pub fn delta_from(&self, base: &TreeCut) -> TreeCut {
        let matching = ChunkMatch::new(self, base);
        let chunks = self
            .chunks
            .iter()
            .map(|c| {
                if matching.base_chunk(&c.digest).is_some() {
                    return Chunk { kept: true, ..c.clone() };
                }
                let entries: Arc<[CutEntry]> = c
                    .entries
                    .iter()
                    .map(|e| {
                        let carried = !c.kept && e.bytes.is_some();
                        let in_base = matching.unmatched_base(e.key(), &e.digest).is_some();
                        if carried && !in_base { e.clone() } else { CutEntry::kept(e.key.clone(), e.digest) }
                    })
                    .collect();
                Chunk::new(c.end, c.digest, entries)
            })
            .collect();
        TreeCut::of_chunks(self.root_id.clone(), self.incarnation.clone(), self.digest, self.envelope.clone(), chunks)
    }

    /// The whole cut of this (possibly delta) cut, taking each kept record from `base` (the
    /// head the commit advances from) by key and digest. A whole cut is returned as is.
    /// Records are matched chunk by chunk as in [`TreeCut::delta_from`]: a chunk kept
    /// whole-sale takes `base`'s chunk (its shared entries) in O(1).
    pub fn resolve(&self, base: Option<&TreeCut>) -> Result<TreeCut, CutError> {
        if self.is_whole() {
            return Ok(self.clone());
        }
        let empty;
        let base = match base {
            Some(b) => b,
            None => {
                empty = TreeCut::named(self.root_id.clone(), self.incarnation.clone(), self.digest);
                &empty
            }
        };
        let matching = ChunkMatch::new(self, base);
        let mut chunks = Vec::with_capacity(self.chunks.len());
        for c in self.chunks.iter() {
            if c.carries_all && !c.kept {
                chunks.push(c.clone());
                continue;
            }
            let from_base = matching.base_chunk(&c.digest).map(|i| &base.chunks[i]);
            // The common case: an unchanged chunk, the base's carrying every record.
            if let Some(b) = from_base.filter(|b| b.carries_all && !b.kept && b.entries.len() == c.entries.len()) {
                chunks.push(Chunk { end: c.end, ..b.clone() });
                continue;
            }
            let mut entries = Vec::with_capacity(c.entries.len());
            for (i, e) in c.entries.iter().enumerate() {
                if !c.kept && e.bytes.is_some() {
                    entries.push(e.clone());
                    continue;
                }
                let b = match from_base {
                    Some(chunk) => chunk.entries.get(i).filter(|_| !chunk.kept),
                    None => matching.unmatched_base(e.key(), &e.digest),
                };
                match b {
                    Some(b) if b.key == e.key && b.digest == e.digest && b.bytes.is_some() => entries.push(b.clone()),
                    _ => return Err(CutError::MissingRecord { key: e.key.to_string(), digest: e.digest }),
                }
            }
            chunks.push(Chunk::new(c.end, c.digest, entries.into()));
        }
        Ok(TreeCut::of_chunks(self.root_id.clone(), self.incarnation.clone(), self.digest, self.envelope.clone(), chunks))
    }

    /// Splits a whole keel cut text into its envelope and records: Process records keyed by
    /// their `process_id`, segment records (objects with `entries` and no `process_id`) by
    /// `segment:<hex of their SHA-256>`. Structural only: the text must be canonical JSON with
    /// exactly the cut's four members; the records' meaning is the kernel's to validate
    /// (`TreeSnapshot::decode`).
    pub fn from_whole(bytes: &[u8]) -> Result<TreeCut, CutError> {
        let bad = |m: String| CutError::Malformed(m);
        let limits = crate::json::ParseLimits { max_bytes: usize::MAX, ..Default::default() };
        let value = crate::json::parse_with(bytes, &limits).map_err(|e| bad(e.to_string()))?;
        if value.to_canonical_bytes() != bytes {
            return Err(bad("the text is not canonical JSON".into()));
        }
        let object = value.as_object().ok_or_else(|| bad("not an object".into()))?;
        if object.len() != 4 {
            return Err(bad("a cut has exactly root_id, incarnation_id, tree_limits and process_snapshots".into()));
        }
        use crate::json::FromJson;
        let member = |key: &str| value.get(key).unwrap_or(&Json::Null);
        let root_id = ProcessId::from_json(member("root_id")).map_err(|e| bad(format!("root_id: {e}")))?;
        let incarnation =
            IncarnationId::from_json(member("incarnation_id")).map_err(|e| bad(format!("incarnation_id: {e}")))?;
        let limits = value.get("tree_limits").ok_or_else(|| bad("tree_limits missing".into()))?;
        let records = value
            .get("process_snapshots")
            .and_then(Json::as_array)
            .ok_or_else(|| bad("process_snapshots is not an array".into()))?;
        let mut entries = Vec::with_capacity(records.len());
        for (i, record) in records.iter().enumerate() {
            let bytes = record.to_canonical_bytes();
            // A Process record is keyed by its `process_id`; a segment record (an object with
            // `entries` and no `process_id`) by its content digest.
            let entry = if crate::kernel::segment_record::is_segment_record(record) {
                let digest = Digest::of(&bytes);
                CutEntry::trusted(crate::kernel::segment_record::key_of(digest), bytes.into(), digest)
            } else {
                let key = record
                    .get("process_id")
                    .and_then(Json::as_str)
                    .ok_or_else(|| bad(format!("process_snapshots[{i}] is neither a Process record nor a segment record")))?;
                CutEntry::new(key, bytes)
            };
            entries.push(entry);
        }
        let envelope = CutEnvelope::keel(&root_id, &incarnation, limits);
        let cut = TreeCut::new(root_id, incarnation, envelope, entries)?;
        // The pieces reassemble into exactly the input (the split is lossless).
        if *cut.bytes()? != *bytes {
            return Err(bad("the cut does not reassemble from its records".into()));
        }
        Ok(cut)
    }
}

fn check_key(key: &str) -> Result<(), CutError> {
    let reason = if key.is_empty() {
        "empty"
    } else if key.len() > MAX_KEY_BYTES {
        "longer than the maximum key length"
    } else if key.chars().any(char::is_control) {
        "contains a control character"
    } else {
        return Ok(());
    };
    Err(CutError::BadKey { key: key.chars().take(64).collect(), reason })
}

/// One content-defined chunk of a cut's entry list: it ends before entry `end` (module docs)
/// and holds its entries, shared by every cut holding the chunk unchanged.
#[derive(Clone, Debug)]
pub(crate) struct Chunk {
    end: usize,
    digest: Digest,
    entries: Arc<[CutEntry]>,
    /// In a delta: the whole chunk is kept from the base. Its entries are then the source
    /// cut's (they may hold bytes in memory), but this cut carries none of them.
    kept: bool,
    /// Whether every entry holds its bytes.
    carries_all: bool,
    /// The sum of the entries' byte lengths.
    bytes_len: usize,
}

impl Chunk {
    fn new(end: usize, digest: Digest, entries: Arc<[CutEntry]>) -> Chunk {
        let carries_all = entries.iter().all(|e| e.bytes.is_some());
        let bytes_len = entries.iter().map(|e| e.bytes.as_ref().map_or(0, |b| b.len())).sum();
        Chunk { end, digest, entries, kept: false, carries_all, bytes_len }
    }
}

/// Chunks are equal when they cover the same entry range with the same digest (the digest
/// names the entries) and are kept alike.
impl PartialEq for Chunk {
    fn eq(&self, other: &Chunk) -> bool {
        self.end == other.end && self.digest == other.digest && self.kept == other.kept
    }
}
impl Eq for Chunk {}

/// Whether a chunk ends after an entry with this record digest: the low four bits of the last
/// byte are zero (one entry in 16 on average; the last byte because segment records are
/// ordered by their digest's first bytes).
fn ends_chunk(d: &Digest) -> bool {
    d.0[31] & 0x0f == 0
}

/// How two cuts' chunks correspond: per chunk digest of `base` that `this` also has, its
/// index in `base`; and the entries of `base`'s chunks that `this` lacks. Sorted vectors, not
/// maps: a cut has tens of chunks and a commit changes a few, and this is built twice per
/// commit (delta, then resolution).
struct ChunkMatch<'a> {
    /// `(chunk digest, index in base)`, sorted by digest.
    base: Vec<(Digest, usize)>,
    /// The entries of `base`'s unmatched chunks, sorted by record digest (then key).
    unmatched: Vec<&'a CutEntry>,
}

impl<'a> ChunkMatch<'a> {
    fn new(this: &TreeCut, base: &'a TreeCut) -> ChunkMatch<'a> {
        let mut ours: Vec<Digest> = this.chunks.iter().map(|c| c.digest).collect();
        ours.sort_unstable();
        let mut by_digest = Vec::new();
        let mut unmatched = Vec::new();
        for (i, c) in base.chunks.iter().enumerate() {
            if ours.binary_search(&c.digest).is_ok() {
                by_digest.push((c.digest, i));
            } else if !c.kept {
                unmatched.extend(c.entries.iter());
            }
        }
        by_digest.sort_unstable_by_key(|(d, _)| *d);
        unmatched.sort_unstable_by(|a: &&CutEntry, b: &&CutEntry| a.digest.cmp(&b.digest).then_with(|| a.key.cmp(&b.key)));
        ChunkMatch { base: by_digest, unmatched }
    }

    /// The index in `base` of its chunk with this digest, if `this` has it too.
    fn base_chunk(&self, digest: &Digest) -> Option<usize> {
        self.base.binary_search_by_key(digest, |(d, _)| *d).ok().map(|i| self.base[i].1)
    }

    /// The entry of `base` with this key and record digest among its chunks `this` lacks.
    fn unmatched_base(&self, key: &str, digest: &Digest) -> Option<&'a CutEntry> {
        let start = self.unmatched.partition_point(|e| e.digest < *digest);
        self.unmatched[start..].iter().take_while(|e| e.digest == *digest).find(|e| &*e.key == key).copied()
    }
}

/// Whether two entries have the same key and record digest. Shared bytes (the same cached
/// record in two cuts, the common case) have the same digest (a carried record's digest is its
/// bytes' SHA-256), so pointers settle most comparisons.
fn same_entry(a: &CutEntry, b: &CutEntry) -> bool {
    let same_bytes = matches!((&a.bytes, &b.bytes), (Some(x), Some(y)) if Arc::ptr_eq(x, y));
    (same_bytes || a.digest == b.digest) && (Arc::ptr_eq(&a.key, &b.key) || a.key == b.key)
}

/// The tree digest (module docs), from scratch.
pub fn tree_digest(
    root: &ProcessId,
    incarnation: &IncarnationId,
    envelope: &CutEnvelope,
    entries: &[CutEntry],
) -> Digest {
    tree_digest_chunks(root, incarnation, envelope, entries, None).0
}

/// The tree digest and the chunks of `entries` (module docs). A chunk of `previous` that
/// recurs, entry for entry by key and digest, where a chunk of `entries` starts contributes
/// its cached digest instead of being rehashed (and shares its entries when both carry every
/// record); every other chunk is hashed. Whether or not a chunk is reused, it has the same
/// entries and so the same digest: the result does not depend on `previous`.
pub(crate) fn tree_digest_chunks<E: std::borrow::Borrow<CutEntry>>(
    root: &ProcessId,
    incarnation: &IncarnationId,
    envelope: &CutEnvelope,
    entries: &[E],
    previous: Option<&[Chunk]>,
) -> (Digest, Vec<Chunk>) {
    // A previous chunk by the record digest of its first entry (a record digest names one
    // entry: keys live inside records, and segment keys are their digests).
    // A sorted vector, not a map: a cut has tens of chunks, and this runs on every cut.
    let mut starts: Vec<(Digest, &Chunk)> = previous
        .unwrap_or_default()
        .iter()
        .filter_map(|c| Some((c.entries.first()?.digest, c)))
        .collect();
    starts.sort_unstable_by_key(|(d, _)| *d);
    let start_of = |d: &Digest| starts.binary_search_by_key(d, |(s, _)| *s).ok().map(|i| starts[i].1);
    let entry = |i: usize| -> &CutEntry { entries[i].borrow() };
    let mut chunks = Vec::with_capacity(entries.len() / 8 + 1);
    let mut at = 0;
    while at < entries.len() {
        let reused = start_of(&entry(at).digest).and_then(|old| {
            let end = at + old.entries.len();
            let new = entries.get(at..end)?;
            let mut carried = true;
            for (n, o) in new.iter().zip(old.entries.iter()) {
                let n = n.borrow();
                if !same_entry(n, o) {
                    return None;
                }
                carried &= n.bytes.is_some();
            }
            // The chunk must also end at the same place here: after a boundary entry, or at
            // the end of both lists (a previous last chunk without a boundary).
            let closes = old.entries.last().is_some_and(|o| ends_chunk(&o.digest)) || end == entries.len();
            if !closes {
                return None;
            }
            // Equal keys and digests, both carrying every record: the same entries.
            Some(if carried && old.carries_all && !old.kept {
                Chunk { end, ..(*old).clone() }
            } else {
                Chunk::new(end, old.digest, new.iter().map(|e| e.borrow().clone()).collect())
            })
        });
        let chunk = reused.unwrap_or_else(|| {
            let mut h = Sha256::new();
            h.update(b"tree-cut-chunk");
            let mut end = at;
            while end < entries.len() {
                let e = entry(end);
                h.update(e.key.as_bytes());
                h.update([0u8]);
                h.update(e.digest.0);
                end += 1;
                if ends_chunk(&e.digest) {
                    break;
                }
            }
            let own: Arc<[CutEntry]> = entries[at..end].iter().map(|e| e.borrow().clone()).collect();
            Chunk::new(end, Digest(h.finalize().into()), own)
        });
        at = chunk.end;
        chunks.push(chunk);
    }
    let mut h = Sha256::new();
    h.update(b"tree-cut/2");
    for part in [root.as_str().as_bytes(), incarnation.as_str().as_bytes()] {
        h.update([0u8]);
        h.update(part);
    }
    h.update([0u8]);
    h.update(envelope.head_digest.0);
    h.update(envelope.tail_digest.0);
    h.update(u64::try_from(entries.len()).unwrap_or(u64::MAX).to_be_bytes());
    for c in &chunks {
        h.update(c.digest.0);
    }
    (Digest(h.finalize().into()), chunks)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> ProcessId {
        ProcessId::parse("process:root").unwrap()
    }
    fn inc() -> IncarnationId {
        IncarnationId::from_hex(&format!("{:032x}", 1)).unwrap()
    }
    fn cut(records: &[(&str, &str)]) -> TreeCut {
        let entries = records.iter().map(|(k, v)| CutEntry::new(*k, v.as_bytes().to_vec())).collect();
        TreeCut::new(root(), inc(), CutEnvelope::keel(&root(), &inc(), &Json::Null), entries).unwrap()
    }

    #[test]
    fn whole_text_splits_back_into_the_same_cut() {
        let c = cut(&[
            ("process:root", r#"{"process_id":"process:root","x":1}"#),
            ("process:a", r#"{"process_id":"process:a","x":2}"#),
        ]);
        let bytes = c.bytes().unwrap();
        assert!(bytes.starts_with(b"{\"incarnation_id\""));
        let back = TreeCut::from_whole(&bytes).unwrap();
        assert_eq!(back, c);
        assert_eq!(c.whole_len(), Some(bytes.len() as u64));
        // Not canonical, or not a cut: refused with a typed error.
        let mut spaced = bytes.to_vec();
        spaced.insert(1, b' ');
        assert!(matches!(TreeCut::from_whole(&spaced), Err(CutError::Malformed(_))));
        assert!(matches!(TreeCut::from_whole(b"[]"), Err(CutError::Malformed(_))));
    }

    #[test]
    fn a_segment_record_is_keyed_by_its_digest_and_anything_else_is_refused() {
        let segment = r#"{"entries":[1]}"#;
        let key = format!("segment:{}", Digest::of(segment.as_bytes()).hex());
        let c = cut(&[("process:root", r#"{"process_id":"process:root"}"#), (&key, segment)]);
        let back = TreeCut::from_whole(&c.bytes().unwrap()).unwrap();
        assert_eq!(back, c);
        assert_eq!(back.entries()[1].key(), key);
        // Neither a Process record nor a segment record: refused.
        let other = cut(&[("process:root", r#"{"process_id":"process:root"}"#), ("x", r#"{"x":1}"#)]);
        assert!(matches!(TreeCut::from_whole(&other.bytes().unwrap()), Err(CutError::Malformed(_))));
    }

    #[test]
    fn the_tree_digest_covers_envelope_keys_digests_and_order() {
        let a = cut(&[("k1", "1"), ("k2", "2")]);
        assert_ne!(a.digest, cut(&[("k2", "2"), ("k1", "1")]).digest);
        assert_ne!(a.digest, cut(&[("k1", "1"), ("k3", "2")]).digest);
        assert_ne!(a.digest, cut(&[("k1", "1"), ("k2", "3")]).digest);
        assert_ne!(a.digest, cut(&[("k1", "1")]).digest);
        let other_env = TreeCut::new(
            root(),
            inc(),
            CutEnvelope::keel(&root(), &inc(), &Json::Bool(true)),
            a.entries().to_vec(),
        )
        .unwrap();
        assert_ne!(a.digest, other_env.digest);
    }

    #[test]
    fn deltas_resolve_against_their_base_and_name_what_is_missing() {
        let base = cut(&[("k1", "1"), ("k2", "2")]);
        let next = cut(&[("k1", "1"), ("k2", "22"), ("k3", "3")]);
        let delta = next.delta_from(&base);
        assert_eq!(delta.digest, next.digest);
        assert!(!delta.is_whole());
        assert_eq!(delta.carried().map(|e| e.key()).collect::<Vec<_>>(), ["k2", "k3"]);
        assert!(matches!(delta.bytes(), Err(CutError::MissingRecord { .. })));
        assert_eq!(delta.resolve(Some(&base)).unwrap(), next);
        let other = cut(&[("k1", "9")]);
        assert!(matches!(delta.resolve(Some(&other)), Err(CutError::MissingRecord { key, .. }) if key == "k1"));
        assert!(matches!(delta.resolve(None), Err(CutError::MissingRecord { .. })));
    }

    /// Record bytes whose digest's last byte does (`boundary`) or does not end a chunk.
    fn record(n: u32, boundary: bool) -> String {
        (0u32..)
            .map(|salt| format!("r{n}-{salt}"))
            .find(|r| ends_chunk(&Digest::of(r.as_bytes())) == boundary)
            .unwrap_or_default()
    }
    fn keyed(records: &[(String, String)]) -> TreeCut {
        let borrowed: Vec<(&str, &str)> = records.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        cut(&borrowed)
    }
    /// `n` records, every `every`th one ending a chunk.
    fn records(n: u32, every: u32) -> Vec<(String, String)> {
        (0..n).map(|i| (format!("k{i}"), record(i, (i + 1) % every == 0))).collect()
    }
    fn reused(records: &[(String, String)], previous: &TreeCut) -> TreeCut {
        let entries = records.iter().map(|(k, v)| CutEntry::new(k.as_str(), v.as_bytes().to_vec())).collect();
        TreeCut::new_reusing(root(), inc(), CutEnvelope::keel(&root(), &inc(), &Json::Null), entries, Some(previous))
    }

    #[test]
    fn chunks_end_after_boundary_entries_and_at_the_end() {
        let c = keyed(&records(10, 4));
        let ends: Vec<usize> = c.chunks.iter().map(|c| c.end).collect();
        assert_eq!(ends, [4, 8, 10]);
        // A boundary entry last: no empty chunk after it. No entry: no chunk.
        assert_eq!(keyed(&records(8, 4)).chunks.iter().map(|c| c.end).collect::<Vec<_>>(), [4, 8]);
        assert!(keyed(&[]).chunks.is_empty());
        assert_ne!(keyed(&[]).digest, cut(&[("k", "")]).digest);
    }

    #[test]
    fn an_edit_rehashes_only_its_own_chunk() {
        let base = records(40, 4);
        let before = keyed(&base);
        // Insertion inside the second chunk, a removal in the fourth, a change in the sixth.
        let mut edited = base.clone();
        edited[21].1 = record(1000, false);
        edited.remove(13);
        edited.insert(5, ("new".into(), record(2000, false)));
        let after = keyed(&edited);
        let changed: Vec<usize> = (0..after.chunks.len())
            .filter(|i| !before.chunks.iter().any(|b| b.digest == after.chunks[*i].digest))
            .collect();
        assert_eq!(changed, [1, 3, 5]);
        // Reusing the previous cut gives the from-scratch digest and chunks.
        let again = reused(&edited, &before);
        assert_eq!((again.digest, &again.chunks), (after.digest, &after.chunks));
    }

    #[test]
    fn reuse_respects_chunk_ends() {
        // The previous last chunk had no boundary entry: appending extends it, so its cached
        // digest must not be reused for the longer chunk.
        let short = records(6, 4);
        let mut long = short.clone();
        long.push(("k6".into(), record(6, false)));
        let prev = keyed(&short);
        assert_eq!(reused(&long, &prev).digest, keyed(&long).digest);
        // A boundary entry removed: two chunks merge; added: one splits.
        let base = records(12, 4);
        let mut merged = base.clone();
        merged.remove(3);
        assert_eq!(reused(&merged, &keyed(&base)).digest, keyed(&merged).digest);
        assert_eq!(reused(&base, &keyed(&merged)).digest, keyed(&base).digest);
        // Reordering whole chunks changes the digest; reuse still agrees.
        let mut swapped = base[4..8].to_vec();
        swapped.extend_from_slice(&base[..4]);
        swapped.extend_from_slice(&base[8..]);
        assert_ne!(keyed(&swapped).digest, keyed(&base).digest);
        assert_eq!(reused(&swapped, &keyed(&base)).digest, keyed(&swapped).digest);
    }

    #[test]
    fn chunk_matching_deltas_carry_exactly_the_changed_records() {
        let base = records(30, 4);
        let before = keyed(&base);
        let mut edited = base.clone();
        edited[9].1 = record(900, false);
        // A record moved between chunks keeps its key and digest: it travels by reference.
        let moved = edited.remove(2);
        edited.insert(20, moved);
        let after = keyed(&edited);
        let delta = after.delta_from(&before);
        assert_eq!(delta.carried().map(|e| e.key()).collect::<Vec<_>>(), ["k9"]);
        assert_eq!(delta.resolve(Some(&before)).unwrap(), after);
        // A delta naming a record the base lacks is refused with the record named.
        let mut fewer = base.clone();
        fewer.remove(2);
        let missing = after.delta_from(&before).resolve(Some(&keyed(&fewer)));
        assert!(matches!(missing, Err(CutError::MissingRecord { key, .. }) if key == "k2"));
    }

    proptest::proptest! {
        /// Reusing any previous cut's chunks gives the from-scratch digest, chunks included, and
        /// delta/resolve round-trip against it.
        #[test]
        fn reuse_equals_from_scratch(
            base in proptest::collection::vec((0u32..60, proptest::bool::weighted(0.2)), 0..50),
            edits in proptest::collection::vec((0usize..60, 0u8..3, 0u32..60, proptest::bool::ANY), 0..8),
        ) {
            let mut seen = std::collections::BTreeSet::new();
            let base: Vec<(String, String)> = base
                .into_iter()
                .filter(|(k, _)| seen.insert(*k))
                .map(|(k, b)| (format!("k{k}"), record(k, b)))
                .collect();
            let mut next = base.clone();
            for (at, op, k, b) in edits {
                let at = at % (next.len() + 1);
                let key = format!("k{k}");
                match op {
                    0 if !next.iter().any(|(x, _)| *x == key) => next.insert(at, (key, record(k + 100, b))),
                    1 if at < next.len() => { next.remove(at); }
                    2 if at < next.len() => next[at].1 = record(k + 200, b),
                    _ => {}
                }
            }
            let previous = keyed(&base);
            let scratch = keyed(&next);
            let again = reused(&next, &previous);
            proptest::prop_assert_eq!(again.digest, scratch.digest);
            proptest::prop_assert_eq!(&again.chunks, &scratch.chunks);
            let entries: Vec<CutEntry> = scratch.entries().to_vec();
            proptest::prop_assert_eq!(tree_digest(&root(), &inc(), scratch.envelope(), &entries), scratch.digest);
            let delta = scratch.delta_from(&previous);
            proptest::prop_assert_eq!(delta.digest, scratch.digest);
            proptest::prop_assert_eq!(delta.resolve(Some(&previous)).unwrap(), scratch.clone());
            let carried = delta.carried().count();
            let fresh = next.iter().filter(|r| !base.contains(r)).count();
            proptest::prop_assert_eq!(carried, fresh);
        }
    }

    #[test]
    fn keys_are_checked() {
        let env = || CutEnvelope::keel(&root(), &inc(), &Json::Null);
        let dup = vec![CutEntry::new("k", b"1".to_vec()), CutEntry::new("k", b"2".to_vec())];
        assert!(matches!(TreeCut::new(root(), inc(), env(), dup), Err(CutError::DuplicateKey { .. })));
        for bad in ["", "a\0b", &"x".repeat(MAX_KEY_BYTES + 1)] {
            let e = vec![CutEntry::new(bad, b"1".to_vec())];
            assert!(matches!(TreeCut::new(root(), inc(), env(), e), Err(CutError::BadKey { .. })));
        }
    }
}

/// A whole cut of one record with a chosen digest, for unit tests of the commit rules (which
/// compare digests and never look inside).
#[cfg(test)]
pub(crate) fn test_cut(root: ProcessId, incarnation: IncarnationId, digest: Digest, bytes: Vec<u8>) -> TreeCut {
    let envelope = CutEnvelope::new(Vec::new(), Vec::new());
    let mut cut = TreeCut::new_unchecked(root, incarnation, envelope, vec![CutEntry::new("r", bytes)]);
    cut.digest = digest;
    cut
}
