//! The world's store: `FaultyCommitter` over `MemoryCommitter`, behind a recorder that keeps
//! every commit request with its answer (the kernel oracle checks the acknowledged ones), and
//! the fault plan that decides crash / lost ack / failed commit per commit index.

use super::spec::{CommitFaultKind, FaultSpec};
use crate::limits::MAX_INTERACTION_CRASHES;
use crate::swarm_rng::SwarmRng;
use crate::timeline::{MarkKind, Recorder, STORE_LANE};
use keel::env::BoxFuture;
use keel::kernel::commit::faults::FAULT_FAIL_BEFORE;
use keel::kernel::commit::{
    Activation, Checkpoint, CommitCall, CommitCallKind, CommitError, Committer, EffectBoundary, EffectBoundaryKind, Fault,
    FaultyCommitter, Head, MemoryCommitter,
};
use keel::kernel::ids::{EffectId, IncarnationId, ProcessId};
use keel::kernel::owner::CommitRequest;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// One commit call and whether it was acknowledged.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub request: CommitRequest,
    pub acknowledged: bool,
    /// Whether the call reached the memory store (every call but an injected fail-before):
    /// the calls a replay of the store repeats.
    pub reached: bool,
}

/// What the fault plan did.
#[derive(Default, Debug, Clone)]
pub struct FaultLog {
    /// `commit.<kind>` → count.
    pub fired: BTreeMap<String, u64>,
    /// Boundary name → count (every writer-stopping fault, keyed by the boundary it hit).
    pub points: BTreeMap<String, u64>,
    /// (commit index, boundary, fault) in firing order.
    pub events: Vec<(u64, &'static str, CommitFaultKind)>,
    pub commits: u64,
}

struct PlanState {
    spec: FaultSpec,
    rng: SwarmRng,
    log: FaultLog,
    /// Set by [`Store::disarm`]: no fault fires any more, scheduled or drawn.
    disarmed: bool,
}

/// The boundary name of a commit call (`None` for loads).
pub fn boundary_of(kind: &CommitCallKind) -> Option<&'static str> {
    match kind {
        CommitCallKind::Checkpoint(k) => Some(k.as_str()),
        CommitCallKind::Effect { kind, .. } => Some(kind.as_str()),
        CommitCallKind::Activation => Some("activation"),
        CommitCallKind::Load => None,
    }
}

pub struct Store {
    faulty: Arc<FaultyCommitter<MemoryCommitter>>,
    plan: Arc<Mutex<PlanState>>,
    records: Mutex<Vec<Recorded>>,
    timeline: Arc<Recorder>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("records", &lock(&self.records).len()).finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Store {
    /// A store whose commits fail per `faults`; `seed` drives the per-mille draws.
    pub fn new(faults: FaultSpec, seed: u64, timeline: Arc<Recorder>) -> Arc<Store> {
        let faulty = Arc::new(FaultyCommitter::new(MemoryCommitter::new()));
        let plan = Arc::new(Mutex::new(PlanState {
            spec: faults,
            rng: SwarmRng::new(seed, 0xC0FF),
            log: FaultLog::default(),
            disarmed: false,
        }));
        let shared = plan.clone();
        let marks = timeline.clone();
        faulty.set_fault_plan(Box::new(move |call: &CommitCall| {
            let fault = decide(&mut lock(&shared), call);
            let mark = match fault {
                Fault::CrashAfter => Some(MarkKind::Crash),
                Fault::LoseAck => Some(MarkKind::LostAck),
                Fault::FailBefore => Some(MarkKind::FailBefore),
                _ => None,
            };
            if let (Some(mark), Some(boundary)) = (mark, boundary_of(&call.kind)) {
                marks.mark(STORE_LANE, mark, format!("{} at {boundary}", mark.as_str()));
            }
            fault
        }));
        Arc::new(Store { faulty, plan, records: Mutex::new(Vec::new()), timeline })
    }

    pub fn memory(&self) -> &MemoryCommitter {
        self.faulty.inner()
    }

    pub fn fault_log(&self) -> FaultLog {
        lock(&self.plan).log.clone()
    }

    /// Turns every later fault off (the run has used its crash budget or is finishing).
    pub fn disarm(&self) {
        let mut p = lock(&self.plan);
        let replay = p.spec.replay.take();
        p.spec = FaultSpec { replay, ..FaultSpec::default() };
        p.disarmed = true;
    }

    pub fn records(&self) -> Vec<Recorded> {
        lock(&self.records).clone()
    }

    /// The store's current head of `root`, decoded.
    pub fn head_snapshot(&self, root: &ProcessId) -> Option<keel::kernel::snapshot::TreeSnapshot> {
        let head = self.memory().head(root)?;
        keel::kernel::snapshot::TreeSnapshot::from_cut(&head.cut).ok()
    }

    /// Whether the writer `incarnation` had the `pending` boundary of `effect` acknowledged.
    pub fn pending_acknowledged(&self, incarnation: &IncarnationId, effect: &EffectId) -> bool {
        lock(&self.records).iter().any(|r| {
            r.acknowledged
                && &r.request.cut().incarnation == incarnation
                && matches!(&r.request, CommitRequest::Effect(b)
                    if b.kind == EffectBoundaryKind::Pending && &b.effect_id == effect)
        })
    }

    /// The ordinal (0 = the first engine) of the writer with `incarnation`: writers appear in
    /// the records in the order the driver created them (each one's first act is a commit).
    pub fn writer_ordinal(&self, incarnation: &IncarnationId) -> Option<u64> {
        let mut seen: Vec<&IncarnationId> = Vec::new();
        let records = lock(&self.records);
        for r in records.iter() {
            let inc = &r.request.cut().incarnation;
            if !seen.contains(&inc) {
                if inc == incarnation {
                    return Some(seen.len() as u64);
                }
                seen.push(inc);
            }
        }
        None
    }

    fn record(&self, request: CommitRequest, result: &Result<(), CommitError>) {
        let boundary = match &request {
            CommitRequest::Checkpoint(c) => c.kind.as_str(),
            CommitRequest::Effect(b) => b.kind.as_str(),
            CommitRequest::Activation(_) => "activation",
        };
        if self.timeline.keeps() {
            let ack = if result.is_ok() { "acknowledged" } else { "not acknowledged" };
            self.timeline.commit(boundary, result.is_ok(), format!("commit {boundary} ({ack})"));
        }
        let reached = !matches!(result, Err(CommitError::Injected { fault }) if fault == FAULT_FAIL_BEFORE);
        lock(&self.records).push(Recorded { request, acknowledged: result.is_ok(), reached });
    }
}

fn decide(p: &mut PlanState, call: &CommitCall) -> Fault {
    let Some(boundary) = boundary_of(&call.kind) else { return Fault::Pass };
    let index = p.log.commits;
    p.log.commits += 1;
    let stops: u64 = p.log.events.len() as u64;
    let mut kind = p.spec.at.iter().find(|(at, _)| *at == index).map(|(_, k)| *k);
    if kind.is_none() && stops < MAX_INTERACTION_CRASHES {
        // One draw per commit whatever the outcome, so a seed's draws do not shift.
        let draw = p.rng.below(1000);
        let (c, l, f) = (p.spec.crash_per_mille, p.spec.lose_ack_per_mille, p.spec.fail_before_per_mille);
        kind = if draw < c {
            Some(CommitFaultKind::CrashAfter)
        } else if draw < c + l {
            Some(CommitFaultKind::LoseAck)
        } else if draw < c + l + f {
            Some(CommitFaultKind::FailBefore)
        } else {
            None
        };
    }
    if let Some(replay) = &p.spec.replay {
        kind = if p.disarmed { None } else { replay.iter().find(|(at, _)| *at == index).map(|(_, k)| *k) };
    }
    let Some(kind) = kind else { return Fault::Pass };
    *p.log.fired.entry(format!("commit.{}", kind.as_str())).or_insert(0) += 1;
    *p.log.points.entry(format!("{boundary}.{}", kind.as_str())).or_insert(0) += 1;
    p.log.events.push((index, boundary, kind));
    match kind {
        CommitFaultKind::CrashAfter => Fault::CrashAfter,
        CommitFaultKind::LoseAck => Fault::LoseAck,
        CommitFaultKind::FailBefore => Fault::FailBefore,
    }
}

impl Committer for Store {
    fn commit_checkpoint(&self, checkpoint: &Checkpoint) -> BoxFuture<'_, Result<(), CommitError>> {
        let request = CommitRequest::Checkpoint(checkpoint.clone());
        let inner = self.faulty.commit_checkpoint(checkpoint);
        Box::pin(async move {
            let result = inner.await;
            self.record(request, &result);
            result
        })
    }

    fn commit_effect(&self, boundary: &EffectBoundary) -> BoxFuture<'_, Result<(), CommitError>> {
        let request = CommitRequest::Effect(boundary.clone());
        let inner = self.faulty.commit_effect(boundary);
        Box::pin(async move {
            let result = inner.await;
            self.record(request, &result);
            result
        })
    }

    fn activate_tree(&self, activation: &Activation) -> BoxFuture<'_, Result<(), CommitError>> {
        let request = CommitRequest::Activation(activation.clone());
        let inner = self.faulty.activate_tree(activation);
        Box::pin(async move {
            let result = inner.await;
            self.record(request, &result);
            result
        })
    }

    fn load_tree(&self, root: &ProcessId) -> BoxFuture<'_, Result<Option<Head>, CommitError>> {
        self.faulty.load_tree(root)
    }
}
