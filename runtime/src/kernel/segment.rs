//! Segments: the append-only part of an execution state.
//!
//! A strategy whose state grows by appending (the Interaction's working context) keeps the
//! appended part out of its payload: each Step that appends seals what it appended into one
//! immutable [`Segment`] (the canonical JSON bytes of the appended entries and their digest,
//! computed once) and the state lists its segments in order. Segments are shared by `Arc`
//! between the live Execution, its snapshot, the restored instance, the prepared candidate,
//! the committed record and a dispatched Effect's request, so a Step that appends k entries
//! encodes and hashes O(k) bytes, not the whole history.
//!
//! Integrity: a segment read from storage is re-encoded canonically and hashed, and the
//! strategy's payload keeps a [`chain_digest`] over the digests of its segments in order, so
//! a lost, reordered, added or changed segment is refused on restore.
//!
//! A segment may carry one decoded form of its bytes ([`Segment::decoded`]), set by the
//! strategy that sealed or first parsed it, so restore-before-adopt reuses it instead of
//! parsing every old segment on every Step. The cache is never part of equality or encoding.
//!
//! In a cut, each segment is a record of its own ([`super::segment_record`]); a segment caches
//! that record (bytes and digest, built once) so a commit never re-encodes old segments.

use super::segment_record::SegmentRecord;
use crate::json::{DecodeError, Digest, Json};
use std::any::Any;
use std::sync::{Arc, OnceLock};

/// One immutable segment: canonical JSON bytes, their digest, an optional decoded form, and
/// its cut record for one predecessor ([`super::segment_record`]).
pub struct Segment {
    text: String,
    digest: Digest,
    decoded: OnceLock<Arc<dyn Any + Send + Sync>>,
    record: OnceLock<Arc<SegmentRecord>>,
    /// One chain step through this segment: (chain digest before it, chain digest after it).
    chained: OnceLock<(Digest, Digest)>,
}

impl Segment {
    /// Seals a value: encodes it canonically and hashes the bytes once.
    pub fn seal(value: &Json) -> Arc<Segment> {
        Segment::from_canonical(value.to_canonical_string())
    }

    /// A segment from bytes the caller has just encoded canonically (never from untrusted
    /// input: use [`Segment::from_json`] for that).
    pub fn from_canonical(text: String) -> Arc<Segment> {
        let digest = Digest::of(text.as_bytes());
        Arc::new(Segment { text, digest, decoded: OnceLock::new(), record: OnceLock::new(), chained: OnceLock::new() })
    }

    /// A segment read from a decoded state: it must be a JSON array (a list of entries); its
    /// canonical bytes are what the digest covers.
    pub fn from_json(value: &Json) -> Result<Arc<Segment>, DecodeError> {
        if !matches!(value, Json::Array(_)) {
            return Err(DecodeError::invalid("a segment must be an array"));
        }
        Ok(Segment::seal(value))
    }

    /// A segment together with the decoded form its bytes were made from.
    pub fn with_decoded<T: Any + Send + Sync>(text: String, decoded: Arc<T>) -> Arc<Segment> {
        let segment = Segment::from_canonical(text);
        let _ = segment.decoded.set(decoded);
        segment
    }

    /// The canonical bytes.
    pub fn text(&self) -> &str {
        &self.text
    }
    pub fn len(&self) -> usize {
        self.text.len()
    }
    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }
    /// SHA-256 of the canonical bytes (computed once, at creation).
    pub fn digest(&self) -> Digest {
        self.digest
    }

    /// The cached decoded form, if one of type `T` was attached.
    pub fn decoded<T: Any + Send + Sync>(&self) -> Option<Arc<T>> {
        self.decoded.get().cloned().and_then(|d| d.downcast::<T>().ok())
    }

    /// This segment's cut record after the record `prev` (its predecessor in the state),
    /// built and hashed on first use. The first record built stays cached; a segment asked
    /// for another predecessor (a state that reuses it elsewhere) gets a record built anew.
    pub fn record(&self, prev: Option<Digest>) -> Arc<SegmentRecord> {
        if let Some(r) = self.record.get() {
            if r.prev() == prev {
                return r.clone();
            }
        }
        let built = Arc::new(SegmentRecord::build(self, prev));
        match self.record.set(built.clone()) {
            Ok(()) => built,
            Err(_) => self.record.get().filter(|r| r.prev() == prev).cloned().unwrap_or(built),
        }
    }

    /// The chain digest after this segment when the chain before it is `before`: one SHA-256
    /// of `before ‖ digest`, computed once per segment (the first predecessor asked is cached;
    /// another predecessor, a state reusing the segment elsewhere, is hashed anew). A state
    /// re-derives its chain on every restore and snapshot, so this keeps that O(segments)
    /// comparisons instead of O(segments) hashes.
    fn chained_after(&self, before: Digest) -> Digest {
        if let Some((b, after)) = self.chained.get() {
            if *b == before {
                return *after;
            }
        }
        let mut buf = [0u8; 64];
        buf[..32].copy_from_slice(&before.0);
        buf[32..].copy_from_slice(&self.digest.0);
        let after = Digest::of(&buf);
        let _ = self.chained.set((before, after));
        after
    }

    /// Attaches a decoded form (the first one wins) and returns the attached one when it has
    /// type `T`.
    pub fn remember<T: Any + Send + Sync>(&self, decoded: Arc<T>) -> Option<Arc<T>> {
        let _ = self.decoded.set(decoded);
        self.decoded::<T>()
    }
}

impl std::fmt::Debug for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Segment").field("len", &self.text.len()).field("digest", &self.digest).finish()
    }
}

impl PartialEq for Segment {
    fn eq(&self, other: &Segment) -> bool {
        self.digest == other.digest && self.text.len() == other.text.len()
    }
}
impl Eq for Segment {}

/// The digest a state keeps over its segments, in order: `c0 = SHA-256("keel.segments.v1")`,
/// `c(i+1) = SHA-256(c(i) ‖ digest(segment i))`. Any lost, reordered, added or changed
/// segment changes it. O(number of segments) over 64-byte inputs.
pub fn chain_digest(segments: &[Arc<Segment>]) -> Digest {
    chain_extend(chain_start(), segments)
}

/// The chain digest of no segments.
pub fn chain_start() -> Digest {
    Digest::of(b"keel.segments.v1")
}

/// Extends a chain digest by `segments`.
pub fn chain_extend(mut chain: Digest, segments: &[Arc<Segment>]) -> Digest {
    for s in segments {
        chain = s.chained_after(chain);
    }
    chain
}

/// Total canonical bytes of `segments`.
pub fn total_len(segments: &[Arc<Segment>]) -> u64 {
    segments.iter().fold(0u64, |sum, s| sum.saturating_add(s.len() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(text: &str) -> Arc<Segment> {
        Segment::from_json(&crate::json::parse(text.as_bytes()).unwrap()).unwrap()
    }

    #[test]
    fn sealing_is_canonical_and_hashed_once() {
        let a = seg("[ {\"b\":1, \"a\":2} ]");
        assert_eq!(a.text(), "[{\"a\":2,\"b\":1}]");
        assert_eq!(a.digest(), Digest::of(a.text().as_bytes()));
        assert!(Segment::from_json(&Json::Null).is_err(), "a segment is a list");
    }

    #[test]
    fn appending_extends_the_chain() {
        let (a, b, c) = (seg("[1]"), seg("[2]"), seg("[3]"));
        let two = chain_digest(&[a.clone(), b.clone()]);
        assert_eq!(chain_extend(two, &[c.clone()]), chain_digest(&[a.clone(), b.clone(), c.clone()]));
        assert_eq!(chain_digest(&[]), chain_start());
    }

    #[test]
    fn the_cached_chain_step_equals_the_hash_for_every_predecessor() {
        let step = |before: Digest, s: &Segment| {
            let mut buf = [0u8; 64];
            buf[..32].copy_from_slice(&before.0);
            buf[32..].copy_from_slice(&s.digest().0);
            Digest::of(&buf)
        };
        let (a, b) = (seg("[1]"), seg("[2]"));
        // `b` is cached after `a`, then reused after another predecessor and after `a` again.
        for chain in
            [vec![a.clone(), b.clone()], vec![b.clone()], vec![b.clone(), b.clone()], vec![a.clone(), b.clone()]]
        {
            let by_hand = chain.iter().fold(chain_start(), |c, s| step(c, s));
            assert_eq!(chain_digest(&chain), by_hand);
        }
    }

    #[test]
    fn the_chain_refuses_lost_reordered_added_or_changed_segments() {
        let (a, b, c) = (seg("[1]"), seg("[2]"), seg("[3]"));
        let good = chain_digest(&[a.clone(), b.clone(), c.clone()]);
        assert_ne!(good, chain_digest(&[a.clone(), c.clone()]), "lost");
        assert_ne!(good, chain_digest(&[b.clone(), a.clone(), c.clone()]), "reordered");
        assert_ne!(good, chain_digest(&[a.clone(), b.clone(), c.clone(), c.clone()]), "added");
        assert_ne!(good, chain_digest(&[a.clone(), b.clone(), seg("[4]")]), "changed");
        // Regrouping the same entries into other segments is another chain too.
        assert_ne!(chain_digest(&[seg("[1,2]")]), chain_digest(&[seg("[1]"), seg("[2]")]));
    }

    #[test]
    fn the_decoded_form_is_cached_and_typed() {
        let a = Segment::with_decoded("[1]".to_owned(), Arc::new(vec![1u32]));
        assert_eq!(a.decoded::<Vec<u32>>().as_deref(), Some(&vec![1u32]));
        assert!(a.decoded::<String>().is_none());
        let b = seg("[1]");
        assert!(b.decoded::<Vec<u32>>().is_none());
        assert_eq!(b.remember(Arc::new(vec![1u32])).as_deref(), Some(&vec![1u32]));
        assert_eq!(a, b, "equality is by bytes, never by the cache");
    }
}
