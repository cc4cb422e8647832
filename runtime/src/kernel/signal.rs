//! Signals: the only runtime input to an Execution.
//!
//! * A [`Signal`] is `{id, wait_id?, payload, status?}`. The Engine mints every Signal; a
//!   `status` appears only on a delivered dispatcher settlement, and then the Signal addresses no
//!   wait and the status is definite ([`SettlementStatus`] has no `Unknown`: an unknown outcome
//!   lives on the Effect record and never becomes a Signal).
//! * External callers submit a [`SignalRequest`] `{id, wait_id?, payload}` only; its id must lie
//!   outside the reserved `signal:engine:` namespace.
//! * The [`SignalSource`] of a record is derived from its identity, never stored.

use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, Payload, ToJson};
use crate::kernel::ids::{SignalId, WaitId};

/// The definite outcome carried by a dispatcher settlement Signal.
///
/// Only definite outcomes exist here: `Unknown` is an Effect-record state and is
/// never delivered as a Signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SettlementStatus {
    Succeeded,
    Failed,
}

impl SettlementStatus {
    /// The wire name (`"succeeded"` / `"failed"`).
    pub fn as_str(self) -> &'static str {
        match self {
            SettlementStatus::Succeeded => "succeeded",
            SettlementStatus::Failed => "failed",
        }
    }
}

impl ToJson for SettlementStatus {
    fn to_json(&self) -> Json {
        Json::str(self.as_str())
    }
}

impl crate::json::WriteJson for SettlementStatus {
    fn write_json(&self, out: &mut String) {
        crate::json::WriteJson::write_json(self.as_str(), out);
    }
}

impl FromJson for SettlementStatus {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        match crate::json::decode_str(value)? {
            "succeeded" => Ok(SettlementStatus::Succeeded),
            "failed" => Ok(SettlementStatus::Failed),
            other => Err(DecodeError::invalid(format!(
                "settlement status must be `succeeded` or `failed`, got `{other}`"
            ))),
        }
    }
}

/// Where a Signal came from, derived from its identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SignalSource {
    /// Host input: an id outside the Engine namespace.
    External,
    /// An Engine id addressed to a wait whose opening it is not: a child-wait satisfaction.
    ChildWaitAnswer,
    /// Any other Engine id: Effect settlements, framework results and wait openings.
    Settlement,
}

impl SignalSource {
    /// Derives the source of `(id, wait_id)`.
    pub fn of(id: &SignalId, wait_id: Option<&WaitId>) -> SignalSource {
        if !id.is_engine_owned() {
            return SignalSource::External;
        }
        match wait_id {
            Some(wait) if *id != SignalId::wait_opening(wait) => SignalSource::ChildWaitAnswer,
            _ => SignalSource::Settlement,
        }
    }
}

/// Why a Signal or SignalRequest could not be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SignalError {
    #[error("signal `{id}` uses the reserved `signal:engine:` namespace")]
    ReservedNamespace { id: SignalId },
    #[error("signal `{id}` carries a status but is not an unaddressed Engine settlement")]
    StatusNotAllowed { id: SignalId },
}

/// One Signal as an Execution sees it in its window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signal {
    id: SignalId,
    wait_id: Option<WaitId>,
    payload: Payload,
    status: Option<SettlementStatus>,
}

impl Signal {
    /// Builds a Signal; a `status` requires an Engine-owned id and no `wait_id`.
    pub fn new(
        id: SignalId,
        wait_id: Option<WaitId>,
        payload: Payload,
        status: Option<SettlementStatus>,
    ) -> Result<Signal, SignalError> {
        if status.is_some() && (!id.is_engine_owned() || wait_id.is_some()) {
            return Err(SignalError::StatusNotAllowed { id });
        }
        Ok(Signal { id, wait_id, payload, status })
    }

    /// Builds a Signal from parts already known to satisfy [`Signal::new`]'s rule.
    pub(crate) fn from_valid_parts(
        id: SignalId,
        wait_id: Option<WaitId>,
        payload: Payload,
        status: Option<SettlementStatus>,
    ) -> Signal {
        Signal { id, wait_id, payload, status }
    }

    pub fn id(&self) -> &SignalId {
        &self.id
    }
    pub fn wait_id(&self) -> Option<&WaitId> {
        self.wait_id.as_ref()
    }
    pub fn payload(&self) -> &Payload {
        &self.payload
    }
    pub fn into_payload(self) -> Payload {
        self.payload
    }
    pub fn status(&self) -> Option<SettlementStatus> {
        self.status
    }
    /// Whether the id is in the `signal:engine:` namespace.
    pub fn engine_owned(&self) -> bool {
        self.id.is_engine_owned()
    }
    pub fn source(&self) -> SignalSource {
        SignalSource::of(&self.id, self.wait_id.as_ref())
    }
}

impl ToJson for Signal {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .field("id", &self.id)
            .opt_field("wait_id", self.wait_id.as_ref())
            .value("payload", self.payload.value().clone())
            .opt_field("status", self.status.as_ref())
            .build()
    }
}

impl FromJson for Signal {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let id: SignalId = r.required("id")?;
        let wait_id: Option<WaitId> = r.optional("wait_id")?;
        let payload = required_payload(&mut r, "payload")?;
        let status: Option<SettlementStatus> = r.optional("status")?;
        r.finish()?;
        Signal::new(id, wait_id, payload, status).map_err(|e| DecodeError::invalid(e.to_string()))
    }
}

/// A Signal submitted by a Host: `{id, wait_id?, payload}`, never in the Engine namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignalRequest {
    id: SignalId,
    wait_id: Option<WaitId>,
    payload: Payload,
}

impl SignalRequest {
    /// Builds a request; an id in the reserved Engine namespace is a typed error.
    pub fn new(
        id: SignalId,
        wait_id: Option<WaitId>,
        payload: Payload,
    ) -> Result<SignalRequest, SignalError> {
        if id.is_engine_owned() {
            return Err(SignalError::ReservedNamespace { id });
        }
        Ok(SignalRequest { id, wait_id, payload })
    }
    pub fn id(&self) -> &SignalId {
        &self.id
    }
    pub fn wait_id(&self) -> Option<&WaitId> {
        self.wait_id.as_ref()
    }
    pub fn payload(&self) -> &Payload {
        &self.payload
    }
}

impl ToJson for SignalRequest {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .field("id", &self.id)
            .opt_field("wait_id", self.wait_id.as_ref())
            .value("payload", self.payload.value().clone())
            .build()
    }
}

impl FromJson for SignalRequest {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let id: SignalId = r.required("id")?;
        let wait_id: Option<WaitId> = r.optional("wait_id")?;
        let payload = required_payload(&mut r, "payload")?;
        r.finish()?;
        SignalRequest::new(id, wait_id, payload).map_err(|e| DecodeError::invalid(e.to_string()))
    }
}

/// Decodes open JSON into a normalized, size-bounded [`Payload`].
///
/// A free function rather than a `FromJson` impl so the json module stays free to add its own.
pub(crate) fn decode_payload(value: &Json) -> Result<Payload, DecodeError> {
    Payload::from_json(value.clone()).map_err(DecodeError::from)
}

/// A required open-JSON member. `null` is a payload like any other (`Payload::null()`), and
/// every encoder writes it as `null`, so it must decode: a cut holding one must stay restorable.
pub(crate) fn required_payload(r: &mut ObjectReader<'_>, key: &'static str) -> Result<Payload, DecodeError> {
    r.nullable_value(key).and_then(decode_payload).map_err(|e| e.in_member(key))
}

/// An optional open-JSON member: absent → `None`; present, `null` included → `Some`.
pub(crate) fn optional_payload(r: &mut ObjectReader<'_>, key: &'static str) -> Result<Option<Payload>, DecodeError> {
    if !r.has(key) {
        return Ok(None);
    }
    required_payload(r, key).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::ids::EffectId;

    fn effect() -> EffectId {
        EffectId::parse("effect:e1").unwrap()
    }
    fn wait() -> WaitId {
        WaitId::of_effect(&effect())
    }

    #[test]
    fn source_is_derived_from_identity() {
        let ext = SignalId::external("signal:user-1").unwrap();
        assert_eq!(SignalSource::of(&ext, None), SignalSource::External);
        assert_eq!(SignalSource::of(&ext, Some(&wait())), SignalSource::External);
        let settle = SignalId::settlement(&effect());
        assert_eq!(SignalSource::of(&settle, None), SignalSource::Settlement);
        let opening = SignalId::wait_opening(&wait());
        assert_eq!(SignalSource::of(&opening, Some(&wait())), SignalSource::Settlement);
        let answer = SignalId::child_wait_satisfied(&wait());
        assert_eq!(SignalSource::of(&answer, Some(&wait())), SignalSource::ChildWaitAnswer);
    }

    #[test]
    fn status_wire_names() {
        for s in [SettlementStatus::Succeeded, SettlementStatus::Failed] {
            assert_eq!(SettlementStatus::from_json(&s.to_json()).unwrap(), s);
        }
        assert!(SettlementStatus::from_json(&Json::str("unknown")).is_err());
        assert!(SettlementStatus::from_json(&Json::Bool(true)).is_err());
    }

    // The tests below build Payloads and therefore need the json module's bodies.

    fn payload() -> Payload {
        Payload::from_json(Json::str("hi")).unwrap()
    }

    #[test]
    fn request_rejects_engine_namespace() {
        let id = SignalId::settlement(&effect());
        assert!(matches!(
            SignalRequest::new(id, None, payload()),
            Err(SignalError::ReservedNamespace { .. })
        ));
        assert!(SignalRequest::new(SignalId::parse("s1").unwrap(), None, payload()).is_ok());
    }

    #[test]
    fn status_only_on_unaddressed_engine_signals() {
        let st = Some(SettlementStatus::Failed);
        let ext = SignalId::parse("s1").unwrap();
        assert!(matches!(
            Signal::new(ext, None, payload(), st),
            Err(SignalError::StatusNotAllowed { .. })
        ));
        let opening = SignalId::wait_opening(&wait());
        assert!(matches!(
            Signal::new(opening, Some(wait()), payload(), st),
            Err(SignalError::StatusNotAllowed { .. })
        ));
        let s = Signal::new(SignalId::settlement(&effect()), None, payload(), st).unwrap();
        assert_eq!(s.status(), st);
        assert!(s.engine_owned());
    }

    #[test]
    fn signal_and_request_codecs_round_trip_strictly() {
        let s = Signal::new(
            SignalId::settlement(&effect()),
            None,
            payload(),
            Some(SettlementStatus::Succeeded),
        )
        .unwrap();
        assert_eq!(Signal::from_json(&s.to_json()).unwrap(), s);
        let r =
            SignalRequest::new(SignalId::parse("s1").unwrap(), Some(wait()), payload()).unwrap();
        assert_eq!(SignalRequest::from_json(&r.to_json()).unwrap(), r);

        // Unknown members, explicit nulls and engine ids are rejected.
        let mut j = r.to_json();
        if let Json::Object(o) = &mut j {
            o.insert("status".into(), Json::str("failed"));
        }
        assert!(SignalRequest::from_json(&j).is_err());
        let mut j = r.to_json();
        if let Json::Object(o) = &mut j {
            o.insert("wait_id".into(), Json::Null);
        }
        assert!(SignalRequest::from_json(&j).is_err());
        let mut j = r.to_json();
        if let Json::Object(o) = &mut j {
            o.insert("id".into(), SignalId::settlement(&effect()).to_json());
        }
        assert!(SignalRequest::from_json(&j).is_err());
        // A status on an external Signal fails the constructor rule during decode.
        let mut j = r.to_json();
        if let Json::Object(o) = &mut j {
            o.insert("status".into(), Json::str("failed"));
        }
        assert!(Signal::from_json(&j).is_err());
    }
}
