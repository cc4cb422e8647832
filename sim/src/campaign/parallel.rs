//! The only place in keel-sim that touches OS threads and the wall clock.
//!
//! Runs are independent and deterministic, so running them on worker threads changes nothing
//! but speed; the wall clock only feeds the progress display, the runs/s line and the date
//! written beside a recorded regression seed, never a run.
//! (The architecture lint allows threads and `Instant` in this file alone.)

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use crate::limits::{DEFAULT_MAX_JOBS, RESULT_QUEUE_PER_WORKER};

/// Today's UTC date, `YYYY-MM-DD`, for the comment beside a recorded regression seed (outside
/// any run). A clock before 1970 reads as 1970-01-01.
pub fn today_utc() -> String {
    date_of(keel::env::Timestamp::from_system_time(SystemTime::now()))
}

/// The `YYYY-MM-DD` of a timestamp: its RFC 3339 text starts with the date.
fn date_of(t: keel::env::Timestamp) -> String {
    t.to_rfc3339().chars().take(10).collect()
}

/// Available parallelism, capped at [`DEFAULT_MAX_JOBS`] (the machines are shared).
pub fn default_jobs() -> usize {
    thread::available_parallelism()
        .map(NonZeroUsize::get)
        .unwrap_or(1)
        .min(DEFAULT_MAX_JOBS)
}

/// Runs `work(i)` for every `i` in `0..total` on `workers` threads, handing each result to
/// `on_result` on the calling thread (in completion order, with the elapsed wall time).
/// Indices are taken in increasing order, so low indices start first. When `on_result` returns
/// `Some(n)`, no index `>= n` is started any more (runs already started still report). Returns
/// the wall time.
///
/// `total` must leave room for one overshoot per worker (`total <= u64::MAX / 2` is plenty).
pub(crate) fn run_indexed<R, W, F>(
    total: u64,
    workers: usize,
    work: W,
    mut on_result: F,
) -> Duration
where
    R: Send,
    W: Fn(u64) -> R + Sync,
    F: FnMut(u64, R, Duration) -> Option<u64>,
{
    let start = Instant::now();
    if total == 0 {
        return start.elapsed();
    }
    let workers = workers
        .max(1)
        .min(usize::try_from(total).unwrap_or(usize::MAX));
    let next = AtomicU64::new(0);
    let limit = AtomicU64::new(total);
    let (next, limit, work) = (&next, &limit, &work);
    thread::scope(|scope| {
        let (tx, rx) = mpsc::sync_channel::<(u64, R)>(workers * RESULT_QUEUE_PER_WORKER);
        for _ in 0..workers {
            let tx = tx.clone();
            scope.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= limit.load(Ordering::SeqCst) {
                    break;
                }
                // A closed queue means the collector is gone: stop quietly.
                if tx.send((i, work(i))).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        for (i, result) in rx {
            if let Some(stop) = on_result(i, result, start.elapsed()) {
                limit.fetch_min(stop, Ordering::SeqCst);
            }
        }
    });
    start.elapsed()
}

#[cfg(test)]
mod tests {
    #[test]
    fn dates() {
        const DAY: u64 = 86_400_000;
        let date = |days: u64| super::date_of(keel::env::Timestamp::from_millis(days * DAY).unwrap());
        assert_eq!(date(0), "1970-01-01");
        assert_eq!(date(59), "1970-03-01");
        assert_eq!(date(11_016), "2000-02-29");
        assert_eq!(date(20_790), "2026-12-03");
        assert_eq!(super::today_utc().len(), 10);
    }
    use super::*;

    #[test]
    fn every_index_runs_exactly_once() {
        for workers in [1, 2, 5] {
            let mut seen = vec![0u32; 100];
            run_indexed(
                100,
                workers,
                |i| i * 2,
                |i, r, _| {
                    assert_eq!(r, i * 2);
                    seen[i as usize] += 1;
                    None
                },
            );
            assert!(seen.iter().all(|&n| n == 1), "workers={workers}");
        }
    }

    #[test]
    fn zero_total_runs_nothing() {
        run_indexed(0, 2, |_| (), |_, _, _| panic!("no work expected"));
    }

    #[test]
    fn a_stop_request_keeps_later_indices_from_starting() {
        for workers in [1, 2, 3] {
            let mut seen = Vec::new();
            run_indexed(
                1000,
                workers,
                |i| i,
                |i, _, _| {
                    seen.push(i);
                    (i == 10).then_some(11)
                },
            );
            seen.sort_unstable();
            assert_eq!(seen[..11], (0..11).collect::<Vec<u64>>()[..], "workers={workers}");
            // Workers run ahead at most by what the result queue holds, plus the run in hand.
            let ahead = workers * (RESULT_QUEUE_PER_WORKER + 2);
            assert!(seen.len() <= 11 + ahead, "workers={workers}: {}", seen.len());
        }
    }

    #[test]
    fn default_jobs_is_capped() {
        let j = default_jobs();
        assert!((1..=DEFAULT_MAX_JOBS).contains(&j));
    }
}

/// The name of the test running on this thread (libtest names each test's thread after it),
/// for the replay command a harness campaign prints; `None` on the main thread.
pub(crate) fn current_test_name() -> Option<String> {
    thread::current().name().filter(|n| *n != "main").map(str::to_owned)
}
