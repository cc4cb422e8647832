//! The phases of the parent Interaction Execution. There is no failed phase: a failure is a
//! `Fail` transition and the state keeps its last valid shape.

use crate::json::{DecodeError, FromJson, Json, ToJson};

/// Where the parent state machine stands. There is no failed phase: a failure is a `Fail`
/// transition and the state keeps its last valid shape (and must still restore).
///
/// Wire form: `"ready_model" | "awaiting_model" | "awaiting_child_starts" |
/// "awaiting_child_wait_open" | "waiting_children" | "awaiting_budget_wait_open" |
/// "waiting_budget_answer" | "completed"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    /// About to request the next model call (transient: at Start, restore, or inside a Step).
    ReadyModel,
    /// One `model_call` Effect is in flight.
    AwaitingModel,
    /// StartChild Effects of the current batch are in flight.
    AwaitingChildStarts,
    /// The WaitForChildren Effect is in flight.
    AwaitingChildWaitOpen,
    /// Parked on the child wait recorded in the batch.
    WaitingChildren,
    /// A budget question's wait Effect is in flight (`budget_question` holds it).
    AwaitingBudgetWaitOpen,
    /// Parked on the budget question's wait until the host answers.
    WaitingBudgetAnswer,
    /// Terminal; `final_output` holds the Output.
    Completed,
}

impl Phase {
    pub const ALL: [Phase; 8] = [
        Phase::ReadyModel,
        Phase::AwaitingModel,
        Phase::AwaitingChildStarts,
        Phase::AwaitingChildWaitOpen,
        Phase::WaitingChildren,
        Phase::AwaitingBudgetWaitOpen,
        Phase::WaitingBudgetAnswer,
        Phase::Completed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Phase::ReadyModel => "ready_model",
            Phase::AwaitingModel => "awaiting_model",
            Phase::AwaitingChildStarts => "awaiting_child_starts",
            Phase::AwaitingChildWaitOpen => "awaiting_child_wait_open",
            Phase::WaitingChildren => "waiting_children",
            Phase::AwaitingBudgetWaitOpen => "awaiting_budget_wait_open",
            Phase::WaitingBudgetAnswer => "waiting_budget_answer",
            Phase::Completed => "completed",
        }
    }

    pub fn from_name(name: &str) -> Option<Phase> {
        Phase::ALL.into_iter().find(|p| p.as_str() == name)
    }

    /// The three phases in which a tool round with a child batch exists.
    pub fn is_child_phase(self) -> bool {
        matches!(self, Phase::AwaitingChildStarts | Phase::AwaitingChildWaitOpen | Phase::WaitingChildren)
    }

    /// The two phases in which a budget question is asked.
    pub fn is_budget_phase(self) -> bool {
        matches!(self, Phase::AwaitingBudgetWaitOpen | Phase::WaitingBudgetAnswer)
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ToJson for Phase {
    fn to_json(&self) -> Json {
        Json::str(self.as_str())
    }
}

impl FromJson for Phase {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let name = crate::json::decode_str(value)?;
        Phase::from_name(name).ok_or_else(|| DecodeError::invalid("unknown interaction phase"))
    }
}
