//! One log record's payload (format v3): canonical metadata, then the byte blobs it lists.
//!
//! A commit record names only what changed against the head it follows: its `records` list
//! holds, in cut order, `[key, digest, len]` for each record whose bytes the payload carries
//! and `[start, count]` for each run of `count` records kept unchanged from that head, taken
//! from the head's entries `start..start + count` in the head's order. Runs are maximal (two
//! runs in a row never continue one another), so a listing has one spelling. A `base` record
//! (a compacted tree) carries every record of its head.
//!
//! Decoding a payload needs no other record: it checks the metadata is canonical JSON naming
//! exactly the blobs that follow, every carried record against its listed digest, and, for a
//! listing without runs, the tree digest against the envelope and records. A listing with runs
//! is [`materialize`]d against the head its record follows on replay, which rebuilds the whole
//! cut and checks the tree digest there: a run the head does not hold, or a cut whose digest
//! differs from the one listed, is damage.

use super::super::cut::{CutEntry, CutEnvelope};
use super::super::index::{CommitRecordKind, Installation};
use super::super::port::{
    Activation, Checkpoint, CheckpointKind, EffectBoundary, EffectBoundaryKind, Head, TreeCut,
};
use super::super::CommitRecord;
use crate::json::{push_u64, Digest, FromJson, Json, ObjectReader, ObjectWriter, WriteJson};
use crate::kernel::ids::{EffectId, IncarnationId, ProcessId};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The metadata part of a record is a few identities and digests, one entry per carried record
/// or run of kept ones (and, in a compacted tree, one per record of the head and one per
/// installed commit); anything larger is damage.
pub(super) const MAX_META_BYTES: usize = 64 << 20;

/// A commit request as the log stores it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Request {
    Checkpoint(Checkpoint),
    Effect(EffectBoundary),
    Activation(Activation),
}

impl From<super::super::port::CommitRequest> for Request {
    fn from(request: super::super::port::CommitRequest) -> Request {
        use super::super::port::CommitRequest;
        match request {
            CommitRequest::Checkpoint(c) => Request::Checkpoint(c),
            CommitRequest::Effect(b) => Request::Effect(b),
            CommitRequest::Activation(a) => Request::Activation(a),
        }
    }
}

impl Request {
    pub(super) fn to_commit_request(&self) -> super::super::port::CommitRequest {
        use super::super::port::CommitRequest;
        match self {
            Request::Checkpoint(c) => CommitRequest::Checkpoint(c.clone()),
            Request::Effect(b) => CommitRequest::Effect(b.clone()),
            Request::Activation(a) => CommitRequest::Activation(a.clone()),
        }
    }

    pub(super) fn decide(
        &self,
        index: &super::CommitIndex,
    ) -> Result<super::Decision, super::CommitError> {
        match self {
            Request::Checkpoint(c) => index.decide_checkpoint(c),
            Request::Effect(b) => index.decide_effect(b),
            Request::Activation(a) => index.decide_activation(a),
        }
    }

    pub(super) fn cut(&self) -> &TreeCut {
        match self {
            Request::Checkpoint(c) => &c.cut,
            Request::Effect(b) => &b.cut,
            Request::Activation(a) => &a.cut,
        }
    }

    /// The same request over another cut (replay puts the rebuilt cut in).
    fn with_cut(self, cut: TreeCut) -> Request {
        match self {
            Request::Checkpoint(c) => Request::Checkpoint(Checkpoint { cut, ..c }),
            Request::Effect(b) => Request::Effect(EffectBoundary { cut, ..b }),
            Request::Activation(a) => Request::Activation(Activation { cut, ..a }),
        }
    }

    fn kind(&self) -> CommitRecordKind {
        match self {
            Request::Checkpoint(c) => CommitRecordKind::Checkpoint(c.kind),
            Request::Effect(b) => CommitRecordKind::Effect {
                process_id: b.process_id.clone(),
                effect_id: b.effect_id.clone(),
                kind: b.kind,
            },
            Request::Activation(a) => CommitRecordKind::Activation {
                previous_incarnation: a.previous_incarnation.clone(),
            },
        }
    }
}

/// One log record: canonical metadata plus the byte blobs it lists (envelope head and tail,
/// then every carried record in cut order).
pub(super) struct Record {
    pub(super) meta: Vec<u8>,
    pub(super) blobs: Vec<Arc<[u8]>>,
}

impl Record {
    pub(super) fn payload_len(&self) -> usize {
        4 + self.meta.len() + self.blobs.iter().map(|b| b.len()).sum::<usize>()
    }
}

/// One item of a record's listing, in cut order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Listed {
    /// A record whose bytes the payload carries.
    Carried(CutEntry),
    /// The head's entries `start..start + count`, kept unchanged.
    Kept { start: usize, count: usize },
}

/// A cut as a record stores it: names, tree digest, envelope and listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct LoggedCut {
    pub(super) root_id: ProcessId,
    pub(super) incarnation: IncarnationId,
    pub(super) digest: Digest,
    pub(super) envelope: CutEnvelope,
    pub(super) listed: Vec<Listed>,
}

impl LoggedCut {
    /// A whole cut, every record carried (a compacted tree, a start).
    pub(super) fn whole(cut: &TreeCut) -> LoggedCut {
        let listed = cut
            .entries()
            .iter()
            .map(|e| Listed::Carried(e.clone()))
            .collect();
        LoggedCut::of(cut, listed)
    }

    fn of(cut: &TreeCut, listed: Vec<Listed>) -> LoggedCut {
        LoggedCut {
            root_id: cut.root_id.clone(),
            incarnation: cut.incarnation.clone(),
            digest: cut.digest,
            envelope: cut.envelope().clone(),
            listed,
        }
    }

    /// The listing of a commit: `sent` is the request's cut (a delta: kept records carry no
    /// bytes), `whole` the same cut resolved against `head` (the installation's cut, entry for
    /// entry in the same order). Records the request carried are carried (unless one is the
    /// next head entry unchanged); every record it kept becomes part of a run of `head`, found
    /// by key and digest. Cost: O(changed records) for the log, and O(records) key
    /// comparisons, almost all against the next head entry.
    ///
    /// The entries are walked by reference ([`TreeCut::carried`] of a whole cut is every entry
    /// in order), never through [`TreeCut::entries`]: that builds a cut's flat entry list, a
    /// reference count taken (and later dropped) per record, which cost more than the listing
    /// itself and is of no other use per commit. The result is the listing
    /// `listing_of_entries` computes over the flat lists (a test compares them).
    pub(super) fn listing(sent: &TreeCut, whole: &TreeCut, head: Option<&TreeCut>) -> LoggedCut {
        // The rules resolve a delta entry for entry; anything else is not a listing of it.
        if sent.len() != whole.len() || !whole.is_whole() {
            return LoggedCut::whole(whole);
        }
        let head_entries: Vec<&CutEntry> = match head {
            Some(h) if h.is_whole() => h.carried().collect(),
            Some(h) => h.entries().iter().collect(),
            None => Vec::new(),
        };
        // `sent` lists the same keys in the same order as `whole` (keys are unique in a cut),
        // so an entry of `whole` is carried by `sent` exactly when it is the next carried one.
        let mut carried = sent.carried().peekable();
        let mut finder = HeadFinder::new(&head_entries);
        let mut listed: Vec<Listed> = Vec::new();
        for entry in whole.carried() {
            let sent_carries = carried.next_if(|c| same_key(c, entry)).is_some();
            let found = if sent_carries { finder.pass(entry) } else { finder.find(entry) };
            push_listed(&mut listed, found, entry);
        }
        LoggedCut::of(whole, listed)
    }

    fn has_runs(&self) -> bool {
        self.listed.iter().any(|l| matches!(l, Listed::Kept { .. }))
    }

    pub(super) fn root_id(&self) -> &ProcessId {
        &self.root_id
    }
}

/// Finds kept records in the head: the kernel keeps its cut order from one commit to the
/// next, so the next record is almost always the head entry after the last one found, or a
/// few entries on (records the cut dropped); only a reordering pays for a key index.
struct HeadFinder<'a> {
    head: &'a [&'a CutEntry],
    next: usize,
    by_key: Option<BTreeMap<&'a str, usize>>,
}

impl<'a> HeadFinder<'a> {
    const LOOKAHEAD: usize = 4;

    fn new(head: &'a [&'a CutEntry]) -> HeadFinder<'a> {
        HeadFinder {
            head,
            next: 0,
            by_key: None,
        }
    }

    fn find(&mut self, e: &CutEntry) -> Option<usize> {
        let same = |h: &CutEntry| h.digest() == e.digest() && same_key(h, e);
        let near = self.next..self.head.len().min(self.next + Self::LOOKAHEAD);
        let at = match near.clone().find(|&at| same(self.head[at])) {
            Some(at) => at,
            None => {
                let head = self.head;
                let by_key = self.by_key.get_or_insert_with(|| {
                    head.iter().enumerate().map(|(i, h)| (h.key(), i)).collect()
                });
                let at = *by_key.get(e.key())?;
                if !same(head[at]) {
                    return None;
                }
                at
            }
        };
        self.next = at + 1;
        Some(at)
    }

    /// A carried record: if it replaces the next head entry (same key), step past that entry,
    /// and if it is that entry unchanged (a request sent whole), keep it as that entry.
    fn pass(&mut self, e: &CutEntry) -> Option<usize> {
        let at = self.next;
        let h = self.head.get(at).filter(|h| same_key(h, e))?;
        self.next += 1;
        (h.digest() == e.digest()).then_some(at)
    }
}

/// Appends one entry of a listing: `found` is its index in the head if it is kept from there
/// (extending the last run when it continues it, so runs are maximal), `None` if carried.
fn push_listed(listed: &mut Vec<Listed>, found: Option<usize>, entry: &CutEntry) {
    match (found, listed.last_mut()) {
        (Some(at), Some(Listed::Kept { start, count })) if *start + *count == at => *count += 1,
        (Some(at), _) => listed.push(Listed::Kept { start: at, count: 1 }),
        // Kept, but not in the head by key and digest (the rules resolved it, so this does
        // not happen): carrying it is still a faithful record.
        (None, _) => listed.push(Listed::Carried(entry.clone())),
    }
}

/// Whether two entries have the same key; records shared between cuts share their key's
/// allocation, so the address settles most comparisons.
fn same_key(a: &CutEntry, b: &CutEntry) -> bool {
    let (x, y) = (a.key(), b.key());
    std::ptr::eq(x, y) || x == y
}

/// [`LoggedCut::listing`] over the cuts' flat entry lists, as it was first written: the
/// reference the by-reference walk must equal (tests).
#[cfg(test)]
pub(super) fn listing_of_entries(sent: &TreeCut, whole: &TreeCut, head: Option<&TreeCut>) -> LoggedCut {
    let (sent_entries, whole_entries) = (sent.entries(), whole.entries());
    if sent_entries.len() != whole_entries.len() || !whole.is_whole() {
        return LoggedCut::whole(whole);
    }
    let head_entries: Vec<&CutEntry> = head.map_or(&[][..], |h| h.entries()).iter().collect();
    let mut finder = HeadFinder::new(&head_entries);
    let mut listed: Vec<Listed> = Vec::new();
    for (sent, entry) in sent_entries.iter().zip(whole_entries) {
        let found = if sent.bytes().is_some() { finder.pass(entry) } else { finder.find(entry) };
        push_listed(&mut listed, found, entry);
    }
    LoggedCut::of(whole, listed)
}

/// Rebuilds the whole cut a record lists, taking its runs from `head` (the head its tree held
/// when the record was written), and checks the listed tree digest.
pub(super) fn materialize(logged: &LoggedCut, head: Option<&TreeCut>) -> Result<TreeCut, String> {
    let mut entries = Vec::new();
    for l in &logged.listed {
        match l {
            Listed::Carried(e) => entries.push(e.clone()),
            Listed::Kept { start, count } => {
                let Some(head) = head else {
                    return Err("the record keeps records of a head, but its tree has none".into());
                };
                let run = start
                    .checked_add(*count)
                    .and_then(|end| head.entries().get(*start..end));
                let Some(run) = run else {
                    return Err(format!(
                        "the record keeps records {start}..{} of its head, which lacks them (it holds {})",
                        start.saturating_add(*count),
                        head.entries().len()
                    ));
                };
                entries.extend_from_slice(run);
            }
        }
    }
    let cut = TreeCut::new(
        logged.root_id.clone(),
        logged.incarnation.clone(),
        logged.envelope.clone(),
        entries,
    )
    .map_err(|e| e.to_string())?;
    if cut.digest != logged.digest {
        return Err("the tree digest does not match the envelope and records".into());
    }
    Ok(cut)
}

/// The blobs of a cut record: the envelope's head and tail, then each carried record's bytes
/// in listing order (shared, not copied).
fn cut_blobs(cut: &LoggedCut) -> Vec<Arc<[u8]>> {
    let envelope = &cut.envelope;
    let mut blobs: Vec<Arc<[u8]>> = Vec::with_capacity(2 + cut.listed.len());
    blobs.push(envelope.head_shared().clone());
    blobs.push(envelope.tail_shared().clone());
    for l in &cut.listed {
        if let Listed::Carried(e) = l {
            blobs.push(e.bytes().cloned().unwrap_or_else(|| Arc::from(&[][..])));
        }
    }
    blobs
}

/// The `envelope` member of a cut record: `[head_len, tail_len]`.
fn write_envelope(w: &mut ObjectWriter<'_>, cut: &LoggedCut) {
    let out = w.key("envelope");
    out.push('[');
    push_u64(out, to_u64(cut.envelope.head().len()));
    out.push(',');
    push_u64(out, to_u64(cut.envelope.tail().len()));
    out.push(']');
}

/// The `records` member of a cut record, the listing (module docs): `[key, digest, len]` per
/// carried record, `[start, count]` per run of kept ones.
fn write_listing(w: &mut ObjectWriter<'_>, cut: &LoggedCut) {
    let out = w.key("records");
    out.push('[');
    for (i, l) in cut.listed.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push('[');
        match l {
            Listed::Carried(e) => {
                e.key().write_json(out);
                out.push(',');
                e.digest().write_json(out);
                out.push(',');
                push_u64(out, to_u64(e.bytes().map_or(0, |b| b.len())));
            }
            Listed::Kept { start, count } => {
                push_u64(out, to_u64(*start));
                out.push(',');
                push_u64(out, to_u64(*count));
            }
        }
        out.push(']');
    }
    out.push(']');
}

/// A commit record: the request's fields, the stored identity, content digest and installed
/// sequence (cross-checked on replay), and the listing of its cut.
///
/// The metadata is written straight as canonical text, members in canonical (byte) key
/// order (debug builds check the order; a test compares it with the encoding of the
/// equivalent `Json` tree): building that tree took a map insertion and an allocation per
/// member on every commit.
pub(super) fn encode_record(
    request: &Request,
    cut: &LoggedCut,
    installation: &Installation,
) -> Record {
    let mut meta = String::with_capacity(512 + 96 * cut.listed.len());
    let mut w = ObjectWriter::new(&mut meta);
    match request {
        Request::Checkpoint(c) => {
            w.str("commit", "checkpoint")
                .write("content_digest", &installation.content_digest)
                .write("cut_digest", &cut.digest);
            write_envelope(&mut w, cut);
            w.str("identity", &installation.identity)
                .write("incarnation_id", &cut.incarnation)
                .str("kind", c.kind.as_str())
                .opt_write("previous_digest", c.previous_digest.as_ref());
            write_listing(&mut w, cut);
            w.write("root_id", &cut.root_id).u64("sequence", installation.sequence);
        }
        Request::Effect(b) => {
            w.u64("batch_index", u64::from(b.batch_index))
                .str("commit", "effect")
                .write("content_digest", &installation.content_digest)
                .write("cut_digest", &cut.digest)
                .write("effect_digest", &b.effect_digest)
                .write("effect_id", &b.effect_id);
            write_envelope(&mut w, cut);
            w.str("identity", &installation.identity)
                .write("incarnation_id", &cut.incarnation)
                .str("kind", b.kind.as_str())
                .write("previous_digest", &b.previous_digest)
                .write("process_id", &b.process_id);
            write_listing(&mut w, cut);
            w.write("root_id", &cut.root_id)
                .u64("sequence", installation.sequence)
                .opt_write("settlement_digest", b.settlement_digest.as_ref())
                .u64("step_sequence", b.step_sequence);
        }
        Request::Activation(a) => {
            w.str("commit", "activation")
                .write("content_digest", &installation.content_digest)
                .write("cut_digest", &cut.digest);
            write_envelope(&mut w, cut);
            w.str("identity", &installation.identity)
                .write("incarnation_id", &cut.incarnation)
                .write("previous_digest", &a.previous_digest)
                .write("previous_incarnation", &a.previous_incarnation);
            write_listing(&mut w, cut);
            w.write("root_id", &cut.root_id).u64("sequence", installation.sequence);
        }
    }
    w.finish();
    Record { meta: meta.into_bytes(), blobs: cut_blobs(cut) }
}

/// A compacted tree: its whole head, its sequence and every installed commit (identity,
/// content digest and history entry), so the rules answer after compaction as before.
/// Written straight as canonical text, like [`encode_record`].
pub(super) fn encode_base(head: &Head, commits: &[(CommitRecord, Digest)]) -> Record {
    let cut = LoggedCut::whole(&head.cut);
    let mut meta = String::with_capacity(512 + 96 * cut.listed.len() + 320 * commits.len());
    let mut w = ObjectWriter::new(&mut meta);
    w.str("commit", "base");
    {
        let out = w.key("commits");
        out.push('[');
        for (i, (c, content)) in commits.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            write_commit(out, c, *content);
        }
        out.push(']');
    }
    w.write("cut_digest", &cut.digest);
    write_envelope(&mut w, &cut);
    w.write("incarnation_id", &cut.incarnation);
    write_listing(&mut w, &cut);
    w.write("root_id", &cut.root_id).u64("sequence", head.sequence);
    w.finish();
    Record { meta: meta.into_bytes(), blobs: cut_blobs(&cut) }
}

/// One installed commit of a `base` record, members in canonical key order.
fn write_commit(out: &mut String, c: &CommitRecord, content: Digest) {
    let mut w = ObjectWriter::new(out);
    if let CommitRecordKind::Checkpoint(k) = &c.kind {
        w.str("checkpoint", k.as_str());
    }
    w.write("content_digest", &content).write("cut_digest", &c.cut_digest);
    if let CommitRecordKind::Effect { kind, effect_id, .. } = &c.kind {
        w.str("effect", kind.as_str()).write("effect_id", effect_id);
    }
    w.str("identity", &c.identity).write("incarnation_id", &c.incarnation);
    match &c.kind {
        CommitRecordKind::Activation { previous_incarnation } => {
            w.write("previous_incarnation", previous_incarnation);
        }
        CommitRecordKind::Effect { process_id, .. } => {
            w.write("process_id", process_id);
        }
        CommitRecordKind::Checkpoint(_) => {}
    }
    w.u64("sequence", c.sequence);
    w.finish();
}

fn decode_commit(value: &Json) -> Result<(CommitRecord, Digest), crate::json::DecodeError> {
    use crate::json::DecodeError;
    let mut r = ObjectReader::new(value)?;
    let identity: String = r.required("identity")?;
    let content: Digest = r.required("content_digest")?;
    let sequence: u64 = r.required("sequence")?;
    let incarnation: IncarnationId = r.required("incarnation_id")?;
    let cut_digest: Digest = r.required("cut_digest")?;
    let kind = if let Some(k) = r.optional::<String>("checkpoint")? {
        CommitRecordKind::Checkpoint(
            CheckpointKind::from_name(&k)
                .ok_or_else(|| DecodeError::invalid(format!("unknown checkpoint kind `{k}`")))?,
        )
    } else if let Some(k) = r.optional::<String>("effect")? {
        CommitRecordKind::Effect {
            kind: EffectBoundaryKind::from_name(&k)
                .ok_or_else(|| DecodeError::invalid(format!("unknown boundary kind `{k}`")))?,
            process_id: r.required("process_id")?,
            effect_id: r.required("effect_id")?,
        }
    } else {
        CommitRecordKind::Activation {
            previous_incarnation: r.required("previous_incarnation")?,
        }
    };
    r.finish()?;
    Ok((
        CommitRecord {
            identity,
            kind,
            sequence,
            incarnation,
            cut_digest,
        },
        content,
    ))
}

/// What one log record holds once decoded.
// Built once per record and taken apart at once; boxing would only add an allocation.
#[allow(clippy::large_enum_variant)]
pub(super) enum Logged {
    /// A commit request (its cut a placeholder naming root, writer and digest), the listing
    /// of its cut, and the stored identity, content digest and installed sequence for the
    /// replay cross-check.
    Commit {
        request: Request,
        cut: LoggedCut,
        identity: String,
        content_digest: Digest,
        sequence: u64,
    },
    /// A compacted tree.
    Base {
        head: Head,
        commits: Vec<(CommitRecord, Digest)>,
    },
}

/// A decoded commit request with its cut rebuilt against `head` (see [`materialize`]).
pub(super) fn rebuild_request(
    request: Request,
    cut: &LoggedCut,
    head: Option<&TreeCut>,
) -> Result<Request, String> {
    Ok(request.with_cut(materialize(cut, head)?))
}

/// Decodes one record payload (a frame's checksummed bytes) and encodes what it decoded again:
/// the decoder's contract for fuzzing and tests. Decoding is strict (module docs), so an
/// accepted payload re-encodes byte-identically.
pub fn reencode_payload(payload: &[u8]) -> Result<Vec<u8>, String> {
    let record = match decode_payload(payload)? {
        Logged::Commit {
            request,
            cut,
            identity,
            content_digest,
            sequence,
        } => {
            let kind = request.kind();
            let placeholder = request.cut().clone();
            let installation = Installation {
                identity,
                content_digest,
                kind,
                sequence,
                cut: placeholder.clone(),
                carried: placeholder,
            };
            encode_record(&request, &cut, &installation)
        }
        Logged::Base { head, commits } => encode_base(&head, &commits),
    };
    let meta_len = u32::try_from(record.meta.len()).map_err(|e| e.to_string())?;
    let mut out = meta_len.to_le_bytes().to_vec();
    out.extend_from_slice(&record.meta);
    for b in &record.blobs {
        out.extend_from_slice(b);
    }
    Ok(out)
}

pub(super) fn decode_payload(payload: &[u8]) -> Result<Logged, String> {
    let (len_bytes, rest) = payload
        .split_first_chunk::<4>()
        .ok_or("payload shorter than its metadata length")?;
    let meta_len = usize::try_from(u32::from_le_bytes(*len_bytes)).map_err(|e| e.to_string())?;
    if meta_len > MAX_META_BYTES || meta_len > rest.len() {
        return Err(format!("metadata length {meta_len} out of bounds"));
    }
    let (meta, blobs) = rest.split_at(meta_len);
    let value =
        crate::json::parse_with(meta, &meta_limits()).map_err(|e| format!("metadata: {e}"))?;
    if value.to_canonical_bytes() != meta {
        return Err("metadata is not canonical JSON".into());
    }
    decode_meta(&value, blobs)
}

fn meta_limits() -> crate::json::ParseLimits {
    crate::json::ParseLimits {
        max_bytes: MAX_META_BYTES,
        ..Default::default()
    }
}

fn decode_cut(r: &mut ObjectReader<'_>, blobs: &[u8]) -> Result<LoggedCut, String> {
    let e = |e: crate::json::DecodeError| e.to_string();
    let root_id: ProcessId = r.required("root_id").map_err(e)?;
    let incarnation: IncarnationId = r.required("incarnation_id").map_err(e)?;
    let digest: Digest = r.required("cut_digest").map_err(e)?;
    let lens: Vec<u64> = r.required("envelope").map_err(e)?;
    let records = r
        .required_value("records")
        .map_err(e)?
        .as_array()
        .ok_or("records is not an array")?;
    let mut at = 0usize;
    let mut take = |len: u64| -> Result<Arc<[u8]>, String> {
        let len = usize::try_from(len).map_err(|e| e.to_string())?;
        let end = at
            .checked_add(len)
            .filter(|&end| end <= blobs.len())
            .ok_or("a listed blob runs past the record")?;
        let blob = Arc::from(&blobs[at..end]);
        at = end;
        Ok(blob)
    };
    let [head_len, tail_len] = lens[..] else {
        return Err("envelope lists two lengths".into());
    };
    let envelope = CutEnvelope::new(take(head_len)?, take(tail_len)?);
    let mut listed: Vec<Listed> = Vec::with_capacity(records.len());
    let mut carried = Vec::new();
    for record in records {
        match record.as_array().unwrap_or_default() {
            [key, listed_digest, len] => {
                let key = key.as_str().ok_or("a record key is not text")?;
                let listed_digest = Digest::from_json(listed_digest).map_err(e)?;
                let entry = CutEntry::new(key, take(u64::from_json(len).map_err(e)?)?);
                if entry.digest() != listed_digest {
                    return Err(format!("record {key:?} does not match its digest"));
                }
                carried.push(entry.clone());
                listed.push(Listed::Carried(entry));
            }
            [start, count] => {
                let number = |v: &Json| -> Result<usize, String> {
                    usize::try_from(u64::from_json(v).map_err(e)?).map_err(|e| e.to_string())
                };
                let (start, count) = (number(start)?, number(count)?);
                if count == 0 {
                    return Err("a run of kept records is empty".into());
                }
                if let Some(Listed::Kept { start: s, count: c }) = listed.last() {
                    if s.checked_add(*c) == Some(start) {
                        return Err("two runs of kept records in a row continue one another".into());
                    }
                }
                listed.push(Listed::Kept { start, count });
            }
            _ => {
                return Err(
                    "a record entry is neither [key, digest, len] nor [start, count]".into(),
                )
            }
        }
    }
    if at != blobs.len() {
        return Err("bytes after the listed blobs".into());
    }
    // The carried records alone: their keys are valid and distinct, and a listing without
    // runs is the whole cut, whose digest is checked here (runs are checked on replay).
    let has_runs = carried.len() != listed.len();
    let own = TreeCut::new(
        root_id.clone(),
        incarnation.clone(),
        envelope.clone(),
        carried,
    )
    .map_err(|e| e.to_string())?;
    if !has_runs && own.digest != digest {
        return Err("the tree digest does not match the envelope and records".into());
    }
    Ok(LoggedCut {
        root_id,
        incarnation,
        digest,
        envelope,
        listed,
    })
}

fn decode_meta(value: &Json, blobs: &[u8]) -> Result<Logged, String> {
    use crate::json::DecodeError;
    let e = |e: DecodeError| format!("metadata: {e}");
    let mut r = ObjectReader::new(value).map_err(e)?;
    let commit: String = r.required("commit").map_err(e)?;
    let sequence: u64 = r.required("sequence").map_err(e)?;
    let logged = decode_cut(&mut r, blobs)?;
    if commit == "base" {
        let commits = r
            .required_value("commits")
            .map_err(e)?
            .as_array()
            .ok_or("commits is not an array")?;
        let commits = commits
            .iter()
            .map(decode_commit)
            .collect::<Result<Vec<_>, _>>()
            .map_err(e)?;
        r.finish().map_err(e)?;
        if logged.has_runs() {
            return Err("a compacted tree keeps a record it does not carry".into());
        }
        let cut = materialize(&logged, None)?;
        return Ok(Logged::Base {
            head: Head { cut, sequence },
            commits,
        });
    }
    let identity: String = r.required("identity").map_err(e)?;
    let content_digest: Digest = r.required("content_digest").map_err(e)?;
    // The request names its cut by root, writer and digest until replay rebuilds it.
    let cut = TreeCut::named(
        logged.root_id.clone(),
        logged.incarnation.clone(),
        logged.digest,
    );
    let request = (|| -> Result<Request, DecodeError> {
        Ok(match commit.as_str() {
            "checkpoint" => {
                let kind: String = r.required("kind")?;
                let kind = CheckpointKind::from_name(&kind).ok_or_else(|| {
                    DecodeError::invalid(format!("unknown checkpoint kind `{kind}`"))
                })?;
                Request::Checkpoint(Checkpoint {
                    sequence,
                    kind,
                    previous_digest: r.optional("previous_digest")?,
                    cut,
                })
            }
            "effect" => {
                let kind: String = r.required("kind")?;
                let kind = EffectBoundaryKind::from_name(&kind).ok_or_else(|| {
                    DecodeError::invalid(format!("unknown boundary kind `{kind}`"))
                })?;
                let process_id: ProcessId = r.required("process_id")?;
                let effect_id: EffectId = r.required("effect_id")?;
                Request::Effect(EffectBoundary {
                    sequence,
                    kind,
                    process_id,
                    effect_id,
                    step_sequence: r.required("step_sequence")?,
                    batch_index: r.required("batch_index")?,
                    effect_digest: r.required("effect_digest")?,
                    settlement_digest: r.optional("settlement_digest")?,
                    previous_digest: r.required("previous_digest")?,
                    cut,
                })
            }
            "activation" => {
                let previous_incarnation: IncarnationId = r.required("previous_incarnation")?;
                Request::Activation(Activation {
                    previous_incarnation,
                    previous_digest: r.required("previous_digest")?,
                    new_incarnation: cut.incarnation.clone(),
                    cut,
                })
            }
            other => return Err(DecodeError::invalid(format!("unknown commit `{other}`"))),
        })
    })()
    .map_err(e)?;
    r.finish().map_err(e)?;
    Ok(Logged::Commit {
        request,
        cut: logged,
        identity,
        content_digest,
        sequence,
    })
}

/// The root id a payload's metadata names, if the metadata parses as an object with one.
pub(super) fn meta_root(payload: &[u8]) -> Option<String> {
    meta_names(payload).map(|(root, _)| root)
}

/// The root a payload's metadata names and the sequence it installs (a commit record; a
/// `base` record names none), if the metadata is there whole and parses; `payload` may be
/// a prefix of the payload.
pub(super) fn meta_names(payload: &[u8]) -> Option<(String, Option<u64>)> {
    let (len_bytes, rest) = payload.split_first_chunk::<4>()?;
    let meta_len = usize::try_from(u32::from_le_bytes(*len_bytes)).ok()?;
    let meta = rest.get(..meta_len.min(MAX_META_BYTES))?;
    let value = crate::json::parse(meta).ok()?;
    let root = value.get("root_id")?.as_str()?;
    let sequence = value.get("sequence").and_then(Json::as_u64);
    ProcessId::parse(root).ok().map(|_| (root.to_owned(), sequence))
}

// Lengths here are bounded by `usize`, which is at most 64 bits on every supported target.
fn to_u64(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}
