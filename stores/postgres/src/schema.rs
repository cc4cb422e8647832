//! The store's schema and its migrations: SQL files embedded in the crate, applied in order on
//! open, each at most once, all in one transaction. `schema_version` records the applied
//! versions. A transaction-scoped advisory lock serializes workers opening the same store at
//! once, so the second finds the first's versions and applies nothing (migration is
//! idempotent).

use crate::error::{describe, PostgresError};
use tokio_postgres::Client;

/// The migrations, in order. Version N is `MIGRATIONS[N - 1]`; never edit a released one, add
/// the next.
const MIGRATIONS: &[(i32, &str)] = &[(1, include_str!("../migrations/0001_commits.sql"))];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i32 = 1;

/// Advisory lock key of the migration step ("keel" in ASCII).
const MIGRATION_LOCK: i64 = 0x6b65_656c;

/// A schema name used unquoted in `search_path` and `CREATE SCHEMA`: a plain identifier.
pub(crate) fn check_schema_name(name: &str) -> Result<(), PostgresError> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_');
    let rest_ok = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if first_ok && rest_ok && name.len() <= 63 {
        Ok(())
    } else {
        Err(PostgresError::InvalidSchema {
            name: name.to_owned(),
        })
    }
}

/// Creates the schema if missing and applies every migration it lacks. Returns the versions
/// applied by this call (empty when the store was current).
pub(crate) async fn migrate(client: &mut Client, schema: &str) -> Result<Vec<i32>, PostgresError> {
    let tx = client.transaction().await.map_err(PostgresError::query)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(PostgresError::query)?;
    refuse_foreign(&tx, schema).await?;
    tx.batch_execute(&format!(
        "CREATE SCHEMA IF NOT EXISTS \"{schema}\";
         SET LOCAL search_path TO \"{schema}\";
         CREATE TABLE IF NOT EXISTS schema_version (
             version    integer     PRIMARY KEY,
             applied_at timestamptz NOT NULL DEFAULT now()
         );"
    ))
    .await
    .map_err(PostgresError::query)?;
    let row = tx
        .query_one("SELECT COALESCE(MAX(version), 0) FROM schema_version", &[])
        .await
        .map_err(PostgresError::query)?;
    let current: i32 = row.get(0);
    if current > SCHEMA_VERSION {
        return Err(PostgresError::SchemaTooNew {
            found: current,
            known: SCHEMA_VERSION,
        });
    }
    let mut applied = Vec::new();
    for &(version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > current) {
        let failed = |e: tokio_postgres::Error| PostgresError::Migration {
            version,
            message: describe(&e),
        };
        tx.batch_execute(sql).await.map_err(failed)?;
        tx.execute(
            "INSERT INTO schema_version (version) VALUES ($1)",
            &[&version],
        )
        .await
        .map_err(failed)?;
        applied.push(version);
    }
    tx.commit().await.map_err(PostgresError::query)?;
    Ok(applied)
}

/// Refuses a schema that holds tables but no `schema_version`: another program's, which the
/// migration would otherwise fill with keel's tables.
async fn refuse_foreign(tx: &tokio_postgres::Transaction<'_>, schema: &str) -> Result<(), PostgresError> {
    let rows = tx
        .query(
            "SELECT c.relname::text FROM pg_catalog.pg_class c \
             JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'f') ORDER BY 1",
            &[&schema],
        )
        .await
        .map_err(PostgresError::query)?;
    let tables: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
    if tables.is_empty() || tables.iter().any(|t| t == "schema_version") {
        return Ok(());
    }
    Err(PostgresError::ForeignSchema { schema: schema.to_owned(), tables: tables.join(", ") })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_numbered_in_order_up_to_the_schema_version() {
        for (i, (version, sql)) in MIGRATIONS.iter().enumerate() {
            assert_eq!(*version, i32::try_from(i + 1).unwrap());
            assert!(!sql.trim().is_empty());
        }
        assert_eq!(MIGRATIONS.last().map(|m| m.0), Some(SCHEMA_VERSION));
    }

    #[test]
    fn schema_names_are_plain_identifiers() {
        for ok in ["keel", "_x", "keel_test_12", &"a".repeat(63)] {
            assert!(check_schema_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "Keel",
            "1keel",
            "keel-x",
            "ke\"el",
            "keel;drop",
            &"a".repeat(64),
        ] {
            assert!(check_schema_name(bad).is_err(), "{bad}");
        }
    }
}
