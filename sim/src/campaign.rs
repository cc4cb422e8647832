//! Campaigns: many seeds over one or more scenarios, on worker threads, summarized identically
//! for any number of workers.
//!
//! ```no_run
//! use std::sync::Arc;
//! use keel_sim::campaign::{Campaign, ProgressStyle};
//! use keel_sim::scenarios::ClockAndRng;
//!
//! let summary = Campaign::new(vec![Arc::new(ClockAndRng)])
//!     .seeds(0, 200)
//!     .jobs(2)
//!     .check_determinism(true)
//!     .progress(ProgressStyle::Off)
//!     .run(&mut std::io::stderr())
//!     .unwrap();
//! assert!(summary.all_passed(), "{summary}");
//! ```

mod parallel;
mod progress;
mod summary;

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;

pub use parallel::default_jobs;
pub use progress::ProgressStyle;
pub use summary::{replay_command, CampaignSummary, Failure, Origin};

use crate::limits::{MAX_CAMPAIGN_RUNS, MAX_KEPT_FAILURES};
use crate::world::{
    run_guarded, RunOptions, RunReport, Scenario, Violation, DETERMINISM_INVARIANT,
};
use progress::Progress;

/// Why a campaign could not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CampaignError {
    #[error("a campaign needs at least one scenario")]
    NoScenarios,
    #[error("--jobs must be at least 1")]
    ZeroJobs,
    #[error("seed range {from}+{seeds} overflows u64")]
    SeedRangeOverflow { from: u64, seeds: u64 },
    #[error("campaign of {seeds} seeds x {scenarios} scenarios is too large")]
    TooManyRuns { seeds: u64, scenarios: usize },
}

/// Stored failing seeds to replay, with their scenarios resolved.
pub type StoredSeeds = Vec<(Arc<dyn Scenario>, u64)>;

/// A configured campaign; build it, then [`Campaign::run`].
pub struct Campaign {
    scenarios: Vec<Arc<dyn Scenario>>,
    from: u64,
    seeds: u64,
    jobs: usize,
    check: bool,
    regressions: StoredSeeds,
    progress: ProgressStyle,
}

/// One unit of work: a scenario and a seed.
struct Job<'a> {
    scenario: &'a dyn Scenario,
    seed: u64,
    origin: Origin,
}

impl Campaign {
    /// A campaign over `scenarios`, seeds `0..0` (set them with [`Campaign::seeds`]).
    pub fn new(scenarios: Vec<Arc<dyn Scenario>>) -> Self {
        Campaign {
            scenarios,
            from: 0,
            seeds: 0,
            jobs: default_jobs(),
            check: false,
            regressions: Vec::new(),
            progress: ProgressStyle::Off,
        }
    }

    /// Runs seeds `from..from + count` of every scenario.
    pub fn seeds(mut self, from: u64, count: u64) -> Self {
        self.from = from;
        self.seeds = count;
        self
    }

    /// Number of worker threads.
    pub fn jobs(mut self, jobs: usize) -> Self {
        self.jobs = jobs;
        self
    }

    /// Runs every seed twice and fails it if the two reports differ.
    pub fn check_determinism(mut self, on: bool) -> Self {
        self.check = on;
        self
    }

    /// Stored failing seeds to run before the range (see [`crate::regressions`]).
    pub fn replay_regressions_first(mut self, regressions: StoredSeeds) -> Self {
        self.regressions = regressions;
        self
    }

    pub fn progress(mut self, style: ProgressStyle) -> Self {
        self.progress = style;
        self
    }

    fn total_runs(&self) -> Result<u64, CampaignError> {
        if self.scenarios.is_empty() {
            return Err(CampaignError::NoScenarios);
        }
        if self.jobs == 0 {
            return Err(CampaignError::ZeroJobs);
        }
        if self.from.checked_add(self.seeds).is_none() {
            return Err(CampaignError::SeedRangeOverflow {
                from: self.from,
                seeds: self.seeds,
            });
        }
        let too_many = CampaignError::TooManyRuns {
            seeds: self.seeds,
            scenarios: self.scenarios.len(),
        };
        let range = self
            .seeds
            .checked_mul(self.scenarios.len() as u64)
            .ok_or(too_many.clone())?;
        let total = range
            .checked_add(self.regressions.len() as u64)
            .ok_or(too_many.clone())?;
        if total > MAX_CAMPAIGN_RUNS {
            return Err(too_many);
        }
        Ok(total)
    }

    /// Job `index`: regressions first, then the range seed by seed, scenarios in order.
    fn job(&self, index: u64) -> Option<Job<'_>> {
        let regressions = self.regressions.len() as u64;
        if index < regressions {
            let (scenario, seed) = self.regressions.get(usize::try_from(index).ok()?)?;
            return Some(Job {
                scenario: scenario.as_ref(),
                seed: *seed,
                origin: Origin::Regression,
            });
        }
        let k = index - regressions;
        let per_seed = self.scenarios.len() as u64;
        let scenario = self.scenarios.get(usize::try_from(k % per_seed).ok()?)?;
        Some(Job {
            scenario: scenario.as_ref(),
            seed: self.from + k / per_seed,
            origin: Origin::Range,
        })
    }

    /// Runs the campaign, drawing progress on `progress_out` (stderr in the CLI).
    pub fn run(&self, progress_out: &mut dyn Write) -> Result<CampaignSummary, CampaignError> {
        let total = self.total_runs()?;
        let mut progress = Progress::new(self.progress, total);
        let mut tally = Tally::default();
        let check = self.check;
        let work = |index: u64| {
            self.job(index)
                .map(|job| (job.origin, run_one(job.scenario, job.seed, check)))
        };
        let wall_time = parallel::run_indexed(total, self.jobs, work, |index, result, elapsed| {
            if let Some((origin, report)) = result {
                tally.add(index, origin, report);
            }
            if let Some(text) = progress.update(tally.runs, tally.failed, elapsed) {
                // Progress is cosmetic: a closed stderr must not stop the campaign.
                let _ = progress_out.write_all(text.as_bytes());
                let _ = progress_out.flush();
            }
        });
        if let Some(text) = progress.finish(tally.runs, tally.failed, wall_time) {
            let _ = progress_out.write_all(text.as_bytes());
            let _ = progress_out.flush();
        }
        Ok(CampaignSummary {
            scenarios: self
                .scenarios
                .iter()
                .map(|s| s.name().to_string())
                .collect(),
            from: self.from,
            seeds: self.seeds,
            determinism_checked: self.check,
            runs: tally.runs,
            regression_runs: tally.regression_runs,
            regression_failed: tally.regression_failed,
            passed: tally.runs - tally.failed,
            failed: tally.failed,
            faults_fired: tally.faults_fired,
            crash_points_hit: tally.crash_points_hit,
            invariants_checked: tally.invariants_checked,
            failures: tally.failures.into_values().collect(),
            wall_time,
        })
    }
}

/// One seed of one scenario, panics caught; with `check`, run twice and compared.
pub fn run_one(scenario: &dyn Scenario, seed: u64, check: bool) -> RunReport {
    let options = RunOptions::default();
    let first = run_guarded(scenario.name(), seed, || scenario.run(seed, &options));
    if !check {
        return first;
    }
    let second = run_guarded(scenario.name(), seed, || scenario.run(seed, &options));
    let mut report = first;
    if let Some(detail) = divergence(&report, &second) {
        report
            .violations
            .push(Violation::new(DETERMINISM_INVARIANT, detail));
    }
    report
}

/// How two runs of one seed differ, if they do.
fn divergence(a: &RunReport, b: &RunReport) -> Option<String> {
    if a.trace_hash != b.trace_hash {
        return Some(format!(
            "trace sha256 {} then {}",
            a.trace_hash_hex(),
            b.trace_hash_hex()
        ));
    }
    if a != b {
        return Some(format!(
            "same trace, different reports: `{}` then `{}`",
            a.outcome, b.outcome
        ));
    }
    None
}

/// Order-independent accumulation of results (sums, and failures keyed by run index).
#[derive(Default)]
struct Tally {
    runs: u64,
    failed: u64,
    regression_runs: u64,
    regression_failed: u64,
    invariants_checked: u64,
    faults_fired: BTreeMap<String, u64>,
    crash_points_hit: BTreeMap<String, u64>,
    failures: BTreeMap<u64, Failure>,
}

impl Tally {
    fn add(&mut self, index: u64, origin: Origin, report: RunReport) {
        self.runs += 1;
        self.invariants_checked = self
            .invariants_checked
            .saturating_add(report.invariants_checked);
        for (kind, n) in &report.faults_fired {
            *self.faults_fired.entry(kind.clone()).or_default() += n;
        }
        for (point, n) in &report.crash_points_hit {
            *self.crash_points_hit.entry(point.clone()).or_default() += n;
        }
        if origin == Origin::Regression {
            self.regression_runs += 1;
        }
        if report.passed() {
            return;
        }
        self.failed += 1;
        if origin == Origin::Regression {
            self.regression_failed += 1;
        }
        self.failures.insert(index, Failure { origin, report });
        // Keep the lowest indices: the same set whatever order results arrive in.
        if self.failures.len() > MAX_KEPT_FAILURES {
            self.failures.pop_last();
        }
    }
}
