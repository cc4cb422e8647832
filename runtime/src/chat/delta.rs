//! Streaming increments of a response.

use super::name::{validate_call_id, validate_tool_name};
use super::{ChatError, FinishReason, Response, Usage};
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ToJson};
use crate::limits::{MAX_MESSAGE_PARTS, MAX_PAYLOAD_BYTES};

/// One streaming increment of a [`Response`]; [`super::Accumulator`] folds a stream of them.
///
/// Wire form: `{"text"?:S,"tool_calls"?:[ToolCallDelta],"reasoning"?:[ReasoningDelta],
/// "finish_reason"?:..,"usage"?:Usage}`. `tool_calls` and `reasoning` are omitted when empty
/// (an explicit `[]` decodes to the same value).
///
/// Valid when it carries at least one member, its text fits [`MAX_PAYLOAD_BYTES`], and it
/// holds at most [`MAX_MESSAGE_PARTS`] valid tool call fragments and as many valid reasoning
/// fragments.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResponseDelta {
    /// Text appended to the response text.
    pub text: Option<String>,
    /// Fragments of tool calls, identified by their position in the response.
    pub tool_calls: Vec<ToolCallDelta>,
    /// Fragments of reasoning parts, identified by their position among them.
    pub reasoning: Vec<ReasoningDelta>,
    /// Given at most once per stream.
    pub finish_reason: Option<FinishReason>,
    /// Cumulative usage so far (the last one given wins).
    pub usage: Option<Usage>,
}

/// A fragment of the tool call at position `index` among the response's calls.
///
/// Wire form: `{"index":u32,"id"?:S,"name"?:S,"arguments"?:S}`.
///
/// Valid when it carries at least one of `id`, `name`, `arguments`; `id` and `name` are
/// complete and syntactically valid (they are never split); the argument fragment fits
/// [`MAX_PAYLOAD_BYTES`].
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ToolCallDelta {
    pub index: u32,
    pub id: Option<String>,
    pub name: Option<String>,
    /// Appended to the call's argument text.
    pub arguments: Option<String>,
}

/// A fragment of the reasoning part at position `index` among the response's reasoning parts
/// (see [`super::Reasoning`]).
///
/// Wire form: `{"index":u32,"text"?:S,"summary"?:SummaryDelta,"signature"?:S,"redacted"?:S,
/// "encrypted"?:S,"id"?:S}`.
///
/// `text`, `summary` and `signature` are appended (Anthropic streams the signature whole in
/// one `signature_delta`, but appending keeps a split one intact); `redacted`, `encrypted`
/// and `id` are complete values given once (an equal repeat is fine).
///
/// Valid when it carries at least one member, its once-only members are non-empty, `id` has
/// no control characters, and its strings together fit [`MAX_PAYLOAD_BYTES`].
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReasoningDelta {
    pub index: u32,
    /// Appended to the part's reasoning text.
    pub text: Option<String>,
    /// Appended to one of the part's summary texts.
    pub summary: Option<SummaryDelta>,
    /// Appended to the part's signature.
    pub signature: Option<String>,
    pub redacted: Option<String>,
    pub encrypted: Option<String>,
    pub id: Option<String>,
}

/// Text appended to the summary text at position `index` of a reasoning part (created empty
/// when first named; indices must end up dense).
///
/// Wire form: `{"index":u32,"text":S}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SummaryDelta {
    pub index: u32,
    pub text: String,
}

impl ReasoningDelta {
    /// The bytes of text and opaque content this fragment adds.
    pub(crate) fn bytes(&self) -> usize {
        let opt = |s: &Option<String>| s.as_ref().map_or(0, String::len);
        opt(&self.text)
            .saturating_add(self.summary.as_ref().map_or(0, |s| s.text.len()))
            .saturating_add(opt(&self.signature))
            .saturating_add(opt(&self.redacted))
            .saturating_add(opt(&self.encrypted))
            .saturating_add(opt(&self.id))
    }

    pub fn validate(&self) -> Result<(), ChatError> {
        if self.text.is_none()
            && self.summary.is_none()
            && self.signature.is_none()
            && self.redacted.is_none()
            && self.encrypted.is_none()
            && self.id.is_none()
        {
            return Err(ChatError::EmptyReasoningDelta);
        }
        super::reasoning::check_members(
            &[("redacted", &self.redacted), ("encrypted", &self.encrypted), ("id", &self.id)],
            self.id.as_deref(),
            self.bytes(),
        )
    }
}

impl ToolCallDelta {
    pub fn validate(&self) -> Result<(), ChatError> {
        if self.id.is_none() && self.name.is_none() && self.arguments.is_none() {
            return Err(ChatError::EmptyToolCallDelta);
        }
        if let Some(id) = &self.id {
            validate_call_id(id)?;
        }
        if let Some(name) = &self.name {
            validate_tool_name(name)?;
        }
        if let Some(arguments) = &self.arguments {
            if arguments.len() > MAX_PAYLOAD_BYTES {
                return Err(ChatError::TooLarge {
                    what: "tool call arguments",
                    len: arguments.len(),
                    limit: MAX_PAYLOAD_BYTES,
                });
            }
        }
        Ok(())
    }
}

impl ResponseDelta {
    /// A text-only delta.
    pub fn text(text: impl Into<String>) -> ResponseDelta {
        ResponseDelta {
            text: Some(text.into()),
            ..ResponseDelta::default()
        }
    }

    pub fn validate(&self) -> Result<(), ChatError> {
        if self.text.is_none()
            && self.tool_calls.is_empty()
            && self.reasoning.is_empty()
            && self.finish_reason.is_none()
            && self.usage.is_none()
        {
            return Err(ChatError::EmptyDelta);
        }
        if let Some(text) = &self.text {
            if text.len() > MAX_PAYLOAD_BYTES {
                return Err(ChatError::TooLarge {
                    what: "text",
                    len: text.len(),
                    limit: MAX_PAYLOAD_BYTES,
                });
            }
        }
        if self.tool_calls.len() > MAX_MESSAGE_PARTS {
            return Err(ChatError::TooManyParts {
                count: self.tool_calls.len(),
                limit: MAX_MESSAGE_PARTS,
            });
        }
        for call in &self.tool_calls {
            call.validate()
                .map_err(|e| ChatError::in_tool_call_delta(call.index, e))?;
        }
        if self.reasoning.len() > MAX_MESSAGE_PARTS {
            return Err(ChatError::TooManyParts {
                count: self.reasoning.len(),
                limit: MAX_MESSAGE_PARTS,
            });
        }
        for fragment in &self.reasoning {
            fragment
                .validate()
                .map_err(|e| ChatError::in_reasoning_delta(fragment.index, e))?;
        }
        Ok(())
    }

    /// Cuts a complete response into deltas, deterministically, so any response can be
    /// streamed: each reasoning part in order (its id, redacted and encrypted content first,
    /// then text chunks, summary chunks, and the signature last, as Anthropic streams it),
    /// then the message text (all text parts concatenated) in chunks, then each tool
    /// call in order (the first fragment carries id, name and the first argument chunk, the
    /// rest carry argument chunks), then one final delta with the finish reason and usage.
    ///
    /// Chunks hold at most `max_chunk_bytes` bytes (0 counts as 1) and never split a
    /// character; a single character longer than the maximum is its own chunk.
    ///
    /// Accumulating the result gives `response` back whenever its message is shaped
    /// `[reasoning*, text?, tool_call*]` (what [`super::Accumulator`] produces); other shapes come back
    /// in that normal form.
    pub fn split(response: &Response, max_chunk_bytes: usize) -> Vec<ResponseDelta> {
        let max = max_chunk_bytes.max(1);
        let mut deltas = Vec::new();
        if let Some(message) = &response.message {
            for (position, part) in message.reasoning().enumerate() {
                // Valid messages hold at most MAX_MESSAGE_PARTS parts: never saturates.
                let index = u32::try_from(position).unwrap_or(u32::MAX);
                split_reasoning(index, part, max, &mut deltas);
            }
            let text = message.text();
            deltas.extend(chunks(&text, max).map(ResponseDelta::text));
            for (position, call) in message.tool_calls().enumerate() {
                // Valid messages hold at most MAX_MESSAGE_PARTS calls, so this never saturates.
                let index = u32::try_from(position).unwrap_or(u32::MAX);
                let mut arguments = chunks(&call.arguments, max);
                let first = ToolCallDelta {
                    index,
                    id: Some(call.id.clone()),
                    name: Some(call.name.clone()),
                    arguments: arguments.next().map(str::to_owned),
                };
                deltas.push(ResponseDelta {
                    tool_calls: vec![first],
                    ..ResponseDelta::default()
                });
                for chunk in arguments {
                    let fragment = ToolCallDelta {
                        index,
                        arguments: Some(chunk.to_owned()),
                        ..ToolCallDelta::default()
                    };
                    deltas.push(ResponseDelta {
                        tool_calls: vec![fragment],
                        ..ResponseDelta::default()
                    });
                }
            }
        }
        deltas.push(ResponseDelta {
            finish_reason: response.finish_reason,
            usage: Some(response.usage),
            ..ResponseDelta::default()
        });
        deltas
    }
}

/// The deltas of one reasoning part, appended to `deltas`.
fn split_reasoning(index: u32, part: &super::Reasoning, max: usize, deltas: &mut Vec<ResponseDelta>) {
    let one = |fragment: ReasoningDelta| ResponseDelta {
        reasoning: vec![fragment],
        ..ResponseDelta::default()
    };
    let whole = ReasoningDelta {
        index,
        redacted: part.redacted.clone(),
        encrypted: part.encrypted.clone(),
        id: part.id.clone(),
        ..ReasoningDelta::default()
    };
    if whole.redacted.is_some() || whole.encrypted.is_some() || whole.id.is_some() {
        deltas.push(one(whole));
    }
    for chunk in chunks(&part.text, max) {
        deltas.push(one(ReasoningDelta {
            index,
            text: Some(chunk.to_owned()),
            ..ReasoningDelta::default()
        }));
    }
    for (position, summary) in part.summary.iter().enumerate() {
        let summary_index = u32::try_from(position).unwrap_or(u32::MAX);
        let mut pieces: Vec<&str> = chunks(summary, max).collect();
        if pieces.is_empty() {
            // An empty summary text still exists: name it once.
            pieces.push("");
        }
        for piece in pieces {
            deltas.push(one(ReasoningDelta {
                index,
                summary: Some(SummaryDelta {
                    index: summary_index,
                    text: piece.to_owned(),
                }),
                ..ReasoningDelta::default()
            }));
        }
    }
    if let Some(signature) = &part.signature {
        deltas.push(one(ReasoningDelta {
            index,
            signature: Some(signature.clone()),
            ..ReasoningDelta::default()
        }));
    }
}

/// Consecutive pieces of `text` of at most `max` bytes (≥ 1), cut at char boundaries.
fn chunks(text: &str, max: usize) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut end = max.min(rest.len());
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        if end == 0 {
            // One character wider than `max`: emit it whole to make progress.
            end = rest.chars().next().map_or(rest.len(), char::len_utf8);
        }
        let (chunk, tail) = rest.split_at(end);
        rest = tail;
        Some(chunk)
    })
}

impl ToJson for ToolCallDelta {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .field("index", &self.index)
            .opt_field("id", self.id.as_ref())
            .opt_field("name", self.name.as_ref())
            .opt_field("arguments", self.arguments.as_ref())
            .build()
    }
}

impl FromJson for ToolCallDelta {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let delta = ToolCallDelta {
            index: r.required("index")?,
            id: r.optional("id")?,
            name: r.optional("name")?,
            arguments: r.optional("arguments")?,
        };
        r.finish()?;
        delta.validate()?;
        Ok(delta)
    }
}

impl ToJson for SummaryDelta {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .field("index", &self.index)
            .field("text", &self.text)
            .build()
    }
}

impl FromJson for SummaryDelta {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let delta = SummaryDelta {
            index: r.required("index")?,
            text: r.required("text")?,
        };
        r.finish()?;
        Ok(delta)
    }
}

impl ToJson for ReasoningDelta {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .field("index", &self.index)
            .opt_field("text", self.text.as_ref())
            .opt_field("summary", self.summary.as_ref())
            .opt_field("signature", self.signature.as_ref())
            .opt_field("redacted", self.redacted.as_ref())
            .opt_field("encrypted", self.encrypted.as_ref())
            .opt_field("id", self.id.as_ref())
            .build()
    }
}

impl FromJson for ReasoningDelta {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let delta = ReasoningDelta {
            index: r.required("index")?,
            text: r.optional("text")?,
            summary: r.optional("summary")?,
            signature: r.optional("signature")?,
            redacted: r.optional("redacted")?,
            encrypted: r.optional("encrypted")?,
            id: r.optional("id")?,
        };
        r.finish()?;
        delta.validate()?;
        Ok(delta)
    }
}

impl ToJson for ResponseDelta {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .opt_field("text", self.text.as_ref())
            .nonempty_field("tool_calls", &self.tool_calls)
            .nonempty_field("reasoning", &self.reasoning)
            .opt_field("finish_reason", self.finish_reason.as_ref())
            .opt_field("usage", self.usage.as_ref())
            .build()
    }
}

impl FromJson for ResponseDelta {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let delta = ResponseDelta {
            text: r.optional("text")?,
            tool_calls: r.optional_vec("tool_calls")?,
            reasoning: r.optional_vec("reasoning")?,
            finish_reason: r.optional("finish_reason")?,
            usage: r.optional("usage")?,
        };
        r.finish()?;
        delta.validate()?;
        Ok(delta)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::{Message, ToolCall};
    use crate::json::codec::DecodeErrorKind;

    fn with(mut value: Json, key: &str, member: Json) -> Json {
        if let Json::Object(o) = &mut value {
            o.insert(key.into(), member);
        }
        value
    }

    fn fragment(index: u32, arguments: &str) -> ToolCallDelta {
        ToolCallDelta {
            index,
            arguments: Some(arguments.into()),
            ..ToolCallDelta::default()
        }
    }

    #[test]
    fn round_trip() {
        let deltas = vec![
            ResponseDelta::text("hel"),
            ResponseDelta::text(""),
            ResponseDelta {
                tool_calls: vec![
                    ToolCallDelta {
                        index: 0,
                        id: Some("c".into()),
                        name: Some("t".into()),
                        arguments: None,
                    },
                    fragment(1, "{\"a\""),
                ],
                ..ResponseDelta::default()
            },
            ResponseDelta {
                finish_reason: Some(FinishReason::Stop),
                ..ResponseDelta::default()
            },
            ResponseDelta {
                usage: Some(Usage::new(1, 2)),
                ..ResponseDelta::default()
            },
        ];
        for d in deltas {
            assert_eq!(d.validate(), Ok(()));
            assert_eq!(ResponseDelta::from_json(&d.to_json()), Ok(d));
        }
        assert_eq!(
            ResponseDelta::text("x").to_json(),
            ObjectBuilder::new().field("text", "x").build()
        );
    }

    #[test]
    fn empty_delta_is_invalid() {
        assert_eq!(
            ResponseDelta::default().validate(),
            Err(ChatError::EmptyDelta)
        );
        assert!(ResponseDelta::from_json(&Json::object()).is_err());
        let only_empty_calls = ObjectBuilder::new()
            .value("tool_calls", Json::Array(vec![]))
            .build();
        assert!(ResponseDelta::from_json(&only_empty_calls).is_err());
    }

    #[test]
    fn tool_call_fragment_rules() {
        let bare = ToolCallDelta {
            index: 3,
            ..ToolCallDelta::default()
        };
        assert_eq!(bare.validate(), Err(ChatError::EmptyToolCallDelta));
        let d = ResponseDelta {
            tool_calls: vec![bare],
            ..ResponseDelta::default()
        };
        assert_eq!(
            d.validate(),
            Err(ChatError::in_tool_call_delta(
                3,
                ChatError::EmptyToolCallDelta
            ))
        );
        assert!(ResponseDelta::from_json(&d.to_json()).is_err());

        let bad_name = ToolCallDelta {
            index: 0,
            name: Some("invalid/name".into()),
            ..ToolCallDelta::default()
        };
        assert!(matches!(
            bad_name.validate(),
            Err(ChatError::InvalidToolName { .. })
        ));
        let bad_id = ToolCallDelta {
            index: 0,
            id: Some(String::new()),
            ..ToolCallDelta::default()
        };
        assert!(matches!(
            bad_id.validate(),
            Err(ChatError::InvalidCallId { .. })
        ));
        assert_eq!(fragment(0, "").validate(), Ok(()));
        assert!(matches!(
            fragment(0, &"x".repeat(MAX_PAYLOAD_BYTES + 1)).validate(),
            Err(ChatError::TooLarge { .. })
        ));

        let many = ResponseDelta {
            tool_calls: vec![fragment(0, "x"); MAX_MESSAGE_PARTS + 1],
            ..ResponseDelta::default()
        };
        assert!(matches!(
            many.validate(),
            Err(ChatError::TooManyParts { .. })
        ));
        let big_text = ResponseDelta::text("x".repeat(MAX_PAYLOAD_BYTES + 1));
        assert!(matches!(
            big_text.validate(),
            Err(ChatError::TooLarge { .. })
        ));
    }

    #[test]
    fn strict_decoding() {
        let e = ResponseDelta::from_json(&with(
            ResponseDelta::text("a").to_json(),
            "role",
            Json::str("assistant"),
        ))
        .unwrap_err();
        assert_eq!(e.kind, DecodeErrorKind::UnknownMember("role".into()));
        for key in ["text", "tool_calls", "finish_reason", "usage"] {
            let e = ResponseDelta::from_json(&with(
                ResponseDelta::text("a").to_json(),
                key,
                Json::Null,
            ))
            .unwrap_err();
            assert_eq!(e.kind, DecodeErrorKind::NullMember(key.into()), "{key}");
        }
        let call = with(fragment(0, "x").to_json(), "type", Json::str("function"));
        let v = ObjectBuilder::new()
            .value("tool_calls", Json::Array(vec![call]))
            .build();
        let e = ResponseDelta::from_json(&v).unwrap_err();
        assert_eq!(
            (e.path.as_str(), e.kind),
            (
                "$.tool_calls[0]",
                DecodeErrorKind::UnknownMember("type".into())
            )
        );
        let call = with(fragment(0, "x").to_json(), "id", Json::Null);
        let v = ObjectBuilder::new()
            .value("tool_calls", Json::Array(vec![call]))
            .build();
        assert_eq!(
            ResponseDelta::from_json(&v).unwrap_err().path,
            "$.tool_calls[0].id"
        );
        let no_index = ObjectBuilder::new().field("arguments", "x").build();
        let v = ObjectBuilder::new()
            .value("tool_calls", Json::Array(vec![no_index]))
            .build();
        assert_eq!(
            ResponseDelta::from_json(&v).unwrap_err().kind,
            DecodeErrorKind::MissingMember("index".into())
        );
        let usage = with(Usage::default().to_json(), "total", Json::u64(0));
        let v = ObjectBuilder::new().value("usage", usage).build();
        assert_eq!(ResponseDelta::from_json(&v).unwrap_err().path, "$.usage");
        let v = ObjectBuilder::new().field("text", &1u64).build();
        assert!(matches!(
            ResponseDelta::from_json(&v).unwrap_err().kind,
            DecodeErrorKind::WrongType { .. }
        ));
    }

    #[test]
    fn chunks_respect_char_boundaries() {
        let text = "aé€😀b";
        for max in 1..=8 {
            let pieces: Vec<&str> = chunks(text, max).collect();
            assert_eq!(pieces.concat(), text);
            for p in &pieces {
                assert!(!p.is_empty());
                assert!(p.len() <= max || p.chars().count() == 1, "{max}: {p:?}");
            }
        }
        assert_eq!(chunks("abcde", 2).collect::<Vec<_>>(), ["ab", "cd", "e"]);
        assert_eq!(chunks("", 2).count(), 0);
    }

    #[test]
    fn split_shape() {
        let r = Response::new(
            Message::assistant_with_calls(
                "hello",
                vec![
                    ToolCall::new("c1", "t", "abc"),
                    ToolCall::new("c2", "u", ""),
                ],
            ),
            FinishReason::ToolCalls,
            Usage::new(3, 4),
        );
        let deltas = ResponseDelta::split(&r, 2);
        let expected = vec![
            ResponseDelta::text("he"),
            ResponseDelta::text("ll"),
            ResponseDelta::text("o"),
            ResponseDelta {
                tool_calls: vec![ToolCallDelta {
                    index: 0,
                    id: Some("c1".into()),
                    name: Some("t".into()),
                    arguments: Some("ab".into()),
                }],
                ..ResponseDelta::default()
            },
            ResponseDelta {
                tool_calls: vec![fragment(0, "c")],
                ..ResponseDelta::default()
            },
            ResponseDelta {
                tool_calls: vec![ToolCallDelta {
                    index: 1,
                    id: Some("c2".into()),
                    name: Some("u".into()),
                    arguments: None,
                }],
                ..ResponseDelta::default()
            },
            ResponseDelta {
                finish_reason: Some(FinishReason::ToolCalls),
                usage: Some(Usage::new(3, 4)),
                ..ResponseDelta::default()
            },
        ];
        assert_eq!(deltas, expected);
        for d in &deltas {
            assert_eq!(d.validate(), Ok(()));
        }
        // Zero counts as one; an empty response is one usage delta.
        assert_eq!(ResponseDelta::split(&r, 0), ResponseDelta::split(&r, 1));
        assert_eq!(
            ResponseDelta::split(&Response::default(), 8),
            vec![ResponseDelta {
                usage: Some(Usage::default()),
                ..ResponseDelta::default()
            }]
        );
    }
}
