//! Discovering and answering input waits from a tree snapshot: tool input requests, and the
//! budget questions an Interaction asks under `OnExhausted::AskHuman`
//! ([`crate::interaction::budget_question`]).
//!
//! The answer goes to the Process that owns the wait ([`PendingToolInput::process_id`]: the
//! tool child, or the Interaction whose budget ran out), never to the root unless it is the
//! root that asks: each Process owns its WaitId independently of its parent and siblings. The
//! continuation state is never exposed here.

use super::error::{ErrorKind, InteractionError};
use super::signals::tool_input_response_signal;
use super::budget_question::{BudgetAnswer, PendingBudgetQuestion};
use super::state::{ParentState, Phase, ToolCallState, ToolChildPhase};
use crate::json::FromJson;
use crate::json::{Json, Payload};
use crate::kernel::ids::{ProcessId, SignalId, WaitId};
use crate::kernel::signal::SignalRequest;
use crate::kernel::snapshot::TreeSnapshot;
use crate::kernel::status::Status;
use crate::schema::Schema;
use crate::tool::ToolInputRequest;

/// One tool child parked on an input wait.
#[derive(Clone, Debug)]
pub struct PendingToolInput {
    process_id: ProcessId,
    wait_id: WaitId,
    prompt: Payload,
    response_schema: Payload,
    schema: Schema,
    /// A budget question: an answer must also decode as a [`BudgetAnswer`].
    budget: bool,
}

impl PendingToolInput {
    fn new(process_id: &ProcessId, wait_id: WaitId, request: &ToolInputRequest, budget: bool) -> PendingToolInput {
        PendingToolInput {
            process_id: process_id.clone(),
            wait_id,
            prompt: request.prompt().clone(),
            response_schema: request.response_schema().clone(),
            schema: request.schema().clone(),
            budget,
        }
    }

    /// The tool child Process to deliver the answer to.
    pub fn process_id(&self) -> &ProcessId {
        &self.process_id
    }
    pub fn wait_id(&self) -> &WaitId {
        &self.wait_id
    }
    pub fn prompt(&self) -> &Payload {
        &self.prompt
    }
    pub fn response_schema(&self) -> &Payload {
        &self.response_schema
    }
    /// Whether this is a budget question (its prompt is a [`BudgetQuestion`](super::budget_question::BudgetQuestion)).
    pub fn is_budget_question(&self) -> bool {
        self.budget
    }

    /// Validates `response` against the response schema locally, then builds the
    /// wait-addressed answer. A response that fails validation is
    /// [`ErrorKind::InvalidToolInputRequest`].
    pub fn response_signal(&self, signal_id: SignalId, response: &Json) -> Result<SignalRequest, InteractionError> {
        let invalid = |detail: String| InteractionError::new(ErrorKind::InvalidToolInputRequest, detail);
        let normalized = Payload::from_json(response.clone()).map_err(|e| invalid(format!("input response: {e}")))?;
        self.schema.validate(normalized.value()).map_err(|v| invalid(format!("input response: {}", v.diagnostic())))?;
        if self.budget {
            BudgetAnswer::from_json(normalized.value()).map_err(|e| invalid(format!("budget answer: {e}")))?;
        }
        tool_input_response_signal(signal_id, self.wait_id.clone(), normalized.value())
    }
}

/// Every current tool input wait of `snapshot`, in snapshot order. A Waiting Process whose
/// committed state is a tool child must be in `waiting_input` with the snapshot's current
/// WaitId equal to its state's; otherwise [`ErrorKind::InvalidPendingToolInput`].
pub fn pending_tool_inputs(snapshot: &TreeSnapshot) -> Result<Vec<PendingToolInput>, InteractionError> {
    let invalid = |detail: String| InteractionError::new(ErrorKind::InvalidPendingToolInput, detail);
    let mut pending = Vec::new();
    for process in snapshot.processes() {
        if process.status != Status::Waiting {
            continue;
        }
        if process.committed_state.kind.as_str() == ParentState::KIND {
            if let Some(question) = budget_question(&process.committed_state.payload).map_err(|e| invalid(format!("process {}: {e}", process.id)))? {
                let wait_id = question.wait_id.clone().ok_or_else(|| invalid(format!("process {} asks without a wait", process.id)))?;
                if process.current_wait_id.as_ref() != Some(&wait_id) {
                    return Err(invalid(format!("process {} is parked on another wait than its budget question", process.id)));
                }
                let request = question.question.input_request().map_err(invalid)?;
                pending.push(PendingToolInput::new(&process.id, wait_id, &request, true));
            }
            continue;
        }
        if process.committed_state.kind.as_str() != ToolCallState::KIND {
            continue;
        }
        let state = ToolCallState::from_execution_state(&process.committed_state)
            .map_err(|e| invalid(format!("process {}: {}", process.id, e.detail())))?;
        if state.phase != ToolChildPhase::WaitingInput {
            return Err(invalid(format!("waiting tool child {} is in phase {}", process.id, state.phase)));
        }
        let (Some(wait_id), Some(checkpoint)) = (state.wait_id, state.checkpoint) else {
            return Err(invalid(format!("waiting tool child {} holds no input wait", process.id)));
        };
        if process.current_wait_id.as_ref() != Some(&wait_id) {
            return Err(invalid(format!("waiting tool child {} is parked on another wait", process.id)));
        }
        pending.push(PendingToolInput::new(&process.id, wait_id, &checkpoint.input_request, false));
    }
    Ok(pending)
}

/// The budget question an Interaction state asks in `waiting_budget_answer`, read from its
/// payload's `phase` and `budget_question` members only (a parent waiting on its children is
/// not decoded whole on every head).
fn budget_question(payload: &Payload) -> Result<Option<PendingBudgetQuestion>, String> {
    let state = payload.value();
    if state.get("phase").and_then(Json::as_str) != Some(Phase::WaitingBudgetAnswer.as_str()) {
        return Ok(None);
    }
    let member = state.get("budget_question").ok_or("waiting_budget_answer without a budget_question")?;
    PendingBudgetQuestion::from_json(member).map(Some).map_err(|e| format!("budget_question: {e}"))
}
