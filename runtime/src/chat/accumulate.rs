//! Folding a stream of deltas into one response.

use super::{
    ChatError, FinishReason, Message, Part, Reasoning, ReasoningDelta, Response, ResponseDelta,
    Role, ToolCall, Usage,
};
use crate::limits::{MAX_MESSAGE_PARTS, MAX_PAYLOAD_BYTES};
use std::collections::BTreeMap;

/// Folds [`ResponseDelta`]s into a [`Response`].
///
/// ```
/// use keel::chat::{Accumulator, FinishReason, ResponseDelta, Usage};
/// let mut acc = Accumulator::new();
/// acc.push(&ResponseDelta::text("Hel")).unwrap();
/// acc.push(&ResponseDelta::text("lo")).unwrap();
/// acc.push(&ResponseDelta {
///     finish_reason: Some(FinishReason::Stop),
///     usage: Some(Usage::new(5, 2)),
///     ..ResponseDelta::default()
/// })
/// .unwrap();
/// let response = acc.finish().unwrap();
/// assert_eq!(response.message.unwrap().text(), "Hello");
/// ```
///
/// Rules:
/// * reasoning fragments with the same `index` make one reasoning part: text, summary texts
///   and signature concatenate, `redacted`, `encrypted` and `id` may be repeated only with the
///   same value; reasoning parts lead the message in index order (indices `0..n` at finish,
///   and each part's summary indices too); a part that received nothing (only empty text)
///   is dropped;
/// * text concatenates into one text part after the reasoning (also text that arrives after
///   tool call fragments: the result is always shaped `[reasoning*, text?, tool_call*]`);
/// * fragments with the same `index` merge: `id` and `name` may be repeated only with the same
///   value (a different one is an error), argument fragments concatenate;
/// * tool calls follow the text in index order; at [`Accumulator::finish`] the indices must be
///   exactly `0..n` and every call must have received its id and name;
/// * the finish reason may be given at most once (a second one is an error, even if equal:
///   a provider that repeats it is not sending what we think it is);
/// * usage: the last one given wins (providers report cumulative usage); absent → zeros;
/// * the accumulated text, arguments and reasoning stay within [`MAX_PAYLOAD_BYTES`] and the
///   calls plus reasoning parts within [`MAX_MESSAGE_PARTS`], checked as deltas arrive;
/// * a rejected delta leaves the accumulator unchanged (it is checked fully before applying);
/// * finishing with no delta pushed is an error; the response must validate. A stream that
///   produced neither text nor calls gives a response without a message.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Accumulator {
    text: String,
    calls: BTreeMap<u32, PartialCall>,
    reasoning: BTreeMap<u32, PartialReasoning>,
    finish_reason: Option<FinishReason>,
    usage: Option<Usage>,
    /// Deltas accepted so far.
    pushed: u64,
    /// Text, argument and reasoning bytes accumulated so far.
    bytes: usize,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct PartialCall {
    id: Option<String>,
    name: Option<String>,
    arguments: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct PartialReasoning {
    text: String,
    summary: BTreeMap<u32, String>,
    signature: Option<String>,
    redacted: Option<String>,
    encrypted: Option<String>,
    id: Option<String>,
}

impl Accumulator {
    pub fn new() -> Accumulator {
        Accumulator::default()
    }

    /// Accumulates a whole stream.
    pub fn accumulate<'a>(
        deltas: impl IntoIterator<Item = &'a ResponseDelta>,
    ) -> Result<Response, ChatError> {
        let mut acc = Accumulator::new();
        for delta in deltas {
            acc.push(delta)?;
        }
        acc.finish()
    }

    /// Number of deltas accepted so far.
    pub fn pushed(&self) -> u64 {
        self.pushed
    }

    /// The text accumulated so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn push(&mut self, delta: &ResponseDelta) -> Result<(), ChatError> {
        delta.validate()?;
        self.check(delta)?;
        self.apply(delta);
        Ok(())
    }

    /// Every rule of `push` against the current state, without changing it.
    fn check(&self, delta: &ResponseDelta) -> Result<(), ChatError> {
        if delta.finish_reason.is_some() && self.finish_reason.is_some() {
            return Err(ChatError::DuplicateFinishReason);
        }
        // id/name as they will be after the fragments of this delta seen so far.
        let mut staged: BTreeMap<u32, (Option<&str>, Option<&str>)> = BTreeMap::new();
        let mut bytes = self
            .bytes
            .saturating_add(delta.text.as_ref().map_or(0, String::len));
        for fragment in &delta.tool_calls {
            let index = fragment.index;
            let entry = staged
                .entry(index)
                .or_insert_with(|| match self.calls.get(&index) {
                    Some(call) => (call.id.as_deref(), call.name.as_deref()),
                    None => (None, None),
                });
            merge_member(index, "id", &mut entry.0, fragment.id.as_deref())?;
            merge_member(index, "name", &mut entry.1, fragment.name.as_deref())?;
            bytes = bytes.saturating_add(fragment.arguments.as_ref().map_or(0, String::len));
        }
        type Once<'s> = (Option<&'s str>, Option<&'s str>, Option<&'s str>);
        let mut staged_reasoning: BTreeMap<u32, Once<'_>> = BTreeMap::new();
        for fragment in &delta.reasoning {
            let index = fragment.index;
            let entry =
                staged_reasoning
                    .entry(index)
                    .or_insert_with(|| match self.reasoning.get(&index) {
                        Some(r) => (r.redacted.as_deref(), r.encrypted.as_deref(), r.id.as_deref()),
                        None => (None, None, None),
                    });
            merge_reasoning(index, "redacted", &mut entry.0, fragment.redacted.as_deref())?;
            merge_reasoning(index, "encrypted", &mut entry.1, fragment.encrypted.as_deref())?;
            merge_reasoning(index, "id", &mut entry.2, fragment.id.as_deref())?;
            bytes = bytes.saturating_add(reasoning_bytes_added(self.reasoning.get(&index), fragment));
        }
        if bytes > MAX_PAYLOAD_BYTES {
            return Err(ChatError::TooLarge {
                what: "accumulated message text",
                len: bytes,
                limit: MAX_PAYLOAD_BYTES,
            });
        }
        let new_calls = staged
            .keys()
            .filter(|i| !self.calls.contains_key(i))
            .count();
        let new_reasoning = staged_reasoning
            .keys()
            .filter(|i| !self.reasoning.contains_key(i))
            .count();
        let parts = self
            .calls
            .len()
            .saturating_add(new_calls)
            .saturating_add(self.reasoning.len())
            .saturating_add(new_reasoning);
        if parts > MAX_MESSAGE_PARTS {
            return Err(ChatError::TooManyParts {
                count: parts,
                limit: MAX_MESSAGE_PARTS,
            });
        }
        Ok(())
    }

    /// Applies a delta that passed [`Accumulator::check`]; cannot fail.
    fn apply(&mut self, delta: &ResponseDelta) {
        if let Some(text) = &delta.text {
            self.text.push_str(text);
            self.bytes = self.bytes.saturating_add(text.len());
        }
        for fragment in &delta.tool_calls {
            let call = self.calls.entry(fragment.index).or_default();
            if call.id.is_none() {
                call.id.clone_from(&fragment.id);
            }
            if call.name.is_none() {
                call.name.clone_from(&fragment.name);
            }
            if let Some(arguments) = &fragment.arguments {
                call.arguments.push_str(arguments);
                self.bytes = self.bytes.saturating_add(arguments.len());
            }
        }
        for fragment in &delta.reasoning {
            let added = reasoning_bytes_added(self.reasoning.get(&fragment.index), fragment);
            self.bytes = self.bytes.saturating_add(added);
            let part = self.reasoning.entry(fragment.index).or_default();
            if let Some(text) = &fragment.text {
                part.text.push_str(text);
            }
            if let Some(summary) = &fragment.summary {
                part.summary
                    .entry(summary.index)
                    .or_default()
                    .push_str(&summary.text);
            }
            if let Some(signature) = &fragment.signature {
                part.signature.get_or_insert_with(String::new).push_str(signature);
            }
            for (slot, value) in [
                (&mut part.redacted, &fragment.redacted),
                (&mut part.encrypted, &fragment.encrypted),
                (&mut part.id, &fragment.id),
            ] {
                if slot.is_none() {
                    slot.clone_from(value);
                }
            }
        }
        if delta.finish_reason.is_some() {
            self.finish_reason = delta.finish_reason;
        }
        if delta.usage.is_some() {
            self.usage = delta.usage;
        }
        self.pushed = self.pushed.saturating_add(1);
    }

    pub fn finish(self) -> Result<Response, ChatError> {
        if self.pushed == 0 {
            return Err(ChatError::NoDeltas);
        }
        let mut parts = Vec::with_capacity(self.reasoning.len() + self.calls.len() + 1);
        for (position, (index, part)) in self.reasoning.into_iter().enumerate() {
            // `position` < MAX_MESSAGE_PARTS, so it fits u32.
            if u64::from(index) != position as u64 {
                return Err(ChatError::ReasoningIndexGap {
                    missing: position as u32,
                });
            }
            let mut summary = Vec::with_capacity(part.summary.len());
            for (position, (summary_index, text)) in part.summary.into_iter().enumerate() {
                if u64::from(summary_index) != position as u64 {
                    return Err(ChatError::in_reasoning_delta(
                        index,
                        ChatError::ReasoningIndexGap {
                            missing: position as u32,
                        },
                    ));
                }
                summary.push(text);
            }
            let reasoning = Reasoning {
                text: part.text,
                summary,
                signature: part.signature,
                redacted: part.redacted,
                encrypted: part.encrypted,
                id: part.id,
            };
            // A part that was opened but never received anything carries nothing to keep.
            if reasoning != Reasoning::default() {
                parts.push(Part::Reasoning(reasoning));
            }
        }
        if !self.text.is_empty() {
            parts.push(Part::Text(self.text));
        }
        for (position, (index, call)) in self.calls.into_iter().enumerate() {
            // `position` < MAX_MESSAGE_PARTS, so it fits u32.
            if u64::from(index) != position as u64 {
                return Err(ChatError::ToolCallIndexGap {
                    missing: position as u32,
                });
            }
            let id = call.id.ok_or(ChatError::IncompleteToolCall {
                index,
                member: "id",
            })?;
            let name = call.name.ok_or(ChatError::IncompleteToolCall {
                index,
                member: "name",
            })?;
            parts.push(Part::ToolCall(ToolCall {
                id,
                name,
                arguments: call.arguments,
            }));
        }
        let message = if parts.is_empty() {
            None
        } else {
            Some(Message::new(Role::Assistant, parts))
        };
        let response = Response {
            message,
            finish_reason: self.finish_reason,
            usage: self.usage.unwrap_or_default(),
        };
        response.validate()?;
        Ok(response)
    }
}

/// The bytes a reasoning fragment adds to the message: appended text, and a once-only member
/// only the first time it is given.
fn reasoning_bytes_added(current: Option<&PartialReasoning>, fragment: &ReasoningDelta) -> usize {
    let len = |s: &Option<String>| s.as_ref().map_or(0, String::len);
    let once = |have: Option<&Option<String>>, given: &Option<String>| match have {
        Some(Some(_)) => 0,
        _ => len(given),
    };
    len(&fragment.text)
        .saturating_add(fragment.summary.as_ref().map_or(0, |s| s.text.len()))
        .saturating_add(len(&fragment.signature))
        .saturating_add(once(current.map(|r| &r.redacted), &fragment.redacted))
        .saturating_add(once(current.map(|r| &r.encrypted), &fragment.encrypted))
        .saturating_add(once(current.map(|r| &r.id), &fragment.id))
}

/// Merges a once-only reasoning member: an equal repeat is fine, a different one a conflict
/// (opaque content is not quoted).
fn merge_reasoning<'a>(
    index: u32,
    member: &'static str,
    slot: &mut Option<&'a str>,
    given: Option<&'a str>,
) -> Result<(), ChatError> {
    match (*slot, given) {
        (Some(first), Some(second)) if first != second => {
            Err(ChatError::ConflictingReasoning { index, member })
        }
        (None, Some(second)) => {
            *slot = Some(second);
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Merges a once-only member: first value sticks, an equal repeat is fine, a different one
/// is a conflict.
fn merge_member<'a>(
    index: u32,
    member: &'static str,
    current: &mut Option<&'a str>,
    incoming: Option<&'a str>,
) -> Result<(), ChatError> {
    match (*current, incoming) {
        (_, None) => Ok(()),
        (None, Some(v)) => {
            *current = Some(v);
            Ok(())
        }
        (Some(c), Some(v)) if c == v => Ok(()),
        (Some(c), Some(v)) => Err(ChatError::ConflictingToolCall {
            index,
            member,
            first: super::error::quote(c),
            second: super::error::quote(v),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::ToolCallDelta;
    use proptest::prelude::*;

    fn call(
        index: u32,
        id: Option<&str>,
        name: Option<&str>,
        arguments: Option<&str>,
    ) -> ResponseDelta {
        ResponseDelta {
            tool_calls: vec![ToolCallDelta {
                index,
                id: id.map(str::to_owned),
                name: name.map(str::to_owned),
                arguments: arguments.map(str::to_owned),
            }],
            ..ResponseDelta::default()
        }
    }

    fn finish(reason: FinishReason) -> ResponseDelta {
        ResponseDelta {
            finish_reason: Some(reason),
            ..ResponseDelta::default()
        }
    }

    fn usage(input: u64, output: u64) -> ResponseDelta {
        ResponseDelta {
            usage: Some(Usage::new(input, output)),
            ..ResponseDelta::default()
        }
    }

    #[test]
    fn text_concatenates_into_one_leading_part() {
        let deltas = [
            ResponseDelta::text("Let me "),
            call(0, Some("c1"), Some("search"), Some("{}")),
            ResponseDelta::text("check."),
            finish(FinishReason::ToolCalls),
        ];
        let r = Accumulator::accumulate(&deltas).unwrap();
        assert_eq!(
            r.message,
            Some(Message::assistant_with_calls(
                "Let me check.",
                vec![ToolCall::new("c1", "search", "{}")]
            ))
        );
        assert_eq!(r.finish_reason, Some(FinishReason::ToolCalls));
        assert_eq!(r.usage, Usage::default());
    }

    #[test]
    fn fragments_merge_by_index_and_order_by_index() {
        let deltas = [
            call(1, Some("c2"), None, None),
            call(0, Some("c1"), Some("a"), Some("{\"x\"")),
            call(1, None, Some("b"), Some("[")),
            call(0, Some("c1"), None, Some(":1}")),
            call(1, None, Some("b"), Some("]")),
        ];
        let r = Accumulator::accumulate(&deltas).unwrap();
        assert_eq!(
            r.message,
            Some(Message::assistant_with_calls(
                "",
                vec![
                    ToolCall::new("c1", "a", "{\"x\":1}"),
                    ToolCall::new("c2", "b", "[]")
                ]
            ))
        );
        assert_eq!(r.finish_reason, None);
    }

    #[test]
    fn fragments_for_one_index_within_one_delta() {
        let delta = ResponseDelta {
            tool_calls: vec![
                ToolCallDelta {
                    index: 0,
                    id: Some("c".into()),
                    name: Some("t".into()),
                    arguments: Some("a".into()),
                },
                ToolCallDelta {
                    index: 0,
                    arguments: Some("b".into()),
                    ..ToolCallDelta::default()
                },
            ],
            ..ResponseDelta::default()
        };
        let r = Accumulator::accumulate([&delta]).unwrap();
        assert_eq!(r.tool_calls(), vec![&ToolCall::new("c", "t", "ab")]);
        // A conflict inside one delta is caught too.
        let delta = ResponseDelta {
            tool_calls: vec![
                ToolCallDelta {
                    index: 0,
                    id: Some("c".into()),
                    ..ToolCallDelta::default()
                },
                ToolCallDelta {
                    index: 0,
                    id: Some("d".into()),
                    ..ToolCallDelta::default()
                },
            ],
            ..ResponseDelta::default()
        };
        assert!(matches!(
            Accumulator::new().push(&delta),
            Err(ChatError::ConflictingToolCall { member: "id", .. })
        ));
    }

    #[test]
    fn conflicting_id_or_name_is_an_error_and_changes_nothing() {
        let mut acc = Accumulator::new();
        acc.push(&call(0, Some("c1"), Some("a"), Some("x")))
            .unwrap();
        let before = acc.clone();
        let e = acc.push(&call(0, Some("c2"), None, Some("y"))).unwrap_err();
        assert_eq!(
            e,
            ChatError::ConflictingToolCall {
                index: 0,
                member: "id",
                first: "c1".into(),
                second: "c2".into()
            }
        );
        assert!(matches!(
            acc.push(&call(0, None, Some("b"), None)),
            Err(ChatError::ConflictingToolCall { member: "name", .. })
        ));
        assert_eq!(acc, before);
        let r = acc.finish().unwrap();
        assert_eq!(r.tool_calls(), vec![&ToolCall::new("c1", "a", "x")]);
    }

    #[test]
    fn finish_reason_at_most_once() {
        let mut acc = Accumulator::new();
        acc.push(&finish(FinishReason::Stop)).unwrap();
        let before = acc.clone();
        assert_eq!(
            acc.push(&finish(FinishReason::Stop)),
            Err(ChatError::DuplicateFinishReason)
        );
        let combined = ResponseDelta {
            text: Some("x".into()),
            ..finish(FinishReason::Length)
        };
        assert_eq!(acc.push(&combined), Err(ChatError::DuplicateFinishReason));
        assert_eq!(acc, before);
    }

    #[test]
    fn last_usage_wins() {
        let r = Accumulator::accumulate(&[usage(10, 1), ResponseDelta::text("a"), usage(10, 7)])
            .unwrap();
        assert_eq!(r.usage, Usage::new(10, 7));
    }

    #[test]
    fn indices_must_be_dense() {
        let e = Accumulator::accumulate(&[
            call(0, Some("a"), Some("t"), None),
            call(2, Some("b"), Some("t"), None),
        ]);
        assert_eq!(e, Err(ChatError::ToolCallIndexGap { missing: 1 }));
        let e = Accumulator::accumulate(&[call(1, Some("a"), Some("t"), None)]);
        assert_eq!(e, Err(ChatError::ToolCallIndexGap { missing: 0 }));
    }

    #[test]
    fn calls_need_id_and_name() {
        let e = Accumulator::accumulate(&[call(0, None, Some("t"), Some("{}"))]);
        assert_eq!(
            e,
            Err(ChatError::IncompleteToolCall {
                index: 0,
                member: "id"
            })
        );
        let e = Accumulator::accumulate(&[call(0, Some("c"), None, Some("{}"))]);
        assert_eq!(
            e,
            Err(ChatError::IncompleteToolCall {
                index: 0,
                member: "name"
            })
        );
    }

    #[test]
    fn no_deltas_is_an_error() {
        assert_eq!(Accumulator::new().finish(), Err(ChatError::NoDeltas));
        assert_eq!(Accumulator::accumulate(&[]), Err(ChatError::NoDeltas));
    }

    #[test]
    fn invalid_deltas_are_rejected() {
        let mut acc = Accumulator::new();
        assert_eq!(
            acc.push(&ResponseDelta::default()),
            Err(ChatError::EmptyDelta)
        );
        assert!(acc
            .push(&call(0, None, Some("invalid/name"), None))
            .is_err());
        assert_eq!(acc.pushed(), 0);
        assert_eq!(acc.finish(), Err(ChatError::NoDeltas));
    }

    #[test]
    fn stream_without_content_has_no_message() {
        let r = Accumulator::accumulate(&[
            ResponseDelta::text(""),
            finish(FinishReason::ContentFilter),
        ])
        .unwrap();
        assert_eq!(
            r,
            Response {
                message: None,
                finish_reason: Some(FinishReason::ContentFilter),
                usage: Usage::default()
            }
        );
    }

    #[test]
    fn bounds_accumulated_size() {
        let mut acc = Accumulator::new();
        acc.push(&ResponseDelta::text("x".repeat(MAX_PAYLOAD_BYTES)))
            .unwrap();
        let before = acc.clone();
        assert!(matches!(
            acc.push(&call(0, Some("c"), Some("t"), Some("y"))),
            Err(ChatError::TooLarge { .. })
        ));
        assert!(matches!(
            acc.push(&ResponseDelta::text("y")),
            Err(ChatError::TooLarge { .. })
        ));
        assert_eq!(acc, before);
        assert_eq!(acc.text().len(), MAX_PAYLOAD_BYTES);
        // Empty fragments still fit.
        acc.push(&call(0, Some("c"), Some("t"), Some(""))).unwrap();
    }

    fn reasoning(fragment: ReasoningDelta) -> ResponseDelta {
        ResponseDelta {
            reasoning: vec![fragment],
            ..ResponseDelta::default()
        }
    }

    #[test]
    fn reasoning_fragments_make_leading_parts_never_text() {
        use crate::chat::SummaryDelta;
        let deltas = [
            reasoning(ReasoningDelta {
                index: 0,
                text: Some("Paris is ".into()),
                ..ReasoningDelta::default()
            }),
            ResponseDelta::text("Let me check."),
            reasoning(ReasoningDelta {
                index: 0,
                text: Some("in France.".into()),
                ..ReasoningDelta::default()
            }),
            reasoning(ReasoningDelta {
                index: 0,
                signature: Some("sig".into()),
                ..ReasoningDelta::default()
            }),
            reasoning(ReasoningDelta {
                index: 1,
                id: Some("rs_1".into()),
                encrypted: Some("gAAA".into()),
                summary: Some(SummaryDelta {
                    index: 0,
                    text: "**Plan**".into(),
                }),
                ..ReasoningDelta::default()
            }),
            reasoning(ReasoningDelta {
                index: 1,
                id: Some("rs_1".into()),
                summary: Some(SummaryDelta {
                    index: 1,
                    text: "Call it.".into(),
                }),
                ..ReasoningDelta::default()
            }),
            call(0, Some("c"), Some("t"), Some("{}")),
            finish(FinishReason::ToolCalls),
        ];
        let response = Accumulator::accumulate(&deltas).unwrap();
        let message = response.message.clone().unwrap();
        assert_eq!(message.text(), "Let me check.");
        assert_eq!(
            message.parts,
            vec![
                Part::Reasoning(Reasoning::signed("Paris is in France.", "sig")),
                Part::Reasoning(Reasoning {
                    id: Some("rs_1".into()),
                    encrypted: Some("gAAA".into()),
                    summary: vec!["**Plan**".into(), "Call it.".into()],
                    ..Reasoning::default()
                }),
                Part::text("Let me check."),
                Part::ToolCall(ToolCall::new("c", "t", "{}")),
            ]
        );
        // Splitting and accumulating again gives the same response, at any chunk size.
        for max in [1, 3, 100] {
            let again = Accumulator::accumulate(&ResponseDelta::split(&response, max)).unwrap();
            assert_eq!(again, response, "max {max}");
        }
    }

    #[test]
    fn reasoning_once_only_members_conflict_and_indices_are_dense() {
        let mut acc = Accumulator::new();
        acc.push(&reasoning(ReasoningDelta {
            index: 0,
            id: Some("rs_1".into()),
            ..ReasoningDelta::default()
        }))
        .unwrap();
        let before = acc.clone();
        assert_eq!(
            acc.push(&reasoning(ReasoningDelta {
                index: 0,
                id: Some("rs_2".into()),
                ..ReasoningDelta::default()
            })),
            Err(ChatError::ConflictingReasoning {
                index: 0,
                member: "id"
            })
        );
        assert_eq!(acc, before);
        let gap = Accumulator::accumulate(&[reasoning(ReasoningDelta {
            index: 1,
            text: Some("t".into()),
            ..ReasoningDelta::default()
        })]);
        assert_eq!(gap, Err(ChatError::ReasoningIndexGap { missing: 0 }));
        // A part opened with empty text only is dropped, not an invalid part.
        let empty = Accumulator::accumulate(&[
            reasoning(ReasoningDelta {
                index: 0,
                text: Some(String::new()),
                ..ReasoningDelta::default()
            }),
            ResponseDelta::text("a"),
        ])
        .unwrap();
        assert_eq!(empty.message.unwrap().parts, vec![Part::text("a")]);
    }

    #[test]
    fn bounds_call_count() {
        let mut acc = Accumulator::new();
        for i in 0..MAX_MESSAGE_PARTS as u32 {
            acc.push(&call(i, Some("c"), Some("t"), None)).unwrap();
        }
        assert!(matches!(
            acc.push(&call(MAX_MESSAGE_PARTS as u32, Some("c"), Some("t"), None)),
            Err(ChatError::TooManyParts { .. })
        ));
        // Further fragments of existing calls are fine.
        acc.push(&call(0, None, None, Some("{}"))).unwrap();
    }

    #[test]
    fn result_must_validate() {
        // 1024 calls plus a text part is one part too many for a message.
        let mut acc = Accumulator::new();
        acc.push(&ResponseDelta::text("t")).unwrap();
        for i in 0..MAX_MESSAGE_PARTS as u32 {
            acc.push(&call(i, Some("c"), Some("t"), None)).unwrap();
        }
        assert!(matches!(acc.finish(), Err(ChatError::TooManyParts { .. })));
    }

    #[test]
    fn split_then_accumulate_normalizes_other_shapes() {
        let m = Message::new(
            Role::Assistant,
            vec![
                Part::text("a"),
                Part::ToolCall(ToolCall::new("c", "t", "{}")),
                Part::text("b"),
            ],
        );
        let r = Response {
            message: Some(m),
            ..Response::default()
        };
        let back = Accumulator::accumulate(&ResponseDelta::split(&r, 1)).unwrap();
        assert_eq!(
            back.message,
            Some(Message::assistant_with_calls(
                "ab",
                vec![ToolCall::new("c", "t", "{}")]
            ))
        );
    }

    fn text_strategy() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop_oneof![
                Just('a'),
                Just(' '),
                Just('é'),
                Just('€'),
                Just('😀'),
                Just('\n')
            ],
            0..24,
        )
        .prop_map(|cs| cs.into_iter().collect())
    }

    fn response_strategy() -> impl Strategy<Value = Response> {
        let call = ("[a-z0-9_]{1,10}", "[A-Za-z0-9_-]{1,12}", text_strategy()).prop_map(
            |(id, name, arguments)| ToolCall {
                id,
                name,
                arguments,
            },
        );
        let message = (text_strategy(), proptest::collection::vec(call, 0..4)).prop_filter_map(
            "a message needs a part",
            |(text, calls)| {
                let m = Message::assistant_with_calls(text, calls);
                (!m.parts.is_empty()).then_some(m)
            },
        );
        let reason = proptest::option::of(proptest::sample::select(FinishReason::ALL.to_vec()));
        (
            proptest::option::of(message),
            reason,
            any::<u64>(),
            any::<u64>(),
        )
            .prop_map(|(message, finish_reason, i, o)| Response {
                message,
                finish_reason,
                usage: Usage::new(i, o),
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        #[test]
        fn accumulate_inverts_split(response in response_strategy(), max in 0usize..9) {
            prop_assert_eq!(response.validate(), Ok(()));
            let deltas = ResponseDelta::split(&response, max);
            for d in &deltas {
                prop_assert_eq!(d.validate(), Ok(()));
                prop_assert!(d.text.as_ref().is_none_or(|t| t.len() <= max.max(1) || t.chars().count() == 1));
            }
            prop_assert_eq!(Accumulator::accumulate(&deltas), Ok(response));
        }
    }
}
