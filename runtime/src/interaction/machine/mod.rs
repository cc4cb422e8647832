//! The parent Interaction Execution: one pure Step per kernel round trip.
//!
//! Each Step checks cancellation, then works on a copy of the state (valid by construction:
//! an Execution is built only from a state that passed the complete validation, and adopts
//! only a state that passes it again after the Step; tests re-check it on entry): phase
//! collection gathers the window's signals (steers may accompany the one expected signal of
//! each phase), and the transitions below cascade until exactly one Transition results (for
//! example settlement → L → R, or settlement → E → C → R). The copy is adopted only
//! when the Step succeeds with a non-failing Transition; a `Fail` keeps the last valid state
//! (there is no failed phase, and a failed parent's state must still restore).
//!
//! | label | when | what happens |
//! |---|---|---|
//! | T1 | `ready_model` + steers | the steers become visible, then R |
//! | R | request the model | fail at the model-call limit; else count the call and declare one `model_call` Effect |
//! | T2 | `awaiting_model` + settlement | host/provider error fails; adopt a reduced context; calls under a finish reason other than `tool_calls`/`length` fail before steers are admitted; then F, L or a new round (A) |
//! | F | final response | no pending steer: offer it as a completion (C); else append it, apply the steers, R |
//! | L | calls cut off by the token limit | one "emit the call again" error result per call, then R |
//! | A | advance the round | the next segment: a delegate run, an inline-rejected unknown tool, or a tool window; E at the end |
//! | E | finish the round | direct results with no pending steer are offered as the completion (C); else the results go to the model, R |
//! | T3 | `awaiting_child_starts` + start results | match them to the batch; a failed tool start fails the parent, a failed delegate start is an error result |
//! | W | declare the wait | one child wait: condition `any` for tools, `all` for delegates, boundary `subtree_drained` |
//! | T4 | `awaiting_child_wait_open` + opening | it must match the recomputed wait; park on it |
//! | T5 | `waiting_children` + satisfaction | settle the outcomes; tools: S; delegates: fold, A |
//! | S | schedule tools | start children up to the concurrency limit; else W; else fold, A |
//! | C | completion | the validator (if any) accepts → Complete; rejects → its feedback goes to the model, R |
//! | Q | R or S would pass an own limit under `OnExhausted::AskHuman`, nothing in flight | declare the question's wait |
//! | T6 | `awaiting_budget_wait_open` + opening | it must echo the question; park on it |
//! | T7 | `waiting_budget_answer` + answer | extend: add the grant, then R (no round) or S; decline: fail with the budget failure |
//!
//! * `collect`: the per-phase signal rules;
//! * `model`: R, T1, T2, F and L;
//! * `round`: A, E, the tool and delegate batches, T3, W, T4, T5 and S;
//! * `complete`: C;
//! * `budget`: Q (ask the host to extend a budget), T6 (the question's wait opened), T7 (the
//!   answer: extend and go on where the run stopped, or decline and fail).

mod budget;
mod collect;
mod complete;
mod model;
mod round;

#[cfg(test)]
mod tests;

use super::definition::Rules;
use super::error::InteractionError;
use super::state::{ParentState, Phase};
use crate::json::Payload;
use crate::kernel::failure::Failure;
use crate::kernel::signal::Signal;
use crate::kernel::transition::Transition;
use crate::kernel::waist::{Execution, ExecutionState, StepContext, StepError};
use std::sync::Arc;

/// The parent Execution: the Definition's rules and the current, valid state.
pub struct ParentExecution {
    rules: Arc<Rules>,
    /// Shared with the snapshot that encoded it ([`Snapshotted`]), so the restore that
    /// follows each Step takes it back without decoding.
    state: Arc<ParentState>,
    /// The encoding of `state.final_output` when the Step that completed built it (the
    /// Complete transition's payload): the snapshot reuses it instead of encoding the Output
    /// a second time. `None` otherwise (a restored instance encodes its own).
    output: Option<Payload>,
}

impl ParentExecution {
    /// An Execution over `state`, which passed [`ParentState::validate`] under `rules`.
    pub(crate) fn new(rules: Arc<Rules>, state: Arc<ParentState>) -> ParentExecution {
        ParentExecution { rules, state, output: None }
    }

    /// The current state (read-only).
    pub fn state(&self) -> &ParentState {
        &self.state
    }
}

/// One Step in progress: the working copy and the count of consumed signals.
pub(crate) struct Machine<'a> {
    rules: &'a Rules,
    s: ParentState,
    consumed: u32,
}

impl Machine<'_> {
    fn fail(&self, failure: Failure) -> Transition {
        Transition::Fail { consumed: self.consumed, failure }
    }

    /// The limits this run applies now.
    fn limits(&self) -> crate::interaction::budget::Limits {
        self.s.limits(self.rules.budget.budget.limits())
    }

    /// The run's own time limit in milliseconds (with what the host granted).
    fn time_limit(&self) -> Option<u64> {
        self.s.time_limit(self.rules.budget.budget.time_ms())
    }

    /// What a model call declared now asks of the Dispatcher's clock: `None` without a time
    /// budget.
    fn call_time(&self) -> Option<crate::interaction::run_clock::CallTime> {
        let limit = self.time_limit();
        self.s.clock.applies(limit).then(|| crate::interaction::run_clock::CallTime { deadline_ms: self.s.clock.deadline(limit) })
    }

    /// What counts against the limits now.
    fn spent(&self) -> crate::interaction::budget::Amounts {
        self.s.spending.amounts(self.s.usage)
    }

    /// Seals what this Step appended to the working context into one segment (O(appended));
    /// a context over `max_context_bytes` is the failure to return instead.
    fn seal(&mut self) -> Result<Option<Failure>, StepError> {
        self.s.working_context.seal().map_err(|e| invalid(format!("working context: {e}")))?;
        if self.s.working_context.sealed_bytes() > self.rules.max_context_bytes {
            let text = super::definition::context_limit_text(self.rules.max_context_bytes);
            return Ok(Some(super::codes::failure(super::codes::LIMIT_CONTEXT, &text)));
        }
        Ok(None)
    }
}

fn invalid(detail: impl AsRef<str>) -> StepError {
    StepError::from(InteractionError::invalid_state(detail))
}

/// A count of signals a Step consumed, as the Transition carries it.
fn count(n: usize) -> Result<u32, StepError> {
    u32::try_from(n).map_err(|_| invalid("signal window too large"))
}

impl Execution for ParentExecution {
    fn step(&mut self, cx: &StepContext, signals: &[Signal]) -> Result<Transition, StepError> {
        if cx.cancel.is_cancelled() {
            return Err(StepError::Canceled);
        }
        #[cfg(test)]
        self.state.validate(self.rules.as_ref()).expect("a parent Execution holds a valid state");
        let mut m = Machine { rules: &self.rules, s: ParentState::clone(&self.state), consumed: 0 };
        // A run restored under another (allowed) model records the switch before anything else.
        m.s.adopt_model(self.rules.model.as_ref());
        let transition = match m.s.phase {
            Phase::ReadyModel => m.on_ready(signals)?,
            Phase::AwaitingModel => m.on_model(signals)?,
            Phase::AwaitingChildStarts => m.on_starts(signals)?,
            Phase::AwaitingChildWaitOpen => m.on_wait_open(signals)?,
            Phase::WaitingChildren => m.on_wait_satisfied(signals)?,
            Phase::AwaitingBudgetWaitOpen => m.on_budget_wait_open(signals)?,
            Phase::WaitingBudgetAnswer => m.on_budget_answer(signals)?,
            Phase::Completed => return Err(invalid("completed execution cannot advance")),
        };
        if matches!(transition, Transition::Fail { .. }) {
            // A failing Step keeps the last valid state, but what it settled was spent: the
            // failed run's usage counts the call that failed it.
            let state = Arc::make_mut(&mut self.state);
            state.usage = m.s.usage;
            state.spending = m.s.spending;
            state.clock = m.s.clock;
            return Ok(transition);
        }
        if let Some(failure) = m.seal()? {
            return Ok(m.fail(failure));
        }
        m.s.validate(self.rules.as_ref()).map_err(|e| e.context("state after step"))?;
        self.state = Arc::new(m.s);
        // Only a completing Step sets `final_output`, and it is the Output this payload
        // encodes (`evaluate_completion`); a completed state never steps again.
        self.output = match &transition {
            Transition::Complete { output, .. } => Some(output.clone()),
            _ => None,
        };
        Ok(transition)
    }

    fn snapshot(&self) -> Result<ExecutionState, StepError> {
        #[cfg(test)]
        self.state.validate(self.rules.as_ref()).expect("a parent Execution holds a valid state");
        let mut encoded = self.state.encode_valid(self.output.as_ref())?;
        // The payload decodes to this very state only when its context was already sealed
        // (`encode_valid` seals an unsealed tail on a copy; every Step seals its own).
        if self.state.working_context.is_sealed() {
            let decoded = Snapshotted { state: self.state.clone(), rules: self.rules.clone() };
            encoded.payload = encoded.payload.with_decoded(Arc::new(decoded));
        }
        Ok(encoded)
    }
}

/// The state a parent snapshot encoded, attached to its payload: restoring that payload
/// with the same rules (and the same segments) takes the state back instead of decoding and
/// validating it again (`Definition::restore`). A state read from storage never carries one
/// and is decoded strictly.
pub(crate) struct Snapshotted {
    pub(crate) state: Arc<ParentState>,
    /// The rules the state was validated under.
    pub(crate) rules: Arc<Rules>,
}

impl Snapshotted {
    /// The state, when `encoded` carries this snapshot's decoded form for `rules`: the same
    /// rules (by identity) and exactly the segments the state's context holds (by identity:
    /// a segment's bytes never change).
    pub(crate) fn reusable(encoded: &ExecutionState, rules: &Arc<Rules>) -> Option<Arc<ParentState>> {
        let memo = encoded.payload.decoded::<Snapshotted>()?;
        let context = &memo.state.working_context;
        let same_segments = context.segment_count() == encoded.segments.len()
            && context.segments_iter().zip(&encoded.segments).all(|(a, b)| Arc::ptr_eq(a, b));
        (Arc::ptr_eq(&memo.rules, rules) && same_segments && encoded.kind.as_str() == ParentState::KIND)
            .then(|| memo.state.clone())
    }
}
