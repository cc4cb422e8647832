//! A model's reasoning, kept so it can be sent back exactly as the provider requires.

use super::ChatError;
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ToJson};
use crate::limits::MAX_PAYLOAD_BYTES;

/// The reasoning a model produced before (or between) its answer and tool calls: never answer
/// text (`Message::text` skips it), but part of the conversation, because providers require
/// it back on the next call:
///
/// * Anthropic extended thinking: a `thinking` block is `text` + `signature`; a
///   `redacted_thinking` block is `redacted` (its opaque `data`). When thinking is used with
///   tools, the blocks of the last assistant turn must be sent back unmodified.
/// * OpenAI Responses: a `reasoning` item is `id` (`rs_…`), `summary` (its summary texts in
///   order), `text` (its reasoning text content, where the model exposes it) and `encrypted`
///   (`encrypted_content`, returned with `store: false`), all passed back as the item.
/// * OpenAI-compatible chat servers that stream `reasoning_content`: `text` only.
///
/// A client sends back only what its provider can verify (Anthropic: parts with a signature
/// or redacted data; Responses: parts with an id or encrypted content) and drops the rest.
///
/// Build with struct update syntax (`Reasoning { text, ..Reasoning::default() }`): members
/// may be added, never renamed.
///
/// Wire form: `{"type":"reasoning","text"?:S,"summary"?:[S],"signature"?:S,"redacted"?:S,
/// "encrypted"?:S,"id"?:S}` (as a [`super::Part`]); empty `text` and `summary` are omitted.
///
/// Valid when it carries something (text, a summary, a signature, redacted or encrypted
/// content, or an id naming reasoning the provider stored), the optional strings are non-empty, `id` has no control characters, and all of
/// it together fits [`MAX_PAYLOAD_BYTES`].
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Reasoning {
    /// Reasoning text (Anthropic `thinking`, Responses `reasoning_text`, `reasoning_content`).
    pub text: String,
    /// Summary texts in order (Responses `summary_text` parts).
    pub summary: Vec<String>,
    /// Anthropic's signature over the thinking text.
    pub signature: Option<String>,
    /// Anthropic `redacted_thinking` data, opaque, passed back verbatim.
    pub redacted: Option<String>,
    /// OpenAI Responses `encrypted_content`, opaque, passed back verbatim.
    pub encrypted: Option<String>,
    /// The provider's id of this reasoning item (OpenAI Responses `rs_…`).
    pub id: Option<String>,
}

impl Reasoning {
    /// Reasoning text alone (what an OpenAI-compatible server's `reasoning_content` gives).
    pub fn text(text: impl Into<String>) -> Reasoning {
        Reasoning {
            text: text.into(),
            ..Reasoning::default()
        }
    }

    /// An Anthropic `thinking` block: its text and signature.
    pub fn signed(text: impl Into<String>, signature: impl Into<String>) -> Reasoning {
        Reasoning {
            text: text.into(),
            signature: Some(signature.into()),
            ..Reasoning::default()
        }
    }

    /// An Anthropic `redacted_thinking` block: its opaque data.
    pub fn redacted(data: impl Into<String>) -> Reasoning {
        Reasoning {
            redacted: Some(data.into()),
            ..Reasoning::default()
        }
    }

    /// All text and opaque bytes this part carries (bounds a whole message).
    pub(crate) fn bytes(&self) -> usize {
        let opt = |s: &Option<String>| s.as_ref().map_or(0, String::len);
        self.summary
            .iter()
            .fold(self.text.len(), |sum, s| sum.saturating_add(s.len()))
            .saturating_add(opt(&self.signature))
            .saturating_add(opt(&self.redacted))
            .saturating_add(opt(&self.encrypted))
            .saturating_add(opt(&self.id))
    }

    pub fn validate(&self) -> Result<(), ChatError> {
        let carries = !self.text.is_empty()
            || !self.summary.is_empty()
            || self.signature.is_some()
            || self.redacted.is_some()
            || self.encrypted.is_some()
            // An id alone names reasoning the provider stored (Responses, `store: true`).
            || self.id.is_some();
        if !carries {
            return Err(ChatError::EmptyReasoning);
        }
        check_members(
            &[("signature", &self.signature), ("redacted", &self.redacted), ("encrypted", &self.encrypted), ("id", &self.id)],
            self.id.as_deref(),
            self.bytes(),
        )
    }

    /// Adds the members to an object (shared with the flattened `reasoning` part).
    pub(crate) fn write_members(&self, b: ObjectBuilder) -> ObjectBuilder {
        b.opt_field("text", (!self.text.is_empty()).then_some(&self.text))
            .opt_field("summary", (!self.summary.is_empty()).then_some(&self.summary))
            .opt_field("signature", self.signature.as_ref())
            .opt_field("redacted", self.redacted.as_ref())
            .opt_field("encrypted", self.encrypted.as_ref())
            .opt_field("id", self.id.as_ref())
    }

    /// Reads the members from an object (shared with the flattened `reasoning` part).
    pub(crate) fn read_members(r: &mut ObjectReader<'_>) -> Result<Reasoning, DecodeError> {
        Ok(Reasoning {
            text: r.optional("text")?.unwrap_or_default(),
            summary: r.optional("summary")?.unwrap_or_default(),
            signature: r.optional("signature")?,
            redacted: r.optional("redacted")?,
            encrypted: r.optional("encrypted")?,
            id: r.optional("id")?,
        })
    }
}

impl ToJson for Reasoning {
    fn to_json(&self) -> Json {
        self.write_members(ObjectBuilder::new()).build()
    }
}

impl FromJson for Reasoning {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let reasoning = Reasoning::read_members(&mut r)?;
        r.finish()?;
        reasoning.validate()?;
        Ok(reasoning)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::codec::DecodeErrorKind;

    pub(crate) fn samples() -> Vec<Reasoning> {
        vec![
            Reasoning::text("Let me think."),
            Reasoning::signed("Paris is in France.", "EqQBCkgIARABGAIiQL"),
            Reasoning::signed("", "sig-only"),
            Reasoning::redacted("EmwKAhgBEgy3va3pzix/LafPsn4a"),
            Reasoning {
                id: Some("rs_68b1".into()),
                summary: vec!["**Planning**".into(), "Call the tool.".into()],
                encrypted: Some("gAAAAABo".into()),
                ..Reasoning::default()
            },
            Reasoning {
                id: Some("rs_1".into()),
                text: "raw".into(),
                summary: vec![String::new()],
                ..Reasoning::default()
            },
        ]
    }

    #[test]
    fn round_trip() {
        for r in samples() {
            assert_eq!(Reasoning::from_json(&r.to_json()), Ok(r.clone()));
            let text = r.to_json().to_canonical_string();
            assert_eq!(
                Reasoning::from_json_bytes(text.as_bytes()),
                Ok(r),
                "{text}"
            );
        }
    }

    #[test]
    fn wire_shape() {
        assert_eq!(
            Reasoning::signed("t", "s").to_json().to_canonical_string(),
            r#"{"signature":"s","text":"t"}"#
        );
        assert_eq!(
            samples()[4].to_json().to_canonical_string(),
            r#"{"encrypted":"gAAAAABo","id":"rs_68b1","summary":["**Planning**","Call the tool."]}"#
        );
    }

    #[test]
    fn must_carry_something() {
        assert_eq!(
            Reasoning::default().validate(),
            Err(ChatError::EmptyReasoning)
        );
        let id_only = Reasoning {
            id: Some("rs_1".into()),
            ..Reasoning::default()
        };
        assert_eq!(id_only.validate(), Ok(()));
        let empty = ObjectBuilder::new().build();
        assert!(Reasoning::from_json(&empty).is_err());
    }

    #[test]
    fn rejects_empty_members_and_bad_ids() {
        let empty_sig = Reasoning::signed("t", "");
        assert_eq!(
            empty_sig.validate(),
            Err(ChatError::EmptyReasoningMember {
                member: "signature"
            })
        );
        let bad_id = Reasoning {
            id: Some("rs\n1".into()),
            ..Reasoning::text("t")
        };
        assert!(matches!(
            bad_id.validate(),
            Err(ChatError::InvalidReasoningId { .. })
        ));
    }

    #[test]
    fn bounded() {
        let big = Reasoning::signed("x".repeat(MAX_PAYLOAD_BYTES), "s");
        assert!(matches!(big.validate(), Err(ChatError::TooLarge { .. })));
    }

    #[test]
    fn strict_decoding() {
        let mut v = Reasoning::text("t").to_json();
        if let Json::Object(o) = &mut v {
            o.insert("thinking".into(), Json::str("x"));
        }
        assert_eq!(
            Reasoning::from_json(&v).unwrap_err().kind,
            DecodeErrorKind::UnknownMember("thinking".into())
        );
        let null_sig = ObjectBuilder::new()
            .field("text", "t")
            .value("signature", Json::Null)
            .build();
        assert_eq!(
            Reasoning::from_json(&null_sig).unwrap_err().kind,
            DecodeErrorKind::NullMember("signature".into())
        );
    }
}

/// The checks a reasoning part and a reasoning delta share: no optional member present but
/// empty, an item id without control characters, and the payload bound.
pub(super) fn check_members(members: &[(&'static str, &Option<String>)], id: Option<&str>, bytes: usize) -> Result<(), ChatError> {
    for (member, value) in members {
        if value.as_deref() == Some("") {
            return Err(ChatError::EmptyReasoningMember { member });
        }
    }
    if let Some(id) = id {
        if id.chars().any(char::is_control) {
            return Err(ChatError::InvalidReasoningId { id: id.to_owned() });
        }
    }
    if bytes > MAX_PAYLOAD_BYTES {
        return Err(ChatError::TooLarge { what: "reasoning", len: bytes, limit: MAX_PAYLOAD_BYTES });
    }
    Ok(())
}
