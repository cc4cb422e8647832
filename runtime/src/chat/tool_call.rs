//! A model-requested tool invocation.

use super::name::{validate_call_id, validate_tool_name};
use super::ChatError;
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ToJson};
use crate::limits::MAX_PAYLOAD_BYTES;

/// A model-requested tool invocation. `arguments` is the raw argument text exactly as the
/// model produced it: it may be blank or even invalid JSON (tool preparation decides).
///
/// Wire form: `{"id":S,"name":S,"arguments":S}`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

impl ToolCall {
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    /// Id and name syntax; arguments bounded by [`MAX_PAYLOAD_BYTES`] (content unchecked).
    pub fn validate(&self) -> Result<(), ChatError> {
        validate_call_id(&self.id)?;
        validate_tool_name(&self.name)?;
        if self.arguments.len() > MAX_PAYLOAD_BYTES {
            return Err(ChatError::TooLarge {
                what: "tool call arguments",
                len: self.arguments.len(),
                limit: MAX_PAYLOAD_BYTES,
            });
        }
        Ok(())
    }

    /// Adds the members to an object (shared with the flattened `tool_call` part).
    pub(crate) fn write_members(&self, b: ObjectBuilder) -> ObjectBuilder {
        b.field("id", &self.id)
            .field("name", &self.name)
            .field("arguments", &self.arguments)
    }

    /// Reads the members from an object (shared with the flattened `tool_call` part).
    pub(crate) fn read_members(r: &mut ObjectReader<'_>) -> Result<ToolCall, DecodeError> {
        Ok(ToolCall {
            id: r.required("id")?,
            name: r.required("name")?,
            arguments: r.required("arguments")?,
        })
    }
}

impl ToJson for ToolCall {
    fn to_json(&self) -> Json {
        self.write_members(ObjectBuilder::new()).build()
    }
}

impl FromJson for ToolCall {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let call = ToolCall::read_members(&mut r)?;
        r.finish()?;
        call.validate()?;
        Ok(call)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::codec::DecodeErrorKind;

    fn wire(id: &str, name: &str, arguments: &str) -> Json {
        ObjectBuilder::new()
            .field("id", id)
            .field("name", name)
            .field("arguments", arguments)
            .build()
    }

    #[test]
    fn round_trip() {
        for call in [
            ToolCall::new("call_1", "get_weather", r#"{"city":"Paris"}"#),
            ToolCall::new("c", "t", ""),
            ToolCall::new("c", "t", "not json {"),
        ] {
            assert_eq!(call.to_json(), wire(&call.id, &call.name, &call.arguments));
            assert_eq!(ToolCall::from_json(&call.to_json()), Ok(call));
        }
    }

    #[test]
    fn validation() {
        assert_eq!(ToolCall::new("c", "t", "  ").validate(), Ok(()));
        assert!(matches!(
            ToolCall::new("c", "invalid/name", "{}").validate(),
            Err(ChatError::InvalidToolName { .. })
        ));
        assert!(matches!(
            ToolCall::new("", "t", "{}").validate(),
            Err(ChatError::InvalidCallId { .. })
        ));
        let huge = "x".repeat(MAX_PAYLOAD_BYTES + 1);
        assert!(matches!(
            ToolCall::new("c", "t", huge).validate(),
            Err(ChatError::TooLarge { .. })
        ));
        assert_eq!(
            ToolCall::new("c", "t", "x".repeat(MAX_PAYLOAD_BYTES)).validate(),
            Ok(())
        );
    }

    #[test]
    fn strict_decoding() {
        let mut extra = wire("c", "t", "{}");
        if let Json::Object(o) = &mut extra {
            o.insert("index".into(), Json::u64(0));
        }
        let e = ToolCall::from_json(&extra).unwrap_err();
        assert_eq!(e.kind, DecodeErrorKind::UnknownMember("index".into()));

        let missing = ObjectBuilder::new()
            .field("id", "c")
            .field("name", "t")
            .build();
        let e = ToolCall::from_json(&missing).unwrap_err();
        assert_eq!(e.kind, DecodeErrorKind::MissingMember("arguments".into()));

        let null = ObjectBuilder::new()
            .field("id", "c")
            .field("name", "t")
            .value("arguments", Json::Null)
            .build();
        assert!(matches!(
            ToolCall::from_json(&null).unwrap_err().kind,
            DecodeErrorKind::NullMember(_)
        ));

        let wrong = ObjectBuilder::new()
            .field("id", "c")
            .field("name", "t")
            .value("arguments", Json::object())
            .build();
        let e = ToolCall::from_json(&wrong).unwrap_err();
        assert_eq!(e.path, "$.arguments");
        assert!(matches!(e.kind, DecodeErrorKind::WrongType { .. }));

        let e = ToolCall::from_json(&wire("c", "invalid/name", "{}")).unwrap_err();
        assert!(matches!(e.kind, DecodeErrorKind::Invalid(_)));
    }
}
