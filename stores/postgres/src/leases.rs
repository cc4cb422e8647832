//! Worker leases: which worker drives which run, on the database clock.
//!
//! One row per submitted run: its first user message, its state (`open` while it needs a
//! worker, `held` once it waits for the host, `finished`), and while open, its owner and
//! `expires_at`. Every time comparison uses the server's `now()`, never a worker's clock, so
//! skewed worker clocks cannot make two workers believe they own a run.
//!
//! The protocol: a worker claims open runs whose lease is free or lapsed (taking the rows with
//! `FOR UPDATE SKIP LOCKED`, so two workers never claim the same row in one instant), renews
//! the leases it holds well within their time to live, and closes a run's row when the run
//! finishes or waits for the host. A lease is ownership for liveness only: safety comes from
//! the committer, where a worker that took a run over has committed an activation under a new
//! incarnation, and the old worker's next commit is fenced by the database.

use crate::committer::PostgresCommitter;
use crate::error::PostgresError;
use keel::agent::RunId;
use std::time::Duration;

/// Where a submitted run stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseState {
    /// Needs a worker (owned while its lease has not expired).
    Open,
    /// Waits for the host: Unknown calls to resolve or inputs to answer.
    Held,
    /// Ended (completed, failed, cancelled...).
    Finished,
}

impl LeaseState {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            LeaseState::Open => "open",
            LeaseState::Held => "held",
            LeaseState::Finished => "finished",
        }
    }

    fn from_name(name: &str) -> Option<LeaseState> {
        [LeaseState::Open, LeaseState::Held, LeaseState::Finished]
            .into_iter()
            .find(|s| s.as_str() == name)
    }
}

/// A run a worker just claimed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    pub run: RunId,
    pub message: String,
    /// How many times the run was claimed, this claim included (1 for the first worker).
    pub claims: i32,
}

/// One lease row, as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseRow {
    pub run: RunId,
    pub state: LeaseState,
    /// The worker that owns (open) or last owned (held, finished) the run.
    pub owner: Option<String>,
    /// Whether the lease is live by the database clock (always false once closed).
    pub live: bool,
    pub claims: i32,
    /// Why a run was closed: its final status, or the Unknowns it waits on.
    pub detail: Option<String>,
}

/// The lease table of one store.
#[derive(Clone, Debug)]
pub struct Leases {
    store: PostgresCommitter,
}

impl Leases {
    pub fn new(store: PostgresCommitter) -> Leases {
        Leases { store }
    }

    /// Submits a run for workers to start. Returns false if `run` was already submitted (a
    /// submission is idempotent; the first message stays).
    pub async fn submit(&self, run: &RunId, message: &str) -> Result<bool, PostgresError> {
        let mut conn = self.store.pool.get().await?;
        let n = conn
            .client()
            .execute(
                "INSERT INTO leases (root_id, message) VALUES ($1, $2) ON CONFLICT (root_id) DO NOTHING",
                &[&run.process_id().as_str(), &message],
            )
            .await
            .map_err(PostgresError::query)?;
        Ok(n == 1)
    }

    /// Claims up to `limit` open runs whose lease is free or expired, for `worker`, for `ttl`.
    /// Runs in `exclude` (the ones this worker still drives) are never claimed.
    pub async fn claim(
        &self,
        worker: &str,
        ttl: Duration,
        limit: usize,
        exclude: &[RunId],
    ) -> Result<Vec<Claim>, PostgresError> {
        let exclude: Vec<&str> = exclude.iter().map(|r| r.process_id().as_str()).collect();
        let mut conn = self.store.pool.get().await?;
        let rows = conn
            .client()
            .query(
                "UPDATE leases SET owner = $1, expires_at = now() + $2::float8 * interval '1 millisecond', \
                 claims = claims + 1 \
                 WHERE root_id IN ( \
                     SELECT root_id FROM leases \
                     WHERE state = 'open' AND (owner IS NULL OR expires_at <= now()) \
                       AND NOT (root_id = ANY($4)) \
                     ORDER BY submitted_at, root_id LIMIT $3 FOR UPDATE SKIP LOCKED) \
                 RETURNING root_id, message, claims",
                &[&worker, &millis(ttl), &to_i64(limit), &exclude],
            )
            .await
            .map_err(PostgresError::query)?;
        rows.iter()
            .map(|row| {
                Ok(Claim {
                    run: run_id(row.get(0))?,
                    message: row.get(1),
                    claims: row.get(2),
                })
            })
            .collect()
    }

    /// Extends the live leases `worker` holds on `runs` by `ttl` from now. Returns the runs
    /// renewed: a run missing from the answer is no longer this worker's (its lease lapsed or
    /// another worker took it over).
    pub async fn renew(
        &self,
        worker: &str,
        ttl: Duration,
        runs: &[RunId],
    ) -> Result<Vec<RunId>, PostgresError> {
        let roots: Vec<&str> = runs.iter().map(|r| r.process_id().as_str()).collect();
        let mut conn = self.store.pool.get().await?;
        let rows = conn
            .client()
            .query(
                "UPDATE leases SET expires_at = now() + $2::float8 * interval '1 millisecond' \
                 WHERE owner = $1 AND state = 'open' AND expires_at > now() AND root_id = ANY($3) \
                 RETURNING root_id",
                &[&worker, &millis(ttl), &roots],
            )
            .await
            .map_err(PostgresError::query)?;
        rows.iter().map(|row| run_id(row.get(0))).collect()
    }

    /// Closes `run` as held or finished, if `worker` still owns it. Returns whether it did.
    pub async fn close(
        &self,
        worker: &str,
        run: &RunId,
        state: LeaseState,
        detail: &str,
    ) -> Result<bool, PostgresError> {
        let mut conn = self.store.pool.get().await?;
        let n = conn
            .client()
            .execute(
                "UPDATE leases SET state = $3, detail = $4, expires_at = NULL \
                 WHERE root_id = $2 AND owner = $1 AND state = 'open'",
                &[
                    &worker,
                    &run.process_id().as_str(),
                    &state.as_str(),
                    &detail,
                ],
            )
            .await
            .map_err(PostgresError::query)?;
        Ok(n == 1)
    }

    /// Gives `run` up without closing it, so any worker may claim it at once (a worker that
    /// could not restore it, or that shuts down).
    pub async fn release(&self, worker: &str, run: &RunId) -> Result<bool, PostgresError> {
        let mut conn = self.store.pool.get().await?;
        let n = conn
            .client()
            .execute(
                "UPDATE leases SET owner = NULL, expires_at = NULL \
                 WHERE root_id = $2 AND owner = $1 AND state = 'open'",
                &[&worker, &run.process_id().as_str()],
            )
            .await
            .map_err(PostgresError::query)?;
        Ok(n == 1)
    }

    /// Every lease row, ordered by run id.
    pub async fn list(&self) -> Result<Vec<LeaseRow>, PostgresError> {
        let mut conn = self.store.pool.get().await?;
        let rows = conn
            .client()
            .query(
                "SELECT root_id, state, owner, COALESCE(expires_at > now(), false), claims, detail \
                 FROM leases ORDER BY root_id",
                &[],
            )
            .await
            .map_err(PostgresError::query)?;
        rows.iter()
            .map(|row| {
                let state: String = row.get(1);
                Ok(LeaseRow {
                    run: run_id(row.get(0))?,
                    state: LeaseState::from_name(&state).ok_or_else(|| PostgresError::Corrupt {
                        message: format!("lease state {state:?}"),
                    })?,
                    owner: row.get(2),
                    live: row.get(3),
                    claims: row.get(4),
                    detail: row.get(5),
                })
            })
            .collect()
    }
}

fn run_id(text: &str) -> Result<RunId, PostgresError> {
    text.parse().map_err(|e| PostgresError::Corrupt {
        message: format!("lease run id: {e}"),
    })
}

fn millis(d: Duration) -> f64 {
    // f64 holds every millisecond count below 2^53 exactly: far beyond any lease.
    d.as_secs_f64() * 1000.0
}

fn to_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
