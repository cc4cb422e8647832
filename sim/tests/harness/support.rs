//! Synthetic scenarios with known behavior, to test the framework itself.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use keel_sim::campaign::ProgressStyle;
use keel_sim::cli::Cli;
use keel_sim::registry::Registry;
use keel_sim::scenarios::ClockAndRng;
use keel_sim::schedule::{FaultEvent, FaultSchedule, ScheduleError};
use keel_sim::trace::Trace;
use keel_sim::world::{RunOptions, RunReport, Scenario, Schedulable, Violation};

fn traced(name: &str, seed: u64, options: &RunOptions, lines: &[String]) -> RunReport {
    let mut report = RunReport::new(name, seed);
    let mut trace = Trace::new(options.keep_trace);
    for l in lines {
        trace.push(l.clone());
    }
    trace.finish_into(&mut report);
    report
}

/// Fails (invariant `synthetic`) on seeds divisible by `fail_every`; reports a fault and a
/// crash point per seed so tallies have something to add up.
pub struct Flaky {
    pub fail_every: u64,
}

impl Scenario for Flaky {
    fn name(&self) -> &str {
        "flaky"
    }
    fn description(&self) -> &str {
        "synthetic: fails on multiples of N"
    }
    fn run(&self, seed: u64, options: &RunOptions) -> RunReport {
        let mut r = traced("flaky", seed, options, &[format!("seed {seed}")]);
        r.invariants_checked = 2;
        r.faults_fired.insert("fault_a".into(), seed % 3);
        if seed & 1 == 0 {
            r.crash_points_hit.insert("after_pending".into(), 1);
        }
        r.swarm = BTreeMap::from([("p".to_string(), (seed % 5).to_string())]);
        r.outcome = "synthetic".into();
        if seed.checked_rem(self.fail_every) == Some(0) {
            r.violations.push(Violation::new(
                "synthetic",
                format!("seed {seed} is a multiple of {}", self.fail_every),
            ));
        }
        r
    }
}

/// Panics on seeds that are 1 mod 4.
pub struct Panicky;

impl Scenario for Panicky {
    fn name(&self) -> &str {
        "panicky"
    }
    fn run(&self, seed: u64, options: &RunOptions) -> RunReport {
        if seed % 4 == 1 {
            panic!("synthetic panic at seed {seed}");
        }
        traced("panicky", seed, options, &[format!("ok {seed}")])
    }
}

/// Writes a fresh counter into its trace: never the same twice.
#[derive(Default)]
pub struct Nondeterministic {
    counter: AtomicU64,
}

impl Scenario for Nondeterministic {
    fn name(&self) -> &str {
        "nondeterministic"
    }
    fn run(&self, seed: u64, options: &RunOptions) -> RunReport {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        traced(
            "nondeterministic",
            seed,
            options,
            &[format!("seed {seed} call {n}")],
        )
    }
}

/// Twenty faults per seed (decisions 0..20, kind `f`); fails `needs_culprits` exactly when
/// the schedule still holds all of decisions 3, 11 and 17.
pub struct Culprits;

pub const CULPRITS: [u64; 3] = [3, 11, 17];

impl Scenario for Culprits {
    fn name(&self) -> &str {
        "culprits"
    }
    fn run(&self, seed: u64, options: &RunOptions) -> RunReport {
        match self.run_with_schedule(seed, &self.schedule_of(seed), options) {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        }
    }
    fn schedulable(&self) -> Option<&dyn Schedulable> {
        Some(self)
    }
}

impl Schedulable for Culprits {
    fn schedule_of(&self, _seed: u64) -> FaultSchedule {
        FaultSchedule::new(
            (0..20)
                .map(|at| FaultEvent {
                    at,
                    kind: "f".into(),
                })
                .collect(),
        )
    }
    fn run_with_schedule(
        &self,
        seed: u64,
        schedule: &FaultSchedule,
        options: &RunOptions,
    ) -> Result<RunReport, ScheduleError> {
        schedule.validate(&["f"], 20)?;
        let lines: Vec<String> = schedule
            .events
            .iter()
            .map(|e| format!("fault {}", e.at))
            .collect();
        let mut r = traced("culprits", seed, options, &lines);
        r.faults_fired.insert("f".into(), schedule.len() as u64);
        if CULPRITS.iter().all(|c| schedule.at(*c).is_some()) {
            r.violations.push(Violation::new(
                "needs_culprits",
                "all three culprits present",
            ));
        }
        Ok(r)
    }
}

/// A registry with the self-test and every synthetic scenario.
pub fn test_registry() -> Registry {
    let mut r = Registry::new();
    r.register(Arc::new(ClockAndRng)).unwrap();
    r.register(Arc::new(Flaky { fail_every: 7 })).unwrap();
    r.register(Arc::new(Panicky)).unwrap();
    r.register(Arc::new(Nondeterministic::default())).unwrap();
    r.register(Arc::new(Culprits)).unwrap();
    r
}

pub struct Output {
    pub code: i32,
    pub out: String,
    pub err: String,
}

/// Runs the CLI over `registry` with captured output and no default regressions directory.
pub fn cli(registry: &Registry, line: &str) -> Output {
    cli_with_regressions(
        registry,
        line,
        PathBuf::from("/nonexistent/keel-sim-regressions"),
    )
}

pub fn cli_with_regressions(registry: &Registry, line: &str, regressions: PathBuf) -> Output {
    let args: Vec<String> = line.split_whitespace().map(String::from).collect();
    let cli = Cli {
        registry,
        default_regressions: regressions,
        progress: ProgressStyle::Off,
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = cli.main(&args, &mut out, &mut err);
    out.flush().unwrap();
    Output {
        code,
        out: String::from_utf8(out).unwrap(),
        err: String::from_utf8(err).unwrap(),
    }
}

/// A fresh, empty directory for one test.
pub fn temp_dir(name: &str) -> TestDir {
    let dir = std::env::temp_dir().join(format!("keel-sim-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    TestDir(dir)
}

/// A test's directory, removed when the test is done with it (also when it panics).
pub struct TestDir(PathBuf);

impl std::ops::Deref for TestDir {
    type Target = PathBuf;
    fn deref(&self) -> &PathBuf {
        &self.0
    }
}

impl AsRef<std::path::Path> for TestDir {
    fn as_ref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The summary without its wall-clock lines.
pub fn without_timing(summary: &str) -> String {
    summary
        .lines()
        .filter(|l| !l.starts_with("wall time") && !l.starts_with("runs/s"))
        .collect::<Vec<_>>()
        .join("\n")
}
