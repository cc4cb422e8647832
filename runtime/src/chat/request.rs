//! A complete model request.

use super::{ChatError, Message, Options, Role, ToolChoice, ToolDefinition};
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ToJson};
use crate::limits::MAX_REQUEST_TOOLS;
use std::collections::BTreeSet;

/// A complete model request: the conversation, options, offered tools and tool choice.
///
/// Wire form: `{"messages":[..],"options"?:{..},"tools"?:[..],"tool_choice"?:..}`. Default
/// members are omitted when encoding (`options` when default, `tools` when empty,
/// `tool_choice` when `auto`); their explicit default spellings decode to the same value.
///
/// Valid when: there is at least one message and every message is valid; system messages
/// appear only in the leading prefix; options are valid; at most [`MAX_REQUEST_TOOLS`] valid
/// tools with unique names; a named tool choice names one of the tools; `required` needs at
/// least one tool.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Request {
    pub messages: Vec<Message>,
    pub options: Options,
    pub tools: Vec<ToolDefinition>,
    pub tool_choice: ToolChoice,
}

impl Request {
    /// A request with default options and no tools.
    pub fn new(messages: Vec<Message>) -> Request {
        Request {
            messages,
            ..Request::default()
        }
    }

    pub fn validate(&self) -> Result<(), ChatError> {
        if self.messages.is_empty() {
            return Err(ChatError::NoMessages);
        }
        for (index, message) in self.messages.iter().enumerate() {
            message
                .validate()
                .map_err(|e| ChatError::in_message(index, e))?;
        }
        self.options.validate()?;
        for (index, tool) in self.tools.iter().enumerate() {
            tool.validate().map_err(|e| ChatError::in_tool(index, e))?;
        }
        self.tool_choice.validate()?;
        self.validate_shape()
    }

    /// [`Request::validate`] for a request whose messages and options already passed their
    /// rules (an Interaction's context request, checked when it was rebuilt): the tools, the
    /// tool choice and the request-level rules, without walking every message again.
    pub(crate) fn validate_with_checked_messages(&self) -> Result<(), ChatError> {
        for (index, tool) in self.tools.iter().enumerate() {
            tool.validate().map_err(|e| ChatError::in_tool(index, e))?;
        }
        self.tool_choice.validate()?;
        self.validate_shape()
    }

    /// The request-level rules, assuming every member is valid on its own.
    fn validate_shape(&self) -> Result<(), ChatError> {
        if self.messages.is_empty() {
            return Err(ChatError::NoMessages);
        }
        let prefix = self
            .messages
            .iter()
            .take_while(|m| m.role == Role::System)
            .count();
        if let Some(offset) = self.messages[prefix..]
            .iter()
            .position(|m| m.role == Role::System)
        {
            return Err(ChatError::SystemNotInPrefix {
                index: prefix + offset,
            });
        }
        if self.tools.len() > MAX_REQUEST_TOOLS {
            return Err(ChatError::TooManyTools {
                count: self.tools.len(),
                limit: MAX_REQUEST_TOOLS,
            });
        }
        let mut names = BTreeSet::new();
        for tool in &self.tools {
            if !names.insert(tool.name.as_str()) {
                return Err(ChatError::DuplicateToolName {
                    name: tool.name.clone(),
                });
            }
        }
        match &self.tool_choice {
            ToolChoice::Tool(name) if !names.contains(name.as_str()) => {
                Err(ChatError::UnknownToolChoice { name: name.clone() })
            }
            ToolChoice::Required if self.tools.is_empty() => {
                Err(ChatError::RequiredChoiceWithoutTools)
            }
            _ => Ok(()),
        }
    }
}

impl ToJson for Request {
    fn to_json(&self) -> Json {
        let mut b = ObjectBuilder::new().field("messages", &self.messages);
        if !self.options.is_default() {
            b = b.field("options", &self.options);
        }
        b = b.nonempty_field("tools", &self.tools);
        if self.tool_choice != ToolChoice::Auto {
            b = b.field("tool_choice", &self.tool_choice);
        }
        b.build()
    }
}

impl FromJson for Request {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let request = Request {
            messages: r.required("messages")?,
            options: r.optional("options")?.unwrap_or_default(),
            tools: r.optional_vec("tools")?,
            tool_choice: r.optional("tool_choice")?.unwrap_or_default(),
        };
        r.finish()?;
        // Members validated themselves while decoding.
        request.validate_shape()?;
        Ok(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::{Part, ToolCall, ToolResult};
    use crate::json::codec::DecodeErrorKind;

    fn tool(name: &str) -> ToolDefinition {
        ToolDefinition::new(
            name,
            "a tool",
            ObjectBuilder::new().field("type", "object").build(),
        )
    }

    fn conversation() -> Vec<Message> {
        vec![
            Message::system("be brief"),
            Message::system("really"),
            Message::user("weather?"),
            Message::assistant_with_calls("", vec![ToolCall::new("c1", "weather", "{}")]),
            Message::tool_results(vec![ToolResult::error("c1", "weather", "offline")]),
            Message::assistant("sorry"),
        ]
    }

    fn full() -> Request {
        Request {
            messages: conversation(),
            options: Options {
                max_output_tokens: Some(100),
                ..Options::default()
            },
            tools: vec![tool("weather"), tool("search")],
            tool_choice: ToolChoice::Tool("search".into()),
        }
    }

    fn with(mut value: Json, key: &str, member: Json) -> Json {
        if let Json::Object(o) = &mut value {
            o.insert(key.into(), member);
        }
        value
    }

    #[test]
    fn minimal_wire_omits_defaults() {
        let r = Request::new(vec![Message::user("hi")]);
        assert_eq!(r.validate(), Ok(()));
        assert_eq!(
            r.to_json(),
            ObjectBuilder::new()
                .field("messages", &vec![Message::user("hi")])
                .build()
        );
        assert_eq!(Request::from_json(&r.to_json()), Ok(r));
    }

    #[test]
    fn explicit_defaults_decode_to_the_same_value() {
        let r = Request::new(vec![Message::user("hi")]);
        let v = with(r.to_json(), "options", Json::object());
        let v = with(v, "tools", Json::Array(vec![]));
        let v = with(v, "tool_choice", Json::str("auto"));
        assert_eq!(Request::from_json(&v), Ok(r));
    }

    #[test]
    fn full_round_trip() {
        let r = full();
        assert_eq!(r.validate(), Ok(()));
        let v = r.to_json();
        for key in ["messages", "options", "tools", "tool_choice"] {
            assert!(v.get(key).is_some(), "{key}");
        }
        assert_eq!(Request::from_json(&v), Ok(r));
        for choice in [ToolChoice::None, ToolChoice::Required] {
            let r = Request {
                tool_choice: choice,
                ..full()
            };
            assert_eq!(Request::from_json(&r.to_json()), Ok(r));
        }
    }

    #[test]
    fn needs_a_message() {
        let r = Request {
            messages: vec![],
            ..full()
        };
        assert_eq!(r.validate(), Err(ChatError::NoMessages));
        assert!(Request::from_json(&r.to_json()).is_err());
    }

    #[test]
    fn system_messages_only_in_the_prefix() {
        let mut messages = conversation();
        messages.insert(3, Message::system("late"));
        let r = Request::new(messages);
        assert_eq!(r.validate(), Err(ChatError::SystemNotInPrefix { index: 3 }));
        assert!(Request::from_json(&r.to_json()).is_err());
        // Only system messages is still a leading prefix.
        assert_eq!(Request::new(vec![Message::system("s")]).validate(), Ok(()));
        let r = Request::new(vec![Message::user("u"), Message::system("s")]);
        assert_eq!(r.validate(), Err(ChatError::SystemNotInPrefix { index: 1 }));
    }

    #[test]
    fn reports_the_invalid_message() {
        let mut messages = conversation();
        messages[2] = Message::new(
            Role::User,
            vec![Part::ToolCall(ToolCall::new("c", "t", ""))],
        );
        let e = Request::new(messages).validate().unwrap_err();
        assert!(matches!(e, ChatError::Message { index: 2, .. }), "{e}");
        assert!(matches!(e.root(), ChatError::PartNotAllowed { .. }));
    }

    #[test]
    fn invalid_options_and_tools() {
        let r = Request {
            options: Options {
                max_output_tokens: Some(0),
                ..Options::default()
            },
            ..full()
        };
        assert!(matches!(r.validate(), Err(ChatError::InvalidOption { .. })));
        assert!(Request::from_json(&r.to_json()).is_err());
        let r = Request {
            tools: vec![tool("weather"), tool("invalid/name")],
            tool_choice: ToolChoice::Auto,
            ..full()
        };
        let e = r.validate().unwrap_err();
        assert!(matches!(e, ChatError::Tool { index: 1, .. }));
        assert!(matches!(e.root(), ChatError::InvalidToolName { .. }));
        let r = Request {
            tools: (0..=MAX_REQUEST_TOOLS)
                .map(|i| tool(&format!("t{i}")))
                .collect(),
            ..full()
        };
        let r = Request {
            tool_choice: ToolChoice::Auto,
            ..r
        };
        assert!(matches!(r.validate(), Err(ChatError::TooManyTools { .. })));
    }

    #[test]
    fn tool_names_are_unique() {
        let r = Request {
            tools: vec![tool("search"), tool("weather"), tool("search")],
            ..full()
        };
        assert_eq!(
            r.validate(),
            Err(ChatError::DuplicateToolName {
                name: "search".into()
            })
        );
        assert!(Request::from_json(&r.to_json()).is_err());
    }

    #[test]
    fn named_choice_must_be_a_tool() {
        let r = Request {
            tool_choice: ToolChoice::Tool("browse".into()),
            ..full()
        };
        assert_eq!(
            r.validate(),
            Err(ChatError::UnknownToolChoice {
                name: "browse".into()
            })
        );
        assert!(Request::from_json(&r.to_json()).is_err());
        let r = Request {
            tools: vec![],
            ..full()
        };
        assert_eq!(
            r.validate(),
            Err(ChatError::UnknownToolChoice {
                name: "search".into()
            })
        );
    }

    #[test]
    fn required_choice_needs_tools() {
        let r = Request {
            tools: vec![],
            tool_choice: ToolChoice::Required,
            ..full()
        };
        assert_eq!(r.validate(), Err(ChatError::RequiredChoiceWithoutTools));
        assert!(Request::from_json(&r.to_json()).is_err());
        // `none` without tools is fine.
        let r = Request {
            tools: vec![],
            tool_choice: ToolChoice::None,
            ..full()
        };
        assert_eq!(r.validate(), Ok(()));
    }

    #[test]
    fn strict_decoding_at_every_level() {
        let base = full().to_json();
        let e = Request::from_json(&with(base.clone(), "stream", Json::Bool(true))).unwrap_err();
        assert_eq!(
            (e.path.as_str(), e.kind),
            ("$", DecodeErrorKind::UnknownMember("stream".into()))
        );

        let v = with(
            base.clone(),
            "options",
            with(full().options.to_json(), "seed", Json::u64(1)),
        );
        assert_eq!(Request::from_json(&v).unwrap_err().path, "$.options");

        let v = with(
            base.clone(),
            "tools",
            Json::Array(vec![with(tool("search").to_json(), "x", Json::u64(1))]),
        );
        assert_eq!(Request::from_json(&v).unwrap_err().path, "$.tools[0]");

        let v = with(
            base.clone(),
            "tool_choice",
            ObjectBuilder::new()
                .field("tool", "search")
                .field("x", "y")
                .build(),
        );
        assert_eq!(Request::from_json(&v).unwrap_err().path, "$.tool_choice");

        let message = with(Message::user("hi").to_json(), "x", Json::u64(1));
        let v = with(base.clone(), "messages", Json::Array(vec![message]));
        assert_eq!(Request::from_json(&v).unwrap_err().path, "$.messages[0]");

        let part = with(Part::text("hi").to_json(), "x", Json::u64(1));
        let message = ObjectBuilder::new()
            .field("role", "user")
            .value("parts", Json::Array(vec![part]))
            .build();
        let v = with(base.clone(), "messages", Json::Array(vec![message]));
        assert_eq!(
            Request::from_json(&v).unwrap_err().path,
            "$.messages[0].parts[0]"
        );

        let result = Part::ToolResult(ToolResult::error("c", "t", "x")).to_json();
        let result = with(
            result.clone(),
            "output",
            with(result.get("output").cloned().unwrap(), "x", Json::u64(1)),
        );
        let message = ObjectBuilder::new()
            .field("role", "tool")
            .value("parts", Json::Array(vec![result]))
            .build();
        let v = with(
            base.clone(),
            "messages",
            Json::Array(vec![Message::user("q").to_json(), message]),
        );
        let e = Request::from_json(&v).unwrap_err();
        assert_eq!(
            (e.path.as_str(), e.kind),
            (
                "$.messages[1].parts[0].output",
                DecodeErrorKind::UnknownMember("x".into())
            )
        );

        for key in ["options", "tools", "tool_choice"] {
            let e = Request::from_json(&with(base.clone(), key, Json::Null)).unwrap_err();
            assert_eq!(e.kind, DecodeErrorKind::NullMember(key.into()), "{key}");
        }
        let e = Request::from_json(&with(base.clone(), "messages", Json::object())).unwrap_err();
        assert!(matches!(e.kind, DecodeErrorKind::WrongType { .. }));
        let e = Request::from_json(&with(base, "tools", Json::object())).unwrap_err();
        assert!(matches!(e.kind, DecodeErrorKind::WrongType { .. }));
    }
}
