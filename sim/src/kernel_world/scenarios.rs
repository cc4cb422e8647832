//! The kernel-level scenarios: the swarm generator and fixed shapes. Every one is
//! [`Schedulable`]: its commit faults replay from a printed schedule, so `minimize` shrinks them.

use super::bounds::MAX_COMMIT_DECISIONS;
use super::compat::{RunOptions, RunReport, Scenario, Violation};
use super::dispatcher::effect_payload;
use super::shape::{ChildNode, Node, NodeKind, NodeOp, Workload};
use super::swarm::{CommitFault, HostAction, ShapeParams, Swarm, BOUNDARIES};
use super::world::{run_world, DriverFlaw, RunOutcome, Setup, Target};
use crate::coverage::Coverage;
use crate::schedule::{FaultSchedule, ScheduleError};
use crate::world::Schedulable;
use keel::env::SeededRng;
use keel::kernel::dispatcher::ReplayPolicy;
use keel::kernel::resource::Budget;
use keel::kernel::status::Status;

/// One seed of the swarm generator, with an optional broken driver.
pub fn swarm_run(seed: u64, flaw: DriverFlaw, options: &RunOptions) -> RunReport {
    let mut setup = KernelSwarm.setup(seed);
    setup.flaw = flaw;
    run_world(&setup, seed, KernelSwarm::NAME, options.keep_trace).report
}

/// A kernel scenario as two halves: what a seed sets up, and the checks a fixed shape adds on
/// top of the oracle. Running it, with the seed's faults or a schedule, follows from them.
trait KernelScenario: Send + Sync {
    const NAME: &'static str;
    const DESCRIPTION: &'static str;
    fn setup(&self, seed: u64) -> Setup;
    fn judge(&self, _seed: u64, outcome: RunOutcome) -> RunReport {
        outcome.report
    }

    fn run_kernel(&self, seed: u64, schedule: Option<FaultSchedule>, options: &RunOptions) -> RunReport {
        let mut setup = self.setup(seed);
        setup.schedule = schedule;
        self.judge(seed, run_world(&setup, seed, Self::NAME, options.keep_trace))
    }
}

impl<K: KernelScenario> Scenario for K {
    fn name(&self) -> &str {
        Self::NAME
    }
    fn coverage(&self) -> Option<&'static Coverage> {
        Some(&super::COVERAGE)
    }
    fn description(&self) -> &str {
        Self::DESCRIPTION
    }
    fn run(&self, seed: u64, options: &RunOptions) -> RunReport {
        self.run_kernel(seed, None, options)
    }
    fn schedulable(&self) -> Option<&dyn Schedulable> {
        Some(self)
    }
}

/// The kinds a kernel fault schedule names: the commit faults.
const SCHEDULE_KINDS: [&str; 3] = ["fail_before", "lose_ack", "crash_after"];

impl<K: KernelScenario> Schedulable for K {
    /// The commit faults the seed fires (known by running it once: they depend on the run).
    fn schedule_of(&self, seed: u64) -> FaultSchedule {
        run_world(&self.setup(seed), seed, Self::NAME, false).schedule
    }

    fn run_with_schedule(&self, seed: u64, schedule: &FaultSchedule, options: &RunOptions) -> Result<RunReport, ScheduleError> {
        schedule.validate(&SCHEDULE_KINDS, MAX_COMMIT_DECISIONS)?;
        Ok(self.run_kernel(seed, Some(schedule.clone()), options))
    }
}

/// `kernel-swarm`: every seed draws its fault mix, host behavior and script tree.
pub struct KernelSwarm;

impl KernelScenario for KernelSwarm {
    const NAME: &'static str = "kernel-swarm";
    const DESCRIPTION: &'static str =
        "kernel owner in direct mode, scripted trees: swarm of dispatch, commit and host faults with crash/restore, oracle over ground truth";
    fn setup(&self, seed: u64) -> Setup {
        let rng = SeededRng::new(seed);
        let swarm = Swarm::draw(&rng);
        let workload = Workload::generate(&rng, &swarm.shape);
        Setup { swarm, workload, flaw: DriverFlaw::None, targets: vec![], schedule: None }
    }
}

fn flat_shape() -> ShapeParams {
    ShapeParams {
        max_depth: 1,
        fanout: 0,
        op_weights: [1, 0, 0, 0, 0, 0],
        same_identity: 0,
        tight_budget: 0,
        finite_root: false,
        max_active_children: 16,
        limit_depth: 16,
    }
}

fn testkit(depth: u32, ops: Vec<NodeOp>) -> Node {
    Node { kind: NodeKind::Testkit, depth, ops }
}

/// The fixture that holds `boundary`: one never-replayed dispatch where it can.
fn matrix_fixture(boundary: &str) -> Node {
    let dispatch = || NodeOp::Dispatch(effect_payload(1, ReplayPolicy::Never));
    match boundary {
        "child_start" => testkit(
            0,
            vec![NodeOp::Child(Box::new(ChildNode {
                node: testkit(1, vec![NodeOp::Checkpoint]),
                key: "c".into(),
                budget: Budget::finite(3, 0, 3),
            }))],
        ),
        "signals" | "parked" => testkit(0, vec![NodeOp::Wait("w".into())]),
        "progress" => testkit(0, vec![NodeOp::Checkpoint, NodeOp::Checkpoint]),
        _ => testkit(0, vec![dispatch()]),
    }
}

/// The number of crash-matrix cases (boundaries × commit faults).
pub const MATRIX_CASES: u64 = (BOUNDARIES.len() * CommitFault::ALL.len()) as u64;

/// The (boundary, fault) of crash-matrix seed `seed`.
pub fn matrix_case(seed: u64) -> (&'static str, CommitFault) {
    let k = (seed % MATRIX_CASES) as usize;
    (BOUNDARIES[k / CommitFault::ALL.len()], CommitFault::ALL[k % CommitFault::ALL.len()])
}

/// `kernel-crash-matrix`: the fixture crashed at one boundary with one fault (chosen by
/// `seed % 30`), then restored and driven to completion. On top of the oracle it checks that the root
/// completes, the crash point was hit once, the Effect was dispatched once (zero times when the
/// pending boundary was committed but never dispatched), usage is steps 2, effects 1, signals 1,
/// and a crashed progress or child start ends as an uncrashed run would.
pub struct KernelCrashMatrix;

impl KernelScenario for KernelCrashMatrix {
    const NAME: &'static str = "kernel-crash-matrix";
    const DESCRIPTION: &'static str =
        "one-Effect fixtures crashed at every commit boundary with every commit fault, restored and driven to completion (spec 9.6)";
    fn setup(&self, seed: u64) -> Setup {
        let (boundary, fault) = matrix_case(seed);
        let mut swarm = Swarm::quiet(flat_shape());
        if boundary == "resolved" {
            // Every reported outcome is uncertain: the host must resolve.
            swarm.dispatch_error = 1000;
        }
        let mut targets = vec![Target { boundary, fault }];
        if boundary == "activation" {
            // An activation needs a crash first.
            targets.insert(0, Target { boundary: "start", fault: CommitFault::CrashAfter });
        }
        Setup { swarm, workload: Workload::fixed(matrix_fixture(boundary)), flaw: DriverFlaw::None, targets, schedule: None }
    }

    fn judge(&self, seed: u64, outcome: RunOutcome) -> RunReport {
        let (boundary, fault) = matrix_case(seed);
        let RunOutcome { mut report, final_head, dispatches, .. } = outcome;
        report.swarm.insert("matrix.case".into(), format!("{boundary}.{}", fault.name()));
        let mut expect = |ok: bool, detail: String| {
            report.invariants_checked += 1;
            if !ok {
                report.violations.push(Violation { invariant: "crash_matrix".into(), detail });
            }
        };
        let point = format!("{boundary}.{}", fault.name());
        expect(report.crash_points_hit.get(&point) == Some(&1), format!("crash point {point} was not hit exactly once"));
        let root = final_head.as_ref().map(|h| h.root().clone());
        let status = root.as_ref().map(|r| r.status);
        expect(status == Some(Status::Completed), format!("{point}: the root ended {status:?}, not completed"));
        let uses_dispatch = !matches!(boundary, "child_start" | "signals" | "parked" | "progress");
        if uses_dispatch {
            let expected = if boundary == "pending" && fault != CommitFault::FailBefore { 0 } else { 1 };
            expect(dispatches == expected, format!("{point}: {dispatches} physical dispatches, expected {expected}"));
            if let Some(r) = &root {
                let u = r.usage();
                let got = (u.committed_steps, u.prepared_effects, u.accepted_signals);
                expect(got == (2, 1, 1), format!("{point}: usage {got:?}, expected steps 2, effects 1, signals 1"));
            }
        }
        if boundary == "progress" {
            let steps = root.as_ref().map(|r| r.committed_steps);
            expect(steps == Some(3), format!("{point}: {steps:?} committed steps, expected 3 as uncrashed"));
        }
        if boundary == "child_start" {
            // A retired child counts: its residue record took its place in the cut.
            let n = final_head.as_ref().map(|h| h.processes().len() + h.residues().len());
            expect(n == Some(2), format!("{point}: {n:?} processes, expected the child once"));
        }
        report
    }
}

/// `kernel-stale-writer`: generated trees where the host keeps restoring second writers
/// while the first is alive (some of its commits held in flight); every other fault is off.
pub struct KernelStaleWriter;

impl KernelScenario for KernelStaleWriter {
    const NAME: &'static str = "kernel-stale-writer";
    const DESCRIPTION: &'static str =
        "generated trees where the host restores second writers while the first is alive, commits held in flight: fencing";
    fn setup(&self, seed: u64) -> Setup {
        let rng = SeededRng::new(seed);
        let drawn = Swarm::draw(&rng);
        let mut swarm = Swarm::quiet(drawn.shape.clone());
        swarm.max_crashes = 3;
        swarm.commit_hold = 300;
        swarm.host_rate = 60;
        swarm.host_weights = [(HostAction::StaleWriter, 6), (HostAction::AnswerWait, 4), (HostAction::Adjudicate, 2)].into_iter().collect();
        swarm.dispatch_error = drawn.dispatch_error;
        let workload = Workload::generate(&rng, &swarm.shape);
        Setup { swarm, workload, flaw: DriverFlaw::None, targets: vec![], schedule: None }
    }
}

/// `kernel-fanout-order`: concurrent siblings and batches, no crashes: completion order is
/// the only thing the seed varies besides the tree.
pub struct KernelFanoutOrder;

impl KernelScenario for KernelFanoutOrder {
    const NAME: &'static str = "kernel-fanout-order";
    const DESCRIPTION: &'static str =
        "concurrent siblings and batches without crashes: the seed varies only the tree and the completion order";
    fn setup(&self, seed: u64) -> Setup {
        let rng = SeededRng::new(seed);
        let shape = ShapeParams {
            max_depth: 2,
            fanout: 1000,
            op_weights: [3, 3, 1, 4, 1, 0],
            same_identity: 0,
            tight_budget: 0,
            finite_root: true,
            max_active_children: 16,
            limit_depth: 16,
        };
        let mut swarm = Swarm::quiet(shape);
        swarm.definite_failure = 200;
        swarm.ack_weight = 1;
        let workload = Workload::generate(&rng, &swarm.shape);
        Setup { swarm, workload, flaw: DriverFlaw::None, targets: vec![], schedule: None }
    }
}
