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
//! * The **tree digest** is `SHA-256("tree-cut" ‖ 0 ‖ root ‖ 0 ‖ incarnation ‖ 0 ‖ D(head) ‖ 0
//!   ‖ D(tail) ‖ 0 ‖ n ‖ (0 ‖ key ‖ 0 ‖ D(record))*)` with `D` the `sha256:<hex>` text of a
//!   SHA-256 and `n` the record count in decimal (the NUL-separated encoding of derived
//!   identities; keys cannot contain NUL). It covers the whole cut, yet costs O(records) once
//!   the record digests are known (the kernel caches them with each record).
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
use std::collections::BTreeMap;
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
    entries: Arc<[CutEntry]>,
    /// The whole canonical text, built on first request and shared by clones.
    whole: Arc<OnceLock<Arc<[u8]>>>,
}

impl PartialEq for TreeCut {
    fn eq(&self, other: &TreeCut) -> bool {
        self.same_cut(other) && self.envelope == other.envelope && self.entries == other.entries
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
            .field("records", &self.entries.len())
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
        let digest = tree_digest(&root_id, &incarnation, &envelope, &entries);
        TreeCut {
            root_id,
            incarnation,
            digest,
            envelope,
            entries: entries.into(),
            whole: Arc::new(OnceLock::new()),
        }
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
            entries: Arc::from(Vec::new()),
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
    /// Every entry, in cut order.
    pub fn entries(&self) -> &[CutEntry] {
        &self.entries
    }
    /// Whether every entry carries its bytes.
    pub fn is_whole(&self) -> bool {
        self.entries.iter().all(|e| e.bytes.is_some())
    }
    /// The entries that carry bytes (in a delta: the changed records).
    pub fn carried(&self) -> impl Iterator<Item = &CutEntry> {
        self.entries.iter().filter(|e| e.bytes.is_some())
    }
    /// Bytes this cut carries: the envelope plus every carried record (what a delta store
    /// writes for it).
    pub fn carried_bytes(&self) -> u64 {
        let records: usize = self.carried().map(|e| e.bytes.as_ref().map_or(0, |b| b.len())).sum();
        u64::try_from(self.envelope.len() + records).unwrap_or(u64::MAX)
    }

    /// The length of the whole canonical text, without building it (`None` for a delta).
    pub fn whole_len(&self) -> Option<u64> {
        let mut sum = self.envelope.len() + self.entries.len().saturating_sub(1);
        for e in self.entries.iter() {
            sum += e.bytes.as_ref()?.len();
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
        for (i, e) in self.entries.iter().enumerate() {
            let Some(b) = &e.bytes else {
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
    pub fn delta_from(&self, base: &TreeCut) -> TreeCut {
        let known: BTreeMap<&str, Digest> = base.entries.iter().map(|e| (&*e.key, e.digest)).collect();
        let entries: Vec<CutEntry> = self
            .entries
            .iter()
            .map(|e| match known.get(&*e.key) {
                Some(d) if *d == e.digest => CutEntry::kept(e.key.clone(), e.digest),
                _ => e.clone(),
            })
            .collect();
        TreeCut { entries: entries.into(), whole: Arc::new(OnceLock::new()), ..self.clone() }
    }

    /// The whole cut of this (possibly delta) cut, taking each kept record from `base` (the
    /// head the commit advances from) by key and digest. A whole cut is returned as is.
    pub fn resolve(&self, base: Option<&TreeCut>) -> Result<TreeCut, CutError> {
        if self.is_whole() {
            return Ok(self.clone());
        }
        let known: BTreeMap<&str, &CutEntry> = base
            .map(|b| b.entries.iter().map(|e| (&*e.key, e)).collect())
            .unwrap_or_default();
        let mut entries = Vec::with_capacity(self.entries.len());
        for e in self.entries.iter() {
            if e.bytes.is_some() {
                entries.push(e.clone());
                continue;
            }
            match known.get(&*e.key) {
                Some(b) if b.digest == e.digest && b.bytes.is_some() => entries.push((*b).clone()),
                _ => return Err(CutError::MissingRecord { key: e.key.to_string(), digest: e.digest }),
            }
        }
        Ok(TreeCut { entries: entries.into(), whole: Arc::new(OnceLock::new()), ..self.clone() })
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

/// The tree digest (module docs).
pub fn tree_digest(
    root: &ProcessId,
    incarnation: &IncarnationId,
    envelope: &CutEnvelope,
    entries: &[CutEntry],
) -> Digest {
    let mut h = Sha256::new();
    let mut text = String::with_capacity(71);
    let part = |h: &mut Sha256, bytes: &[u8]| {
        h.update([0u8]);
        h.update(bytes);
    };
    h.update(b"tree-cut");
    part(&mut h, root.as_str().as_bytes());
    part(&mut h, incarnation.as_str().as_bytes());
    for d in [envelope.head_digest, envelope.tail_digest] {
        digest_text(&mut text, d);
        part(&mut h, text.as_bytes());
    }
    part(&mut h, entries.len().to_string().as_bytes());
    for e in entries {
        part(&mut h, e.key.as_bytes());
        digest_text(&mut text, e.digest);
        part(&mut h, text.as_bytes());
    }
    Digest(h.finalize().into())
}

fn digest_text(out: &mut String, d: Digest) {
    out.clear();
    out.push_str("sha256:");
    crate::text::push_lower_hex(out, &d.0);
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
