//! [`SqliteCommitter`]: the commit rules decided inside one SQLite transaction per commit.

use crate::error::OpenError;
use crate::open;
use crate::rows::{self, Reason};
use keel::env::BoxFuture;
use keel::json::Digest;
use keel::kernel::commit::{
    audit_history, check_chain, Activation, Checkpoint, CommitError, CommitIndex, CommitRecord, CommitRequest, Committer,
    Decision, EffectBoundary, GroupCommit, GroupLimits, Head, Installation, TreeCut, TreeDamage,
};
use keel::kernel::ids::{IncarnationId, ProcessId};
use keel::limits::DEFAULT_MAX_COMMIT_RECORD_BYTES;
use rusqlite::{params, Connection, ErrorCode, OptionalExtension, TransactionBehavior};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// How long a statement waits for another connection's write lock on the same file before it
/// fails with `CommitError::Storage` (another process writing the same database).
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Trees whose latest head's records a committer keeps in memory (see "Rows decide"): a
/// commit of one of them resolves its delta without reading and parsing the stored cut.
pub const HEAD_CACHE_TREES: usize = 1024;

/// The durable SQLite committer over one database file.
///
/// * **One transaction per batch, one savepoint per commit.** Commits submitted together (by
///   the owners of different trees in this process) form one batch ([`GroupCommit`], at most
///   one commit per tree): one `BEGIN IMMEDIATE` transaction, and inside it each commit in a
///   `SAVEPOINT` of its own reads the tree's head row and the fact under its identity, decides
///   through keel's shared commit rules ([`CommitIndex`]), then inserts the commit row and
///   advances the head row. The write lock is taken before any head is read, so no other
///   connection (in this process or another) can move a head between a decision and its
///   write. A refused commit rolls back to its savepoint and writes nothing; the others of
///   the batch go on.
/// * **Durable before acknowledged.** WAL mode with `synchronous=FULL`: the one `COMMIT` of a
///   batch returns after the write-ahead log is synced, and only then is any commit of the
///   batch acknowledged. A failed `COMMIT` fails every commit of the batch.
/// * **Rows decide.** Every decision reads the rows, so a failed write or a second writer
///   never leaves this committer with a stale view; after a storage failure the next call
///   simply decides from what the file holds. The one thing kept in memory is the records of
///   recent heads ([`HEAD_CACHE_TREES`] trees), by cut digest: a delta resolves against the
///   head the row names, and when that row's digest, sequence and writer are those of a cut
///   this committer already holds, its records are taken from memory instead of being read
///   and parsed again (a cut is its digest: the same digest is the same records).
/// * **Trees are independent.** Each tree is its own head row and commit rows: a damaged row of
///   one tree makes loads and commits of that tree fail with [`CommitError::Damaged`] and never
///   affects another tree. [`SqliteCommitter::damaged_trees`] checks every tree.
///
/// The returned futures do their blocking SQLite work when polled (the leader of a batch does
/// the batch's), like the file store.
pub struct SqliteCommitter {
    path: PathBuf,
    max_record_bytes: usize,
    conn: Mutex<Connection>,
    /// A submission is one request or a chain of one tree's consecutive requests.
    group: GroupCommit<ProcessId, Vec<Request>, Result<(), CommitError>>,
    /// Batch transactions committed (each one WAL sync).
    syncs: AtomicU64,
    /// Recent heads with their records, by root (see "Rows decide"); only ever used when the
    /// head row names the same cut.
    heads: Mutex<BTreeMap<ProcessId, Head>>,
}

/// One tree as listed: its head without the cut.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeSummary {
    pub root: ProcessId,
    pub sequence: u64,
    pub incarnation: IncarnationId,
    pub cut_digest: Digest,
    pub cut_bytes: u64,
    /// Installed commits so far.
    pub commits: u64,
}

/// A commit request, owned so the returned future borrows only the committer.
enum Request {
    Checkpoint(Checkpoint),
    Effect(EffectBoundary),
    Activation(Activation),
}

impl From<CommitRequest> for Request {
    fn from(request: CommitRequest) -> Request {
        match request {
            CommitRequest::Checkpoint(c) => Request::Checkpoint(c),
            CommitRequest::Effect(b) => Request::Effect(b),
            CommitRequest::Activation(a) => Request::Activation(a),
        }
    }
}

impl Request {
    fn cut(&self) -> &TreeCut {
        match self {
            Request::Checkpoint(c) => &c.cut,
            Request::Effect(b) => &b.cut,
            Request::Activation(a) => &a.cut,
        }
    }
    fn identity(&self) -> String {
        match self {
            Request::Checkpoint(c) => c.identity(),
            Request::Effect(b) => b.identity(),
            Request::Activation(a) => a.identity(),
        }
    }
    fn decide(&self, index: &CommitIndex) -> Result<Decision, CommitError> {
        match self {
            Request::Checkpoint(c) => index.decide_checkpoint(c),
            Request::Effect(b) => index.decide_effect(b),
            Request::Activation(a) => index.decide_activation(a),
        }
    }
}

// The only two places that touch a cut's bytes: storing and rebuilding a whole cut. This
// store keeps whole cuts; the rules resolve a delta against the head before it gets here.
fn cut_bytes(cut: &TreeCut) -> Result<Arc<[u8]>, CommitError> {
    cut.bytes().map_err(|e| CommitError::from_cut(&cut.root_id, e))
}

/// Splits a stored whole cut into its records and checks it is the cut the row names.
fn stored_cut(root: ProcessId, incarnation: IncarnationId, digest: Digest, bytes: &[u8]) -> Result<TreeCut, Reason> {
    let cut = TreeCut::from_whole(bytes).map_err(|e| e.to_string())?;
    if cut.digest != digest {
        return Err("the cut does not match its digest".into());
    }
    if cut.root_id != root || cut.incarnation != incarnation {
        return Err("the cut names another root or writer than its row".into());
    }
    Ok(cut)
}

/// A head as the rules compare it when the request carries every record: root, writer and
/// digest, with no records (the bytes stay on disk).
fn bodiless_cut(root: ProcessId, incarnation: IncarnationId, digest: Digest) -> TreeCut {
    TreeCut::named(root, incarnation, digest)
}

fn storage(e: rusqlite::Error) -> CommitError {
    let message = match e.sqlite_error_code() {
        // A conflict with another writer, not a failing disk: say which.
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => format!(
            "sqlite: another connection held the store's write lock for more than {} s (another \
             process committing to, migrating or checkpointing the same file); nothing was \
             written: retry once it is done",
            BUSY_TIMEOUT.as_secs()
        ),
        Some(ErrorCode::ReadOnly) => format!(
            "sqlite: the store is open read-only ({e}); open it with `SqliteCommitter::open` to write"
        ),
        _ => format!("sqlite: {e}"),
    };
    CommitError::Storage { message }
}

/// The outcome of a commit whose batch panicked (a bug): the transaction rolled back.
fn lost_in_batch() -> Result<(), CommitError> {
    Err(CommitError::Storage {
        message: "the commit batch this commit was part of panicked and was rolled back; retry".into(),
    })
}

fn damaged(root: &ProcessId, reason: impl Into<String>) -> CommitError {
    CommitError::Damaged { root: root.clone(), reason: reason.into() }
}

fn to_i64(n: u64, what: &str) -> Result<i64, CommitError> {
    i64::try_from(n).map_err(|_| CommitError::InvalidCommit {
        reason: format!("{what} {n} is above the SQLite store's range"),
    })
}

/// The head columns a decision needs (no cut).
struct StoredHead {
    head: Head,
    commits: u64,
}

impl SqliteCommitter {
    /// The committer over an opened connection (a writer's, or a read-only one).
    fn with_connection(path: PathBuf, max_record_bytes: usize, conn: Connection) -> SqliteCommitter {
        SqliteCommitter {
            path,
            max_record_bytes,
            conn: Mutex::new(conn),
            group: GroupCommit::new(GroupLimits::default(), lost_in_batch),
            syncs: AtomicU64::new(0),
            heads: Mutex::new(BTreeMap::new()),
        }
    }

    /// Opens (creating and migrating if needed) the store in the database file `path` with the
    /// default cut bound ([`DEFAULT_MAX_COMMIT_RECORD_BYTES`]).
    ///
    /// A missing or empty file becomes a new store. Any other file is looked at read-only
    /// first: a file that is not a keel store (not SQLite, another program's tables or
    /// `application_id`, a newer keel schema) is refused before anything is written to it.
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteCommitter, OpenError> {
        SqliteCommitter::open_with_limit(path, DEFAULT_MAX_COMMIT_RECORD_BYTES)
    }

    /// Opens the store; no cut may exceed `max_record_bytes`, neither on commit nor on load.
    pub fn open_with_limit(
        path: impl AsRef<Path>,
        max_record_bytes: usize,
    ) -> Result<SqliteCommitter, OpenError> {
        let path = path.as_ref().to_path_buf();
        let conn = open::writer(&path, false)?;
        Ok(SqliteCommitter::with_connection(path, max_record_bytes, conn))
    }

    /// Opens an existing store as its writer (like [`SqliteCommitter::open`]), but never makes
    /// a new one: a missing or empty file is [`OpenError::NotFound`] / [`OpenError::Empty`].
    pub fn open_existing(path: impl AsRef<Path>) -> Result<SqliteCommitter, OpenError> {
        let path = path.as_ref().to_path_buf();
        let conn = open::writer(&path, true)?;
        Ok(SqliteCommitter::with_connection(path, DEFAULT_MAX_COMMIT_RECORD_BYTES, conn))
    }

    /// Opens an existing store for reading only (`SQLITE_OPEN_READ_ONLY`): no journal mode
    /// change, no migration, no write of any kind, so inspecting a file never changes it.
    /// Loads, [`history`](SqliteCommitter::history), [`trees`](SqliteCommitter::trees) and
    /// [`damaged_trees`](SqliteCommitter::damaged_trees) work while writers run; commits and
    /// [`vacuum`](SqliteCommitter::vacuum) fail with `CommitError::Storage` saying the store is
    /// read-only. A missing or empty file, another program's file, and a store of an older
    /// (not yet migrated) or newer schema are typed errors.
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<SqliteCommitter, OpenError> {
        let path = path.as_ref().to_path_buf();
        let conn = open::reader(&path)?;
        Ok(SqliteCommitter::with_connection(path, DEFAULT_MAX_COMMIT_RECORD_BYTES, conn))
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    // A panic inside a call drops its transaction, which rolls back: the file is never left
    // half-written, so a poisoned lock still guards a usable connection.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Batch transactions committed since open: each is one sync of the write-ahead log,
    /// shared by the commits submitted together.
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }

    /// Decides and writes one request inside the batch transaction: `Ok(true)` if it
    /// installed a commit, `Ok(false)` for an identical retry of the head.
    fn apply_one(&self, conn: &Connection, request: &Request) -> Result<bool, CommitError> {
        let root = &request.cut().root_id;
        // A delta resolves against the head's records, so only then are they needed: from
        // memory when the row names a cut held there, else read from the row.
        let mut stored = read_head(conn, root, false, self.max_record_bytes)?;
        if !request.cut().is_whole() {
            if let Some(row) = &mut stored {
                match self.cached_head(&row.head) {
                    Some(cut) => row.head.cut = cut,
                    None => stored = read_head(conn, root, true, self.max_record_bytes)?,
                }
            }
        }
        let identity = request.identity();
        let fact = read_fact(conn, root, &identity)?;
        let index = CommitIndex::for_tree(
            root.clone(),
            stored.as_ref().map(|s| s.head.clone()),
            fact.map(|digest| (identity, digest)),
        );
        let Decision::Install(installation) = request.decide(&index)? else {
            return Ok(false); // an identical retry of the head: nothing to write
        };
        let position = stored.map_or(0, |s| s.commits);
        self.install(conn, &installation, position)?;
        // Kept even if the transaction then fails: it is used only for a row naming this very
        // cut (digest, sequence and writer).
        self.keep_head(Head { cut: installation.cut, sequence: installation.sequence });
        Ok(true)
    }

    /// The records of `row`'s cut, if this committer holds that very cut.
    fn cached_head(&self, row: &Head) -> Option<TreeCut> {
        let heads = self.heads.lock().unwrap_or_else(PoisonError::into_inner);
        let held = heads.get(&row.cut.root_id)?;
        (held.sequence == row.sequence && held.cut.digest == row.cut.digest && held.cut.incarnation == row.cut.incarnation)
            .then(|| held.cut.clone())
    }

    fn keep_head(&self, head: Head) {
        let mut heads = self.heads.lock().unwrap_or_else(PoisonError::into_inner);
        let root = head.cut.root_id.clone();
        heads.insert(root.clone(), head);
        // Bounded: past the bound, the first other tree in root order goes.
        if heads.len() > HEAD_CACHE_TREES {
            if let Some(evicted) = heads.keys().find(|k| **k != root).cloned() {
                heads.remove(&evicted);
            }
        }
    }

    /// Commits one batch (see the type's docs). Outcomes in request order.
    fn commit_batch(&self, requests: Vec<Vec<Request>>) -> Vec<Result<(), CommitError>> {
        let mut conn = self.lock();
        let mut tx = match conn.transaction_with_behavior(TransactionBehavior::Immediate) {
            Ok(tx) => tx,
            Err(e) => {
                let error = storage(e);
                return requests.iter().map(|_| Err(error.clone())).collect();
            }
        };
        let mut outcomes = Vec::with_capacity(requests.len());
        let mut installed = Vec::new();
        for (at, chain) in requests.iter().enumerate() {
            let outcome = (|| {
                let savepoint = tx.savepoint().map_err(storage)?;
                // Dropping the savepoint unreleased rolls this submission back, and only it:
                // a chain is installed whole or not at all, each commit decided against the
                // head the one before it wrote.
                let mut wrote = false;
                for request in chain {
                    wrote |= self.apply_one(&savepoint, request)?;
                }
                savepoint.commit().map_err(storage)?;
                Ok(wrote)
            })();
            match outcome {
                Ok(wrote) => {
                    if wrote {
                        installed.push(at);
                    }
                    outcomes.push(Ok(()));
                }
                Err(e) => outcomes.push(Err(e)),
            }
        }
        if installed.is_empty() {
            return outcomes; // nothing written: the transaction rolls back on drop
        }
        match tx.commit() {
            Ok(()) => {
                self.syncs.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                let error = storage(e);
                for at in installed {
                    outcomes[at] = Err(error.clone());
                }
            }
        }
        outcomes
    }

    /// Submits a request to the group (see the type's docs).
    fn submit(&self, chain: Vec<Request>) -> BoxFuture<'_, Result<(), CommitError>> {
        let Some(root) = chain.first().map(|r| r.cut().root_id.clone()) else {
            return Box::pin(async { Err(CommitError::Storage { message: "an empty chain commits nothing".into() }) });
        };
        let bytes = chain.iter().fold(0u64, |sum, r| {
            let cut = r.cut();
            sum.saturating_add(cut.carried_bytes())
                .saturating_add(u64::try_from(cut.envelope().len()).unwrap_or(u64::MAX))
        });
        let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
        Box::pin(self.group.submit(root, bytes, chain, move |batch| self.commit_batch(batch)))
    }

    fn install(&self, tx: &Connection, i: &Installation, position: u64) -> Result<(), CommitError> {
        let bytes = cut_bytes(&i.cut)?;
        let bytes = &bytes[..];
        if bytes.len() > self.max_record_bytes {
            return Err(CommitError::RecordTooLarge {
                bytes: u64::try_from(bytes.len()).unwrap_or(u64::MAX),
                max: u64::try_from(self.max_record_bytes).unwrap_or(u64::MAX),
            });
        }
        let root = i.cut.root_id.as_str();
        let sequence = to_i64(i.sequence, "sequence")?;
        let position_value = to_i64(position, "commit position")?;
        let commits_after = to_i64(position.saturating_add(1), "commit count")?;
        let (commit_kind, kind, process_id, effect_id, previous) = rows::kind_columns(&i.kind);
        tx.prepare_cached(
            "INSERT INTO keel_commits (root_id, position, identity, content_digest, commit_kind, \
             kind, process_id, effect_id, previous_incarnation, sequence, incarnation_id, \
             cut_digest) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
        )
        .and_then(|mut s| {
            s.execute(params![
                root,
                position_value,
                i.identity,
                i.content_digest.to_string(),
                commit_kind,
                kind,
                process_id,
                effect_id,
                previous,
                sequence,
                i.cut.incarnation.as_str(),
                i.cut.digest.to_string(),
            ])
        })
        .map_err(storage)?;
        tx.prepare_cached(
            "INSERT INTO keel_heads (root_id, sequence, incarnation_id, cut_digest, commits, cut) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (root_id) DO UPDATE SET \
             sequence = excluded.sequence, incarnation_id = excluded.incarnation_id, \
             cut_digest = excluded.cut_digest, commits = excluded.commits, cut = excluded.cut",
        )
        .and_then(|mut s| {
            s.execute(params![
                root,
                sequence,
                i.cut.incarnation.as_str(),
                i.cut.digest.to_string(),
                commits_after,
                bytes,
            ])
        })
        .map_err(storage)?;
        Ok(())
    }

    fn load(&self, root: &ProcessId) -> Result<Option<Head>, CommitError> {
        let conn = self.lock();
        Ok(read_head(&conn, root, true, self.max_record_bytes)?.map(|stored| stored.head))
    }

    /// Every installed commit of `root`, in installation order.
    pub fn history(&self, root: &ProcessId) -> Result<Vec<CommitRecord>, CommitError> {
        let conn = self.lock();
        read_history(&conn, root.as_str()).map_err(|reason| damaged(root, reason))
    }

    /// The current head of `root` (its cut checked against its digest).
    pub fn head(&self, root: &ProcessId) -> Result<Option<Head>, CommitError> {
        self.load(root)
    }

    /// Every tree in root order: its summary, or the damage that keeps its head row from
    /// being read.
    pub fn trees(&self) -> Result<Vec<Result<TreeSummary, TreeDamage>>, CommitError> {
        let conn = self.lock();
        let mut statement = conn
            .prepare(
                "SELECT root_id, sequence, incarnation_id, cut_digest, commits, length(cut) AS cut_bytes \
                 FROM keel_heads ORDER BY root_id",
            )
            .map_err(storage)?;
        let listed = statement
            .query_map([], |row| {
                let raw = rows::text(row, "root_id").unwrap_or_else(|e| format!("<unreadable: {e}>"));
                Ok((|| -> Result<TreeSummary, Reason> {
                    Ok(TreeSummary {
                        root: rows::process(row, "root_id")?,
                        sequence: rows::count(row, "sequence")?,
                        incarnation: rows::incarnation(row, "incarnation_id")?,
                        cut_digest: rows::digest(row, "cut_digest")?,
                        commits: rows::count(row, "commits")?,
                        cut_bytes: rows::count(row, "cut_bytes")?,
                    })
                })()
                .map_err(|reason| TreeDamage {
                    root: raw,
                    location: "keel_heads row".into(),
                    reason,
                }))
            })
            .map_err(storage)?;
        listed.collect::<Result<Vec<_>, _>>().map_err(storage)
    }

    /// Checks every tree end to end (head row, cut digest, every commit row, the history
    /// against the commit rules, the head against the last commit) and lists the damaged ones.
    /// Reads the whole store.
    pub fn damaged_trees(&self) -> Result<Vec<TreeDamage>, CommitError> {
        let mut damage = Vec::new();
        let roots: Vec<String> = {
            let conn = self.lock();
            let mut statement = conn
                .prepare(
                    "SELECT root_id FROM keel_heads UNION SELECT root_id FROM keel_commits ORDER BY 1",
                )
                .map_err(storage)?;
            let roots = statement
                .query_map([], |row| Ok(rows::text(row, "root_id")))
                .map_err(storage)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(storage)?;
            let mut out = Vec::new();
            for root in roots {
                match root {
                    Ok(root) => out.push(root),
                    Err(reason) => damage.push(TreeDamage {
                        root: "<unreadable>".into(),
                        location: "root_id column".into(),
                        reason,
                    }),
                }
            }
            out
        };
        for raw in roots {
            if let Err(d) = self.check_tree(&raw) {
                damage.push(d);
            }
        }
        Ok(damage)
    }

    fn check_tree(&self, raw: &str) -> Result<(), TreeDamage> {
        let fail = |location: &str, reason: String| TreeDamage {
            root: raw.to_owned(),
            location: location.to_owned(),
            reason,
        };
        let root = ProcessId::parse(raw).map_err(|e| fail("root_id column", e.to_string()))?;
        let head = match self.load(&root) {
            Ok(Some(head)) => head,
            Ok(None) => return Err(fail("keel_heads", "commit rows without a head row".into())),
            Err(CommitError::Damaged { reason, .. }) => return Err(fail("keel_heads row", reason)),
            Err(e) => return Err(fail("keel_heads row", e.to_string())),
        };
        let history = {
            let conn = self.lock();
            read_history(&conn, raw).map_err(|reason| fail("keel_commits", reason))?
        };
        audit_history(&history).map_err(|reason| fail("keel_commits", reason))?;
        let last = history.last().ok_or_else(|| fail("keel_commits", "a head without commits".into()))?;
        if last.sequence != head.sequence
            || last.incarnation != head.cut.incarnation
            || last.cut_digest != head.cut.digest
        {
            return Err(fail("keel_heads row", "the head is not the last installed commit".into()));
        }
        let commits: Option<Result<u64, Reason>> = {
            let conn = self.lock();
            conn.query_row("SELECT commits FROM keel_heads WHERE root_id = ?1", [raw], |row| {
                Ok(rows::count(row, "commits"))
            })
            .optional()
            .map_err(|e| fail("keel_heads row", e.to_string()))?
        };
        let commits = commits
            .ok_or_else(|| fail("keel_heads", "the head row disappeared".into()))?
            .map_err(|reason| fail("keel_heads row", reason))?;
        if commits != u64::try_from(history.len()).unwrap_or(u64::MAX) {
            return Err(fail(
                "keel_heads row",
                format!("commit count {commits}, but {} commit rows", history.len()),
            ));
        }
        Ok(())
    }

    /// Rewrites the database file without free pages (`VACUUM`) and truncates the write-ahead
    /// log. Needs no other connection writing meanwhile (it waits up to [`BUSY_TIMEOUT`]).
    pub fn vacuum(&self) -> Result<(), CommitError> {
        let conn = self.lock();
        conn.execute_batch("VACUUM").map_err(storage)?;
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).map_err(storage)
    }
}

fn read_head(
    tx: &Connection,
    root: &ProcessId,
    with_records: bool,
    max_record_bytes: usize,
) -> Result<Option<StoredHead>, CommitError> {
    let mut statement = tx
        .prepare_cached(if with_records {
            "SELECT sequence, incarnation_id, cut_digest, commits, cut FROM keel_heads WHERE root_id = ?1"
        } else {
            "SELECT sequence, incarnation_id, cut_digest, commits FROM keel_heads WHERE root_id = ?1"
        })
        .map_err(storage)?;
    let row = statement
        .query_row([root.as_str()], |row| {
            Ok((|| -> Result<StoredHead, Reason> {
                let sequence = rows::count(row, "sequence")?;
                let incarnation = rows::incarnation(row, "incarnation_id")?;
                let digest = rows::digest(row, "cut_digest")?;
                let commits = rows::count(row, "commits")?;
                let cut = if with_records {
                    let bytes = rows::blob(row, "cut")?;
                    if bytes.len() > max_record_bytes {
                        return Err(format!("cut of {} bytes above the maximum {max_record_bytes}", bytes.len()));
                    }
                    stored_cut(root.clone(), incarnation, digest, &bytes)?
                } else {
                    bodiless_cut(root.clone(), incarnation, digest)
                };
                Ok(StoredHead { head: Head { cut, sequence }, commits })
            })())
        })
        .optional()
        .map_err(storage)?;
    match row {
        None => Ok(None),
        Some(Ok(head)) => Ok(Some(head)),
        Some(Err(reason)) => Err(damaged(root, format!("keel_heads row: {reason}"))),
    }
}

fn read_fact(tx: &Connection, root: &ProcessId, identity: &str) -> Result<Option<Digest>, CommitError> {
    let mut statement = tx
        .prepare_cached(
            "SELECT content_digest FROM keel_commits WHERE root_id = ?1 AND identity = ?2",
        )
        .map_err(storage)?;
    let row = statement
        .query_row([root.as_str(), identity], |row| Ok(rows::digest(row, "content_digest")))
        .optional()
        .map_err(storage)?;
    match row {
        None => Ok(None),
        Some(Ok(digest)) => Ok(Some(digest)),
        Some(Err(reason)) => Err(damaged(root, format!("keel_commits row of {identity}: {reason}"))),
    }
}

fn read_history(conn: &Connection, root: &str) -> Result<Vec<CommitRecord>, Reason> {
    let mut statement = conn
        .prepare_cached(
            "SELECT position, identity, commit_kind, kind, process_id, effect_id, \
             previous_incarnation, sequence, incarnation_id, cut_digest, content_digest \
             FROM keel_commits WHERE root_id = ?1 ORDER BY position",
        )
        .map_err(|e| e.to_string())?;
    let records = statement
        .query_map([root], |row| {
            Ok((|| -> Result<(u64, CommitRecord), Reason> {
                rows::digest(row, "content_digest")?;
                Ok((
                    rows::count(row, "position")?,
                    CommitRecord {
                        identity: rows::text(row, "identity")?,
                        kind: rows::record_kind(row)?,
                        sequence: rows::count(row, "sequence")?,
                        incarnation: rows::incarnation(row, "incarnation_id")?,
                        cut_digest: rows::digest(row, "cut_digest")?,
                    },
                ))
            })())
        })
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for (expected, record) in records.enumerate() {
        let (position, record) = record.map_err(|e| e.to_string())?.map_err(|reason| {
            format!("keel_commits row {expected}: {reason}")
        })?;
        if position != u64::try_from(expected).unwrap_or(u64::MAX) {
            return Err(format!("keel_commits positions skip from {expected} to {position}"));
        }
        out.push(record);
    }
    Ok(out)
}

impl Committer for SqliteCommitter {
    fn commit_checkpoint(&self, checkpoint: &Checkpoint) -> BoxFuture<'_, Result<(), CommitError>> {
        self.submit(vec![Request::Checkpoint(checkpoint.clone())])
    }
    fn commit_effect(&self, boundary: &EffectBoundary) -> BoxFuture<'_, Result<(), CommitError>> {
        self.submit(vec![Request::Effect(boundary.clone())])
    }
    fn activate_tree(&self, activation: &Activation) -> BoxFuture<'_, Result<(), CommitError>> {
        self.submit(vec![Request::Activation(activation.clone())])
    }
    fn load_tree(&self, root: &ProcessId) -> BoxFuture<'_, Result<Option<Head>, CommitError>> {
        let root = root.clone();
        Box::pin(async move { self.load(&root) })
    }
    /// One savepoint in the batch transaction (one sync with the rest of its batch), the
    /// whole chain or nothing.
    fn commit_chain<'a>(&'a self, chain: &'a [CommitRequest]) -> BoxFuture<'a, Result<(), CommitError>> {
        if let Err(e) = check_chain(chain) {
            return Box::pin(async move { Err(e) });
        }
        self.submit(chain.iter().cloned().map(Request::from).collect())
    }
}
