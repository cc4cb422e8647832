//! Fixtures of the tests that open stores while they spawn processes: a temp directory, and
//! the retry of an open that found the store locked by a copy of this process's own file.
//! Shared by keel-tests' `durable_kill` and, included by path, by keel-store's `cli` and
//! `sqlite_inspection` tests.
#![allow(dead_code)] // each includer uses part of it

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

/// A fresh directory under the system temp dir (created), removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("keel-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Tests run on parallel threads and spawn processes, and a child being spawned on one thread
/// holds copies of this process's open files until its exec has closed them (they are
/// close-on-exec; Linux resumes the spawning thread before that close). A store dropped and
/// reopened on another thread in that instant finds its lock still held, by a copy of its own
/// file: the refusal then names this process (or no process, when the copy was closed before
/// the holder was looked up). Only that case is retried, briefly; a lock held for real by a
/// child still fails.
pub fn retry_while_a_spawning_child_holds<T, E: std::fmt::Display>(
    mut open: impl FnMut() -> Result<T, E>,
) -> Result<T, E> {
    // The refusal reads "... is in use by process PID; ...": the `;` keeps pid 12 from
    // matching 123.
    let own = format!("is in use by process {};", std::process::id());
    for _ in 0..400 {
        match open() {
            Err(e) if e.to_string().contains(&own) || e.to_string().contains("is in use by another process") => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            other => return other,
        }
    }
    open()
}
