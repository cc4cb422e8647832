//! The driver: one seeded run of a kernel tree in direct mode (no async runtime).
//!
//! The world performs every owner action itself. Commits go through a `FaultyCommitter` over a
//! `MemoryCommitter` and their acknowledgements come back as separate world events, so
//! dispatch outcomes and host commands can arrive while a commit is in flight. Dispatches are
//! queued, physically started (ledger entry) and completed in a seeded order. Host actions are
//! injected between owner turns. A commit fault or a host crash drops the owner; a new owner
//! restores the store head under a fresh incarnation and the run continues, up to the seed's
//! crash budget. Everything is a function of the seed.

use super::bounds::{MAX_FINISHING_ACTIONS, MAX_HOST_ACTIONS, MAX_INSTANCES, MAX_WORLD_TURNS};
use super::compat::{RunReport, Violation};
use super::ledger::Ledger;
use super::oracle::Oracle;
use super::shape::{Deployments, Workload};
use super::swarm::{below, chance, weighted, CommitFault, Swarm, UnknownPolicy};
use crate::schedule::{FaultEvent, FaultSchedule};
use super::trace::{command_name, describe_request, result_name, short, Trace};
use keel::env::{random_hex, CancelToken, SeededRng, Timestamp};
use keel::json::{Digest, Json, Payload};
use keel::kernel::binding::Deployment;
use keel::kernel::capability::CapabilitySet;
use keel::kernel::commit::{CheckpointKind, CommitError, Committer, EffectBoundaryKind, Fault, FaultyCommitter, MemoryCommitter};
use keel::kernel::direct;
use keel::kernel::effect::{Effect, EffectPhase, Settlement};
use keel::kernel::ids::{EffectId, IncarnationId, ProcessId, SignalId};
use keel::kernel::owner::{Action, Command, CommandId, CommitRequest, Input, Owner, RootConfig};
use keel::kernel::signal::{SettlementStatus, SignalRequest};
use keel::kernel::snapshot::TreeSnapshot;
use keel::kernel::tree_limits::TreeLimits;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};

/// A deliberately broken driver, to prove the oracle catches what it claims to catch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DriverFlaw {
    /// The correct driver.
    None,
    /// Performs a dispatch as soon as its `pending` commit is requested, before sending it
    /// (actions reordered). Must be caught by `a.pending_before_dispatch`.
    DispatchBeforePending,
    /// On restore, re-runs every Effect the head holds as pending. Must be caught by
    /// `b.no_double_dispatch`.
    RedispatchRestoredPending,
    /// Tells the kernel a different answer than the one the world really produced. Must be
    /// caught by `j.settlement_truth`.
    MisreportAnswer,
}

/// A fault fired at the first commit of `boundary` (fixed-shape scenarios).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target {
    pub boundary: &'static str,
    pub fault: CommitFault,
}

/// Everything a run is made of.
#[derive(Clone, Debug)]
pub struct Setup {
    pub swarm: Swarm,
    pub workload: Workload,
    pub flaw: DriverFlaw,
    pub targets: Vec<Target>,
    /// `Some`: the commit faults are exactly these (decision = index of the commit sent to
    /// the store); the seed's own draws are still made, so nothing else shifts, but ignored.
    pub schedule: Option<FaultSchedule>,
}

/// What a run found, with the facts fixed-shape scenarios check on top of the oracle.
pub struct RunOutcome {
    pub report: RunReport,
    /// The store's final head.
    pub final_head: Option<Arc<TreeSnapshot>>,
    /// Physical dispatches in total.
    pub dispatches: u64,
    /// The commit faults that fired, by commit decision: replaying it reproduces the run.
    pub schedule: FaultSchedule,
}

pub(super) struct Queued {
    pub effect: EffectId,
    pub process: ProcessId,
    pub payload: Payload,
    pub cancel: CancelToken,
    pub started: bool,
}

/// A commit sent (or held) and not yet acknowledged to the owner.
pub(super) struct Outstanding {
    pub request: CommitRequest,
    /// `None`: held — applied at the store only when the acknowledgement is delivered.
    pub result: Option<Result<(), CommitError>>,
}

/// What a host command was meant to test (its reply is checked against it).
#[derive(Clone, Debug)]
pub(super) enum Sent {
    Answer { process: ProcessId, ids: Vec<SignalId> },
    Premature { process: ProcessId, ids: Vec<SignalId> },
    /// Late answers, duplicates, unaddressed input: must never be accepted.
    NotAccepted { what: &'static str },
    /// Same SignalId, other content: must be refused.
    Conflict,
    Intent,
    Resolve { process: ProcessId, effect: EffectId },
    /// A resolution of something that is not an Unknown frontier: must be refused.
    NotResolved,
    Capture,
}

/// One owner instance (one incarnation of the writer).
pub(super) struct Instance {
    pub ordinal: u32,
    pub owner: Owner,
    pub outstanding: Option<Outstanding>,
    pub queue: Vec<Queued>,
    pub stopped: bool,
    /// Digest of the last cut acknowledged to this owner.
    pub acked: Option<Digest>,
    pub acked_pending: BTreeSet<EffectId>,
    /// Pending dispatcher Effects of the head this instance restored.
    pub restored_pending: BTreeSet<EffectId>,
    pub published: BTreeSet<ProcessId>,
    pub commands: BTreeMap<CommandId, Sent>,
    pub next_command: CommandId,
    /// DriverFlaw::DispatchBeforePending: Effects already performed before their commit.
    pub pre_dispatched: BTreeSet<EffectId>,
    /// The unresolved EffectIds of the RuntimeError this instance published.
    pub stop_unresolved: Option<Vec<EffectId>>,
}

#[derive(Clone, Copy, Debug)]
enum Event {
    Ack(usize),
    Start(usize, usize),
    Complete(usize, usize),
}

const BASE_MILLIS: u64 = 1_700_000_000_000;

pub(super) struct World {
    pub swarm: Swarm,
    pub flaw: DriverFlaw,
    pub targets: Vec<(Target, bool)>,
    pub schedule: Option<FaultSchedule>,
    /// Commits sent to the store so far (the next one's fault decision index).
    pub commit_decisions: u64,
    /// The commit faults fired so far.
    pub fired: Vec<FaultEvent>,
    pub rng: SeededRng,
    pub memory: Arc<MemoryCommitter>,
    pub committer: Arc<FaultyCommitter<Arc<MemoryCommitter>>>,
    /// Every commit that reached the memory store, in order, on the seeds whose log
    /// compaction is checked after the run (`None` on the others: no copies).
    pub reached: Option<Vec<CommitRequest>>,
    pub next_fault: Arc<Mutex<Option<Fault>>>,
    pub deployments: &'static Deployments,
    pub root_deployment: Deployment,
    pub root_input: Payload,
    pub root_budget: keel::kernel::resource::Budget,
    pub limits: TreeLimits,
    pub root_id: ProcessId,
    pub instances: Vec<Instance>,
    pub instances_created: u32,
    pub time: u64,
    pub ledger: Ledger,
    pub oracle: Oracle,
    pub trace: Trace,
    pub faults: BTreeMap<String, u64>,
    pub crash_points: BTreeMap<String, u64>,
    pub crashes: u32,
    pub host_actions: u32,
    pub finishing_actions: u32,
    /// Whether the one re-delivery at quiescence was considered.
    pub closing_redelivery: bool,
    pub unknown_policy: BTreeMap<EffectId, UnknownPolicy>,
    pub left: BTreeSet<EffectId>,
    /// Processes whose wait answer was refused for lack of capacity (the host kills them).
    pub unanswerable: BTreeSet<ProcessId>,
    pub next_signal: u64,
    /// Every request the host delivered, for duplicates and conflicts.
    pub delivered: Vec<(ProcessId, SignalRequest)>,
    /// Snapshots by digest: heads acknowledged to some writer, and decoded heads.
    pub heads: BTreeMap<[u8; 32], Arc<TreeSnapshot>>,
    pub last_head: Option<Digest>,
    /// The newest installed head whose contents are not checked yet (checked through its
    /// writer's snapshot at acknowledgement, or decoded if that never comes).
    pub unchecked: Option<keel::kernel::commit::Head>,
    /// Decode every installed head (else: restore sources, unacknowledged and final heads).
    pub decode_all: bool,
    /// Whether the workload has lazy waits (the only source of early answers).
    pub lazy_waits: bool,
    pub bounded_out: Option<&'static str>,
}

impl World {
    fn new(setup: &Setup, seed: u64, keep_trace: bool) -> Result<World, String> {
        let rng = SeededRng::new(seed ^ 0x6b65_726e_656c_5f77);
        let memory = Arc::new(MemoryCommitter::new());
        let committer = Arc::new(FaultyCommitter::new(memory.clone()));
        let next_fault: Arc<Mutex<Option<Fault>>> = Arc::new(Mutex::new(None));
        let slot = next_fault.clone();
        // The world decides each fault just before the call; the plan only hands it over.
        committer.set_fault_plan(Box::new(move |_| slot.lock().unwrap_or_else(PoisonError::into_inner).take().unwrap_or(Fault::Pass)));
        let deployments = Deployments::shared();
        let root_deployment = deployments.of(setup.workload.root.kind, 0).clone();
        let root_input = Payload::from_json(setup.workload.input(deployments)).map_err(|e| format!("root input: {e}"))?;
        let s = &setup.swarm.shape;
        let limits = TreeLimits::default().with_max_active_children(s.max_active_children).with_max_depth(s.limit_depth);
        let root_id = ProcessId::root_from_hex(&random_hex(&rng, 16)).map_err(|e| e.to_string())?;
        let decode_all = chance(&rng, 125);
        Ok(World {
            swarm: setup.swarm.clone(),
            flaw: setup.flaw,
            targets: setup.targets.iter().map(|t| (*t, false)).collect(),
            schedule: setup.schedule.clone(),
            commit_decisions: 0,
            fired: Vec::new(),
            rng,
            memory,
            committer,
            reached: crate::log_compaction::selected(seed).then(Vec::new),
            next_fault,
            deployments,
            root_deployment,
            root_input,
            root_budget: setup.workload.root_budget,
            limits,
            root_id,
            instances: Vec::new(),
            instances_created: 0,
            time: 0,
            ledger: Ledger::default(),
            oracle: Oracle::default(),
            trace: Trace::new(keep_trace),
            faults: BTreeMap::new(),
            crash_points: BTreeMap::new(),
            crashes: 0,
            host_actions: 0,
            finishing_actions: 0,
            closing_redelivery: false,
            unknown_policy: BTreeMap::new(),
            left: BTreeSet::new(),
            unanswerable: BTreeSet::new(),
            next_signal: 0,
            delivered: Vec::new(),
            heads: BTreeMap::new(),
            last_head: None,
            unchecked: None,
            decode_all,
            lazy_waits: setup.workload.has_lazy_waits(),
            bounded_out: None,
        })
    }

    pub fn now(&self) -> Timestamp {
        Timestamp::saturating_from_millis(BASE_MILLIS + self.time * 7)
    }

    pub fn fire(&mut self, fault: &str) {
        *self.faults.entry(fault.to_owned()).or_insert(0) += 1;
    }

    pub fn log(&mut self, line: String) {
        let t = self.time;
        self.trace.push(format!("{t} {line}"));
    }

    fn new_incarnation(&self) -> Result<IncarnationId, String> {
        IncarnationId::from_hex(&random_hex(&self.rng, 16)).map_err(|e| e.to_string())
    }

    /// Index of the newest instance that has not stopped.
    pub fn newest_live(&self) -> Option<usize> {
        self.instances.iter().rposition(|i| !i.stopped)
    }

    pub fn head_of(&self, i: usize) -> Option<Arc<TreeSnapshot>> {
        self.instances.get(i).and_then(|inst| inst.owner.head().cloned())
    }

    pub fn acked_head(&self, i: usize) -> Option<Arc<TreeSnapshot>> {
        self.instances[i].acked.and_then(|d| self.heads.get(&d.0).cloned())
    }

    /// Starts the root (first instance, or again after a start that never reached the store).
    fn start_root(&mut self) -> Result<(), String> {
        let incarnation = self.new_incarnation()?;
        let config = RootConfig { budget: self.root_budget, capabilities: CapabilitySet::empty(), limits: self.limits };
        let owner = Owner::start(
            self.deployments.resolver.clone(),
            self.root_deployment.clone(),
            self.root_input.clone(),
            self.root_id.clone(),
            incarnation.clone(),
            config,
            self.now(),
        )
        .map_err(|e| format!("start refused: {e}"))?;
        self.log(format!("start inc={}", short(incarnation.as_str())));
        self.add_instance(owner, BTreeSet::new());
        Ok(())
    }

    fn add_instance(&mut self, owner: Owner, restored_pending: BTreeSet<EffectId>) {
        self.instances_created += 1;
        self.instances.push(Instance {
            ordinal: self.instances_created,
            owner,
            outstanding: None,
            queue: Vec::new(),
            stopped: false,
            acked: None,
            acked_pending: BTreeSet::new(),
            restored_pending,
            published: BTreeSet::new(),
            commands: BTreeMap::new(),
            next_command: 1,
            pre_dispatched: BTreeSet::new(),
            stop_unresolved: None,
        });
        let i = self.instances.len() - 1;
        self.pump(i);
    }

    /// Restores the store head in a new owner (or starts again if nothing was stored).
    pub fn restore(&mut self) -> Result<(), String> {
        if self.instances_created >= MAX_INSTANCES {
            self.bounded_out = Some("instance-bound");
            return Ok(());
        }
        let head = futures::executor::block_on(self.committer.load_tree(&self.root_id)).map_err(|e| format!("load: {e}"))?;
        let Some(head) = head else {
            return self.start_root();
        };
        // Restore decodes the stored bytes (never a cached copy): the real recovery path.
        let snap = if self.unchecked.as_ref().is_some_and(|u| u.cut.digest == head.cut.digest) {
            self.unchecked = None;
            self.oracle.on_head(&head, &self.ledger)
        } else {
            self.oracle.round_trip(&head)
        };
        let Some(snap) = snap else { return Err("the store head does not decode".into()) };
        self.heads.insert(head.cut.digest.0, snap.clone());
        let mut pending = BTreeSet::new();
        for p in snap.processes() {
            for e in p.prepared.iter().flat_map(|s| &s.effects) {
                if let (EffectPhase::Pending, Effect::Dispatcher(payload)) = (&e.phase, &e.effect) {
                    pending.insert(e.id.clone());
                    if self.flaw == DriverFlaw::RedispatchRestoredPending {
                        self.physical(None, &e.id, &p.id, payload, true);
                    }
                }
            }
        }
        let incarnation = self.new_incarnation()?;
        self.log(format!("restore seq={} inc={}", head.sequence, short(incarnation.as_str())));
        match Owner::restore(self.deployments.resolver.clone(), self.root_deployment.clone(), &snap, incarnation, self.now()) {
            Ok(owner) => {
                self.add_instance(owner, pending);
                Ok(())
            }
            Err(e) => {
                self.oracle.violate("restore", format!("the store head does not restore: {e}"));
                Err(format!("restore refused: {e}"))
            }
        }
    }

    /// Performs every action the owner has queued.
    pub fn pump(&mut self, i: usize) {
        while let Some(action) = self.instances[i].owner.poll_action() {
            match action {
                Action::Commit(request) => self.on_commit_request(i, request),
                // This world's owners send one boundary per commit (chains stay off).
                Action::CommitChain(chain) => {
                    let ord = self.instances[i].ordinal;
                    self.oracle.violate("commit_chain", format!("instance {ord} sent a chain of {} commits unasked", chain.len()));
                }
                Action::Dispatch { request, cx, .. } => self.on_dispatch_request(i, request, cx.cancel),
                Action::Publish(p) => self.on_publish(i, p),
                Action::Reply { id, result } => self.on_reply(i, id, result),
            }
        }
    }

    fn on_commit_request(&mut self, i: usize, request: CommitRequest) {
        let ord = self.instances[i].ordinal;
        let busy = self.instances[i].outstanding.is_some();
        self.oracle.check(!busy, "commit_in_flight", || format!("instance {ord} issued a commit while another was in flight"));
        self.log(format!("i{ord} commit {} {} bytes={}", request.boundary_name(), describe_request(&request), request.cut().carried_bytes()));
        if self.flaw == DriverFlaw::DispatchBeforePending {
            if let CommitRequest::Effect(b) = &request {
                if b.kind == EffectBoundaryKind::Pending {
                    self.pre_dispatch(i, &request);
                }
            }
        }
        let targeted = self.targets.iter().any(|(t, fired)| !fired && t.boundary == request.boundary_name());
        let result = if !targeted && chance(&self.rng, self.swarm.commit_hold) {
            self.fire("commit.hold");
            self.log(format!("i{ord} hold"));
            None
        } else {
            Some(self.send_commit(i, &request))
        };
        let stored = matches!(result, Some(Ok(())));
        // Only a lazy wait's checkpoint (a `progress` cut) shows a wait open while its
        // Process runs; other cuts are not worth decoding for it.
        let checkpoint = self.lazy_waits && matches!(&request, CommitRequest::Checkpoint(c) if c.kind == CheckpointKind::Progress);
        self.instances[i].outstanding = Some(Outstanding { request, result });
        // A host that races ahead: it learns of a wait from the store before the writer's
        // acknowledgement and answers at once; the owner applies the answer after the ack,
        // before the Process parks.
        if stored && checkpoint && chance(&self.rng, self.swarm.early_answer) {
            // Stored: the store's head is this cut, whole.
            let head = self.memory.head(&self.root_id);
            if let Some(snap) = head.and_then(|h| TreeSnapshot::from_cut(&h.cut).ok()) {
                self.answer_early(i, &snap);
            }
        }
    }

    /// The fault of the next commit: the seed's draw, or the schedule's event when replaying
    /// one (the draw is made either way, so the rng stream is the same).
    fn choose_fault(&mut self, boundary: &str) -> Option<CommitFault> {
        let decision = self.commit_decisions;
        self.commit_decisions += 1;
        let drawn = self.draw_fault(boundary);
        let fault = match &self.schedule {
            None => drawn,
            Some(s) => s.at(decision).and_then(|e| CommitFault::from_name(&e.kind)),
        };
        if let Some(f) = fault {
            self.fired.push(FaultEvent { at: decision, kind: f.name().to_owned() });
        }
        fault
    }

    fn draw_fault(&mut self, boundary: &str) -> Option<CommitFault> {
        if let Some((t, fired)) = self.targets.iter_mut().find(|(t, fired)| !*fired && t.boundary == boundary) {
            *fired = true;
            return Some(t.fault);
        }
        if self.crashes >= self.swarm.max_crashes {
            return None;
        }
        let [fb, la, ca] = self.swarm.commit_faults.get(boundary).copied()?;
        let x = below(&self.rng, 1000) as u32;
        if x < fb {
            Some(CommitFault::FailBefore)
        } else if x < fb + la {
            Some(CommitFault::LoseAck)
        } else if x < fb + la + ca {
            Some(CommitFault::CrashAfter)
        } else {
            None
        }
    }

    /// Sends one commit to the store (through the fault wrapper) and inspects the result.
    fn send_commit(&mut self, i: usize, request: &CommitRequest) -> Result<(), CommitError> {
        let boundary = request.boundary_name();
        let fault = self.choose_fault(boundary);
        if let Some(f) = fault {
            self.crashes += 1;
            self.fire(&format!("commit.{}", f.name()));
            *self.crash_points.entry(format!("{boundary}.{}", f.name())).or_insert(0) += 1;
            let injected = match f {
                CommitFault::FailBefore => Fault::FailBefore,
                CommitFault::LoseAck => Fault::LoseAck,
                CommitFault::CrashAfter => Fault::CrashAfter,
            };
            *self.next_fault.lock().unwrap_or_else(PoisonError::into_inner) = Some(injected);
        }
        // A writer whose incarnation no longer holds the head is stale: the store must fence
        // it (an activation is the one commit that replaces the writer).
        let stale = !matches!(request, CommitRequest::Activation(_))
            && self.memory.head(&self.root_id).is_some_and(|h| &h.cut.incarnation != self.instances[i].owner.incarnation());
        let result = futures::executor::block_on(direct::commit(self.committer.as_ref(), request));
        if let Some(reached) = self.reached.as_mut().filter(|_| fault != Some(CommitFault::FailBefore)) {
            reached.push(request.clone());
        }
        let ord = self.instances[i].ordinal;
        self.log(format!("i{ord} store {} -> {}", boundary, result_name(&result)));
        if stale {
            let fenced = matches!(&result, Err(CommitError::TreeIncarnationConflict { .. }) | Err(CommitError::Injected { .. }));
            self.oracle.check(fenced, "fencing", || format!("a commit of superseded instance {ord} was not fenced: {result:?}"));
        }
        if let Err(CommitError::TreeIncarnationConflict { .. }) = &result {
            self.fire("seen.fenced");
        }
        self.inspect_store(i);
        result
    }

    /// Checks a head the store newly installed.
    fn inspect_store(&mut self, i: usize) {
        let Some(head) = self.memory.head(&self.root_id) else { return };
        if self.last_head == Some(head.cut.digest) {
            return;
        }
        self.last_head = Some(head.cut.digest);
        self.oracle.on_history(&self.memory.history(&self.root_id));
        let writer = self.instances[i].owner.incarnation().clone();
        self.oracle.check(head.cut.incarnation == writer, "fencing", || {
            format!("a commit by {} installed a head of incarnation {}", writer, head.cut.incarnation)
        });
        // Heads are checked in installation order: an older unchecked one is decoded now.
        if let Some(older) = self.unchecked.take() {
            self.check_decoded(&older);
        }
        if self.decode_all {
            self.check_decoded(&head);
        } else {
            self.unchecked = Some(head);
        }
    }

    fn check_decoded(&mut self, head: &keel::kernel::commit::Head) {
        if let Some(snap) = self.oracle.on_head(head, &self.ledger) {
            self.heads.insert(head.cut.digest.0, snap);
        }
    }

    /// The owner acknowledged `digest`: its head is that cut (kernel contract); it also
    /// stands in for decoding the stored head when that head is still unchecked.
    fn on_acknowledged(&mut self, i: usize, digest: Digest) {
        let ord = self.instances[i].ordinal;
        let Some(snap) = self.instances[i].owner.head().cloned() else {
            self.oracle.violate("kernel_contract", format!("instance {ord} has no head after an acknowledged commit"));
            return;
        };
        self.oracle.check(snap.digest() == digest, "kernel_contract", || {
            format!("instance {ord}'s head after the acknowledgement is not the cut it committed")
        });
        if let Some(head) = self.unchecked.take_if(|u| u.cut.digest == digest) {
            self.oracle.on_head_built(&head, &snap, &self.ledger);
        }
        self.heads.insert(digest.0, snap);
    }

    /// Sends a host command to instance `i`.
    pub fn command(&mut self, i: usize, command: Command, sent: Sent) {
        let inst = &mut self.instances[i];
        let id = inst.next_command;
        inst.next_command += 1;
        inst.commands.insert(id, sent);
        let ord = inst.ordinal;
        self.log(format!("i{ord} command {id} {}", command_name(&command)));
        let now = self.now();
        self.instances[i].owner.handle(Input::Command { id, command }, now);
        self.pump(i);
    }

    fn events(&self) -> Vec<(Event, u32)> {
        let mut events = Vec::new();
        for (i, inst) in self.instances.iter().enumerate() {
            if inst.outstanding.is_some() {
                events.push((Event::Ack(i), self.swarm.ack_weight));
            }
            for (j, q) in inst.queue.iter().enumerate() {
                events.push((if q.started { Event::Complete(i, j) } else { Event::Start(i, j) }, 1));
            }
        }
        events
    }

    fn apply(&mut self, event: Event) -> Result<(), String> {
        match event {
            Event::Ack(i) => {
                let Some(out) = self.instances[i].outstanding.take() else { return Ok(()) };
                let result = match out.result {
                    Some(r) => r,
                    None => self.send_commit(i, &out.request),
                };
                self.deliver_ack(i, &out.request, result)
            }
            Event::Start(i, j) => {
                let q = &mut self.instances[i].queue[j];
                q.started = true;
                let (effect, process, payload) = (q.effect.clone(), q.process.clone(), q.payload.clone());
                self.physical(Some(i), &effect, &process, &payload, false);
                Ok(())
            }
            Event::Complete(i, j) => {
                let first_started = self.instances[i].queue.iter().position(|q| q.started);
                if first_started != Some(j) {
                    self.fire("dispatch.reordered");
                }
                let q = self.instances[i].queue.remove(j);
                let outcome = self.report(&q);
                let ord = self.instances[i].ordinal;
                let what = match &outcome {
                    Ok(s) => s.status.as_str().to_owned(),
                    Err(e) => format!("error {e}"),
                };
                self.log(format!("i{ord} complete {} {what}", short(q.effect.as_str())));
                let now = self.now();
                self.instances[i].owner.handle(Input::DispatchDone { effect: q.effect, outcome }, now);
                self.pump(i);
                Ok(())
            }
        }
    }

    fn deliver_ack(&mut self, i: usize, request: &CommitRequest, result: Result<(), CommitError>) -> Result<(), String> {
        let ord = self.instances[i].ordinal;
        self.log(format!("i{ord} ack {} {}", request.boundary_name(), result_name(&result)));
        if result.is_ok() {
            let inst = &mut self.instances[i];
            inst.acked = Some(request.cut().digest);
            if let CommitRequest::Effect(b) = request {
                if b.kind == EffectBoundaryKind::Pending {
                    inst.acked_pending.insert(b.effect_id.clone());
                }
            }
        }
        let failed = result.is_err();
        let now = self.now();
        self.instances[i].owner.handle(Input::CommitDone(result), now);
        if !failed {
            self.on_acknowledged(i, request.cut().digest);
        }
        self.pump(i);
        // A lazy wait's opening checkpoint is now acknowledged: a host may answer before the
        // Process parks (the answer waits for the next Step).
        let opened_lazily = self.lazy_waits && matches!(request, CommitRequest::Checkpoint(c) if c.kind == CheckpointKind::Progress);
        if !failed && opened_lazily && !self.instances[i].stopped && chance(&self.rng, self.swarm.ahead_answer) {
            self.answer_ahead(i);
        }
        if failed {
            self.writer_failed(i, request)?;
        }
        Ok(())
    }

    /// A writer whose commit failed: it must have stopped (RuntimeError, no Result after its
    /// last ack). It is dropped; the head is restored elsewhere if no writer is left.
    fn writer_failed(&mut self, i: usize, failed: &CommitRequest) -> Result<(), String> {
        let inst = &self.instances[i];
        let ord = inst.ordinal;
        self.oracle.check(inst.stopped, "e.published_acknowledged", || format!("instance {ord} failed a commit but did not publish Stopped"));
        if inst.acked.is_none() {
            let nothing = inst.published.is_empty();
            self.oracle.check(nothing, "e.published_acknowledged", || format!("instance {ord} published before its first acknowledged commit"));
        }
        // A RuntimeError lists every in-flight dispatch and the Effect whose
        // settled/resolved commit failed; a failed pending commit adds nothing.
        let listed: BTreeSet<EffectId> = inst.stop_unresolved.iter().flatten().cloned().collect();
        let in_flight: Vec<EffectId> = inst.queue.iter().map(|q| q.effect.clone()).filter(|e| !listed.contains(e)).collect();
        self.oracle.check(in_flight.is_empty(), "runtime_error", || format!("instance {ord}'s RuntimeError omits in-flight dispatches {in_flight:?}"));
        if let CommitRequest::Effect(b) = failed {
            let wanted = b.kind != EffectBoundaryKind::Pending;
            let present = listed.contains(&b.effect_id);
            self.oracle.check(wanted == present, "runtime_error", || {
                format!("instance {ord}'s RuntimeError lists={present} the Effect of its failed {} boundary", b.kind.as_str())
            });
        }
        self.drop_instance(i)
    }

    pub fn drop_instance(&mut self, i: usize) -> Result<(), String> {
        let inst = self.instances.remove(i);
        let never_ran = inst.queue.iter().filter(|q| !q.started).count();
        self.log(format!("i{} dropped ({never_ran} queued dispatches never ran)", inst.ordinal));
        if self.instances.iter().all(|x| x.stopped) {
            self.restore()?;
        }
        Ok(())
    }

    fn run(&mut self) -> Result<(), String> {
        self.start_root()?;
        let mut turns = 0u64;
        loop {
            if self.bounded_out.is_some() || self.instances.is_empty() {
                return Ok(());
            }
            if turns >= MAX_WORLD_TURNS {
                self.oracle.violate("h.termination", format!("the run did not settle within {MAX_WORLD_TURNS} world turns"));
                self.bounded_out = Some("turn-bound");
                return Ok(());
            }
            turns += 1;
            self.time += 1;
            if self.host_actions < MAX_HOST_ACTIONS && chance(&self.rng, self.swarm.host_rate) && self.host_action()? {
                self.host_actions += 1;
                continue;
            }
            let events = self.events();
            if events.is_empty() {
                if self.finishing_actions < MAX_FINISHING_ACTIONS && self.finishing_action()? {
                    self.finishing_actions += 1;
                    continue;
                }
                return Ok(());
            }
            let weights: Vec<u32> = events.iter().map(|(_, w)| *w).collect();
            let k = weighted(&self.rng, &weights).unwrap_or(0);
            self.apply(events[k].0)?;
        }
    }

    /// Ends the run: whole-history checks and the outcome.
    fn finish(mut self, seed: u64, scenario: &str, fatal: Option<String>) -> RunOutcome {
        let history = self.memory.history(&self.root_id);
        if let Some(head) = self.unchecked.take() {
            self.check_decoded(&head);
        }
        self.oracle.on_finish(&history, &self.ledger);
        // The final head is always decoded: it is what a later restore would read.
        let final_head = match self.memory.head(&self.root_id) {
            Some(h) => self.oracle.round_trip(&h),
            None => None,
        };
        let outcome = if let Some(f) = fatal {
            self.oracle.violate("kernel_contract", f.clone());
            "aborted".to_owned()
        } else if let Some(b) = self.bounded_out {
            b.to_owned()
        } else {
            match &final_head {
                None => "no-head".to_owned(),
                Some(h) if h.processes().iter().all(|p| p.is_terminal()) => format!("terminal:{}", h.root().status.as_str()),
                Some(h) => {
                    let stuck: Vec<String> = h
                        .processes()
                        .iter()
                        .filter(|p| !p.is_terminal() && !parked_by_policy(h, p, &self.left))
                        .map(|p| format!("{}={}", short(p.id.as_str()), p.status.as_str()))
                        .collect();
                    let explained = stuck.is_empty();
                    self.oracle.check(explained, "h.termination", || {
                        format!("run ended with live processes {stuck:?} not parked on an Unknown the policy left")
                    });
                    if explained { "parked-unresolved".to_owned() } else { "stuck".to_owned() }
                }
            }
        };
        let dispatches = self.ledger.total();
        let schedule = FaultSchedule::new(std::mem::take(&mut self.fired));
        self.log(format!("end {outcome} dispatches={dispatches}"));
        let invariants_checked = self.oracle.checks();
        let violations: Vec<Violation> = self.oracle.into_violations();
        let (trace_hash, trace) = self.trace.finish();
        let mut swarm = self.swarm.describe();
        swarm.insert("flaw".into(), format!("{:?}", self.flaw));
        RunOutcome {
            report: RunReport {
                seed,
                scenario: scenario.to_owned(),
                trace_hash,
                trace,
                timeline: None,
                faults_fired: self.faults,
                crash_points_hit: self.crash_points,
                invariants_checked,
                violations,
                swarm,
                outcome,
            },
            final_head,
            dispatches,
            schedule,
        }
    }
}

/// Runs one seeded world.
pub fn run_world(setup: &Setup, seed: u64, scenario: &str, keep_trace: bool) -> RunOutcome {
    let mut world = match World::new(setup, seed, keep_trace) {
        Ok(w) => w,
        Err(e) => {
            let mut trace = Trace::new(keep_trace);
            trace.push(format!("setup failed: {e}"));
            let (trace_hash, trace) = trace.finish();
            return RunOutcome {
                report: RunReport {
                    seed,
                    scenario: scenario.to_owned(),
                    trace_hash,
                    trace,
                    timeline: None,
                    faults_fired: BTreeMap::new(),
                    crash_points_hit: BTreeMap::new(),
                    invariants_checked: 0,
                    violations: vec![Violation { invariant: "setup".into(), detail: e }],
                    swarm: setup.swarm.describe(),
                    outcome: "aborted".into(),
                },
                final_head: None,
                dispatches: 0,
                schedule: FaultSchedule::default(),
            };
        }
    };
    let fatal = world.run().err();
    if fatal.is_none() {
        world.probe_retired();
    }
    let (reached, memory) = (world.reached.take(), world.memory.clone());
    let mut outcome = world.finish(seed, scenario, fatal);
    // `log_compaction_same_head`, after the run and from its requests only: the trace is
    // already hashed.
    if let Some(requests) = reached {
        crate::log_compaction::check_into(&mut outcome.report, seed, &requests, &memory);
    }
    outcome.report.swarm.insert("workload.processes".into(), setup.workload.process_count().to_string());
    outcome.report.swarm.insert("workload.tree".into(), setup.workload.describe());
    outcome.report.swarm.insert("workload.root_budget".into(), format!("{:?}", setup.workload.root_budget));
    outcome
}

/// The payload of dispatcher Effect `effect` of `process` in `snap`.
pub fn dispatcher_payload(snap: &TreeSnapshot, process: &ProcessId, effect: &EffectId) -> Option<Payload> {
    process_payload(snap.process(process)?, effect)
}

/// The payload of a dispatcher Effect in one Process's prepared batch.
pub fn process_payload(p: &keel::kernel::process::Process, effect: &EffectId) -> Option<Payload> {
    let e = p.prepared.as_ref()?.effects.iter().find(|e| &e.id == effect)?;
    match &e.effect {
        Effect::Dispatcher(p) => Some(p.clone()),
        Effect::Framework(_) => None,
    }
}

/// Whether a live Process is legitimately parked at the end: it holds an Unknown the policy
/// left, or waits (on children) above a descendant that does.
fn parked_by_policy(head: &TreeSnapshot, p: &keel::kernel::process::Process, left: &BTreeSet<EffectId>) -> bool {
    let holds = p.prepared.as_ref().is_some_and(|s| s.unknown_ids().iter().any(|e| left.contains(e)));
    if holds {
        return true;
    }
    p.status == keel::kernel::status::Status::Waiting
        && head
            .processes()
            .iter()
            .filter(|c| c.relation.parent_id.as_ref() == Some(&p.id) && c.relation.depth == p.relation.depth + 1)
            .any(|c| parked_by_policy(head, c, left) || (c.is_terminal() && has_parked_descendant(head, c, left)))
}

fn has_parked_descendant(head: &TreeSnapshot, p: &keel::kernel::process::Process, left: &BTreeSet<EffectId>) -> bool {
    head.processes()
        .iter()
        .filter(|c| c.relation.parent_id.as_ref() == Some(&p.id))
        .any(|c| (!c.is_terminal() && parked_by_policy(head, c, left)) || has_parked_descendant(head, c, left))
}

pub fn settlement(status: SettlementStatus, payload: Json) -> Settlement {
    // Small, kernel-free JSON objects always fit a payload.
    let payload = Payload::from_json(payload).unwrap_or_else(|_| Payload::null());
    Settlement { status, payload }
}
