//! Folding a stream of deltas into one response.

use super::{
    ChatError, FinishReason, Message, Part, Response, ResponseDelta, Role, ToolCall, Usage,
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
/// * text concatenates into one leading text part (also text that arrives after tool call
///   fragments: the result is always shaped `[text?, tool_call*]`);
/// * fragments with the same `index` merge: `id` and `name` may be repeated only with the same
///   value (a different one is an error), argument fragments concatenate;
/// * tool calls follow the text in index order; at [`Accumulator::finish`] the indices must be
///   exactly `0..n` and every call must have received its id and name;
/// * the finish reason may be given at most once (a second one is an error, even if equal:
///   a provider that repeats it is not sending what we think it is);
/// * usage: the last one given wins (providers report cumulative usage); absent → zeros;
/// * the accumulated text plus arguments stays within [`MAX_PAYLOAD_BYTES`] and the calls
///   within [`MAX_MESSAGE_PARTS`], checked as deltas arrive;
/// * a rejected delta leaves the accumulator unchanged (it is checked fully before applying);
/// * finishing with no delta pushed is an error; the response must validate. A stream that
///   produced neither text nor calls gives a response without a message.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Accumulator {
    text: String,
    calls: BTreeMap<u32, PartialCall>,
    finish_reason: Option<FinishReason>,
    usage: Option<Usage>,
    /// Deltas accepted so far.
    pushed: u64,
    /// Text plus argument bytes accumulated so far.
    bytes: usize,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct PartialCall {
    id: Option<String>,
    name: Option<String>,
    arguments: String,
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
        let calls = self.calls.len().saturating_add(new_calls);
        if calls > MAX_MESSAGE_PARTS {
            return Err(ChatError::TooManyParts {
                count: calls,
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
        let mut parts = Vec::with_capacity(self.calls.len() + 1);
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
