//! The common contract of every Interaction wire value (protocol payloads, state, output).
//!
//! Each wire type implements strict [`ToJson`]/[`FromJson`] by hand, and its `from_json` runs
//! the full [`Wire::validate`], so a decoded value is always valid. [`Wire`] adds the
//! [`Payload`] conversions with the type's error family.
//!
//! Shared encoding rules (decisions, see ARCHITECTURE.md):
//! * optional members are omitted when absent; an explicit `null` is rejected;
//! * optional lists are omitted when empty, and an explicit empty list is rejected (so
//!   restore → snapshot of anything the strategy wrote is byte-identical);
//! * required lists are always present, `[]` included where empty is meaningful;
//! * chat values inside keep the chat rule: default members (`options`, `tools`,
//!   `tool_choice`) spelled out are accepted and omitted on re-encoding. So an accepted
//!   document need not be canonical; its re-encoding is, and is a fixed point (fuzzed by
//!   `fuzz/` target `interaction_state`).

use super::error::{ErrorKind, InteractionError};
use crate::json::{DecodeError, FromJson, Json, ObjectReader, Payload, ToJson};

/// A validated Interaction wire value.
pub trait Wire: ToJson + FromJson {
    /// The family of errors for an invalid value of this type.
    const INVALID: ErrorKind;
    /// What the value is, for error details.
    const WHAT: &'static str;

    /// Every rule of the type (decoding runs it too).
    fn validate(&self) -> Result<(), InteractionError>;

    /// Validates, then encodes into a bounded, normalized payload.
    fn to_payload(&self) -> Result<Payload, InteractionError> {
        self.validate()?;
        Payload::from_json(self.to_json())
            .map_err(|e| InteractionError::new(Self::INVALID, format!("{}: {e}", Self::WHAT)))
    }

    /// Strictly decodes and validates a payload.
    fn from_payload(payload: &Payload) -> Result<Self, InteractionError> {
        Self::from_json(payload.value()).map_err(|e| InteractionError::decode(Self::INVALID, Self::WHAT, e))
    }

    /// [`Wire::to_payload`] carrying a copy of the value as the payload's decoded form, for a
    /// payload this process decodes again soon (a settlement its parent steps on): that
    /// decode is then a clone ([`Wire::from_payload_reusing`]). Sound because a valid value
    /// decodes from its own encoding to itself (test builds compare on every reuse).
    fn to_payload_remembered(&self) -> Result<Payload, InteractionError>
    where
        Self: Clone + Send + Sync + 'static,
    {
        Ok(self.to_payload()?.with_decoded(std::sync::Arc::new(self.clone())))
    }

    /// [`Wire::from_payload`], taking the decoded form [`Wire::to_payload_remembered`]
    /// attached when there is one; a payload read from bytes carries none and is decoded
    /// strictly.
    fn from_payload_reusing(payload: &Payload) -> Result<Self, InteractionError>
    where
        Self: Clone + PartialEq + std::fmt::Debug + Send + Sync + 'static,
    {
        match payload.decoded::<Self>() {
            Some(remembered) => {
                #[cfg(test)]
                assert_eq!(
                    Self::from_payload(payload).as_ref().ok(),
                    Some(remembered.as_ref()),
                    "a remembered {} is what its payload decodes to",
                    Self::WHAT
                );
                Ok(Self::clone(&remembered))
            }
            None => Self::from_payload(payload),
        }
    }

    /// Strictly parses (default limits), decodes and validates bytes.
    fn from_wire_bytes(bytes: &[u8]) -> Result<Self, InteractionError> {
        Self::from_json_bytes(bytes).map_err(|e| InteractionError::decode(Self::INVALID, Self::WHAT, e))
    }

    /// The canonical encoding.
    fn to_canonical_string(&self) -> String {
        self.to_json().to_canonical_string()
    }
}

/// Reads an optional list that must be non-empty when present; absent → empty.
pub(crate) fn read_nonempty_list<T: FromJson>(
    r: &mut ObjectReader<'_>,
    key: &'static str,
) -> Result<Vec<T>, DecodeError> {
    match r.optional::<Vec<T>>(key)? {
        None => Ok(Vec::new()),
        Some(items) if items.is_empty() => {
            Err(DecodeError::invalid("present but empty; omit the member instead").in_member(key))
        }
        Some(items) => Ok(items),
    }
}

/// Reads a required member whose value may be any JSON value, `null` included, as a payload.
pub(crate) fn read_any_payload(r: &mut ObjectReader<'_>, key: &'static str) -> Result<Payload, DecodeError> {
    let value = r.nullable_value(key).map_err(|e| e.in_member(key))?;
    Payload::from_json(value.clone()).map_err(|e| DecodeError::from(e).in_member(key))
}

/// The payload of a raw JSON value, under the family `kind`.
pub(crate) fn payload_of(kind: ErrorKind, what: &str, value: &Json) -> Result<Payload, InteractionError> {
    Payload::from_json(value.clone()).map_err(|e| InteractionError::new(kind, format!("{what}: {e}")))
}
