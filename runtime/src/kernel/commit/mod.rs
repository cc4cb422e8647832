//! The durability port: the kernel hands a committer already-encoded tree
//! cuts and the committer installs them under one compare-and-advance head per root.
//!
//! * `port` — request types, commit identities and content digests, the `Committer` trait.
//! * `index` — the commit rules over an in-memory index every store shares.
//! * `memory` — the in-memory store and its commit history (oracle input).
//! * `file` — the durable store: an fsync'd append-only log per directory.
//! * `damage` — a damaged tree as a store reports it; the other trees are served.
//! * `faults` — a fault-injecting wrapper for the simulator.
//! * `conformance` — the reusable store-level conformance suite every committer runs.
//!
//! The committer never parses snapshots: it trusts `TreeCut::digest` to be the digest of
//! `TreeCut::bytes` (the kernel computed both) and compares cuts by digest and incarnation.

pub mod conformance;
pub mod damage;
pub mod faults;
pub mod file;
pub mod index;
pub mod memory;
pub mod port;

pub use damage::TreeDamage;
pub use faults::{CommitCall, CommitCallKind, Fault, FaultPlan, FaultyCommitter};
pub use file::{FileCommitter, OpenError, Recovery, LOCK_FILE_NAME, LOG_FILE_NAME};
pub use index::{CommitIndex, Decision, Installation};
pub use memory::{audit_history, CommitRecord, CommitRecordKind, MemoryCommitter};
pub use port::{
    Activation, Checkpoint, CheckpointKind, CommitError, Committer, EffectBoundary,
    EffectBoundaryKind, Head, TreeCut,
};
