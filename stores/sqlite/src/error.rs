//! Why a SQLite store could not be opened.

use crate::committer::BUSY_TIMEOUT;
use std::path::PathBuf;

/// Why [`SqliteCommitter::open`](crate::SqliteCommitter::open) or
/// [`SqliteCommitter::open_read_only`](crate::SqliteCommitter::open_read_only) failed.
///
/// Every refusal of a file that is not a keel store happens before anything is written to it.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// SQLite refused the file or a statement while opening (permissions, a full disk).
    #[error("opening the SQLite store {}: {source}", path.display())]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    /// The file could not be looked at (permissions, a path through a non-directory).
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Another connection held the database's write lock for longer than [`BUSY_TIMEOUT`]
    /// (another process creating, migrating or committing to the same file).
    #[error(
        "{} is being written by another connection, which held its write lock for more than {} s \
         (another process creating, migrating or committing to this store); nothing was written: \
         open it again once that writer is done",
        path.display(),
        BUSY_TIMEOUT.as_secs()
    )]
    Busy { path: PathBuf },
    /// There is no file at the path (only a writer's open creates one).
    #[error("{} does not exist; inspection never creates a store (a writer's open does)", path.display())]
    NotFound { path: PathBuf },
    /// The file is empty (0 bytes, or a SQLite database without any table): it holds no store
    /// yet. A writer's open initializes it; an inspection or an open of an existing store
    /// refuses it.
    #[error(
        "{} is empty: it holds no keel store yet, and nothing was written to it (a writer, \
         `SqliteCommitter::open` or a Runtime, makes it a new store)",
        path.display()
    )]
    Empty { path: PathBuf },
    /// The file exists but is not a SQLite database.
    #[error(
        "{} is not a SQLite database, and nothing was written to it; point the store at a new file or a keel store",
        path.display()
    )]
    NotADatabase { path: PathBuf },
    /// A SQLite database with tables of its own and no keel schema: keel does not write into
    /// another program's database.
    #[error(
        "{} is a SQLite database of another program (it has tables and no keel schema), and \
         nothing was written to it; use a file of its own for the keel store",
        path.display()
    )]
    NotAKeelStore { path: PathBuf },
    /// A SQLite database marked by another application (its header's `application_id` is not
    /// keel's, [`crate::schema::APPLICATION_ID`]).
    #[error(
        "{} belongs to another application (SQLite application_id {application_id:#010x}, keel's is \
         {:#010x}), and nothing was written to it; use a file of its own for the keel store",
        path.display(),
        crate::schema::APPLICATION_ID
    )]
    ForeignApplication { path: PathBuf, application_id: i32 },
    /// Written by a newer keel: this build does not know its schema.
    #[error(
        "{} has keel schema version {found}, this build knows versions up to {known}; upgrade keel-store-sqlite",
        path.display()
    )]
    NewerSchema { path: PathBuf, found: i64, known: i64 },
    /// Written by an older keel and not yet migrated; a read-only open does not migrate.
    #[error(
        "{} has keel schema version {found}, this build reads version {known}; open it once with a \
         writer (`SqliteCommitter::open`, or a Runtime on it) to migrate it, then inspect it again",
        path.display()
    )]
    OlderSchema { path: PathBuf, found: i64, known: i64 },
    /// The version table holds something other than one version number.
    #[error("{}: damaged schema version table ({reason})", path.display())]
    DamagedSchema { path: PathBuf, reason: String },
    /// SQLite would not switch to write-ahead logging (an in-memory database, or a file
    /// system without shared memory support).
    #[error("{}: SQLite refused WAL mode (journal mode stays `{mode}`); use a local file", path.display())]
    NoWal { path: PathBuf, mode: String },
}
