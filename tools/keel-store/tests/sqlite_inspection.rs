//! `keel-store` on SQLite files that are not (yet) keel stores, and on one that is: inspection
//! (`list`, `show`, `verify`, `export`) opens read-only and writes nothing; `compact` opens as a
//! writer but never turns an empty or foreign file into a store.

use keel::prelude::*;
use keel_store_sqlite::SqliteCommitter;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

const BIN: &str = env!("CARGO_BIN_EXE_keel-store");

#[path = "../../../tests/src/store_fixtures.rs"]
mod store_fixtures;
use store_fixtures::TempDir;

fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

/// The file's bytes and which of SQLite's side files exist beside it.
fn on_disk(path: &Path) -> (Vec<u8>, Vec<&'static str>) {
    let sides = ["-wal", "-shm", "-journal"]
        .into_iter()
        .filter(|s| Path::new(&format!("{}{s}", path.display())).exists())
        .collect();
    (std::fs::read(path).unwrap(), sides)
}

const COMMANDS: [&[&str]; 5] =
    [&["verify"], &["list"], &["show", "process:x"], &["export", "process:x"], &["compact"]];

#[test]
fn an_empty_or_foreign_sqlite_file_is_refused_and_left_byte_identical() {
    let dir = TempDir::new("store-sqlite-inspection");
    let empty = dir.0.join("empty.sqlite");
    std::fs::write(&empty, b"").unwrap();
    let tables = dir.0.join("customers.sqlite");
    rusqlite::Connection::open(&tables)
        .unwrap()
        .execute_batch("CREATE TABLE customers (name TEXT); INSERT INTO customers VALUES ('ada')")
        .unwrap();
    let marked = dir.0.join("marked.sqlite");
    rusqlite::Connection::open(&marked)
        .unwrap()
        .execute_batch("PRAGMA application_id = 305419896; CREATE TABLE t (x); DROP TABLE t")
        .unwrap();
    let cases = [
        (&empty, "is empty: it holds no keel store yet"),
        (&tables, "is a SQLite database of another program"),
        (&marked, "belongs to another application (SQLite application_id 0x12345678"),
    ];
    for (path, says) in cases {
        let before = on_disk(path);
        assert!(before.1.is_empty(), "{}: {:?}", path.display(), before.1);
        for command in COMMANDS {
            // An empty file has no SQLite header to detect it by: `--sqlite` only.
            let flags: &[&str] = if path == &empty { &["--sqlite"] } else { &["--sqlite", "--store"] };
            for flag in flags {
                let mut args = command.to_vec();
                args.extend([*flag, path.to_str().unwrap()]);
                let out = run(&args);
                let err = String::from_utf8_lossy(&out.stderr);
                assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
                assert!(err.contains(says) && err.contains("nothing was written"), "{args:?}: {err}");
                assert!(on_disk(path) == before, "{args:?} changed {}", path.display());
            }
        }
    }
}

#[test]
fn inspecting_a_keel_store_leaves_its_database_file_unchanged() {
    let dir = TempDir::new("store-sqlite-inspection");
    let path = dir.0.join("agents.sqlite");
    let root = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
        let agent = Agent::builder("greeter")
            .version("1.0.0")
            .model(ScriptedModel::new().then_text("Hello."))
            .build()
            .unwrap();
        let store = SqliteCommitter::open(&path).unwrap();
        let runtime = Runtime::with_store(agent, Arc::new(store), keel::env::TokioEnv::current().unwrap().env());
        let run = runtime.start("Hi").await.unwrap();
        assert_eq!(run.result().await.unwrap().text(), "Hello.");
        run.id().process_id().clone()
    });
    let before = std::fs::read(&path).unwrap();
    for command in [&["verify"][..], &["list"], &["show", root.as_str()], &["export", root.as_str()]] {
        let mut args = command.to_vec();
        args.extend(["--sqlite", path.to_str().unwrap()]);
        let out = run(&args);
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(std::fs::read(&path).unwrap() == before, "{args:?} changed the database file");
    }
    let verify = run(&["verify", "--sqlite", path.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&verify.stdout).contains("1 trees verified, 0 damaged"));
}
