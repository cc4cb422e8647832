//! The Dispatcher port: executes opaque dispatcher Effects.
//!
//! The kernel copies, orders, identifies and routes an Effect's payload but never inspects it.
//! A dispatch returns a definite settlement (`succeeded` or `failed`: the status, not the
//! payload, owns success; refusing a request before any external work is a definite `failed`)
//! or an error, which means the outcome cannot be proven: the kernel records the Effect as
//! Unknown and never retries or settles it on its own.

use super::capability::CapabilitySet;
use super::deployment::DeploymentRef;
use super::effect::{EffectPhase, Settlement};
use super::failure::{codes, Failure};
use super::ids::{AttemptId, EffectId, IncarnationId, ProcessId};
use super::relation::Relation;
use crate::env::{BoxFuture, CancelToken};
use super::segment::Segment;
use crate::json::Payload;
use std::sync::Arc;

/// Whether re-dispatching the same EffectId is provably the same logical operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplayPolicy {
    /// Repeating might be a second logical operation: a restored pending attempt becomes
    /// Unknown and only a host can settle it.
    Never,
    /// The dispatcher can prove idempotency under the same EffectId.
    SameIdentity,
}

/// The dispatcher's pure, deterministic answer for one Effect (asked again every time).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DispatchPolicy {
    pub replay: ReplayPolicy,
    pub required_capabilities: CapabilitySet,
}

impl DispatchPolicy {
    /// Replay never, no capabilities required.
    pub fn never() -> DispatchPolicy {
        DispatchPolicy { replay: ReplayPolicy::Never, required_capabilities: CapabilitySet::default() }
    }
}

/// Everything a dispatcher may know about one attempt.
#[derive(Clone, Debug)]
pub struct EffectRequest {
    /// The writer that dispatched (correlation only; never an idempotency key).
    pub incarnation: IncarnationId,
    pub deployment_ref: DeploymentRef,
    pub process_id: ProcessId,
    pub relation: Relation,
    pub step_sequence: u64,
    pub batch_index: u32,
    pub effect_id: EffectId,
    /// The physical attempt; `None` when the request is rebuilt from a snapshot.
    pub attempt_id: Option<AttemptId>,
    pub payload: Payload,
    /// The segments of the state the declaring Step produced (its prepared candidate), in
    /// order and shared, so an Effect can name its Process's append-only history (a model
    /// call names its working context) instead of copying it into the payload. Empty for a
    /// state without segments.
    pub segments: Vec<Arc<Segment>>,
}

/// Best-effort streaming output of one attempt; returns whether the delta was accepted.
pub type DeltaSink = Arc<dyn Fn(Payload) -> bool + Send + Sync>;

/// What the dispatch call gets besides the request.
#[derive(Clone)]
pub struct DispatchContext {
    /// Cancelled when terminal intent reaches the Process or an ancestor. The kernel still
    /// collects the outcome.
    pub cancel: CancelToken,
    /// Present when someone listens for deltas.
    pub deltas: Option<DeltaSink>,
}

/// "Outcome not provable." Every variant becomes an Unknown settlement with a bounded
/// diagnostic; error text never crosses the persistence boundary unbounded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DispatchError {
    #[error("dispatch failed: {0}")]
    Failed(String),
    #[error("dispatch canceled")]
    Canceled,
    #[error("dispatch deadline exceeded")]
    DeadlineExceeded,
    #[error("dispatch returned an invalid settlement: {0}")]
    InvalidSettlement(String),
    #[error("dispatch panicked: {0}")]
    Panicked(String),
}

impl DispatchError {
    /// The bounded diagnostic recorded next to the Unknown.
    pub fn diagnostic(&self) -> Failure {
        let code = match self {
            DispatchError::Failed(_) => codes::DISPATCH_FAILED,
            DispatchError::Canceled => codes::DISPATCH_CANCELED,
            DispatchError::DeadlineExceeded => codes::DISPATCH_DEADLINE,
            DispatchError::InvalidSettlement(_) => codes::DISPATCH_SETTLEMENT_INVALID,
            DispatchError::Panicked(_) => codes::DISPATCH_PANICKED,
        };
        Failure::new(code, &self.to_string())
    }
}

/// Normalizes a dispatch outcome into the phase to record plus its diagnostic.
pub fn normalize_outcome(outcome: Result<Settlement, DispatchError>) -> (EffectPhase, Option<Failure>) {
    match outcome {
        Ok(s) => (EffectPhase::Settled(s), None),
        Err(e) => (EffectPhase::Unknown, Some(e.diagnostic())),
    }
}

/// Executes the dispatcher Effects of one Deployment.
pub trait Dispatcher: Send + Sync + 'static {
    /// Pure and deterministic for equivalent Effects.
    fn policy(&self, effect: &Payload) -> DispatchPolicy;

    /// Runs one attempt. Must return in bounded time and never mutate an Execution.
    /// A returned Settlement is definite; an error means Unknown.
    fn dispatch<'a>(
        &'a self,
        request: EffectRequest,
        cx: DispatchContext,
    ) -> BoxFuture<'a, Result<Settlement, DispatchError>>;
}
