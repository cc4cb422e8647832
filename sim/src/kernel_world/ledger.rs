//! The ground truth: every physical dispatch the simulated world performed, per EffectId, with
//! the answer the world really produced (which the kernel may never have heard: an error or a
//! crash can hide it). The oracle checks the kernel's claims against this, never the reverse.

use keel::kernel::dispatcher::ReplayPolicy;
use keel::kernel::effect::Settlement;
use keel::kernel::ids::{EffectId, ProcessId};
use std::collections::BTreeMap;

/// One physical call.
#[derive(Clone, Debug)]
pub struct PhysicalCall {
    pub effect: EffectId,
    pub process: ProcessId,
    /// Ordinal of the owner instance whose driver performed it.
    pub instance: u32,
    /// World time of the call.
    pub time: u64,
    pub policy: ReplayPolicy,
}

#[derive(Default)]
pub struct Ledger {
    calls: Vec<PhysicalCall>,
    /// The world's real answer per Effect (a same-identity re-run gets the same answer).
    truth: BTreeMap<EffectId, Settlement>,
    count: BTreeMap<EffectId, u64>,
}

impl Ledger {
    /// Records a call; returns how many physical calls this Effect has had, this one included.
    pub fn record(&mut self, call: PhysicalCall, answer: Settlement) -> u64 {
        self.truth.entry(call.effect.clone()).or_insert(answer);
        let n = self.count.entry(call.effect.clone()).or_insert(0);
        *n += 1;
        self.calls.push(call);
        *n
    }

    pub fn truth(&self, effect: &EffectId) -> Option<&Settlement> {
        self.truth.get(effect)
    }

    pub fn calls(&self) -> &[PhysicalCall] {
        &self.calls
    }

    pub fn total(&self) -> u64 {
        self.calls.len() as u64
    }
}
