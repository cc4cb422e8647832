//! The PostgreSQL server the tests use: `KEEL_TEST_POSTGRES` holds its connection string
//! (`bash .ci/postgres.sh start` starts one and `bash .ci/postgres.sh url` prints it). Without
//! it, or when the server does not answer, a test is skipped with a message, unless
//! `KEEL_REQUIRE_POSTGRES=1` or `CI` is set: then it fails (`.ci/run` sets the first, CI
//! services the second), so a broken server setup can never pass as green.
#![allow(dead_code)] // each test file uses part of this module

use keel_store_postgres::{PostgresCommitter, PostgresOptions};
use std::sync::atomic::{AtomicU64, Ordering};

pub const URL_VAR: &str = "KEEL_TEST_POSTGRES";
pub const REQUIRE_VAR: &str = "KEEL_REQUIRE_POSTGRES";

/// The server's connection string, if one answers; see the module docs for when it panics.
pub async fn server() -> Option<String> {
    // A CI job (`CI` set, as CI services set it) never skips: a missing server there is a
    // broken setup, not a machine without PostgreSQL.
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
    let required = ci || std::env::var(REQUIRE_VAR).is_ok_and(|v| v == "1");
    let url = match std::env::var(URL_VAR) {
        Ok(url) if !url.trim().is_empty() => url,
        _ => {
            assert!(
                !required,
                "{REQUIRE_VAR}=1 or CI is set, but {URL_VAR} is not set (bash .ci/postgres.sh start, then bash .ci/postgres.sh url)"
            );
            eprintln!("skipped: set {URL_VAR} to a PostgreSQL connection string to run this test");
            return None;
        }
    };
    match tokio_postgres::connect(&url, tokio_postgres::NoTls).await {
        Ok((client, connection)) => {
            drop(client);
            drop(connection);
            Some(url)
        }
        Err(e) => {
            assert!(
                !required,
                "{REQUIRE_VAR}=1 or CI is set, but PostgreSQL at {URL_VAR} is unreachable: {e}"
            );
            eprintln!("skipped: PostgreSQL at {URL_VAR} is unreachable: {e}");
            None
        }
    }
}

/// A schema name no other test (or test process) uses.
pub fn fresh_schema(tag: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("keel_t_{tag}_{}_{n}", std::process::id())
}

pub async fn open(url: &str, schema: &str) -> PostgresCommitter {
    let options = PostgresOptions {
        schema: schema.to_owned(),
        ..PostgresOptions::default()
    };
    PostgresCommitter::connect_with(url, options)
        .await
        .unwrap_or_else(|e| panic!("open {schema}: {e}"))
}

/// Runs SQL on a connection of its own (outside any store).
pub async fn sql(url: &str, statements: &str) {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let task = tokio::spawn(connection);
    client
        .batch_execute(statements)
        .await
        .unwrap_or_else(|e| panic!("{statements}: {e}"));
    drop(client);
    let _ = task.await;
}

pub async fn drop_schema(url: &str, schema: &str) {
    sql(url, &format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE")).await;
}

/// A real multi-threaded tokio runtime (the workspace builds with `--cfg madsim`, but the
/// `tokio` crate stays real: these tests do real network I/O).
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}
