//! The tool round and its active child batch (`tool_round` in the parent state).

use crate::chat::{Response, ToolCall, ToolResult};
use crate::interaction::error::InteractionError;
use crate::interaction::ids::child_wait_key;
use crate::interaction::protocol::SettledToolResult;
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ToJson};
use crate::kernel::ids::{ChildKey, ProcessId, WaitId, WaitKey};

/// The assistant response whose calls are being executed, and the settled prefix.
///
/// Wire form: `{"response":Response,"results":[ToolResult],"direct_result_eligible":B,
/// "child_batch"?:ChildBatch}`; `results` is always present (`[]` before the first fold).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolRound {
    pub response: Response,
    /// Settled results in call order: `results[i]` answers call `i`.
    pub results: Vec<ToolResult>,
    /// Whether the round can still complete with direct tool results: cleared by an
    /// inline-rejected unknown tool, a delegate batch, or any result that is not direct.
    pub direct_result_eligible: bool,
    /// The active segment; required in every child phase (a Step may hold a round without
    /// one only while it runs).
    pub child_batch: Option<ChildBatch>,
}

impl ToolRound {
    /// A fresh round: no results, direct-eligible, no batch yet.
    pub fn new(response: Response) -> ToolRound {
        ToolRound { response, results: Vec::new(), direct_result_eligible: true, child_batch: None }
    }

    /// The calls of the response, in part order.
    pub fn calls(&self) -> Vec<&ToolCall> {
        self.response.tool_calls()
    }

    /// The index of the first unsettled call (= the first call of the active segment).
    pub fn next_index(&self) -> usize {
        self.results.len()
    }

    /// The key of the next child wait of the active batch:
    /// `interaction.children:<model_call_sequence>:<next_index>:<settled invocations>`.
    pub fn child_wait_key(&self, model_call_sequence: u32) -> Result<WaitKey, InteractionError> {
        let settled = self.child_batch.as_ref().map_or(0, ChildBatch::settled_count);
        let count = |n: usize| u32::try_from(n).map_err(|_| InteractionError::invalid_state("tool round too large"));
        child_wait_key(model_call_sequence, count(self.next_index())?, count(settled)?)
    }
}

impl ToJson for ToolRound {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .field("response", &self.response)
            .field("results", &self.results)
            .field("direct_result_eligible", &self.direct_result_eligible)
            .opt_field("child_batch", self.child_batch.as_ref())
            .build()
    }
}

impl FromJson for ToolRound {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let round = ToolRound {
            response: r.required("response")?,
            results: r.required("results")?,
            direct_result_eligible: r.required("direct_result_eligible")?,
            child_batch: r.optional("child_batch")?,
        };
        r.finish()?;
        Ok(round)
    }
}

/// Whether a batch runs ordinary tool children or Delegate children.
/// Wire form: `"tool" | "delegate"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum BatchKind {
    Tool,
    Delegate,
}

impl BatchKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BatchKind::Tool => "tool",
            BatchKind::Delegate => "delegate",
        }
    }
}

impl ToJson for BatchKind {
    fn to_json(&self) -> Json {
        Json::str(self.as_str())
    }
}

impl FromJson for BatchKind {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        match crate::json::decode_str(value)? {
            "tool" => Ok(BatchKind::Tool),
            "delegate" => Ok(BatchKind::Delegate),
            _ => Err(DecodeError::invalid("batch kind must be tool or delegate")),
        }
    }
}

/// The active segment of a round: one invocation per call, starting at the round's
/// [`ToolRound::next_index`].
///
/// Wire form: `{"kind":BatchKind,"invocations":[BatchInvocation],"next_start_index":u32,
/// "wait_id"?:WaitId}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildBatch {
    pub kind: BatchKind,
    /// `invocations[j]` belongs to call `next_index + j`.
    pub invocations: Vec<BatchInvocation>,
    /// How many invocations are planned (their keys assigned); the rest carry no state.
    pub next_start_index: u32,
    /// The child wait the parent is parked on; only in `waiting_children`.
    pub wait_id: Option<WaitId>,
}

impl ChildBatch {
    /// Planned invocations waiting for their start result (no process, no result).
    pub fn pending_count(&self) -> usize {
        self.planned().filter(|i| i.is_pending()).count()
    }

    /// Started children without a result yet (a child waiting for input counts).
    pub fn active_count(&self) -> usize {
        self.invocations.iter().filter(|i| i.is_active()).count()
    }

    /// Invocations with a result.
    pub fn settled_count(&self) -> usize {
        self.invocations.iter().filter(|i| i.result.is_some()).count()
    }

    /// The planned invocations (index < `next_start_index`).
    pub fn planned(&self) -> impl Iterator<Item = &BatchInvocation> {
        let planned = usize::try_from(self.next_start_index).unwrap_or(usize::MAX);
        self.invocations.iter().take(planned)
    }

    /// The process ids of active children, in invocation order.
    pub fn active_children(&self) -> Vec<ProcessId> {
        self.invocations.iter().filter(|i| i.is_active()).filter_map(|i| i.process_id.clone()).collect()
    }
}

impl ToJson for ChildBatch {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .field("kind", &self.kind)
            .field("invocations", &self.invocations)
            .field("next_start_index", &self.next_start_index)
            .opt_field("wait_id", self.wait_id.as_ref())
            .build()
    }
}

impl FromJson for ChildBatch {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let batch = ChildBatch {
            kind: r.required("kind")?,
            invocations: r.required("invocations")?,
            next_start_index: r.required("next_start_index")?,
            wait_id: r.optional("wait_id")?,
        };
        r.finish()?;
        Ok(batch)
    }
}

/// One call of the active segment.
///
/// Wire form: `{"child_key"?:ChildKey,"process_id"?:ProcessId,"result"?:SettledToolResult}`
/// (`{}` before it is planned).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BatchInvocation {
    /// The derived child key, assigned when planned. Absent for a delegate
    /// rejected before starting.
    pub child_key: Option<ChildKey>,
    /// The started child.
    pub process_id: Option<ProcessId>,
    /// The settled result, kept until the batch folds.
    pub result: Option<SettledToolResult>,
    /// Mutation `FoldInCompletionOrder` only: the 1-based rank of this result's arrival in
    /// the batch (`"completed"` on the wire; never written while the mutation is off).
    #[cfg(feature = "mutations")]
    pub completed: Option<u32>,
}

impl BatchInvocation {
    /// Planned but neither started nor settled. (Meaningful for planned invocations only.)
    pub fn is_pending(&self) -> bool {
        self.process_id.is_none() && self.result.is_none()
    }
    /// Started and not yet settled.
    pub fn is_active(&self) -> bool {
        self.process_id.is_some() && self.result.is_none()
    }
    /// Carries no state at all (what an unplanned invocation must be).
    pub fn is_blank(&self) -> bool {
        self.child_key.is_none() && self.process_id.is_none() && self.result.is_none()
    }
}

impl ToJson for BatchInvocation {
    fn to_json(&self) -> Json {
        let b = ObjectBuilder::new()
            .opt_field("child_key", self.child_key.as_ref())
            .opt_field("process_id", self.process_id.as_ref())
            .opt_field("result", self.result.as_ref());
        #[cfg(feature = "mutations")]
        let b = b.opt_field("completed", self.completed.as_ref());
        b.build()
    }
}

impl FromJson for BatchInvocation {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let invocation = BatchInvocation {
            child_key: r.optional("child_key")?,
            process_id: r.optional("process_id")?,
            result: r.optional("result")?,
            #[cfg(feature = "mutations")]
            completed: r.optional("completed")?,
        };
        r.finish()?;
        Ok(invocation)
    }
}
