//! keel-sim: deterministic simulation harness.
