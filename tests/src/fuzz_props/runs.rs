//! Real kernel runs of the scripted testkit strategy through [`DirectRunner`]: the source of
//! real snapshots for the seed corpus, the structured fuzz target and the snapshot property.
//!
//! A [`Scenario`] is a script for the root, how the dispatcher answers, and what the host does
//! once the tree is idle (answer waits, resolve unknowns, kill, restore…). [`run`] returns the
//! bytes of every acknowledged cut, in commit order.

use super::hosted::{hex, nth, HostedRun};
use keel::env::Timestamp;
use keel::json::{Json, Payload};
use keel::kernel::binding::{Deployment, DeploymentSet};
use keel::kernel::capability::CapabilitySet;
use keel::kernel::dispatcher::{DispatchError, Dispatcher};
use keel::kernel::effect::Settlement;
use keel::kernel::ids::ProcessId;
use keel::kernel::owner::{Command, RootConfig};
use keel::kernel::resource::Budget;
use keel::kernel::signal::SettlementStatus;
use keel::kernel::status::Status;
use keel::kernel::testkit::{script_deployment, script_input, FnDispatcher, Op};
use keel::kernel::tree_limits::TreeLimits;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// How the dispatcher answers its n-th physical call (the list cycles).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DispatchOutcome {
    /// A succeeded settlement echoing the Effect payload.
    Echo,
    /// A definite failed settlement.
    FailedSettlement,
    /// A transport error: the Effect becomes Unknown.
    Lost,
    /// The dispatcher reports cancellation.
    Canceled,
}

/// What the host does once the tree is idle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostAction {
    /// Answers every open external wait of a Waiting Process with this payload.
    AnswerWaits(Json),
    /// Delivers an unaddressed external Signal to the n-th Process (may be refused).
    Signal(u8, Json),
    /// Resolves every Unknown Effect with a succeeded settlement.
    ResolveUnknowns,
    /// Kills the n-th Process (by snapshot order).
    Kill(u8),
    /// Cancels the n-th Process.
    Cancel(u8),
    /// Restores the head in a fresh owner with a new incarnation.
    Restore,
}

/// One run: the root script, the dispatcher's answers and the host's actions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scenario {
    pub ops: Vec<Op>,
    pub dispatch: Vec<DispatchOutcome>,
    pub host: Vec<HostAction>,
    pub budget: Budget,
}

/// Name of the root script deployment; children run [`CHILD_DEPLOYMENT`].
pub const ROOT_DEPLOYMENT: &str = "keel.fuzz.script";
pub const CHILD_DEPLOYMENT: &str = "keel.fuzz.child";

/// The deployments every scenario runs on: a root that may start children of one child
/// deployment (which starts none), both with the same scripted dispatcher.
pub struct World {
    pub root: Deployment,
    pub child: Deployment,
    pub resolver: Arc<DeploymentSet>,
}

impl World {
    pub fn new(dispatch: &[DispatchOutcome]) -> World {
        let outcomes: Vec<DispatchOutcome> = dispatch.to_vec();
        let calls = Arc::new(AtomicU64::new(0));
        let dispatcher: Arc<dyn Dispatcher> = Arc::new(FnDispatcher::new(Arc::new(move |request, _| {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            let outcome = match outcomes.len() {
                0 => DispatchOutcome::Echo,
                len => outcomes[(n % len as u64) as usize],
            };
            match outcome {
                DispatchOutcome::Echo => {
                    Ok(Settlement { status: SettlementStatus::Succeeded, payload: request.payload.clone() })
                }
                DispatchOutcome::FailedSettlement => Ok(Settlement {
                    status: SettlementStatus::Failed,
                    payload: Payload::from_json(Json::str("refused")).expect("small payload"),
                }),
                DispatchOutcome::Lost => Err(DispatchError::Failed("connection lost".into())),
                DispatchOutcome::Canceled => Err(DispatchError::Canceled),
            }
        })));
        let child = script_deployment(CHILD_DEPLOYMENT, Some(dispatcher.clone()), vec![]);
        let root = script_deployment(ROOT_DEPLOYMENT, Some(dispatcher), vec![child.reference().clone()]);
        let resolver = Arc::new(DeploymentSet::new().with(root.clone()).with(child.clone()));
        World { root, child, resolver }
    }

    /// A child op running `script` on the child deployment.
    pub fn child_op(&self, key: &str, script: Vec<Op>, budget: Budget) -> Op {
        Op::Child { deployment: self.child.reference().clone(), script, key: key.into(), budget }
    }
}

pub fn now() -> Timestamp {
    Timestamp::from_millis(1_700_000_000_000).expect("fixed timestamp")
}

pub fn root_id() -> ProcessId {
    ProcessId::root_from_hex(&hex(1)).expect("fixed root id")
}

/// Runs `scenario` on `world` and returns every acknowledged cut, in commit order.
pub fn run_in(world: &World, scenario: &Scenario) -> Vec<Vec<u8>> {
    let config = RootConfig { budget: scenario.budget, capabilities: CapabilitySet::empty(), limits: TreeLimits::default() };
    let input = script_input(&scenario.ops);
    let Some(mut run) = HostedRun::start(world.resolver.clone(), world.root.clone(), input, root_id(), 100, config) else {
        return Vec::new();
    };
    for action in &scenario.host {
        let Some(head) = run.head() else { break };
        match action {
            HostAction::AnswerWaits(payload) => {
                for p in head.processes().iter().filter(|p| p.status == Status::Waiting) {
                    let Some(wait) = &p.current_wait_id else { continue };
                    if let Some(request) = run.signal(Some(wait.clone()), payload) {
                        run.command(Command::Deliver { process: p.id.clone(), requests: vec![request] });
                    }
                }
            }
            HostAction::Signal(n, payload) => {
                let request = run.signal(None, payload);
                if let (Some(p), Some(request)) = (nth(&head, *n), request) {
                    run.command(Command::Deliver { process: p, requests: vec![request] });
                }
            }
            HostAction::ResolveUnknowns => {
                for p in head.processes() {
                    for effect in p.prepared.as_ref().map(|s| s.unknown_ids()).unwrap_or_default() {
                        let settlement = Settlement {
                            status: SettlementStatus::Succeeded,
                            payload: Payload::from_json(Json::str("resolved by host")).expect("small payload"),
                        };
                        run.command(Command::Resolve { process: p.id.clone(), effect, settlement });
                    }
                }
            }
            HostAction::Kill(n) | HostAction::Cancel(n) => {
                if let Some(process) = nth(&head, *n) {
                    let reason = "host request".to_string();
                    let command = match action {
                        HostAction::Kill(_) => Command::Kill { process, reason },
                        _ => Command::Cancel { process, reason },
                    };
                    run.command(command);
                }
            }
            HostAction::Restore => {
                if !run.restore(&head) {
                    break;
                }
            }
        }
        run.run_to_idle();
    }
    run.finish()
}

/// Runs `scenario` on a fresh [`World`] built from its dispatch outcomes.
pub fn run(scenario: &Scenario) -> Vec<Vec<u8>> {
    run_in(&World::new(&scenario.dispatch), scenario)
}

/// The fixed scenarios the seed corpus is captured from: dispatch, wait, child, unknown +
/// resolve, kill, cancel, failure, restore and a budget-exhausted run.
pub fn seed_scenarios(world: &World) -> Vec<(&'static str, Scenario)> {
    use DispatchOutcome::*;
    use HostAction::*;
    let obj = keel::json::parse(br#"{"k":[1,2.5,"x",null,true],"s":"\u00e9\n"}"#).expect("static json");
    let s = |ops: Vec<Op>, dispatch: Vec<DispatchOutcome>, host: Vec<HostAction>| Scenario {
        ops,
        dispatch,
        host,
        budget: Budget::unlimited(),
    };
    vec![
        ("dispatch", s(vec![Op::Dispatch(Json::str("hello")), Op::Dispatch(obj.clone()), Op::Checkpoint], vec![Echo], vec![])),
        ("dispatch-failed", s(vec![Op::Dispatch(Json::u64(7))], vec![FailedSettlement], vec![])),
        ("wait", s(vec![Op::Wait("approval".into())], vec![], vec![AnswerWaits(Json::str("yes"))])),
        (
            "wait-signal-first",
            s(vec![Op::Checkpoint, Op::Wait("w".into())], vec![], vec![Signal(0, obj.clone()), AnswerWaits(obj.clone())]),
        ),
        (
            "child",
            s(
                vec![world.child_op("worker", vec![Op::Dispatch(Json::str("c")), Op::Checkpoint], Budget::finite(5, 2, 5))],
                vec![Echo],
                vec![],
            ),
        ),
        (
            "child-wait",
            s(
                vec![world.child_op("asker", vec![Op::Wait("question".into())], Budget::unlimited()), Op::Dispatch(Json::str("after"))],
                vec![Echo],
                vec![AnswerWaits(Json::str("answer"))],
            ),
        ),
        (
            "unknown-resolve",
            s(vec![Op::Dispatch(Json::str("x")), Op::Checkpoint], vec![Lost], vec![Restore, ResolveUnknowns]),
        ),
        ("kill-unknown", s(vec![Op::Dispatch(Json::str("x"))], vec![Canceled], vec![Kill(0)])),
        (
            "kill-child",
            s(vec![world.child_op("w", vec![Op::Wait("forever".into())], Budget::unlimited())], vec![], vec![Kill(0)]),
        ),
        ("cancel-wait", s(vec![Op::Wait("k".into())], vec![], vec![Cancel(0)])),
        ("fail", s(vec![Op::Checkpoint, Op::Fail("nope".into())], vec![], vec![])),
        (
            "budget",
            Scenario {
                ops: vec![Op::Checkpoint, Op::Checkpoint, Op::Checkpoint, Op::Dispatch(Json::str("late"))],
                dispatch: vec![],
                host: vec![],
                budget: Budget::finite(2, 1, 2),
            },
        ),
    ]
}

/// Every distinct acknowledged cut of the seed scenarios, tagged with the scenario name.
pub fn seed_cuts() -> Vec<(&'static str, Vec<u8>)> {
    let world = World::new(&[]);
    let mut out: Vec<(&'static str, Vec<u8>)> = Vec::new();
    for (name, scenario) in seed_scenarios(&world) {
        let world = World::new(&scenario.dispatch);
        for cut in run_in(&world, &scenario) {
            if !out.iter().any(|(_, c)| *c == cut) {
                out.push((name, cut));
            }
        }
    }
    out
}
