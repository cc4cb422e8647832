//! The restore rules that need the Definition's configuration: the extension point the
//! Definition plugs into ([`StateRules`]) and the checks written against it.

use super::parent::ParentState;
use super::round::BatchKind;
use crate::chat::ToolCall;
use crate::interaction::error::InteractionError;
use crate::schema::Schema;

/// What state validation needs to know about a Definition. The Definition implements it;
/// tests implement it with fixed tables.
pub trait StateRules {
    /// `MaxModelCalls` (> 0).
    fn max_model_calls(&self) -> u32;

    /// The working context's byte bound (the canonical bytes of all its messages).
    fn max_context_bytes(&self) -> u64 {
        crate::limits::DEFAULT_MAX_CONTEXT_BYTES
    }

    /// The model the Definition calls, when it names one: a state recording another model
    /// restores only when it allows a switch.
    fn model(&self) -> Option<&super::RunModel> {
        None
    }

    /// `MaxConcurrentToolCalls` after normalization (0 → 1), so always ≥ 1.
    fn max_concurrent_tool_calls(&self) -> u32;

    /// Whether `name` is a ToolSet entry (initial or deferred).
    fn is_tool(&self, name: &str) -> bool;

    /// The output schema of the Delegate named `name`; `None` when no such Delegate exists.
    fn delegate_output_schema(&self, name: &str) -> Option<&Schema>;

    /// Whether `name` is a configured Delegate.
    fn is_delegate(&self, name: &str) -> bool {
        self.delegate_output_schema(name).is_some()
    }

    /// The length (≥ 1) of the tool concurrency window that planning forms when it
    /// starts at `calls[0]`; `calls` runs to the end of the response. Must be deterministic:
    /// it is recomputed on every restore. A classifier panic or other planning error is an
    /// error here too.
    fn plan_window(&self, calls: &[ToolCall]) -> Result<usize, InteractionError>;
}

fn invalid(detail: impl AsRef<str>) -> InteractionError {
    InteractionError::invalid_state(detail)
}

impl ParentState {
    /// [`ParentState::validate_structure`] followed by [`ParentState::validate_against`]: the
    /// complete restore validation.
    pub fn validate(&self, rules: &impl StateRules) -> Result<(), InteractionError> {
        self.validate_structure()?;
        self.validate_against(rules)
    }

    /// The configuration-dependent restore rules. Assumes [`ParentState::validate_structure`]
    /// passed (it never panics otherwise, but its verdict is then meaningless):
    /// * the recorded model is the Definition's, unless it allows a switch;
    /// * `model_call_count ≤ MaxModelCalls`;
    /// * every artifact names a configured Delegate and satisfies its output schema;
    /// * in a child phase: every call of the segment is a Delegate iff the batch is a delegate
    ///   batch; a tool batch's calls name ToolSet entries, the segment is exactly one planning
    ///   window, no window longer than 1 when `MaxConcurrentToolCalls == 1`, and at most
    ///   `MaxConcurrentToolCalls` keyed-but-unsettled invocations.
    pub fn validate_against(&self, rules: &impl StateRules) -> Result<(), InteractionError> {
        self.check_model_against(rules.model())?;
        if self.model_call_count > rules.max_model_calls() {
            return Err(invalid(format!(
                "model_call_count {} exceeds MaxModelCalls {}",
                self.model_call_count,
                rules.max_model_calls()
            )));
        }
        if self.working_context.sealed_bytes() > rules.max_context_bytes() {
            return Err(invalid(format!(
                "working_context holds {} bytes, over max_context_bytes {}",
                self.working_context.sealed_bytes(),
                rules.max_context_bytes()
            )));
        }
        for (i, record) in self.artifact_records.iter().enumerate() {
            let Some(schema) = rules.delegate_output_schema(record.delegate_name()) else {
                return Err(invalid(format!("artifact_records[{i}] names no configured delegate")));
            };
            schema
                .validate(record.output().value())
                .map_err(|e| invalid(format!("artifact_records[{i}] violates its delegate output schema: {e}")))?;
        }
        let Some(round) = &self.tool_round else { return Ok(()) };
        let Some(batch) = &round.child_batch else { return Ok(()) };
        let calls: Vec<ToolCall> = round.calls().into_iter().cloned().collect();
        let next = round.results.len();
        let Some(remaining) = calls.get(next..) else {
            return Err(invalid("tool_round: results exceed the calls"));
        };
        for (j, call) in remaining.iter().take(batch.invocations.len()).enumerate() {
            let at = |d: &str| invalid(format!("tool_round.child_batch.invocations[{j}]: {d}"));
            let delegate = rules.is_delegate(&call.name);
            match batch.kind {
                BatchKind::Delegate if !delegate => return Err(at("a delegate batch call names no delegate")),
                BatchKind::Tool if delegate => return Err(at("a tool batch call names a delegate")),
                BatchKind::Tool if !rules.is_tool(&call.name) => return Err(at("names no tool of the tool set")),
                _ => {}
            }
        }
        if batch.kind == BatchKind::Tool {
            let window = rules.plan_window(remaining).map_err(|e| e.context("tool_round: planning"))?;
            if window != batch.invocations.len() {
                return Err(invalid(format!(
                    "tool_round: the batch holds {} invocations but planning forms a window of {window}",
                    batch.invocations.len()
                )));
            }
            let max = usize::try_from(rules.max_concurrent_tool_calls().max(1)).unwrap_or(usize::MAX);
            if max == 1 && batch.invocations.len() > 1 {
                return Err(invalid("tool_round: a window longer than 1 with MaxConcurrentToolCalls 1"));
            }
            let keyed_unsettled =
                batch.invocations.iter().filter(|i| i.child_key.is_some() && i.result.is_none()).count();
            if keyed_unsettled > max {
                return Err(invalid(format!(
                    "tool_round: {keyed_unsettled} started invocations exceed MaxConcurrentToolCalls {max}"
                )));
            }
        }
        Ok(())
    }
}
