//! Group commit for the PostgreSQL store: concurrent commits of different trees in one process
//! share one server transaction, and so one `COMMIT` (one WAL flush on the server) and one set
//! of round trips instead of one per commit.
//!
//! Every submitter queues its request, then waits its turn for the leader lock (a fair tokio
//! mutex). The holder first checks whether an earlier leader already answered its request;
//! if not, it takes a batch from the front of the queue (at most [`MAX_BATCH`] requests, one
//! per tree: a later request of a tree already in the batch stays queued, in order) and runs it
//! (see `PostgresCommitter::commit_batch`), answering each request only after the `COMMIT`
//! that covers it. While one batch is in the server, the next one forms in the queue.
//!
//! A leader dropped while its batch runs drops the batch's answers: their owners get a storage
//! error (unacknowledged; the transaction may or may not have committed, as with any commit
//! cut off in flight). A submitter dropped while queued leaves its request queued; a later
//! batch decides it like any other (its answer is discarded).

use keel::kernel::commit::CommitError;
use keel::kernel::ids::ProcessId;
use std::collections::{BTreeSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use tokio::sync::oneshot;

/// Requests in one batch at most. Each costs a few statements inside the transaction; the
/// bound keeps a batch's row locks short.
pub(crate) const MAX_BATCH: usize = 64;

pub(crate) type Reply = oneshot::Sender<Result<(), CommitError>>;

pub(crate) struct Queued<R> {
    pub root: ProcessId,
    pub request: R,
    pub reply: Reply,
}

pub(crate) struct Group<R> {
    queue: Mutex<VecDeque<Queued<R>>>,
    leader: tokio::sync::Mutex<()>,
    batches: AtomicU64,
    requests: AtomicU64,
}

impl<R> Group<R> {
    pub(crate) fn new() -> Group<R> {
        Group {
            queue: Mutex::new(VecDeque::new()),
            leader: tokio::sync::Mutex::new(()),
            batches: AtomicU64::new(0),
            requests: AtomicU64::new(0),
        }
    }

    /// (batches run, requests run in them) since the store was opened.
    pub(crate) fn stats(&self) -> (u64, u64) {
        (self.batches.load(Ordering::Relaxed), self.requests.load(Ordering::Relaxed))
    }

    /// Queues `request` and returns its answer, running batches (through `run`) while this
    /// submitter holds the leader lock and its own answer has not come.
    pub(crate) async fn submit<F, Fut>(&self, root: ProcessId, request: R, run: F) -> Result<(), CommitError>
    where
        F: Fn(Vec<Queued<R>>) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        let (reply, mut answer) = oneshot::channel();
        self.lock().push_back(Queued { root, request, reply });
        loop {
            let _leader = self.leader.lock().await;
            match answer.try_recv() {
                Ok(outcome) => return outcome,
                Err(oneshot::error::TryRecvError::Closed) => {
                    return Err(CommitError::Storage {
                        message: "the batch carrying this commit was cut off before its outcome was known \
                                  (its leader was cancelled); nothing was acknowledged: load the tree to \
                                  see its head"
                            .into(),
                    })
                }
                Err(oneshot::error::TryRecvError::Empty) => {}
            }
            let batch = self.take_batch();
            self.batches.fetch_add(1, Ordering::Relaxed);
            self.requests.fetch_add(batch.len() as u64, Ordering::Relaxed);
            run(batch).await;
        }
    }

    fn take_batch(&self) -> Vec<Queued<R>> {
        let mut queue = self.lock();
        let mut roots = BTreeSet::new();
        let mut batch = Vec::new();
        let mut kept = VecDeque::new();
        while let Some(entry) = queue.pop_front() {
            if batch.len() < MAX_BATCH && roots.insert(entry.root.clone()) {
                batch.push(entry);
            } else {
                kept.push_back(entry);
            }
        }
        *queue = kept;
        batch
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Queued<R>>> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
