//! A message: a role and its ordered parts.

use super::{ChatError, Part, PartKind, Reasoning, Role, ToolCall, ToolResult};
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ToJson};
use crate::limits::{MAX_MESSAGE_PARTS, MAX_PAYLOAD_BYTES};

/// A message: a role and its ordered parts.
///
/// Wire form: `{"role":Role,"parts":[Part, ..]}`.
///
/// Valid when: it has 1 to [`MAX_MESSAGE_PARTS`] parts, each part is valid, the parts suit
/// the role (system/user: text; assistant: reasoning, text and tool calls; tool: tool
/// results), and the free text of all parts together (text, arguments, tool output content) fits
/// [`MAX_PAYLOAD_BYTES`]: a larger message could never travel inside one payload.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Message {
    pub role: Role,
    pub parts: Vec<Part>,
}

impl Message {
    pub fn new(role: Role, parts: Vec<Part>) -> Message {
        Message { role, parts }
    }

    pub fn system(text: impl Into<String>) -> Message {
        Message::new(Role::System, vec![Part::text(text)])
    }

    pub fn user(text: impl Into<String>) -> Message {
        Message::new(Role::User, vec![Part::text(text)])
    }

    pub fn assistant(text: impl Into<String>) -> Message {
        Message::new(Role::Assistant, vec![Part::text(text)])
    }

    /// An assistant message: a leading text part (omitted when `text` is empty, since text
    /// parts are never empty) followed by the calls in order.
    pub fn assistant_with_calls(text: impl Into<String>, calls: Vec<ToolCall>) -> Message {
        let text = text.into();
        let mut parts = Vec::with_capacity(calls.len() + 1);
        if !text.is_empty() {
            parts.push(Part::Text(text));
        }
        parts.extend(calls.into_iter().map(Part::ToolCall));
        Message::new(Role::Assistant, parts)
    }

    /// A tool message holding `results` in order.
    pub fn tool_results(results: Vec<ToolResult>) -> Message {
        Message::new(
            Role::Tool,
            results.into_iter().map(Part::ToolResult).collect(),
        )
    }

    /// The tool calls, in part order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.parts.iter().filter_map(|p| match p {
            Part::ToolCall(c) => Some(c),
            _ => None,
        })
    }

    /// The tool results, in part order.
    pub fn results(&self) -> impl Iterator<Item = &ToolResult> {
        self.parts.iter().filter_map(|p| match p {
            Part::ToolResult(r) => Some(r),
            _ => None,
        })
    }

    /// The reasoning parts, in part order.
    pub fn reasoning(&self) -> impl Iterator<Item = &Reasoning> {
        self.parts.iter().filter_map(|p| match p {
            Part::Reasoning(r) => Some(r),
            _ => None,
        })
    }

    /// All text parts concatenated (reasoning is never answer text).
    pub fn text(&self) -> String {
        self.parts
            .iter()
            .filter_map(|p| match p {
                Part::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    /// Whether a message of `role` may hold a part of `kind`.
    pub fn allows(role: Role, kind: PartKind) -> bool {
        match role {
            Role::System | Role::User => kind == PartKind::Text,
            Role::Assistant => matches!(
                kind,
                PartKind::Text | PartKind::ToolCall | PartKind::Reasoning
            ),
            Role::Tool => kind == PartKind::ToolResult,
        }
    }

    pub fn validate(&self) -> Result<(), ChatError> {
        for (index, part) in self.parts.iter().enumerate() {
            part.validate().map_err(|e| ChatError::in_part(index, e))?;
        }
        self.validate_shape()
    }

    /// The message-level rules, assuming every part is valid on its own.
    fn validate_shape(&self) -> Result<(), ChatError> {
        if self.parts.is_empty() {
            return Err(ChatError::EmptyMessage);
        }
        if self.parts.len() > MAX_MESSAGE_PARTS {
            return Err(ChatError::TooManyParts {
                count: self.parts.len(),
                limit: MAX_MESSAGE_PARTS,
            });
        }
        for (index, part) in self.parts.iter().enumerate() {
            if !Message::allows(self.role, part.kind()) {
                return Err(ChatError::PartNotAllowed {
                    index,
                    role: self.role,
                    part: part.kind(),
                });
            }
        }
        let bytes = self
            .parts
            .iter()
            .fold(0usize, |sum, p| sum.saturating_add(p.text_bytes()));
        if bytes > MAX_PAYLOAD_BYTES {
            return Err(ChatError::TooLarge {
                what: "message text",
                len: bytes,
                limit: MAX_PAYLOAD_BYTES,
            });
        }
        Ok(())
    }
}

impl ToJson for Message {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .field("role", &self.role)
            .field("parts", &self.parts)
            .build()
    }
}

impl FromJson for Message {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let message = Message {
            role: r.required("role")?,
            parts: r.required("parts")?,
        };
        r.finish()?;
        // Parts validated themselves while decoding.
        message.validate_shape()?;
        Ok(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::ToolOutput;
    use crate::json::codec::DecodeErrorKind;

    fn call(id: &str) -> ToolCall {
        ToolCall::new(id, "search", "{}")
    }

    fn samples() -> Vec<Message> {
        vec![
            Message::system("be brief"),
            Message::user("hi"),
            Message::assistant("hello"),
            Message::assistant_with_calls("let me look", vec![call("c1"), call("c2")]),
            Message::assistant_with_calls("", vec![call("c1")]),
            Message::tool_results(vec![
                ToolResult::ok("c1", "search", ToolOutput::text("r")),
                ToolResult::error("c2", "search", "e"),
            ]),
            Message::new(Role::User, vec![Part::text("a"), Part::text("b")]),
        ]
    }

    #[test]
    fn constructors() {
        let m = Message::assistant_with_calls("t", vec![call("c1"), call("c2")]);
        assert_eq!(m.parts[0], Part::text("t"));
        assert_eq!(
            m.tool_calls().map(|c| c.id.as_str()).collect::<Vec<_>>(),
            ["c1", "c2"]
        );
        let m = Message::assistant_with_calls("", vec![call("c1")]);
        assert_eq!(m.parts.len(), 1);
        assert_eq!(
            Message::tool_results(vec![ToolResult::error("c", "t", "x")]).role,
            Role::Tool
        );
        assert_eq!(samples()[6].text(), "ab");
        for m in samples() {
            assert_eq!(m.validate(), Ok(()), "{m:?}");
        }
    }

    #[test]
    fn round_trip() {
        for m in samples() {
            assert_eq!(
                m.to_json(),
                ObjectBuilder::new()
                    .field("role", &m.role)
                    .field("parts", &m.parts)
                    .build()
            );
            assert_eq!(Message::from_json(&m.to_json()), Ok(m));
        }
    }

    #[test]
    fn reasoning_is_never_answer_text() {
        let m = Message::new(
            Role::Assistant,
            vec![
                Part::Reasoning(Reasoning::signed("secret plan", "sig")),
                Part::text("answer"),
                Part::ToolCall(call("c1")),
            ],
        );
        assert_eq!(m.validate(), Ok(()));
        assert_eq!(m.text(), "answer");
        assert_eq!(m.reasoning().count(), 1);
        assert_eq!(Message::from_json(&m.to_json()), Ok(m));
    }

    #[test]
    fn needs_a_part() {
        let empty = Message::new(Role::User, vec![]);
        assert_eq!(empty.validate(), Err(ChatError::EmptyMessage));
        assert!(Message::from_json(&empty.to_json()).is_err());
    }

    #[test]
    fn bounds_parts() {
        let many = Message::new(Role::User, vec![Part::text("a"); MAX_MESSAGE_PARTS + 1]);
        assert!(matches!(
            many.validate(),
            Err(ChatError::TooManyParts { .. })
        ));
        let max = Message::new(Role::User, vec![Part::text("a"); MAX_MESSAGE_PARTS]);
        assert_eq!(max.validate(), Ok(()));
    }

    #[test]
    fn bounds_total_text() {
        let half = "x".repeat(MAX_PAYLOAD_BYTES / 2 + 1);
        let m = Message::new(Role::User, vec![Part::text(half.clone()), Part::text(half)]);
        assert!(matches!(
            m.validate(),
            Err(ChatError::TooLarge {
                what: "message text",
                ..
            })
        ));
    }

    #[test]
    fn role_part_compatibility() {
        let text = Part::text("t");
        let tool_call = Part::ToolCall(call("c"));
        let tool_result = Part::ToolResult(ToolResult::error("c", "search", "x"));
        let reasoning = Part::Reasoning(Reasoning::signed("r", "s"));
        for role in Role::ALL {
            for part in [&text, &tool_call, &tool_result, &reasoning] {
                let m = Message::new(role, vec![part.clone()]);
                if Message::allows(role, part.kind()) {
                    assert_eq!(m.validate(), Ok(()), "{role} rejected {}", part.kind());
                    assert_eq!(Message::from_json(&m.to_json()), Ok(m));
                } else {
                    assert_eq!(
                        m.validate(),
                        Err(ChatError::PartNotAllowed {
                            index: 0,
                            role,
                            part: part.kind()
                        })
                    );
                    assert!(Message::from_json(&m.to_json()).is_err());
                }
            }
        }
        // The table itself.
        assert!(Message::allows(Role::Assistant, PartKind::ToolCall));
        assert!(Message::allows(Role::Assistant, PartKind::Reasoning));
        assert!(!Message::allows(Role::User, PartKind::Reasoning));
        assert!(!Message::allows(Role::Assistant, PartKind::ToolResult));
        assert!(!Message::allows(Role::User, PartKind::ToolCall));
        assert!(!Message::allows(Role::System, PartKind::ToolResult));
        assert!(!Message::allows(Role::Tool, PartKind::Text));
    }

    #[test]
    fn reports_the_offending_part() {
        let m = Message::new(Role::User, vec![Part::text("a"), Part::text("")]);
        let e = m.validate().unwrap_err();
        assert_eq!(e, ChatError::in_part(1, ChatError::EmptyText));
        assert_eq!(e.root(), &ChatError::EmptyText);
        let e = Message::from_json(&m.to_json()).unwrap_err();
        assert_eq!(e.path, "$.parts[1]");
    }

    #[test]
    fn strict_decoding() {
        let mut v = Message::user("a").to_json();
        if let Json::Object(o) = &mut v {
            o.insert("name".into(), Json::str("bob"));
        }
        assert_eq!(
            Message::from_json(&v).unwrap_err().kind,
            DecodeErrorKind::UnknownMember("name".into())
        );
        let bad_role = ObjectBuilder::new()
            .field("role", "developer")
            .field("parts", &vec![Part::text("a")])
            .build();
        assert_eq!(Message::from_json(&bad_role).unwrap_err().path, "$.role");
        let parts_not_array = ObjectBuilder::new()
            .field("role", "user")
            .field("parts", "a")
            .build();
        assert!(matches!(
            Message::from_json(&parts_not_array).unwrap_err().kind,
            DecodeErrorKind::WrongType { .. }
        ));
        let null_parts = ObjectBuilder::new()
            .field("role", "user")
            .value("parts", Json::Null)
            .build();
        assert_eq!(
            Message::from_json(&null_parts).unwrap_err().kind,
            DecodeErrorKind::NullMember("parts".into())
        );
        // Unknown member two levels down (inside a part).
        let mut part = Part::text("a").to_json();
        if let Json::Object(o) = &mut part {
            o.insert("cache".into(), Json::Bool(true));
        }
        let nested = ObjectBuilder::new()
            .field("role", "user")
            .value("parts", Json::Array(vec![part]))
            .build();
        let e = Message::from_json(&nested).unwrap_err();
        assert_eq!(e.path, "$.parts[0]");
        assert_eq!(e.kind, DecodeErrorKind::UnknownMember("cache".into()));
    }
}
