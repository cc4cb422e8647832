//! The plug-in point: what one seeded run of a simulated world is, and what it reports.
//!
//! The campaign, the CLI, regressions and the minimizer only ever see [`Scenario`] and
//! [`RunReport`]; a world (today the harness self-test, later the kernel world) plugs in by
//! implementing the trait and registering itself in [`crate::scenarios::builtin_registry`].

use std::any::Any;
use std::collections::BTreeMap;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::coverage::{Coverage, Expected};
use crate::schedule::{FaultSchedule, ScheduleError};

/// Options that change what a run records, never what it does: a run's trace hash is the same
/// whatever these say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunOptions {
    /// Keep the trace lines in [`RunReport::trace`] (replay wants them; campaigns do not).
    pub keep_trace: bool,
}

/// One seeded, deterministic, self-checking run.
///
/// `run(seed, _)` must be a pure function of `seed` (and of the scenario's own configuration):
/// two calls give equal reports. The campaign relies on it to run seeds on any number of
/// worker threads and still print the same summary, and `--check` verifies it.
pub trait Scenario: Send + Sync {
    /// Name used by `--scenario`, regression files and replay commands. No whitespace.
    fn name(&self) -> &str;

    /// What `--scenario` takes to find this scenario again (replay commands, regression
    /// files): its name, or the path a scenario file was loaded from, as it was given.
    fn replay_name(&self) -> &str {
        self.name()
    }

    /// One line for `list` and `--help`.
    fn description(&self) -> &str {
        ""
    }

    /// Runs the world for `seed` and checks its invariants.
    fn run(&self, seed: u64, options: &RunOptions) -> RunReport;

    /// The world's declared fault kinds and crash points (see [`crate::coverage`]). `None`:
    /// the summary lists what fired without judging it.
    fn coverage(&self) -> Option<&'static Coverage> {
        None
    }

    /// The part of [`Scenario::coverage`] this scenario sets out to exercise: a campaign over
    /// it flags what of that part `never fired`. Default: all of it. A scenario file declares
    /// only the features it uses.
    fn expected_coverage(&self) -> Expected {
        Expected::All
    }

    /// The fault-schedule capability, for scenarios whose faults are an explicit list of
    /// events (needed by `minimize`). `None`: faults cannot be replayed from a list.
    fn schedulable(&self) -> Option<&dyn Schedulable> {
        None
    }
}

/// A scenario whose faults for a seed are an explicit [`FaultSchedule`], so a failing seed can
/// be re-run with a subset of its faults. Both halves come together: a scenario that can expand
/// a seed into a schedule must be able to run any subset of it.
pub trait Schedulable: Send + Sync {
    /// The faults `seed` expands into; `Scenario::run(seed)` behaves exactly like
    /// `run_with_schedule(seed, &schedule_of(seed))`.
    fn schedule_of(&self, seed: u64) -> FaultSchedule;

    /// Runs `seed` with `schedule` in place of the seed's own faults. Everything else the seed
    /// decides (sizes, timings, orders) stays as it is.
    fn run_with_schedule(
        &self,
        seed: u64,
        schedule: &FaultSchedule,
        options: &RunOptions,
    ) -> Result<RunReport, ScheduleError>;
}

/// A broken invariant: its name (stable, used to match failures while minimizing) and what
/// was seen.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Violation {
    pub invariant: String,
    pub detail: String,
}

impl Violation {
    pub fn new(invariant: impl Into<String>, detail: impl Into<String>) -> Self {
        Violation {
            invariant: invariant.into(),
            detail: detail.into(),
        }
    }
}

/// Invariant name used when a run panicked instead of returning a report.
pub const PANIC_INVARIANT: &str = "no_panic";

/// Invariant name used when a run raised a panic that something inside the run caught (the
/// runtime turns a panicking task into an outcome): only simulated faults may panic.
pub const UNEXPECTED_PANIC_INVARIANT: &str = "no_unexpected_panic";

/// Invariant name used when `--check` sees two runs of one seed disagree.
pub const DETERMINISM_INVARIANT: &str = "determinism";

/// What one run did and found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunReport {
    pub seed: u64,
    pub scenario: String,
    /// SHA-256 over the run's trace lines (see [`crate::trace::Trace`]).
    pub trace_hash: [u8; 32],
    /// The trace lines, only when [`RunOptions::keep_trace`] was set.
    pub trace: Option<Vec<String>>,
    /// The run's structured timeline (`replay --html`), when [`RunOptions::keep_trace`] was set
    /// and the world records one (the Interaction world does).
    pub timeline: Option<crate::timeline::Timeline>,
    /// Fault kind → how many times it fired.
    pub faults_fired: BTreeMap<String, u64>,
    /// Commit boundary name → how many times the run crashed there.
    pub crash_points_hit: BTreeMap<String, u64>,
    pub invariants_checked: u64,
    pub violations: Vec<Violation>,
    /// The options (fault probabilities, sizes) this seed expanded into, printed with every
    /// result so a failure can be read without re-running it.
    pub swarm: BTreeMap<String, String>,
    /// Short human summary of the run ("4 tasks, 1 aborted, ended at 31ms").
    pub outcome: String,
}

impl RunReport {
    /// An empty report for `seed`; a world fills it in.
    pub fn new(scenario: impl Into<String>, seed: u64) -> Self {
        RunReport {
            seed,
            scenario: scenario.into(),
            trace_hash: [0; 32],
            trace: None,
            timeline: None,
            faults_fired: BTreeMap::new(),
            crash_points_hit: BTreeMap::new(),
            invariants_checked: 0,
            violations: Vec::new(),
            swarm: BTreeMap::new(),
            outcome: String::new(),
        }
    }

    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }

    /// `trace_hash` as lowercase hex.
    pub fn trace_hash_hex(&self) -> String {
        hex(&self.trace_hash)
    }

    /// The swarm options as `k=v k=v`, in key order.
    pub fn swarm_line(&self) -> String {
        join_map(&self.swarm)
    }

    /// The report of a run that panicked: the panic is the violation.
    pub fn panicked(scenario: &str, seed: u64, message: &str) -> Self {
        let mut report = RunReport::new(scenario, seed);
        report
            .violations
            .push(Violation::new(PANIC_INVARIANT, message));
        report.outcome = "panicked".to_string();
        report
    }
}

impl fmt::Display for RunReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "scenario       {}", self.scenario)?;
        writeln!(f, "seed           {}", self.seed)?;
        writeln!(f, "outcome        {}", self.outcome)?;
        writeln!(f, "trace sha256   {}", self.trace_hash_hex())?;
        writeln!(f, "swarm          {}", or_none(&self.swarm_line()))?;
        writeln!(
            f,
            "faults fired   {}",
            or_none(&join_map(&self.faults_fired))
        )?;
        writeln!(
            f,
            "crash points   {}",
            or_none(&join_map(&self.crash_points_hit))
        )?;
        writeln!(f, "invariants     {} checked", self.invariants_checked)?;
        if self.violations.is_empty() {
            write!(f, "result         PASS")
        } else {
            write!(
                f,
                "result         FAIL ({} violations)",
                self.violations.len()
            )?;
            for v in &self.violations {
                write!(f, "\n  {}: {}", v.invariant, v.detail)?;
            }
            Ok(())
        }
    }
}

/// Runs `body`, turning a panic into a report with a [`PANIC_INVARIANT`] violation, so one bad
/// seed cannot end a campaign. Panics the run raised and something inside it caught (a task
/// boundary of the runtime) are not lost: each becomes an [`UNEXPECTED_PANIC_INVARIANT`]
/// violation (simulated faults panic through [`crate::panics::simulated_panic`], which is
/// never recorded). Nothing is printed either way (see [`crate::panics`]).
pub fn run_guarded(scenario: &str, seed: u64, body: impl FnOnce() -> RunReport) -> RunReport {
    // Process-global lazy state must not draw from a simulated rng on the first run only.
    keel::schema::prime();
    let (result, mut panics) = crate::panics::capture(|| catch_unwind(AssertUnwindSafe(body)));
    let mut report = match result {
        Ok(report) => report,
        Err(payload) => {
            let message = panic_message(payload.as_ref());
            // The escaping panic is the last one the hook saw (unless it was simulated).
            let detail = match panics.last() {
                Some(last) if last.message == message => panics.pop().map_or(message, |p| p.describe()),
                _ => message,
            };
            RunReport::panicked(scenario, seed, &detail)
        }
    };
    for p in panics {
        report
            .violations
            .push(Violation::new(UNEXPECTED_PANIC_INVARIANT, p.describe()));
    }
    report
}

/// [`run_guarded`] for a body that may refuse to run (a bad fault schedule): the refusal is
/// returned, a panic is a failing report.
pub fn run_guarded_result<E>(
    scenario: &str,
    seed: u64,
    body: impl FnOnce() -> Result<RunReport, E>,
) -> Result<RunReport, E> {
    let mut refused = None;
    let report = run_guarded(scenario, seed, || match body() {
        Ok(report) => report,
        Err(e) => {
            refused = Some(e);
            RunReport::new(scenario, seed)
        }
    });
    match refused {
        Some(e) => Err(e),
        None => Ok(report),
    }
}

/// The text of a panic payload (`panic!` gives `&str` or `String`).
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_string()
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    use fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

pub(crate) fn join_map<V: fmt::Display>(map: &BTreeMap<String, V>) -> String {
    let parts: Vec<String> = map.iter().map(|(k, v)| format!("{k}={v}")).collect();
    parts.join(" ")
}

fn or_none(s: &str) -> &str {
    if s.is_empty() {
        "(none)"
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guarded_run_turns_a_panic_into_a_violation() {
        let report = run_guarded("x", 7, || panic!("boom {}", 1));
        assert_eq!(report.seed, 7);
        assert!(!report.passed());
        assert_eq!(report.violations.len(), 1);
        assert_eq!(report.violations[0].invariant, PANIC_INVARIANT);
        assert!(
            report.violations[0]
                .detail
                .starts_with("boom 1 (at sim/src/world.rs:"),
            "{}",
            report.violations[0].detail
        );
        let report = run_guarded("x", 7, || crate::panics::simulated_panic("static".into()));
        assert_eq!(report.violations[0].detail, "static");
    }

    #[test]
    fn a_panic_caught_inside_the_run_still_fails_it() {
        let report = run_guarded("x", 4, || {
            // Like the runtime catching a panicking task and carrying on.
            let _ = catch_unwind(|| panic!("swallowed"));
            let _ = catch_unwind(|| crate::panics::simulated_panic("on purpose".into()));
            RunReport::new("x", 4)
        });
        assert_eq!(report.violations.len(), 1, "{report}");
        assert_eq!(report.violations[0].invariant, UNEXPECTED_PANIC_INVARIANT);
        assert!(report.violations[0].detail.starts_with("swallowed (at sim/src/world.rs:"));
    }

    #[test]
    fn guarded_result_passes_a_refusal_through() {
        let refused: Result<RunReport, &str> = run_guarded_result("x", 1, || Err("no"));
        assert_eq!(refused, Err("no"));
        let ok: Result<RunReport, &str> = run_guarded_result("x", 1, || Ok(RunReport::new("x", 1)));
        assert!(ok.is_ok_and(|r| r.passed()));
    }

    #[test]
    fn guarded_run_passes_a_report_through() {
        let report = run_guarded("x", 3, || RunReport::new("x", 3));
        assert!(report.passed());
    }

    #[test]
    fn display_lists_every_violation() {
        let mut report = RunReport::new("x", 1);
        report.violations.push(Violation::new("a", "first"));
        report.violations.push(Violation::new("b", "second"));
        let text = report.to_string();
        assert!(text.contains("FAIL (2 violations)"));
        assert!(text.contains("  a: first"));
        assert!(text.contains("  b: second"));
        assert!(text.contains("swarm          (none)"));
    }
}
