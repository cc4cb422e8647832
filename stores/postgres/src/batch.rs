//! One commit batch in one server transaction, in a fixed number of round trips whatever its
//! size: the batch's reads are sent together, decided in memory, and its writes are sent
//! together, each as one statement over arrays (`unnest`) with every row of the batch.
//!
//! 1. `BEGIN`.
//! 2. Reads, pipelined (sent back to back on the connection, answered in order): every head row
//!    of the batch, locked in root order (`SELECT ... FOR UPDATE`, so batches of different
//!    processes lock rows in one order and cannot deadlock), and the recorded fact of every
//!    request's identity.
//! 3. Decisions, with no round trip: each submission (one request, or a chain of one tree's
//!    consecutive requests) decided by the shared rules (`CommitIndex`) seeded with exactly its
//!    locked head and facts. A refusal or an identical retry writes nothing.
//! 4. Writes, pipelined: the head rows of new trees inserted (`ON CONFLICT DO NOTHING`), the
//!    locked head rows advanced (conditioned on the values read), and the commit rows inserted
//!    for the trees whose head row now holds their new head (a join, so a tree whose head write
//!    did not happen gets no commit row).
//! 5. A new tree whose head row another writer inserted first (a start race, between step 2 and
//!    step 4) is decided again on its own, in a savepoint, against the winner's head
//!    (`committer::apply_one`).
//! 6. `COMMIT`; every installed request is acknowledged only after it.
//!
//! A chain is one submission and so is installed whole or not at all. If any statement fails,
//! the transaction is rolled back and every request of the batch fails, unacknowledged.

use crate::committer::{apply_one, commit_kind_columns, head_from_row, pg, row_error, stored_cut_bytes, stored_sequence};
use crate::committer::MAX_CUT_BYTES;
use crate::group::Queued;
use crate::pool::Conn;
use keel::json::Digest;
use keel::kernel::commit::{CommitError, CommitIndex, CommitRequest, Decision, Head, Installation};
use keel::kernel::ids::ProcessId;
use std::collections::{BTreeMap, BTreeSet};

const LOCK_HEADS: &str = "SELECT root_id, incarnation, sequence, digest, cut FROM heads \
     WHERE root_id = ANY($1::text[]) ORDER BY root_id FOR UPDATE";

const READ_FACTS: &str = "SELECT c.root_id, c.identity, c.content_digest FROM commits c \
     JOIN unnest($1::text[], $2::text[]) AS r(root_id, identity) \
     ON c.root_id = r.root_id AND c.identity = r.identity";

const INSERT_HEADS: &str = "INSERT INTO heads (root_id, incarnation, sequence, digest, cut) \
     SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bytea[], $5::bytea[]) \
     ON CONFLICT (root_id) DO NOTHING RETURNING root_id";

const ADVANCE_HEADS: &str = "UPDATE heads h SET incarnation = u.incarnation, sequence = u.sequence, \
     digest = u.digest, cut = u.cut, updated_at = now() \
     FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bytea[], $5::bytea[], $6::text[], \
     $7::bigint[], $8::bytea[]) AS u(root_id, incarnation, sequence, digest, cut, old_incarnation, \
     old_sequence, old_digest) \
     WHERE h.root_id = u.root_id AND h.incarnation = u.old_incarnation \
     AND h.sequence = u.old_sequence AND h.digest = u.old_digest RETURNING h.root_id";

// A commit row goes in only where the head row now holds the submission's new head (by this
// statement's snapshot, which sees the head writes sent before it). `ON CONFLICT DO NOTHING`
// keeps a start that lost its race to an identical start (same head) from aborting the whole
// transaction; the rows inserted are counted per tree below.
const INSERT_COMMITS: &str = "INSERT INTO commits (root_id, position, identity, content_digest, kind, \
     effect_process, effect_id, previous_incarnation, sequence, incarnation, cut_digest) \
     SELECT u.root_id, (SELECT COALESCE(MAX(c.position), 0) FROM commits c WHERE c.root_id = u.root_id) \
     + u.step, u.identity, u.content_digest, u.kind, u.effect_process, u.effect_id, \
     u.previous_incarnation, u.sequence, u.incarnation, u.cut_digest \
     FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bytea[], $5::text[], $6::text[], \
     $7::text[], $8::text[], $9::bigint[], $10::text[], $11::bytea[], $12::bigint[], $13::bytea[]) \
     AS u(root_id, step, identity, content_digest, kind, effect_process, effect_id, \
     previous_incarnation, sequence, incarnation, cut_digest, head_sequence, head_digest) \
     JOIN heads h ON h.root_id = u.root_id AND h.sequence = u.head_sequence AND h.digest = u.head_digest \
     ON CONFLICT DO NOTHING RETURNING root_id";

/// A submission decided to install: its installations in order, the head it advances from
/// (`None` for a new tree) and the whole cut of its last installation (the head row's cut).
struct Planned {
    at: usize,
    old: Option<Head>,
    installations: Vec<Installation>,
    cut: std::sync::Arc<[u8]>,
}

/// Runs `batch` (sorted by root, one submission per tree) in one transaction on `conn` and
/// answers every submission (see the module docs).
pub(crate) async fn run(conn: &mut Conn<'_>, batch: Vec<Queued<Vec<CommitRequest>>>) {
    let fail_all = |batch: Vec<Queued<Vec<CommitRequest>>>, error: CommitError| {
        for queued in batch {
            let _ = queued.reply.send(Err(error.clone()));
        }
    };
    let mut statements = Vec::new();
    for sql in [LOCK_HEADS, READ_FACTS, INSERT_HEADS, ADVANCE_HEADS, INSERT_COMMITS] {
        match conn.prepared(sql).await {
            Ok(statement) => statements.push(statement),
            Err(e) => return fail_all(batch, pg(e)),
        }
    }
    let [lock_heads, read_facts, insert_heads, advance_heads, insert_commits] = &statements[..] else {
        unreachable!("five statements prepared")
    };
    let mut tx = match conn.client().transaction().await {
        Ok(tx) => tx,
        Err(e) => return fail_all(batch, pg(e)),
    };

    // 2. Reads.
    let roots: Vec<&str> = batch.iter().map(|q| q.root.as_str()).collect();
    let identities: Vec<(String, String)> = batch
        .iter()
        .flat_map(|q| q.request.iter().map(|r| (q.root.as_str().to_owned(), r.identity())))
        .collect();
    let fact_roots: Vec<&str> = identities.iter().map(|(root, _)| root.as_str()).collect();
    let fact_ids: Vec<&str> = identities.iter().map(|(_, id)| id.as_str()).collect();
    let read = futures::future::try_join(
        tx.query(lock_heads, &[&roots]),
        tx.query(read_facts, &[&fact_roots, &fact_ids]),
    )
    .await;
    let (head_rows, fact_rows) = match read {
        Ok(rows) => rows,
        Err(e) => return fail_all(batch, pg(e)),
    };
    let mut heads: BTreeMap<String, &tokio_postgres::Row> = BTreeMap::new();
    for row in &head_rows {
        heads.insert(row.get::<_, String>("root_id"), row);
    }
    let mut facts: BTreeMap<(String, String), Result<Digest, usize>> = BTreeMap::new();
    for row in &fact_rows {
        let bytes: &[u8] = row.get("content_digest");
        let digest = <[u8; 32]>::try_from(bytes).map(Digest).map_err(|_| bytes.len());
        facts.insert((row.get("root_id"), row.get("identity")), digest);
    }

    // 3. Decisions.
    let mut answered: Vec<(usize, Result<(), CommitError>)> = Vec::new();
    let mut planned: Vec<Planned> = Vec::new();
    for (at, queued) in batch.iter().enumerate() {
        match decide(&queued.root, &queued.request, heads.get(queued.root.as_str()).copied(), &facts) {
            Ok(None) => answered.push((at, Ok(()))),
            Ok(Some((old, installations, cut))) => planned.push(Planned { at, old, installations, cut }),
            Err(e) => answered.push((at, Err(e))),
        }
    }

    // 4. Writes.
    let mut new_heads = HeadColumns::default();
    let mut advanced = HeadColumns::default();
    let mut commits = CommitColumns::default();
    for plan in &planned {
        let last = plan.installations.last().unwrap_or_else(|| unreachable!("a plan installs"));
        let columns = if plan.old.is_some() { &mut advanced } else { &mut new_heads };
        if let Err(e) = columns.push(last, &plan.cut, plan.old.as_ref()) {
            return fail_all(batch, e);
        }
        for (step, installation) in plan.installations.iter().enumerate() {
            if let Err(e) = commits.push(installation, step, last) {
                return fail_all(batch, e);
            }
        }
    }
    let written = if planned.is_empty() {
        Ok((Vec::new(), Vec::new(), Vec::new()))
    } else {
        futures::future::try_join3(
            async {
                if new_heads.roots.is_empty() {
                    return Ok(Vec::new());
                }
                tx.query(insert_heads, &new_heads.params()[..5]).await
            },
            async {
                if advanced.roots.is_empty() {
                    return Ok(Vec::new());
                }
                tx.query(advance_heads, &advanced.params()).await
            },
            tx.query(insert_commits, &commits.params()),
        )
        .await
    };
    let (inserted, updated, commit_rows) = match written {
        Ok(rows) => rows,
        Err(e) => return fail_all(batch, pg(e)),
    };
    let written_roots: BTreeSet<String> =
        inserted.iter().chain(updated.iter()).map(|row| row.get::<_, String>("root_id")).collect();
    let mut commit_counts: BTreeMap<String, usize> = BTreeMap::new();
    for row in &commit_rows {
        *commit_counts.entry(row.get("root_id")).or_default() += 1;
    }

    // 5. Losers of a start race, decided again alone; the head rows that did not move.
    let mut installed: Vec<usize> = Vec::new();
    for plan in planned {
        let root = batch[plan.at].root.as_str();
        if written_roots.contains(root) {
            if commit_counts.get(root).copied().unwrap_or(0) != plan.installations.len() {
                // The head moved but not every commit row went in: nothing of the batch may be
                // committed.
                let _ = tx.rollback().await;
                let error = CommitError::Storage {
                    message: format!("the commit rows of {root} were not all written; nothing of this batch was stored: retry"),
                };
                return fail_all(batch, error);
            }
            installed.push(plan.at);
        } else if plan.old.is_none() {
            let request = &batch[plan.at].request[0];
            match apply_one(&mut tx, request).await {
                Ok(true) => installed.push(plan.at),
                outcome => answered.push((plan.at, outcome.map(|_| ()))),
            }
        } else {
            // The row was locked: only a change by hand can get here.
            let reason = "the head changed under the row lock".to_owned();
            answered.push((plan.at, Err(CommitError::TreeIncarnationConflict { reason })));
        }
    }

    // Refusals and retries of the current head wrote nothing: they are answered as soon as
    // decided (a refusal stands whatever the COMMIT does).
    let mut slots: Vec<Option<Queued<Vec<CommitRequest>>>> = batch.into_iter().map(Some).collect();
    for (at, outcome) in answered {
        if let Some(queued) = slots[at].take() {
            let _ = queued.reply.send(outcome);
        }
    }
    let installed: Vec<Queued<Vec<CommitRequest>>> = installed.into_iter().filter_map(|at| slots[at].take()).collect();
    if installed.is_empty() {
        let _ = tx.rollback().await;
        return;
    }
    // 6. The one COMMIT.
    match tx.commit().await {
        Ok(()) => {
            for queued in installed {
                let _ = queued.reply.send(Ok(()));
            }
        }
        Err(e) => fail_all(installed, pg(e)),
    }
}

/// Decides one submission against its locked head row and facts: `None` for an identical retry
/// of the head (nothing to write), else the head it advances from, its installations and the
/// whole cut of the last one.
#[allow(clippy::type_complexity)]
fn decide(
    root: &ProcessId,
    chain: &[CommitRequest],
    row: Option<&tokio_postgres::Row>,
    facts: &BTreeMap<(String, String), Result<Digest, usize>>,
) -> Result<Option<(Option<Head>, Vec<Installation>, std::sync::Arc<[u8]>)>, CommitError> {
    let head = row.map(|row| head_from_row(root, row)).transpose().map_err(|e| row_error(root, e))?;
    let mut known = Vec::new();
    for request in chain {
        let identity = request.identity();
        match facts.get(&(root.as_str().to_owned(), identity.clone())) {
            None => {}
            Some(Ok(digest)) => known.push((identity, *digest)),
            Some(Err(len)) => {
                return Err(CommitError::Storage {
                    message: format!("stored data is not valid: content digest of {} bytes, not 32", len),
                })
            }
        }
    }
    let index = CommitIndex::for_tree(root.clone(), head.clone(), known);
    let installations: Vec<Installation> = match chain {
        [one] => match index.decide(one)? {
            Decision::Current => Vec::new(),
            Decision::Install(installation) => vec![installation],
        },
        chain => index.decide_chain(chain)?.into_iter().map(|(_, installation)| installation).collect(),
    };
    let Some(last) = installations.last() else { return Ok(None) };
    // This store keeps whole cuts: the rules resolved a delta against the head.
    let cut = stored_cut_bytes(&last.cut)?;
    if cut.len() > MAX_CUT_BYTES {
        return Err(CommitError::RecordTooLarge { bytes: to_u64(cut.len()), max: to_u64(MAX_CUT_BYTES) });
    }
    Ok(Some((head, installations, cut)))
}

/// The columns of the head rows a batch writes, one entry per tree.
#[derive(Default)]
struct HeadColumns {
    roots: Vec<String>,
    incarnations: Vec<String>,
    sequences: Vec<i64>,
    digests: Vec<Vec<u8>>,
    cuts: Vec<Vec<u8>>,
    old_incarnations: Vec<String>,
    old_sequences: Vec<i64>,
    old_digests: Vec<Vec<u8>>,
}

impl HeadColumns {
    fn push(&mut self, last: &Installation, cut: &std::sync::Arc<[u8]>, old: Option<&Head>) -> Result<(), CommitError> {
        self.roots.push(last.cut.root_id.as_str().to_owned());
        self.incarnations.push(last.cut.incarnation.as_str().to_owned());
        self.sequences.push(stored_sequence(last.sequence)?);
        self.digests.push(last.cut.digest.0.to_vec());
        self.cuts.push(cut.to_vec());
        if let Some(old) = old {
            self.old_incarnations.push(old.cut.incarnation.as_str().to_owned());
            self.old_sequences.push(stored_sequence(old.sequence)?);
            self.old_digests.push(old.cut.digest.0.to_vec());
        }
        Ok(())
    }

    fn params(&self) -> Vec<&(dyn tokio_postgres::types::ToSql + Sync)> {
        vec![
            &self.roots,
            &self.incarnations,
            &self.sequences,
            &self.digests,
            &self.cuts,
            &self.old_incarnations,
            &self.old_sequences,
            &self.old_digests,
        ]
    }
}

/// The columns of the commit rows a batch writes, one entry per installation.
#[derive(Default)]
struct CommitColumns {
    roots: Vec<String>,
    steps: Vec<i64>,
    identities: Vec<String>,
    content_digests: Vec<Vec<u8>>,
    kinds: Vec<String>,
    effect_processes: Vec<Option<String>>,
    effect_ids: Vec<Option<String>>,
    previous_incarnations: Vec<Option<String>>,
    sequences: Vec<i64>,
    incarnations: Vec<String>,
    cut_digests: Vec<Vec<u8>>,
    head_sequences: Vec<i64>,
    head_digests: Vec<Vec<u8>>,
}

impl CommitColumns {
    fn push(&mut self, i: &Installation, step: usize, last: &Installation) -> Result<(), CommitError> {
        let (kind, effect_process, effect_id, previous_incarnation) = commit_kind_columns(i);
        self.roots.push(i.cut.root_id.as_str().to_owned());
        self.steps.push(i64::try_from(step).unwrap_or(i64::MAX).saturating_add(1));
        self.identities.push(i.identity.clone());
        self.content_digests.push(i.content_digest.0.to_vec());
        self.kinds.push(kind);
        self.effect_processes.push(effect_process.map(str::to_owned));
        self.effect_ids.push(effect_id.map(str::to_owned));
        self.previous_incarnations.push(previous_incarnation.map(str::to_owned));
        self.sequences.push(stored_sequence(i.sequence)?);
        self.incarnations.push(i.cut.incarnation.as_str().to_owned());
        self.cut_digests.push(i.cut.digest.0.to_vec());
        self.head_sequences.push(stored_sequence(last.sequence)?);
        self.head_digests.push(last.cut.digest.0.to_vec());
        Ok(())
    }

    fn params(&self) -> Vec<&(dyn tokio_postgres::types::ToSql + Sync)> {
        vec![
            &self.roots,
            &self.steps,
            &self.identities,
            &self.content_digests,
            &self.kinds,
            &self.effect_processes,
            &self.effect_ids,
            &self.previous_incarnations,
            &self.sequences,
            &self.incarnations,
            &self.cut_digests,
            &self.head_sequences,
            &self.head_digests,
        ]
    }
}

fn to_u64(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}
