//! The durable process-tree kernel (spec kernel.md).
//!
//! The kernel never names chat, tool or interaction types: strategy payloads are opaque JSON.
//! The owner core (`core`) is a pure state machine with no async and no I/O; the `engine`
//! module is the thin async driver around it.

pub mod capability;
pub mod commit;
pub mod deployment;
pub mod descriptor;
pub mod failure;
pub mod ids;
pub mod mailbox;
pub mod resource;
pub mod signal;
pub mod tree_limits;
