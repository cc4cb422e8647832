//! keel-sim: deterministic simulation harness.
pub mod kernel_world;
