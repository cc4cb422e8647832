//! The active Delegate children of a parent Interaction Process: the Delegate calls of the
//! current delegate batch that have a child Process, in call order. A Process that is not an
//! Interaction parent, has no child batch, or runs a tool batch has none.
//!
//! Hosts use this to attribute a model ToolCall to the child Process running it. Only
//! Interaction-owned state is interpreted: the result holds no Engine handle, persistence
//! identity, or Host metadata.
//!
//! Three entry points, from least to most trusted input: [`active_delegate_children_from_snapshot`]
//! (committed tree snapshot bytes, fully validated on decode), [`active_delegate_children_in`]
//! (an already validated [`TreeSnapshot`]) and [`active_delegate_children`] (one Process
//! record taken from such a snapshot).

use super::error::InteractionError;
use super::ids::delegate_child_key;
use super::state::{BatchKind, ParentState};
use crate::chat::ToolCall;
use crate::kernel::ids::{ChildKey, ProcessId};
use crate::kernel::process::Process;
use crate::kernel::snapshot::TreeSnapshot;

/// One model ToolCall attributed to its currently active Delegate child Process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActiveDelegateChild {
    model_call_sequence: u32,
    tool_call_index: u32,
    tool_call: ToolCall,
    child_key: ChildKey,
    process_id: ProcessId,
}

impl ActiveDelegateChild {
    /// The one-based model call that requested the child.
    pub fn model_call_sequence(&self) -> u32 {
        self.model_call_sequence
    }
    /// The zero-based position of the ToolCall in the model response (absolute, not within
    /// the batch).
    pub fn tool_call_index(&self) -> u32 {
        self.tool_call_index
    }
    /// The exact model ToolCall the child runs.
    pub fn tool_call(&self) -> &ToolCall {
        &self.tool_call
    }
    /// The parent-scoped logical child identity.
    pub fn child_key(&self) -> &ChildKey {
        &self.child_key
    }
    /// The Engine-minted child Process identity.
    pub fn process_id(&self) -> &ProcessId {
        &self.process_id
    }
    /// Whether the child key is the one [`delegate_child_key`] derives from the sequence and the
    /// ToolCall.
    pub fn is_valid(&self) -> bool {
        delegate_child_key(self.model_call_sequence, &self.tool_call).is_ok_and(|key| key == self.child_key)
    }
}

/// [`active_delegate_children_in`] over canonical tree snapshot bytes (as a committer stores
/// them). Bytes that do not decode and validate as a tree snapshot, or a `process` the tree
/// does not hold, are [`super::ErrorKind::InvalidExecutionState`].
pub fn active_delegate_children_from_snapshot(
    tree_snapshot: &[u8],
    process: &ProcessId,
) -> Result<Option<Vec<ActiveDelegateChild>>, InteractionError> {
    let snapshot = TreeSnapshot::decode(tree_snapshot)
        .map_err(|e| InteractionError::invalid_state(format!("invalid tree snapshot: {e}")))?;
    active_delegate_children_in(&snapshot, process)
}

/// The active Delegate children of the Process `process` of `snapshot` (see
/// [`active_delegate_children`]); a Process the tree does not hold is
/// [`super::ErrorKind::InvalidExecutionState`].
pub fn active_delegate_children_in(
    snapshot: &TreeSnapshot,
    process: &ProcessId,
) -> Result<Option<Vec<ActiveDelegateChild>>, InteractionError> {
    let record = snapshot
        .process(process)
        .ok_or_else(|| InteractionError::invalid_state(format!("the tree snapshot holds no process {process}")))?;
    active_delegate_children(record)
}

/// The Delegate children of `process`'s current batch that have a Process, in ToolCall order.
///
/// `Ok(None)` (found = false) when the committed state is not an Interaction parent, holds no
/// child batch, or its batch runs tool children. A parent state that does not decode or
/// validate is [`super::ErrorKind::InvalidExecutionState`].
pub fn active_delegate_children(process: &Process) -> Result<Option<Vec<ActiveDelegateChild>>, InteractionError> {
    if process.committed_state.kind.as_str() != ParentState::KIND {
        return Ok(None);
    }
    let state = ParentState::from_execution_state(&process.committed_state)
        .map_err(|e| e.context(&format!("process {}", process.id)))?;
    let Some(round) = &state.tool_round else {
        return Ok(None);
    };
    let Some(batch) = round.child_batch.as_ref().filter(|b| b.kind == BatchKind::Delegate) else {
        return Ok(None);
    };
    let calls = round.calls();
    let first = round.next_index();
    let mut children = Vec::new();
    for (j, invocation) in batch.invocations.iter().enumerate() {
        let Some(process_id) = &invocation.process_id else {
            continue;
        };
        let index = first.saturating_add(j);
        // Validation guarantees both; a miss is still an error, never a panic.
        let call =
            calls.get(index).ok_or_else(|| InteractionError::invalid_state("delegate invocation without a call"))?;
        let child_key = invocation
            .child_key
            .clone()
            .ok_or_else(|| InteractionError::invalid_state("started delegate invocation without a child_key"))?;
        let tool_call_index =
            u32::try_from(index).map_err(|_| InteractionError::invalid_state("tool call index too large"))?;
        children.push(ActiveDelegateChild {
            model_call_sequence: state.model_call_count,
            tool_call_index,
            tool_call: (*call).clone(),
            child_key,
            process_id: process_id.clone(),
        });
    }
    Ok(Some(children))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn child(sequence: u32, call: ToolCall, key_of: &ToolCall) -> ActiveDelegateChild {
        ActiveDelegateChild {
            model_call_sequence: sequence,
            tool_call_index: 0,
            child_key: delegate_child_key(1, key_of).unwrap(),
            tool_call: call,
            process_id: ProcessId::root_from_hex(&format!("{:032x}", 7)).unwrap(),
        }
    }

    #[test]
    fn validity_re_derives_the_key_from_sequence_and_call() {
        let call = ToolCall::new("u1", "upper", r#"{"text":"a"}"#);
        assert!(child(1, call.clone(), &call).is_valid());
        // Another call's key, another sequence, another delegate name: all invalid.
        assert!(!child(1, call.clone(), &ToolCall::new("u2", "upper", "{}")).is_valid());
        assert!(!child(2, call.clone(), &call).is_valid());
        assert!(!child(0, call.clone(), &call).is_valid());
        assert!(!child(1, ToolCall::new("u1", "lower", r#"{"text":"a"}"#), &call).is_valid());
        // Arguments are not part of the key.
        assert!(child(1, ToolCall::new("u1", "upper", "{}"), &call).is_valid());
    }
}
