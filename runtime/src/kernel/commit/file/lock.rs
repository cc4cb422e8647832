//! The store directory's exclusive lock: one `FileCommitter` per directory across every process
//! on the machine.
//!
//! Two writers appending to one log interleave their records; the next open then finds commits
//! of two incarnations racing on one head and refuses the whole log. So the committer takes an
//! exclusive OS lock on `store.lock` before it reads or writes anything in the directory
//! (replay truncates a torn tail, which would cut a live writer's record in half) and holds it
//! until it is dropped. The OS releases the lock when the holder exits, however it exits
//! (SIGKILL included), so a crashed writer never leaves the store locked.
//!
//! The lock belongs to the open lock file, which is close-on-exec: a child process being
//! spawned shares it until its exec closes it (Linux lets the spawning thread go on just before
//! that close, so a store dropped and reopened on another thread in that instant can find it
//! briefly held), and a child that never execs keeps the store locked for as long as it lives.
//!
//! The holder writes its process id into the file so a refused opener can say who holds it.
//! The pid is a hint for people: the lock, not the file's content, decides.

use super::OpenError;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// The lock file's name inside the store directory.
pub const LOCK_FILE_NAME: &str = "store.lock";
/// A pid is at most 10 digits; anything longer in the file is not ours to trust.
const MAX_PID_TEXT: u64 = 32;

/// The held lock. Dropping it releases the lock (the file stays, with the last holder's pid).
#[derive(Debug)]
pub(super) struct StoreLock {
    _file: File,
}

impl StoreLock {
    /// Takes the lock on `dir` (which must exist) without waiting.
    pub(super) fn acquire(dir: &Path) -> Result<StoreLock, OpenError> {
        let path = dir.join(LOCK_FILE_NAME);
        let io_err = |operation: &'static str, path: &PathBuf| {
            let path = path.clone();
            move |source| OpenError::Io { operation, path, source }
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io_err("open the lock file", &path))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(OpenError::Locked { dir: dir.to_path_buf(), pid: holder_pid(&mut file) })
            }
            Err(TryLockError::Error(source)) => {
                return Err(OpenError::Io { operation: "lock", path, source })
            }
        }
        write_pid(&mut file).map_err(io_err("write the holder's pid into", &path))?;
        Ok(StoreLock { _file: file })
    }
}

fn write_pid(file: &mut File) -> io::Result<()> {
    file.set_len(0)?;
    file.seek(SeekFrom::Start(0))?;
    writeln!(file, "{}", std::process::id())
}

/// The pid the holder wrote, if the file holds one (it may be mid-write, or from an old keel).
fn holder_pid(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    file.take(MAX_PID_TEXT).read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}
