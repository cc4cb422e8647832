//! The PostgreSQL committer: the commit rules of every keel store, enforced inside server
//! transactions.
//!
//! Concurrent commits of different trees share one transaction (group commit, see `group`):
//! each runs in a savepoint of its own, the batch in root order, and an installed commit is
//! acknowledged only after the `COMMIT` that covers it. Within its savepoint, a commit (1) locks the tree's head row (`SELECT ... FOR UPDATE`), (2) reads the recorded
//! fact of the request's own identity, (3) decides with the shared rules
//! (`keel::kernel::commit::CommitIndex`, seeded with exactly that head and fact), and (4)
//! installs: the commit row is inserted and the head advanced by an `UPDATE` conditioned on the
//! locked incarnation, sequence and digest, whose row count must be 1. A start inserts the head
//! row (`ON CONFLICT DO NOTHING`); losing that race re-runs the savepoint, which then sees
//! the winner's head and answers as the rules do (a retry, or a fence).
//!
//! The database, not a worker's memory, fences a stale writer: its request names its own
//! incarnation and sequence, and the locked head has moved on. Identical retries are
//! acknowledged while still current; a known identity with other content conflicts (the
//! `(root_id, identity)` unique key backs this).
//!
//! The committer stores whole cuts (the head row holds the latest cut's bytes; commit rows hold
//! digests only). Cut bytes are read and `TreeCut`s built in one place each
//! ([`stored_cut_bytes`], [`cut_from_row`]).

use crate::error::{describe, PostgresError};
use crate::group::{Group, Queued};
use crate::pool::Pool;
use crate::schema;
use keel::env::BoxFuture;
use keel::json::Digest;
use keel::kernel::commit::{
    check_chain, Activation, Checkpoint, CheckpointKind, CommitError, CommitIndex, CommitRecord,
    CommitRecordKind, CommitRequest, Committer, Decision, EffectBoundary, EffectBoundaryKind, Head,
    Installation, TreeCut,
};
use keel::kernel::ids::{EffectId, IncarnationId, ProcessId};
use std::sync::Arc;
use tokio_postgres::Row;

/// The largest cut the store accepts. PostgreSQL caps one `bytea` value at 1 GiB and the whole
/// cut crosses the wire in one message; a quarter of that keeps memory on both sides bounded.
pub const MAX_CUT_BYTES: usize = 256 << 20;

/// How many times a start re-runs after losing the race to insert the head row. The second run
/// always sees the winner's row, so 2 suffices; 3 leaves room for a row deleted by hand.
const START_RACE_TRIES: u32 = 3;

/// Connections a store opens at most, unless [`PostgresOptions::max_connections`] says otherwise.
pub const DEFAULT_MAX_CONNECTIONS: usize = 16;

/// Where and how to open a store.
#[derive(Clone, Debug)]
pub struct PostgresOptions {
    /// The PostgreSQL schema holding the store's tables (created if missing). Several stores
    /// can share one database under different schemas.
    pub schema: String,
    /// The most connections this store opens at once (each commit holds one for its
    /// transaction).
    pub max_connections: usize,
}

impl Default for PostgresOptions {
    fn default() -> PostgresOptions {
        PostgresOptions {
            schema: "keel".into(),
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// A keel store in a PostgreSQL database, shared by any number of worker processes. Cheap to
/// clone (clones share the connection pool).
#[derive(Clone)]
pub struct PostgresCommitter {
    pub(crate) pool: Arc<Pool>,
    /// Batches concurrent commits into one transaction (see `group`).
    group: Arc<Group<Vec<CommitRequest>>>,
}

impl std::fmt::Debug for PostgresCommitter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresCommitter")
            .field("schema", &self.pool.schema())
            .finish_non_exhaustive()
    }
}

impl PostgresCommitter {
    /// Opens the store in schema `keel` of the database at `url` (a libpq connection string,
    /// `host=... user=... dbname=...` or `postgresql://...`), creating or migrating its tables.
    /// Call inside a tokio runtime: connections run as tokio tasks.
    pub async fn connect(url: &str) -> Result<PostgresCommitter, PostgresError> {
        PostgresCommitter::connect_with(url, PostgresOptions::default()).await
    }

    /// Opens the store with explicit options.
    pub async fn connect_with(
        url: &str,
        options: PostgresOptions,
    ) -> Result<PostgresCommitter, PostgresError> {
        let config: tokio_postgres::Config =
            url.parse()
                .map_err(|e: tokio_postgres::Error| PostgresError::InvalidConfig {
                    message: e.to_string(),
                })?;
        schema::check_schema_name(&options.schema)?;
        if options.max_connections == 0 {
            return Err(PostgresError::InvalidConfig {
                message: "max_connections must be at least 1".into(),
            });
        }
        let pool = Pool::new(config, options.schema.clone(), options.max_connections);
        let mut conn = pool.get().await?;
        schema::migrate(conn.client(), &options.schema).await?;
        drop(conn);
        Ok(PostgresCommitter {
            pool: Arc::new(pool),
            group: Arc::new(Group::new()),
        })
    }

    /// The schema holding this store's tables.
    pub fn schema(&self) -> &str {
        self.pool.schema()
    }

    /// Every installed commit of `root`, in installation order (for audits and oracles).
    pub async fn history(&self, root: &ProcessId) -> Result<Vec<CommitRecord>, PostgresError> {
        let mut conn = self.pool.get().await?;
        let rows = conn
            .client()
            .query(
                "SELECT identity, kind, effect_process, effect_id, previous_incarnation, sequence, \
                 incarnation, cut_digest FROM commits WHERE root_id = $1 ORDER BY position",
                &[&root.as_str()],
            )
            .await
            .map_err(PostgresError::query)?;
        rows.iter().map(record_from_row).collect()
    }

    /// The roots the store holds, in order.
    pub async fn roots(&self) -> Result<Vec<ProcessId>, PostgresError> {
        let mut conn = self.pool.get().await?;
        let rows = conn
            .client()
            .query("SELECT root_id FROM heads ORDER BY root_id", &[])
            .await
            .map_err(PostgresError::query)?;
        rows.iter()
            .map(|r| ProcessId::parse(r.get(0)).map_err(|e| corrupt(format!("root id: {e}"))))
            .collect()
    }

    /// Commits submitted to [`Group`] and run together in one transaction (see `group`):
    /// (batches, requests) since this store was opened.
    pub fn group_stats(&self) -> (u64, u64) {
        self.group.stats()
    }

    /// Queues a commit (one request, or a chain of one tree's) for the next batch and returns
    /// its outcome (see the module docs).
    async fn commit(&self, chain: Vec<CommitRequest>) -> Result<(), CommitError> {
        let Some(first) = chain.first() else {
            return Err(CommitError::InvalidCommit { reason: "an empty chain commits nothing".into() });
        };
        for request in &chain {
            let cut = request.cut();
            if cut.carried_bytes() > to_u64(MAX_CUT_BYTES) {
                return Err(CommitError::RecordTooLarge {
                    bytes: cut.carried_bytes(),
                    max: to_u64(MAX_CUT_BYTES),
                });
            }
        }
        let root = first.cut().root_id.clone();
        self.group.submit(root, chain, |batch| self.commit_batch(batch)).await
    }

    /// Runs one batch in one transaction (see `batch`), in root order (so that batches of
    /// different processes lock head rows in one order and cannot deadlock). An installed
    /// request is answered only after the `COMMIT`; a failed `COMMIT` fails every one of them.
    async fn commit_batch(&self, mut batch: Vec<Queued<Vec<CommitRequest>>>) {
        batch.sort_by(|a, b| a.root.cmp(&b.root));
        let mut conn = match self.pool.get().await {
            Ok(conn) => conn,
            Err(e) => {
                let error = storage(e);
                for queued in batch {
                    let _ = queued.reply.send(Err(error.clone()));
                }
                return;
            }
        };
        crate::batch::run(&mut conn, batch).await;
    }

    async fn load(&self, root: &ProcessId) -> Result<Option<Head>, CommitError> {
        let mut conn = self.pool.get().await.map_err(storage)?;
        let row = conn
            .client()
            .query_opt(
                "SELECT incarnation, sequence, digest, cut FROM heads WHERE root_id = $1",
                &[&root.as_str()],
            )
            .await
            .map_err(pg)?;
        row.map(|row| head_from_row(root, &row))
            .transpose()
            .map_err(|e| row_error(root, e))
    }
}

impl Committer for PostgresCommitter {
    fn commit_checkpoint(&self, checkpoint: &Checkpoint) -> BoxFuture<'_, Result<(), CommitError>> {
        Box::pin(self.commit(vec![CommitRequest::Checkpoint(checkpoint.clone())]))
    }
    fn commit_effect(&self, boundary: &EffectBoundary) -> BoxFuture<'_, Result<(), CommitError>> {
        Box::pin(self.commit(vec![CommitRequest::Effect(boundary.clone())]))
    }
    fn activate_tree(&self, activation: &Activation) -> BoxFuture<'_, Result<(), CommitError>> {
        Box::pin(self.commit(vec![CommitRequest::Activation(activation.clone())]))
    }
    fn load_tree(&self, root: &ProcessId) -> BoxFuture<'_, Result<Option<Head>, CommitError>> {
        let root = root.clone();
        Box::pin(async move { self.load(&root).await })
    }
    /// One submission, decided and written in one transaction with the rest of its batch: the
    /// whole chain or none of it, acknowledged after the `COMMIT`.
    fn commit_chain<'a>(&'a self, chain: &'a [CommitRequest]) -> BoxFuture<'a, Result<(), CommitError>> {
        Box::pin(async move {
            check_chain(chain)?;
            self.commit(chain.to_vec()).await
        })
    }
}

/// What one try of a request inside its savepoint came to.
enum Attempt {
    Installed,
    /// The request is the tree's current head (an identical retry): nothing to write.
    Current,
    /// Another start inserted the head row first: decide again against it.
    LostStartRace,
}

/// Decides and installs one request inside `tx`, in a savepoint of its own; returns whether it
/// wrote (and so needs the transaction's COMMIT before it is acknowledged).
pub(crate) async fn apply_one(
    tx: &mut tokio_postgres::Transaction<'_>,
    request: &CommitRequest,
) -> Result<bool, CommitError> {
    for _ in 0..START_RACE_TRIES {
        let savepoint = tx.savepoint("keel_commit").await.map_err(pg)?;
        let attempt = try_one(&savepoint, request).await;
        match attempt {
            Ok(Attempt::Installed) => {
                savepoint.commit().await.map_err(pg)?;
                return Ok(true);
            }
            Ok(Attempt::Current) => {
                savepoint.rollback().await.map_err(pg)?;
                return Ok(false);
            }
            Ok(Attempt::LostStartRace) => savepoint.rollback().await.map_err(pg)?,
            Err(e) => {
                // Undo this request only; if even that fails, the COMMIT fails and every
                // installed request of the batch with it.
                let _ = savepoint.rollback().await;
                return Err(e);
            }
        }
    }
    let root = &request.cut().root_id;
    Err(CommitError::Storage {
        message: format!("the head row of {root} kept appearing and disappearing"),
    })
}

/// One try (see the module docs): lock the head row, read the fact, decide, install.
async fn try_one(tx: &tokio_postgres::Transaction<'_>, request: &CommitRequest) -> Result<Attempt, CommitError> {
    let root = &request.cut().root_id;
    let identity = request.identity();
    let head = tx
        .query_opt(
            "SELECT incarnation, sequence, digest, cut FROM heads WHERE root_id = $1 FOR UPDATE",
            &[&root.as_str()],
        )
        .await
        .map_err(pg)?
        .map(|row| head_from_row(root, &row))
        .transpose()
        .map_err(|e| row_error(root, e))?;
    let fact = tx
        .query_opt(
            "SELECT content_digest FROM commits WHERE root_id = $1 AND identity = $2",
            &[&root.as_str(), &identity],
        )
        .await
        .map_err(pg)?
        .map(|row| digest_from(row.get(0), "content digest"))
        .transpose()
        .map_err(storage)?;
    let index = CommitIndex::for_tree(root.clone(), head.clone(), fact.map(|d| (identity.clone(), d)));
    let installation = match index.decide(request)? {
        Decision::Current => return Ok(Attempt::Current),
        Decision::Install(installation) => installation,
    };
    // This store keeps whole cuts: the rules resolved a delta against the head.
    let whole = stored_cut_bytes(&installation.cut)?;
    if whole.len() > MAX_CUT_BYTES {
        return Err(CommitError::RecordTooLarge { bytes: to_u64(whole.len()), max: to_u64(MAX_CUT_BYTES) });
    }
    let whole: &[u8] = &whole;
    let advanced = match &head {
        None => tx
            .execute(
                "INSERT INTO heads (root_id, incarnation, sequence, digest, cut) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (root_id) DO NOTHING",
                &[
                    &root.as_str(),
                    &installation.cut.incarnation.as_str(),
                    &stored_sequence(installation.sequence)?,
                    &&installation.cut.digest.0[..],
                    &whole,
                ],
            )
            .await
            .map_err(pg)?,
        Some(old) => tx
            .execute(
                "UPDATE heads SET incarnation = $2, sequence = $3, digest = $4, cut = $5, \
                 updated_at = now() \
                 WHERE root_id = $1 AND incarnation = $6 AND sequence = $7 AND digest = $8",
                &[
                    &root.as_str(),
                    &installation.cut.incarnation.as_str(),
                    &stored_sequence(installation.sequence)?,
                    &&installation.cut.digest.0[..],
                    &whole,
                    &old.cut.incarnation.as_str(),
                    &stored_sequence(old.sequence)?,
                    &&old.cut.digest.0[..],
                ],
            )
            .await
            .map_err(pg)?,
    };
    if advanced != 1 {
        if head.is_none() {
            return Ok(Attempt::LostStartRace);
        }
        // The row was locked: only a change by hand can get here.
        return Err(CommitError::TreeIncarnationConflict { reason: "the head changed under the row lock".into() });
    }
    insert_commit(tx, &installation).await?;
    Ok(Attempt::Installed)
}

async fn insert_commit(
    tx: &tokio_postgres::Transaction<'_>,
    i: &Installation,
) -> Result<(), CommitError> {
    let (kind, effect_process, effect_id, previous_incarnation) = commit_kind_columns(i);
    tx.execute(
        "INSERT INTO commits (root_id, position, identity, content_digest, kind, effect_process, \
         effect_id, previous_incarnation, sequence, incarnation, cut_digest) \
         VALUES ($1, (SELECT COALESCE(MAX(position), 0) + 1 FROM commits WHERE root_id = $1), \
         $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        &[
            &i.cut.root_id.as_str(),
            &i.identity,
            &&i.content_digest.0[..],
            &kind,
            &effect_process,
            &effect_id,
            &previous_incarnation,
            &stored_sequence(i.sequence)?,
            &i.cut.incarnation.as_str(),
            &&i.cut.digest.0[..],
        ],
    )
    .await
    .map_err(pg)?;
    Ok(())
}

/// A commit row's kind columns: kind text, Effect process and id, previous incarnation.
pub(crate) fn commit_kind_columns(i: &Installation) -> (String, Option<&str>, Option<&str>, Option<&str>) {
    match &i.kind {
        CommitRecordKind::Checkpoint(k) => (format!("checkpoint:{}", k.as_str()), None, None, None),
        CommitRecordKind::Effect {
            process_id,
            effect_id,
            kind,
        } => (
            format!("effect:{}", kind.as_str()),
            Some(process_id.as_str()),
            Some(effect_id.as_str()),
            None,
        ),
        CommitRecordKind::Activation {
            previous_incarnation,
        } => (
            "activation".to_owned(),
            None,
            None,
            Some(previous_incarnation.as_str()),
        ),
    }
}

/// The bytes stored for a cut (the one place that reads them).
pub(crate) fn stored_cut_bytes(cut: &TreeCut) -> Result<Arc<[u8]>, CommitError> {
    cut.bytes().map_err(|e| CommitError::from_cut(&cut.root_id, e))
}

/// Builds the `TreeCut` a head row stores (the one place that does).
fn cut_from_row(root: &ProcessId, row: &Row) -> Result<TreeCut, PostgresError> {
    let incarnation = IncarnationId::parse(row.get("incarnation"))
        .map_err(|e| corrupt(format!("head incarnation of {root}: {e}")))?;
    let digest = digest_from(row.get("digest"), "head digest")?;
    let bytes: Vec<u8> = row.get("cut");
    let cut = TreeCut::from_whole(&bytes).map_err(|e| corrupt(format!("head cut of {root}: {e}")))?;
    if cut.digest != digest || cut.root_id != *root || cut.incarnation != incarnation {
        return Err(corrupt(format!("head cut of {root} does not match its row's digest, root or writer")));
    }
    Ok(cut)
}

pub(crate) fn head_from_row(root: &ProcessId, row: &Row) -> Result<Head, PostgresError> {
    let sequence: i64 = row.get("sequence");
    let sequence = u64::try_from(sequence)
        .map_err(|_| corrupt(format!("negative head sequence of {root}")))?;
    Ok(Head {
        cut: cut_from_row(root, row)?,
        sequence,
    })
}

fn record_from_row(row: &Row) -> Result<CommitRecord, PostgresError> {
    let text = |name: &str| -> Option<String> { row.get(name) };
    let kind_text: String = row.get("kind");
    let kind = if let Some(k) = kind_text.strip_prefix("checkpoint:") {
        CommitRecordKind::Checkpoint(
            CheckpointKind::from_name(k)
                .ok_or_else(|| corrupt(format!("commit kind {kind_text}")))?,
        )
    } else if let Some(k) = kind_text.strip_prefix("effect:") {
        let kind = EffectBoundaryKind::from_name(k)
            .ok_or_else(|| corrupt(format!("commit kind {kind_text}")))?;
        let process_id = text("effect_process")
            .and_then(|p| ProcessId::parse(&p).ok())
            .ok_or_else(|| corrupt("effect commit without a valid process id".into()))?;
        let effect_id = text("effect_id")
            .and_then(|p| EffectId::parse(&p).ok())
            .ok_or_else(|| corrupt("effect commit without a valid effect id".into()))?;
        CommitRecordKind::Effect {
            process_id,
            effect_id,
            kind,
        }
    } else if kind_text == "activation" {
        let previous_incarnation = text("previous_incarnation")
            .and_then(|p| IncarnationId::parse(&p).ok())
            .ok_or_else(|| corrupt("activation without a valid previous incarnation".into()))?;
        CommitRecordKind::Activation {
            previous_incarnation,
        }
    } else {
        return Err(corrupt(format!("commit kind {kind_text}")));
    };
    let sequence: i64 = row.get("sequence");
    Ok(CommitRecord {
        identity: row.get("identity"),
        kind,
        sequence: u64::try_from(sequence)
            .map_err(|_| corrupt("negative commit sequence".into()))?,
        incarnation: IncarnationId::parse(row.get("incarnation"))
            .map_err(|e| corrupt(format!("commit incarnation: {e}")))?,
        cut_digest: digest_from(row.get("cut_digest"), "cut digest")?,
    })
}

fn digest_from(bytes: &[u8], what: &str) -> Result<Digest, PostgresError> {
    <[u8; 32]>::try_from(bytes)
        .map(Digest)
        .map_err(|_| corrupt(format!("{what} of {} bytes, not 32", bytes.len())))
}

/// Sequences are `u64` in keel and `bigint` in PostgreSQL; a head past `i64::MAX` is refused
/// rather than wrapped.
pub(crate) fn stored_sequence(sequence: u64) -> Result<i64, CommitError> {
    i64::try_from(sequence).map_err(|_| CommitError::Storage {
        message: format!(
            "sequence {sequence} exceeds the store's largest sequence {}",
            i64::MAX
        ),
    })
}

fn corrupt(message: String) -> PostgresError {
    PostgresError::Corrupt { message }
}

/// A head row that does not hold what the store writes damages its tree (the store's other
/// trees are served); any other failure is the storage's.
pub(crate) fn row_error(root: &ProcessId, e: PostgresError) -> CommitError {
    match e {
        PostgresError::Corrupt { message } => CommitError::Damaged { root: root.clone(), reason: message },
        e => storage(e),
    }
}

fn storage(e: PostgresError) -> CommitError {
    CommitError::Storage {
        message: e.to_string(),
    }
}

pub(crate) fn pg(e: tokio_postgres::Error) -> CommitError {
    CommitError::Storage {
        message: describe(&e),
    }
}

fn to_u64(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}
