//! A leased worker: claims runs whose lease is free or lapsed, starts or restores them with
//! the real Engine, renews its leases while it lives, and closes each run's lease when the run
//! finishes or waits for the host.
//!
//! Many workers (processes, machines) share one [`PostgresCommitter`]. A worker that dies stops
//! renewing; once its leases expire by the database clock, other workers claim its runs and
//! restore them, which commits an activation under a new incarnation. If the old worker was only
//! paused and comes back, its next commit names the old incarnation and the database fences it;
//! its renewals find the lease gone, and it stops renewing those runs.

use crate::committer::PostgresCommitter;
use crate::error::PostgresError;
use crate::leases::{Claim, LeaseState, Leases};
use keel::agent::{Agent, Idle, RunError, RunId, Runtime};
use keel::env::{Env, TokioEnv};
use keel::kernel::commit::Committer;
use std::collections::BTreeSet;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// How a worker paces itself.
#[derive(Clone, Debug)]
pub struct WorkerConfig {
    /// The worker's name in the lease table; unique among live workers (a host name and pid).
    pub name: String,
    /// How long a claim or renewal keeps a run this worker's without another renewal.
    pub lease_ttl: Duration,
    /// How often the worker renews its leases: at most half the time to live, so one missed
    /// renewal does not lose a run.
    pub renew_every: Duration,
    /// How often the worker looks for runs to claim.
    pub poll_every: Duration,
    /// The most runs the worker drives at once.
    pub max_runs: usize,
}

impl WorkerConfig {
    /// Defaults: a 10 s lease renewed every 2.5 s, polling every 250 ms, at most 64 runs.
    pub fn new(name: impl Into<String>) -> WorkerConfig {
        WorkerConfig {
            name: name.into(),
            lease_ttl: Duration::from_secs(10),
            renew_every: Duration::from_millis(2500),
            poll_every: Duration::from_millis(250),
            max_runs: 64,
        }
    }

    fn check(&self) -> Result<(), WorkerError> {
        let bad = |message: &str| {
            Err(WorkerError::Config {
                message: message.to_owned(),
            })
        };
        if self.name.is_empty() {
            return bad("the worker name is empty");
        }
        if self.renew_every.is_zero() || self.renew_every > self.lease_ttl / 2 {
            return bad("renew_every must be above zero and at most half of lease_ttl");
        }
        if self.poll_every.is_zero() || self.poll_every > self.renew_every {
            return bad("poll_every must be above zero and at most renew_every");
        }
        if self.max_runs == 0 {
            return bad("max_runs must be at least 1");
        }
        Ok(())
    }
}

/// Why a worker could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("invalid worker configuration: {message}")]
    Config { message: String },
    #[error("the worker needs a tokio runtime: {message}")]
    NoRuntime { message: String },
    #[error(transparent)]
    Store(#[from] PostgresError),
}

/// One worker process's share of the runs in a PostgreSQL store.
pub struct Worker {
    runtime: Runtime,
    store: PostgresCommitter,
    leases: Leases,
    config: WorkerConfig,
    env: Env,
}

impl Worker {
    /// A worker running `agent` over `store` on the current tokio runtime.
    pub fn new(
        store: PostgresCommitter,
        agent: Agent,
        config: WorkerConfig,
    ) -> Result<Worker, WorkerError> {
        let committer = Arc::new(store.clone());
        Worker::with_committer(store, committer, agent, config)
    }

    /// A worker whose Engine commits through `committer`, a wrapper around `store` (one that
    /// records or measures commits); leases and loads go to `store` directly.
    pub fn with_committer(
        store: PostgresCommitter,
        committer: Arc<dyn Committer>,
        agent: Agent,
        config: WorkerConfig,
    ) -> Result<Worker, WorkerError> {
        config.check()?;
        let env = TokioEnv::current()
            .map_err(|e| WorkerError::NoRuntime {
                message: e.to_string(),
            })?
            .env();
        let runtime = Runtime::with_store(agent, committer, env.clone());
        Ok(Worker {
            runtime,
            leases: Leases::new(store.clone()),
            store,
            config,
            env,
        })
    }

    /// The runtime the worker drives its runs with.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// Claims, drives and renews until `shutdown` completes; then gives its open runs back
    /// (other workers may claim them at once) and returns. A database error in one round is
    /// reported on stderr and the next round tries again: leases that lapse meanwhile are
    /// taken over by other workers, and fencing keeps that safe.
    pub async fn run(&self, shutdown: impl Future<Output = ()>) -> Result<(), WorkerError> {
        let held: Arc<Mutex<Held>> = Arc::default();
        let mut shutdown = std::pin::pin!(shutdown);
        let mut next_renewal = self.env.clock.now();
        // Runs whose lease this worker lost while still driving them: never renewed again, never
        // claimed again by this worker until their driver ends (the Engine still holds them).
        let mut lost: BTreeSet<RunId> = BTreeSet::new();
        loop {
            let (active, exclude) = {
                let held = lock(&held);
                let active: Vec<RunId> = held.driving.iter().cloned().collect();
                (
                    active,
                    held.driving
                        .union(&held.parked)
                        .cloned()
                        .collect::<Vec<RunId>>(),
                )
            };
            lost.retain(|r| active.contains(r));
            let now = self.env.clock.now();
            if now >= next_renewal {
                next_renewal = now.saturating_add(self.config.renew_every);
                let mine: Vec<RunId> = active
                    .iter()
                    .filter(|r| !lost.contains(*r))
                    .cloned()
                    .collect();
                if !mine.is_empty() {
                    match self
                        .leases
                        .renew(&self.config.name, self.config.lease_ttl, &mine)
                        .await
                    {
                        Ok(renewed) => {
                            lost.extend(mine.into_iter().filter(|r| !renewed.contains(r)))
                        }
                        Err(e) => {
                            eprintln!("keel worker {}: renewing leases: {e}", self.config.name)
                        }
                    }
                }
            }
            let free = self.config.max_runs.saturating_sub(active.len());
            if free > 0 {
                match self
                    .leases
                    .claim(&self.config.name, self.config.lease_ttl, free, &exclude)
                    .await
                {
                    Ok(claims) => {
                        for claim in claims {
                            lock(&held).driving.insert(claim.run.clone());
                            let task = drive(self.clone_parts(), claim, held.clone());
                            drop(self.env.executor.spawn(Box::pin(task)));
                        }
                    }
                    Err(e) => eprintln!("keel worker {}: claiming runs: {e}", self.config.name),
                }
            }
            let tick = self.env.clock.sleep(self.config.poll_every);
            if let futures::future::Either::Right(_) =
                futures::future::select(tick, shutdown.as_mut()).await
            {
                break;
            }
        }
        let active: Vec<RunId> = lock(&held).driving.iter().cloned().collect();
        for run in active {
            self.leases.release(&self.config.name, &run).await?;
        }
        Ok(())
    }

    fn clone_parts(&self) -> Parts {
        Parts {
            runtime: self.runtime.clone(),
            store: self.store.clone(),
            leases: self.leases.clone(),
            name: self.config.name.clone(),
        }
    }
}

struct Parts {
    runtime: Runtime,
    store: PostgresCommitter,
    leases: Leases,
    name: String,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The runs a worker holds: the ones it drives, and the parked ones (waiting for the host,
/// still live in its Engine, so never claimed again by this worker).
#[derive(Default)]
struct Held {
    driving: BTreeSet<RunId>,
    parked: BTreeSet<RunId>,
}

/// Drives one claimed run until it finishes, waits for the host or is lost, then closes or
/// releases its lease.
async fn drive(parts: Parts, claim: Claim, held: Arc<Mutex<Held>>) {
    let run_id = claim.run.clone();
    let mut parked = false;
    let closed = match drive_run(&parts, &claim).await {
        Ok(Idle::Finished(result)) => {
            let detail = match result.reason() {
                "" => result.status().as_str().to_owned(),
                reason => format!("{}: {reason}", result.status().as_str()),
            };
            let closed = parts
                .leases
                .close(&parts.name, &run_id, LeaseState::Finished, &detail)
                .await;
            // The tree ended: drop it from this worker's memory.
            let _ = parts
                .runtime
                .engine()
                .release_tree(run_id.process_id())
                .await;
            closed
        }
        Ok(Idle::NeedsResolution(unknowns)) => {
            let ids: Vec<String> = unknowns.iter().map(|u| u.effect.to_string()).collect();
            parked = true;
            let detail = format!("unknown: {}", ids.join(" "));
            parts
                .leases
                .close(&parts.name, &run_id, LeaseState::Held, &detail)
                .await
        }
        Ok(Idle::NeedsInput(inputs)) => {
            parked = true;
            let detail = format!("input: {} request(s)", inputs.len());
            parts
                .leases
                .close(&parts.name, &run_id, LeaseState::Held, &detail)
                .await
        }
        Err(e) => {
            // Fenced by a newer writer, refused, or the store failed: give the run back. A
            // lease another worker took over is not this worker's to release (a no-op).
            eprintln!("keel worker {}: run {run_id}: {e}", parts.name);
            parts.leases.release(&parts.name, &run_id).await
        }
    };
    if let Err(e) = closed {
        // The lease stays open and lapses; whoever claims the run next restores it from its
        // head (a finished run restores as finished and is closed then).
        eprintln!(
            "keel worker {}: closing the lease of {run_id}: {e}",
            parts.name
        );
    }
    let mut held = lock(&held);
    held.driving.remove(&run_id);
    if parked {
        held.parked.insert(run_id);
    }
}

async fn drive_run(parts: &Parts, claim: &Claim) -> Result<Idle, RunError> {
    let root = claim.run.process_id();
    let stored = parts
        .store
        .load_tree(root)
        .await
        .map_err(|e| RunError::Store(e.to_string()))?;
    let run = match stored {
        Some(_) => parts.runtime.resume(&claim.run).await?,
        None => match parts
            .runtime
            .start_with_id(&claim.run, claim.message.clone())
            .await
        {
            Ok(run) => run,
            // A worker that lost its lease started the run meanwhile: continue that tree.
            Err(RunError::Store(_)) => parts.runtime.resume(&claim.run).await?,
            Err(e) => return Err(e),
        },
    };
    run.idle().await
}
