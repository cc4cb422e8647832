//! Kernel tests through the real owner (DirectRunner + MemoryCommitter + the scripted
//! strategy): each invariant of `kernel::invariants` this layer keeps has a case that fails if
//! it breaks.

mod chains;
mod children;
mod compaction;
mod control;
mod crash;
mod cut_cache;
mod dispatch_order;
mod lifecycle;
mod oracle;
mod record_writer;
mod reservations;
mod segment_records;
mod signals;
mod snapshot_rules;

use crate::env::Timestamp;
use crate::json::{Json, Payload};
use crate::kernel::binding::{Deployment, DeploymentSet};
use crate::kernel::capability::CapabilitySet;
use crate::kernel::commit::{Committer, MemoryCommitter};
use crate::kernel::direct::DirectRunner;
use crate::kernel::dispatcher::{DispatchError, Dispatcher};
use crate::kernel::effect::Settlement;
use crate::kernel::ids::{IncarnationId, ProcessId};
use crate::kernel::owner::{Owner, Publication, RootConfig};
use crate::kernel::resource::Budget;
use crate::kernel::result::ProcessResult;
use crate::kernel::signal::SettlementStatus;
use crate::kernel::snapshot::TreeSnapshot;
use crate::kernel::testkit::{script_deployment, script_input, FnDispatcher, Op};
use crate::kernel::tree_limits::TreeLimits;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub(crate) fn now() -> Timestamp {
    Timestamp::from_millis(1_700_000_000_000).unwrap()
}

pub(crate) fn hex(n: u64) -> String {
    format!("{n:032x}")
}

/// A world whose dispatcher counts physical calls and answers via `behavior`.
pub(crate) struct World {
    pub calls: Arc<AtomicU64>,
    pub deployment: Deployment,
    pub resolver: Arc<DeploymentSet>,
    pub committer: Arc<MemoryCommitter>,
}

pub(crate) type Behavior = Arc<dyn Fn(u64) -> Result<Settlement, DispatchError> + Send + Sync>;

pub(crate) fn ok_settlement(v: &str) -> Result<Settlement, DispatchError> {
    Ok(Settlement {
        status: SettlementStatus::Succeeded,
        payload: Payload::from_json(Json::str(v)).unwrap(),
    })
}

pub(crate) fn world(behavior: Behavior) -> World {
    let calls = Arc::new(AtomicU64::new(0));
    let c = calls.clone();
    let dispatcher: Arc<dyn Dispatcher> = Arc::new(FnDispatcher::new(Arc::new(move |_, _| {
        let n = c.fetch_add(1, Ordering::SeqCst) + 1;
        behavior(n)
    })));
    let deployment = script_deployment("keel.test.script", Some(dispatcher), vec![]);
    let resolver = Arc::new(DeploymentSet::new().with(deployment.clone()));
    World { calls, deployment, resolver, committer: Arc::new(MemoryCommitter::new()) }
}

pub(crate) fn echo_world() -> World {
    world(Arc::new(|n| ok_settlement(&format!("answer-{n}"))))
}

/// The acknowledged cuts of an echo run with dispatches, two children waited for together,
/// and their retirement: heads of every record kind, for decoders compared with each other.
pub(crate) fn children_run_cuts() -> Vec<crate::kernel::commit::TreeCut> {
    use crate::kernel::child::{Boundary, Condition};
    use crate::kernel::testkit::ChildPlan;
    let w = echo_world();
    let d = w.deployment.reference().clone();
    let child = |key: &str| ChildPlan::new(key, &d, vec![Op::Dispatch(Json::str(key))], Budget::unlimited());
    let op = Op::Children { children: vec![child("a"), child("b")], boundary: Boundary::SubtreeDrained, condition: Condition::All };
    let mut r = w.start(&[Op::Dispatch(Json::str("first")), op, Op::Checkpoint, Op::Checkpoint], Budget::unlimited());
    r.run_to_idle();
    w.check(&r);
    r.acknowledged_cuts()
}

pub(crate) fn config(budget: Budget) -> RootConfig {
    RootConfig { budget, capabilities: CapabilitySet::empty(), limits: TreeLimits::default() }
}

impl World {
    pub fn start(&self, ops: &[Op], budget: Budget) -> DirectRunner {
        let owner = Owner::start(
            self.resolver.clone(),
            self.deployment.clone(),
            script_input(ops),
            ProcessId::root_from_hex(&hex(1)).unwrap(),
            IncarnationId::from_hex(&hex(100)).unwrap(),
            config(budget),
            now(),
        )
        .expect("start");
        DirectRunner::new(owner, self.committer.clone() as Arc<dyn Committer>, now())
    }

    pub fn head(&self) -> TreeSnapshot {
        let root = ProcessId::root_from_hex(&hex(1)).unwrap();
        let head = futures::executor::block_on(self.committer.load_tree(&root)).unwrap().expect("head");
        TreeSnapshot::from_cut(&head.cut).expect("head decodes")
    }

    /// Restores the committer's head in a new owner with a new incarnation.
    pub fn restore(&self, incarnation: u64) -> DirectRunner {
        let snap = self.head();
        let owner = Owner::restore(
            self.resolver.clone(),
            self.deployment.clone(),
            &snap,
            IncarnationId::from_hex(&hex(incarnation)).unwrap(),
            now(),
        )
        .expect("restore");
        DirectRunner::new(owner, self.committer.clone() as Arc<dyn Committer>, now())
    }

    /// Starts the scripted root under an explicit root configuration (budget, limits).
    pub fn start_with(&self, ops: &[Op], config: RootConfig) -> DirectRunner {
        let owner = Owner::start(
            self.resolver.clone(),
            self.deployment.clone(),
            script_input(ops),
            ProcessId::root_from_hex(&hex(1)).unwrap(),
            IncarnationId::from_hex(&hex(100)).unwrap(),
            config,
            now(),
        )
        .expect("start");
        DirectRunner::new(owner, self.committer.clone() as Arc<dyn Committer>, now())
    }

    /// The oracle over one runner of this world (see [`check_run`]).
    pub fn check(&self, r: &DirectRunner) {
        check_run(r, &self.committer);
    }

    pub fn dispatches(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }
}

pub(crate) fn root_result(r: &DirectRunner) -> Option<ProcessResult> {
    let root = r.owner.root_id().clone();
    r.published.iter().find_map(|p| match p {
        Publication::Finished { result } if result.process_id == root => Some(result.clone()),
        _ => None,
    })
}

/// Runs the invariant oracle over everything one runner saw: every acknowledged cut it committed
/// (one-cut checks, consecutive-head checks and boundary-aware checks), its publications
/// against those heads, and the store's whole history of the tree.
pub(crate) fn check_run(r: &DirectRunner, committer: &MemoryCommitter) {
    use crate::kernel::invariants::{check_commits, check_history, check_publications};
    let acknowledged: Vec<&crate::kernel::owner::CommitRequest> =
        r.commits.iter().filter(|(_, ok)| *ok).map(|(c, _)| c).collect();
    let mut violations = check_commits(acknowledged.iter().copied());
    let heads: Vec<TreeSnapshot> =
        r.acknowledged_cuts().iter().filter_map(|c| TreeSnapshot::from_cut(c).ok()).collect();
    violations.extend(check_publications(&r.published, &heads));
    violations.extend(check_history(&committer.history(r.owner.root_id())));
    let report: Vec<String> = violations.iter().map(ToString::to_string).collect();
    assert!(report.is_empty(), "invariant violations:\n{}", report.join("\n"));
}

/// The published Result of `process`, if any.
pub(crate) fn result_for(r: &DirectRunner, process: &ProcessId) -> Option<ProcessResult> {
    r.published.iter().find_map(|p| match p {
        Publication::Finished { result } if &result.process_id == process => Some(result.clone()),
        _ => None,
    })
}

/// The child with `key` in a cut.
pub(crate) fn child_by_key<'a>(s: &'a TreeSnapshot, key: &str) -> &'a crate::kernel::process::Process {
    s.processes()
        .iter()
        .find(|p| p.relation.child_key.as_ref().is_some_and(|k| k.as_str() == key))
        .unwrap_or_else(|| panic!("no child `{key}`"))
}

/// An external Signal request with a string payload.
pub(crate) fn request(id: &str, wait: Option<&crate::kernel::ids::WaitId>, value: &str) -> crate::kernel::signal::SignalRequest {
    crate::kernel::signal::SignalRequest::new(
        crate::kernel::ids::SignalId::external(id).unwrap(),
        wait.cloned(),
        Payload::from_json(Json::str(value)).unwrap(),
    )
    .unwrap()
}

/// Answers the current wait of `process` (as found in the committer's head).
pub(crate) fn answer_current(
    r: &mut DirectRunner,
    head: &TreeSnapshot,
    process: &ProcessId,
    id: &str,
    value: &str,
) -> Result<crate::kernel::owner::Reply, crate::kernel::owner::CommandError> {
    let p = head.process(process).expect("process in head");
    let wait = p.current_wait_id.clone().expect("a current wait");
    r.command(crate::kernel::owner::Command::Deliver { process: process.clone(), requests: vec![request(id, Some(&wait), value)] })
}

/// The canonical text of a Result's output.
pub(crate) fn output_text(result: &ProcessResult) -> String {
    result.output.as_ref().map(|o| o.value().to_canonical_string()).unwrap_or_default()
}

pub(crate) fn stopped(r: &DirectRunner) -> bool {
    r.published.iter().any(|p| matches!(p, Publication::Stopped { .. }))
}

/// Decodes every head both ways, the whole text and reusing the previous head, asserts they
/// agree (snapshot and tree digest), and hands each (previous, reusing) pair to `on_pair`.
/// Returns the last head decoded.
fn decode_heads_both_ways(
    cuts: &[crate::kernel::commit::TreeCut],
    mut on_pair: impl FnMut(&TreeSnapshot, &TreeSnapshot),
) -> Option<TreeSnapshot> {
    let mut previous: Option<TreeSnapshot> = None;
    for cut in cuts {
        let whole = TreeSnapshot::decode(&cut.bytes().unwrap()).unwrap();
        let reusing = TreeSnapshot::decode_reusing(cut, previous.as_ref()).unwrap();
        assert_eq!(reusing, whole);
        assert_eq!(reusing.digest(), cut.digest);
        if let Some(p) = &previous {
            on_pair(p, &reusing);
        }
        previous = Some(reusing);
    }
    previous
}
