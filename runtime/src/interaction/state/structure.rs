//! The structural consistency rules of the parent state that need no Definition
//! configuration. Every violation is [`ErrorKind::InvalidExecutionState`].
//!
//! [`ErrorKind::InvalidExecutionState`]: crate::interaction::ErrorKind::InvalidExecutionState

use super::parent::ParentState;
use super::phase::Phase;
use super::round::{BatchKind, ChildBatch, ToolRound};
use crate::chat::{FinishReason, ToolCall};
use crate::interaction::error::InteractionError;
use crate::interaction::ids::{delegate_child_key, tool_child_key};
use crate::interaction::protocol::validate_advertised_names;
use crate::interaction::wire::Wire;
use std::collections::BTreeSet;

fn invalid(detail: impl AsRef<str>) -> InteractionError {
    InteractionError::invalid_state(detail)
}

impl ParentState {
    /// Every restore rule that the state alone decides: the envelope, the per-phase shape, the
    /// batch bookkeeping, derived child keys, and the artifact ordering and consistency.
    /// Runs on decode; run it on every Step and Snapshot too, so a bad state is caught before
    /// it is committed rather than at the next restore.
    pub fn validate_structure(&self) -> Result<(), InteractionError> {
        self.check_envelope()?;
        self.check_phase()?;
        self.check_artifacts()
    }

    fn check_envelope(&self) -> Result<(), InteractionError> {
        self.working_context.validate().map_err(|e| invalid(format!("working_context: {e}")))?;
        validate_advertised_names(&self.advertised_tool_names).map_err(invalid)?;
        if let Some(pending) = &self.pending_steer {
            pending.validate()?;
        }
        self.check_model_record()
    }

    fn check_phase(&self) -> Result<(), InteractionError> {
        let phase = self.phase;
        let forbid = |present: bool, what: &str| {
            if present {
                Err(invalid(format!("phase {phase} must not hold {what}")))
            } else {
                Ok(())
            }
        };
        forbid(self.budget_question.is_some() != phase.is_budget_phase(), "a budget_question (or lacks one)")?;
        if self.budget_question.is_some() && self.budget_questions == 0 {
            return Err(invalid("a budget_question needs budget_questions ≥ 1"));
        }
        match phase {
            Phase::AwaitingBudgetWaitOpen | Phase::WaitingBudgetAnswer => {
                forbid(self.final_output.is_some(), "a final_output")?;
                let question = self.budget_question.as_ref().ok_or_else(|| invalid("budget phases need a budget_question"))?;
                if (phase == Phase::WaitingBudgetAnswer) != question.wait_id.is_some() {
                    return Err(invalid(format!("phase {phase}: budget_question.wait_id is set only once the wait opened")));
                }
                // A question stopped either the next model call (no round) or the next tool
                // start of a round whose batch then holds nothing in flight.
                match &self.tool_round {
                    None => Ok(()),
                    Some(round) => {
                        forbid(!question.applied_steer_signal_ids.is_empty(), "applied steers with a tool_round")?;
                        check_round(phase, self.model_call_count, round).map_err(|e| e.context("tool_round"))
                    }
                }
            }
            Phase::ReadyModel | Phase::AwaitingModel => {
                forbid(self.tool_round.is_some(), "a tool_round")?;
                #[cfg(feature = "mutations")]
                let steer_kept = crate::mutation::active(crate::mutation::Mutation::SteerAppliedTwice);
                #[cfg(not(feature = "mutations"))]
                let steer_kept = false;
                // MUTATION SteerAppliedTwice keeps an applied steer pending past the boundary.
                forbid(self.pending_steer.is_some() && !steer_kept, "a pending_steer")?;
                forbid(self.final_output.is_some(), "a final_output")?;
                if phase == Phase::AwaitingModel && self.model_call_count == 0 {
                    return Err(invalid("phase awaiting_model needs model_call_count ≥ 1"));
                }
                Ok(())
            }
            Phase::AwaitingChildStarts | Phase::AwaitingChildWaitOpen | Phase::WaitingChildren => {
                forbid(self.final_output.is_some(), "a final_output")?;
                if self.model_call_count == 0 {
                    return Err(invalid(format!("phase {phase} needs model_call_count ≥ 1")));
                }
                let round =
                    self.tool_round.as_ref().ok_or_else(|| invalid(format!("phase {phase} needs a tool_round")))?;
                check_round(phase, self.model_call_count, round).map_err(|e| e.context("tool_round"))
            }
            Phase::Completed => {
                forbid(self.tool_round.is_some(), "a tool_round")?;
                forbid(self.pending_steer.is_some(), "a pending_steer")?;
                let output =
                    self.final_output.as_ref().ok_or_else(|| invalid("phase completed needs a final_output"))?;
                output.validate().map_err(|e| e.context("final_output"))?;
                if output.model_calls != self.model_call_count {
                    return Err(invalid(format!(
                        "final_output.model_calls {} differs from model_call_count {}",
                        output.model_calls, self.model_call_count
                    )));
                }
                if output.spending != self.spending {
                    return Err(invalid(format!(
                        "final_output.spending {:?} differs from the state's spending {:?}",
                        output.spending, self.spending
                    )));
                }
                if output.usage != self.usage {
                    return Err(invalid(format!(
                        "final_output.usage {:?} differs from the state's usage {:?}",
                        output.usage, self.usage
                    )));
                }
                Ok(())
            }
        }
    }

    fn check_artifacts(&self) -> Result<(), InteractionError> {
        let count = self.model_call_count;
        let mut seen = BTreeSet::new();
        let mut previous: Option<(u32, u32)> = None;
        for (i, record) in self.artifact_records.iter().enumerate() {
            let at = |d: String| invalid(format!("artifact_records[{i}]: {d}"));
            record.validate().map_err(|e| at(e.detail().to_owned()))?;
            let sequence = record.model_call_sequence();
            if sequence > count {
                return Err(at(format!("model_call_sequence {sequence} exceeds model_call_count {count}")));
            }
            if let Some((seq, index)) = previous {
                if sequence < seq || (sequence == seq && record.tool_call_index() <= index) {
                    return Err(at("records must be in strictly increasing (sequence, tool_call_index) order".into()));
                }
            }
            previous = Some((sequence, record.tool_call_index()));
            if !seen.insert((sequence, record.tool_call_id())) {
                return Err(at("repeats a (model_call_sequence, tool_call_id) pair".into()));
            }
        }
        // Records of the round in progress must point at its settled delegate results.
        let (Some(round), Some(last)) = (&self.tool_round, self.artifact_records.last()) else {
            return Ok(());
        };
        if last.model_call_sequence() != count {
            return Ok(());
        }
        let calls = round.calls();
        for (i, record) in self.artifact_records.iter().enumerate().filter(|(_, r)| r.model_call_sequence() == count) {
            let at = |d: &str| invalid(format!("artifact_records[{i}]: {d}"));
            let index = usize::try_from(record.tool_call_index()).unwrap_or(usize::MAX);
            let (Some(call), Some(result)) = (calls.get(index), round.results.get(index)) else {
                return Err(at("points at a call that is not settled in the current round"));
            };
            if call.id != record.tool_call_id() || call.name != record.delegate_name() {
                return Err(at("does not match its tool call"));
            }
            if result.is_error || !result.answers(call) {
                return Err(at("its settled result is not a successful result of that call"));
            }
            if !result.output.content.is_empty() || result.output.details.as_ref() != Some(record.output().value()) {
                return Err(at("its settled result does not carry exactly the artifact output"));
            }
        }
        Ok(())
    }
}

/// The per-phase rules of a round in the three child phases.
fn check_round(phase: Phase, sequence: u32, round: &ToolRound) -> Result<(), InteractionError> {
    round.response.validate().map_err(|e| invalid(format!("response: {e}")))?;
    let calls = round.calls();
    if calls.is_empty() {
        return Err(invalid("response has no tool calls"));
    }
    if u32::try_from(calls.len()).is_err() {
        return Err(invalid("too many tool calls"));
    }
    let mut ids = BTreeSet::new();
    if let Some(dup) = calls.iter().find(|c| !ids.insert(c.id.as_str())) {
        return Err(invalid(format!("tool call id `{}` is repeated", crate::interaction::protocol::excerpt(&dup.id))));
    }
    if round.response.finish_reason != Some(FinishReason::ToolCalls) {
        return Err(invalid("a pending round needs finish reason tool_calls"));
    }
    let batch = round.child_batch.as_ref().ok_or_else(|| invalid("child phases need a child_batch"))?;
    if batch.invocations.is_empty() {
        return Err(invalid("child_batch has no invocations"));
    }
    let next = round.results.len();
    if next.saturating_add(batch.invocations.len()) > calls.len() {
        return Err(invalid("results and invocations exceed the number of calls"));
    }
    for (i, (result, call)) in round.results.iter().zip(&calls).enumerate() {
        result.validate().map_err(|e| invalid(format!("results[{i}]: {e}")))?;
        #[cfg(feature = "mutations")]
        if crate::mutation::active(crate::mutation::Mutation::FoldInCompletionOrder) {
            // MUTATION: results folded out of order; only require they answer settled calls.
            if !calls[..next].iter().any(|c| result.answers(c)) {
                return Err(invalid(format!("results[{i}] answers no settled call")));
            }
            continue;
        }
        if !result.answers(call) {
            return Err(invalid(format!("results[{i}] does not answer call {i}")));
        }
    }
    check_batch(phase, sequence, batch, &calls[next..next + batch.invocations.len()])
        .map_err(|e| e.context("child_batch"))?;
    if next == 0
        && phase == Phase::AwaitingChildStarts
        && batch.kind == BatchKind::Tool
        && !round.direct_result_eligible
    {
        return Err(invalid("fresh tool batch lost its direct-result candidate"));
    }
    Ok(())
}

/// `segment[j]` is the call of `batch.invocations[j]`.
fn check_batch(phase: Phase, sequence: u32, batch: &ChildBatch, segment: &[&ToolCall]) -> Result<(), InteractionError> {
    let planned = usize::try_from(batch.next_start_index).unwrap_or(usize::MAX);
    // A budget question may stop a batch before its first start.
    if (planned == 0 && !phase.is_budget_phase()) || planned > batch.invocations.len() {
        return Err(invalid("next_start_index must be within 1..=len(invocations)"));
    }
    if batch.kind == BatchKind::Delegate && planned != batch.invocations.len() {
        return Err(invalid("a delegate batch plans every invocation at once"));
    }
    match (phase, &batch.wait_id) {
        (Phase::WaitingChildren, None) => return Err(invalid("waiting_children needs a wait_id")),
        (Phase::AwaitingChildStarts | Phase::AwaitingChildWaitOpen | Phase::AwaitingBudgetWaitOpen | Phase::WaitingBudgetAnswer, Some(_)) => {
            return Err(invalid(format!("phase {phase} must not hold a wait_id")))
        }
        _ => {}
    }
    let mut processes = BTreeSet::new();
    for (j, (invocation, call)) in batch.invocations.iter().zip(segment).enumerate() {
        let at = |d: &str| invalid(format!("invocations[{j}]: {d}"));
        if j >= planned {
            if !invocation.is_blank() {
                return Err(at("an unplanned invocation must carry no state"));
            }
            continue;
        }
        match &invocation.child_key {
            Some(key) => {
                let expected = match batch.kind {
                    BatchKind::Tool => tool_child_key(sequence, &call.id),
                    BatchKind::Delegate => delegate_child_key(sequence, call),
                }
                .map_err(|e| at(e.detail()))?;
                if *key != expected {
                    return Err(at("child_key differs from the derived key"));
                }
            }
            None => {
                let pre_start_error = batch.kind == BatchKind::Delegate
                    && invocation.process_id.is_none()
                    && invocation.result.as_ref().is_some_and(|r| r.result.is_error);
                if !pre_start_error {
                    return Err(at("a planned invocation needs a child_key"));
                }
            }
        }
        if let Some(process_id) = &invocation.process_id {
            if !processes.insert(process_id) {
                return Err(at("repeats a process_id"));
            }
        }
        if let Some(settled) = &invocation.result {
            settled.validate().map_err(|e| at(e.detail()))?;
            if !settled.result.answers(call) {
                return Err(at("result does not answer its call"));
            }
            match batch.kind {
                BatchKind::Delegate => {
                    if !settled.result.is_error
                        || invocation.process_id.is_some()
                        || settled.direct
                        || !settled.advertised_tool_names.is_empty()
                    {
                        return Err(at(
                            "a delegate result kept in the batch must be a non-direct error without process or advertisements",
                        ));
                    }
                }
                BatchKind::Tool => {
                    if invocation.process_id.is_none() {
                        return Err(at("a tool result needs a process_id"));
                    }
                }
            }
        }
    }
    let pending = batch.pending_count();
    let active = batch.active_count();
    match phase {
        Phase::AwaitingChildStarts => {
            if pending == 0 {
                return Err(invalid("awaiting_child_starts needs a pending start"));
            }
            if batch.kind == BatchKind::Delegate && active > 0 {
                return Err(invalid("a delegate batch cannot hold active children while starting"));
            }
        }
        Phase::AwaitingBudgetWaitOpen | Phase::WaitingBudgetAnswer => {
            if pending > 0 || active > 0 {
                return Err(invalid(format!("phase {phase}: a budget question waits with no child in flight")));
            }
            if planned >= batch.invocations.len() {
                return Err(invalid(format!("phase {phase}: a budget question stops a batch with an unstarted call")));
            }
        }
        _ => {
            if pending > 0 {
                return Err(invalid(format!("phase {phase} must not hold pending starts")));
            }
            if active == 0 {
                return Err(invalid(format!("phase {phase} needs an active child")));
            }
        }
    }
    Ok(())
}
