//! Reservations of a prepared Step hold against every later admission, including the
//! Engine's own child-wait satisfaction.
//!
//! The scripted strategy always parks on a child wait right after opening it, so this file
//! uses a tiny strategy that opens a child wait and then dispatches *instead of* parking: the
//! child can finish while the parent's batch (and its reserved settlement Signal) is prepared.

use super::*;
use crate::kernel::binding::Deployment;
use crate::kernel::capability::CapabilitySet;
use crate::kernel::child::{Boundary, ChildSpec, ChildWaitSpec, Condition};
use crate::kernel::descriptor::Descriptor;
use crate::kernel::effect::{Effect, FrameworkEffect};
use crate::kernel::engine_signal::{ChildStartResult, ChildWaitOpened};
use crate::kernel::ids::{ChildKey, WaitKey};
use crate::kernel::owner::Command;
use crate::kernel::signal::Signal;
use crate::kernel::status::Status;
use crate::kernel::transition::Transition;
use crate::kernel::waist::{Definition, Execution, ExecutionState, StepContext, StepError};
use crate::json::{Digest, FromJson, ObjectBuilder, ObjectReader};
use crate::text::QualifiedName;

const KIND: &str = "keel.test.sidestep";

#[derive(Clone)]
struct Config {
    child: crate::kernel::deployment::DeploymentRef,
    child_budget: Budget,
    /// Dispatcher Effects in the batch that sidesteps the child wait.
    dispatches: usize,
}

struct Sidestep {
    descriptor: Descriptor,
    config: Config,
}

struct SidestepExecution {
    phase: u64,
    config: Config,
}

fn bad(e: impl ToString) -> StepError {
    StepError::other(e.to_string())
}

impl Execution for SidestepExecution {
    fn step(&mut self, _cx: &StepContext, signals: &[Signal]) -> Result<Transition, StepError> {
        let t = match self.phase {
            // Start one child that waits for "go".
            0 => Transition::Continue {
                consumed: 0,
                effects: vec![Effect::Framework(FrameworkEffect::StartChild(ChildSpec {
                    key: ChildKey::parse("c").map_err(bad)?,
                    deployment_ref: self.config.child.clone(),
                    input: script_input(&[Op::Wait("go".into())]),
                    budget: self.config.child_budget,
                    capabilities: CapabilitySet::empty(),
                }))],
            },
            // Open a child wait on it.
            1 => {
                let started = ChildStartResult::parse(signals.first().ok_or_else(|| bad("no start result"))?).map_err(bad)?;
                let child = started.outcome.map_err(|f| bad(f.message.as_str()))?;
                let spec = ChildWaitSpec {
                    key: WaitKey::parse("kids").map_err(bad)?,
                    children: vec![child],
                    boundary: Boundary::TerminalResult,
                    condition: Condition::All,
                };
                Transition::Continue { consumed: 1, effects: vec![Effect::Framework(FrameworkEffect::WaitChildren(spec))] }
            }
            // Consume the opening and dispatch instead of parking on the wait.
            2 => {
                ChildWaitOpened::parse(signals.first().ok_or_else(|| bad("no opening"))?).map_err(bad)?;
                let p = Payload::from_json(Json::str("side")).map_err(bad)?;
                Transition::Continue { consumed: 1, effects: vec![Effect::Dispatcher(p); self.config.dispatches] }
            }
            _ => Transition::Complete {
                consumed: signals.len() as u32,
                output: Payload::from_json(Json::Array(vec![])).map_err(bad)?,
            },
        };
        self.phase += 1;
        Ok(t)
    }
    fn snapshot(&self) -> Result<ExecutionState, StepError> {
        Ok(ExecutionState {
            kind: QualifiedName::parse(KIND).map_err(bad)?,
            payload: Payload::from_json(ObjectBuilder::new().field("phase", &self.phase).build()).map_err(bad)?,
            segments: Vec::new(),
        })
    }
}

impl Definition for Sidestep {
    fn descriptor(&self) -> &Descriptor {
        &self.descriptor
    }
    fn child_deployments(&self) -> Vec<crate::kernel::deployment::DeploymentRef> {
        vec![self.config.child.clone()]
    }
    fn start(&self, _input: &Payload) -> Result<Box<dyn Execution>, StepError> {
        Ok(Box::new(SidestepExecution { phase: 0, config: self.config.clone() }))
    }
    fn restore(&self, _cx: &StepContext, state: &ExecutionState) -> Result<Box<dyn Execution>, StepError> {
        if state.kind.as_str() != KIND {
            return Err(bad("foreign state"));
        }
        let mut r = ObjectReader::new(state.payload.value()).map_err(bad)?;
        let phase = u64::from_json(r.required_value("phase").map_err(bad)?).map_err(bad)?;
        r.finish().map_err(bad)?;
        Ok(Box::new(SidestepExecution { phase, config: self.config.clone() }))
    }
}

/// Runs the sidestep parent under `budget` and `limits` with a child granted `child_budget`;
/// the child finishes while the parent's first dispatch is held.
fn run(budget: Budget, child_budget: Budget, limits: TreeLimits, dispatches: usize) -> (DirectRunner, Arc<MemoryCommitter>) {
    let w = echo_world();
    let descriptor = Descriptor::new(
        "keel.test.sidestep",
        "Opens a child wait and dispatches instead of parking (test strategy).",
        crate::json::parse(br#"{"type":"array"}"#).unwrap(),
        crate::json::parse(br#"{"type":"array"}"#).unwrap(),
        None,
    )
    .unwrap();
    let config = Config { child: w.deployment.reference().clone(), child_budget, dispatches };
    let definition = Sidestep { descriptor, config };
    let dispatcher = Arc::new(FnDispatcher::echo());
    let parent = Deployment::new(Arc::new(definition), Some(dispatcher), Digest::of(b"impl"), Digest::of(b"sidestep"));
    let resolver = Arc::new(DeploymentSet::new().with(w.deployment.clone()).with(parent.clone()));
    let committer = Arc::new(MemoryCommitter::new());
    let cfg = crate::kernel::owner::RootConfig { budget, capabilities: CapabilitySet::empty(), limits };
    let owner = Owner::start(
        resolver,
        parent,
        Payload::from_json(Json::Array(vec![])).unwrap(),
        ProcessId::root_from_hex(&hex(1)).unwrap(),
        IncarnationId::from_hex(&hex(9)).unwrap(),
        cfg,
        now(),
    )
    .unwrap();
    let mut r = DirectRunner::new(owner, committer.clone() as Arc<dyn Committer>, now());
    let mut held = r.take_dispatches();
    assert_eq!(held.len(), 1, "the parent's dispatch is in flight");
    let head = TreeSnapshot::decode(&r.owner.head().unwrap().bytes().clone()).unwrap();
    let child = child_by_key(&head, "c").clone();
    assert_eq!(child.status, Status::Waiting);
    let wait = child.current_wait_id.clone().unwrap();
    let reply = r.command(Command::Deliver { process: child.id.clone(), requests: vec![request("signal:go", Some(&wait), "go")] });
    assert!(reply.is_ok(), "{reply:?}");
    let (effect, outcome) = held.pop().unwrap().run(1);
    r.complete(effect, outcome);
    r.run_to_idle();
    (r, committer)
}

#[test]
fn a_satisfaction_that_would_eat_the_reserved_settlement_signal_is_refused() {
    // Parent signals: start result, opening, one reserved settlement = 3, plus the child's
    // permanent debit of 2. The satisfaction would be the 6th charge against a quota of 5.
    let (r, committer) = run(Budget::finite(10, 10, 5), Budget::finite(5, 1, 2), TreeLimits::default(), 1);
    let result = root_result(&r).expect("parent finished");
    assert_eq!(result.status(), Status::Failed, "{:?}", result.termination);
    assert_eq!(result.termination.failure.unwrap().code.as_str(), "engine.limit.child_wait_signal");
    check_run(&r, &committer);
}

#[test]
fn a_satisfaction_that_would_eat_the_reserved_pending_slot_is_refused() {
    // Two pending slots. The prepared batch consumes the one pending record (the opening) and
    // reserves two settlement slots: a satisfaction now would leave no room for them.
    let limits = TreeLimits::default().with_max_pending_signals(2);
    let (r, committer) = run(Budget::unlimited(), Budget::unlimited(), limits, 2);
    let result = root_result(&r).expect("parent finished");
    assert_eq!(result.status(), Status::Failed, "{:?}", result.termination);
    assert_eq!(result.termination.failure.unwrap().code.as_str(), "engine.limit.child_wait_signal");
    check_run(&r, &committer);
}

#[test]
fn with_room_for_both_the_satisfaction_and_the_settlement_arrive() {
    let (r, committer) = run(Budget::finite(10, 10, 6), Budget::finite(5, 1, 2), TreeLimits::default(), 1);
    let result = root_result(&r).expect("parent finished");
    assert_eq!(result.status(), Status::Completed, "{:?}", result.termination);
    check_run(&r, &committer);
    let (r, committer) = run(Budget::unlimited(), Budget::unlimited(), TreeLimits::default().with_max_pending_signals(3), 2);
    let result = root_result(&r).expect("parent finished");
    assert_eq!(result.status(), Status::Completed, "{:?}", result.termination);
    check_run(&r, &committer);
}
