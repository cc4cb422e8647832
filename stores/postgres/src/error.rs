//! The errors of opening and administering a PostgreSQL store (commits report
//! `keel::kernel::commit::CommitError`, as every committer does).

/// Why the store could not be opened or an administrative call failed.
#[derive(Debug, thiserror::Error)]
pub enum PostgresError {
    /// The connection string does not parse.
    #[error("invalid PostgreSQL connection string: {message}")]
    InvalidConfig { message: String },
    /// The schema name is not a plain lowercase identifier.
    #[error(
        "invalid schema name {name:?}: use 1 to 63 lowercase ASCII letters, digits or \
         underscores, starting with a letter or an underscore"
    )]
    InvalidSchema { name: String },
    /// The server could not be reached or refused the connection.
    #[error("cannot connect to PostgreSQL: {message} (check the connection string and that the server runs)")]
    Connect { message: String },
    /// The store was created by a newer build.
    #[error(
        "the store's schema is at version {found}, newer than this build's {known}: upgrade \
         keel-store-postgres before opening it"
    )]
    SchemaTooNew { found: i32, known: i32 },
    /// A migration failed; its transaction rolled back and left the schema as it was.
    #[error("migration {version} failed and was rolled back: {message}")]
    Migration { version: i32, message: String },
    /// The schema holds tables of another program and no keel store: keel does not write into
    /// it (nothing was created or changed).
    #[error(
        "schema {schema:?} holds tables of another program ({tables}) and no keel store; nothing \
         was written to it: give the store a schema of its own (PostgresOptions::schema)"
    )]
    ForeignSchema { schema: String, tables: String },
    /// A query failed.
    #[error("PostgreSQL query failed: {message}")]
    Query { message: String },
    /// A stored row does not hold what the store writes (edited by hand, or another program).
    #[error("stored data is not valid: {message}")]
    Corrupt { message: String },
    /// No tokio runtime was current where one is needed (connections run as tokio tasks).
    #[error("keel-store-postgres needs a tokio runtime: {message}")]
    NoRuntime { message: String },
}

impl PostgresError {
    pub(crate) fn query(e: tokio_postgres::Error) -> PostgresError {
        PostgresError::Query {
            message: describe(&e),
        }
    }
}

/// The server's own message when there is one (it names the constraint or the SQL error),
/// otherwise the client's.
pub(crate) fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {} ({})", db.severity(), db.message(), db.code().code()),
        None => e.to_string(),
    }
}
