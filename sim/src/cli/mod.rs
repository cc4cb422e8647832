//! The `keel-sim` command line, as a library function so tests can drive it with their own
//! scenarios and captured output. The binary only wires in stdout, stderr and the built-in
//! registry.

pub mod args;

use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::campaign::{self, replay_command, Campaign, CampaignError, ProgressStyle, StoredSeeds};
use crate::minimize::{self, MinimizeError};
use crate::mutation;
use crate::registry::{Registry, ResolveError};
use crate::regressions::{self, RegressionError};
use crate::schedule::ScheduleError;
use crate::world::{run_guarded, run_guarded_result, RunOptions, RunReport, Scenario};
use args::{ArgError, Command, MinimizeArgs, RegressionsArg, ReplayArgs, RunArgs};

/// Exit code: everything passed.
pub const EXIT_OK: i32 = 0;
/// Exit code: a run failed an invariant (or diverged under `--check`).
pub const EXIT_FAILED: i32 = 1;
/// Exit code: the command could not be carried out (bad arguments, unknown scenario, ...).
pub const EXIT_USAGE: i32 = 2;

/// Why a command could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Args(#[from] ArgError),
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    #[error(transparent)]
    Regressions(#[from] RegressionError),
    #[error("{path}:{line}: {source}")]
    RegressionScenario {
        path: PathBuf,
        line: usize,
        #[source]
        source: ResolveError,
    },
    #[error(transparent)]
    Campaign(#[from] CampaignError),
    #[error(transparent)]
    Minimize(#[from] MinimizeError),
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    #[error("scenario `{0}` cannot run an explicit fault schedule")]
    NotSchedulable(String),
    #[error("several scenarios are registered, say which with `--scenario` ({0})")]
    ScenarioRequired(String),
    #[error("cannot write output: {0}")]
    Output(#[from] io::Error),
}

/// The command line over a registry.
pub struct Cli<'a> {
    pub registry: &'a Registry,
    /// Regressions directory used when `run` gets neither `--regressions` nor
    /// `--no-regressions`; skipped if it does not exist.
    pub default_regressions: PathBuf,
    pub progress: ProgressStyle,
}

impl Cli<'_> {
    /// Runs one command line (without the program name); returns the exit code.
    pub fn main(&self, args: &[String], out: &mut dyn Write, err: &mut dyn Write) -> i32 {
        match self.dispatch(args, out, err) {
            Ok(code) => code,
            Err(e) => {
                let _ = writeln!(err, "error: {e}");
                if matches!(e, CliError::Args(_)) {
                    let _ = writeln!(err, "(see `keel-sim --help`)");
                }
                EXIT_USAGE
            }
        }
    }

    fn dispatch(
        &self,
        args: &[String],
        out: &mut dyn Write,
        err: &mut dyn Write,
    ) -> Result<i32, CliError> {
        match args::parse(args)? {
            Command::Help => {
                out.write_all(self.help().as_bytes())?;
                Ok(EXIT_OK)
            }
            Command::List => {
                out.write_all(scenario_table(self.registry, "").as_bytes())?;
                Ok(EXIT_OK)
            }
            Command::Run(a) => self.run(&a, out, err),
            Command::Replay(a) => self.replay(&a, out),
            Command::Minimize(a) => self.minimize(&a, out),
        }
    }

    /// The `--help` text, listing the registered scenarios.
    pub fn help(&self) -> String {
        let mut s = String::from(HELP);
        s.push_str("\nSCENARIOS:\n");
        s.push_str(&scenario_table(self.registry, "  "));
        s
    }

    fn scenario(&self, arg: Option<&str>) -> Result<Arc<dyn Scenario>, CliError> {
        if let Some(name) = arg {
            return Ok(self.registry.resolve(name)?);
        }
        match self.registry.scenarios() {
            [only] => Ok(only.clone()),
            all => {
                let names: Vec<&str> = all.iter().map(|s| s.name()).collect();
                Err(CliError::ScenarioRequired(names.join(", ")))
            }
        }
    }

    fn run(&self, a: &RunArgs, out: &mut dyn Write, err: &mut dyn Write) -> Result<i32, CliError> {
        let scenarios: Vec<Arc<dyn Scenario>> = if a.scenarios.is_empty() {
            self.registry.scenarios().to_vec()
        } else {
            a.scenarios
                .iter()
                .map(|n| self.registry.resolve(n))
                .collect::<Result<_, _>>()?
        };
        let regressions = self.regressions(a, &scenarios, err)?;
        let jobs = a.jobs.unwrap_or_else(campaign::default_jobs);
        writeln!(
            err,
            "keel-sim: {} regression runs, then seeds {}..{} of {} scenario(s), {jobs} jobs{}{}",
            regressions.len(),
            a.from,
            a.from.saturating_add(a.seeds),
            scenarios.len(),
            if a.check {
                ", each run twice (--check)"
            } else {
                ""
            },
            a.mutation
                .map(|m| format!(", under mutation {}", mutation::name(m)))
                .unwrap_or_default(),
        )?;
        let summary = Campaign::new(scenarios)
            .seeds(a.from, a.seeds)
            .jobs(jobs)
            .check_determinism(a.check)
            .replay_regressions_first(regressions)
            .progress(self.progress)
            .mutation(a.mutation)
            .fail_fast(a.fail_fast)
            .run(err)?;
        writeln!(out, "{summary}")?;
        Ok(if summary.all_passed() {
            EXIT_OK
        } else {
            EXIT_FAILED
        })
    }

    /// Stored regressions for the scenarios being run, resolved.
    fn regressions(
        &self,
        a: &RunArgs,
        selected: &[Arc<dyn Scenario>],
        err: &mut dyn Write,
    ) -> Result<StoredSeeds, CliError> {
        let dir: &Path = match &a.regressions {
            RegressionsArg::Off => return Ok(Vec::new()),
            RegressionsArg::Dir(d) => d,
            RegressionsArg::Default if !self.default_regressions.is_dir() => {
                writeln!(
                    err,
                    "keel-sim: no regressions directory at {}",
                    self.default_regressions.display()
                )?;
                return Ok(Vec::new());
            }
            RegressionsArg::Default => &self.default_regressions,
        };
        let mut kept = Vec::new();
        for r in regressions::load_regressions(dir)? {
            let scenario = self.registry.resolve(&r.scenario).map_err(|source| {
                CliError::RegressionScenario {
                    path: r.file.clone(),
                    line: r.line,
                    source,
                }
            })?;
            // Stored seeds of scenarios not being run wait for a campaign that runs them.
            if selected.iter().any(|s| s.name() == scenario.name()) {
                kept.push((scenario, r.seed));
            }
        }
        Ok(kept)
    }

    fn replay(&self, a: &ReplayArgs, out: &mut dyn Write) -> Result<i32, CliError> {
        let scenario = self.scenario(a.scenario.as_deref())?;
        let keep = RunOptions { keep_trace: true };
        let once = || -> Result<RunReport, CliError> {
            match &a.schedule {
                None => Ok(run_guarded(scenario.name(), a.seed, || {
                    scenario.run(a.seed, &keep)
                })),
                Some(schedule) => {
                    let s = scenario
                        .schedulable()
                        .ok_or_else(|| CliError::NotSchedulable(scenario.name().to_string()))?;
                    Ok(run_guarded_result(scenario.name(), a.seed, || {
                        s.run_with_schedule(a.seed, schedule, &keep)
                    })?)
                }
            }
        };
        let report = mutation::under(a.mutation, once)?;
        writeln!(
            out,
            "trace ({} lines):",
            report.trace.as_ref().map_or(0, Vec::len)
        )?;
        for line in report.trace.iter().flatten() {
            writeln!(out, "  {line}")?;
        }
        writeln!(out, "{report}")?;
        let mut code = if report.passed() {
            EXIT_OK
        } else {
            EXIT_FAILED
        };
        if a.check {
            let again = mutation::under(a.mutation, once)?;
            if again == report {
                writeln!(
                    out,
                    "determinism    same report twice (trace sha256 {})",
                    report.trace_hash_hex()
                )?;
            } else {
                writeln!(
                    out,
                    "determinism    DIVERGED: trace sha256 {} then {}",
                    report.trace_hash_hex(),
                    again.trace_hash_hex()
                )?;
                code = EXIT_FAILED;
            }
        }
        Ok(code)
    }

    fn minimize(&self, a: &MinimizeArgs, out: &mut dyn Write) -> Result<i32, CliError> {
        let scenario = self.scenario(a.scenario.as_deref())?;
        let m = mutation::under(a.mutation, || minimize::minimize(scenario.as_ref(), a.seed))?;
        writeln!(
            out,
            "minimize seed={} scenario={} invariant={}",
            m.seed, m.scenario, m.invariant
        )?;
        writeln!(
            out,
            "original schedule  ({} events) {}",
            m.original.len(),
            m.original
        )?;
        writeln!(
            out,
            "minimal schedule   ({} events) {}",
            m.minimal.len(),
            m.minimal
        )?;
        for event in &m.minimal.events {
            writeln!(out, "  at decision {}: {}", event.at, event.kind)?;
        }
        writeln!(out, "runs spent         {}", m.runs)?;
        if m.budget_exhausted {
            writeln!(
                out,
                "note: run budget spent; the schedule may not be minimal"
            )?;
        }
        writeln!(
            out,
            "replay: {} --schedule {}",
            replay_command(&m.scenario, m.seed, false, a.mutation),
            m.minimal
        )?;
        writeln!(out, "{}", m.report)?;
        Ok(EXIT_OK)
    }
}

/// One line per scenario, names padded to the longest so descriptions line up.
fn scenario_table(registry: &Registry, indent: &str) -> String {
    let width = registry
        .scenarios()
        .iter()
        .map(|s| s.name().chars().count())
        .max()
        .unwrap_or(0);
    let mut table = String::new();
    for sc in registry.scenarios() {
        let line = format!("{indent}{:<width$}  {}", sc.name(), sc.description());
        let _ = writeln!(table, "{}", line.trim_end());
    }
    table
}

const HELP: &str = "\
keel-sim: deterministic simulation campaigns for keel

USAGE:
  keel-sim run --seeds N [--from S] [--scenario NAME|FILE]... [--jobs J] [--check]
               [--regressions DIR | --no-regressions] [--fail-fast] [--mutation NAME]
      Run seeds S..S+N (default S=0) of each scenario (default: all), after the stored
      regression seeds. --check runs every seed twice and fails on any divergence.
      --jobs defaults to the available parallelism, at most 2. --fail-fast stops at the
      first failing run (the same run for any --jobs). Prints a summary; exits 1 if any run
      failed.
  keel-sim replay --seed S [--scenario NAME|FILE] [--check] [--schedule AT:KIND,...|none]
                  [--mutation NAME]
      Run one seed, print its full trace and report. --schedule replaces the seed's faults
      (as printed by minimize).
  keel-sim minimize --seed S [--scenario NAME|FILE] [--mutation NAME]
      Shrink a failing seed's fault schedule to the fewest faults that break the same
      invariant, and print it.
  keel-sim list
      Print the scenario names.

--mutation NAME runs against a deliberately broken keel (a build with
`--features mutations`; names: dispatch_before_pending, fold_in_completion_order,
redispatch_unknown, steer_applied_twice, drop_unknown_on_compaction): the campaign is
expected to fail.
--scenario may be omitted when only one scenario is registered. Exit codes: 0 passed,
1 a run failed, 2 the command could not be carried out.
";
