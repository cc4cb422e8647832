//! Named limits of the harness (the runtime's own limits live in `keel::limits`).

use std::time::Duration;

/// Default `--jobs` cap: the machines running campaigns are small and shared.
pub const DEFAULT_MAX_JOBS: usize = 2;

/// Finished results a worker may queue ahead of the collector.
pub const RESULT_QUEUE_PER_WORKER: usize = 16;

/// Progress display redraws at most this often (about 10 times a second).
pub const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);

/// Failing runs a campaign keeps for its summary (the lowest-numbered ones); later failures
/// are counted but not kept, so a badly broken build cannot exhaust memory.
pub const MAX_KEPT_FAILURES: usize = 1000;

/// Runs one campaign may make (regressions + seeds x scenarios).
pub const MAX_CAMPAIGN_RUNS: u64 = u64::MAX / 2;

/// A regression file larger than this is refused rather than read.
pub const MAX_REGRESSION_FILE_BYTES: u64 = 1 << 20;

/// Test runs the minimizer may spend before returning its best schedule so far.
pub const MAX_MINIMIZE_RUNS: u64 = 10_000;
