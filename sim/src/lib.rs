//! keel-sim: the deterministic simulation harness for keel.
//!
//! A [`world::Scenario`] is one seeded, self-checking run of a simulated world. A
//! [`campaign::Campaign`] runs many seeds of many scenarios on worker threads and summarizes
//! them identically for any number of workers (or shards on several machines, merged); failing
//! seeds are stored in [`regressions`] files (the CLI appends new ones) and replayed first;
//! [`minimize`] shrinks a failing seed's fault schedule. The `keel-sim` binary ([`cli`]) is a
//! thin layer over these.
//!
//! ```
//! use keel_sim::scenarios::ClockAndRng;
//! use keel_sim::world::{RunOptions, Scenario};
//!
//! let report = ClockAndRng.run(42, &RunOptions::default());
//! assert!(report.passed(), "{report}");
//! assert_eq!(report, ClockAndRng.run(42, &RunOptions::default()));
//! ```
//!
//! Architecture invariant: nothing here reads the wall clock or spawns OS threads except
//! `campaign/parallel.rs`, and no run depends on either.

pub mod campaign;
pub mod cli;
pub mod harness;
pub mod coverage;
pub mod limits;
pub mod log_compaction;
pub mod minimize;
pub mod mutation;
pub mod panics;
pub mod registry;
pub mod regressions;
pub mod scenarios;
pub mod schedule;
pub mod swarm_rng;
pub mod timeline;
pub mod trace;
pub mod interaction_world;
pub mod kernel_world;
pub mod world;
