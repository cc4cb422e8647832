//! The host side both captured worlds share ([`super::runs`] for the testkit strategy,
//! [`super::interaction_runs`] for the Interaction): one root on a [`DirectRunner`] over a
//! memory committer, driven idle after every host action, restorable under fresh fixed
//! incarnations, keeping every acknowledged cut in commit order.

use super::runs::now;
use keel::json::{Json, Payload};
use keel::kernel::binding::{Deployment, DeploymentSet};
use keel::kernel::commit::{Committer, MemoryCommitter};
use keel::kernel::direct::DirectRunner;
use keel::kernel::ids::{IncarnationId, ProcessId, SignalId, WaitId};
use keel::kernel::owner::{Command, Owner, RootConfig};
use keel::kernel::signal::SignalRequest;
use keel::kernel::snapshot::TreeSnapshot;
use std::sync::Arc;

/// 32 hex digits of `n`: fixed ids and incarnations.
pub fn hex(n: u64) -> String {
    format!("{n:032x}")
}

/// One hosted root tree.
pub struct HostedRun {
    resolver: Arc<DeploymentSet>,
    root: Deployment,
    committer: Arc<MemoryCommitter>,
    runner: DirectRunner,
    /// The current writer's incarnation number (each restore takes the next one).
    incarnation: u64,
    /// External Signals sent so far (their ids are `signal:host-<n>`).
    signals: u64,
    cuts: Vec<Vec<u8>>,
}

impl HostedRun {
    /// Starts `root` with `input` under incarnation `hex(incarnation)` and runs it idle;
    /// `None` if the start is refused.
    pub fn start(
        resolver: Arc<DeploymentSet>,
        root: Deployment,
        input: Payload,
        root_id: ProcessId,
        incarnation: u64,
        config: RootConfig,
    ) -> Option<HostedRun> {
        let id = IncarnationId::from_hex(&hex(incarnation)).expect("fixed incarnation");
        let owner = Owner::start(resolver.clone(), root.clone(), input, root_id, id, config, now()).ok()?;
        let committer = Arc::new(MemoryCommitter::new());
        let mut runner = DirectRunner::new(owner, committer.clone() as Arc<dyn Committer>, now());
        runner.run_to_idle();
        Some(HostedRun { resolver, root, committer, runner, incarnation, signals: 0, cuts: Vec::new() })
    }

    /// The acknowledged head, while the writer still runs.
    pub fn head(&self) -> Option<Arc<TreeSnapshot>> {
        if self.runner.owner.stopped().is_some() {
            return None;
        }
        self.runner.owner.head().cloned()
    }

    /// The next external Signal id.
    pub fn next_signal_id(&mut self) -> Option<SignalId> {
        self.signals += 1;
        SignalId::external(&format!("signal:host-{}", self.signals)).ok()
    }

    /// A Signal with the next id (taken even if the Signal turns out invalid), `payload` and an
    /// optional wait; `None` if it is invalid.
    pub fn signal(&mut self, wait: Option<WaitId>, payload: &Json) -> Option<SignalRequest> {
        let id = self.next_signal_id()?;
        let payload = Payload::from_json(payload.clone()).ok()?;
        SignalRequest::new(id, wait, payload).ok()
    }

    /// Hands `command` to the owner; refusals are part of what a run explores.
    pub fn command(&mut self, command: Command) {
        let _ = self.runner.command(command);
    }

    /// Restores `head` in a fresh owner under the next incarnation; `false` if refused (the
    /// run then ends).
    pub fn restore(&mut self, head: &TreeSnapshot) -> bool {
        self.incarnation += 1;
        self.collect();
        let restored = IncarnationId::from_hex(&hex(self.incarnation))
            .ok()
            .and_then(|inc| Owner::restore(self.resolver.clone(), self.root.clone(), head, inc, now()).ok());
        let Some(owner) = restored else { return false };
        self.runner = DirectRunner::new(owner, self.committer.clone() as Arc<dyn Committer>, now());
        true
    }

    /// Runs the tree until nothing more happens without the host.
    pub fn run_to_idle(&mut self) {
        self.runner.run_to_idle();
    }

    /// Every acknowledged cut of the run, in commit order.
    pub fn finish(mut self) -> Vec<Vec<u8>> {
        self.collect();
        self.cuts
    }

    /// Moves the current writer's acknowledged cuts into the run's list.
    fn collect(&mut self) {
        // Commits are deltas: the runner resolves each against the head before it.
        let acknowledged = self.runner.acknowledged_cuts().into_iter().filter_map(|c| c.bytes().ok()).map(|b| b.to_vec());
        self.cuts.extend(acknowledged);
    }
}

/// The id of the `n`-th Process of `head` (snapshot order, wrapping).
pub fn nth(head: &TreeSnapshot, n: u8) -> Option<ProcessId> {
    let processes = head.processes();
    processes.get(usize::from(n) % processes.len().max(1)).map(|p| p.id.clone())
}
