//! One part of a message.

use super::error::quote;
use super::{ChatError, Reasoning, ToolCall, ToolResult};
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ToJson};
use crate::limits::MAX_PAYLOAD_BYTES;

/// One part of a message.
///
/// Wire form (tagged by `type`, tool members flattened):
/// `{"type":"text","text":S}` |
/// `{"type":"tool_call","id":S,"name":S,"arguments":S}` |
/// `{"type":"tool_result","id":S,"name":S,"output":{..},"is_error":B}` |
/// `{"type":"reasoning",..}` ([`Reasoning`]'s members).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Part {
    Text(String),
    ToolCall(ToolCall),
    ToolResult(ToolResult),
    /// The model's reasoning: never answer text, sent back as its provider requires.
    Reasoning(Reasoning),
}

/// The kind of a [`Part`], named as on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PartKind {
    Text,
    ToolCall,
    ToolResult,
    Reasoning,
}

impl PartKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PartKind::Text => "text",
            PartKind::ToolCall => "tool_call",
            PartKind::ToolResult => "tool_result",
            PartKind::Reasoning => "reasoning",
        }
    }
}

impl std::fmt::Display for PartKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Part {
    pub fn text(text: impl Into<String>) -> Part {
        Part::Text(text.into())
    }

    pub fn kind(&self) -> PartKind {
        match self {
            Part::Text(_) => PartKind::Text,
            Part::ToolCall(_) => PartKind::ToolCall,
            Part::ToolResult(_) => PartKind::ToolResult,
            Part::Reasoning(_) => PartKind::Reasoning,
        }
    }

    /// The bytes of free text this part carries (text, arguments or tool output content),
    /// used to bound a whole message.
    pub(crate) fn text_bytes(&self) -> usize {
        match self {
            Part::Text(t) => t.len(),
            Part::ToolCall(c) => c.arguments.len(),
            Part::ToolResult(r) => r.output.content.len(),
            Part::Reasoning(r) => r.bytes(),
        }
    }

    /// Text parts are non-empty and bounded; tool parts follow their own rules.
    pub fn validate(&self) -> Result<(), ChatError> {
        match self {
            Part::Text(t) if t.is_empty() => Err(ChatError::EmptyText),
            Part::Text(t) if t.len() > MAX_PAYLOAD_BYTES => Err(ChatError::TooLarge {
                what: "text",
                len: t.len(),
                limit: MAX_PAYLOAD_BYTES,
            }),
            Part::Text(_) => Ok(()),
            Part::ToolCall(c) => c.validate(),
            Part::ToolResult(r) => r.validate(),
            Part::Reasoning(r) => r.validate(),
        }
    }
}

impl ToJson for Part {
    fn to_json(&self) -> Json {
        let b = ObjectBuilder::new().field("type", self.kind().as_str());
        match self {
            Part::Text(t) => b.field("text", t),
            Part::ToolCall(c) => c.write_members(b),
            Part::ToolResult(r) => r.write_members(b),
            Part::Reasoning(r) => r.write_members(b),
        }
        .build()
    }
}

impl FromJson for Part {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let kind: String = r.required("type")?;
        let part = match kind.as_str() {
            "text" => Part::Text(r.required("text")?),
            "tool_call" => Part::ToolCall(ToolCall::read_members(&mut r)?),
            "tool_result" => Part::ToolResult(ToolResult::read_members(&mut r)?),
            "reasoning" => Part::Reasoning(Reasoning::read_members(&mut r)?),
            other => {
                return Err(
                    DecodeError::invalid(format!("unknown part type `{}`", quote(other)))
                        .in_member("type"),
                )
            }
        };
        r.finish()?;
        part.validate()?;
        Ok(part)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::ToolOutput;
    use crate::json::codec::DecodeErrorKind;

    fn with(mut value: Json, key: &str, member: Json) -> Json {
        if let Json::Object(o) = &mut value {
            o.insert(key.into(), member);
        }
        value
    }

    fn samples() -> Vec<Part> {
        vec![
            Part::text("hello"),
            Part::ToolCall(ToolCall::new("c1", "search", r#"{"q":"x"}"#)),
            Part::ToolResult(ToolResult::ok(
                "c1",
                "search",
                ToolOutput {
                    content: "found".into(),
                    details: Some(Json::u64(1)),
                },
            )),
            Part::ToolResult(ToolResult::error("c2", "search", "boom")),
            Part::Reasoning(Reasoning::signed("think", "sig")),
            Part::Reasoning(Reasoning::redacted("opaque")),
        ]
    }

    #[test]
    fn wire_shape() {
        assert_eq!(
            Part::text("hi").to_json(),
            ObjectBuilder::new()
                .field("type", "text")
                .field("text", "hi")
                .build()
        );
        assert_eq!(
            Part::ToolCall(ToolCall::new("c", "t", "{}")).to_json(),
            ObjectBuilder::new()
                .field("type", "tool_call")
                .field("id", "c")
                .field("name", "t")
                .field("arguments", "{}")
                .build()
        );
        assert_eq!(
            Part::ToolResult(ToolResult::error("c", "t", "x")).to_json(),
            ObjectBuilder::new()
                .field("type", "tool_result")
                .field("id", "c")
                .field("name", "t")
                .field("output", &ToolOutput::text("x"))
                .field("is_error", &true)
                .build()
        );
    }

    #[test]
    fn round_trip() {
        for part in samples() {
            assert_eq!(Part::from_json(&part.to_json()), Ok(part));
        }
    }

    #[test]
    fn empty_text_is_invalid() {
        assert_eq!(Part::text("").validate(), Err(ChatError::EmptyText));
        let e = Part::from_json(&Part::text("").to_json()).unwrap_err();
        assert!(matches!(e.kind, DecodeErrorKind::Invalid(_)));
    }

    #[test]
    fn oversized_text_is_invalid() {
        let part = Part::text("x".repeat(MAX_PAYLOAD_BYTES + 1));
        assert!(matches!(part.validate(), Err(ChatError::TooLarge { .. })));
    }

    #[test]
    fn rejects_unknown_members_per_variant() {
        for part in samples() {
            let e = Part::from_json(&with(part.to_json(), "extra", Json::Bool(true))).unwrap_err();
            assert_eq!(
                e.kind,
                DecodeErrorKind::UnknownMember("extra".into()),
                "{part:?}"
            );
        }
        // Members of another variant are unknown too.
        let text_with_id = with(Part::text("a").to_json(), "id", Json::str("c"));
        assert_eq!(
            Part::from_json(&text_with_id).unwrap_err().kind,
            DecodeErrorKind::UnknownMember("id".into())
        );
    }

    #[test]
    fn rejects_bad_type_tags() {
        let e = Part::from_json(&with(Part::text("a").to_json(), "type", Json::str("image")))
            .unwrap_err();
        assert_eq!(e.path, "$.type");
        let e =
            Part::from_json(&with(Part::text("a").to_json(), "type", Json::u64(0))).unwrap_err();
        assert!(matches!(e.kind, DecodeErrorKind::WrongType { .. }));
        let untagged = ObjectBuilder::new().field("text", "a").build();
        assert_eq!(
            Part::from_json(&untagged).unwrap_err().kind,
            DecodeErrorKind::MissingMember("type".into())
        );
        assert!(Part::from_json(&Json::str("text")).is_err());
    }

    #[test]
    fn rejects_invalid_nested_values() {
        let bad_name = Part::ToolCall(ToolCall::new("c", "invalid/name", "{}"));
        assert!(Part::from_json(&bad_name.to_json()).is_err());
        let null_output = with(samples()[2].to_json(), "output", Json::Null);
        assert_eq!(
            Part::from_json(&null_output).unwrap_err().kind,
            DecodeErrorKind::NullMember("output".into())
        );
        let details_null = with(
            samples()[2].to_json(),
            "output",
            with(ToolOutput::text("a").to_json(), "details", Json::Null),
        );
        let e = Part::from_json(&details_null).unwrap_err();
        assert_eq!(e.path, "$.output.details");
    }
}
