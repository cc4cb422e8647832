//! The tool child snapshot (kind `"interaction.tool_call"`): one Process per
//! tool call, owning its Effect settlement and its input continuation.

use crate::interaction::error::{ErrorKind, InteractionError};
use crate::interaction::ids::tool_input_wait_key;
use crate::interaction::protocol::{SettledToolResult, ToolCallInput, ToolCheckpoint};
use crate::interaction::wire::Wire;
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ToJson};
use crate::kernel::ids::{WaitId, WaitKey};
use crate::kernel::waist::ExecutionState;

/// Where a tool child stands.
///
/// Wire form: `"ready" | "awaiting_result" | "awaiting_wait_open" | "waiting_input" | "completed"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ToolChildPhase {
    /// Started; the first `tool_call` Effect is not yet declared.
    Ready,
    /// A `tool_call` Effect is in flight.
    AwaitingResult,
    /// Checkpointed; the input wait's opening is awaited.
    AwaitingWaitOpen,
    /// Parked on the input wait.
    WaitingInput,
    /// Terminal; `result` is the child's Output.
    Completed,
}

impl ToolChildPhase {
    pub const ALL: [ToolChildPhase; 5] = [
        ToolChildPhase::Ready,
        ToolChildPhase::AwaitingResult,
        ToolChildPhase::AwaitingWaitOpen,
        ToolChildPhase::WaitingInput,
        ToolChildPhase::Completed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ToolChildPhase::Ready => "ready",
            ToolChildPhase::AwaitingResult => "awaiting_result",
            ToolChildPhase::AwaitingWaitOpen => "awaiting_wait_open",
            ToolChildPhase::WaitingInput => "waiting_input",
            ToolChildPhase::Completed => "completed",
        }
    }

    pub fn from_name(name: &str) -> Option<ToolChildPhase> {
        ToolChildPhase::ALL.into_iter().find(|p| p.as_str() == name)
    }
}

impl std::fmt::Display for ToolChildPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ToJson for ToolChildPhase {
    fn to_json(&self) -> Json {
        Json::str(self.as_str())
    }
}

impl FromJson for ToolChildPhase {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let name = crate::json::decode_str(value)?;
        ToolChildPhase::from_name(name).ok_or_else(|| DecodeError::invalid("unknown tool child phase"))
    }
}

/// The complete state of one tool child.
///
/// Wire form (kind [`ToolCallState::KIND`]): `{"phase":ToolChildPhase,"call":ToolCallInput,
/// "checkpoint"?:ToolCheckpoint,"wait_id"?:WaitId,"result"?:SettledToolResult}`. The stored
/// call is the original input and never carries a continuation (its codec rejects one).
///
/// Valid when the call, checkpoint and result are valid, the result answers the call, and:
///
/// | phase | checkpoint | wait_id | result |
/// |---|---|---|---|
/// | `ready` | absent | absent | absent |
/// | `awaiting_result` | any | absent | absent |
/// | `awaiting_wait_open` | present | absent | absent |
/// | `waiting_input` | present | present | absent |
/// | `completed` | absent | absent | present |
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolCallState {
    pub phase: ToolChildPhase,
    pub call: ToolCallInput,
    /// The latest pause; kept while a resumed call runs (the next pause counts from it).
    pub checkpoint: Option<ToolCheckpoint>,
    pub wait_id: Option<WaitId>,
    pub result: Option<SettledToolResult>,
}

impl ToolCallState {
    /// The state kind.
    pub const KIND: &'static str = "interaction.tool_call";

    /// The state created by `Start`.
    pub fn start(call: ToolCallInput) -> ToolCallState {
        ToolCallState { phase: ToolChildPhase::Ready, call, checkpoint: None, wait_id: None, result: None }
    }

    /// The wait key of the current checkpoint's input wait.
    pub fn input_wait_key(&self) -> Result<WaitKey, InteractionError> {
        let checkpoint =
            self.checkpoint.as_ref().ok_or_else(|| InteractionError::invalid_state("tool child has no checkpoint"))?;
        tool_input_wait_key(self.call.model_call_sequence, &self.call.call.id, checkpoint.pause_count)
    }

    /// Validates, then encodes as an [`ExecutionState`] of kind `"interaction.tool_call"`.
    pub fn to_execution_state(&self) -> Result<ExecutionState, InteractionError> {
        super::encode_state(Self::KIND, self)
    }

    /// Checks the kind, decodes strictly and validates.
    pub fn from_execution_state(state: &ExecutionState) -> Result<ToolCallState, InteractionError> {
        super::decode_state(Self::KIND, state)
    }
}

impl Wire for ToolCallState {
    const INVALID: ErrorKind = ErrorKind::InvalidExecutionState;
    const WHAT: &'static str = "tool call state";

    fn validate(&self) -> Result<(), InteractionError> {
        let invalid = |detail: String| InteractionError::invalid_state(format!("tool call state: {detail}"));
        self.call.validate().map_err(|e| invalid(e.detail().to_owned()))?;
        if let Some(checkpoint) = &self.checkpoint {
            checkpoint.validate().map_err(|e| invalid(e.detail().to_owned()))?;
        }
        if let Some(result) = &self.result {
            result.validate().map_err(|e| invalid(e.detail().to_owned()))?;
            if !result.result.answers(&self.call.call) {
                return Err(invalid("result does not answer the call".into()));
            }
        }
        let (checkpoint, wait, result) = (self.checkpoint.is_some(), self.wait_id.is_some(), self.result.is_some());
        let ok = match self.phase {
            ToolChildPhase::Ready => !checkpoint && !wait && !result,
            ToolChildPhase::AwaitingResult => !wait && !result,
            ToolChildPhase::AwaitingWaitOpen => checkpoint && !wait && !result,
            ToolChildPhase::WaitingInput => checkpoint && wait && !result,
            ToolChildPhase::Completed => !checkpoint && !wait && result,
        };
        if ok {
            Ok(())
        } else {
            Err(invalid(format!(
                "phase {} does not allow checkpoint={checkpoint}, wait_id={wait}, result={result}",
                self.phase
            )))
        }
    }
}

impl ToJson for ToolCallState {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .field("phase", &self.phase)
            .field("call", &self.call)
            .opt_field("checkpoint", self.checkpoint.as_ref())
            .opt_field("wait_id", self.wait_id.as_ref())
            .opt_field("result", self.result.as_ref())
            .build()
    }
}

impl FromJson for ToolCallState {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let state = ToolCallState {
            phase: r.required("phase")?,
            call: r.required("call")?,
            checkpoint: r.optional("checkpoint")?,
            wait_id: r.optional("wait_id")?,
            result: r.optional("result")?,
        };
        r.finish()?;
        state.validate()?;
        Ok(state)
    }
}
