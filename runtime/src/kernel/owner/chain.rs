//! Chained commits: several consecutive boundaries of the tree sent as one commit.
//!
//! A settled boundary and a `child_start` checkpoint are *staged* instead of sent when chains
//! are on: the owner records the boundary (its cut, sequence and request, built exactly as if
//! it were sent), then runs the tree on in memory. The next boundary follows the staged one
//! (its sequence is the next, its previous digest and delta are against the staged cut), and
//! the whole chain is sent as one commit by the first commit that must be acknowledged before
//! something follows it (a `pending` boundary, whose dispatch waits for it; a commit owed to a
//! command's reply; any checkpoint) or when the tree has nothing left to run. So a tool round
//! needs two syncs: [model settled, child start, tool pending] and [tool settled, the child's
//! end and its parent's next Step, model pending].
//!
//! Why this keeps every recovery rule: staging publishes nothing and dispatches nothing (the
//! publications it produces wait in `staged` for the chain's acknowledgment, and a `pending`
//! boundary always ends its chain), so whatever the store holds after a crash (the head before
//! the chain, or, on a store that is not atomic, any prefix of it) is a head the unchained
//! owner could have left at that point, with nothing observable done after it.

use super::{Action, AfterCommit, InFlight, Owner};
use crate::kernel::commit::CommitRequest;
use crate::kernel::ids::EffectId;
use crate::kernel::snapshot::TreeSnapshot;
use crate::json::Digest;
use std::sync::Arc;

/// At most this many boundaries per chain; a longer run of staged work is sent in pieces.
pub(super) const MAX_CHAIN: usize = 8;

/// Boundaries staged for the next commit, in order.
#[derive(Default)]
pub(super) struct Chain {
    /// Whether boundaries may be staged at all (the Engine turns it on; a driver that sends
    /// one boundary per commit leaves it off).
    pub(super) enabled: bool,
    entries: Vec<(CommitRequest, Arc<TreeSnapshot>, u64)>,
    /// The Effects whose settled boundaries are staged.
    pub(super) effects: Vec<EffectId>,
}

impl Chain {
    pub(super) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether one more boundary may be staged rather than sent.
    pub(super) fn may_stage(&self) -> bool {
        self.enabled && self.entries.len() + 1 < MAX_CHAIN
    }

    pub(super) fn push(&mut self, request: CommitRequest, cut: Arc<TreeSnapshot>, sequence: u64, effect: Option<EffectId>) {
        self.entries.push((request, cut, sequence));
        self.effects.extend(effect);
    }

    /// The last staged cut and its sequence.
    fn last(&self) -> Option<(&Arc<TreeSnapshot>, u64)> {
        self.entries.last().map(|(_, cut, sequence)| (cut, *sequence))
    }

    /// Empties the chain, keeping whether it is enabled.
    pub(super) fn take(&mut self) -> Chain {
        Chain { enabled: self.enabled, entries: std::mem::take(&mut self.entries), effects: std::mem::take(&mut self.effects) }
    }
}

impl Owner {
    /// Lets the owner send several consecutive boundaries as one chained commit
    /// (`Action::CommitChain`). Off by default: a driver must handle that action first.
    pub fn enable_chained_commits(&mut self) {
        self.chain.enabled = true;
    }

    /// The cuts the last acknowledged chain installed before the current head, in commit
    /// order (empty after a single commit), once: a driver hands them to head listeners
    /// before the head, so listeners see every acknowledged cut as if committed one by one.
    pub fn take_passed_heads(&mut self) -> Vec<Arc<TreeSnapshot>> {
        std::mem::take(&mut self.passed_heads)
    }

    /// The cut the next boundary follows: the last staged one, else the acknowledged head.
    pub(super) fn tip(&self) -> Option<(&Arc<TreeSnapshot>, u64)> {
        self.chain.last().or(self.head.as_ref().map(|(h, s)| (h, *s)))
    }

    pub(super) fn tip_digest(&self) -> Option<Digest> {
        self.tip().map(|(h, _)| h.digest())
    }

    /// Sends every staged boundary as one commit (nothing if none is staged), to be followed
    /// by `after` once acknowledged.
    pub(super) fn send_chain(&mut self, after: AfterCommit) {
        let chain = self.chain.take();
        let Some((prospective, sequence)) = chain.last().map(|(cut, sequence)| (cut.clone(), sequence)) else { return };
        let passed = chain.entries[..chain.entries.len() - 1].iter().map(|(_, cut, _)| cut.clone()).collect();
        self.in_flight = Some(InFlight { after, prospective, sequence, effects: chain.effects, passed });
        let mut requests: Vec<CommitRequest> = chain.entries.into_iter().map(|(request, _, _)| request).collect();
        let action = match requests.len() {
            1 => Action::Commit(requests.remove(0)),
            _ => Action::CommitChain(requests),
        };
        self.actions.push_back(action);
    }
}
