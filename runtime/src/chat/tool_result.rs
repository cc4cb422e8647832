//! What a tool produced, and the answer to one tool call.

use super::name::{validate_call_id, validate_tool_name};
use super::{ChatError, ToolCall};
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ToJson};
use crate::limits::MAX_PAYLOAD_BYTES;

/// What a tool produced: model-visible text `content` plus optional structured `details`.
/// The zero value (empty content, no details) is a valid, empty output.
///
/// Wire form: `{"content":S,"details"?:J}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ToolOutput {
    pub content: String,
    pub details: Option<Json>,
}

impl ToolOutput {
    /// Text-only output.
    pub fn text(content: impl Into<String>) -> ToolOutput {
        ToolOutput {
            content: content.into(),
            details: None,
        }
    }

    /// Content bounded by [`MAX_PAYLOAD_BYTES`]; `details`, when present, is not `null`
    /// (a null would encode to a member that strict decoding rejects). The size of `details`
    /// is bounded where the enclosing payload is normalized.
    pub fn validate(&self) -> Result<(), ChatError> {
        if self.content.len() > MAX_PAYLOAD_BYTES {
            return Err(ChatError::TooLarge {
                what: "tool output content",
                len: self.content.len(),
                limit: MAX_PAYLOAD_BYTES,
            });
        }
        if matches!(self.details, Some(Json::Null)) {
            return Err(ChatError::NullDetails);
        }
        Ok(())
    }
}

impl ToJson for ToolOutput {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .field("content", &self.content)
            .opt_field("details", self.details.as_ref())
            .build()
    }
}

impl FromJson for ToolOutput {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let output = ToolOutput {
            content: r.required("content")?,
            details: r.optional("details")?,
        };
        r.finish()?;
        output.validate()?;
        Ok(output)
    }
}

/// The answer to one [`ToolCall`], matched by `id` and `name`.
///
/// Wire form: `{"id":S,"name":S,"output":ToolOutput,"is_error":B}`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ToolResult {
    pub id: String,
    pub name: String,
    pub output: ToolOutput,
    pub is_error: bool,
}

impl ToolResult {
    /// A successful result.
    pub fn ok(id: impl Into<String>, name: impl Into<String>, output: ToolOutput) -> ToolResult {
        ToolResult {
            id: id.into(),
            name: name.into(),
            output,
            is_error: false,
        }
    }

    /// An error result whose model-visible content is `text`.
    pub fn error(
        id: impl Into<String>,
        name: impl Into<String>,
        text: impl Into<String>,
    ) -> ToolResult {
        ToolResult {
            id: id.into(),
            name: name.into(),
            output: ToolOutput::text(text),
            is_error: true,
        }
    }

    /// Whether this result answers `call` (same id and name).
    pub fn answers(&self, call: &ToolCall) -> bool {
        self.id == call.id && self.name == call.name
    }

    pub fn validate(&self) -> Result<(), ChatError> {
        validate_call_id(&self.id)?;
        validate_tool_name(&self.name)?;
        self.output.validate()
    }

    pub(crate) fn write_members(&self, b: ObjectBuilder) -> ObjectBuilder {
        b.field("id", &self.id)
            .field("name", &self.name)
            .field("output", &self.output)
            .field("is_error", &self.is_error)
    }

    pub(crate) fn read_members(r: &mut ObjectReader<'_>) -> Result<ToolResult, DecodeError> {
        Ok(ToolResult {
            id: r.required("id")?,
            name: r.required("name")?,
            output: r.required("output")?,
            is_error: r.required("is_error")?,
        })
    }
}

impl ToJson for ToolResult {
    fn to_json(&self) -> Json {
        self.write_members(ObjectBuilder::new()).build()
    }
}

impl FromJson for ToolResult {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let result = ToolResult::read_members(&mut r)?;
        r.finish()?;
        result.validate()?;
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::codec::DecodeErrorKind;

    fn with(mut value: Json, key: &str, member: Json) -> Json {
        if let Json::Object(o) = &mut value {
            o.insert(key.into(), member);
        }
        value
    }

    #[test]
    fn output_round_trip() {
        let details = ObjectBuilder::new().field("rows", &3u64).build();
        for output in [
            ToolOutput::default(),
            ToolOutput::text("done"),
            ToolOutput {
                content: String::new(),
                details: Some(details.clone()),
            },
            ToolOutput {
                content: "x".into(),
                details: Some(Json::Array(vec![Json::Null])),
            },
        ] {
            assert_eq!(ToolOutput::from_json(&output.to_json()), Ok(output));
        }
        assert_eq!(
            ToolOutput::default().to_json(),
            ObjectBuilder::new().field("content", "").build()
        );
    }

    #[test]
    fn output_rules() {
        assert_eq!(
            ToolOutput {
                content: String::new(),
                details: Some(Json::Null)
            }
            .validate(),
            Err(ChatError::NullDetails)
        );
        let big = ToolOutput::text("x".repeat(MAX_PAYLOAD_BYTES + 1));
        assert!(matches!(big.validate(), Err(ChatError::TooLarge { .. })));
    }

    #[test]
    fn output_strict_decoding() {
        let base = ToolOutput::text("a").to_json();
        let e = ToolOutput::from_json(&with(base.clone(), "details", Json::Null)).unwrap_err();
        assert_eq!(e.kind, DecodeErrorKind::NullMember("details".into()));
        let e = ToolOutput::from_json(&with(base.clone(), "extra", Json::u64(1))).unwrap_err();
        assert_eq!(e.kind, DecodeErrorKind::UnknownMember("extra".into()));
        let e = ToolOutput::from_json(&with(base, "content", Json::u64(1))).unwrap_err();
        assert_eq!(e.path, "$.content");
        assert!(ToolOutput::from_json(&Json::object()).is_err());
    }

    #[test]
    fn result_constructors_and_round_trip() {
        let err = ToolResult::error("c1", "t", "boom");
        assert!(err.is_error);
        assert_eq!(err.output, ToolOutput::text("boom"));
        let ok = ToolResult::ok("c1", "t", ToolOutput::text("fine"));
        assert!(!ok.is_error);
        assert!(ok.answers(&ToolCall::new("c1", "t", "")));
        assert!(!ok.answers(&ToolCall::new("c1", "u", "")));
        assert!(!ok.answers(&ToolCall::new("c2", "t", "")));
        for r in [err, ok] {
            assert_eq!(ToolResult::from_json(&r.to_json()), Ok(r));
        }
    }

    #[test]
    fn result_rules() {
        assert!(matches!(
            ToolResult::error("", "t", "x").validate(),
            Err(ChatError::InvalidCallId { .. })
        ));
        assert!(matches!(
            ToolResult::error("c", "invalid/name", "x").validate(),
            Err(ChatError::InvalidToolName { .. })
        ));
        let null_details = ToolResult::ok(
            "c",
            "t",
            ToolOutput {
                content: String::new(),
                details: Some(Json::Null),
            },
        );
        assert_eq!(null_details.validate(), Err(ChatError::NullDetails));
    }

    #[test]
    fn result_strict_decoding() {
        let base = ToolResult::error("c", "t", "x").to_json();
        let e = ToolResult::from_json(&with(base.clone(), "type", Json::str("tool_result")))
            .unwrap_err();
        assert_eq!(e.kind, DecodeErrorKind::UnknownMember("type".into()));
        // Unknown member one level down, inside `output`.
        let nested = with(
            base.clone(),
            "output",
            with(ToolOutput::text("x").to_json(), "mime", Json::str("t")),
        );
        let e = ToolResult::from_json(&nested).unwrap_err();
        assert_eq!(e.path, "$.output");
        assert_eq!(e.kind, DecodeErrorKind::UnknownMember("mime".into()));
        let e =
            ToolResult::from_json(&with(base.clone(), "is_error", Json::str("true"))).unwrap_err();
        assert_eq!(e.path, "$.is_error");
        let mut missing = base;
        if let Json::Object(o) = &mut missing {
            o.remove("is_error");
        }
        assert_eq!(
            ToolResult::from_json(&missing).unwrap_err().kind,
            DecodeErrorKind::MissingMember("is_error".into())
        );
    }
}
