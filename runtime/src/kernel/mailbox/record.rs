//! One mailbox record and its wait opening.

use crate::json::{
    DecodeError, Digest, FromJson, Json, ObjectBuilder, ObjectReader, ObjectWriter, Payload, ToJson, WriteJson,
};
use crate::kernel::ids::{SignalId, WaitId, WaitKey};
use crate::kernel::signal::{required_payload, SettlementStatus, Signal, SignalSource};

/// What an opening record opens. It is kept after consumption (only the payload is released)
/// while the wait is open, so the wait table can always be replayed from the retained history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WaitOpening {
    /// An external wait, answered only by Host input addressed to its WaitID.
    External { key: WaitKey },
    /// A child wait, answered only by the Engine's satisfaction Signal. `spec` is the
    /// ChildWaitSpec as opaque JSON: its typed form lives with the tree, not the mailbox.
    Children { key: WaitKey, spec: Json },
}

impl WaitOpening {
    pub fn key(&self) -> &WaitKey {
        match self {
            WaitOpening::External { key } | WaitOpening::Children { key, .. } => key,
        }
    }
    pub fn kind(&self) -> WaitKind {
        match self {
            WaitOpening::External { .. } => WaitKind::External,
            WaitOpening::Children { .. } => WaitKind::Children,
        }
    }
}

/// Wire: `{"key":K}` (external) or `{"key":K,"spec":S}` (children): `spec` discriminates.
impl ToJson for WaitOpening {
    fn to_json(&self) -> Json {
        match self {
            WaitOpening::External { key } => ObjectBuilder::new().field("key", key).build(),
            WaitOpening::Children { key, spec } => {
                ObjectBuilder::new().field("key", key).field("spec", spec).build()
            }
        }
    }
}

impl WriteJson for WaitOpening {
    fn write_json(&self, out: &mut String) {
        let mut w = ObjectWriter::new(out);
        match self {
            WaitOpening::External { key } => w.write("key", key),
            WaitOpening::Children { key, spec } => w.write("key", key).write("spec", spec),
        };
        w.finish();
    }
}

impl FromJson for WaitOpening {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let key: WaitKey = r.required("key")?;
        let spec: Option<Json> = r.optional("spec")?;
        r.finish()?;
        Ok(match spec {
            None => WaitOpening::External { key },
            Some(spec) => WaitOpening::Children { key, spec },
        })
    }
}

/// The kind of a wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WaitKind {
    External,
    Children,
}

impl WaitKind {
    /// The only source allowed to answer a wait of this kind: external waits take Host input,
    /// child waits take the Engine's satisfaction Signal.
    pub fn answering_source(self) -> SignalSource {
        match self {
            WaitKind::External => SignalSource::External,
            WaitKind::Children => SignalSource::ChildWaitAnswer,
        }
    }
}

/// A record's payload: held while pending, reduced to its digest once consumed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordBody {
    Pending(Payload),
    Consumed(Digest),
}

impl RecordBody {
    /// The digest of the normalized payload (computed for pending payloads).
    pub fn digest(&self) -> Digest {
        match self {
            RecordBody::Pending(p) => p.digest(),
            RecordBody::Consumed(d) => *d,
        }
    }
    /// Whether `payload` has the same normalized content. Pending payloads compare by value so
    /// no digest is computed on the common path.
    pub fn same_content(&self, payload: &Payload) -> bool {
        match self {
            RecordBody::Pending(p) => p == payload,
            RecordBody::Consumed(d) => *d == payload.digest(),
        }
    }
}

/// Why a record's fields contradict its derived source.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("signal `{id}` carries a status but is not an unaddressed Engine settlement")]
    StatusNotAllowed { id: SignalId },
    #[error("signal `{id}` is a wait opening but carries no `opens`")]
    OpeningWithoutOpens { id: SignalId },
    #[error("signal `{id}` carries `opens` but is not the opening of its wait")]
    OpensOnNonOpening { id: SignalId },
    #[error(
        "Engine signal `{id}` answers wait `{wait_id}` but is not its derived satisfaction id"
    )]
    UnderivedAnswerId { id: SignalId, wait_id: WaitId },
}

/// Checks the field combination of a record and returns its derived source.
///
/// Rules: a status only on an unaddressed Engine settlement; `opens` exactly on the record whose
/// id is the derived opening id of its wait; an Engine-owned answer has the derived
/// child-wait-satisfied id (every Engine answer carries the id derived from its wait).
pub(crate) fn classify(
    id: &SignalId,
    wait_id: Option<&WaitId>,
    status: Option<SettlementStatus>,
    opens: Option<&WaitOpening>,
) -> Result<SignalSource, RecordError> {
    let source = SignalSource::of(id, wait_id);
    let is_opening = source == SignalSource::Settlement && wait_id.is_some();
    if status.is_some() && (source != SignalSource::Settlement || wait_id.is_some()) {
        return Err(RecordError::StatusNotAllowed { id: id.clone() });
    }
    if opens.is_some() && !is_opening {
        return Err(RecordError::OpensOnNonOpening { id: id.clone() });
    }
    if is_opening && opens.is_none() {
        return Err(RecordError::OpeningWithoutOpens { id: id.clone() });
    }
    if let (SignalSource::ChildWaitAnswer, Some(wait)) = (source, wait_id) {
        if *id != SignalId::child_wait_satisfied(wait) {
            return Err(RecordError::UnderivedAnswerId { id: id.clone(), wait_id: wait.clone() });
        }
    }
    Ok(source)
}

/// One admitted Signal in arrival order. Its field combination is valid by construction
/// ([`SignalRecord::new`]); history-level rules are checked by the mailbox.
///
/// `arrival` is the record's 1-based arrival sequence, set by the mailbox that holds it (0 for
/// a record not yet in a mailbox). It is explicit because compaction drops records: the
/// position in the retained list is no longer the arrival.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignalRecord {
    arrival: u64,
    id: SignalId,
    wait_id: Option<WaitId>,
    status: Option<SettlementStatus>,
    opens: Option<WaitOpening>,
    body: RecordBody,
}

impl SignalRecord {
    /// Builds a record after checking its field combination (see [`RecordError`]).
    pub fn new(
        id: SignalId,
        wait_id: Option<WaitId>,
        status: Option<SettlementStatus>,
        opens: Option<WaitOpening>,
        body: RecordBody,
    ) -> Result<SignalRecord, RecordError> {
        classify(&id, wait_id.as_ref(), status, opens.as_ref())?;
        Ok(SignalRecord { arrival: 0, id, wait_id, status, opens, body })
    }

    /// Builds a record from fields already accepted by [`classify`].
    pub(crate) fn from_valid_parts(
        id: SignalId,
        wait_id: Option<WaitId>,
        status: Option<SettlementStatus>,
        opens: Option<WaitOpening>,
        payload: Payload,
    ) -> SignalRecord {
        SignalRecord { arrival: 0, id, wait_id, status, opens, body: RecordBody::Pending(payload) }
    }

    /// The 1-based arrival sequence (0 until a mailbox admitted the record).
    pub fn arrival(&self) -> u64 {
        self.arrival
    }

    pub(crate) fn set_arrival(&mut self, arrival: u64) {
        self.arrival = arrival;
    }

    /// Whether compaction may drop this record: it is consumed, Engine-owned (its id is
    /// derived from a settled Effect or a wait, so it is never delivered again) and answers or
    /// opens no wait that is still open (`wait_closed` says whether its wait is closed).
    pub(crate) fn droppable(&self, wait_closed: impl Fn(&WaitId) -> bool) -> bool {
        self.is_consumed()
            && self.id.is_engine_owned()
            && self.wait_id.as_ref().is_none_or(wait_closed)
    }

    pub fn id(&self) -> &SignalId {
        &self.id
    }
    pub fn wait_id(&self) -> Option<&WaitId> {
        self.wait_id.as_ref()
    }
    pub fn status(&self) -> Option<SettlementStatus> {
        self.status
    }
    /// What this record opens, if it is a wait opening.
    pub fn opens(&self) -> Option<&WaitOpening> {
        self.opens.as_ref()
    }
    pub fn body(&self) -> &RecordBody {
        &self.body
    }
    pub fn source(&self) -> SignalSource {
        SignalSource::of(&self.id, self.wait_id.as_ref())
    }
    pub fn is_consumed(&self) -> bool {
        matches!(self.body, RecordBody::Consumed(_))
    }
    /// The payload while the record is pending.
    pub fn pending_payload(&self) -> Option<&Payload> {
        match &self.body {
            RecordBody::Pending(p) => Some(p),
            RecordBody::Consumed(_) => None,
        }
    }
    pub fn payload_digest(&self) -> Digest {
        self.body.digest()
    }
    /// Whether this record answers a wait (is addressed and is not the wait's opening).
    pub fn is_answer(&self) -> bool {
        self.wait_id.is_some() && self.opens.is_none()
    }

    /// The record as a window Signal, while pending.
    pub fn to_signal(&self) -> Option<Signal> {
        self.pending_payload().map(|p| {
            Signal::from_valid_parts(self.id.clone(), self.wait_id.clone(), p.clone(), self.status)
        })
    }

    /// Releases the payload, keeping only its digest. Idempotent.
    pub(crate) fn consume(&mut self) {
        if let RecordBody::Pending(p) = &self.body {
            self.body = RecordBody::Consumed(p.digest());
        }
    }
}

/// Wire: `{id, wait_id?, status?, opens?, payload | payload_digest}` (exactly one of the last
/// two; `opens` only on openings). The arrival is not part of a record's own form: the mailbox
/// adds `arrival` to the records whose arrival is not implied by position (see its codec).
impl ToJson for SignalRecord {
    fn to_json(&self) -> Json {
        self.encode(None)
    }
}

impl SignalRecord {
    /// The wire form, with an explicit `arrival` member when `arrival` is given.
    pub(super) fn encode(&self, arrival: Option<u64>) -> Json {
        let b = ObjectBuilder::new()
            .opt_field("arrival", arrival.as_ref())
            .field("id", &self.id)
            .opt_field("wait_id", self.wait_id.as_ref())
            .opt_field("status", self.status.as_ref())
            .opt_field("opens", self.opens.as_ref());
        match &self.body {
            RecordBody::Pending(p) => b.value("payload", p.value().clone()),
            RecordBody::Consumed(d) => b.value("payload_digest", Json::String(d.to_string())),
        }
        .build()
    }

    /// Appends the canonical bytes of [`SignalRecord::encode`] without building its tree.
    pub(super) fn write_encoded(&self, out: &mut String, arrival: Option<u64>) {
        let mut w = ObjectWriter::new(out);
        w.opt_write("arrival", arrival.as_ref()).write("id", &self.id).opt_write("opens", self.opens.as_ref());
        match &self.body {
            RecordBody::Pending(p) => w.write("payload", p),
            RecordBody::Consumed(d) => w.write("payload_digest", d),
        };
        w.opt_write("status", self.status.as_ref()).opt_write("wait_id", self.wait_id.as_ref());
        w.finish();
    }

    /// Decodes the wire form with an optional explicit `arrival` member (returned beside the
    /// record; the record's own arrival stays 0 until a mailbox places it).
    pub(super) fn decode(value: &Json) -> Result<(SignalRecord, Option<u64>), DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let arrival: Option<u64> = r.optional("arrival")?;
        let record = SignalRecord::decode_members(r)?;
        Ok((record, arrival))
    }

    fn decode_members(mut r: ObjectReader<'_>) -> Result<SignalRecord, DecodeError> {
        let id: SignalId = r.required("id")?;
        let wait_id: Option<WaitId> = r.optional("wait_id")?;
        let status: Option<SettlementStatus> = r.optional("status")?;
        let opens: Option<WaitOpening> = r.optional("opens")?;
        let body = match (r.has("payload"), r.has("payload_digest")) {
            (true, false) => RecordBody::Pending(required_payload(&mut r, "payload")?),
            (false, true) => {
                RecordBody::Consumed(r.required_with("payload_digest", decode_digest)?)
            }
            _ => {
                return Err(DecodeError::invalid(
                    "a signal record has exactly one of `payload` or `payload_digest`",
                ))
            }
        };
        r.finish()?;
        SignalRecord::new(id, wait_id, status, opens, body)
            .map_err(|e| DecodeError::invalid(e.to_string()))
    }
}

impl FromJson for SignalRecord {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        SignalRecord::decode_members(ObjectReader::new(value)?)
    }
}

fn decode_digest(value: &Json) -> Result<Digest, DecodeError> {
    let text = crate::json::decode_str(value)?;
    Digest::parse(text).map_err(|e| DecodeError::invalid(e.to_string()))
}
