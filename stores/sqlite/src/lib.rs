//! A SQLite store for keel: [`SqliteCommitter`], the embedded durable committer for agents on
//! one machine.
//!
//! ```no_run
//! use keel_store_sqlite::SqliteCommitter;
//! let store = SqliteCommitter::open("agents.sqlite")?;
//! # Ok::<(), keel_store_sqlite::OpenError>(())
//! ```
//!
//! It keeps the same commit rules as keel's in-memory and file stores (expected head,
//! incarnation fencing, consecutive sequences, identical retries acknowledged only while
//! current, one boundary of each kind per Effect) and decides every commit inside one SQLite
//! transaction from the rows themselves, so two processes on one database file are fenced by
//! the database, not by either process's memory. The database runs in WAL mode with
//! `synchronous=FULL`: a commit is acknowledged only after its transaction reached the disk.
//!
//! It writes only to its own files: a file is identified read-only first (keel's
//! `application_id`, [`schema::APPLICATION_ID`], or its schema table) and another program's
//! database is refused untouched. [`SqliteCommitter::open_read_only`] inspects a store
//! without writing anything, and the writer keeps the write-ahead log within a bound even
//! while other connections read ([`wal`]).
//!
//! Layout, schema versions and failure behavior: see [`schema`], [`wal`] and
//! [`SqliteCommitter`].

#![forbid(unsafe_code)]

mod committer;
mod error;
mod open;
mod rows;
pub mod schema;
pub mod wal;

pub use committer::{SqliteCommitter, TreeSummary, BUSY_TIMEOUT, HEAD_CACHE_TREES};
pub use error::OpenError;
pub use keel::kernel::commit::TreeDamage;

#[cfg(test)]
mod tests;
