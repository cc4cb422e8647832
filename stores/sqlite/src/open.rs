//! Opening a database file: telling a keel store from anything else before writing, the
//! writer's connection (WAL, `synchronous=FULL`, migration, the WAL bound) and the read-only
//! one (no write of any kind).

use crate::committer::BUSY_TIMEOUT;
use crate::error::OpenError;
use crate::schema::{APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION, VERSION_TABLE};
use rusqlite::{Connection, ErrorCode, OpenFlags, TransactionBehavior};
use std::path::Path;

/// What a database file holds, read without writing.
enum Found {
    /// A SQLite database with no schema object and no application id: no store yet.
    Blank,
    /// A keel store; `tagged` when its header carries [`APPLICATION_ID`] (older keel did not
    /// set it).
    Keel { version: i64, tagged: bool },
}

fn sqlite_error(path: &Path, source: rusqlite::Error) -> OpenError {
    let path = path.to_path_buf();
    match source.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) => OpenError::NotADatabase { path },
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => OpenError::Busy { path },
        _ => OpenError::Sqlite { path, source },
    }
}

/// Reads the header's application id and the schema (reads only).
fn identify(conn: &Connection, path: &Path) -> Result<Found, OpenError> {
    let fail = |e| sqlite_error(path, e);
    let application_id: i32 =
        conn.query_row("PRAGMA application_id", [], |r| r.get(0)).map_err(fail)?;
    if application_id != 0 && application_id != APPLICATION_ID {
        return Err(OpenError::ForeignApplication { path: path.to_path_buf(), application_id });
    }
    let has_version_table: bool = conn
        .query_row(
            "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'keel_schema'",
            [],
            |r| r.get(0),
        )
        .map_err(fail)?;
    let damaged = |reason: String| OpenError::DamagedSchema { path: path.to_path_buf(), reason };
    if !has_version_table {
        let objects: i64 = conn
            .query_row("SELECT count(*) FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'", [], |r| {
                r.get(0)
            })
            .map_err(fail)?;
        return match (objects, application_id == APPLICATION_ID) {
            (0, false) => Ok(Found::Blank),
            (_, false) => Err(OpenError::NotAKeelStore { path: path.to_path_buf() }),
            (_, true) => Err(damaged("keel's application id but no keel_schema table".into())),
        };
    }
    let versions: Vec<rusqlite::types::Value> = conn
        .prepare("SELECT version FROM keel_schema")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .map_err(fail)?;
    let version = match versions.as_slice() {
        [rusqlite::types::Value::Integer(v)] if *v >= 0 => *v,
        [] => return Err(damaged("the version table is empty".into())),
        [other] => return Err(damaged(format!("version {other:?}"))),
        _ => return Err(damaged(format!("{} version rows", versions.len()))),
    };
    if version > SCHEMA_VERSION {
        return Err(OpenError::NewerSchema {
            path: path.to_path_buf(),
            found: version,
            known: SCHEMA_VERSION,
        });
    }
    Ok(Found::Keel { version, tagged: application_id == APPLICATION_ID })
}

/// The file's size, or `None` when there is none.
fn file_len(path: &Path) -> Result<Option<u64>, OpenError> {
    match std::fs::metadata(path) {
        Ok(meta) => Ok(Some(meta.len())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(OpenError::Io { path: path.to_path_buf(), source }),
    }
}

/// A connection that cannot write: no journal mode change, no migration, no `-journal`. (A
/// store in WAL mode still gets SQLite's shared `-shm` index and an empty `-wal` beside it
/// when none exist: readers of a WAL database need them.)
fn read_only_connection(path: &Path) -> Result<Connection, OpenError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(|e| sqlite_error(path, e))?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(|e| sqlite_error(path, e))?;
    Ok(conn)
}

/// The read-only connection of an existing keel store of this build's schema version.
pub(crate) fn reader(path: &Path) -> Result<Connection, OpenError> {
    match file_len(path)? {
        None => return Err(OpenError::NotFound { path: path.to_path_buf() }),
        Some(0) => return Err(OpenError::Empty { path: path.to_path_buf() }),
        Some(_) => {}
    }
    let conn = read_only_connection(path)?;
    match identify(&conn, path)? {
        Found::Blank => Err(OpenError::Empty { path: path.to_path_buf() }),
        Found::Keel { version, .. } if version < SCHEMA_VERSION => Err(OpenError::OlderSchema {
            path: path.to_path_buf(),
            found: version,
            known: SCHEMA_VERSION,
        }),
        Found::Keel { .. } => Ok(conn),
    }
}

/// The writer's connection. `existing`: refuse a missing or empty file instead of making it a
/// new store.
pub(crate) fn writer(path: &Path, existing: bool) -> Result<Connection, OpenError> {
    // Look before writing anything: another program's file is refused as it was found.
    let current = match (file_len(path)?, existing) {
        (None, true) => return Err(OpenError::NotFound { path: path.to_path_buf() }),
        (Some(0), true) => return Err(OpenError::Empty { path: path.to_path_buf() }),
        (None | Some(0), false) => false,
        (Some(_), _) => match identify(&read_only_connection(path)?, path)? {
            Found::Blank if existing => return Err(OpenError::Empty { path: path.to_path_buf() }),
            Found::Blank => false,
            Found::Keel { version, tagged } => version == SCHEMA_VERSION && tagged,
        },
    };
    let fail = |e| sqlite_error(path, e);
    let mut conn = Connection::open(path).map_err(fail)?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(fail)?;
    let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0)).map_err(fail)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(OpenError::NoWal { path: path.to_path_buf(), mode });
    }
    conn.pragma_update(None, "synchronous", "FULL").map_err(fail)?;
    crate::wal::bound(&mut conn).map_err(fail)?;
    if !current {
        migrate(&mut conn, path)?;
    }
    Ok(conn)
}

/// Brings the file to [`SCHEMA_VERSION`] and keel's application id in one transaction (see
/// [`crate::schema`]); writes nothing when it is there already.
fn migrate(conn: &mut Connection, path: &Path) -> Result<(), OpenError> {
    let fail = |e| sqlite_error(path, e);
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(fail)?;
    // Again under the write lock: the file may have changed since it was first looked at.
    let (version, tagged) = match identify(&tx, path)? {
        Found::Blank => {
            tx.execute_batch(VERSION_TABLE).map_err(fail)?;
            (0, false)
        }
        Found::Keel { version, tagged } => (version, tagged),
    };
    if version == SCHEMA_VERSION && tagged {
        return Ok(()); // nothing to write: the transaction rolls back on drop
    }
    if version < SCHEMA_VERSION {
        let from = usize::try_from(version).unwrap_or(usize::MAX);
        for step in MIGRATIONS.iter().skip(from) {
            tx.execute_batch(step).map_err(fail)?;
        }
        tx.execute("DELETE FROM keel_schema", []).map_err(fail)?;
        tx.execute("INSERT INTO keel_schema (version) VALUES (?1)", [SCHEMA_VERSION]).map_err(fail)?;
    }
    tx.pragma_update(None, "application_id", APPLICATION_ID).map_err(fail)?;
    tx.commit().map_err(fail)
}
