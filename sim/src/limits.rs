//! Named limits of the harness (the runtime's own limits live in `keel::limits`).

use std::time::Duration;

/// Seeds per built-in scenario of the long campaign (`sim/tests/default_campaign.rs`, ignored by
/// plain `cargo test`; `.ci/run` runs it with `-- --ignored`), of the mutation checks
/// (`sim/tests/mutations.rs`), which must fail within it, and of a harness `Campaign`.
pub const TEST_CAMPAIGN_SEEDS: u64 = 1000;

/// Seeds per built-in scenario of the short campaign plain `cargo test` runs (pass and
/// determinism; full fault coverage is the long campaign's check), small enough that the
/// workspace tests stay within their time budget (figures in ARCHITECTURE.md).
pub const QUICK_CAMPAIGN_SEEDS: u64 = 150;

/// Default `--jobs` cap: the machines running campaigns are small and shared.
pub const DEFAULT_MAX_JOBS: usize = 2;

/// Finished results a worker may queue ahead of the collector.
pub const RESULT_QUEUE_PER_WORKER: usize = 16;

/// Progress display redraws at most this often (about 10 times a second).
pub const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);

/// Failing runs a campaign keeps for its summary (the lowest-numbered ones); later failures
/// are counted but not kept, so a badly broken build cannot exhaust memory.
pub const MAX_KEPT_FAILURES: usize = 1000;

/// Failing runs the summary prints in full (FAIL lines, replay command, swarm); the rest are
/// counted in the `broken invariants` table.
pub const MAX_PRINTED_FAILURES: usize = 50;

/// Runs one campaign may make (regressions + seeds x scenarios).
pub const MAX_CAMPAIGN_RUNS: u64 = u64::MAX / 2;

/// A `--summary-out` file larger than this is refused by `merge` rather than read (a summary
/// keeps at most [`MAX_KEPT_FAILURES`] failures, each a few hundred bytes).
pub const MAX_SUMMARY_FILE_BYTES: usize = 64 << 20;

/// Shard summaries one `merge` reads.
pub const MAX_MERGED_SHARDS: usize = 1024;

/// Failing seeds one campaign appends to the regressions directory (the lowest-numbered
/// ones); a badly broken build must not flood the file.
pub const MAX_RECORDED_SEEDS: usize = 20;

/// Scenario files `--scenario DIR` loads from one directory.
pub const MAX_SCENARIO_DIR_FILES: usize = 1000;

/// A regression file larger than this is refused rather than read.
pub const MAX_REGRESSION_FILE_BYTES: u64 = 1 << 20;

/// Test runs the minimizer may spend before returning its best schedule so far.
pub const MAX_MINIMIZE_RUNS: u64 = 10_000;

/// A scenario file larger than this is refused rather than read.
pub const MAX_SCENARIO_FILE_BYTES: u64 = 1 << 20;

/// Items one list of a scenario file may hold (turns, tools, calls, host actions, faults).
pub const MAX_SCENARIO_LIST_LEN: usize = 64;

/// The largest simulated latency a scenario may ask for, in milliseconds.
pub const MAX_SIM_LATENCY_MS: u64 = 10_000;

/// Input pauses one simulated tool call may take.
pub const MAX_SIM_TOOL_PAUSES: u32 = 8;

/// Writer stops (crash, lost ack, failed commit) one Interaction-world run may suffer; later
/// commits pass so every run can finish.
pub const MAX_INTERACTION_CRASHES: u64 = 4;

/// Commit indices an Interaction fault schedule may name; far above what a run makes, so any
/// schedule a run printed replays.
pub const MAX_INTERACTION_COMMIT_DECISIONS: u64 = 100_000;

/// How often the simulated host looks at the tree (simulated time).
pub const HOST_TICK: Duration = Duration::from_millis(1);

/// Host ticks without any change (head, in-flight calls, events) after which a live tree is
/// declared stuck.
pub const HOST_QUIET_TICKS: u64 = 200;

/// Simulated time one Interaction-world run may take before it is declared stuck.
pub const MAX_INTERACTION_RUN_TIME: Duration = Duration::from_secs(600);

/// How long a triggered model or tool call waits for the host to act before it carries on.
pub const HOOK_TIMEOUT: Duration = Duration::from_millis(500);

/// How long the host waits for a stopped writer's in-flight calls to finish before it
/// restores anyway (and records a violation).
pub const INFLIGHT_DRAIN_TIMEOUT: Duration = Duration::from_secs(60);

/// Events one run's timeline keeps (`replay --html`); later ones are counted, not kept, so a
/// runaway run cannot exhaust memory or draw an unreadable page.
pub const MAX_TIMELINE_EVENTS: usize = 20_000;
