//! Group commit: concurrent commits of one process share one durable sync.
//!
//! A durable store pays one sync (`fdatasync`, a SQLite `COMMIT`) per write, and a sync costs
//! the same for one record as for fifty. [`GroupCommit`] queues the requests submitted while
//! a batch is being formed and hands them to the store as one batch, written and synced once:
//!
//! * **Leader and followers.** The first submitter finding no leader becomes the leader; the
//!   others wait for their slot. Before taking its batch the leader yields to the executor
//!   (wakes itself and returns `Pending`), so every other task that is ready to commit runs
//!   and enqueues first: on a single-threaded runtime this is what lets a batch form at all.
//!   It yields again while the queue keeps growing, at most [`GroupLimits::max_yields`] times;
//!   a lone committer pays one trip through the executor.
//! * **Bounded batches.** A batch takes requests from the front of the queue up to
//!   [`GroupLimits::max_requests`] and [`GroupLimits::max_bytes`] (the first request always
//!   goes in), and at most one request per key (per tree): a later request of a tree already
//!   in the batch stays queued, in order, for the next batch, so a store decides every request
//!   of a batch against its durable state alone.
//! * **Acknowledged after the sync.** The leader runs the batch synchronously (the store's
//!   blocking I/O, with the queue unlocked so others can enqueue meanwhile), then stores every
//!   request's outcome in its slot and wakes its owner. The store returns an outcome only
//!   after the sync that covers the request, so no slot completes before it.
//! * **Leadership passes on.** A leader whose own request is done hands leadership to the
//!   owner of the request now first in the queue (and wakes it). A submitter dropped while its
//!   request is still queued takes it out of the queue (a dropped leader hands leadership on
//!   the same way); dropped while its batch runs, its outcome is discarded (the commit may be
//!   durable: a cancelled commit proves nothing about the head).
//! * **A panicking batch** completes every slot of the batch with the group's `lost` outcome
//!   (the store's typed error) instead of leaving its owners waiting forever.
//!
//! No thread and no clock: the batcher only wakes tasks, so under the simulator it is as
//! deterministic as the executor driving it.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

/// How large a batch may grow and how long its leader waits for it to form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupLimits {
    /// Requests in one batch (at least 1).
    pub max_requests: usize,
    /// Bytes (as the submitters weigh their requests) in one batch; the first request goes in
    /// whatever its weight.
    pub max_bytes: usize,
    /// Times a leader yields to the executor before it takes its batch: the first always, the
    /// next ones only while the queue grew during the previous one.
    pub max_yields: u32,
}

impl Default for GroupLimits {
    fn default() -> GroupLimits {
        GroupLimits { max_requests: 256, max_bytes: 8 << 20, max_yields: 4 }
    }
}

/// Counts of what a group did, for tests and statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupStats {
    /// Batches run.
    pub batches: u64,
    /// Requests run in them.
    pub requests: u64,
    /// The most requests one batch held.
    pub largest_batch: u64,
}

/// The batcher (see the module docs): `K` names what a batch holds at most one request of
/// (a tree's root), `Req` a request, `Out` its outcome.
pub struct GroupCommit<K, Req, Out> {
    shared: Mutex<Shared<K, Req, Out>>,
    limits: GroupLimits,
    /// The outcome of a request whose batch panicked.
    lost: fn() -> Out,
}

struct Entry<K, Req> {
    id: u64,
    key: K,
    bytes: usize,
    request: Req,
}

struct Shared<K, Req, Out> {
    next_id: u64,
    queue: VecDeque<Entry<K, Req>>,
    /// Requests taken into the batch being run.
    running: BTreeSet<u64>,
    /// Running requests whose submitter was dropped: their outcome is discarded.
    abandoned: BTreeSet<u64>,
    /// Outcomes not yet collected by their submitter.
    done: BTreeMap<u64, Out>,
    wakers: BTreeMap<u64, Waker>,
    leader: Option<u64>,
    stats: GroupStats,
}

impl<K: Ord + Clone, Req, Out> GroupCommit<K, Req, Out> {
    /// A batcher within `limits`; `lost` makes the outcome of a request whose batch panicked.
    pub fn new(limits: GroupLimits, lost: fn() -> Out) -> GroupCommit<K, Req, Out> {
        let limits = GroupLimits { max_requests: limits.max_requests.max(1), ..limits };
        GroupCommit {
            shared: Mutex::new(Shared {
                next_id: 0,
                queue: VecDeque::new(),
                running: BTreeSet::new(),
                abandoned: BTreeSet::new(),
                done: BTreeMap::new(),
                wakers: BTreeMap::new(),
                leader: None,
                stats: GroupStats::default(),
            }),
            limits,
            lost,
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> GroupLimits {
        self.limits
    }

    /// What the group has run so far.
    pub fn stats(&self) -> GroupStats {
        self.lock().stats
    }

    /// Submits `request` (of `key`, weighing `bytes`); the future resolves to its outcome.
    /// `run` is how this submitter runs a batch should it lead one: it gets the batch's
    /// requests in queue order and returns their outcomes in the same order (a missing
    /// outcome counts as lost). Nothing is queued until the future is first polled.
    pub fn submit<F>(&self, key: K, bytes: usize, request: Req, run: F) -> Submit<'_, K, Req, Out, F>
    where
        F: FnMut(Vec<Req>) -> Vec<Out> + Unpin,
    {
        Submit { group: self, state: SubmitState::New(Some((key, bytes, request))), run, yields: 0, seen: 0 }
    }

    // Every mutation below keeps the queue consistent before any call that could panic, so a
    // poisoned lock still guards a usable queue.
    fn lock(&self) -> MutexGuard<'_, Shared<K, Req, Out>> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes the next batch from the front of the queue (see the module docs).
    fn take_batch(&self, shared: &mut Shared<K, Req, Out>) -> Vec<Entry<K, Req>> {
        let mut batch: Vec<Entry<K, Req>> = Vec::new();
        let mut keys = BTreeSet::new();
        let mut bytes = 0usize;
        let mut at = 0;
        while at < shared.queue.len() && batch.len() < self.limits.max_requests {
            let entry = &shared.queue[at];
            if keys.contains(&entry.key) {
                at += 1; // a later request of a tree in the batch waits for the next one
                continue;
            }
            if !batch.is_empty() && bytes.saturating_add(entry.bytes) > self.limits.max_bytes {
                break;
            }
            let Some(entry) = shared.queue.remove(at) else { break };
            bytes = bytes.saturating_add(entry.bytes);
            keys.insert(entry.key.clone());
            batch.push(entry);
        }
        batch
    }
}

impl<K, Req, Out> Shared<K, Req, Out> {
    /// Makes the owner of the first queued request the leader (or none if the queue is empty)
    /// and wakes it.
    fn hand_off(&mut self) {
        self.leader = self.queue.front().map(|e| e.id);
        if let Some(waker) = self.leader.and_then(|id| self.wakers.remove(&id)) {
            waker.wake();
        }
    }

    /// Stores an outcome for its submitter (or discards it if the submitter is gone).
    fn complete(&mut self, id: u64, out: Out) {
        self.running.remove(&id);
        if self.abandoned.remove(&id) {
            return;
        }
        self.done.insert(id, out);
        if let Some(waker) = self.wakers.remove(&id) {
            waker.wake();
        }
    }
}

enum SubmitState<K, Req> {
    New(Option<(K, usize, Req)>),
    Queued(u64),
    Done,
}

/// The future of one submitted request (see [`GroupCommit::submit`]).
pub struct Submit<'a, K: Ord + Clone, Req, Out, F> {
    group: &'a GroupCommit<K, Req, Out>,
    state: SubmitState<K, Req>,
    run: F,
    /// Yields of the current leadership, and the queue length seen at the last one.
    yields: u32,
    seen: usize,
}

// Nothing in a `Submit` is ever pinned in place (the request moves into the queue), so it
// may move whatever its parts are.
impl<K: Ord + Clone, Req, Out, F: Unpin> Unpin for Submit<'_, K, Req, Out, F> {}

/// Completes every request of a running batch with the lost outcome if the batch unwinds.
struct LostGuard<'a, K: Ord + Clone, Req, Out> {
    group: &'a GroupCommit<K, Req, Out>,
    ids: Vec<u64>,
}

impl<K: Ord + Clone, Req, Out> Drop for LostGuard<'_, K, Req, Out> {
    fn drop(&mut self) {
        if self.ids.is_empty() {
            return;
        }
        let mut shared = self.group.lock();
        for id in self.ids.drain(..) {
            shared.complete(id, (self.group.lost)());
        }
    }
}

impl<K, Req, Out, F> Future for Submit<'_, K, Req, Out, F>
where
    K: Ord + Clone,
    F: FnMut(Vec<Req>) -> Vec<Out> + Unpin,
{
    type Output = Out;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Out> {
        let this = self.get_mut();
        let group = this.group;
        let mut shared = group.lock();
        let id = match &mut this.state {
            SubmitState::Queued(id) => *id,
            SubmitState::New(request) => {
                let Some((key, bytes, request)) = request.take() else { return Poll::Pending };
                let id = shared.next_id;
                shared.next_id += 1;
                shared.queue.push_back(Entry { id, key, bytes, request });
                this.state = SubmitState::Queued(id);
                id
            }
            // Polled after it completed: a misuse of the future; it never resolves again.
            SubmitState::Done => return Poll::Pending,
        };
        loop {
            if let Some(out) = shared.done.remove(&id) {
                this.state = SubmitState::Done;
                if shared.leader == Some(id) {
                    shared.hand_off();
                }
                return Poll::Ready(out);
            }
            match shared.leader {
                None => {
                    shared.leader = Some(id);
                    this.yields = 0;
                }
                Some(leader) if leader != id => {
                    shared.wakers.insert(id, cx.waker().clone());
                    return Poll::Pending;
                }
                Some(_) => {}
            }
            // Leading: let the other ready tasks enqueue while the queue keeps growing.
            let grew = shared.queue.len() > this.seen;
            if this.yields < group.limits.max_yields && (this.yields == 0 || grew) {
                this.yields += 1;
                this.seen = shared.queue.len();
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            let batch = group.take_batch(&mut shared);
            let ids: Vec<u64> = batch.iter().map(|e| e.id).collect();
            shared.running.extend(ids.iter().copied());
            shared.stats.batches += 1;
            shared.stats.requests += ids.len() as u64;
            shared.stats.largest_batch = shared.stats.largest_batch.max(ids.len() as u64);
            drop(shared);
            let mut guard = LostGuard { group, ids };
            let outcomes = (this.run)(batch.into_iter().map(|e| e.request).collect());
            let ids = std::mem::take(&mut guard.ids);
            shared = group.lock();
            let mut outcomes = outcomes.into_iter();
            for id in ids {
                let out = outcomes.next().unwrap_or_else(group.lost);
                shared.complete(id, out);
            }
            // Normally the leader's own request was first in its batch; if not, it leads the
            // next one too.
            this.yields = 0;
            this.seen = 0;
        }
    }
}

impl<K: Ord + Clone, Req, Out, F> Drop for Submit<'_, K, Req, Out, F> {
    fn drop(&mut self) {
        let SubmitState::Queued(id) = self.state else { return };
        let mut shared = self.group.lock();
        shared.wakers.remove(&id);
        if let Some(at) = shared.queue.iter().position(|e| e.id == id) {
            shared.queue.remove(at);
        } else if shared.running.contains(&id) {
            shared.abandoned.insert(id);
        } else {
            shared.done.remove(&id);
        }
        if shared.leader == Some(id) {
            shared.hand_off();
        }
    }
}

#[cfg(test)]
mod tests;
