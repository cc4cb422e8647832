//! The campaign framework's plug-in types, mirrored here until `sim/src/world.rs` lands on
//! this branch (the lead swaps this import for `crate::world` at merge; the shapes are
//! identical).

use std::collections::BTreeMap;

/// One seeded simulation a campaign can run.
pub trait Scenario: Send + Sync {
    fn name(&self) -> &str;
    fn run(&self, seed: u64, options: &RunOptions) -> RunReport;
}

/// What one run found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunReport {
    pub seed: u64,
    pub scenario: String,
    /// SHA-256 over the trace lines: equal seeds must give equal hashes.
    pub trace_hash: [u8; 32],
    /// The trace itself when `RunOptions::keep_trace` was set.
    pub trace: Option<Vec<String>>,
    pub faults_fired: BTreeMap<String, u64>,
    pub crash_points_hit: BTreeMap<String, u64>,
    pub invariants_checked: u64,
    pub violations: Vec<Violation>,
    /// The options this seed expanded into (printed with the result).
    pub swarm: BTreeMap<String, String>,
    pub outcome: String,
}

/// One broken invariant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub invariant: String,
    pub detail: String,
}

/// Per-run options set by the campaign.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunOptions {
    pub keep_trace: bool,
}
