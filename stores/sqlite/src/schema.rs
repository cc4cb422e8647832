//! The store's schema and its migrations.
//!
//! Version 1:
//!
//! * `keel_schema(version)`: one row, the schema version the file was last migrated to.
//! * `keel_heads`: one row per tree: its head (sequence, writer incarnation, cut digest and the
//!   whole cut) and `commits`, the number of installed commits so far.
//! * `keel_commits`: one row per installed commit of a tree, in installation order
//!   (`position` 0, 1, …): its identity and content digest (the facts that answer retries and
//!   conflicts), what it was (`commit_kind` = `checkpoint` / `effect` / `activation`, with
//!   `kind`, `process_id`, `effect_id`, `previous_incarnation` as that kind needs), and the
//!   sequence, writer and cut digest of the head it installed. `(root_id, identity)` is unique:
//!   the database itself refuses a second fact under one identity.
//!
//! Only the head keeps its cut: a commit row keeps the cut's digest, which is what the commit
//! rules and the history audit compare. Identities and digests are stored in their text forms
//! (`process:…`, `incarnation:…`, `sha256:…`), so the tables read well in the `sqlite3` shell.
//!
//! Tables are `STRICT`: SQLite refuses a value of the wrong type instead of storing it.
//! A writer's open migrates a file, in one transaction, from its version to [`SCHEMA_VERSION`]
//! by running [`MIGRATIONS`] in order; a file from a newer keel is refused.
//!
//! **How a file says it is keel's.** The database header's `application_id` is
//! [`APPLICATION_ID`] (`0x6B65656C`, the ASCII bytes `keel`; `file(1)` and `sqlite3`'s
//! `.dbinfo` show it). Stores written before keel set it have id 0 and a `keel_schema` table:
//! they are recognized by the table and get the id in the same transaction as their first
//! write by a newer keel. Any other non-zero id, or tables without `keel_schema`, is another
//! program's database: every open refuses it before writing anything (no WAL switch, no table,
//! no id). An empty file (0 bytes, or a database without any table) holds no store yet: a
//! writer initializes it, an inspection refuses it.

/// The `application_id` of every keel store (the ASCII bytes `keel`, big-endian).
pub const APPLICATION_ID: i32 = 0x6B65_656C;

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = 1;

/// `MIGRATIONS[v]` takes a file from version `v` to `v + 1` (version 0 is an empty file).
pub const MIGRATIONS: &[&str] = &[V0_TO_V1];

const V0_TO_V1: &str = "
CREATE TABLE keel_heads (
    root_id        TEXT    NOT NULL PRIMARY KEY,
    sequence       INTEGER NOT NULL,
    incarnation_id TEXT    NOT NULL,
    cut_digest     TEXT    NOT NULL,
    commits        INTEGER NOT NULL,
    cut            BLOB    NOT NULL
) STRICT;
CREATE TABLE keel_commits (
    root_id              TEXT    NOT NULL,
    position             INTEGER NOT NULL,
    identity             TEXT    NOT NULL,
    content_digest       TEXT    NOT NULL,
    commit_kind          TEXT    NOT NULL,
    kind                 TEXT,
    process_id           TEXT,
    effect_id            TEXT,
    previous_incarnation TEXT,
    sequence             INTEGER NOT NULL,
    incarnation_id       TEXT    NOT NULL,
    cut_digest           TEXT    NOT NULL,
    PRIMARY KEY (root_id, position),
    UNIQUE (root_id, identity)
) STRICT;
";

/// The version table (created by every open; it is how a file says it is a keel store).
pub(crate) const VERSION_TABLE: &str =
    "CREATE TABLE IF NOT EXISTS keel_schema (version INTEGER NOT NULL) STRICT";
