//! The `keel-sim` command line, as a library function so tests can drive it with their own
//! scenarios and captured output. The binary only wires in stdout, stderr and the built-in
//! registry.

pub mod args;

use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::campaign::{
    self, decode_summary, encode_summary, replay_command, Campaign, CampaignError, CampaignSummary, MergeError,
    Origin, ProgressStyle, StoredSeeds, SummaryFileError,
};
use crate::limits::{MAX_RECORDED_SEEDS, MAX_REGRESSION_FILE_BYTES, MAX_SUMMARY_FILE_BYTES};
use crate::minimize::{self, MinimizeError};
use crate::mutation;
use crate::registry::{Registry, ResolveError};
use crate::regressions::{self, RegressionError};
use crate::schedule::ScheduleError;
use crate::world::{run_guarded, run_guarded_result, RunOptions, RunReport, Scenario};
use args::{ArgError, Command, MergeArgs, MinimizeArgs, RegressionsArg, ReplayArgs, RunArgs};

/// The file of the regressions directory that `run` appends failing seeds to.
pub const RECORD_FILE: &str = "seeds.txt";

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
    #[error("cannot write {path}: {source}")]
    WriteFile {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot read {path}: {source}")]
    ReadFile {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    SummaryFile(#[from] SummaryFileError),
    #[error("scenario `{0}` records no timeline for --html (the Interaction world's scenarios do: interaction-*, the scenario files)")]
    NoTimeline(String),
    #[error("cannot merge: {0}")]
    Merge(#[from] MergeError),
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
            Command::Merge(a) => self.merge(&a, out, err),
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
            let mut all = Vec::new();
            for arg in &a.scenarios {
                all.extend(self.registry.resolve_all(arg)?);
            }
            all
        };
        let regressions = self.regressions(a, &scenarios, err)?;
        let jobs = a.jobs.unwrap_or_else(campaign::default_jobs);
        writeln!(
            err,
            "keel-sim: {} regression runs, then seeds {}..{} of {} scenario(s){}, {jobs} jobs{}{}",
            regressions.len(),
            a.from,
            a.from.saturating_add(a.seeds),
            scenarios.len(),
            a.shard
                .map(|s| format!(", shard {}/{} of them", s.index, s.count))
                .unwrap_or_default(),
            if a.check {
                ", each run twice (--check)"
            } else {
                ""
            },
            a.mutation
                .map(|m| format!(", under mutation {}", mutation::name(m)))
                .unwrap_or_default(),
        )?;
        let mut campaign = Campaign::new(scenarios)
            .seeds(a.from, a.seeds)
            .jobs(jobs)
            .check_determinism(a.check)
            .replay_regressions_first(regressions)
            .progress(self.progress)
            .mutation(a.mutation)
            .fail_fast(a.fail_fast);
        if let Some(shard) = a.shard {
            campaign = campaign.shard(shard.index, shard.count);
        }
        let summary = campaign.run(err)?;
        writeln!(out, "{summary}")?;
        if let Some(path) = &a.summary_out {
            std::fs::write(path, encode_summary(&summary)).map_err(|source| CliError::WriteFile {
                path: path.clone(),
                source,
            })?;
        }
        self.record(a, &summary, out)?;
        Ok(if summary.all_passed() {
            EXIT_OK
        } else {
            EXIT_FAILED
        })
    }

    /// The regressions directory `run` reads and records into, if any.
    fn regressions_dir<'a>(&'a self, a: &'a RunArgs) -> Option<&'a Path> {
        match &a.regressions {
            RegressionsArg::Off => None,
            RegressionsArg::Dir(d) => Some(d),
            RegressionsArg::Default if self.default_regressions.is_dir() => Some(&self.default_regressions),
            RegressionsArg::Default => None,
        }
    }

    /// Appends the campaign's new failing seeds (range runs, not yet stored, at most
    /// [`MAX_RECORDED_SEEDS`]) to [`RECORD_FILE`] of the regressions directory, each with a
    /// comment saying what broke and when, so every later campaign replays them first. Not
    /// under `--no-record`, `--no-regressions` or `--mutation` (a deliberately broken keel
    /// fails on purpose).
    fn record(&self, a: &RunArgs, summary: &CampaignSummary, out: &mut dyn Write) -> Result<(), CliError> {
        let new: Vec<_> = summary.failures.iter().filter(|f| f.origin == Origin::Range).collect();
        if new.is_empty() || a.no_record || a.mutation.is_some() {
            return Ok(());
        }
        let Some(dir) = self.regressions_dir(a) else {
            writeln!(out, "recorded       nothing: no regressions directory to keep failing seeds in")?;
            return Ok(());
        };
        let mut stored: Vec<(String, u64)> =
            regressions::load_regressions(dir)?.into_iter().map(|r| (r.scenario, r.seed)).collect();
        let date = campaign::today_utc();
        let mut lines = String::new();
        let mut recorded = 0;
        for f in new {
            // A file by its absolute path, so any later campaign over that file finds it.
            let name = match self.registry.get(&f.replay_name) {
                Some(_) => f.replay_name.clone(),
                None => std::fs::canonicalize(&f.replay_name)
                    .map_or_else(|_| f.replay_name.clone(), |p| p.display().to_string()),
            };
            let key = (name, f.report.seed);
            if recorded == MAX_RECORDED_SEEDS || stored.contains(&key) {
                continue;
            }
            // The file format splits on whitespace: such a name cannot be written down.
            if key.0.chars().any(char::is_whitespace) || key.0.contains('#') {
                continue;
            }
            let _ = writeln!(lines, "{} {}  # {}", key.0, key.1, what_broke(&date, &f.report));
            stored.push(key);
            recorded += 1;
        }
        if recorded == 0 {
            return Ok(());
        }
        let path = dir.join(RECORD_FILE);
        let write_err = |source| CliError::WriteFile { path: path.clone(), source };
        let existing = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(source) => return Err(CliError::ReadFile { path: path.clone(), source }),
        };
        if (existing.len() + lines.len()) as u64 > MAX_REGRESSION_FILE_BYTES {
            writeln!(
                out,
                "recorded       nothing: {} would exceed {MAX_REGRESSION_FILE_BYTES} bytes",
                path.display()
            )?;
            return Ok(());
        }
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(&path).map_err(write_err)?;
        if existing.last().is_some_and(|b| *b != b'\n') {
            file.write_all(b"\n").map_err(write_err)?;
        }
        file.write_all(lines.as_bytes()).map_err(write_err)?;
        writeln!(
            out,
            "recorded       {recorded} failing seed(s) in {} (replayed first from now on; `--no-record` skips)",
            path.display()
        )?;
        Ok(())
    }

    /// `merge`: the summaries of every shard of one campaign, as one summary.
    fn merge(&self, a: &MergeArgs, out: &mut dyn Write, err: &mut dyn Write) -> Result<i32, CliError> {
        let mut shards = Vec::new();
        for path in &a.files {
            let read_err = |source| CliError::ReadFile { path: path.clone(), source };
            let bytes = std::fs::metadata(path).map_err(read_err)?.len();
            if bytes > MAX_SUMMARY_FILE_BYTES as u64 {
                return Err(SummaryFileError::TooLarge {
                    file: path.display().to_string(),
                    bytes: usize::try_from(bytes).unwrap_or(usize::MAX),
                    max: MAX_SUMMARY_FILE_BYTES,
                }
                .into());
            }
            let bytes = std::fs::read(path).map_err(read_err)?;
            shards.push(decode_summary(&path.display().to_string(), &bytes)?);
        }
        let mut scenarios: Vec<Arc<dyn Scenario>> = Vec::new();
        if let Some(first) = shards.first() {
            let names = first.replay_names.iter().chain(first.stored_seeds.iter().map(|(n, _)| n));
            for name in names {
                scenarios.push(self.registry.resolve(name)?);
            }
        }
        let count = shards.len();
        let merged = campaign::merge(shards, &scenarios)?;
        writeln!(err, "keel-sim: merged {count} shard summaries")?;
        writeln!(out, "{merged}")?;
        Ok(if merged.all_passed() { EXIT_OK } else { EXIT_FAILED })
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
            // A scenario file's seed is replayed when the campaign runs that file; otherwise
            // it is not loaded at all (the file may live anywhere, or be gone).
            if self.registry.get(&r.scenario).is_none() && names_a_file(&r.scenario) {
                if let Some(s) = selected.iter().find(|s| same_file(s.replay_name(), &r.scenario)) {
                    kept.push((s.clone(), r.seed));
                }
                continue;
            }
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
        if let Some(path) = &a.html {
            let timeline = report.timeline.as_ref().ok_or_else(|| CliError::NoTimeline(scenario.name().to_string()))?;
            std::fs::write(path, crate::timeline::html::render(&report, timeline))
                .map_err(|source| CliError::WriteFile { path: path.clone(), source })?;
            writeln!(out, "timeline       {} ({} events)", path.display(), timeline.events.len())?;
        }
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
            replay_command(scenario.replay_name(), m.seed, false, a.mutation),
            m.minimal
        )?;
        writeln!(out, "{}", m.report)?;
        Ok(EXIT_OK)
    }
}

/// One line per scenario, names padded to the longest so descriptions line up: the built-in
/// scenarios, then (under a heading) the bundled scenario files.
fn scenario_table(registry: &Registry, indent: &str) -> String {
    let width = registry
        .scenarios()
        .iter()
        .chain(registry.bundled())
        .map(|s| s.name().chars().count())
        .max()
        .unwrap_or(0);
    let mut table = String::new();
    let rows = |table: &mut String, scenarios: &[Arc<dyn Scenario>]| {
        for sc in scenarios {
            let line = format!("{indent}{:<width$}  {}", sc.name(), sc.description());
            let _ = writeln!(table, "{}", line.trim_end());
        }
    };
    rows(&mut table, registry.scenarios());
    if !registry.bundled().is_empty() {
        let _ = writeln!(
            table,
            "\n{indent}{}",
            BUNDLED_HEADING
        );
        rows(&mut table, registry.bundled());
    }
    table
}

/// Whether a `--scenario` argument names a scenario file rather than a registered scenario.
fn names_a_file(arg: &str) -> bool {
    arg.contains('/') || arg.contains('\\') || Path::new(arg).extension().is_some()
}

/// Whether two scenario file arguments name one file (as written, or once resolved).
fn same_file(a: &str, b: &str) -> bool {
    a == b
        || matches!(
            (std::fs::canonicalize(a), std::fs::canonicalize(b)),
            (Ok(x), Ok(y)) if x == y
        )
}

/// The heading `list` prints above the bundled scenario files.
pub const BUNDLED_HEADING: &str = "scenario files (sim/scenarios/*.json; not in the default run: `--scenario NAME`, or every one with `--scenario sim/scenarios/`):";

/// What broke in a failing run, for the comment beside its recorded seed: the date, then each
/// broken invariant with the first detail, on one bounded line.
fn what_broke(date: &str, report: &RunReport) -> String {
    let mut invariants: Vec<&str> = report.violations.iter().map(|v| v.invariant.as_str()).collect();
    invariants.dedup();
    let detail = report.violations.first().map_or("", |v| v.detail.as_str());
    let mut text = format!("{date} {}: {detail}", invariants.join(", "));
    text = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    if text.chars().count() > RECORD_COMMENT_CHARS {
        text = text.chars().take(RECORD_COMMENT_CHARS).collect::<String>() + "...";
    }
    text
}

/// Characters of a recorded seed's comment (longer details are cut).
const RECORD_COMMENT_CHARS: usize = 200;

const HELP: &str = "\
keel-sim: deterministic simulation campaigns for keel

USAGE:
  keel-sim run --seeds N [--from S] [--scenario NAME|FILE|DIR]... [--jobs J] [--check]
               [--regressions DIR | --no-regressions] [--no-record] [--fail-fast]
               [--mutation NAME] [--shard K/N] [--summary-out FILE]
      Run seeds S..S+N (default S=0) of each scenario (default: the built-in scenarios; a
      DIR runs every scenario file in it, in name order), after the stored regression seeds.
      --check runs every seed twice and fails on any divergence. --jobs defaults to the
      available parallelism, at most 2. --fail-fast stops at the first failing run (the
      same run for any --jobs). Prints a summary; exits 1 if any run failed.
      New failing seeds are appended to seeds.txt of the regressions directory (with the
      date and what broke) and replayed first by every later run; --no-record skips that,
      and nothing is recorded under --no-regressions or --mutation.
      --shard K/N runs only the seeds whose position in the range is K-1 modulo N (and
      that share of the stored seeds), for one of N machines; --summary-out FILE writes the
      summary as JSON for `merge`.
  keel-sim replay --seed S [--scenario NAME|FILE] [--check] [--schedule AT:KIND,...|none]
                  [--mutation NAME] [--html FILE]
      Run one seed, print its full trace and report. --schedule replaces the seed's faults
      (as printed by minimize). --html FILE also writes the run's timeline as one
      self-contained page (Processes as lanes, calls, waits, steers and Unknowns as spans,
      commits as ticks, crashes, lost acknowledgements and restores as marks, broken
      invariants pinned where they broke).
  keel-sim minimize --seed S [--scenario NAME|FILE] [--mutation NAME]
      Shrink a failing seed's fault schedule to the fewest faults that break the same
      invariant, and print it.
  keel-sim merge FILE...
      Merge the --summary-out files of all N shards of one campaign into its summary: the
      same counts, tables, failures and traces digest as the campaign run unsharded.
  keel-sim list
      Print the built-in scenarios, then the bundled scenario files.

--mutation NAME runs against a deliberately broken keel (a build with
`--features mutations`; names: dispatch_before_pending, fold_in_completion_order,
redispatch_unknown, steer_applied_twice, drop_unknown_on_compaction,
drop_external_on_compaction, retired_child_not_found, budget_granted_twice): the campaign is
expected to fail.
--scenario may be omitted when only one scenario is registered. Every failure prints a
command that replays it, run from the same directory. Exit codes: 0 passed, 1 a run
failed, 2 the command could not be carried out.
";
