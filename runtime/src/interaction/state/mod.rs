//! The serialized execution states: the parent Interaction ([`ParentState`], kind
//! `"interaction"`) and one tool child per call ([`ToolCallState`], kind
//! `"interaction.tool_call"`).
//!
//! Both decode strictly (unknown members rejected at every level, chat types included) and
//! re-encode canonically, so restore → snapshot is byte-identical for every state the
//! strategy wrote (and a fixed point from the first re-encoding for any accepted state, see
//! [`super::wire`]). The parent's validation is split in two:
//! [`ParentState::validate_structure`] (everything the state alone decides; runs on decode)
//! and [`ParentState::validate_against`] (rules needing the Definition's configuration,
//! through the [`StateRules`] extension point).

mod context;
mod model_record;
mod parent;
mod pending_steer;
mod phase;
mod round;
mod rules;
mod structure;
mod tool_child;

#[cfg(test)]
mod tests;

pub use context::{ContextHead, WorkingContext};
#[cfg(test)]
pub(crate) use context::SealedMessages;
pub use model_record::{ModelRecord, ModelSwitch, RunModel};
pub use parent::ParentState;
pub use pending_steer::PendingSteer;
pub use phase::Phase;
pub use round::{BatchInvocation, BatchKind, ChildBatch, ToolRound};
pub use rules::StateRules;
pub use tool_child::{ToolCallState, ToolChildPhase};

use super::error::InteractionError;
use super::wire::Wire;
use crate::json::Payload;
use crate::kernel::waist::ExecutionState;
use crate::text::QualifiedName;

fn state_kind(kind: &str) -> Result<QualifiedName, InteractionError> {
    QualifiedName::parse(kind).map_err(|e| InteractionError::invalid_state(format!("state kind: {e}")))
}

fn encode_state<T: Wire>(kind: &str, state: &T) -> Result<ExecutionState, InteractionError> {
    let payload: Payload = state.to_payload()?;
    Ok(ExecutionState::new(state_kind(kind)?, payload))
}

fn decode_state<T: Wire>(kind: &str, state: &ExecutionState) -> Result<T, InteractionError> {
    if state.kind.as_str() != kind {
        return Err(InteractionError::invalid_state(format!(
            "state kind `{}`, expected `{kind}`",
            crate::interaction::protocol::excerpt(state.kind.as_str())
        )));
    }
    T::from_payload(&state.payload)
}
