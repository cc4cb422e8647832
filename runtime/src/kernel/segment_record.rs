//! Segments as cut records of their own.
//!
//! Every segment a state holds is one immutable record of the cut, hash-linked to the segment
//! before it, so a Process record names its segments in O(1) bytes and a commit carries only
//! the segments its head lacks (a Step that appends k entries carries O(k) bytes).
//!
//! * **Record bytes** (canonical JSON): `{"entries":<the segment's text>,"prev":"sha256:<hex>"}`,
//!   `prev` being the previous segment's *record* digest, omitted for a state's first segment.
//! * **Record digest**: SHA-256 of the record bytes; **key**: `segment:<64 lowercase hex>` of
//!   it. A record digest fixes its predecessor's, so the last record's digest authenticates the
//!   whole chain, and two states share a record only at the same position with the same prefix.
//! * **Reference** (a state's `segments` member inside a Process record):
//!   `{"count":N,"last":"sha256:<hex>"}`, the number of segments and the last record's digest.
//!
//! A segment caches its record for one predecessor ([`super::segment::Segment::record`]), so
//! the bytes are built and hashed once; naming a state's chain walks its cached records
//! (pointer work, no bytes). Decoding ([`SegmentTable`]) resolves each reference by walking
//! `last` back through `prev` exactly `count` links, shares one `Arc<Segment>` per record, and
//! refuses a malformed record, a missing link, a count mismatch, a duplicate and an orphan
//! record no state references (non-canonical bytes are refused by the cut's own check).

use super::commit::CutEntry;
use super::segment::Segment;
use crate::json::{DecodeError, Digest, Json, ObjectReader};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The key prefix of a segment record.
pub const KEY_PREFIX: &str = "segment:";

/// Why a cut's segment records do not resolve.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SegmentRecordError {
    /// The record does not decode: `error` keeps the codec's kind (`UnknownMember`,
    /// `WrongType`, ...) and its path inside the record; `index` is the record's place in the
    /// cut's record list.
    #[error("segment record {index} is malformed: {error}")]
    Malformed { index: usize, error: DecodeError },
    #[error("segment record {key} appears twice")]
    Duplicate { key: String },
    #[error("a state's segment chain ending at {last} lacks record {missing} (link {link} of {count})")]
    MissingLink { last: Digest, missing: Digest, link: usize, count: usize },
    #[error("the segment chain ending at {last} does not have the {count} links its state names")]
    CountMismatch { last: Digest, count: usize },
    #[error("segment record {key} is referenced by no state")]
    Orphan { key: String },
}

/// One segment as a record: its bytes, their digest and key, and the predecessor it names.
pub struct SegmentRecord {
    key: Arc<str>,
    bytes: Arc<[u8]>,
    digest: Digest,
    prev: Option<Digest>,
    /// The record as a cut entry (the same key and bytes), lent to every cut holding it.
    entry: CutEntry,
}

impl SegmentRecord {
    /// Builds the record of `segment` after the record `prev` (copies and hashes its bytes).
    pub(crate) fn build(segment: &Segment, prev: Option<Digest>) -> SegmentRecord {
        let mut text = String::with_capacity(segment.len() + 96);
        text.push_str("{\"entries\":");
        text.push_str(segment.text());
        if let Some(p) = prev {
            text.push_str(",\"prev\":\"sha256:");
            crate::text::push_lower_hex(&mut text, &p.0);
            text.push('"');
        }
        text.push('}');
        let digest = Digest::of(text.as_bytes());
        let (key, bytes): (Arc<str>, Arc<[u8]>) = (key_of(digest), Arc::from(text.into_bytes()));
        let entry = CutEntry::trusted(key.clone(), bytes.clone(), digest);
        SegmentRecord { key, bytes, digest, prev, entry }
    }

    /// The record's key in a cut: `segment:<hex of its digest>`.
    pub fn key(&self) -> &Arc<str> {
        &self.key
    }
    /// The canonical record bytes.
    pub fn bytes(&self) -> &Arc<[u8]> {
        &self.bytes
    }
    pub fn len(&self) -> usize {
        self.bytes.len()
    }
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
    /// SHA-256 of the record bytes.
    pub fn digest(&self) -> Digest {
        self.digest
    }
    /// The previous segment's record digest (`None` for a state's first segment).
    pub fn prev(&self) -> Option<Digest> {
        self.prev
    }
    /// The record as a cut entry carrying its bytes.
    pub fn entry(&self) -> CutEntry {
        self.entry.clone()
    }
    /// The record as a cut entry, borrowed.
    pub fn cut_entry(&self) -> &CutEntry {
        &self.entry
    }
}

impl std::fmt::Debug for SegmentRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SegmentRecord").field("key", &self.key).field("len", &self.bytes.len()).finish()
    }
}

/// The key of the record whose digest is `digest`.
pub fn key_of(digest: Digest) -> Arc<str> {
    let mut key = String::with_capacity(KEY_PREFIX.len() + 64);
    key.push_str(KEY_PREFIX);
    crate::text::push_lower_hex(&mut key, &digest.0);
    Arc::from(key)
}

/// Whether a record of a cut is a segment record: an object without `process_id` that has
/// `entries` (Process records always have `process_id`).
pub fn is_segment_record(value: &Json) -> bool {
    value.as_object().is_some_and(|o| !o.contains_key("process_id") && o.contains_key("entries"))
}

/// Collects the records of the states a Process record encodes.
#[derive(Default)]
pub struct RecordSink {
    /// Every state's records, in chain order, state after state.
    pub records: Vec<Arc<SegmentRecord>>,
    /// Build every record anew instead of using the segments' cached ones (a check that the
    /// caches agree with a fresh encoding).
    pub fresh: bool,
}

impl RecordSink {
    /// Appends the records of `segments` (in order) and returns the state's reference
    /// `(count, last record digest)`, or `None` for a state without segments.
    pub fn chain(&mut self, segments: &[Arc<Segment>]) -> Option<(usize, Digest)> {
        let mut prev = None;
        for s in segments {
            let record = if self.fresh { Arc::new(SegmentRecord::build(s, prev)) } else { s.record(prev) };
            prev = Some(record.digest());
            self.records.push(record);
        }
        prev.map(|last| (segments.len(), last))
    }
}

/// The reference member of a state: `{"count":N,"last":"sha256:<hex>"}`.
pub fn reference_json(count: usize, last: Digest) -> Json {
    crate::json::ObjectBuilder::new().field("count", &(count as u64)).field("last", &last).build()
}

/// Decodes a reference member (`count` within `1..=MAX_STATE_SEGMENTS`).
pub fn decode_reference(value: &Json) -> Result<(usize, Digest), DecodeError> {
    let mut r = ObjectReader::new(value)?;
    let count: u64 = r.required("count")?;
    let last: Digest = r.required("last")?;
    r.finish()?;
    match usize::try_from(count) {
        Ok(n) if n >= 1 && n <= crate::limits::MAX_STATE_SEGMENTS => Ok((n, last)),
        _ => Err(DecodeError::invalid("a segment count within 1..=MAX_STATE_SEGMENTS").in_member("count")),
    }
}

struct Linked {
    segment: Arc<Segment>,
    prev: Option<Digest>,
    used: bool,
}

/// The segment records of one cut being decoded, by record digest.
#[derive(Default)]
pub struct SegmentTable {
    records: BTreeMap<Digest, Linked>,
    /// The first resolution failure (reported as a typed error after the Process decode that
    /// hit it unwinds).
    failed: Option<SegmentRecordError>,
}

impl SegmentTable {
    /// Decodes one segment record (`index` in the cut's record list): an object of exactly
    /// `entries` (an array) and `prev` (a digest, optional), in canonical form.
    pub fn insert(&mut self, index: usize, value: &Json) -> Result<(), SegmentRecordError> {
        let malformed = |error: DecodeError| SegmentRecordError::Malformed { index, error };
        let mut r = ObjectReader::new(value).map_err(malformed)?;
        let entries = r.required_value("entries").map_err(malformed)?;
        let prev: Option<Digest> = r.optional("prev").map_err(malformed)?;
        r.finish().map_err(malformed)?;
        let segment = Segment::from_json(entries).map_err(|e| malformed(e.in_member("entries")))?;
        // Its bytes are the canonical encoding of `value` (entries canonical, `prev` a
        // lowercase digest); whether the *input* bytes were canonical is the cut's check.
        let record = segment.record(prev);
        if self.records.contains_key(&record.digest()) {
            return Err(SegmentRecordError::Duplicate { key: record.key().to_string() });
        }
        self.records.insert(record.digest(), Linked { segment, prev, used: false });
        Ok(())
    }

    /// The table of a whole cut's segment records (entries keyed `segment:`), reusing the
    /// segments the states of `previous` (an earlier decoded cut) hold for records with
    /// identical key and bytes instead of parsing them again. `None` when a record is not
    /// carried, does not decode as a segment record, or is not under its own key.
    pub fn of_cut_reusing<'a>(
        entries: &[CutEntry],
        previous: impl IntoIterator<Item = &'a super::process::Process>,
    ) -> Option<SegmentTable> {
        let mut known: BTreeMap<Digest, (Arc<Segment>, Arc<SegmentRecord>)> = BTreeMap::new();
        for p in previous {
            let states = std::iter::once(&p.committed_state).chain(p.prepared.iter().map(|s| &s.candidate_state));
            for state in states {
                let mut sink = RecordSink::default();
                sink.chain(&state.segments);
                for (segment, record) in state.segments.iter().zip(sink.records) {
                    known.entry(record.digest()).or_insert_with(|| (segment.clone(), record));
                }
            }
        }
        let limits = crate::json::ParseLimits { max_bytes: usize::MAX, ..Default::default() };
        let mut table = SegmentTable::default();
        for (index, entry) in entries.iter().enumerate().filter(|(_, e)| e.key().starts_with(KEY_PREFIX)) {
            let bytes = entry.bytes()?;
            if let Some((segment, record)) = known.get(&entry.digest()) {
                if record.bytes() == bytes && **record.key() == *entry.key() {
                    if table.records.contains_key(&record.digest()) {
                        return None;
                    }
                    let linked = Linked { segment: segment.clone(), prev: record.prev(), used: false };
                    table.records.insert(record.digest(), linked);
                    continue;
                }
            }
            let value = crate::json::parse_with(bytes, &limits).ok()?;
            if !is_segment_record(&value) {
                return None;
            }
            table.insert(index, &value).ok()?;
            let digest = Digest::of(bytes);
            let parsed = table.records.get(&digest)?;
            let record = parsed.segment.record(parsed.prev);
            if *key_of(digest) != *entry.key() || **record.bytes() != **bytes {
                return None;
            }
        }
        Some(table)
    }

    /// Resolves the chains of every state of `p` (a Process record reused unchanged from an
    /// earlier decode) against this table, marking their records used; `false` if one does
    /// not resolve to exactly the segments `p` holds.
    pub fn claim(&mut self, p: &super::process::Process) -> bool {
        let states = std::iter::once(&p.committed_state).chain(p.prepared.iter().map(|s| &s.candidate_state));
        for state in states {
            let Some((count, last)) = RecordSink::default().chain(&state.segments) else { continue };
            match self.resolve(count, last) {
                Ok(resolved) if resolved.iter().zip(&state.segments).all(|(a, b)| a.digest() == b.digest()) => {}
                _ => return false,
            }
        }
        true
    }

    /// The segments of the chain of `count` records ending at `last`, oldest first (each
    /// record's `Arc<Segment>` shared by every state that names it).
    pub fn resolve(&mut self, count: usize, last: Digest) -> Result<Vec<Arc<Segment>>, SegmentRecordError> {
        let mut out = Vec::with_capacity(count.min(1 << 16));
        let mut at = last;
        for link in 0..count {
            let Some(linked) = self.records.get_mut(&at) else {
                return Err(SegmentRecordError::MissingLink { last, missing: at, link, count });
            };
            linked.used = true;
            out.push(linked.segment.clone());
            match (linked.prev, link + 1 == count) {
                (Some(prev), false) => at = prev,
                (None, true) => {
                    out.reverse();
                    return Ok(out);
                }
                _ => return Err(SegmentRecordError::CountMismatch { last, count }),
            }
        }
        Err(SegmentRecordError::CountMismatch { last, count })
    }

    /// [`SegmentTable::resolve`] for a reference member, as a decoder of a state's
    /// `segments`: a failure is kept (see [`SegmentTable::take_failure`]) and surfaces as a
    /// decode error of that member.
    pub fn resolve_member(&mut self, value: &Json) -> Result<Vec<Arc<Segment>>, DecodeError> {
        let (count, last) = decode_reference(value)?;
        self.resolve(count, last).map_err(|e| {
            let error = DecodeError::invalid(e.to_string());
            self.failed.get_or_insert(e);
            error
        })
    }

    /// The first resolution failure, if any.
    pub fn take_failure(&mut self) -> Option<SegmentRecordError> {
        self.failed.take()
    }

    /// Refuses a record no state referenced.
    pub fn check_all_used(&self) -> Result<(), SegmentRecordError> {
        match self.records.iter().find(|(_, l)| !l.used) {
            Some((digest, _)) => Err(SegmentRecordError::Orphan { key: key_of(*digest).to_string() }),
            None => Ok(()),
        }
    }
}

/// The distinct records of `chains` sorted by key (the order of segment records in a cut).
pub fn sorted_distinct<'a>(chains: impl IntoIterator<Item = &'a Arc<SegmentRecord>>) -> Vec<Arc<SegmentRecord>> {
    sorted_distinct_refs(chains).into_iter().cloned().collect()
}

/// [`sorted_distinct`], borrowed.
pub fn sorted_distinct_refs<'a>(chains: impl IntoIterator<Item = &'a Arc<SegmentRecord>>) -> Vec<&'a Arc<SegmentRecord>> {
    let mut all: Vec<&Arc<SegmentRecord>> = chains.into_iter().collect();
    // A key is the prefix plus the digest's lowercase hex, so key order is digest byte order.
    // Comparing the digests' first 8 bytes as one big-endian integer first is the same order
    // as comparing the bytes, without a `memcmp` call per comparison (this sort runs on every
    // cut, over every segment of the tree).
    let prefix = |r: &Arc<SegmentRecord>| {
        let mut head = [0u8; 8];
        head.copy_from_slice(&r.digest.0[..8]);
        u64::from_be_bytes(head)
    };
    all.sort_unstable_by(|a, b| prefix(a).cmp(&prefix(b)).then_with(|| a.digest.0.cmp(&b.digest.0)));
    all.dedup_by(|a, b| a.digest == b.digest);
    all
}

/// The distinct records of two chains given in chain order, `a` then `b` (a committed state
/// and its prepared candidate). Two chains share a record only at the same position with the
/// same prefix, so the shared part is their common prefix: O(length), no sorting.
pub fn union_of_two(a: &[Arc<SegmentRecord>], b: &[Arc<SegmentRecord>]) -> Vec<Arc<SegmentRecord>> {
    let common = a.iter().zip(b).take_while(|(x, y)| x.digest() == y.digest()).count();
    let mut out = Vec::with_capacity(a.len() + b.len() - common);
    out.extend(a.iter().cloned());
    out.extend(b[common..].iter().cloned());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(text: &str) -> Arc<Segment> {
        Segment::from_json(&crate::json::parse(text.as_bytes()).unwrap()).unwrap()
    }

    fn table_of(records: &[Arc<SegmentRecord>]) -> Result<SegmentTable, SegmentRecordError> {
        let mut t = SegmentTable::default();
        for (i, r) in records.iter().enumerate() {
            t.insert(i, &crate::json::parse(r.bytes()).unwrap())?;
        }
        Ok(t)
    }

    #[test]
    fn sorted_distinct_is_digest_order_once_each() {
        let segments: Vec<Arc<Segment>> = (0..40).map(|i| seg(&format!("[{i}]"))).collect();
        let mut sink = RecordSink::default();
        sink.chain(&segments);
        // The same chain twice, and a second chain sharing its prefix.
        sink.chain(&segments);
        sink.chain(&segments[..10]);
        let got: Vec<Digest> = sorted_distinct_refs(&sink.records).iter().map(|r| r.digest()).collect();
        let mut want: Vec<[u8; 32]> = sink.records.iter().map(|r| r.digest().0).collect();
        want.sort();
        want.dedup();
        assert_eq!(got.iter().map(|d| d.0).collect::<Vec<_>>(), want);
        assert_eq!(got.len(), 40);
        let keys: Vec<String> = sorted_distinct(&sink.records).iter().map(|r| key_of(r.digest()).to_string()).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "key order is digest order");
    }

    #[test]
    fn records_link_to_their_predecessor_and_are_cached_once() {
        let (a, b) = (seg("[1]"), seg("[2]"));
        let mut sink = RecordSink::default();
        let (count, last) = sink.chain(&[a.clone(), b.clone()]).unwrap();
        assert_eq!(count, 2);
        let first = &sink.records[0];
        assert_eq!(&**first.bytes(), br#"{"entries":[1]}"#);
        let second = format!(r#"{{"entries":[2],"prev":"{}"}}"#, first.digest());
        assert_eq!(&**sink.records[1].bytes(), second.as_bytes());
        assert_eq!(last, Digest::of(second.as_bytes()));
        assert_eq!(&**sink.records[1].key(), format!("segment:{}", last.hex()));
        // The cache serves the same predecessor again, and a fresh build agrees with it.
        assert!(Arc::ptr_eq(&b.record(Some(first.digest())), &sink.records[1]));
        let mut fresh = RecordSink { fresh: true, ..Default::default() };
        assert_eq!(fresh.chain(&[a, b.clone()]), Some((2, last)));
        // Another predecessor gives another record (not the cached one).
        assert_ne!(b.record(None).digest(), last);
        assert_eq!(RecordSink::default().chain(&[]), None);
    }

    #[test]
    fn a_chain_resolves_to_shared_segments_in_order() {
        let mut sink = RecordSink::default();
        let (_, last2) = sink.chain(&[seg("[1]"), seg("[2]")]).unwrap();
        let (_, last3) = sink.chain(&[seg("[1]"), seg("[2]"), seg("[3]")]).unwrap();
        let records = sorted_distinct(&sink.records);
        assert_eq!(records.len(), 3, "the shared prefix is one set of records");
        let mut t = table_of(&records).unwrap();
        let two = t.resolve(2, last2).unwrap();
        let three = t.resolve(3, last3).unwrap();
        assert_eq!(three.iter().map(|s| s.text()).collect::<Vec<_>>(), ["[1]", "[2]", "[3]"]);
        assert!(Arc::ptr_eq(&two[0], &three[0]) && Arc::ptr_eq(&two[1], &three[1]), "one Arc per record");
        t.check_all_used().unwrap();
    }

    #[test]
    fn dropped_altered_miscounted_duplicate_and_orphan_records_are_refused() {
        let mut sink = RecordSink::default();
        let (_, last) = sink.chain(&[seg("[1]"), seg("[2]"), seg("[3]")]).unwrap();
        let records = sink.records.clone();
        // A dropped middle link.
        let mut t = table_of(&[records[0].clone(), records[2].clone()]).unwrap();
        assert!(matches!(t.resolve(3, last), Err(SegmentRecordError::MissingLink { link: 1, .. })));
        // Counts that are not the chain's length.
        let mut t = table_of(&records).unwrap();
        assert!(matches!(t.resolve(2, last), Err(SegmentRecordError::CountMismatch { .. })));
        assert!(matches!(t.resolve(4, last), Err(SegmentRecordError::CountMismatch { .. })));
        // An altered record has another digest: the link to it is missing.
        let altered = SegmentRecord::build(&seg("[9]"), records[1].prev());
        let mut t = table_of(&[records[0].clone(), Arc::new(altered), records[2].clone()]).unwrap();
        assert!(matches!(t.resolve(3, last), Err(SegmentRecordError::MissingLink { link: 1, .. })));
        // Twice the same record, or one no state names.
        assert!(matches!(table_of(&[records[0].clone(), records[0].clone()]), Err(SegmentRecordError::Duplicate { .. })));
        let mut t = table_of(&records).unwrap();
        t.resolve(1, records[0].digest()).unwrap();
        assert!(matches!(t.check_all_used(), Err(SegmentRecordError::Orphan { .. })));
        // Not a record: the codec's kind is kept, with the record's index.
        use crate::json::codec::DecodeErrorKind as K;
        let unknown = K::UnknownMember("x".into());
        let cases = [
            (r#"{"entries":1}"#, None),
            (r#"{"entries":[1],"x":1}"#, Some(&unknown)),
            (r#"{"entries":[1],"prev":"sha256:00"}"#, None),
            ("[]", Some(&K::WrongType { expected: "object", found: "array" })),
        ];
        for (bad, kind) in cases {
            let v = crate::json::parse(bad.as_bytes()).unwrap();
            match SegmentTable::default().insert(4, &v) {
                Err(SegmentRecordError::Malformed { index: 4, error }) => {
                    assert!(kind.is_none_or(|k| *k == error.kind), "{bad}: {error}");
                }
                other => panic!("{bad}: {:?}", other.err()),
            }
        }
    }

    #[test]
    fn the_union_of_a_state_and_its_candidate_is_their_common_prefix_once() {
        let (a, b, c, d) = (seg("[1]"), seg("[2]"), seg("[3]"), seg("[4]"));
        let mut s = RecordSink::default();
        s.chain(&[a.clone(), b.clone()]);
        let committed = std::mem::take(&mut s.records);
        s.chain(&[a.clone(), b.clone(), c]);
        let candidate = std::mem::take(&mut s.records);
        assert_eq!(union_of_two(&committed, &candidate).len(), 3);
        s.chain(&[d, b]);
        let replaced = std::mem::take(&mut s.records);
        assert_eq!(union_of_two(&committed, &replaced).len(), 4, "a replaced context shares nothing");
    }
}
