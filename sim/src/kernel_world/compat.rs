//! The campaign framework's plug-in types, used by the kernel world.
pub use crate::world::{RunOptions, RunReport, Scenario, Violation};
