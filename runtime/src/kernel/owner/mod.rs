//! The owner: the pure, serial state machine that owns one root tree (sans-IO, like
//! quinn-proto's `Connection`).
//!
//! The caller feeds [`Input`]s (commit acknowledgements, dispatch outcomes, host commands)
//! with [`Owner::handle`] and performs the [`Action`]s it polls with [`Owner::poll_action`]
//! (commit this cut, dispatch this Effect, publish this fact, reply to this command). Steps
//! run inline: they are pure and bounded. The owner never reads a clock or randomness: the
//! caller passes `now` and minted ids.
//!
//! Invariants this layer keeps (checked by tests and the simulator):
//! * one commit in flight at a time; while it is in flight no Step runs and no input is
//!   applied (inputs queue);
//! * a commit may be a chain of consecutive boundaries (`chain.rs`): a settled boundary or a
//!   `child_start` checkpoint is staged and the tree runs on in memory, and the chain is sent
//!   with the next commit that must be acknowledged before something follows (a pending
//!   boundary, a reply) or when the tree goes idle; nothing is dispatched or published between
//!   staging and the chain's acknowledgment;
//! * no Dispatch action for an Effect before its `pending` boundary is acknowledged;
//! * every published fact (Result, committed event, accepted signal, child) is in an
//!   acknowledged head;
//! * a commit failure stops the owner with a RuntimeError; nothing after it is published;
//! * one cut build per commit: records keep cached canonical encodings (`table`), a commit
//!   re-encodes only changed records, and an owner with nothing changed builds no cut to
//!   compare with its head.

mod commands;
mod compact;
mod chain;
mod control;
mod effects;
mod finalize;
mod open;
mod step;
mod table;

use super::binding::{Deployment, DeploymentResolver};
use super::commit::{Checkpoint, CheckpointKind, EffectBoundary, EffectBoundaryKind, TreeCut};
pub use super::commit::CommitRequest;
use super::deployment::DeploymentRef;
use super::dispatcher::{DispatchContext, EffectRequest};
use super::effect::{EffectPhase, Settlement};
use super::failure::Failure;
use super::ids::{EffectId, IncarnationId, ProcessId};
use super::process::Process;
use super::result::ProcessResult;
use super::signal::SignalRequest;
use super::snapshot::{SnapshotError, TreeSnapshot};
use super::tree_limits::TreeLimits;
use super::waist::Execution;
use crate::env::{CancelToken, Timestamp};
use crate::json::Digest;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

pub use commands::{CommandError, Reply};
pub use step::panic_message as panic_text;
pub use open::{RestoreError, StartError};

/// Identifies one host command so its reply can be routed back.
pub type CommandId = u64;

/// A host command applied serially by the owner.
#[derive(Clone, Debug)]
pub enum Command {
    /// Admit external Signals to one Process (atomically).
    Deliver { process: ProcessId, requests: Vec<SignalRequest> },
    /// Record a host cancellation intent.
    Cancel { process: ProcessId, reason: String },
    /// Record a kill intent (highest precedence).
    Kill { process: ProcessId, reason: String },
    /// Replace the current Unknown of `effect` with a definite settlement.
    Resolve { process: ProcessId, effect: EffectId, settlement: Settlement },
    /// Commit the current cut if it differs from the head and return the acknowledged head.
    Capture,
}

/// What the caller feeds the owner.
pub enum Input {
    /// The outstanding commit finished.
    CommitDone(Result<(), super::commit::CommitError>),
    /// A dispatch attempt finished (or panicked, normalized by the caller).
    DispatchDone { effect: EffectId, outcome: Result<Settlement, super::dispatcher::DispatchError> },
    /// A host command.
    Command { id: CommandId, command: Command },
}

/// Something the caller must do.
#[allow(clippy::large_enum_variant)] // transient: polled and performed at once
pub enum Action {
    /// Send this commit to the committer and feed back `Input::CommitDone`.
    Commit(CommitRequest),
    /// Send this chain (`Committer::commit_chain`: consecutive boundaries of this tree, two
    /// or more) and feed back one `Input::CommitDone` for all of it.
    CommitChain(Vec<CommitRequest>),
    /// Run this dispatcher Effect (after its pending boundary was acknowledged) and feed back
    /// `Input::DispatchDone`. The caller mints the AttemptId.
    Dispatch { deployment: Deployment, request: EffectRequest, cx: DispatchContext },
    /// Make this fact visible (it is in an acknowledged head, or it is an attempt fact).
    Publish(Publication),
    /// Answer a host command.
    Reply { id: CommandId, result: Result<Reply, CommandError> },
}

/// Facts the owner publishes.
#[derive(Clone, Debug)]
pub enum Publication {
    /// A Process exists in an acknowledged head (start, child start, or restore).
    Started { process: ProcessInfo, restored: bool },
    /// A Process's terminal Result is in an acknowledged head.
    Finished { result: ProcessResult },
    /// The writer stopped; every member not yet finished gets this error.
    Stopped { error: RuntimeError },
    /// An observation event.
    Event(super::event::Event),
}

/// Immutable facts of a published Process.
#[derive(Clone, Debug)]
pub struct ProcessInfo {
    pub id: ProcessId,
    pub relation: super::relation::Relation,
    pub deployment_ref: DeploymentRef,
    pub started_at: Timestamp,
    pub budget: super::resource::Budget,
    pub capabilities: super::capability::CapabilitySet,
}

impl ProcessInfo {
    fn of(p: &Process) -> ProcessInfo {
        ProcessInfo {
            id: p.id.clone(),
            relation: p.relation.clone(),
            deployment_ref: p.deployment_ref.clone(),
            started_at: p.started_at,
            budget: p.budget,
            capabilities: p.capabilities.clone(),
        }
    }
}

/// The writer of a tree stopped (commit failure, fencing, capacity failure on a settlement).
/// Never a logical termination and never permission to replay: the host must restore the
/// authoritative head elsewhere.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("runtime stopped for tree {root_id} (incarnation {incarnation}): {cause}")]
pub struct RuntimeError {
    pub root_id: ProcessId,
    pub incarnation: IncarnationId,
    /// The last head acknowledged to this instance (the store may be ahead).
    pub head_digest: Option<Digest>,
    pub unresolved_effect_ids: Vec<EffectId>,
    pub cause: String,
    /// The store's refusal, when a failed commit stopped the writer (a host tells a fenced
    /// writer, another writer's run, from an I/O failure by it).
    pub commit: Option<super::commit::CommitError>,
}

/// What to do once the outstanding commit is acknowledged.
enum AfterCommit {
    Nothing,
    /// Publish the root (start) or every member (activation).
    PublishStart { restored: bool },
    /// Start the dispatch of this pending Effect.
    Dispatch { process: ProcessId, effect: EffectId },
    Reply { id: CommandId, reply: Reply },
    /// Answer a capture with the cut just acknowledged.
    ReplyCaptured { id: CommandId },
}

struct InFlight {
    after: AfterCommit,
    prospective: Arc<TreeSnapshot>,
    sequence: u64,
    /// The Effects whose settled/resolved boundaries this commit carries (counted unresolved
    /// if it fails).
    effects: Vec<EffectId>,
    /// A chain's cuts before its last one (`prospective`), in order.
    passed: Vec<Arc<TreeSnapshot>>,
}

/// Live-only facts of a non-terminal Process.
struct Live {
    deployment: Deployment,
    /// The restored instance adopted by the last committed Step (restore-before-adopt).
    execution: Option<Box<dyn Execution>>,
    /// The restored candidate of the prepared Step, adopted at finalization.
    candidate: Option<Box<dyn Execution>>,
}

struct Job {
    process: ProcessId,
    cancel: CancelToken,
}

/// Root-tree configuration fixed at start (restore keeps the captured values).
#[derive(Clone, Debug)]
pub struct RootConfig {
    pub budget: super::resource::Budget,
    pub capabilities: super::capability::CapabilitySet,
    pub limits: TreeLimits,
}

/// The owner of one root tree.
pub struct Owner {
    root_id: ProcessId,
    incarnation: IncarnationId,
    limits: TreeLimits,
    processes: table::ProcessTable,
    live: BTreeMap<ProcessId, Live>,
    resolver: Arc<dyn DeploymentResolver>,
    /// Last acknowledged cut and its sequence.
    head: Option<(Arc<TreeSnapshot>, u64)>,
    in_flight: Option<InFlight>,
    jobs: BTreeMap<EffectId, Job>,
    /// Inputs that arrived while a commit was in flight, applied in order after it.
    deferred: VecDeque<Input>,
    actions: VecDeque<Action>,
    /// Committed-phase publications waiting for the next acknowledged commit.
    staged: Vec<Publication>,
    stopped: Option<RuntimeError>,
    /// Round-robin cursor so one busy Process cannot starve its siblings.
    last_advanced: Option<ProcessId>,
    now: Timestamp,
    /// Whether consumed finished children are retired, and those waiting for it (`compact.rs`).
    compaction: compact::Compaction,
    /// A child was started in memory and its `child_start` checkpoint is not issued yet
    /// (`commit_child_starts`).
    child_start_due: bool,
    /// Boundaries staged for the next commit, in order (`chain.rs`).
    chain: chain::Chain,
    /// The cuts the last acknowledged chain installed before its head, until taken.
    passed_heads: Vec<Arc<TreeSnapshot>>,
}

impl Owner {
    /// Whether the owner stopped (and why).
    pub fn stopped(&self) -> Option<&RuntimeError> {
        self.stopped.as_ref()
    }
    pub fn root_id(&self) -> &ProcessId {
        &self.root_id
    }
    pub fn incarnation(&self) -> &IncarnationId {
        &self.incarnation
    }
    /// The last acknowledged cut.
    pub fn head(&self) -> Option<&Arc<TreeSnapshot>> {
        self.head.as_ref().map(|(s, _)| s)
    }
    /// Whether nothing is left to do: no commit in flight, no jobs, no queued input, and the
    /// head equals the in-memory cut.
    pub fn is_quiescent(&self) -> bool {
        self.in_flight.is_none()
            && self.chain.is_empty()
            && self.jobs.is_empty()
            && self.deferred.is_empty()
            && self.actions.is_empty()
    }
    /// Whether every Process of the tree is terminal in the acknowledged head.
    pub fn is_finished(&self) -> bool {
        self.head().is_some_and(|h| h.processes().iter().all(|p| p.is_terminal()))
    }
    /// Number of dispatch jobs in flight.
    pub fn jobs_in_flight(&self) -> usize {
        self.jobs.len()
    }

    /// Next action for the caller, if any.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// Feeds one input, then advances the tree as far as it can without waiting.
    pub fn handle(&mut self, input: Input, now: Timestamp) {
        self.now = now;
        if self.stopped.is_some() {
            if let Input::Command { id, .. } = input {
                let err = CommandError::Stopped(self.stopped.clone().map(Box::new));
                self.actions.push_back(Action::Reply { id, result: Err(err) });
            }
            return;
        }
        match input {
            Input::CommitDone(result) => self.on_commit_done(result),
            other if self.in_flight.is_some() => self.deferred.push_back(other),
            other => self.apply(other),
        }
        self.drive();
    }

    fn apply(&mut self, input: Input) {
        match input {
            Input::CommitDone(_) => {}
            Input::DispatchDone { effect, outcome } => self.on_dispatch_done(effect, outcome),
            Input::Command { id, command } => self.on_command(id, command),
        }
    }

    /// Advances until a commit is in flight, or nothing is runnable.
    fn drive(&mut self) {
        // Bounded: every iteration either applies one deferred input, advances one Process
        // (a Step, an Effect phase, a termination) or issues a commit; each of those consumes
        // budgeted or finite work. The bound guards against a logic error spinning forever.
        const MAX_TURNS: usize = 1 << 20;
        for _ in 0..MAX_TURNS {
            if self.in_flight.is_some() || self.stopped.is_some() {
                return;
            }
            if let Some(input) = self.deferred.pop_front() {
                self.apply(input);
                continue;
            }
            if let Some(pid) = self.next_runnable() {
                self.last_advanced = Some(pid.clone());
                self.advance(&pid);
                if self.child_start_due {
                    self.commit_child_starts(&pid);
                }
                continue;
            }
            // Idle: commit the cut if it differs from the head. Nothing is built unless a
            // record changed since the last assembled cut (the table tracks that), and the
            // cut built to compare is the one committed.
            if !self.jobs.is_empty() && self.staged.is_empty() {
                return self.send_chain(AfterCommit::Nothing);
            }
            let head_digest = self.tip_digest();
            if !self.processes.may_differ_from(head_digest) {
                return self.send_chain(AfterCommit::Nothing);
            }
            match self.snapshot() {
                Ok(c) if Some(c.digest()) == head_digest => return self.send_chain(AfterCommit::Nothing),
                Ok(c) => {
                    let kind = self.cut_class();
                    self.commit_checkpoint_cut(kind, AfterCommit::Nothing, Arc::new(c));
                }
                Err(e) => self.stop(format!("prospective cut rejected: {e}"), None),
            }
        }
        self.stop("owner exceeded its turn bound (a kernel bug)".into(), None);
    }

    /// The in-memory cut as a validated snapshot, assembled from the records' cached
    /// encodings (only records changed since the last cut are encoded).
    fn snapshot(&mut self) -> Result<TreeSnapshot, SnapshotError> {
        self.processes.cut(&self.root_id, &self.incarnation, self.limits)
    }

    /// Whether the in-memory cut differs from the last staged or acknowledged one.
    fn cut_differs_from_tip(&mut self) -> bool {
        let head_digest = self.tip_digest();
        if !self.processes.may_differ_from(head_digest) {
            return false;
        }
        match self.snapshot() {
            Ok(cut) => Some(cut.digest()) != head_digest,
            Err(_) => true,
        }
    }

    /// Cuts assembled by this owner so far. Observation for tests and benchmarks: an owner
    /// with nothing to do assembles none.
    #[doc(hidden)]
    pub fn cut_builds(&self) -> u64 {
        self.processes.builds()
    }

    /// A fresh full build of the in-memory records, every record (segment records included)
    /// encoded anew (no cache).
    /// While a commit is in flight the records are exactly what it carries, so a driver can
    /// check that the cut it is asked to commit equals this (a stale cached encoding would
    /// make them differ).
    #[doc(hidden)]
    pub fn fresh_cut(&self) -> Result<TreeSnapshot, SnapshotError> {
        use super::snapshot::EncodedProcess;
        let members = self.processes.iter().map(|(_, p)| (Arc::clone(p), Arc::new(EncodedProcess::encode_fresh(p))));
        let residues = self.processes.residues().map(|r| (Arc::new(r.clone()), Arc::new(EncodedProcess::encode_residue(r))));
        TreeSnapshot::assemble_shared(self.root_id.clone(), self.incarnation.clone(), self.limits, members.collect(), residues.collect())
    }

    /// Commits the `child_start` checkpoint owed by `pid`, after running on `pid` as far as
    /// it goes without a commit of its own: waits (settled locally),
    /// the finalization of a fully settled batch and the Steps that follow it (the
    /// Interaction takes three Steps from its start request to its parked child wait). All of
    /// it is pure, bounded work on the in-memory tree; nothing is dispatched or published
    /// before the checkpoint is acknowledged, and a crash before it leaves the previous head,
    /// from which the parent re-runs its Steps and starts the same children under the same
    /// derived ids. So one checkpoint holds the last child's start and what the parent does
    /// after it, such as its adopted wait, which would otherwise be a `progress` commit. The new children
    /// run no Step before it is acknowledged: it is issued before the driver picks the next
    /// Process.
    fn commit_child_starts(&mut self, pid: &ProcessId) {
        // A strategy could take Steps without end: past this many the checkpoint is committed
        // anyway and the Process goes on in its ordinary turns.
        const MAX_LOCAL_ADVANCES: usize = 64;
        for _ in 0..MAX_LOCAL_ADVANCES {
            if self.in_flight.is_some() || self.stopped.is_some() || !self.advances_locally(pid) {
                break;
            }
            self.advance(pid);
        }
        self.child_start_due = false;
        // A finalization may have issued a commit of its own (a `checkpoint` transition):
        // that commit holds the children, and their staged publications wait for it.
        if self.in_flight.is_none() && self.stopped.is_none() {
            if self.chain.may_stage() {
                // Staged: the children run in memory and the checkpoint is sent with the
                // next commit, before any of them dispatches or is published (`chain.rs`).
                if let Some(cut) = self.prospective() {
                    self.stage_checkpoint(CheckpointKind::ChildStart, cut);
                }
            } else {
                self.commit_checkpoint(CheckpointKind::ChildStart, AfterCommit::Nothing);
            }
        }
    }

    /// Whether `pid`'s next advance needs no commit of its own: a Step of a running Process,
    /// a wait's begin (settled locally) or the finalization of a fully settled batch.
    fn advances_locally(&self, pid: &ProcessId) -> bool {
        let Some(p) = self.processes.get(pid) else { return false };
        if p.is_terminal() || self.has_job(pid) || p.pending_control.has_terminal_intent() {
            return false;
        }
        let Some(prepared) = &p.prepared else { return p.status == super::status::Status::Running };
        if prepared.has_pending() {
            return false;
        }
        match prepared.frontier() {
            None => true,
            // Another child start stops here: each child's checkpoint is committed before
            // the next child starts, so children run in the order their parent started
            // them (the driver's round-robin order is by id).
            Some(i) => {
                use super::effect::{Effect, FrameworkEffect};
                let e = &prepared.effects[i];
                e.phase == EffectPhase::Planned
                    && matches!(e.effect, Effect::Framework(FrameworkEffect::Wait { .. } | FrameworkEffect::WaitChildren(_)))
            }
        }
    }

    /// Checkpoint class of the current cut.
    fn cut_class(&self) -> CheckpointKind {
        if self.processes.values().all(Process::is_terminal) {
            CheckpointKind::Terminal
        } else if self.processes.values().filter(|p| !p.is_terminal()).all(Process::is_parked) {
            CheckpointKind::Parked
        } else {
            CheckpointKind::Progress
        }
    }

    fn next_sequence(&self) -> u64 {
        self.tip().map(|(_, s)| s + 1).unwrap_or(1)
    }

    /// Builds the prospective cut, or stops the owner if it does not validate (a kernel bug or
    /// a capacity failure on a settlement).
    fn prospective(&mut self) -> Option<Arc<TreeSnapshot>> {
        match self.snapshot() {
            Ok(s) => Some(Arc::new(s)),
            Err(e) => {
                self.stop(format!("prospective cut rejected: {e}"), None);
                None
            }
        }
    }

    /// The cut to commit for `snap`: a delta against the acknowledged head (records whose
    /// key and digest the head holds travel as `(key, digest)` only), or whole when there is
    /// no head yet. The store resolves the delta against the head it holds, which fencing on
    /// the previous digest makes this same head.
    fn tree_cut(&self, snap: &TreeSnapshot) -> TreeCut {
        match self.tip() {
            Some((head, _)) => snap.tree_cut().delta_from(head.tree_cut()),
            None => snap.tree_cut().clone(),
        }
    }

    fn commit_checkpoint(&mut self, kind: CheckpointKind, after: AfterCommit) {
        let Some(cut) = self.prospective() else { return };
        self.commit_checkpoint_cut(kind, after, cut);
    }

    /// Commits an already-built, validated cut as a checkpoint.
    fn commit_checkpoint_cut(&mut self, kind: CheckpointKind, after: AfterCommit, cut: Arc<TreeSnapshot>) {
        self.stage_checkpoint(kind, cut);
        self.send_chain(after);
    }

    /// Stages an already-built, validated cut as a checkpoint (sent with the next commit).
    fn stage_checkpoint(&mut self, kind: CheckpointKind, cut: Arc<TreeSnapshot>) {
        let sequence = self.next_sequence();
        let previous_digest = self.tip_digest();
        let checkpoint = Checkpoint { sequence, kind, previous_digest, cut: self.tree_cut(&cut) };
        self.chain.push(CommitRequest::Checkpoint(checkpoint), cut, sequence, None);
    }

    fn commit_effect(&mut self, kind: EffectBoundaryKind, process: &ProcessId, effect: &EffectId, after: AfterCommit) {
        if self.stage_effect(kind, process, effect) {
            self.send_chain(after);
        }
    }

    /// Stages an Effect boundary of the in-memory cut (sent with the next commit); false if
    /// it could not be built (the owner stopped).
    fn stage_effect(&mut self, kind: EffectBoundaryKind, process: &ProcessId, effect: &EffectId) -> bool {
        let Some(cut) = self.prospective() else { return false };
        let Some((step_sequence, batch_index, effect_digest, settlement_digest)) =
            self.effect_coordinates(process, effect)
        else {
            self.stop(format!("effect boundary for an absent effect {effect}"), None);
            return false;
        };
        let Some((head, _)) = self.tip() else {
            self.stop("effect boundary before any acknowledged head".into(), None);
            return false;
        };
        let sequence = self.next_sequence();
        let boundary = EffectBoundary {
            sequence,
            kind,
            process_id: process.clone(),
            effect_id: effect.clone(),
            step_sequence,
            batch_index,
            effect_digest,
            settlement_digest: if kind == EffectBoundaryKind::Pending { None } else { settlement_digest },
            previous_digest: head.digest(),
            cut: self.tree_cut(&cut),
        };
        let counted = (kind != EffectBoundaryKind::Pending).then(|| effect.clone());
        self.chain.push(CommitRequest::Effect(boundary), cut, sequence, counted);
        true
    }

    fn effect_coordinates(&self, process: &ProcessId, effect: &EffectId) -> Option<(u64, u32, Digest, Option<Digest>)> {
        let prepared = self.processes.get(process)?.prepared.as_ref()?;
        let index = prepared.effect_index(effect)?;
        let e = &prepared.effects[index];
        // Digests of the written canonical bytes (the same as of the trees: no payload clone).
        let settlement = match &e.phase {
            EffectPhase::Settled(s) => Some(Digest::of_written(s)),
            EffectPhase::Unknown => Some(Digest::of(b"unknown")),
            _ => None,
        };
        Some((prepared.sequence, index as u32, Digest::of_written(&e.effect), settlement))
    }

    fn on_commit_done(&mut self, result: Result<(), super::commit::CommitError>) {
        let Some(in_flight) = self.in_flight.take() else {
            self.stop("commit acknowledgement with no commit in flight".into(), None);
            return;
        };
        if let Err(e) = result {
            let owed = match in_flight.after {
                AfterCommit::Reply { id, .. } | AfterCommit::ReplyCaptured { id } => Some(id),
                _ => None,
            };
            self.stop_with(format!("commit failed: {e}"), in_flight.effects, Some(e));
            // The command whose commit failed is still owed its reply.
            if let Some(id) = owed {
                let err = CommandError::Stopped(self.stopped.clone().map(Box::new));
                self.actions.push_back(Action::Reply { id, result: Err(err) });
            }
            return;
        }
        self.head = Some((in_flight.prospective, in_flight.sequence));
        self.passed_heads = in_flight.passed;
        // Committed facts become visible only now.
        for p in std::mem::take(&mut self.staged) {
            self.actions.push_back(Action::Publish(p));
        }
        match in_flight.after {
            AfterCommit::Nothing => {}
            AfterCommit::PublishStart { restored } => {
                let infos: Vec<ProcessInfo> = self.processes.values().map(ProcessInfo::of).collect();
                for info in infos {
                    self.actions.push_back(Action::Publish(Publication::Started { process: info, restored }));
                }
                // Restored terminal Processes publish their Results immediately.
                let finished: Vec<ProcessResult> =
                    self.processes.values().filter_map(control::result_of).collect();
                for result in finished {
                    self.actions.push_back(Action::Publish(Publication::Finished { result }));
                }
                #[cfg(feature = "mutations")]
                if restored && crate::mutation::active(crate::mutation::Mutation::RedispatchUnknown) {
                    self.redispatch_unknowns();
                }
            }
            AfterCommit::Dispatch { process, effect } => self.start_dispatch(&process, &effect),
            AfterCommit::Reply { id, reply } => self.actions.push_back(Action::Reply { id, result: Ok(reply) }),
            AfterCommit::ReplyCaptured { id } => {
                if let Some(head) = self.head().cloned() {
                    self.actions.push_back(Action::Reply { id, result: Ok(Reply::Captured(head)) });
                }
            }
        }
    }

    /// Stops the writer: staged publications are dropped, jobs abandoned (their tokens
    /// cancelled), and every member gets the RuntimeError.
    fn stop(&mut self, cause: String, failed_effect: Option<EffectId>) {
        self.stop_with(cause, failed_effect.into_iter().collect(), None);
    }

    /// [`stop`](Self::stop), keeping the store's refusal that caused it.
    fn stop_with(&mut self, cause: String, failed_effects: Vec<EffectId>, commit: Option<super::commit::CommitError>) {
        if self.stopped.is_some() {
            return;
        }
        let mut unresolved: Vec<EffectId> = self
            .processes
            .values()
            .filter_map(|p| p.prepared.as_ref())
            .flat_map(|s| s.unknown_ids())
            .collect();
        unresolved.extend(failed_effects);
        // Staged boundaries were never sent: their settlements are as unresolved as the rest.
        unresolved.extend(self.chain.take().effects);
        for (id, job) in std::mem::take(&mut self.jobs) {
            job.cancel.cancel();
            unresolved.push(id);
        }
        unresolved.sort();
        unresolved.dedup();
        let error = RuntimeError {
            root_id: self.root_id.clone(),
            incarnation: self.incarnation.clone(),
            head_digest: self.head.as_ref().map(|(h, _)| h.digest()),
            unresolved_effect_ids: unresolved,
            cause,
            commit,
        };
        self.staged.clear();
        self.child_start_due = false;
        // A command whose commit was in flight is still owed its reply.
        if let Some(f) = self.in_flight.take() {
            if let AfterCommit::Reply { id, .. } | AfterCommit::ReplyCaptured { id } = f.after {
                let err = CommandError::Stopped(Some(Box::new(error.clone())));
                self.actions.push_back(Action::Reply { id, result: Err(err) });
            }
        }
        for input in std::mem::take(&mut self.deferred) {
            if let Input::Command { id, .. } = input {
                let err = CommandError::Stopped(Some(Box::new(error.clone())));
                self.actions.push_back(Action::Reply { id, result: Err(err) });
            }
        }
        self.actions.push_back(Action::Publish(Publication::Stopped { error: error.clone() }));
        self.stopped = Some(error);
    }

    /// The next Process with work to do, round-robin in (depth, id) order.
    fn next_runnable(&self) -> Option<ProcessId> {
        let mut ordered: Vec<&Process> = self.processes.values().collect();
        ordered.sort_by(|a, b| (a.relation.depth, &a.id).cmp(&(b.relation.depth, &b.id)));
        let start = self
            .last_advanced
            .as_ref()
            .and_then(|last| ordered.iter().position(|p| &p.id == last))
            .map(|i| i + 1)
            .unwrap_or(0);
        let n = ordered.len();
        (0..n).map(|k| ordered[(start + k) % n]).find(|p| self.is_runnable(p)).map(|p| p.id.clone())
    }

    fn has_job(&self, pid: &ProcessId) -> bool {
        self.jobs.values().any(|j| &j.process == pid)
    }

    fn is_runnable(&self, p: &Process) -> bool {
        if p.is_terminal() || self.has_job(&p.id) {
            return false;
        }
        if let Some(prepared) = &p.prepared {
            // Restored pending Effects need recovery even under terminal intent.
            if prepared.has_pending() {
                return true;
            }
            if p.pending_control.has_terminal_intent() {
                return true;
            }
            return match prepared.frontier() {
                None => true,
                Some(i) => prepared.effects[i].phase == EffectPhase::Planned,
            };
        }
        if p.pending_control.has_terminal_intent() {
            return true;
        }
        p.status == super::status::Status::Running
    }

    /// One unit of progress for a runnable Process.
    fn advance(&mut self, pid: &ProcessId) {
        let Some(p) = self.processes.get(pid) else { return };
        if let Some(prepared) = &p.prepared {
            if prepared.has_pending() {
                return self.recover_pending(pid);
            }
        }
        if p.pending_control.has_terminal_intent() {
            return self.terminate(pid, None);
        }
        match p.prepared.as_ref().map(|s| s.frontier()) {
            Some(None) => self.finalize(pid),
            Some(Some(index)) => self.begin_effect(pid, index),
            None => self.run_step(pid),
        }
    }

    /// Records an Engine-detected failure as pending control (priority 4); it becomes
    /// terminal once in-flight work of the Process settles.
    fn record_failure(&mut self, pid: &ProcessId, failure: Failure) {
        if let Some(p) = self.processes.get_mut(pid) {
            if !p.is_terminal() && p.pending_control.failure.is_none() {
                p.pending_control.failure = Some(failure);
            }
        }
    }

    fn event(&self, pid: &ProcessId, name: &'static str, step: Option<u64>, effect: Option<&EffectId>) -> Option<super::event::Event> {
        let p = self.processes.get(pid)?;
        Some(super::event::Event::new(p, &self.incarnation, name, step, effect.cloned(), self.now))
    }

    /// Stages a committed-phase event (published after the next acknowledged commit).
    fn stage_event(&mut self, pid: &ProcessId, name: &'static str, step: Option<u64>, effect: Option<&EffectId>) {
        if let Some(e) = self.event(pid, name, step, effect) {
            self.staged.push(Publication::Event(e));
        }
    }

    /// Publishes an attempt-phase event immediately.
    fn attempt_event(&mut self, pid: &ProcessId, name: &'static str, step: Option<u64>, effect: Option<&EffectId>) {
        if let Some(e) = self.event(pid, name, step, effect) {
            self.actions.push_back(Action::Publish(Publication::Event(e)));
        }
    }
}

/// Appends Engine-minted records (settlements, openings, child-wait answers) to a Process's
/// mailbox. Capacity was reserved at preparation; the mailbox re-checks it.
fn append_engine(
    p: &mut Process,
    batch: &[super::mailbox::Admission],
    max_pending_signals: u32,
) -> Result<super::mailbox::AdmitOutcome, super::mailbox::AdmissionError> {
    let reject_all = |_: &crate::json::Json| false;
    let ctx = super::mailbox::AdmissionContext {
        terminal: p.is_terminal(),
        current_wait_id: p.current_wait_id.as_ref(),
        signal_schema: &reject_all,
        max_pending_signals,
        prepared_consumption: 0,
        prepared_reserved_settlements: 0,
        signals_quota: super::mailbox::SignalsQuota {
            accepted: p.mailbox.len(),
            allocated: p.allocated.signals,
            maximum: p.budget.signals.maximum(),
        },
    };
    p.mailbox.admit(batch, &ctx)
}
