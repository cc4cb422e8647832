//! The durability port: the kernel hands a committer already-encoded tree
//! cuts and the committer installs them under one compare-and-advance head per root.
//!
//! * `cut` — a cut as an envelope plus keyed records, its tree digest, deltas and their
//!   resolution against a head.
//! * `port` — request types, commit identities and content digests, the `Committer` trait.
//! * `index` — the commit rules over an in-memory index every store shares.
//! * `memory` — the in-memory store and its commit history (oracle input).
//! * `file` — the durable store: an fsync'd append-only log per directory.
//! * `group` — group commit: concurrent commits batched behind one durable sync.
//! * `damage` — a damaged tree as a store reports it; the other trees are served.
//! * `faults` — a fault-injecting wrapper for the simulator.
//! * `conformance` — the reusable store-level conformance suite every committer runs.
//!
//! The committer never parses snapshots: it trusts `TreeCut::digest` to be the tree digest of
//! the cut's envelope and records (the kernel computed it), compares cuts by digest and
//! incarnation, and resolves a delta's kept records against its head by key and digest.

pub mod conformance;
pub mod cut;
pub mod damage;
pub mod faults;
pub mod file;
pub mod group;
pub mod index;
pub mod memory;
pub mod port;

pub use cut::{CutEntry, CutEnvelope, CutError};
pub use damage::TreeDamage;
pub use faults::{CommitCall, CommitCallKind, Fault, FaultPlan, FaultyCommitter};
pub use file::{
    CompactError, FileCommitter, FileOptions, FileStats, OpenError, Recovery, TornTail,
    LOG_FILE_NAME,
};
pub use group::{GroupCommit, GroupLimits, GroupStats};
pub use index::{CommitIndex, Decision, Installation};
pub use memory::{audit_history, CommitRecord, CommitRecordKind, MemoryCommitter};
pub use port::{
    check_chain, Activation, Checkpoint, CheckpointKind, CommitError, CommitRequest, Committer,
    EffectBoundary, EffectBoundaryKind, Head, TreeCut,
};
