//! The world shared by the crash child (`src/bin/keel-crash-child.rs`) and the kill test
//! (`tests/durable_kill.rs`): the same deployments in both processes, a dispatcher that
//! records every physical dispatch durably before answering, and a host loop that drives a
//! tree to completion (resolving Unknowns, answering the external wait).
//!
//! Everything here is deterministic (fixed ids and timestamps), so the child and the test
//! derive the same Deployment refs, EffectIds and WaitIds.

use keel::env::Timestamp;
use keel::json::{Json, Payload};
use keel::kernel::binding::{Deployment, DeploymentSet};
use keel::kernel::capability::CapabilitySet;
use keel::kernel::direct::DirectRunner;
use keel::kernel::dispatcher::{DispatchError, Dispatcher};
use keel::kernel::effect::Settlement;
use keel::kernel::ids::{IncarnationId, ProcessId, SignalId};
use keel::kernel::owner::{Command, Publication, RootConfig};
use keel::kernel::resource::Budget;
use keel::kernel::result::ProcessResult;
use keel::kernel::signal::{SettlementStatus, SignalRequest};
use keel::kernel::status::Status;
use keel::kernel::testkit::{script_deployment, FnDispatcher, Op};
use keel::kernel::tree_limits::TreeLimits;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The dispatch record inside the store directory: one line per physical dispatch.
pub const DISPATCH_LOG: &str = "dispatches.log";
/// The SQLite store's file inside the directory (the SQLite runs of the kill test).
pub const SQLITE_FILE: &str = "store.sqlite";
/// The Effect payload the dispatcher answers with an uncertain failure (becomes Unknown).
pub const UNCERTAIN: &str = "uncertain";

pub fn now() -> Timestamp {
    Timestamp::from_millis(1_700_000_000_000).expect("a fixed valid timestamp")
}

pub fn root_id() -> ProcessId {
    ProcessId::root_from_hex(&format!("{:032x}", 1)).expect("a fixed valid id")
}

pub fn incarnation(n: u64) -> IncarnationId {
    IncarnationId::from_hex(&format!("{n:032x}")).expect("a fixed valid id")
}

pub fn root_config() -> RootConfig {
    RootConfig {
        budget: Budget::unlimited(),
        capabilities: CapabilitySet::empty(),
        limits: TreeLimits::default(),
    }
}

/// The deployments and the dispatch record of one store directory.
pub struct World {
    pub resolver: Arc<DeploymentSet>,
    pub root: Deployment,
    pub child: Deployment,
    pub dispatch_log: PathBuf,
}

impl World {
    pub fn new(dir: &Path) -> World {
        let dispatch_log = dir.join(DISPATCH_LOG);
        let dispatcher = recording_dispatcher(dispatch_log.clone());
        let child = script_deployment("keel.durable.child", Some(dispatcher.clone()), vec![]);
        let root = script_deployment(
            "keel.durable.root",
            Some(dispatcher),
            vec![child.reference().clone()],
        );
        let resolver = Arc::new(DeploymentSet::new().with(child.clone()).with(root.clone()));
        World { resolver, root, child, dispatch_log }
    }

    /// A script that reaches every kind of commit: dispatches (pending, settled), a progress
    /// checkpoint, an Unknown the host resolves (resolved), an external wait (parked, then a
    /// signals checkpoint), a child with its own dispatch (child_start), and the terminal cut.
    pub fn script(&self) -> Vec<Op> {
        vec![
            Op::Dispatch(Json::str("a")),
            Op::Checkpoint,
            Op::Dispatch(Json::str(UNCERTAIN)),
            Op::Wait("approval".into()),
            Op::Child {
                deployment: self.child.reference().clone(),
                script: vec![Op::Dispatch(Json::str("c")), Op::Checkpoint],
                key: "worker".into(),
                budget: Budget::finite(10, 5, 10),
            },
            Op::Dispatch(Json::str("b")),
        ]
    }

    /// Effect ids of every recorded physical dispatch, in order.
    pub fn dispatches(&self) -> Vec<String> {
        std::fs::read_to_string(&self.dispatch_log)
            .map(|text| text.lines().map(str::to_owned).collect())
            .unwrap_or_default()
    }
}

/// Echoes the payload, except `UNCERTAIN`, which fails uncertainly. Every call is appended to
/// the dispatch log and synced *before* the settlement is returned, so a crash right after a
/// dispatch still shows it.
fn recording_dispatcher(log: PathBuf) -> Arc<dyn Dispatcher> {
    Arc::new(FnDispatcher::new(Arc::new(move |request, _cx| {
        let record = OpenOptions::new().create(true).append(true).open(&log).and_then(|mut f| {
            f.write_all(format!("{}\n", request.effect_id).as_bytes())?;
            f.sync_data()
        });
        if let Err(e) = record {
            return Err(DispatchError::Failed(format!("dispatch log: {e}")));
        }
        if request.payload.value().as_str() == Some(UNCERTAIN) {
            return Err(DispatchError::Failed("connection reset after send".into()));
        }
        Ok(Settlement { status: SettlementStatus::Succeeded, payload: request.payload.clone() })
    })))
}

/// The host's settlement for an Unknown.
pub fn host_settlement() -> Settlement {
    Settlement {
        status: SettlementStatus::Succeeded,
        payload: Payload::from_json(Json::str("settled by host")).expect("a small payload"),
    }
}

pub fn root_result(r: &DirectRunner) -> Option<ProcessResult> {
    let root = r.owner.root_id().clone();
    r.published.iter().find_map(|p| match p {
        Publication::Finished { result } if result.process_id == root => Some(result.clone()),
        _ => None,
    })
}

/// Runs the tree until the root's Result is published: between runs, resolves every Unknown
/// in the acknowledged head with the host settlement, then answers the root's external wait.
pub fn drive_to_completion(r: &mut DirectRunner) -> Result<ProcessResult, String> {
    for _ in 0..64 {
        r.run_to_idle();
        if let Some(e) = r.owner.stopped() {
            return Err(format!("owner stopped: {e:?}"));
        }
        if let Some(result) = root_result(r) {
            return Ok(result);
        }
        let head = r.owner.head().cloned().ok_or("no acknowledged head")?;
        let mut acted = false;
        for p in head.processes() {
            for effect in p.prepared.as_ref().map(|b| b.unknown_ids()).unwrap_or_default() {
                let command = Command::Resolve {
                    process: p.id.clone(),
                    effect,
                    settlement: host_settlement(),
                };
                r.command(command).map_err(|e| format!("resolve: {e:?}"))?;
                acted = true;
            }
        }
        if acted {
            continue;
        }
        let root = head.root();
        match (&root.status, &root.current_wait_id) {
            (Status::Waiting, Some(wait)) => {
                let answer = SignalRequest::new(
                    SignalId::external("signal:approval").map_err(|e| e.to_string())?,
                    Some(wait.clone()),
                    Payload::from_json(Json::str("approved")).map_err(|e| e.to_string())?,
                )
                .map_err(|e| e.to_string())?;
                let command = Command::Deliver { process: root.id.clone(), requests: vec![answer] };
                r.command(command).map_err(|e| format!("deliver: {e:?}"))?;
            }
            (status, _) => return Err(format!("stuck: root is {status:?} with nothing to do")),
        }
    }
    Err("no completion after 64 host turns".into())
}
