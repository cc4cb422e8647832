//! The Interaction world: the real Interaction strategy (`keel::interaction`) on the real
//! async `keel::kernel::engine::Engine`, under madsim (campaigns) or tokio (benchmarks), with
//! a scripted model, simulated tools and delegate, commit faults with crash/restore at every
//! commit boundary, a host that steers, answers inputs, kills and settles Unknowns from ground
//! truth, and an oracle over everything the store and the simulated model saw.
//!
//! ```
//! use keel_sim::interaction_world::{run_on_madsim, Spec};
//! use keel_sim::world::RunOptions;
//! let report = run_on_madsim(&Spec::minimal("hello"), 7, &RunOptions::default());
//! assert!(report.passed(), "{report}");
//! ```
//!
//! Code map (one concept per file):
//! * `spec` — the run description; `spec_json` — the scenario file format; `generate` — seed →
//!   spec (swarm);
//! * `model` — scripted ModelClient/ModelStreamer, reducer, validator; `tools` — simulated
//!   tools; `delegate` — the deployments (root, ToolSet, delegate child);
//! * `recording` — the Dispatcher wrapper feeding the `ledger` (ground truth of physical
//!   calls); `store` — FaultyCommitter over MemoryCommitter plus the fault plan and recorder;
//! * `context` — what every part shares (env, hooks for triggered host actions, trace);
//! * `host` — host actions, input answers, Unknown settlement, re-delivery; `driver` — the
//!   engine lifecycle and crash/restore loop; `oracle` — invariants; `trace` — closing lines;
//! * `transcript` — a recorded run (`keel::transcript`) as a scenario;
//! * `run` — `run_on_madsim` / `run_on_tokio`; `scenarios` — the Scenario impls, the bundled
//!   files and the file loader; `declared` — what a scenario file sets out to exercise.

mod budget;
mod context;
pub mod declared;
mod delegate;
mod driver;
pub mod generate;
mod host;
mod ledger;
mod model;
pub mod oracle;
mod recording;
pub(crate) mod run;
pub mod scenarios;
pub mod spec;
pub mod spec_json;
pub(crate) mod store;
mod tools;
mod trace;
pub mod transcript;

pub use run::{compares_output, run_on_madsim, run_on_tokio, run_outcome_on_madsim, RunOutcome};
pub use scenarios::{
    bundled_scenarios, crash_after_clean, crash_at, load_scenario, matrix_case, scenarios, swarm_run, FileScenario,
    BUNDLED_FILES, MATRIX_FAULTS, MATRIX_FILES,
};
pub use spec::Spec;
pub use spec_json::{decode_bytes, load_file, SpecFileError};

/// Every key of `faults_fired` the Interaction world reports (faults, host actions, model and
/// tool behaviors), each of which a swarm campaign should fire.
pub const INTERACTION_FAULT_KINDS: &[&str] = &[
    "commit.crash_after",
    "commit.lose_ack",
    "commit.fail_before",
    "host.crash",
    // A torn append in the file-store replay of sampled seeds (`crate::log_compaction`).
    "store.torn_write",
    "tool.error",
    "tool.panic",
    "tool.host_failure",
    "tool.cancel",
    "tool.deadline",
    "tool.input_request",
    "tool.text",
    "tool.advertise",
    "tool.direct",
    "model.provider_error",
    "model.host_failure",
    "model.streamed",
    "model.reduced",
    "model.calls_with_stop",
    "model.calls_with_length",
    "model.calls_with_content_filter",
    "model.calls_with_refusal",
    "model.calls_with_other",
    "host.steer",
    "host.steer.duplicate",
    "host.steer.conflict",
    "host.input.answer",
    "host.input.stale",
    "host.input.reverse",
    "host.redeliver",
    "host.kill",
    "host.cancel",
    "unknown.truth_ran",
    "unknown.truth_performed",
    "unknown.fail",
    "unknown.kill",
    "unknown.leave",
];

/// Every commit boundary a crash can hit (the `CheckpointKind` / `EffectBoundaryKind` names
/// plus `activation`).
pub const INTERACTION_BOUNDARIES: &[&str] =
    &["start", "child_start", "signals", "progress", "parked", "terminal", "pending", "settled", "resolved", "activation"];

/// What the Interaction world declares it exercises (the campaign summary flags gaps).
pub static COVERAGE: crate::coverage::Coverage = crate::coverage::Coverage {
    world: "interaction",
    fault_kinds: INTERACTION_FAULT_KINDS,
    boundaries: INTERACTION_BOUNDARIES,
    boundary_faults: &["crash_after", "lose_ack", "fail_before"],
};
