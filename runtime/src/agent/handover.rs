//! The hand-over point of upgrades and continue-as-new: the model dispatcher of an agent,
//! gated at the run root's model calls.
//!
//! A run's root reaches a model call only when nothing else of it is in flight: every tool
//! call of the last turn has its result and every steer is applied. That is where a run may
//! continue in another run without losing or repeating work. When a hand-over is due (the
//! host asked for one, or the agent's [`ContinueAsNew`] threshold passed), the gate settles
//! the call itself, without calling the model, as a host failure whose message names the
//! successor; the Interaction then ends the run with that message. The settlement is a
//! function of the request (the threshold) or of the host's request, so a call re-issued after
//! a restore is gated the same way.

use super::continue_as_new::{context_bytes, ContinueAsNew};
use super::run::RunId;
use super::tracker::Hub;
use crate::env::BoxFuture;
use crate::interaction::protocol::{ModelCallEffect, ModelResult};
use crate::interaction::wire::Wire;
use crate::json::Payload;
use crate::kernel::dispatcher::{DispatchContext, DispatchError, DispatchPolicy, Dispatcher, EffectRequest};
use crate::kernel::effect::Settlement;
use crate::kernel::ids::ProcessId;
use crate::kernel::result::ProcessResult;
use std::sync::Arc;

/// What the host asked a live run to hand over to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HandoverRequest {
    /// The version the successor runs under.
    pub(crate) version: String,
    /// Why (`upgrade`, `continue-as-new requested`).
    pub(crate) reason: String,
}

const PREFIX: &str = "continued as run ";
const VERSION: &str = " under version ";

/// The run that continues `run`: derived from its id, so a repeated or resumed hand-over
/// names the same successor and can never start a second one.
pub fn successor_id(run: &RunId) -> RunId {
    RunId::from_key(&format!("keel.successor\0{run}"))
}

/// The failure message of a run that handed over.
pub(crate) fn message(successor: &RunId, reason: &str, version: &str) -> String {
    format!("{PREFIX}{successor} ({reason}){VERSION}{version}")
}

/// A hand-over read back from a run's end: the successor, the reason, the version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HandedOver {
    pub(crate) successor: RunId,
    pub(crate) reason: String,
    pub(crate) version: String,
}

/// The hand-over a finished run's result records, if it ended by one (a host failure whose
/// message is a hand-over message naming this run's own successor).
pub(crate) fn handed_over(run: &ProcessId, result: &ProcessResult) -> Option<HandedOver> {
    let failure = result.termination.failure.as_ref()?;
    if failure.code.as_str() != crate::interaction::codes::HOST_FAILED.name() {
        return None;
    }
    parse(run, failure.message.as_str())
}

/// Parses a hand-over message of `run` (keel-store reads it too).
pub fn parse_message(run: &ProcessId, text: &str) -> Option<(RunId, String, String)> {
    parse(run, text).map(|h| (h.successor, h.reason, h.version))
}

fn parse(run: &ProcessId, text: &str) -> Option<HandedOver> {
    let rest = text.strip_prefix(PREFIX)?;
    let (id, rest) = rest.split_once(" (")?;
    let successor: RunId = id.parse().ok()?;
    if successor != successor_id(&RunId::from_process(run.clone())) {
        return None; // a host failure that only looks like one
    }
    let (reason, version) = rest.rsplit_once(&format!("){VERSION}"))?;
    Some(HandedOver { successor, reason: reason.to_owned(), version: version.to_owned() })
}

/// The agent's model dispatcher, gated at the run root's model calls.
pub(crate) struct HandoverGate {
    pub(crate) inner: Arc<dyn Dispatcher>,
    pub(crate) hub: Arc<Hub>,
    pub(crate) policy: Option<ContinueAsNew>,
    pub(crate) version: String,
}

impl HandoverGate {
    /// The hand-over due at this call, if any: only a run's root hands over (a delegate's
    /// calls belong to its parent's run).
    fn due(&self, request: &EffectRequest) -> Option<(String, String)> {
        if request.process_id != request.relation.root_id {
            return None;
        }
        let asked = self.hub.get(&request.process_id).and_then(|run| run.lock().handover.clone());
        if let Some(asked) = asked {
            return Some((asked.reason, asked.version));
        }
        let policy = self.policy?;
        let effect = ModelCallEffect::from_payload(&request.payload).ok()?;
        let bytes = || effect.request(&request.segments).map(|r| context_bytes(&r.messages)).unwrap_or(0);
        policy.due(effect.model_call_sequence, bytes).map(|reason| (reason, self.version.clone()))
    }
}

impl Dispatcher for HandoverGate {
    fn policy(&self, effect: &Payload) -> DispatchPolicy {
        self.inner.policy(effect)
    }

    fn dispatch<'a>(&'a self, request: EffectRequest, cx: DispatchContext) -> BoxFuture<'a, Result<Settlement, DispatchError>> {
        let Some((reason, version)) = self.due(&request) else { return self.inner.dispatch(request, cx) };
        let run = RunId::from_process(request.process_id.clone());
        let text = message(&successor_id(&run), &reason, &version);
        Box::pin(async move {
            ModelResult::host_error(&text).to_settlement().map_err(|e| DispatchError::InvalidSettlement(e.to_string()))
        })
    }
}
