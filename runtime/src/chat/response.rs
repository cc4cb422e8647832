//! A complete model response.

use super::{ChatError, FinishReason, Message, Role, ToolCall, Usage};
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ToJson};

/// A complete model response.
///
/// Wire form: `{"message"?:Message,"finish_reason"?:FinishReason,"usage":Usage}`.
///
/// Valid when the message, if present, is a valid assistant message. Validation is structural
/// only: whether calls and the finish reason agree is the Interaction's decision (a response
/// with no calls and finish `tool_calls` still completes as a final answer).
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Response {
    pub message: Option<Message>,
    pub finish_reason: Option<FinishReason>,
    pub usage: Usage,
}

impl Response {
    pub fn new(message: Message, finish_reason: FinishReason, usage: Usage) -> Response {
        Response {
            message: Some(message),
            finish_reason: Some(finish_reason),
            usage,
        }
    }

    /// The tool calls of the message, in part order; empty without a message.
    pub fn tool_calls(&self) -> Vec<&ToolCall> {
        self.message.iter().flat_map(Message::tool_calls).collect()
    }

    pub fn validate(&self) -> Result<(), ChatError> {
        if let Some(message) = &self.message {
            message.validate()?;
        }
        self.validate_shape()
    }

    fn validate_shape(&self) -> Result<(), ChatError> {
        match &self.message {
            Some(m) if m.role != Role::Assistant => {
                Err(ChatError::ResponseNotAssistant { role: m.role })
            }
            _ => Ok(()),
        }
    }
}

impl ToJson for Response {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .opt_field("message", self.message.as_ref())
            .opt_field("finish_reason", self.finish_reason.as_ref())
            .field("usage", &self.usage)
            .build()
    }
}

impl FromJson for Response {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let response = Response {
            message: r.optional("message")?,
            finish_reason: r.optional("finish_reason")?,
            usage: r.required("usage")?,
        };
        r.finish()?;
        response.validate_shape()?;
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::Part;
    use crate::json::codec::DecodeErrorKind;

    fn with(mut value: Json, key: &str, member: Json) -> Json {
        if let Json::Object(o) = &mut value {
            o.insert(key.into(), member);
        }
        value
    }

    fn calls() -> Response {
        Response::new(
            Message::assistant_with_calls(
                "checking",
                vec![ToolCall::new("c1", "a", "{}"), ToolCall::new("c2", "b", "")],
            ),
            FinishReason::ToolCalls,
            Usage::new(10, 5),
        )
    }

    #[test]
    fn round_trip() {
        for r in [
            Response::default(),
            calls(),
            Response::new(
                Message::assistant("hi"),
                FinishReason::Stop,
                Usage::default(),
            ),
            Response {
                message: None,
                finish_reason: Some(FinishReason::Length),
                usage: Usage::new(1, 0),
            },
        ] {
            assert_eq!(r.validate(), Ok(()));
            assert_eq!(Response::from_json(&r.to_json()), Ok(r));
        }
        assert_eq!(
            Response::default().to_json(),
            ObjectBuilder::new()
                .field("usage", &Usage::default())
                .build()
        );
    }

    #[test]
    fn tool_calls_in_part_order() {
        let r = calls();
        assert_eq!(
            r.tool_calls()
                .iter()
                .map(|c| c.id.as_str())
                .collect::<Vec<_>>(),
            ["c1", "c2"]
        );
        assert!(Response::default().tool_calls().is_empty());
        // Interleaved text does not disturb the order.
        let m = Message::new(
            Role::Assistant,
            vec![
                Part::ToolCall(ToolCall::new("x", "a", "")),
                Part::text("mid"),
                Part::ToolCall(ToolCall::new("y", "a", "")),
            ],
        );
        let r = Response {
            message: Some(m),
            ..Response::default()
        };
        assert_eq!(
            r.tool_calls()
                .iter()
                .map(|c| c.id.as_str())
                .collect::<Vec<_>>(),
            ["x", "y"]
        );
    }

    #[test]
    fn finish_tool_calls_without_calls_is_valid() {
        let r = Response::new(
            Message::assistant("done"),
            FinishReason::ToolCalls,
            Usage::default(),
        );
        assert_eq!(r.validate(), Ok(()));
    }

    #[test]
    fn message_must_be_assistant() {
        for role in [Role::System, Role::User] {
            let r = Response {
                message: Some(Message::new(role, vec![Part::text("x")])),
                ..Response::default()
            };
            assert_eq!(r.validate(), Err(ChatError::ResponseNotAssistant { role }));
            assert!(Response::from_json(&r.to_json()).is_err());
        }
    }

    #[test]
    fn message_must_be_valid() {
        let r = Response {
            message: Some(Message::new(Role::Assistant, vec![])),
            ..Response::default()
        };
        assert_eq!(r.validate(), Err(ChatError::EmptyMessage));
        assert!(Response::from_json(&r.to_json()).is_err());
    }

    #[test]
    fn strict_decoding() {
        let base = calls().to_json();
        let e = Response::from_json(&with(base.clone(), "id", Json::str("resp_1"))).unwrap_err();
        assert_eq!(e.kind, DecodeErrorKind::UnknownMember("id".into()));
        for key in ["message", "finish_reason", "usage"] {
            let e = Response::from_json(&with(base.clone(), key, Json::Null)).unwrap_err();
            assert_eq!(e.kind, DecodeErrorKind::NullMember(key.into()));
        }
        let v = with(
            base.clone(),
            "usage",
            with(Usage::default().to_json(), "x", Json::u64(0)),
        );
        assert_eq!(Response::from_json(&v).unwrap_err().path, "$.usage");
        let v = with(
            base.clone(),
            "message",
            with(Message::assistant("a").to_json(), "x", Json::u64(0)),
        );
        assert_eq!(Response::from_json(&v).unwrap_err().path, "$.message");
        let v = with(base.clone(), "finish_reason", Json::str("end_turn"));
        assert_eq!(Response::from_json(&v).unwrap_err().path, "$.finish_reason");
        let mut no_usage = base;
        if let Json::Object(o) = &mut no_usage {
            o.remove("usage");
        }
        assert_eq!(
            Response::from_json(&no_usage).unwrap_err().kind,
            DecodeErrorKind::MissingMember("usage".into())
        );
    }
}
