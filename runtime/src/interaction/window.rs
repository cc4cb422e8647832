//! Segmenting a round's tool calls into delegate runs, inline rejections and concurrency
//! windows, and the restore-time check that a restored tool batch is exactly the window
//! planning would form.
//!
//! Planning is pure and deterministic: it reads the catalog, prepares calls (strict JSON and
//! schema validation) and asks classifiers, nothing else. It is re-run on restore, so the same
//! calls against the same catalog always give the same segments.

use crate::chat::ToolCall;
use crate::limits::MAX_TOOL_CALLS_PER_RESPONSE;
use crate::tool::{BoundTool, ClassifyError, Concurrency, PrepareError};
use std::collections::BTreeSet;
use std::ops::Range;

/// The by-name lookups planning needs: the ToolSet's bound tools and the Definition's delegate
/// names. A name the catalog reports as a delegate is a delegate even if a tool has the same
/// name (delegates are checked first).
pub trait ToolCatalog {
    /// The bound tool (initial or deferred) registered under `name`.
    fn tool(&self, name: &str) -> Option<&BoundTool>;
    /// Whether `name` is a configured Delegate.
    fn is_delegate(&self, name: &str) -> bool;
}

/// The next unit of work of a round, starting at the caller's `next_index`. Ranges are
/// half-open indices into the round's calls and never empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Segment {
    /// The longest consecutive run of delegate-named calls: one delegate batch.
    Delegates { start: usize, end: usize },
    /// A call naming neither a tool nor a delegate: rejected inline by the caller, no child.
    Unknown { index: usize },
    /// One concurrency window: one tool batch.
    Tools { start: usize, end: usize },
}

impl Segment {
    /// The call indices this segment covers.
    pub fn range(&self) -> Range<usize> {
        match *self {
            Segment::Delegates { start, end } | Segment::Tools { start, end } => start..end,
            Segment::Unknown { index } => index..index + 1,
        }
    }
}

/// Why a round could not be segmented. Every variant is a step error upstream: planning
/// failure is never permission to overlap.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// More calls than one response may carry.
    #[error("{len} tool calls exceed the limit of {limit} per response")]
    TooManyCalls { len: usize, limit: usize },
    /// Planning was asked to start at or past the end of the calls.
    #[error("no tool call at index {index} of {len}")]
    IndexOutOfRange { index: usize, len: usize },
    /// A concurrency classifier panicked for the call at `index`.
    #[error("tool `{tool}` panicked while classifying tool call {index}")]
    ClassifierPanicked { index: usize, tool: String },
    /// The catalog answered `requested` with a tool bound under another name (a catalog bug;
    /// classifying with the wrong tool would be silent misscheduling).
    #[error("catalog returned tool `{bound}` for tool call {index} naming `{requested}`")]
    CatalogMismatch {
        index: usize,
        requested: String,
        bound: String,
    },
}

/// Plans the segment that starts at `next_index`.
///
/// * A delegate name starts a delegate run: the longest consecutive run of delegate names.
/// * A name that is neither a tool nor a delegate is [`Segment::Unknown`].
/// * Otherwise a tool window. With `max_concurrent_tool_calls <= 1` (0 means 1) it is just
///   this call and nothing is classified. Otherwise calls are scanned forward while they name
///   tools; each scanned call is classified (exclusive when its arguments are invalid, without
///   consulting the classifier); the window is the longest prefix in which an exclusive first
///   call stands alone, or else every call is shared and no two share a key. The window ends
///   *before* a repeated key, an exclusive call, an unknown name or a delegate.
///
/// Classification is lazy: the scan stops at the first call that cannot join, so calls after
/// it are not classified until their own window is planned.
pub fn next_segment(
    calls: &[ToolCall],
    next_index: usize,
    catalog: &dyn ToolCatalog,
    max_concurrent_tool_calls: u32,
) -> Result<Segment, PlanError> {
    if calls.len() > MAX_TOOL_CALLS_PER_RESPONSE {
        return Err(PlanError::TooManyCalls {
            len: calls.len(),
            limit: MAX_TOOL_CALLS_PER_RESPONSE,
        });
    }
    let Some(first) = calls.get(next_index) else {
        return Err(PlanError::IndexOutOfRange {
            index: next_index,
            len: calls.len(),
        });
    };
    if catalog.is_delegate(&first.name) {
        let run = calls[next_index..]
            .iter()
            .take_while(|call| catalog.is_delegate(&call.name))
            .count();
        return Ok(Segment::Delegates {
            start: next_index,
            end: next_index + run,
        });
    }
    if catalog.tool(&first.name).is_none() {
        return Ok(Segment::Unknown { index: next_index });
    }
    let end = if max_concurrent_tool_calls <= 1 {
        next_index + 1
    } else {
        window_end(calls, next_index, catalog)?
    };
    Ok(Segment::Tools {
        start: next_index,
        end,
    })
}

/// Whether `calls[start..end]` is exactly one concurrency window: planning from `start` yields
/// a tool window ending at `end`. This also refuses a window longer than 1
/// when `max_concurrent_tool_calls <= 1`, and anything planning rejects (a classifier panic).
pub fn window_is_exact(
    calls: &[ToolCall],
    start: usize,
    end: usize,
    catalog: &dyn ToolCatalog,
    max_concurrent_tool_calls: u32,
) -> bool {
    matches!(
        next_segment(calls, start, catalog, max_concurrent_tool_calls),
        Ok(Segment::Tools { start: s, end: e }) if s == start && e == end
    )
}

/// The end of the window starting at `start` (a tool call), for a concurrency limit above 1.
fn window_end(
    calls: &[ToolCall],
    start: usize,
    catalog: &dyn ToolCatalog,
) -> Result<usize, PlanError> {
    // Keys are moved out of their classifications, so tracking costs no copies.
    let mut keys: BTreeSet<String> = BTreeSet::new();
    let mut end = start;
    while let Some(call) = calls.get(end) {
        if catalog.is_delegate(&call.name) {
            break;
        }
        let Some(tool) = catalog.tool(&call.name) else {
            break;
        };
        match classify(tool, call, end)? {
            Concurrency::Exclusive => {
                // An exclusive first call is a window of its own; later it is a barrier.
                if end == start {
                    end += 1;
                }
                break;
            }
            Concurrency::Shared { key: Some(key) } => {
                if !keys.insert(key) {
                    break;
                }
            }
            Concurrency::Shared { key: None } => {}
        }
        end += 1;
    }
    Ok(end)
}

/// One call's concurrency. Prepare runs first, so invalid arguments are exclusive without the
/// classifier ever seeing them.
///
/// The spec skips Prepare for a tool without the ConcurrentTool capability. Here the capability
/// is the tool's `concurrency` answer for a prepared invocation (`None` = none), so Prepare
/// always runs; both orders give `Exclusive` for such a tool, and Prepare is pure.
fn classify(tool: &BoundTool, call: &ToolCall, index: usize) -> Result<Concurrency, PlanError> {
    match tool.prepare(call) {
        Ok(invocation) => tool.classify(&invocation).map_err(|e| match e {
            ClassifyError::Panicked { tool } => PlanError::ClassifierPanicked { index, tool },
        }),
        Err(PrepareError::NameMismatch { .. }) => Err(PlanError::CatalogMismatch {
            index,
            requested: call.name.clone(),
            bound: tool.name().to_owned(),
        }),
        Err(PrepareError::InvalidJson { .. } | PrepareError::SchemaViolation { .. }) => {
            Ok(Concurrency::Exclusive)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::ToolOutput;
    use crate::env::BoxFuture;
    use crate::json::Json;
    use crate::tool::{bind, Invocation, Tool, ToolContext, ToolDefinitionInput, ToolError};
    use proptest::prelude::*;
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// How a test tool answers the ConcurrentTool capability.
    #[derive(Clone, Copy)]
    enum Declares {
        /// No capability (the trait default).
        Nothing,
        /// Shared, keyed by the `key` argument (absent or empty = no key).
        KeyFromArgument,
        /// Shared with no key.
        Shared,
        /// The classifier panics.
        Panics,
    }

    struct TestTool {
        name: &'static str,
        schema: &'static [u8],
        declares: Declares,
        classified: AtomicUsize,
    }

    impl Tool for TestTool {
        fn spec(&self) -> ToolDefinitionInput {
            ToolDefinitionInput {
                name: self.name.into(),
                description: "A planning test tool.".into(),
                input_schema: crate::json::parse(self.schema).unwrap(),
            }
        }
        fn call<'a>(
            &'a self,
            _: &'a Invocation,
            _: ToolContext,
        ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
            Box::pin(async { Ok(ToolOutput::default()) })
        }
        fn concurrency(&self, invocation: &Invocation) -> Option<Concurrency> {
            self.classified.fetch_add(1, Ordering::SeqCst);
            match self.declares {
                Declares::Nothing => None,
                Declares::Shared => Some(Concurrency::shared()),
                Declares::Panics => panic!("classifier panicked"),
                Declares::KeyFromArgument => Some(Concurrency::keyed(
                    invocation
                        .arguments_json()
                        .get("key")
                        .and_then(Json::as_str)
                        .unwrap_or_default(),
                )),
            }
        }
    }

    const ANY_OBJECT: &[u8] = br#"{"type":"object"}"#;
    const KEY_SCHEMA: &[u8] = br#"{"type":"object","properties":{"key":{"type":"string"}}}"#;
    const STRICT_SCHEMA: &[u8] = br#"{
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
        "additionalProperties": false
    }"#;

    const DELEGATE: &str = "research";
    const GHOST: &str = "ghost";

    struct Catalog {
        tools: BTreeMap<&'static str, (Arc<TestTool>, BoundTool)>,
        delegates: BTreeSet<&'static str>,
        /// Answers every lookup of `alias` with the tool named by the value (a broken catalog).
        alias: Option<(&'static str, &'static str)>,
    }

    impl Catalog {
        fn new() -> Catalog {
            let mut catalog = Catalog {
                tools: BTreeMap::new(),
                delegates: BTreeSet::from([DELEGATE]),
                alias: None,
            };
            catalog.add("exclusive", ANY_OBJECT, Declares::Nothing);
            catalog.add("keyed", KEY_SCHEMA, Declares::KeyFromArgument);
            catalog.add("shared", ANY_OBJECT, Declares::Shared);
            catalog.add("panicky", ANY_OBJECT, Declares::Panics);
            catalog.add("strict", STRICT_SCHEMA, Declares::Shared);
            catalog
        }
        fn add(&mut self, name: &'static str, schema: &'static [u8], declares: Declares) {
            let tool = Arc::new(TestTool {
                name,
                schema,
                declares,
                classified: AtomicUsize::new(0),
            });
            let bound = bind(tool.clone()).unwrap();
            self.tools.insert(name, (tool, bound));
        }
        fn classified(&self, name: &str) -> usize {
            self.tools[name].0.classified.load(Ordering::SeqCst)
        }
    }

    impl ToolCatalog for Catalog {
        fn tool(&self, name: &str) -> Option<&BoundTool> {
            let name = match self.alias {
                Some((alias, target)) if alias == name => target,
                _ => name,
            };
            self.tools.get(name).map(|(_, bound)| bound)
        }
        fn is_delegate(&self, name: &str) -> bool {
            self.delegates.contains(name)
        }
    }

    fn calls(spec: &[(&str, &str)]) -> Vec<ToolCall> {
        spec.iter()
            .enumerate()
            .map(|(i, (name, arguments))| ToolCall::new(format!("call_{i}"), *name, *arguments))
            .collect()
    }

    fn tools(start: usize, end: usize) -> Result<Segment, PlanError> {
        Ok(Segment::Tools { start, end })
    }

    const KEY_A: &str = r#"{"key":"a"}"#;
    const KEY_B: &str = r#"{"key":"b"}"#;

    #[test]
    fn a_repeated_key_ends_the_window_before_the_repeat() {
        let catalog = Catalog::new();
        let round = calls(&[
            ("shared", "{}"),
            ("shared", "{}"),
            ("keyed", KEY_A),
            ("keyed", KEY_B),
            ("keyed", KEY_A),
        ]);
        assert_eq!(next_segment(&round, 0, &catalog, 8), tools(0, 4));
        assert_eq!(next_segment(&round, 4, &catalog, 8), tools(4, 5));
        // The limit caps how many run at once, never the window's length.
        assert_eq!(next_segment(&round, 0, &catalog, 2), tools(0, 4));
    }

    #[test]
    fn empty_and_absent_keys_never_conflict() {
        let catalog = Catalog::new();
        let round = calls(&[
            ("keyed", r#"{"key":""}"#),
            ("keyed", r#"{"key":""}"#),
            ("keyed", "{}"),
            ("keyed", ""),
        ]);
        assert_eq!(next_segment(&round, 0, &catalog, 2), tools(0, 4));
    }

    #[test]
    fn an_exclusive_first_call_is_alone() {
        let catalog = Catalog::new();
        let round = calls(&[("exclusive", "{}"), ("shared", "{}"), ("shared", "{}")]);
        assert_eq!(next_segment(&round, 0, &catalog, 4), tools(0, 1));
        assert_eq!(next_segment(&round, 1, &catalog, 4), tools(1, 3));
    }

    #[test]
    fn an_exclusive_call_after_shared_ones_ends_the_window_before_it() {
        let catalog = Catalog::new();
        let round = calls(&[
            ("shared", "{}"),
            ("keyed", KEY_A),
            ("exclusive", "{}"),
            ("shared", "{}"),
        ]);
        assert_eq!(next_segment(&round, 0, &catalog, 4), tools(0, 2));
        assert_eq!(next_segment(&round, 2, &catalog, 4), tools(2, 3));
        assert_eq!(next_segment(&round, 3, &catalog, 4), tools(3, 4));
    }

    #[test]
    fn invalid_arguments_are_exclusive_without_the_classifier() {
        for bad in ["not json", "{}", r#"{"n":"one"}"#, r#"{"n":1,"x":2}"#] {
            let catalog = Catalog::new();
            let first = calls(&[("strict", bad), ("shared", "{}")]);
            assert_eq!(next_segment(&first, 0, &catalog, 4), tools(0, 1), "{bad}");
            let after = calls(&[("shared", "{}"), ("strict", bad), ("shared", "{}")]);
            assert_eq!(next_segment(&after, 0, &catalog, 4), tools(0, 1), "{bad}");
            assert_eq!(catalog.classified("strict"), 0, "{bad}");
        }
        let catalog = Catalog::new();
        let valid = calls(&[("shared", "{}"), ("strict", r#"{"n":1}"#)]);
        assert_eq!(next_segment(&valid, 0, &catalog, 4), tools(0, 2));
        assert_eq!(catalog.classified("strict"), 1);
        let mistyped_key = calls(&[("keyed", r#"{"key":1}"#), ("keyed", KEY_A)]);
        assert_eq!(next_segment(&mistyped_key, 0, &catalog, 4), tools(0, 1));
        assert_eq!(catalog.classified("keyed"), 0);
    }

    #[test]
    fn an_unknown_name_stops_the_scan_and_is_its_own_segment() {
        let catalog = Catalog::new();
        let round = calls(&[("shared", "{}"), (GHOST, "{}"), ("shared", "{}")]);
        assert_eq!(next_segment(&round, 0, &catalog, 4), tools(0, 1));
        assert_eq!(
            next_segment(&round, 1, &catalog, 4),
            Ok(Segment::Unknown { index: 1 })
        );
        assert_eq!(next_segment(&round, 2, &catalog, 4), tools(2, 3));
        // An unknown name is rejected inline whatever the limit.
        assert_eq!(
            next_segment(&round, 1, &catalog, 1),
            Ok(Segment::Unknown { index: 1 })
        );
    }

    #[test]
    fn a_delegate_stops_the_scan_and_delegates_run_together() {
        let catalog = Catalog::new();
        let round = calls(&[
            ("shared", "{}"),
            (DELEGATE, "{}"),
            (DELEGATE, "not json"),
            (DELEGATE, "{}"),
            ("shared", "{}"),
        ]);
        assert_eq!(next_segment(&round, 0, &catalog, 4), tools(0, 1));
        // A delegate run ignores the tool concurrency limit.
        for max in [0, 1, 4] {
            assert_eq!(
                next_segment(&round, 1, &catalog, max),
                Ok(Segment::Delegates { start: 1, end: 4 })
            );
        }
        assert_eq!(
            next_segment(&round, 2, &catalog, 4),
            Ok(Segment::Delegates { start: 2, end: 4 })
        );
        assert_eq!(next_segment(&round, 4, &catalog, 4), tools(4, 5));
    }

    #[test]
    fn a_delegate_name_wins_over_a_tool_of_the_same_name() {
        let mut catalog = Catalog::new();
        catalog.delegates.insert("shared");
        let round = calls(&[("keyed", KEY_A), ("shared", "{}")]);
        assert_eq!(next_segment(&round, 0, &catalog, 4), tools(0, 1));
        assert_eq!(
            next_segment(&round, 1, &catalog, 4),
            Ok(Segment::Delegates { start: 1, end: 2 })
        );
    }

    #[test]
    fn a_limit_of_one_plans_single_calls_without_classifying() {
        let catalog = Catalog::new();
        let round = calls(&[("shared", "{}"), ("shared", "{}"), ("panicky", "{}")]);
        for max in [0, 1] {
            for i in 0..round.len() {
                assert_eq!(next_segment(&round, i, &catalog, max), tools(i, i + 1));
            }
        }
        assert_eq!(catalog.classified("shared"), 0);
        assert_eq!(catalog.classified("panicky"), 0);
    }

    #[test]
    fn a_classifier_panic_is_a_planning_error() {
        let catalog = Catalog::new();
        let first = calls(&[("panicky", "{}"), ("shared", "{}")]);
        assert_eq!(
            next_segment(&first, 0, &catalog, 4),
            Err(PlanError::ClassifierPanicked {
                index: 0,
                tool: "panicky".into()
            })
        );
        let later = calls(&[("shared", "{}"), ("keyed", KEY_A), ("panicky", "{}")]);
        assert_eq!(
            next_segment(&later, 0, &catalog, 4),
            Err(PlanError::ClassifierPanicked {
                index: 2,
                tool: "panicky".into()
            })
        );
        // Invalid arguments keep the panicking classifier out of it.
        let invalid = calls(&[("shared", "{}"), ("panicky", "[")]);
        assert_eq!(next_segment(&invalid, 0, &catalog, 4), tools(0, 1));
    }

    #[test]
    fn calls_past_the_window_end_are_not_classified() {
        let catalog = Catalog::new();
        let round = calls(&[
            ("keyed", KEY_A),
            ("keyed", KEY_A),
            ("panicky", "{}"),
            ("strict", r#"{"n":1}"#),
        ]);
        assert_eq!(next_segment(&round, 0, &catalog, 4), tools(0, 1));
        assert_eq!(catalog.classified("keyed"), 2);
        assert_eq!(catalog.classified("panicky"), 0);
        assert_eq!(catalog.classified("strict"), 0);
    }

    #[test]
    fn bad_requests_are_typed_errors() {
        let catalog = Catalog::new();
        let round = calls(&[("shared", "{}")]);
        assert_eq!(
            next_segment(&round, 1, &catalog, 4),
            Err(PlanError::IndexOutOfRange { index: 1, len: 1 })
        );
        assert_eq!(
            next_segment(&[], 0, &catalog, 4),
            Err(PlanError::IndexOutOfRange { index: 0, len: 0 })
        );
        let huge = vec![ToolCall::new("c", "shared", "{}"); MAX_TOOL_CALLS_PER_RESPONSE + 1];
        assert_eq!(
            next_segment(&huge, 0, &catalog, 4),
            Err(PlanError::TooManyCalls {
                len: MAX_TOOL_CALLS_PER_RESPONSE + 1,
                limit: MAX_TOOL_CALLS_PER_RESPONSE
            })
        );
        let full = vec![ToolCall::new("c", "shared", "{}"); MAX_TOOL_CALLS_PER_RESPONSE];
        assert_eq!(
            next_segment(&full, 0, &catalog, 4),
            tools(0, MAX_TOOL_CALLS_PER_RESPONSE)
        );
    }

    #[test]
    fn a_catalog_returning_the_wrong_tool_is_an_error() {
        let mut catalog = Catalog::new();
        catalog.alias = Some(("alias", "shared"));
        let round = calls(&[("shared", "{}"), ("alias", "{}")]);
        assert_eq!(
            next_segment(&round, 0, &catalog, 4),
            Err(PlanError::CatalogMismatch {
                index: 1,
                requested: "alias".into(),
                bound: "shared".into()
            })
        );
    }

    #[test]
    fn window_is_exact_accepts_only_the_planned_window() {
        let catalog = Catalog::new();
        let round = calls(&[
            ("shared", "{}"),
            ("keyed", KEY_A),
            ("keyed", KEY_A),
            (DELEGATE, "{}"),
            (GHOST, "{}"),
            ("panicky", "{}"),
        ]);
        assert!(window_is_exact(&round, 0, 2, &catalog, 4));
        assert!(window_is_exact(&round, 2, 3, &catalog, 4));
        assert!(!window_is_exact(&round, 0, 1, &catalog, 4), "too short");
        assert!(!window_is_exact(&round, 0, 3, &catalog, 4), "repeated key");
        assert!(!window_is_exact(&round, 0, 0, &catalog, 4), "empty");
        assert!(!window_is_exact(&round, 2, 1, &catalog, 4), "reversed");
        assert!(!window_is_exact(&round, 3, 4, &catalog, 4), "delegate");
        assert!(!window_is_exact(&round, 4, 5, &catalog, 4), "unknown");
        assert!(!window_is_exact(&round, 5, 6, &catalog, 4), "panic");
        assert!(!window_is_exact(&round, 5, 7, &catalog, 4), "past the end");
        assert!(!window_is_exact(&round, 9, 10, &catalog, 4), "out of range");
        // A limit of one allows only single-call windows, even for a panicking classifier.
        assert!(!window_is_exact(&round, 0, 2, &catalog, 1));
        assert!(window_is_exact(&round, 0, 1, &catalog, 1));
        assert!(window_is_exact(&round, 5, 6, &catalog, 1));
    }

    #[test]
    fn segment_ranges() {
        assert_eq!(Segment::Unknown { index: 3 }.range(), 3..4);
        assert_eq!(Segment::Tools { start: 1, end: 4 }.range(), 1..4);
        assert_eq!(Segment::Delegates { start: 0, end: 2 }.range(), 0..2);
    }

    // ---- properties ----

    /// The calls of the property rounds, one per classification case, so that windows are
    /// long and key conflicts frequent. The panicking tool is left out (tested above).
    const CALLS: &[(&str, &str)] = &[
        ("keyed", KEY_A),
        ("keyed", KEY_B),
        ("keyed", r#"{"key":"c"}"#),
        ("keyed", r#"{"key":""}"#),
        ("keyed", ""),
        ("keyed", r#"{"key":1}"#),
        ("shared", "{}"),
        ("shared", "not json"),
        ("strict", r#"{"n":1}"#),
        ("strict", "{}"),
        ("exclusive", "{}"),
        (GHOST, "{}"),
        (DELEGATE, "{}"),
    ];

    /// What the segmentation rules say each call of [`CALLS`] classifies as, written out by hand.
    fn expected(name: &str, arguments: &str) -> Concurrency {
        match (name, arguments) {
            ("keyed", KEY_A) => Concurrency::keyed("a"),
            ("keyed", KEY_B) => Concurrency::keyed("b"),
            ("keyed", r#"{"key":"c"}"#) => Concurrency::keyed("c"),
            ("keyed", r#"{"key":""}"# | "") => Concurrency::shared(),
            ("shared", "{}") | ("strict", r#"{"n":1}"#) => Concurrency::shared(),
            _ => Concurrency::Exclusive,
        }
    }

    fn round_strategy() -> impl Strategy<Value = Vec<ToolCall>> {
        proptest::collection::vec(proptest::sample::select(CALLS), 1..16)
            .prop_map(|spec| calls(&spec))
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        #[test]
        fn segments_partition_the_round_into_valid_windows(
            round in round_strategy(),
            max in 0u32..5,
        ) {
            let catalog = Catalog::new();
            let is_tool = |i: usize| {
                round[i].name != DELEGATE && catalog.tool(&round[i].name).is_some()
            };
            let class = |i: usize| expected(&round[i].name, &round[i].arguments);
            let mut next = 0;
            while next < round.len() {
                let segment = next_segment(&round, next, &catalog, max).unwrap();
                let range = segment.range();
                prop_assert_eq!(range.start, next, "segments are contiguous");
                prop_assert!(range.end > range.start && range.end <= round.len());
                match segment {
                    Segment::Delegates { start, end } => {
                        prop_assert!(round[start..end].iter().all(|c| c.name == DELEGATE));
                        prop_assert!(end == round.len() || round[end].name != DELEGATE);
                    }
                    Segment::Unknown { index } => prop_assert_eq!(&round[index].name, GHOST),
                    Segment::Tools { start, end } => {
                        prop_assert!((start..end).all(is_tool));
                        prop_assert!(window_is_exact(&round, start, end, &catalog, max));
                        prop_assert!(!window_is_exact(&round, start, end - 1, &catalog, max));
                        prop_assert!(!window_is_exact(&round, start, end + 1, &catalog, max));
                        if max <= 1 {
                            prop_assert_eq!(end - start, 1);
                        } else if class(start).is_exclusive() {
                            prop_assert_eq!(end - start, 1, "an exclusive call is alone");
                        } else {
                            let mut keys = BTreeSet::new();
                            for i in start..end {
                                prop_assert!(!class(i).is_exclusive());
                                if let Some(key) = class(i).key() {
                                    prop_assert!(keys.insert(key.to_owned()), "key repeated");
                                }
                            }
                            // Maximal: the next call could not have joined.
                            if end < round.len() && is_tool(end) {
                                let blocked = match class(end) {
                                    Concurrency::Exclusive => true,
                                    Concurrency::Shared { key } => {
                                        key.is_some_and(|k| keys.contains(&k))
                                    }
                                };
                                prop_assert!(blocked, "window stopped early at {}", end);
                            }
                        }
                    }
                }
                next = range.end;
            }
            prop_assert_eq!(next, round.len(), "every call is covered exactly once");
        }
    }
}
