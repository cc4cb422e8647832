//! Why a SQLite store could not be opened.

use std::path::PathBuf;

/// Why [`SqliteCommitter::open`](crate::SqliteCommitter::open) failed.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// SQLite refused the file or a statement while opening (permissions, a full disk, a file
    /// locked by another program for longer than the busy timeout).
    #[error("opening the SQLite store {}: {source}", path.display())]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    /// The file exists but is not a SQLite database.
    #[error("{} is not a SQLite database; point the store at a new file or a keel store", path.display())]
    NotADatabase { path: PathBuf },
    /// A SQLite database with tables of its own and no keel schema: keel does not write into
    /// another program's database.
    #[error(
        "{} is a SQLite database without a keel schema (it has other tables); use a file of its own for the store",
        path.display()
    )]
    NotAKeelStore { path: PathBuf },
    /// Written by a newer keel: this build does not know its schema.
    #[error(
        "{} has keel schema version {found}, this build knows versions up to {known}; upgrade keel-store-sqlite",
        path.display()
    )]
    NewerSchema { path: PathBuf, found: i64, known: i64 },
    /// The version table holds something other than one version number.
    #[error("{}: damaged schema version table ({reason})", path.display())]
    DamagedSchema { path: PathBuf, reason: String },
    /// SQLite would not switch to write-ahead logging (an in-memory database, or a file
    /// system without shared memory support).
    #[error("{}: SQLite refused WAL mode (journal mode stays `{mode}`); use a local file", path.display())]
    NoWal { path: PathBuf, mode: String },
}
