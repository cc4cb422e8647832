use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Wake;

/// A batch runner that records the batches it ran and answers each request `n` with
/// `Ok(n)`, or `Err(n)` for odd `n` when `odd_fails`.
#[derive(Clone, Default)]
struct Recorder {
    batches: Arc<Mutex<Vec<Vec<u32>>>>,
    odd_fails: bool,
}

impl Recorder {
    fn run(&self) -> impl FnMut(Vec<u32>) -> Vec<Result<u32, u32>> + Unpin + Send + 'static {
        let me = self.clone();
        move |batch: Vec<u32>| {
            me.batches.lock().unwrap().push(batch.clone());
            batch.into_iter().map(|n| if me.odd_fails && n % 2 == 1 { Err(n) } else { Ok(n) }).collect()
        }
    }
    fn batches(&self) -> Vec<Vec<u32>> {
        self.batches.lock().unwrap().clone()
    }
}

const LOST: u32 = u32::MAX;

fn group(limits: GroupLimits) -> Arc<GroupCommit<u32, u32, Result<u32, u32>>> {
    Arc::new(GroupCommit::new(limits, || Err(LOST)))
}

/// Counts its wakes.
#[derive(Default)]
struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn poll<F: Future + Unpin>(f: &mut F, waker: &Arc<CountingWaker>) -> Poll<F::Output> {
    let waker = Waker::from(waker.clone());
    Pin::new(f).poll(&mut Context::from_waker(&waker))
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().build().unwrap()
}

#[test]
fn a_lone_submitter_yields_once_and_runs_a_batch_of_one() {
    let g = group(GroupLimits::default());
    let r = Recorder::default();
    let waker = Arc::new(CountingWaker::default());
    let mut f = g.submit(0, 1, 7, r.run());
    assert!(poll(&mut f, &waker).is_pending(), "the leader yields first");
    assert_eq!(waker.0.load(Ordering::SeqCst), 1, "and wakes itself to be polled again");
    assert_eq!(poll(&mut f, &waker), Poll::Ready(Ok(7)));
    assert_eq!(r.batches(), vec![vec![7]]);
    assert_eq!(g.stats(), GroupStats { batches: 1, requests: 1, largest_batch: 1 });
}

#[test]
fn concurrent_tasks_on_a_current_thread_runtime_share_one_batch() {
    let g = group(GroupLimits::default());
    let r = Recorder::default();
    let outcomes = current_thread().block_on(async {
        let tasks: Vec<_> = (0..50u32)
            .map(|n| {
                let (g, run) = (g.clone(), r.run());
                spawn(async move { g.submit(n, 1, n, run).await })
            })
            .collect();
        let mut outcomes = Vec::new();
        for t in tasks {
            outcomes.push(t.await.unwrap());
        }
        outcomes
    });
    assert_eq!(outcomes, (0..50).map(Ok).collect::<Vec<_>>(), "each gets its own outcome");
    assert_eq!(r.batches(), vec![(0..50).collect::<Vec<_>>()], "one batch, in submission order");
}

#[test]
fn tasks_that_commit_again_keep_forming_batches() {
    // 20 tasks committing 10 times each, like agents: each round's commits form one batch.
    let g = group(GroupLimits::default());
    let r = Recorder::default();
    current_thread().block_on(async {
        let tasks: Vec<_> = (0..20u32)
            .map(|n| {
                let (g, r) = (g.clone(), r.clone());
                spawn(async move {
                    for round in 0..10 {
                        assert_eq!(g.submit(n, 1, n * 100 + round, r.run()).await, Ok(n * 100 + round));
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
    let stats = g.stats();
    assert_eq!(stats.requests, 200);
    assert!(stats.batches <= 12, "about one batch per round, not per commit: {stats:?}");
}

#[test]
fn multi_threaded_submitters_all_complete() {
    let g = group(GroupLimits { max_requests: 7, ..GroupLimits::default() });
    let r = Recorder::default();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(4).build().unwrap();
    rt.block_on(async {
        let tasks: Vec<_> = (0..64u32)
            .map(|n| {
                let (g, r) = (g.clone(), r.clone());
                spawn(async move {
                    for round in 0..5 {
                        assert_eq!(g.submit(n, 1, n * 10 + round, r.run()).await, Ok(n * 10 + round));
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
    let mut all: Vec<u32> = r.batches().concat();
    all.sort_unstable();
    assert_eq!(all, (0..64).flat_map(|n| (0..5).map(move |r| n * 10 + r)).collect::<Vec<_>>(), "each ran once");
    assert!(r.batches().iter().all(|b| b.len() <= 7));
}

#[test]
fn batches_are_bounded_by_count_and_bytes() {
    let g = group(GroupLimits { max_requests: 3, max_bytes: 100, max_yields: 1 });
    let r = Recorder::default();
    let outcomes = current_thread().block_on(async {
        // Weights: 10 each, but request 4 weighs 95 and request 7 weighs 500.
        let tasks: Vec<_> = (0..9u32)
            .map(|n| {
                let (g, run) = (g.clone(), r.run());
                let bytes = match n {
                    4 => 95,
                    7 => 500,
                    _ => 10,
                };
                spawn(async move { g.submit(n, bytes, n, run).await })
            })
            .collect();
        let mut outcomes = Vec::new();
        for t in tasks {
            outcomes.push(t.await.unwrap());
        }
        outcomes
    });
    assert_eq!(outcomes, (0..9).map(Ok).collect::<Vec<_>>());
    // Three by count; 3 then 4 would exceed the bytes; 7 alone goes in first whatever it weighs.
    assert_eq!(r.batches(), vec![vec![0, 1, 2], vec![3], vec![4], vec![5, 6], vec![7], vec![8]]);
}

#[test]
fn a_batch_holds_one_request_per_key_and_keeps_each_keys_order() {
    let g = group(GroupLimits::default());
    let r = Recorder::default();
    current_thread().block_on(async {
        let keys = [1u32, 2, 1, 3, 1, 2];
        let tasks: Vec<_> = keys
            .iter()
            .enumerate()
            .map(|(n, &key)| {
                let (g, run) = (g.clone(), r.run());
                let n = n as u32;
                spawn(async move { g.submit(key, 1, n, run).await })
            })
            .collect();
        for t in tasks {
            t.await.unwrap().unwrap();
        }
    });
    assert_eq!(r.batches(), vec![vec![0, 1, 3], vec![2, 5], vec![4]]);
}

#[test]
fn each_slot_gets_its_own_error() {
    let g = group(GroupLimits::default());
    let r = Recorder { odd_fails: true, ..Recorder::default() };
    let outcomes = current_thread().block_on(async {
        let tasks: Vec<_> = (0..6u32)
            .map(|n| {
                let (g, run) = (g.clone(), r.run());
                spawn(async move { g.submit(n, 1, n, run).await })
            })
            .collect();
        let mut outcomes = Vec::new();
        for t in tasks {
            outcomes.push(t.await.unwrap());
        }
        outcomes
    });
    assert_eq!(outcomes, vec![Ok(0), Err(1), Ok(2), Err(3), Ok(4), Err(5)]);
    assert_eq!(r.batches().len(), 1);
}

#[test]
fn a_dropped_follower_is_not_run_and_a_dropped_leader_hands_leadership_on() {
    let g = group(GroupLimits::default());
    let r = Recorder::default();
    let (lead, follow) = (Arc::new(CountingWaker::default()), Arc::new(CountingWaker::default()));
    let mut leader = g.submit(0, 1, 10, r.run());
    let mut dropped = g.submit(1, 1, 11, r.run());
    let mut follower = g.submit(2, 1, 12, r.run());
    assert!(poll(&mut leader, &lead).is_pending());
    assert!(poll(&mut dropped, &follow).is_pending());
    assert!(poll(&mut follower, &follow).is_pending());
    drop(dropped);
    // The leader is dropped mid-yield: its request leaves the queue and the next in line leads.
    drop(leader);
    assert_eq!(follow.0.load(Ordering::SeqCst), 1, "the new leader was woken");
    assert!(poll(&mut follower, &follow).is_pending(), "it yields like any leader");
    assert_eq!(poll(&mut follower, &follow), Poll::Ready(Ok(12)));
    assert_eq!(r.batches(), vec![vec![12]], "neither dropped request ran");
    // The group is idle again: a new submitter leads at once.
    let mut next = g.submit(3, 1, 13, r.run());
    assert!(poll(&mut next, &lead).is_pending());
    assert_eq!(poll(&mut next, &lead), Poll::Ready(Ok(13)));
}

type Run = fn(Vec<u32>) -> Vec<Result<u32, u32>>;

fn all_ok(batch: Vec<u32>) -> Vec<Result<u32, u32>> {
    batch.into_iter().map(Ok).collect()
}

#[test]
fn a_follower_dropped_while_its_batch_runs_loses_only_its_outcome() {
    let g = group(GroupLimits::default());
    let (lead, follow) = (Arc::new(CountingWaker::default()), Arc::new(CountingWaker::default()));
    let cell: Mutex<Option<Submit<'_, u32, u32, Result<u32, u32>, Run>>> = Mutex::new(None);
    // The leader's batch drops the follower's future while it runs (as a cancelled task would).
    let mut leader = g.submit(0, 1, 1, |batch: Vec<u32>| {
        cell.lock().unwrap().take();
        all_ok(batch)
    });
    let mut follower = g.submit(1, 1, 2, all_ok as Run);
    assert!(poll(&mut leader, &lead).is_pending());
    assert!(poll(&mut follower, &follow).is_pending());
    *cell.lock().unwrap() = Some(follower);
    assert!(poll(&mut leader, &lead).is_pending(), "the queue grew during the first yield: once more");
    assert_eq!(poll(&mut leader, &lead), Poll::Ready(Ok(1)));
    assert!(cell.lock().unwrap().is_none(), "the follower was dropped inside the batch");
    let shared = g.lock();
    assert!(shared.done.is_empty() && shared.running.is_empty() && shared.abandoned.is_empty(), "nothing left behind");
    assert_eq!(shared.leader, None);
}

#[test]
fn a_panicking_batch_completes_every_slot_with_the_lost_outcome() {
    let g = group(GroupLimits::default());
    let results = current_thread().block_on(async {
        let panicking = {
            let g = g.clone();
            spawn(async move {
                g.submit(0, 1, 0, |_: Vec<u32>| -> Vec<Result<u32, u32>> { panic!("the store broke") }).await
            })
        };
        let followers: Vec<_> = (1..4u32)
            .map(|n| {
                let g = g.clone();
                spawn(async move { g.submit(n, 1, n, |b: Vec<u32>| b.into_iter().map(Ok).collect()).await })
            })
            .collect();
        assert!(panicking.await.is_err(), "the leader's task panicked");
        let mut results = Vec::new();
        for f in followers {
            results.push(f.await.unwrap());
        }
        // The group still works.
        results.push(g.submit(9, 1, 9, |b: Vec<u32>| b.into_iter().map(Ok).collect()).await);
        results
    });
    assert_eq!(results, vec![Err(LOST), Err(LOST), Err(LOST), Ok(9)]);
}

/// Spawns through keel's executor: the runtime crate reaches tasks only through `env`
/// (`tests/tests/architecture.rs` checks it).
fn spawn<T: Send + 'static>(
    fut: impl std::future::Future<Output = T> + Send + 'static,
) -> crate::env::BoxFuture<'static, Result<T, crate::env::JoinError>> {
    let env = crate::env::TokioEnv::current().expect("inside a tokio runtime").env();
    crate::env::spawn_with_result(env.executor.as_ref(), fut).join()
}
