//! The durable store: one directory holding `commits.log`, an append-only log with one framed
//! record per installed commit. A record is written and `fsync`ed (`File::sync_data`) before
//! its commit is acknowledged; opening the directory replays the log through the same
//! [`CommitIndex`] rules the in-memory store uses, so both stores answer alike.
//!
//! # Group commit
//!
//! Commits submitted together (by the owners of different trees, in one process) are written
//! as one batch: each request is decided against the durable index, the frames of those
//! installed are written with one write and made durable with ONE `fdatasync`, then the index
//! is updated and every request of the batch answered (see [`group`](super::group); at most
//! one request per tree per batch, so each is decided on durable state alone). A commit is
//! acknowledged only after the sync that covers its frame; a failed write or sync answers
//! every request of the batch with an error and none of it is installed. [`FileStats::syncs`]
//! counts the syncs.
//!
//! Why a log file in the core (SQLite is the separate crate `keel-store-sqlite`): the kernel
//! already serializes commits per tree and needs exactly one durable operation, "append this
//! record, then acknowledge", plus a full replay on open. An append-only file does that with
//! `std::fs` alone: no C toolchain and no new dependency (rusqlite `bundled` compiles the
//! SQLite C amalgamation into every clean build), and one `fdatasync` per commit, the same
//! floor SQLite pays per transaction in WAL mode with `synchronous=FULL`. The index lives in
//! memory and is rebuilt on open. Measured here, a commit costs one `sync_data` plus a SHA-256
//! over the record (see `tests/tests/durable_kill.rs`, `commit_cost_per_fsync`); both are
//! O(changed records), whatever the size of the tree.
//!
//! # Layout (all integers little-endian)
//!
//! ```text
//! file    := "keel.commits.v3\n" frame* zero*
//! frame   := "KEELREC\n" | len: u64 | check: 8 bytes | sum: 32 bytes | payload (len bytes)
//!            check = SHA-256("KEELREC\n" ‖ len)[..8], sum = SHA-256(payload)
//! payload := meta_len: u32 | meta (canonical JSON) | envelope head | envelope tail
//!            | carried record bytes, in cut order
//! ```
//!
//! `meta` names the commit (`checkpoint` / `effect` / `activation`, or `base` for a compacted
//! tree), its identity, content digest and installed sequence, the root, writer incarnation
//! and tree digest, every remaining request field, `envelope: [head_len, tail_len]` and
//! `records`, the cut's records in cut order: `[key, digest, len]` for a record whose bytes
//! the payload carries, `[start, count]` for a run of records kept unchanged from the head the
//! commit follows (that head's entries `start..start + count`; runs are maximal). A commit
//! record therefore grows with what changed, not with the tree (see [`record`](self::record)).
//! Replay rebuilds the whole cut from the replayed head, checks its tree digest against the
//! listed one, and re-decides the request; a `base` record holds a whole head and the tree's
//! commit facts and history.
//!
//! Logs of format v1 (whole cuts) and v2 (every record of every cut listed) are refused with
//! [`OpenError::UnsupportedVersion`]: the format changed without a migration; export the
//! trees with the release that wrote the log.
//!
//! The zeros after the last frame are free space: when a batch does not fit in it, the log
//! grows by the batch plus a fixed reserve of zeros ([`RESERVE_BYTES`], 64 KiB), written and
//! synced with it. Later frames overwrite those zeros, so their `fdatasync` persists only data
//! blocks, not also a new file length (measured here: ~0.11 against ~0.16 ms). A committer
//! that closes cuts the free space off.
//!
//! # Space
//!
//! A commit needs the disk space of its own frame, plus the reserve when the disk has it: if
//! writing the reserve fails, the batch is written alone. A failed write or sync leaves the
//! file as it was at the last acknowledged frame (see [`append`](self::append): cut back and
//! synced, no zeros or partial frame left behind), and the store stays usable, so the first
//! commit after space returns succeeds.
//!
//! # Recovery: torn tails and damage
//!
//! Commits are appended one at a time and each is durable before the next starts, so after a
//! crash at most the last frame is unfinished, and nothing valid can follow it. Replay reads
//! frames in order; at the first frame that is incomplete or fails a check it searches the
//! rest of the file for any complete, checksum-valid frame. If there is one, the damage is in
//! the middle (see "Damaged trees"). If there is none, the bytes from there to the end of the
//! file (the *tail*) are one of three things, decided by the rule below. Let `z` be the end of
//! the file's non-zero bytes (one past its last non-zero byte):
//!
//! * **free space**: the tail is all zeros (written ahead of the frames; kept, not reported);
//! * **a torn tail**, a *provably unfinished frame*: the non-zero bytes of the tail begin with
//!   a frame header, or a prefix of one, that is consistent as far as it goes (the magic, and
//!   the header check once the length and check bytes are there), and the frame's declared end
//!   lies beyond `z`: the file ends before the frame does, or zeros follow its last written
//!   byte before its end. A frame never ends in a zero byte (after its 4-byte metadata length,
//!   a payload is JSON text: the metadata, ending in `}`, then the envelope and record bytes
//!   of a cut; JSON text holds no zero byte), so such a frame was never written to its end:
//!   its `fsync` did not return and its commit was never acknowledged. A writer's open cuts
//!   it off, with the zeros after it ([`Recovery::truncated_bytes`]); a read-only open
//!   ([`FileCommitter::open_read_only`]) reports it ([`Recovery::torn_tail`]: its bytes and,
//!   when its metadata was written whole, the tree and sequence it would have installed) and
//!   leaves it in place;
//! * **damage**, anything else: bytes that do not start like a frame header, a header failing
//!   its check, or a *complete* frame (header intact, every declared byte present, its last
//!   byte non-zero) whose checksum fails. Damage is never cut: a complete frame may hold an
//!   acknowledged commit whose bits flipped. A damaged last frame followed only by zeros is
//!   confined to its tree like damage in the middle, when its metadata names a tree earlier
//!   records vouch for (the next frame is then written after it); any other damage at the end
//!   refuses the open ([`OpenError::Corrupt`], which names the byte offset to cut at should
//!   the operator choose to give up what is there, after copying the log aside).
//!
//! A complete, checksum-valid record is therefore never dropped, and neither is a complete
//! record whose checksum fails. Limits: a power loss can persist a frame's pages out of order;
//! a frame whose last page reached the disk but an earlier one did not reads as complete with a
//! wrong checksum, and is treated as damage (it cannot be told from flipped bits), not cut.
//! Checksums detect damage, they do not repair it.
//!
//! # Damaged trees
//!
//! Damage in the middle of the log is confined to the tree it belongs to whenever the log can
//! prove which tree that is; that tree is then reported in [`FileCommitter::damaged_trees`],
//! its later records are not replayed, and loading or committing it returns
//! [`CommitError::Damaged`], while every other tree opens and commits as usual:
//!
//! * a checksum-valid record that does not decode, or decodes but breaks the commit rules on
//!   replay (a gap in sequences, say), names its tree in its own (intact) metadata;
//! * a record whose payload fails its checksum while its frame header is intact and the next
//!   valid record starts exactly where it ends (so exactly one record is damaged) is
//!   attributed to the tree its metadata names, if that tree is already known from earlier
//!   records (a damaged name that happens to parse names no known tree).
//!
//! Anything else, damage that cannot be pinned to one record of one known tree (a broken frame
//! header, a span swallowing several records, a damaged first record of a tree), could have
//! hidden the last commit of any tree, so opening fails with [`OpenError::Corrupt`] rather
//! than serve a head that might be older than one already acknowledged.
//!
//! # One writer per directory
//!
//! A writer's open takes an exclusive OS lock on the log itself (`commits.log`) before it
//! reads anything and holds it for the committer's life, checking after locking that the
//! locked file is still the one the log's path names (see [`lock`](self::lock)); a second
//! opener, in this process or another, gets [`OpenError::Locked`] (with the holder's pid where
//! the OS tells it). The OS drops the lock when its holder exits, SIGKILL included. No other
//! file decides: deleting or replacing any file beside the log admits no second writer (the
//! `store.lock` of earlier releases is still honoured where one exists, never created). The
//! log itself must never be deleted, renamed or replaced while a writer runs: a new log at the
//! path is a new, empty store to the next opener.
//!
//! [`FileCommitter::open_read_only`] (used by `keel-store list`, `show`, `verify`, `export`)
//! opens an existing log read-only under a shared lock: any number of inspections run
//! together, none while a writer holds the store (a frame being appended would read as a torn
//! tail), and nothing in the directory is created, truncated or written. A directory whose
//! `commits.log` does not start with keel's header is refused ([`OpenError::NotALog`]) before
//! anything is written in it, by every kind of open.
//!
//! # Failure while running
//!
//! If a write or `fsync` fails, the batch is refused with `CommitError::Storage` and the log
//! is cut back to its last acknowledged frame and synced (after a failed `fsync` the kernel
//! may already have dropped the dirty pages; once the shorter length is durable the batch is
//! gone either way). If that rollback fails too, the durable content of the log is unknown
//! from then on, so the committer stops: every later call returns `CommitError::Storage`
//! saying to reopen the directory, which decides from what actually reached the disk. That
//! matches the port: a storage failure proves nothing about the head.
//!
//! # Compaction
//!
//! [`FileCommitter::compact_now`] (and, after a commit, automatically once the log exceeds
//! [`FileOptions::compact_ratio`] times the estimated live state) rewrites the log as one
//! `base` record per tree (and no free space): written and synced as `commits.log.new`,
//! renamed over the log, the directory synced. A crash before the rename leaves the old log
//! (the stale new file is overwritten by the next compaction), after it the new one; both
//! hold the same heads and facts. The new file is locked before it is renamed into place, so
//! the file at the log's path is locked at every instant and an opener that locked the old
//! file sees that it was replaced. Refused while a tree is damaged ([`CompactError::Damaged`]).
//!
//! # Not provided
//!
//! * Async I/O: the returned futures do their blocking I/O when polled (the leader of a batch
//!   does the batch's), like the in-memory store does its work; a host on a multi-threaded
//!   runtime should expect a poll to take one `fsync`.

use super::group::{GroupCommit, GroupLimits};
use super::index::{CommitIndex, Decision};
use super::port::{Activation, Checkpoint, CommitError, CommitRequest, Committer, EffectBoundary, Head};
use super::{CommitRecord, Installation, TreeDamage};
use crate::env::BoxFuture;
use crate::kernel::ids::ProcessId;
use crate::limits::DEFAULT_MAX_COMMIT_RECORD_BYTES;
use append::append;
use lock::{Access, LockedLog};
use record::{decode_payload, encode_base, encode_record, meta_names, meta_root, Logged, LoggedCut, Record, Request, MAX_META_BYTES};
use sha2::{Digest as _, Sha256};
use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

mod append;
mod lock;
mod record;
pub use append::RESERVE_BYTES;
pub use record::reencode_payload;

/// The log's file name inside the store directory.
pub const LOG_FILE_NAME: &str = "commits.log";
/// Where a new log is prepared before it is linked into place.
const NEW_LOG_FILE_NAME: &str = "commits.log.new";
const FILE_HEADER: &[u8; 16] = b"keel.commits.v3\n";
/// Headers of earlier formats: v1 stored every commit's whole cut, v2 listed every record of
/// every cut. Neither is read (no migration).
const OLD_HEADERS: [(&[u8; 16], &str); 2] = [(b"keel.commits.v1\n", "v1"), (b"keel.commits.v2\n", "v2")];
const FRAME_MAGIC: &[u8; 8] = b"KEELREC\n";
const FRAME_HEADER_BYTES: usize = 8 + 8 + 8 + 32;

/// Why a store directory could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{operation} {}: {source}", path.display())]
    Io {
        operation: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The file exists but does not start with the log header: the directory is not a keel
    /// store (nothing was created or written in it).
    #[error(
        "{} is not a keel commit log (it does not start with keel's header); this directory \
         holds something else: give keel a directory of its own",
        path.display()
    )]
    NotALog { path: PathBuf },
    /// Opening an existing store (inspection, repair) found no log in the directory.
    #[error(
        "{} holds no keel store (no {LOG_FILE_NAME} in it); check the path (inspection never \
         creates a store)",
        dir.display()
    )]
    NoLog { dir: PathBuf },
    /// The store path names something that is not a directory.
    #[error("{} is not a directory; a file store is a directory holding {LOG_FILE_NAME}", path.display())]
    NotADirectory { path: PathBuf },
    /// A log of another format version.
    #[error(
        "{} is a keel commit log of format {found}, which this version cannot read (it reads \
         format v3); open it with the keel release that wrote it and `keel-store export` its \
         trees, then start this version on a new store directory",
        path.display()
    )]
    UnsupportedVersion { path: PathBuf, found: String },
    /// Damage before the end of the log that cannot be pinned to one record of one known tree
    /// (damage that can is reported per tree, see [`FileCommitter::damaged_trees`]).
    #[error("commit log corrupt at byte {offset}: {reason}")]
    Corrupt { offset: u64, reason: String },
    /// Another `FileCommitter`, in this process or another, holds the log's lock (a writer, or
    /// for a writer's open also an inspection in progress). Two writers on one log would
    /// interleave their records and make every tree in it unreadable.
    ///
    /// `pid` is `None` when the OS did not say who holds it, which is also what a process
    /// that spawns children can meet for a moment: a child being spawned holds a copy of the
    /// lock until its exec closes it (see the message).
    #[error("{}", locked_message(dir, *pid))]
    Locked { dir: PathBuf, pid: Option<u32> },
    /// A complete record larger than this open's bound (open with a larger bound).
    #[error(
        "commit log record at byte {offset} has {bytes} payload bytes, above the maximum {max}"
    )]
    RecordTooLarge { offset: u64, bytes: u64, max: u64 },
}

/// The text of [`OpenError::Locked`]: who holds the store, and, when that is unknown or this
/// very process, the transient holder a process spawning children can meet (a child being
/// spawned shares the lock until its exec), which a retry gets past.
fn locked_message(dir: &Path, pid: Option<u32>) -> String {
    const SPAWNING: &str = "a child process being spawned holds a copy of the lock until its exec \
                            closes it, so a program that spawns processes while it reopens a store \
                            should retry the open after a moment";
    match pid {
        Some(pid) if pid == std::process::id() => format!(
            "store {} is in use by process {pid}; that is this process: close its other open store \
             on this directory ({SPAWNING})",
            dir.display()
        ),
        Some(pid) => format!("store {} is in use by process {pid}; stop that writer or open another directory", dir.display()),
        None => format!(
            "store {} is in use by another process; stop that writer or open another directory (if \
             no other writer runs: {SPAWNING})",
            dir.display()
        ),
    }
}

/// What opening found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recovery {
    /// Whether this open created the log.
    pub created: bool,
    /// Records replayed (installed commits).
    pub records: u64,
    /// Bytes of torn tail this open cut off (only a writer's open cuts; see [`TornTail`]).
    pub truncated_bytes: u64,
    /// The torn tail found after the last complete record, if any: cut off by a writer's
    /// open, left in place by a read-only one.
    pub torn_tail: Option<TornTail>,
}

/// A provably unfinished last frame (see "Recovery" in the module docs): an append that was
/// interrupted before its `fsync` returned, so its commit was never acknowledged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TornTail {
    /// Where it starts: the end of the last complete record.
    pub offset: u64,
    /// Its length up to the end of the file (zeros written ahead after it included).
    pub bytes: u64,
    /// The tree and the sequence its record would have installed, when the unfinished record's
    /// metadata was written whole (not checksummed: a hint for people).
    pub root: Option<String>,
    pub sequence: Option<u64>,
}

/// How a [`FileCommitter`] is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileOptions {
    /// No record payload may exceed this, neither on replay nor on commit.
    pub max_record_bytes: usize,
    /// Compact automatically once the log exceeds this many times the live state
    /// (0: never automatically).
    pub compact_ratio: u64,
    /// ... and is at least this large (a small log is not worth rewriting).
    pub compact_min_bytes: u64,
}

impl Default for FileOptions {
    fn default() -> FileOptions {
        FileOptions {
            max_record_bytes: DEFAULT_MAX_COMMIT_RECORD_BYTES,
            compact_ratio: 4,
            compact_min_bytes: 1 << 20,
        }
    }
}

/// Sizes of a store, as `stats` reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileStats {
    /// The log's length up to the end of its last frame (free space after it not counted).
    pub log_bytes: u64,
    /// What a compacted log of the current heads and facts would take (records of every
    /// head once, plus per-commit metadata), estimated without writing it.
    pub live_bytes: u64,
    /// Compactions this committer performed (automatic and on demand).
    pub compactions: u64,
    /// `fdatasync`s of commit batches since open: commits submitted together share one.
    pub syncs: u64,
}

/// Why a compaction was not performed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CompactError {
    /// A damaged tree's records cannot be rewritten faithfully; compaction would drop the
    /// evidence.
    #[error(
        "the store holds damaged trees ({roots}); compaction would discard their records: \
         restore the store from a backup first"
    )]
    Damaged { roots: String },
    /// The store stopped after an earlier failure, or the rewrite failed before it replaced
    /// the log (the log is unchanged).
    #[error("compaction failed: {message}")]
    Storage { message: String },
}

/// The durable committer over one directory (see the module docs).
pub struct FileCommitter {
    path: PathBuf,
    options: FileOptions,
    recovery: Recovery,
    /// Trees whose records are damaged, by root id text (fixed at open).
    damaged: BTreeMap<String, TreeDamage>,
    /// Opened for inspection: reads only, commits and compaction refused.
    read_only: bool,
    state: Mutex<State>,
    /// Batches concurrent commits behind one sync.
    group: GroupCommit<ProcessId, Vec<Request>, Result<(), CommitError>>,
    /// An earlier release's `store.lock`, locked for the committer's life when the directory
    /// holds one (see [`lock`](self::lock)).
    _legacy_lock: Option<File>,
}

/// How a directory is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// A writer; creates the directory and the log when missing.
    Create,
    /// A writer of an existing store (`keel-store repair`, `compact`).
    Existing,
    /// Read-only inspection of an existing store.
    Inspect,
}

struct State {
    index: CommitIndex,
    /// The log, holding its OS lock (exclusive for a writer, shared for inspection): the lock
    /// lives exactly as long as this handle.
    log: File,
    /// The end of the last frame: where the next one is written.
    log_bytes: u64,
    /// The file's length: `log_bytes` plus the free space (zeros) written ahead of it.
    file_bytes: u64,
    compactions: u64,
    /// Successful batch syncs.
    syncs: u64,
    /// The last batch's frame buffer, reused by the next (see `commit_batch`).
    buffer: Vec<u8>,
    /// Set when a failed write or `fsync` could not be rolled back (or a compaction failed
    /// after replacing the log); the committer refuses every call after it.
    failed: Option<String>,
    /// Faults on the append path (tests, `tear_next_append`).
    #[cfg(any(test, feature = "fault-injection"))]
    faults: append::IoFaults,
    /// Armed by `tear_next_append`: per mille of the next append's frames that reach the disk.
    #[cfg(any(test, feature = "fault-injection"))]
    tear_next: Option<u16>,
}

impl FileCommitter {
    /// Opens (creating if needed) the store in `dir` with the default record bound
    /// ([`DEFAULT_MAX_COMMIT_RECORD_BYTES`]).
    pub fn open(dir: impl AsRef<Path>) -> Result<FileCommitter, OpenError> {
        FileCommitter::open_with_limit(dir, DEFAULT_MAX_COMMIT_RECORD_BYTES)
    }

    /// Opens (creating if needed) the store in `dir`; no record payload may exceed
    /// `max_record_bytes`, neither on replay nor on commit.
    pub fn open_with_limit(
        dir: impl AsRef<Path>,
        max_record_bytes: usize,
    ) -> Result<FileCommitter, OpenError> {
        FileCommitter::open_with_options(dir, FileOptions { max_record_bytes, ..FileOptions::default() })
    }

    /// Opens (creating if needed) the store in `dir` with `options`.
    pub fn open_with_options(dir: impl AsRef<Path>, options: FileOptions) -> Result<FileCommitter, OpenError> {
        FileCommitter::open_as(dir.as_ref(), options, Mode::Create)
    }

    /// Opens the existing store in `dir` as its writer, like [`open_with_options`](Self::open_with_options)
    /// (a torn tail is cut off) but never creating anything: a directory without a log is
    /// [`OpenError::NoLog`].
    pub fn open_existing(dir: impl AsRef<Path>, options: FileOptions) -> Result<FileCommitter, OpenError> {
        FileCommitter::open_as(dir.as_ref(), options, Mode::Existing)
    }

    /// Opens the existing store in `dir` for inspection: the log is opened read-only under a
    /// shared lock, nothing in the directory is created, truncated or written, and a torn tail
    /// is reported in [`Recovery::torn_tail`] but left in place. Refused with
    /// [`OpenError::Locked`] while a writer holds the store (a record being appended would
    /// read as a torn tail). Every commit and compaction is refused.
    pub fn open_read_only(dir: impl AsRef<Path>, options: FileOptions) -> Result<FileCommitter, OpenError> {
        FileCommitter::open_as(dir.as_ref(), options, Mode::Inspect)
    }

    fn open_as(dir: &Path, options: FileOptions, mode: Mode) -> Result<FileCommitter, OpenError> {
        let max_record_bytes = options.max_record_bytes;
        let path = dir.join(LOG_FILE_NAME);
        let mut created = false;
        match mode {
            Mode::Create => {
                ensure_dir(dir)?;
                created = ensure_log(dir, &path)?;
            }
            Mode::Existing | Mode::Inspect => check_dir(dir)?,
        }
        let access = if mode == Mode::Inspect { Access::Inspect } else { Access::Write };
        // Locked before the log is read: replay may cut a torn tail, which must not be a
        // live writer's record in the making.
        let LockedLog { mut log, legacy } = lock::open_locked(dir, &path, access, || match mode {
            Mode::Create => {
                created |= ensure_log(dir, &path)?;
                Ok(())
            }
            Mode::Existing | Mode::Inspect => Err(OpenError::NoLog { dir: dir.to_path_buf() }),
        })?;
        let io_err = |operation| {
            let path = path.clone();
            move |source| OpenError::Io { operation, path, source }
        };
        let mut index = CommitIndex::new();
        let mut damaged = BTreeMap::new();
        let scan = replay(&mut log, &path, max_record_bytes, &mut index, &mut damaged)?;
        let mut truncated_bytes = 0;
        if let Some(torn) = scan.torn_tail.as_ref().filter(|_| mode != Mode::Inspect) {
            log.set_len(scan.valid_end).map_err(io_err("truncate the torn tail of"))?;
            log.sync_all().map_err(io_err("sync"))?;
            truncated_bytes = torn.bytes;
        }
        // A torn tail's zeros go with it (inspection writes nothing, so its length is moot).
        let file_bytes = scan.valid_end + if scan.torn_tail.is_some() { 0 } else { scan.free_bytes };
        Ok(FileCommitter {
            path,
            options,
            recovery: Recovery { created, records: scan.records, truncated_bytes, torn_tail: scan.torn_tail },
            damaged,
            read_only: mode == Mode::Inspect,
            state: Mutex::new(State {
                index,
                log,
                log_bytes: scan.valid_end,
                file_bytes,
                compactions: 0,
                syncs: 0,
                buffer: Vec::new(),
                failed: None,
                #[cfg(any(test, feature = "fault-injection"))]
                faults: append::IoFaults::default(),
                #[cfg(any(test, feature = "fault-injection"))]
                tear_next: None,
            }),
            group: GroupCommit::new(GroupLimits::default(), lost_in_batch),
            _legacy_lock: legacy,
        })
    }

    /// The log file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What opening found.
    pub fn recovery(&self) -> &Recovery {
        &self.recovery
    }

    /// The trees whose records open found damaged, in root order. Each is refused by
    /// `load_tree` and by every commit with [`CommitError::Damaged`]; the other trees are
    /// unaffected. `head` and `history` still show such a tree as it stood before the damage.
    pub fn damaged_trees(&self) -> Vec<TreeDamage> {
        self.damaged.values().cloned().collect()
    }

    fn refuse_damaged(&self, root: &ProcessId) -> Result<(), CommitError> {
        match self.damaged.get(root.as_str()) {
            Some(damage) => Err(damage.error(root)),
            None => Ok(()),
        }
    }

    /// Every installed commit of `root`, in installation order.
    pub fn history(&self, root: &ProcessId) -> Vec<CommitRecord> {
        self.lock().index.history(root).to_vec()
    }

    /// The current head, synchronously (for oracles; engines use `load_tree`).
    pub fn head(&self, root: &ProcessId) -> Option<Head> {
        self.lock().index.head(root).cloned()
    }

    /// The roots the store knows, in order.
    pub fn roots(&self) -> Vec<ProcessId> {
        self.lock().index.roots()
    }

    // The index mutates only after the record is durable, so a poisoned lock still guards a
    // consistent index; a failed append has already set `failed`.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Decides one submission (one request, or a chain of one tree's consecutive commits)
    /// against the durable index and appends the frames to write to `out`, one per installed
    /// commit and in order (none for an identical retry of the head); on an error `out` is as
    /// it was. Returns the installations of those frames.
    fn prepare(&self, state: &State, chain: &[Request], out: &mut Vec<u8>) -> Result<Vec<Installation>, CommitError> {
        let mark = out.len();
        let prepared = self.prepare_into(state, chain, out);
        if prepared.is_err() {
            out.truncate(mark);
        }
        prepared
    }

    fn prepare_into(&self, state: &State, chain: &[Request], out: &mut Vec<u8>) -> Result<Vec<Installation>, CommitError> {
        let Some(first) = chain.first() else { return Ok(Vec::new()) };
        let root = first.cut().root_id.clone();
        self.refuse_damaged(&root)?;
        let decided: Vec<(usize, Installation)> = if let [request] = chain {
            match request.decide(&state.index)? {
                Decision::Install(installation) => vec![(0, installation)],
                Decision::Current => Vec::new(),
            }
        } else {
            let requests: Vec<CommitRequest> = chain.iter().map(Request::to_commit_request).collect();
            state.index.decide_chain(&requests)?
        };
        let mut installations = Vec::with_capacity(decided.len());
        let mut head = state.index.head(&root).map(|h| h.cut.clone());
        for (at, installation) in decided {
            let request = &chain[at];
            let listing = LoggedCut::listing(request.cut(), &installation.cut, head.as_ref());
            let record = encode_record(request, &listing, &installation);
            let payload_len = record.payload_len();
            if payload_len > self.options.max_record_bytes {
                return Err(CommitError::RecordTooLarge {
                    bytes: to_u64(payload_len),
                    max: to_u64(self.options.max_record_bytes),
                });
            }
            frame_into(out, &record).map_err(|e| CommitError::invalid(e.to_string()))?;
            head = Some(installation.cut.clone());
            installations.push(installation);
        }
        Ok(installations)
    }

    /// Commits one batch (at most one request per tree, see the module docs): every request
    /// decided against the durable index, the frames of those installed written with one write
    /// and one `fdatasync`, then the index updated. Outcomes in request order.
    fn commit_batch(&self, requests: Vec<Vec<Request>>) -> Vec<Result<(), CommitError>> {
        let mut state = self.lock();
        if let Some(reason) = &state.failed {
            let error = stopped(reason);
            return requests.iter().map(|_| Err(error.clone())).collect();
        }
        if self.read_only {
            let error = CommitError::Storage { message: read_only(&self.path) };
            return requests.iter().map(|_| Err(error.clone())).collect();
        }
        let mut outcomes: Vec<Result<(), CommitError>> = Vec::with_capacity(requests.len());
        // The batch's frames go into the store's buffer (kept between batches: a batch of
        // fifty commits is about half a megabyte, which would otherwise be freshly allocated,
        // faulted in and copied on every batch).
        let mut frames = std::mem::take(&mut state.buffer);
        frames.clear();
        let mut installs = Vec::new();
        for (at, request) in requests.iter().enumerate() {
            match self.prepare(&state, request, &mut frames) {
                Ok(prepared) => {
                    installs.extend(prepared.into_iter().map(|installation| (at, installation)));
                    outcomes.push(Ok(()));
                }
                Err(e) => outcomes.push(Err(e)),
            }
        }
        let outcomes = self.append_batch(&mut state, &mut frames, installs, outcomes);
        if frames.capacity() <= MAX_KEPT_BUFFER_BYTES {
            state.buffer = frames;
        }
        outcomes
    }

    /// Writes and syncs a batch's `frames` and installs them (see `commit_batch`).
    fn append_batch(
        &self,
        state: &mut State,
        frames: &mut Vec<u8>,
        installs: Vec<(usize, Installation)>,
        mut outcomes: Vec<Result<(), CommitError>>,
    ) -> Vec<Result<(), CommitError>> {
        if installs.is_empty() {
            return outcomes;
        }
        let (at, allocated) = (state.log_bytes, state.file_bytes);
        let appended = {
            let state = &mut *state;
            #[cfg(any(test, feature = "fault-injection"))]
            let log = &mut append::FaultyLog { file: &mut state.log, faults: &mut state.faults };
            #[cfg(not(any(test, feature = "fault-injection")))]
            let log = &mut state.log;
            #[cfg(any(test, feature = "fault-injection"))]
            if let Some(keep) = state.tear_next.take() {
                // `tear_next_append`: the part that reached the disk, of the frames only (the
                // zeros written ahead after them would complete nothing).
                let keep = frames.len().saturating_mul(usize::from(keep)) / 1000;
                log.faults.short_write = Some(keep);
                log.faults.failing_syncs = 1;
                log.faults.failing_set_len = true;
            }
            append(log, at, allocated, frames)
        };
        match appended {
            Ok(file_bytes) => {
                state.file_bytes = file_bytes;
                state.log_bytes += to_u64(frames.len());
                state.syncs += 1;
                for (_, installation) in installs {
                    state.index.install(installation);
                }
            }
            Err(failure) => {
                let error = match failure.rollback {
                    None => {
                        state.file_bytes = state.log_bytes;
                        CommitError::Storage {
                            message: format!(
                                "appending to {}: {}; nothing of this commit was stored and the log \
                                 is as it was: free disk space (a commit needs the bytes of its own \
                                 record) and retry",
                                self.path.display(),
                                failure.error
                            ),
                        }
                    }
                    Some(rollback) => {
                        let reason = format!(
                            "appending to {}: {}, and cutting the log back to its last \
                             acknowledged record failed: {rollback}",
                            self.path.display(),
                            failure.error
                        );
                        let error = stopped(&reason);
                        state.failed = Some(reason);
                        error
                    }
                };
                for (at, _) in installs {
                    outcomes[at] = Err(error.clone());
                }
                return outcomes;
            }
        }
        let (ratio, min) = (self.options.compact_ratio, self.options.compact_min_bytes);
        if ratio > 0 && self.damaged.is_empty() && state.log_bytes >= min {
            let live = live_bytes(&state.index);
            if state.log_bytes > live.saturating_mul(ratio) {
                // The batch is durable already; a compaction that fails before it replaces
                // the log leaves the log as it was, so only a failure after that stops the
                // store (inside `compact_locked`).
                let _ = self.compact_locked(state);
            }
        }
        outcomes
    }

    /// Fault injection (feature `fault-injection`, used by the simulator): the next append
    /// (the next batch that installs anything) writes `keep_per_mille`‰ of its frames'
    /// bytes (at most 1000‰) and its `fdatasync` fails, and cutting the log back fails too: what
    /// a process that dies while its sync fails leaves on disk. The batch is refused and the
    /// store stops; reopening the directory recovers what was acknowledged before it.
    #[cfg(any(test, feature = "fault-injection"))]
    pub fn tear_next_append(&self, keep_per_mille: u16) {
        self.lock().tear_next = Some(keep_per_mille.min(1000));
    }

    /// Submits a request to the group (see the module docs).
    fn submit(&self, chain: Vec<Request>) -> BoxFuture<'_, Result<(), CommitError>> {
        let Some(root) = chain.first().map(|r| r.cut().root_id.clone()) else {
            return Box::pin(async { Err(CommitError::invalid("an empty chain commits nothing")) });
        };
        let bytes = chain.iter().fold(0u64, |sum, r| {
            let cut = r.cut();
            sum.saturating_add(cut.carried_bytes()).saturating_add(to_u64(cut.envelope().len()))
        });
        let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
        Box::pin(self.group.submit(root, bytes, chain, move |batch| self.commit_batch(batch)))
    }

    /// Sizes of the log and of its live state.
    pub fn stats(&self) -> FileStats {
        let state = self.lock();
        FileStats {
            log_bytes: state.log_bytes,
            live_bytes: live_bytes(&state.index),
            compactions: state.compactions,
            syncs: state.syncs,
        }
    }

    /// Rewrites the log as one record per tree (its whole head, sequence and commit facts),
    /// crash-safely: the new log is written and synced under a temporary name, renamed over
    /// the log, and the directory is synced; a crash at any point leaves either the old or
    /// the new log, which hold the same heads. Refused while a tree is damaged.
    pub fn compact_now(&self) -> Result<FileStats, CompactError> {
        let mut state = self.lock();
        if !self.damaged.is_empty() {
            let roots: Vec<&str> = self.damaged.keys().map(String::as_str).collect();
            return Err(CompactError::Damaged { roots: roots.join(", ") });
        }
        self.compact_locked(&mut state)?;
        Ok(FileStats {
            log_bytes: state.log_bytes,
            live_bytes: live_bytes(&state.index),
            compactions: state.compactions,
            syncs: state.syncs,
        })
    }

    fn compact_locked(&self, state: &mut State) -> Result<(), CompactError> {
        if let Some(reason) = &state.failed {
            return Err(CompactError::Storage { message: stopped(reason).to_string() });
        }
        if self.read_only {
            return Err(CompactError::Storage { message: read_only(&self.path) });
        }
        let dir = self.path.parent().unwrap_or_else(|| Path::new("."));
        let new = dir.join(NEW_LOG_FILE_NAME);
        let storage = |what: &str, e: io::Error| CompactError::Storage { message: format!("{what} {}: {e}", new.display()) };
        let written = (|| -> io::Result<(File, u64)> {
            let mut file = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&new)?;
            // Locked before it is renamed into place, so the log at the path is locked at
            // every instant: an opener that finds the new file finds it held.
            file.try_lock().map_err(|e| io::Error::other(format!("locking the new log: {e}")))?;
            file.write_all(FILE_HEADER)?;
            let mut len = to_u64(FILE_HEADER.len());
            for root in state.index.roots() {
                let Some(head) = state.index.head(&root) else { continue };
                let record = encode_base(head, &state.index.commits(&root));
                write_frame(&mut file, &record)?;
                len += to_u64(FRAME_HEADER_BYTES + record.payload_len());
            }
            file.sync_all()?;
            Ok((file, len))
        })();
        let (file, len) = match written {
            Ok(written) => written,
            Err(e) => {
                let _ = fs::remove_file(&new);
                return Err(storage("writing", e));
            }
        };
        if let Err(e) = fs::rename(&new, &self.path) {
            let _ = fs::remove_file(&new);
            return Err(storage("renaming", e));
        }
        // From here the new log is in place (and this handle holds its lock; the old file's
        // lock goes with the old handle): a failure leaves the committer unsure which log the
        // directory durably names, so it stops like after a failed append.
        state.log = file;
        match sync_dir(dir) {
            Ok(()) => {
                state.log_bytes = len;
                state.file_bytes = len;
                state.compactions += 1;
                Ok(())
            }
            Err(e) => {
                let reason = format!("compacting {}: {e}", self.path.display());
                state.failed = Some(reason.clone());
                Err(CompactError::Storage { message: reason })
            }
        }
    }
}

impl Drop for FileCommitter {
    /// Cuts the free space off the log, so a closed store is exactly its frames. Not synced:
    /// if the cut is lost, the zeros left are free space to the next open. Skipped after a
    /// failure, when what the file holds is for the next open to find out.
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        if !self.read_only && state.failed.is_none() && state.file_bytes > state.log_bytes {
            let _ = state.log.set_len(state.log_bytes);
        }
    }
}

/// The estimated size of a compacted log: every head's records once plus a bound on the
/// metadata of each record and commit fact.
/// A frame buffer larger than this (a batch of unusually large records) is freed after its
/// batch rather than kept for the next.
const MAX_KEPT_BUFFER_BYTES: usize = 4 << 20;

fn live_bytes(index: &CommitIndex) -> u64 {
    const PER_RECORD: u64 = 160;
    const PER_COMMIT: u64 = 400;
    let mut sum = to_u64(FILE_HEADER.len());
    for root in index.roots() {
        if let Some(head) = index.head(&root) {
            // `len`, not `entries().len()`: that would build the head's flat entry list.
            let records = to_u64(head.cut.len());
            sum = sum
                .saturating_add(head.cut.whole_len().unwrap_or(0))
                .saturating_add(records.saturating_mul(PER_RECORD))
                .saturating_add(to_u64(FRAME_HEADER_BYTES) + 512);
        }
        sum = sum.saturating_add(to_u64(index.history(&root).len()).saturating_mul(PER_COMMIT));
    }
    sum
}

fn read_only(path: &Path) -> String {
    format!("{} is open read-only for inspection; open it as a writer to commit or compact", path.display())
}

fn stopped(reason: &str) -> CommitError {
    CommitError::Storage {
        message: format!("store stopped after an earlier failure ({reason}); reopen it"),
    }
}

/// The outcome of a commit whose batch panicked (a bug): nothing is known of it.
fn lost_in_batch() -> Result<(), CommitError> {
    Err(CommitError::Storage {
        message: "the commit batch this commit was part of panicked; its outcome is unknown: \
                  reopen the store"
            .into(),
    })
}

impl Committer for FileCommitter {
    fn commit_checkpoint(&self, checkpoint: &Checkpoint) -> BoxFuture<'_, Result<(), CommitError>> {
        self.submit(vec![Request::Checkpoint(checkpoint.clone())])
    }
    fn commit_effect(&self, boundary: &EffectBoundary) -> BoxFuture<'_, Result<(), CommitError>> {
        self.submit(vec![Request::Effect(boundary.clone())])
    }
    fn activate_tree(&self, activation: &Activation) -> BoxFuture<'_, Result<(), CommitError>> {
        self.submit(vec![Request::Activation(activation.clone())])
    }
    /// One submission: the chain's frames are appended with one write and one `fdatasync`
    /// (with the rest of its batch), all decided before anything is written. A crash during
    /// that write can leave a prefix of the chain on disk, never a gap: the writer relies on
    /// order only (see `Committer::commit_chain`).
    fn commit_chain<'a>(&'a self, chain: &'a [CommitRequest]) -> BoxFuture<'a, Result<(), CommitError>> {
        if let Err(e) = super::port::check_chain(chain) {
            return Box::pin(async move { Err(e) });
        }
        self.submit(chain.iter().cloned().map(Request::from).collect())
    }
    fn load_tree(&self, root: &ProcessId) -> BoxFuture<'_, Result<Option<Head>, CommitError>> {
        let root = root.clone();
        Box::pin(async move {
            let state = self.lock();
            match &state.failed {
                Some(reason) => Err(stopped(reason)),
                None => {
                    self.refuse_damaged(&root)?;
                    Ok(state.index.head(&root).cloned())
                }
            }
        })
    }
}

// Lengths here are bounded by `usize`, which is at most 64 bits on every supported target.
fn to_u64(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

// ---------------------------------------------------------------------------------------------
// Creating and syncing

fn io_err_at(operation: &'static str, at: &Path) -> impl FnOnce(io::Error) -> OpenError {
    let path = at.to_path_buf();
    move |source| OpenError::Io { operation, path, source }
}

/// An existing store's directory must exist and be a directory.
fn check_dir(dir: &Path) -> Result<(), OpenError> {
    match fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(OpenError::NotADirectory { path: dir.to_path_buf() }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(OpenError::NoLog { dir: dir.to_path_buf() }),
        Err(e) => Err(io_err_at("inspect", dir)(e)),
    }
}

/// Creates the store directory (and its parents) if it is missing, durably.
fn ensure_dir(dir: &Path) -> Result<(), OpenError> {
    if dir.exists() && !dir.is_dir() {
        return Err(OpenError::NotADirectory { path: dir.to_path_buf() });
    }
    if !dir.is_dir() {
        fs::create_dir_all(dir).map_err(io_err_at("create directory", dir))?;
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            sync_dir(parent).map_err(io_err_at("sync directory", parent))?;
        }
    }
    Ok(())
}

/// Creates an empty log in the (existing) directory if it is missing; returns whether it
/// created the log. A new log is written and synced under a temporary name and then
/// hard-linked into place, so the log name never shows a file without its header and an
/// existing log is never replaced.
fn ensure_log(dir: &Path, path: &Path) -> Result<bool, OpenError> {
    let io_err = io_err_at;
    match fs::symlink_metadata(path) {
        Ok(_) => return Ok(false),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err("inspect", path)(e)),
    }
    let new = dir.join(NEW_LOG_FILE_NAME);
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&new)
        .map_err(io_err("create", &new))?;
    file.write_all(FILE_HEADER).map_err(io_err("write", &new))?;
    file.sync_all().map_err(io_err("sync", &new))?;
    drop(file);
    let created = match fs::hard_link(&new, path) {
        Ok(()) => true,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => false,
        Err(e) => return Err(io_err("link", path)(e)),
    };
    fs::remove_file(&new).map_err(io_err("remove", &new))?;
    sync_dir(dir).map_err(io_err("sync directory", dir))?;
    Ok(created)
}

/// Makes directory entries (a new file, a rename) durable.
fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        File::open(dir)?.sync_all()
    }
    // Elsewhere a directory cannot be opened as a file; entries are durable with the file.
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

/// Writes one frame at the current position (not synced).
fn write_frame(log: &mut File, record: &Record) -> io::Result<()> {
    let mut frame = Vec::new();
    frame_into(&mut frame, record)?;
    log.write_all(&frame)
}

/// Appends one frame's bytes to `out`: header, checksum and payload (`out` unchanged on an
/// error).
fn frame_into(out: &mut Vec<u8>, record: &Record) -> io::Result<()> {
    let meta = &record.meta;
    let meta_len = u32::try_from(meta.len())
        .ok()
        .filter(|&n| n as usize <= MAX_META_BYTES)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "record metadata too large"))?;
    let payload_len = to_u64(record.payload_len());
    let mut sum = Sha256::new();
    sum.update(meta_len.to_le_bytes());
    sum.update(meta);
    for b in &record.blobs {
        sum.update(b);
    }
    // One write of the frame: fewer syscalls, and a torn write stays a torn tail.
    let body: usize = record.blobs.iter().map(|b| b.len()).sum();
    out.reserve(FRAME_HEADER_BYTES + 4 + meta.len() + body);
    let head = out;
    head.extend_from_slice(FRAME_MAGIC);
    head.extend_from_slice(&payload_len.to_le_bytes());
    head.extend_from_slice(&header_check(payload_len));
    head.extend_from_slice(&sum.finalize());
    head.extend_from_slice(&meta_len.to_le_bytes());
    head.extend_from_slice(meta);
    for b in &record.blobs {
        head.extend_from_slice(b);
    }
    Ok(())
}

fn header_check(payload_len: u64) -> [u8; 8] {
    let mut h = Sha256::new();
    h.update(FRAME_MAGIC);
    h.update(payload_len.to_le_bytes());
    let full = h.finalize();
    let mut out = [0u8; 8];
    out.copy_from_slice(&full[..8]);
    out
}

// ---------------------------------------------------------------------------------------------
// Replay

struct Scan {
    records: u64,
    /// End of the last valid frame (or of a damaged last frame isolated to its tree).
    valid_end: u64,
    /// A provably unfinished frame from `valid_end` to the end of the file.
    torn_tail: Option<TornTail>,
    /// Zeros after `valid_end` (free space written ahead), kept.
    free_bytes: u64,
}

/// What follows the last valid frame when no complete, checksum-valid frame comes after it.
#[derive(Debug, PartialEq, Eq)]
enum Tail {
    /// All zeros: free space.
    Free,
    /// A provably unfinished frame (see "Recovery" in the module docs); `data_end` is the end
    /// of the file's non-zero bytes.
    Unfinished { data_end: u64 },
    /// Anything else: damage. `frame_end` when it is one complete frame (intact header,
    /// every declared byte present) that fails its checksum, followed only by zeros.
    Damaged { frame_end: Option<u64>, reason: &'static str },
}

/// The outcome of reading the frame at one offset.
enum Frame {
    Valid {
        payload: Vec<u8>,
        end: u64,
    },
    /// Complete and with a valid header, but above the bound; the payload was not read.
    TooLarge {
        bytes: u64,
    },
    /// Incomplete or failing a check.
    Invalid(&'static str),
}

fn replay(
    log: &mut File,
    path: &Path,
    max: usize,
    index: &mut CommitIndex,
    damaged: &mut BTreeMap<String, TreeDamage>,
) -> Result<Scan, OpenError> {
    let io_err = |operation| {
        let path = path.to_path_buf();
        move |source| OpenError::Io { operation, path, source }
    };
    let len = log.metadata().map_err(io_err("inspect"))?.len();
    let mut header = [0u8; FILE_HEADER.len()];
    if len < to_u64(FILE_HEADER.len()) || read_at(log, 0, &mut header).is_err() {
        return Err(OpenError::NotALog { path: path.to_path_buf() });
    }
    if let Some((_, found)) = OLD_HEADERS.iter().find(|(old, _)| header == **old) {
        return Err(OpenError::UnsupportedVersion { path: path.to_path_buf(), found: (*found).into() });
    }
    if header != *FILE_HEADER {
        return Err(OpenError::NotALog { path: path.to_path_buf() });
    }
    let mut offset = to_u64(FILE_HEADER.len());
    let mut records = 0u64;
    while offset < len {
        match read_frame(log, offset, len, max).map_err(io_err("read"))? {
            Frame::Valid { payload, end } => {
                if replay_record(index, damaged, &payload, offset)? {
                    records += 1;
                }
                offset = end;
            }
            Frame::TooLarge { bytes } => {
                return Err(OpenError::RecordTooLarge { offset, bytes, max: to_u64(max) });
            }
            Frame::Invalid(reason) => {
                if let Some(found) =
                    find_frame(log, offset + 1, len, max).map_err(io_err("read"))?
                {
                    let root = damaged_frame_root(log, offset, found, max).map_err(io_err("read"))?;
                    let known = root.as_deref().is_some_and(|root| {
                        damaged.contains_key(root)
                            || ProcessId::parse(root).is_ok_and(|id| index.head(&id).is_some())
                    });
                    if let (true, Some(root)) = (known, root) {
                        mark_damaged(
                            damaged,
                            root,
                            offset,
                            format!("{reason}; the next valid record is at byte {found}"),
                        );
                        offset = found;
                        continue;
                    }
                    return Err(OpenError::Corrupt {
                        offset,
                        reason: format!("{reason}, yet a valid record follows at byte {found}"),
                    });
                }
                // Nothing valid follows: zeros are free space written ahead of the frames, a
                // provably unfinished frame is a torn tail, anything else is damage.
                let tail = classify_tail(log, offset, len).map_err(io_err("read"))?;
                return match tail {
                    Tail::Free => Ok(Scan { records, valid_end: offset, torn_tail: None, free_bytes: len - offset }),
                    Tail::Unfinished { data_end } => {
                        let (root, sequence) = torn_names(log, offset, data_end).map_err(io_err("read"))?;
                        let torn = TornTail { offset, bytes: len - offset, root, sequence };
                        Ok(Scan { records, valid_end: offset, torn_tail: Some(torn), free_bytes: 0 })
                    }
                    Tail::Damaged { frame_end: Some(end), reason: why } => {
                        // One complete last record failing its checksum: isolated to its tree
                        // like damage in the middle when its (intact) metadata names a known
                        // tree; the next frame is written after it.
                        let root = damaged_frame_root(log, offset, end, max).map_err(io_err("read"))?;
                        match root.filter(|root| {
                            damaged.contains_key(root) || ProcessId::parse(root).is_ok_and(|id| index.head(&id).is_some())
                        }) {
                            Some(root) => {
                                mark_damaged(damaged, root, offset, format!("the last record is complete but {why}: damage, not an interrupted write"));
                                Ok(Scan { records, valid_end: end, torn_tail: None, free_bytes: len - end })
                            }
                            None => Err(damaged_tail(offset, len, why)),
                        }
                    }
                    Tail::Damaged { frame_end: None, reason: why } => Err(damaged_tail(offset, len, why)),
                };
            }
        }
    }
    Ok(Scan { records, valid_end: offset, torn_tail: None, free_bytes: 0 })
}

/// Damage at the end of the log that no tree can be named for.
fn damaged_tail(offset: u64, len: u64, why: &str) -> OpenError {
    OpenError::Corrupt {
        offset,
        reason: format!(
            "the {} bytes after the last valid record are not an unfinished record ({why}), so \
             they are not cut off: a record there may have been acknowledged. Restore the store \
             from a backup; or, to give up whatever was there, copy the log aside and truncate \
             it to {offset} bytes",
            len - offset
        ),
    }
}

/// Classifies the bytes `offset..len` after the last valid frame, given that no complete,
/// checksum-valid frame starts anywhere in them (see "Recovery" in the module docs for the
/// rule and why it holds).
fn classify_tail(file: &mut File, offset: u64, len: u64) -> io::Result<Tail> {
    let data_end = data_end(file, offset, len)?;
    if data_end == offset {
        return Ok(Tail::Free);
    }
    let present = usize::try_from(data_end - offset).unwrap_or(usize::MAX).min(FRAME_HEADER_BYTES);
    let mut header = [0u8; FRAME_HEADER_BYTES];
    read_at(file, offset, &mut header[..present])?;
    let magic = present.min(FRAME_MAGIC.len());
    if header[..magic] != FRAME_MAGIC[..magic] {
        return Ok(Tail::Damaged { frame_end: None, reason: "they do not start with a record header" });
    }
    if present < 16 {
        // The non-zero bytes end inside the length, long before any frame could.
        return Ok(Tail::Unfinished { data_end });
    }
    let mut length = [0u8; 8];
    length.copy_from_slice(&header[8..16]);
    let payload_len = u64::from_le_bytes(length);
    let check = header_check(payload_len);
    let checked = present.min(24);
    if header[16..checked] != check[..checked - 16] {
        return Ok(Tail::Damaged { frame_end: None, reason: "its record header fails its check" });
    }
    let frame_end = offset.saturating_add(to_u64(FRAME_HEADER_BYTES)).saturating_add(payload_len);
    if frame_end > data_end {
        // The file, or its non-zero bytes, end before the frame's declared end: a frame never
        // ends in a zero byte, so this one was not written to its end.
        return Ok(Tail::Unfinished { data_end });
    }
    Ok(Tail::Damaged {
        frame_end: (frame_end == data_end).then_some(frame_end),
        reason: "its record is complete yet fails its checksum",
    })
}

/// The end of the non-zero bytes in `from..len` (`from` if there are none).
fn data_end(file: &mut File, from: u64, len: u64) -> io::Result<u64> {
    const CHUNK: u64 = 64 << 10;
    let mut buf = vec![0u8; usize::try_from(CHUNK).unwrap_or(usize::MAX)];
    let (mut at, mut end) = (from, from);
    while at < len {
        let take = usize::try_from((len - at).min(CHUNK)).unwrap_or(0);
        read_at(file, at, &mut buf[..take])?;
        if let Some(last) = buf[..take].iter().rposition(|&b| b != 0) {
            end = at + to_u64(last) + 1;
        }
        at += to_u64(take);
    }
    Ok(end)
}

/// The tree and sequence an unfinished frame at `offset` names, when its metadata lies whole
/// before `data_end` (read only so far: a hint, never checked).
fn torn_names(file: &mut File, offset: u64, data_end: u64) -> io::Result<(Option<String>, Option<u64>)> {
    /// Enough for the metadata of any ordinary record; a longer one is not named.
    const MAX_HINT_BYTES: u64 = 1 << 20;
    let start = offset.saturating_add(to_u64(FRAME_HEADER_BYTES));
    if data_end <= start {
        return Ok((None, None));
    }
    let mut payload = vec![0u8; usize::try_from((data_end - start).min(MAX_HINT_BYTES)).unwrap_or(0)];
    read_at(file, start, &mut payload)?;
    Ok(meta_names(&payload).map_or((None, None), |(root, sequence)| (Some(root), sequence)))
}

fn read_at(file: &mut File, offset: u64, buf: &mut [u8]) -> io::Result<()> {
    file.seek(SeekFrom::Start(offset))?;
    file.read_exact(buf)
}

fn read_frame(file: &mut File, offset: u64, len: u64, max: usize) -> io::Result<Frame> {
    let header_end = offset.saturating_add(to_u64(FRAME_HEADER_BYTES));
    if header_end > len {
        return Ok(Frame::Invalid("incomplete frame header"));
    }
    let mut header = [0u8; FRAME_HEADER_BYTES];
    read_at(file, offset, &mut header)?;
    let (magic, rest) = header.split_at(8);
    let (length, rest) = rest.split_at(8);
    let (check, sum) = rest.split_at(8);
    if magic != FRAME_MAGIC {
        return Ok(Frame::Invalid("bad frame magic"));
    }
    let mut length_bytes = [0u8; 8];
    length_bytes.copy_from_slice(length);
    let payload_len = u64::from_le_bytes(length_bytes);
    if check != header_check(payload_len) {
        return Ok(Frame::Invalid("frame header check mismatch"));
    }
    let end = header_end.saturating_add(payload_len);
    if end > len {
        return Ok(Frame::Invalid("incomplete frame payload"));
    }
    let Some(size) = usize::try_from(payload_len).ok().filter(|&n| n <= max) else {
        return Ok(Frame::TooLarge { bytes: payload_len });
    };
    let mut payload = vec![0u8; size];
    read_at(file, header_end, &mut payload)?;
    if Sha256::digest(&payload).as_slice() != sum {
        return Ok(Frame::Invalid("frame payload checksum mismatch"));
    }
    Ok(Frame::Valid { payload, end })
}

/// The offset of the first frame at or after `from` that is complete and checksum-valid (or
/// complete with a valid header but too large to check), if any.
fn find_frame(file: &mut File, from: u64, len: u64, max: usize) -> io::Result<Option<u64>> {
    const CHUNK: usize = 64 << 10;
    let overlap = FRAME_MAGIC.len() - 1;
    let mut start = from;
    let mut buf = vec![0u8; CHUNK];
    while start < len {
        let take = usize::try_from(len - start).map_or(CHUNK, |n| n.min(CHUNK));
        let chunk = &mut buf[..take];
        read_at(file, start, chunk)?;
        let candidates: Vec<u64> = chunk
            .windows(FRAME_MAGIC.len())
            .enumerate()
            .filter(|(_, w)| *w == FRAME_MAGIC)
            .map(|(i, _)| start + to_u64(i))
            .collect();
        for at in candidates {
            if !matches!(read_frame(file, at, len, max)?, Frame::Invalid(_)) {
                return Ok(Some(at));
            }
        }
        if take < CHUNK {
            break;
        }
        start += to_u64(CHUNK - overlap);
    }
    Ok(None)
}

/// Replays one checksum-valid record; returns whether it was installed. A record that does
/// not decode or breaks the rules marks its tree damaged (its metadata names the tree); only a
/// record too broken to name its tree refuses the open.
fn replay_record(
    index: &mut CommitIndex,
    damaged: &mut BTreeMap<String, TreeDamage>,
    payload: &[u8],
    offset: u64,
) -> Result<bool, OpenError> {
    let (request, cut, identity, content_digest, sequence) = match decode_payload(payload) {
        Ok(Logged::Commit { request, cut, identity, content_digest, sequence }) => {
            (request, cut, identity, content_digest, sequence)
        }
        Ok(Logged::Base { head, commits }) => {
            let root = head.cut.root_id.as_str().to_owned();
            if damaged.contains_key(&root) {
                return Ok(false);
            }
            // A compacted tree opens a log: it never follows records of its own tree.
            if index.head(&head.cut.root_id).is_some() || !index.history(&head.cut.root_id).is_empty() {
                mark_damaged(damaged, root, offset, "a compacted tree follows records of the same tree".into());
                return Ok(false);
            }
            return match index.restore(head, commits) {
                Ok(()) => Ok(true),
                Err(reason) => {
                    mark_damaged(damaged, root, offset, format!("compacted tree: {reason}"));
                    Ok(false)
                }
            };
        }
        Err(reason) => match meta_root(payload) {
            Some(root) => {
                mark_damaged(damaged, root, offset, format!("record does not decode: {reason}"));
                return Ok(false);
            }
            None => return Err(OpenError::Corrupt { offset, reason }),
        },
    };
    let root = cut.root_id().as_str();
    if damaged.contains_key(root) {
        return Ok(false); // a damaged tree's chain is broken: later records cannot follow it
    }
    let checked = (|| -> Result<super::Installation, String> {
        // The runs of kept records name entries of the head this record followed when it was
        // written, which is the replayed head of its tree now.
        let head = index.head(cut.root_id()).map(|h| &h.cut);
        let logged = record::rebuild_request(request, &cut, head)?;
        let Decision::Install(installation) = logged.decide(index).map_err(|e| e.to_string())? else {
            return Err("the record repeats the head it follows".into());
        };
        if installation.identity != identity {
            return Err("stored identity differs from the request's".into());
        }
        if installation.content_digest != content_digest {
            return Err("stored content digest differs from the request's".into());
        }
        if installation.sequence != sequence {
            return Err(format!(
                "stored sequence {sequence}, the rules install {}",
                installation.sequence
            ));
        }
        Ok(installation)
    })();
    match checked {
        Ok(installation) => {
            index.install(installation);
            Ok(true)
        }
        Err(reason) => {
            let root = root.to_owned();
            mark_damaged(damaged, root, offset, format!("record breaks the commit rules: {reason}"));
            Ok(false)
        }
    }
}

/// Records the first damage of a tree (later damage of the same tree adds nothing).
fn mark_damaged(damaged: &mut BTreeMap<String, TreeDamage>, root: String, offset: u64, reason: String) {
    damaged.entry(root.clone()).or_insert(TreeDamage {
        root,
        location: format!("commit log byte {offset}"),
        reason,
    });
}

/// For an invalid frame at `offset` whose next valid frame is at `next`: the root its
/// metadata names, but only if its header is intact and it ends exactly at `next` (exactly
/// one record is damaged, and only in its payload).
fn damaged_frame_root(file: &mut File, offset: u64, next: u64, max: usize) -> io::Result<Option<String>> {
    let header_end = offset.saturating_add(to_u64(FRAME_HEADER_BYTES));
    if header_end > next {
        return Ok(None);
    }
    let mut header = [0u8; FRAME_HEADER_BYTES];
    read_at(file, offset, &mut header)?;
    let (magic, rest) = header.split_at(8);
    let (length, rest) = rest.split_at(8);
    let (check, _) = rest.split_at(8);
    let mut length_bytes = [0u8; 8];
    length_bytes.copy_from_slice(length);
    let payload_len = u64::from_le_bytes(length_bytes);
    if magic != FRAME_MAGIC
        || check != header_check(payload_len)
        || header_end.checked_add(payload_len) != Some(next)
    {
        return Ok(None);
    }
    let Some(size) = usize::try_from(payload_len).ok().filter(|&n| n <= max) else {
        return Ok(None);
    };
    let mut payload = vec![0u8; size];
    read_at(file, header_end, &mut payload)?;
    Ok(meta_root(&payload))
}

#[cfg(test)]
mod tests;
