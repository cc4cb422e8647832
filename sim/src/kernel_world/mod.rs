//! A seeded kernel-level world in direct mode: no async runtime, every decision a function of
//! the seed (`keel::env::SeededRng`).
//!
//! ```
//! use keel_sim::kernel_world::{scenarios, RunOptions};
//! let swarm = scenarios().into_iter().find(|s| s.name() == "kernel-swarm").unwrap();
//! let report = swarm.run(7, &RunOptions { keep_trace: false });
//! assert!(report.violations.is_empty(), "{:?}", report.violations);
//! assert_eq!(report.trace_hash, swarm.run(7, &RunOptions { keep_trace: false }).trace_hash);
//! ```
//!
//! Code map:
//! * `swarm` — per-seed options (fault probabilities, host behavior, tree shape);
//! * `shape` — the generated script tree and its deployments;
//! * `strategy` — the fan-out strategy (batches, concurrent children) next to the testkit script;
//! * `dispatcher` — the world's Dispatcher (policy from the payload);
//! * `world` — the driver: owner instances, commits and acks, the event loop, crash/restore;
//! * `executor` — the world performing dispatches (ledger, answers, hidden answers);
//! * `observe` — publications and replies checked against acknowledged heads;
//! * `host` — host commands and Unknown adjudication from ground truth;
//! * `ledger` — ground truth of physical dispatches;
//! * `trace` — the hashed run trace and its line formats;
//! * `oracle` — invariant checks against that ground truth;
//! * `retired` — after the run: commands to retired children are `ProcessFinished`, to an id
//!   that never existed `NotFound`;
//! * `scenarios` — `kernel-swarm`, `kernel-crash-matrix`, `kernel-stale-writer`,
//!   `kernel-fanout-order`;
//! * `compat` — the campaign framework's plug-in types (until `sim/src/world.rs` lands).
//!
//! Architecture invariant: the world never reaches into the owner's internals; it sees only
//! actions, publications, replies, and what the store holds — like a real host.

pub mod bounds;
pub mod compat;
mod dispatcher;
mod executor;
mod host;
mod ledger;
mod observe;
mod oracle;
mod retired;
pub mod scenarios;
mod shape;
pub mod strategy;
pub mod swarm;
mod trace;
mod world;

use crate::coverage::Coverage;
pub use compat::{RunOptions, RunReport, Scenario, Violation};
pub use scenarios::{matrix_case, swarm_run, KernelCrashMatrix, KernelFanoutOrder, KernelStaleWriter, KernelSwarm, MATRIX_CASES};
pub use swarm::BOUNDARIES;
pub use world::DriverFlaw;

/// Every key of `faults_fired` the kernel world reports, each of which a swarm campaign
/// should fire: faults, host actions, and (`seen.*`) consequences it counts (a writer fenced,
/// a same-identity re-dispatch).
pub const FAULT_KINDS: &[&str] = &[
    "dispatch.error",
    "dispatch.panic",
    "dispatch.deadline",
    "dispatch.invalid_settlement",
    "dispatch.canceled",
    "dispatch.definite_failure",
    "dispatch.reordered",
    "commit.fail_before",
    "commit.lose_ack",
    "commit.crash_after",
    "commit.hold",
    // A torn append in the file-store replay of sampled seeds (`crate::log_compaction`).
    "store.torn_write",
    "host.kill",
    "host.cancel",
    "host.wait_answer.early",
    "host.wait_answer.on_time",
    "host.wait_answer.ahead",
    "host.wait_answer.premature",
    "host.wait_answer.late",
    "host.signal.duplicate",
    "host.signal.conflict",
    "host.signal.unaddressed",
    "host.stale_writer",
    "host.crash",
    "host.capture",
    "host.resolve.bogus",
    "unknown.resolve_ran",
    "unknown.resolve_never_ran",
    "unknown.kill",
    "unknown.leave",
    "seen.fenced",
    "seen.redispatch",
    "seen.retired_addressed",
];

/// What the kernel world declares it exercises (the campaign summary flags gaps).
pub static COVERAGE: Coverage = Coverage {
    world: "kernel",
    fault_kinds: FAULT_KINDS,
    boundaries: &BOUNDARIES,
    boundary_faults: &["fail_before", "lose_ack", "crash_after"],
};

/// The kernel-level scenarios.
pub fn scenarios() -> Vec<Box<dyn Scenario>> {
    vec![Box::new(KernelSwarm), Box::new(KernelCrashMatrix), Box::new(KernelStaleWriter), Box::new(KernelFanoutOrder)]
}
