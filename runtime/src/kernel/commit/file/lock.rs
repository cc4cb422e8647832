//! One writer per store: the exclusive OS lock is taken on the log itself (`commits.log`).
//!
//! Two writers appending to one log interleave their records; the next open then finds commits
//! of two incarnations racing on one head and refuses the whole log, and before that each
//! writer serves heads the other has already moved past. So a writer locks the log file
//! exclusively (`File::try_lock`, `flock` on unix) before it reads or writes anything, and
//! holds it for its life; an inspector (`keel-store list`, `verify`, ...) locks it shared, so
//! several inspectors may read together but never while a writer appends (a frame being
//! written would read as a torn tail). The OS releases the lock when its holder exits, however
//! it exits (SIGKILL included), so a crashed writer never leaves the store locked, and no file
//! in the directory can be deleted to get past the lock: the lock is on the very file the
//! records are in.
//!
//! A lock belongs to an open file, not to a name. So after locking, the opener checks that the
//! file it locked is still the one the path names (same device and inode): a compaction
//! replaces the log by renaming a new file over it, and an opener that opened the old file
//! just before the rename may get its lock once the compacting writer lets the old file go.
//! Such an opener finds a different inode at the path and starts over, a bounded number of
//! times; the compacting writer locks the new file before renaming it into place, so the
//! retry finds it held. Holding the lock on the file at the path is what decides.
//!
//! The lock belongs to the open file description, which is close-on-exec: a child process being
//! spawned shares it until its exec closes it (Linux lets the spawning thread go on just before
//! that close, so a store dropped and reopened on another thread in that instant can find it
//! briefly held), and a child that never execs keeps the store locked for as long as it lives.
//!
//! A refused opener names the holder's process id when the OS says who it is (Linux lists
//! every `flock` with its owner in `/proc/locks`); nothing is written for that.
//!
//! Releases before this one locked a separate file, `store.lock`. It decides nothing now and
//! this release never creates it; where one exists (left by an earlier release) it is locked
//! too, so a writer of an earlier release and one of this release still exclude each other.

use super::OpenError;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// The lock file of earlier releases (see the module docs): locked where it exists, never
/// created.
pub(super) const LEGACY_LOCK_FILE_NAME: &str = "store.lock";
/// How often an opener starts over after finding that the file it locked was replaced.
const REPLACED_TRIES: u32 = 8;
/// A pid is at most 10 digits; anything longer in an old lock file is not ours to trust.
const MAX_PID_TEXT: u64 = 32;

/// How the log is opened and locked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Access {
    /// Read and write, exclusive lock.
    Write,
    /// Read only, shared lock: nothing in the directory is created or written.
    Inspect,
}

/// The log, opened and locked, and an earlier release's lock file if the directory holds one.
#[derive(Debug)]
pub(super) struct LockedLog {
    pub(super) log: File,
    pub(super) legacy: Option<File>,
}

/// Opens the log at `path` (which must exist: a missing log is `OpenError::NoLog`, or, for a
/// writer, made by `create` and tried again) and locks it without waiting.
pub(super) fn open_locked(
    dir: &Path,
    path: &Path,
    access: Access,
    mut create: impl FnMut() -> Result<(), OpenError>,
) -> Result<LockedLog, OpenError> {
    for _ in 0..REPLACED_TRIES {
        let opened = match access {
            Access::Write => OpenOptions::new().read(true).write(true).open(path),
            Access::Inspect => File::open(path),
        };
        let log = match opened {
            Ok(log) => log,
            Err(e) if e.kind() == io::ErrorKind::NotFound => match access {
                // Created between our look and our open, or removed by hand: make it again.
                Access::Write => {
                    create()?;
                    continue;
                }
                Access::Inspect => return Err(OpenError::NoLog { dir: dir.to_path_buf() }),
            },
            Err(source) => {
                return Err(OpenError::Io { operation: "open", path: path.to_path_buf(), source })
            }
        };
        if !try_lock(&log, access, path)? {
            return Err(OpenError::Locked { dir: dir.to_path_buf(), pid: holder_pid(&log) });
        }
        if !is_at_path(&log, path).map_err(|source| OpenError::Io {
            operation: "inspect",
            path: path.to_path_buf(),
            source,
        })? {
            continue; // replaced by a compaction (or by hand) after we opened it
        }
        let legacy = lock_legacy(dir, access)?;
        return Ok(LockedLog { log, legacy });
    }
    // The log kept being replaced under us: only a writer compacting does that, and it holds
    // the lock on the current log.
    Err(OpenError::Locked { dir: dir.to_path_buf(), pid: None })
}

/// Takes the lock; `false` when another holds it.
fn try_lock(file: &File, access: Access, path: &Path) -> Result<bool, OpenError> {
    let taken = match access {
        Access::Write => file.try_lock(),
        Access::Inspect => file.try_lock_shared(),
    };
    match taken {
        Ok(()) => Ok(true),
        Err(TryLockError::WouldBlock) => Ok(false),
        Err(TryLockError::Error(source)) => {
            Err(OpenError::Io { operation: "lock", path: path.to_path_buf(), source })
        }
    }
}

/// Whether `file` is the file `path` names now.
pub(super) fn is_at_path(file: &File, path: &Path) -> io::Result<bool> {
    let held = file.metadata()?;
    let named = match std::fs::metadata(path) {
        Ok(named) => named,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Ok(held.dev() == named.dev() && held.ino() == named.ino())
    }
    // Elsewhere there is no inode to compare; lengths and times are the best available sign.
    #[cfg(not(unix))]
    {
        Ok(held.len() == named.len() && held.modified().ok() == named.modified().ok())
    }
}

/// Locks an earlier release's `store.lock` if the directory holds one (never creates it).
fn lock_legacy(dir: &Path, access: Access) -> Result<Option<File>, OpenError> {
    let path: PathBuf = dir.join(LEGACY_LOCK_FILE_NAME);
    let mut file = match File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(OpenError::Io { operation: "open", path, source }),
    };
    if try_lock(&file, access, &path)? {
        return Ok(Some(file));
    }
    // Earlier releases wrote their pid into the file.
    let mut text = String::new();
    let pid = (&mut file).take(MAX_PID_TEXT).read_to_string(&mut text).ok().and_then(|_| text.trim().parse().ok());
    Err(OpenError::Locked { dir: dir.to_path_buf(), pid: pid.or_else(|| holder_pid(&file)) })
}

/// The process holding a lock on `file`, where the OS says (Linux: `/proc/locks`, one line per
/// lock: `1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234567 0 EOF`, device numbers in hex).
#[cfg(target_os = "linux")]
fn holder_pid(file: &File) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let meta = file.metadata().ok()?;
    let (dev, ino) = (meta.dev(), meta.ino());
    // glibc's encoding of major and minor in a `dev_t`.
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    locks.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // Waiters are listed with "->" and own nothing.
        let [_, "FLOCK", _, _, pid, id, ..] = fields.as_slice() else { return None };
        let mut parts = id.split(':');
        let (ma, mi, i) = (parts.next()?, parts.next()?, parts.next()?);
        let same = u64::from_str_radix(ma, 16).ok()? == major
            && u64::from_str_radix(mi, 16).ok()? == minor
            && i.parse::<u64>().ok()? == ino;
        same.then(|| pid.parse().ok()).flatten()
    })
}

#[cfg(not(target_os = "linux"))]
fn holder_pid(_: &File) -> Option<u32> {
    None
}
