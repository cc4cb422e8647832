//! The simulated world's Dispatcher. In direct mode the driver is the executor: it performs
//! every Dispatch action against the world itself (ledger, seeded outcome), so only `policy`
//! is consulted by the kernel. The policy is carried by the payload (`"replay"`), which keeps
//! it pure and deterministic per Effect as the contract requires.

use keel::env::BoxFuture;
use keel::json::{Json, ObjectBuilder, Payload};
use keel::kernel::dispatcher::{DispatchContext, DispatchError, DispatchPolicy, Dispatcher, EffectRequest, ReplayPolicy};
use keel::kernel::effect::Settlement;

/// The payload of the `n`th generated dispatcher Effect.
pub fn effect_payload(n: u64, replay: ReplayPolicy) -> Json {
    ObjectBuilder::new().field("effect", &n).field("replay", replay_name(replay)).build()
}

pub fn replay_name(replay: ReplayPolicy) -> &'static str {
    match replay {
        ReplayPolicy::Never => "never",
        ReplayPolicy::SameIdentity => "same_identity",
    }
}

/// The replay policy a payload declares (`never` unless it says otherwise).
pub fn replay_of(payload: &Payload) -> ReplayPolicy {
    match payload.value().get("replay").and_then(Json::as_str) {
        Some("same_identity") => ReplayPolicy::SameIdentity,
        _ => ReplayPolicy::Never,
    }
}

/// The number a generated payload carries (`effect`).
pub fn effect_number(payload: &Payload) -> Option<u64> {
    payload.value().get("effect").and_then(Json::as_u64)
}

pub struct SimDispatcher;

impl Dispatcher for SimDispatcher {
    fn policy(&self, effect: &Payload) -> DispatchPolicy {
        DispatchPolicy { replay: replay_of(effect), ..DispatchPolicy::never() }
    }

    fn dispatch<'a>(&'a self, _request: EffectRequest, _cx: DispatchContext) -> BoxFuture<'a, Result<Settlement, DispatchError>> {
        // Never reached in direct mode (the driver performs dispatches); answering "not
        // provable" keeps any other caller on the safe side.
        Box::pin(async { Err(DispatchError::Failed("the simulated world performs dispatches itself".into())) })
    }
}
