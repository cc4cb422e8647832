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

mod merge;
pub(crate) mod parallel;
mod progress;
mod summary;
mod summary_file;
mod trace_digest;

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;

pub use merge::{merge, MergeError};
pub use parallel::{default_jobs, today_utc};
pub use progress::ProgressStyle;
pub use summary::{replay_command, CampaignSummary, Failure, Origin};
pub use summary_file::{decode_summary, encode_summary, SummaryFileError};
pub use trace_digest::TraceDigest;

use crate::coverage::{Expected, WorldTally};
use crate::limits::{MAX_CAMPAIGN_RUNS, MAX_KEPT_FAILURES};
use crate::mutation::Mutation;
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
    #[error("shard {index}/{count} does not exist (shards are numbered 1..=N)")]
    BadShard { index: u64, count: u64 },
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
    mutation: Option<Mutation>,
    fail_fast: bool,
    /// `(K, N)`: only shard K (1-based) of N.
    shard: Option<(u64, u64)>,
}

/// One unit of work: a scenario and a seed, and its index in the unsharded campaign.
struct Job<'a> {
    scenario: &'a dyn Scenario,
    seed: u64,
    origin: Origin,
    index: u64,
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
            mutation: None,
            fail_fast: false,
            shard: None,
        }
    }

    /// Runs only shard `index` (1-based) of `count`: the stored regressions and the seeds of
    /// the range whose position (`seed - from`, or the regression's place in the list) is
    /// `index - 1` modulo `count`, every scenario for each such seed. The shards are disjoint,
    /// their union is the unsharded campaign, and every run keeps its unsharded run index, so
    /// [`merge`] of all the shards' summaries equals the unsharded summary (traces digest
    /// included). Whatever `--jobs` says.
    pub fn shard(mut self, index: u64, count: u64) -> Self {
        self.shard = Some((index, count));
        self
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

    /// Runs every seed against a deliberately broken keel (see [`crate::mutation`]); the
    /// campaign is then expected to fail.
    pub fn mutation(mut self, mutation: Option<Mutation>) -> Self {
        self.mutation = mutation;
        self
    }

    /// Stops at the first failing run (in run order: the same run for any `--jobs`); the
    /// summary covers the runs up to and including it.
    pub fn fail_fast(mut self, on: bool) -> Self {
        self.fail_fast = on;
        self
    }

    /// `(K - 1, N)` of the shard, `(0, 1)` unsharded.
    fn shard_slot(&self) -> (u64, u64) {
        self.shard.map_or((0, 1), |(k, n)| (k.saturating_sub(1), n.max(1)))
    }

    /// How many of `0..len` are `slot` modulo `count`.
    fn share(len: u64, slot: u64, count: u64) -> u64 {
        if len > slot {
            (len - slot).div_ceil(count)
        } else {
            0
        }
    }

    /// This shard's regression runs and range seeds.
    fn shard_counts(&self) -> (u64, u64) {
        let (slot, count) = self.shard_slot();
        (
            Self::share(self.regressions.len() as u64, slot, count),
            Self::share(self.seeds, slot, count),
        )
    }

    fn total_runs(&self) -> Result<u64, CampaignError> {
        if self.scenarios.is_empty() {
            return Err(CampaignError::NoScenarios);
        }
        if let Some((index, count)) = self.shard {
            if index == 0 || index > count {
                return Err(CampaignError::BadShard { index, count });
            }
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
        let (regressions, seeds) = self.shard_counts();
        Ok(regressions + seeds * self.scenarios.len() as u64)
    }

    /// This shard's job `local` (in run order: its regressions first, then its seeds one by
    /// one, scenarios in order), numbered as in the unsharded campaign (regressions first,
    /// then the range seed by seed, scenarios in order).
    fn job(&self, local: u64) -> Option<Job<'_>> {
        let (slot, count) = self.shard_slot();
        let (shard_regressions, _) = self.shard_counts();
        let regressions = self.regressions.len() as u64;
        if local < shard_regressions {
            let index = slot + local * count;
            let (scenario, seed) = self.regressions.get(usize::try_from(index).ok()?)?;
            return Some(Job {
                scenario: scenario.as_ref(),
                seed: *seed,
                origin: Origin::Regression,
                index,
            });
        }
        let k = local - shard_regressions;
        let per_seed = self.scenarios.len() as u64;
        let scenario = self.scenarios.get(usize::try_from(k % per_seed).ok()?)?;
        let offset = slot + (k / per_seed) * count;
        Some(Job {
            scenario: scenario.as_ref(),
            seed: self.from + offset,
            origin: Origin::Range,
            index: regressions + offset * per_seed + k % per_seed,
        })
    }

    /// Runs the campaign, drawing progress on `progress_out` (stderr in the CLI).
    pub fn run(&self, progress_out: &mut dyn Write) -> Result<CampaignSummary, CampaignError> {
        let total = self.total_runs()?;
        let mut progress = Progress::new(self.progress, total);
        let mut tally = Tally::default();
        for s in &self.scenarios {
            tally.declare(s.as_ref());
        }
        for (s, _) in &self.regressions {
            tally.declare(s.as_ref());
        }
        let (check, mutation) = (self.check, self.mutation);
        let work = |local: u64| {
            self.job(local).map(|job| {
                let report = crate::mutation::under(mutation, || run_one(job.scenario, job.seed, check));
                (job.index, job.origin, job.scenario, report)
            })
        };
        // Fail-fast tallies in run order (a small reorder buffer), so the run it stops at and
        // everything before it are the same whatever the number of workers.
        let mut reorder: BTreeMap<u64, Option<(u64, Origin, &dyn Scenario, RunReport)>> = BTreeMap::new();
        let mut next = 0u64;
        let mut stopped = false;
        let fail_fast = self.fail_fast;
        let wall_time = parallel::run_indexed(total, self.jobs, work, |index, result, elapsed| {
            let mut stop = None;
            if !fail_fast {
                if let Some((at, origin, scenario, report)) = result {
                    let world = tally.world_of(scenario);
                    tally.add(at, origin, scenario, world, report);
                }
            } else if !stopped {
                reorder.insert(index, result);
                while let Some(result) = reorder.remove(&next) {
                    next += 1;
                    if let Some((at, origin, scenario, report)) = result {
                        let failed = !report.passed();
                        let world = tally.world_of(scenario);
                        tally.add(at, origin, scenario, world, report);
                        if failed {
                            stopped = true;
                            stop = Some(next);
                            reorder.clear();
                            break;
                        }
                    }
                }
            }
            if let Some(text) = progress.update(tally.runs, tally.failed, elapsed) {
                // Progress is cosmetic: a closed stderr must not stop the campaign.
                let _ = progress_out.write_all(text.as_bytes());
                let _ = progress_out.flush();
            }
            stop
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
            replay_names: self
                .scenarios
                .iter()
                .map(|s| s.replay_name().to_string())
                .collect(),
            stored_seeds: self
                .regressions
                .iter()
                .map(|(s, seed)| (s.replay_name().to_string(), *seed))
                .collect(),
            shard: self.shard,
            from: self.from,
            seeds: self.seeds,
            determinism_checked: self.check,
            mutation: self.mutation,
            stopped_at_first_failure: stopped,
            runs: tally.runs,
            regression_runs: tally.regression_runs,
            regression_failed: tally.regression_failed,
            passed: tally.runs - tally.failed,
            failed: tally.failed,
            worlds: tally.worlds,
            broken_invariants: tally.broken_invariants,
            traces_digest: tally.traces.hex(),
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
    /// Per world, in the order the scenarios name them.
    worlds: Vec<WorldTally>,
    /// Invariant → failing runs that broke it.
    broken_invariants: BTreeMap<String, u64>,
    traces: TraceDigest,
    failures: BTreeMap<u64, Failure>,
}

/// The summary's world name of `scenario`.
fn world_name(scenario: &dyn Scenario) -> &str {
    scenario.coverage().map_or(scenario.name(), |c| c.world)
}

/// Adds `scenario`'s world to `worlds` (in first-seen order), or widens what it expects.
pub(crate) fn declare_world(worlds: &mut Vec<WorldTally>, scenario: &dyn Scenario) {
    let name = world_name(scenario);
    let expected = scenario.expected_coverage();
    match worlds.iter_mut().find(|w| w.world == name) {
        Some(w) => w.expected = std::mem::replace(&mut w.expected, Expected::All).union(expected),
        None => {
            let mut w = WorldTally::new(name.to_string(), scenario.coverage());
            w.expected = expected;
            worlds.push(w);
        }
    }
}

impl Tally {
    /// Adds `scenario`'s world, or widens what it expects (before the runs).
    fn declare(&mut self, scenario: &dyn Scenario) {
        declare_world(&mut self.worlds, scenario);
    }

    /// The index of `scenario`'s world in `worlds`, added on first sight.
    fn world_of(&mut self, scenario: &dyn Scenario) -> usize {
        let name = world_name(scenario);
        if let Some(i) = self.worlds.iter().position(|w| w.world == name) {
            return i;
        }
        self.declare(scenario);
        self.worlds.len() - 1
    }

    fn add(&mut self, index: u64, origin: Origin, scenario: &dyn Scenario, world: usize, report: RunReport) {
        self.runs += 1;
        self.traces.add(index, &report.trace_hash);
        self.invariants_checked = self
            .invariants_checked
            .saturating_add(report.invariants_checked);
        if let Some(w) = self.worlds.get_mut(world) {
            for (kind, n) in &report.faults_fired {
                *w.faults_fired.entry(kind.clone()).or_default() += n;
            }
            for (point, n) in &report.crash_points_hit {
                *w.crash_points_hit.entry(point.clone()).or_default() += n;
            }
        }
        if origin == Origin::Regression {
            self.regression_runs += 1;
        }
        if report.passed() {
            return;
        }
        self.failed += 1;
        let broken: std::collections::BTreeSet<&str> =
            report.violations.iter().map(|v| v.invariant.as_str()).collect();
        for invariant in broken {
            *self.broken_invariants.entry(invariant.to_string()).or_default() += 1;
        }
        if origin == Origin::Regression {
            self.regression_failed += 1;
        }
        let replay_name = scenario.replay_name().to_string();
        self.failures.insert(index, Failure { index, origin, replay_name, report });
        // Keep the lowest indices: the same set whatever order results arrive in.
        if self.failures.len() > MAX_KEPT_FAILURES {
            self.failures.pop_last();
        }
    }
}
