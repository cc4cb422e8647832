//! `clock-and-rng`: the harness self-test. It checks the simulation substrate (madsim's clock,
//! scheduler, seeded rng and task abort) and the campaign machinery, NOT keel's kernel.
//!
//! A seed expands into a few tasks that sleep seeded random durations, and a supervisor that
//! makes a fixed number of fault decisions; a scheduled decision aborts one still-running task
//! (fault kind `task_abort`). Invariants, checked against what the tasks observed:
//! - `time_monotonic`: simulated time read by any task never goes backwards;
//! - `sleep_not_early`: a sleep of `d` never wakes before `d` has passed;
//! - `finished_exactly_once`: every task that was not aborted finished exactly once (and its
//!   join handle says so); every aborted task never finished (and its handle says cancelled).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use madsim::rand::Rng;
use madsim::runtime::Runtime;
use madsim::task::JoinHandle;
use madsim::time::TimeHandle;

use crate::coverage::Coverage;
use crate::schedule::{FaultEvent, FaultSchedule, ScheduleError};
use crate::swarm_rng::SwarmRng;
use crate::trace::Trace;
use crate::world::{RunOptions, RunReport, Scenario, Schedulable, Violation};

pub const NAME: &str = "clock-and-rng";
pub const TASK_ABORT: &str = "task_abort";

/// The self-test's one fault; it has no commit boundaries.
pub static COVERAGE: Coverage = Coverage {
    world: NAME,
    fault_kinds: &[TASK_ABORT],
    boundaries: &[],
    boundary_faults: &[],
};

const SWARM_STREAM: u64 = 1;
const SCHEDULE_STREAM: u64 = 2;

/// The harness self-test scenario.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClockAndRng;

/// What a seed expands into (printed as the run's swarm options).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Swarm {
    tasks: u64,
    steps: u64,
    max_sleep_us: u64,
    abort_percent: u64,
    decisions: u64,
}

impl Swarm {
    fn of(seed: u64) -> Self {
        let mut rng = SwarmRng::new(seed, SWARM_STREAM);
        Swarm {
            tasks: rng.range_inclusive(2, 6),
            steps: rng.range_inclusive(1, 4),
            max_sleep_us: *rng
                .pick(&[1_000, 10_000, 100_000, 1_000_000])
                .unwrap_or(&1_000),
            abort_percent: *rng.pick(&[0, 10, 30, 60]).unwrap_or(&0),
            decisions: rng.range_inclusive(1, 8),
        }
    }

    fn to_map(&self, schedule: &FaultSchedule) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("tasks".to_string(), self.tasks.to_string()),
            ("steps".to_string(), self.steps.to_string()),
            ("max_sleep_us".to_string(), self.max_sleep_us.to_string()),
            ("abort_percent".to_string(), self.abort_percent.to_string()),
            ("decisions".to_string(), self.decisions.to_string()),
            ("schedule".to_string(), schedule.to_string()),
        ])
    }
}

impl Scenario for ClockAndRng {
    fn name(&self) -> &str {
        NAME
    }
    fn coverage(&self) -> Option<&'static Coverage> {
        Some(&COVERAGE)
    }

    fn description(&self) -> &str {
        "harness self-test (madsim clock, rng, task abort; not a kernel test)"
    }

    fn run(&self, seed: u64, options: &RunOptions) -> RunReport {
        let schedule = self.schedule_of(seed);
        match self.run_with_schedule(seed, &schedule, options) {
            Ok(report) => report,
            // schedule_of only makes valid schedules; say so loudly if that ever breaks.
            Err(e) => {
                let mut report = RunReport::new(NAME, seed);
                report
                    .violations
                    .push(Violation::new("schedule_valid", e.to_string()));
                report
            }
        }
    }

    fn schedulable(&self) -> Option<&dyn Schedulable> {
        Some(self)
    }
}

impl Schedulable for ClockAndRng {
    fn schedule_of(&self, seed: u64) -> FaultSchedule {
        let swarm = Swarm::of(seed);
        let mut rng = SwarmRng::new(seed, SCHEDULE_STREAM);
        let events = (0..swarm.decisions)
            .filter(|_| rng.percent(swarm.abort_percent))
            .map(|at| FaultEvent {
                at,
                kind: TASK_ABORT.to_string(),
            })
            .collect();
        FaultSchedule::new(events)
    }

    fn run_with_schedule(
        &self,
        seed: u64,
        schedule: &FaultSchedule,
        options: &RunOptions,
    ) -> Result<RunReport, ScheduleError> {
        let swarm = Swarm::of(seed);
        schedule.validate(&[TASK_ABORT], swarm.decisions)?;
        Ok(execute(seed, &swarm, schedule, options))
    }
}

/// Everything the tasks and the supervisor record; shared behind one lock (the simulation is
/// single-threaded, the lock only satisfies `spawn`'s `Send`).
struct World {
    trace: Trace,
    last_seen: Duration,
    invariants_checked: u64,
    violations: Vec<Violation>,
    finished: Vec<u64>,
    aborted: Vec<bool>,
    aborts_fired: u64,
}

impl World {
    /// Reads simulated time and checks it did not go backwards.
    fn observe(&mut self, who: &str) -> Duration {
        let now = TimeHandle::current().elapsed();
        self.invariants_checked += 1;
        if now < self.last_seen {
            self.violations.push(Violation::new(
                "time_monotonic",
                format!(
                    "{who} read t={}ns after t={}ns",
                    now.as_nanos(),
                    self.last_seen.as_nanos()
                ),
            ));
        }
        self.last_seen = self.last_seen.max(now);
        now
    }
}

fn lock(world: &Mutex<World>) -> MutexGuard<'_, World> {
    // A panic while holding the lock already fails the run; keep reading what was recorded.
    world
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn execute(seed: u64, swarm: &Swarm, schedule: &FaultSchedule, options: &RunOptions) -> RunReport {
    let tasks = usize::try_from(swarm.tasks).unwrap_or(usize::MAX);
    let world = Arc::new(Mutex::new(World {
        trace: Trace::new(options.keep_trace),
        last_seen: Duration::ZERO,
        invariants_checked: 0,
        violations: Vec::new(),
        finished: vec![0; tasks],
        aborted: vec![false; tasks],
        aborts_fired: 0,
    }));
    let runtime = Runtime::with_seed_and_config(seed, madsim::Config::default());
    let end = runtime.block_on(supervise(swarm.clone(), schedule.clone(), world.clone()));

    let mut world = lock(&world);
    let mut report = RunReport::new(NAME, seed);
    report.swarm = swarm.to_map(schedule);
    if world.aborts_fired > 0 {
        report
            .faults_fired
            .insert(TASK_ABORT.to_string(), world.aborts_fired);
    }
    let finished = world.finished.iter().filter(|&&n| n > 0).count();
    report.outcome = format!(
        "{} tasks x {} steps, {} aborted, {} finished, ended at t={}ns",
        swarm.tasks,
        swarm.steps,
        world.aborts_fired,
        finished,
        end.as_nanos()
    );
    report.invariants_checked = world.invariants_checked;
    report.violations = std::mem::take(&mut world.violations);
    let trace = std::mem::replace(&mut world.trace, Trace::new(false));
    trace.finish_into(&mut report);
    report
}

/// The supervisor: spawns the tasks, makes the fault decisions, joins, checks the end state.
/// Returns the simulated time at the end.
async fn supervise(swarm: Swarm, schedule: FaultSchedule, world: Arc<Mutex<World>>) -> Duration {
    let mut handles: Vec<JoinHandle<()>> = Vec::new();
    for task in 0..swarm.tasks {
        handles.push(madsim::task::spawn(worker(
            task,
            swarm.clone(),
            world.clone(),
        )));
    }
    lock(&world)
        .trace
        .push(format!("spawned {} tasks", swarm.tasks));

    for decision in 0..swarm.decisions {
        let pause =
            Duration::from_micros(madsim::rand::thread_rng().gen_range(0..=swarm.max_sleep_us));
        madsim::time::sleep(pause).await;
        let mut w = lock(&world);
        let now = w.observe("supervisor");
        if schedule.at(decision).is_none() {
            w.trace.push(format!(
                "t={}ns decision {decision}: no fault",
                now.as_nanos()
            ));
            continue;
        }
        let live: Vec<usize> = (0..w.finished.len())
            .filter(|&i| w.finished[i] == 0 && !w.aborted[i])
            .collect();
        if live.is_empty() {
            w.trace.push(format!(
                "t={}ns decision {decision}: {TASK_ABORT} finds no running task",
                now.as_nanos()
            ));
            continue;
        }
        let target = live[madsim::rand::thread_rng().gen_range(0..live.len())];
        if let Some(handle) = handles.get(target) {
            handle.abort();
            w.aborted[target] = true;
            w.aborts_fired += 1;
            w.trace.push(format!(
                "t={}ns decision {decision}: {TASK_ABORT} task {target}",
                now.as_nanos()
            ));
        }
    }

    for (task, handle) in handles.into_iter().enumerate() {
        let joined = handle.await;
        let mut w = lock(&world);
        w.invariants_checked += 1;
        let (aborted, finished) = (w.aborted[task], w.finished[task]);
        let problem = match (aborted, finished, &joined) {
            (false, 1, Ok(())) => None,
            (true, 0, Err(e)) if e.is_cancelled() => None,
            (false, n, Ok(())) => Some(format!("task {task} finished {n} times")),
            (false, n, Err(e)) => Some(format!(
                "task {task} (not aborted) joined with {e}, finished {n} times"
            )),
            (true, n, Ok(())) => Some(format!("aborted task {task} joined Ok, finished {n} times")),
            (true, n, Err(e)) => Some(format!(
                "aborted task {task} joined with {e}, finished {n} times"
            )),
        };
        if let Some(detail) = problem {
            w.violations
                .push(Violation::new("finished_exactly_once", detail));
        }
    }
    let mut w = lock(&world);
    let end = w.observe("supervisor");
    w.trace.push(format!("t={}ns all joined", end.as_nanos()));
    end
}

async fn worker(task: u64, swarm: Swarm, world: Arc<Mutex<World>>) {
    let who = format!("task {task}");
    for step in 0..swarm.steps {
        let asked =
            Duration::from_micros(madsim::rand::thread_rng().gen_range(0..=swarm.max_sleep_us));
        let before = lock(&world).observe(&who);
        madsim::time::sleep(asked).await;
        let mut w = lock(&world);
        let after = w.observe(&who);
        w.invariants_checked += 1;
        if after.saturating_sub(before) < asked {
            w.violations.push(Violation::new(
                "sleep_not_early",
                format!(
                    "{who} asked {}ns, woke after {}ns",
                    asked.as_nanos(),
                    after.saturating_sub(before).as_nanos()
                ),
            ));
        }
        w.trace.push(format!(
            "t={}ns {who} step {step} slept {}ns",
            after.as_nanos(),
            asked.as_nanos()
        ));
    }
    let mut w = lock(&world);
    let slot = usize::try_from(task)
        .ok()
        .and_then(|i| w.finished.get_mut(i));
    if let Some(count) = slot {
        *count += 1;
    }
    let now = w.observe(&who);
    w.trace
        .push(format!("t={}ns {who} finished", now.as_nanos()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_equals_run_with_own_schedule() {
        for seed in 0..20 {
            let opts = RunOptions::default();
            let a = ClockAndRng.run(seed, &opts);
            let b = ClockAndRng
                .run_with_schedule(seed, &ClockAndRng.schedule_of(seed), &opts)
                .unwrap();
            assert_eq!(a, b);
            assert!(a.passed(), "{a}");
        }
    }

    #[test]
    fn some_seeds_abort_tasks() {
        let fired: u64 = (0..40)
            .map(|seed| {
                ClockAndRng
                    .run(seed, &RunOptions::default())
                    .faults_fired
                    .get(TASK_ABORT)
                    .copied()
                    .unwrap_or(0)
            })
            .sum();
        assert!(fired > 0);
    }

    #[test]
    fn bad_schedules_are_refused() {
        let seed = 3;
        let decisions = Swarm::of(seed).decisions;
        let out_of_range = FaultSchedule::new(vec![FaultEvent {
            at: decisions,
            kind: TASK_ABORT.into(),
        }]);
        assert!(matches!(
            ClockAndRng.run_with_schedule(seed, &out_of_range, &RunOptions::default()),
            Err(ScheduleError::DecisionOutOfRange { .. })
        ));
        let unknown = FaultSchedule::new(vec![FaultEvent {
            at: 0,
            kind: "crash".into(),
        }]);
        assert!(matches!(
            ClockAndRng.run_with_schedule(seed, &unknown, &RunOptions::default()),
            Err(ScheduleError::UnknownKind { .. })
        ));
    }

    #[test]
    fn kept_trace_matches_hash() {
        let report = ClockAndRng.run(11, &RunOptions { keep_trace: true });
        let lines = report.trace.clone().unwrap();
        let mut t = Trace::new(false);
        for l in lines {
            t.push(l);
        }
        assert_eq!(t.finish().0, report.trace_hash);
    }
}
