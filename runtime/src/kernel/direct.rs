//! A synchronous driver for an [`Owner`]: performs its actions in order with no async
//! runtime (commits and dispatches are driven to completion with a local executor).
//!
//! Used by kernel tests, the Definition conformance helper and the simulator's "direct"
//! mode. Dispatches run one at a time in the order they were issued unless the caller takes
//! them with [`DirectRunner::take_dispatches`] and completes them itself (to permute order or
//! inject faults).

use super::binding::Deployment;
use super::commit::Committer;
use super::dispatcher::{DispatchContext, DispatchError, EffectRequest};
use super::effect::Settlement;
use super::ids::{AttemptId, EffectId};
use super::owner::{Action, Command, CommandError, CommandId, CommitRequest, Input, Owner, Publication, Reply};
use crate::env::Timestamp;
use futures::FutureExt;
use std::collections::{BTreeMap, VecDeque};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

/// One dispatch the owner asked for, not yet performed.
pub struct PendingDispatch {
    pub deployment: Deployment,
    pub request: EffectRequest,
    pub cx: DispatchContext,
}

impl PendingDispatch {
    /// Runs the dispatcher to completion on the current thread, converting panics.
    pub fn run(self, attempt: u64) -> (EffectId, Result<Settlement, DispatchError>) {
        let effect = self.request.effect_id.clone();
        let Some(dispatcher) = self.deployment.dispatcher().cloned() else {
            return (effect, Err(DispatchError::Failed("no dispatcher".into())));
        };
        let mut request = self.request;
        request.attempt_id = AttemptId::from_hex(&format!("{attempt:032x}")).ok();
        let fut = dispatcher.dispatch(request, self.cx);
        let outcome = futures::executor::block_on(AssertUnwindSafe(fut).catch_unwind())
            .unwrap_or_else(|p| Err(DispatchError::Panicked(crate::kernel::owner::panic_text(&p))));
        (effect, outcome)
    }
}

/// Drives one owner synchronously.
pub struct DirectRunner {
    pub owner: Owner,
    committer: Arc<dyn Committer>,
    pub now: Timestamp,
    dispatches: VecDeque<PendingDispatch>,
    pub published: Vec<Publication>,
    replies: BTreeMap<CommandId, Result<Reply, CommandError>>,
    next_command: CommandId,
    attempts: u64,
    /// Every commit request sent, in order (for tests and oracles); a chain's requests one
    /// by one.
    pub commits: Vec<(CommitRequest, bool)>,
    /// Where every chain sent (`Action::CommitChain`) lies in `commits`, in order.
    pub chains: Vec<std::ops::Range<usize>>,
}

impl DirectRunner {
    pub fn new(owner: Owner, committer: Arc<dyn Committer>, now: Timestamp) -> DirectRunner {
        Self::with_chains(owner, committer, now, false)
    }

    /// A runner whose owner sends chained commits (as the Engine's does) when `chains`.
    pub fn with_chains(mut owner: Owner, committer: Arc<dyn Committer>, now: Timestamp, chains: bool) -> DirectRunner {
        if chains {
            owner.enable_chained_commits();
        }
        let mut r = DirectRunner {
            owner,
            committer,
            now,
            dispatches: VecDeque::new(),
            published: Vec::new(),
            replies: BTreeMap::new(),
            next_command: 1,
            attempts: 0,
            commits: Vec::new(),
            chains: Vec::new(),
        };
        r.pump();
        r
    }

    /// Performs every queued action except dispatches (commits are awaited inline).
    pub fn pump(&mut self) {
        while let Some(action) = self.owner.poll_action() {
            match action {
                Action::Commit(request) => {
                    // The kernel's own tests check every commit against a full re-encoding:
                    // the owner's cached record encodings must never go stale.
                    #[cfg(test)]
                    {
                        // The tree digest covers every record's digest, each recomputed here.
                        let fresh = self.owner.fresh_cut().map(|c| c.digest());
                        assert_eq!(fresh.as_ref().ok(), Some(&request.cut().digest), "committed cut differs from a fresh build");
                    }
                    let result = futures::executor::block_on(commit(self.committer.as_ref(), &request));
                    self.commits.push((request, result.is_ok()));
                    self.owner.handle(Input::CommitDone(result), self.now);
                }
                Action::CommitChain(chain) => {
                    #[cfg(test)]
                    {
                        let fresh = self.owner.fresh_cut().map(|c| c.digest());
                        let last = chain.last().map(|r| r.cut().digest);
                        assert_eq!(fresh.ok(), last, "a chain's last cut differs from a fresh build");
                    }
                    let result = futures::executor::block_on(self.committer.commit_chain(&chain));
                    let ok = result.is_ok();
                    self.chains.push(self.commits.len()..self.commits.len() + chain.len());
                    self.commits.extend(chain.into_iter().map(|request| (request, ok)));
                    self.owner.handle(Input::CommitDone(result), self.now);
                }
                Action::Dispatch { deployment, request, cx } => {
                    // The kernel's own tests check every dispatch against the acknowledged
                    // head: it must hold the Effect pending (its `pending` boundary, or the
                    // restored cut a same-identity re-dispatch recovers).
                    #[cfg(all(test, not(feature = "mutations")))]
                    {
                        let pending = self
                            .owner
                            .head()
                            .and_then(|h| h.process(&request.process_id))
                            .and_then(|p| p.prepared.as_ref())
                            .and_then(|s| s.effect_index(&request.effect_id).map(|i| s.effects[i].phase.clone()));
                        assert_eq!(
                            pending,
                            Some(super::effect::EffectPhase::Pending),
                            "dispatch of {} before an acknowledged head holds it pending",
                            request.effect_id
                        );
                    }
                    self.dispatches.push_back(PendingDispatch { deployment, request, cx })
                }
                Action::Publish(p) => self.published.push(p),
                Action::Reply { id, result } => {
                    self.replies.insert(id, result);
                }
            }
        }
    }

    /// Runs until nothing is left: dispatches are performed in issue order.
    /// The whole cut of every acknowledged commit, in order: commits are deltas against the
    /// previous acknowledged head, so each is resolved against the one before it. A commit
    /// that does not resolve ends the list (the oracle reports it).
    pub fn acknowledged_cuts(&self) -> Vec<super::commit::TreeCut> {
        let mut out: Vec<super::commit::TreeCut> = Vec::new();
        for (request, ok) in &self.commits {
            if !ok {
                continue;
            }
            match request.cut().resolve(out.last()) {
                Ok(cut) => out.push(cut),
                Err(_) => break,
            }
        }
        out
    }

    pub fn run_to_idle(&mut self) {
        // Bounded by the owner's own budgets; the cap only guards against a kernel bug.
        for _ in 0..1_000_000 {
            self.pump();
            let Some(d) = self.dispatches.pop_front() else { return };
            self.attempts += 1;
            let (effect, outcome) = d.run(self.attempts);
            self.owner.handle(Input::DispatchDone { effect, outcome }, self.now);
        }
    }

    /// Takes the queued dispatches so the caller can complete them in any order.
    pub fn take_dispatches(&mut self) -> Vec<PendingDispatch> {
        self.pump();
        self.dispatches.drain(..).collect()
    }

    /// Feeds one dispatch outcome.
    pub fn complete(&mut self, effect: EffectId, outcome: Result<Settlement, DispatchError>) {
        self.owner.handle(Input::DispatchDone { effect, outcome }, self.now);
        self.pump();
    }

    /// Sends a command and returns its reply (after running to idle if it is deferred).
    pub fn command(&mut self, command: Command) -> Result<Reply, CommandError> {
        let id = self.next_command;
        self.next_command += 1;
        self.owner.handle(Input::Command { id, command }, self.now);
        self.pump();
        if !self.replies.contains_key(&id) {
            self.run_to_idle();
        }
        self.replies.remove(&id).unwrap_or(Err(CommandError::Stopped(None)))
    }
}

/// Sends one commit request to a committer.
pub async fn commit(committer: &dyn Committer, request: &CommitRequest) -> Result<(), super::commit::CommitError> {
    match request {
        CommitRequest::Checkpoint(c) => committer.commit_checkpoint(c).await,
        CommitRequest::Effect(b) => committer.commit_effect(b).await,
        CommitRequest::Activation(a) => committer.activate_tree(a).await,
    }
}
