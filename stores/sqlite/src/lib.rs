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
//! Layout, schema versions and failure behavior: see [`schema`] and [`SqliteCommitter`].

#![forbid(unsafe_code)]

mod committer;
mod error;
mod open;
mod rows;
pub mod schema;
pub mod wal;

pub use committer::{SqliteCommitter, TreeSummary, BUSY_TIMEOUT};
pub use error::OpenError;
pub use keel::kernel::commit::TreeDamage;

#[cfg(test)]
mod tests;
