//! The durable process-tree kernel.
//!
//! The kernel never names chat, tool or interaction types: strategy payloads are opaque JSON.
//! The owner core (`owner`) is a pure state machine with no async and no I/O; the `engine`
//! module is the thin async driver around it.

pub mod binding;
pub mod capability;
pub mod child;
pub mod commit;
pub mod conformance;
pub mod deployment;
pub mod descriptor;
pub mod direct;
pub mod dispatcher;
pub mod effect;
pub mod engine;
pub mod engine_signal;
pub mod event;
pub mod failure;
pub mod ids;
pub mod invariants;
pub mod mailbox;
pub mod owner;
pub mod prepared;
pub mod process;
pub mod record_decoder;
pub mod relation;
pub mod resource;
pub mod result;
pub mod residue_set;
pub mod retired;
pub mod segment;
pub mod segment_record;
pub mod signal;
pub mod snapshot;
pub mod status;
pub mod transition;
pub mod testkit;
pub mod tree_limits;
pub mod waist;

#[cfg(test)]
mod tests;
