//! The optional model observer and its panic accounting. Observation is not settlement: an
//! observer may see a response whose settlement is later lost, and its own copy cannot change
//! what is settled.

use crate::chat::Response;
use crate::interaction::attribution::ModelInvocation;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};

/// Receives every successful, valid model response once, before its settlement is returned.
/// Observational only: it has no control authority, gets its own copy of the response, must
/// return in bounded time, and its panics are caught and counted.
pub trait ModelObserver: Send + Sync + 'static {
    fn on_model_response(&self, invocation: &ModelInvocation, response: &Response);
}

/// A snapshot of the observer panics a Dispatcher isolated. The counts never alter
/// settlements.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModelObservationFailures {
    /// Panics of [`ModelObserver::on_model_response`]; saturates at `u64::MAX`.
    pub model_response_panics: u64,
}

/// A concurrency-safe saturating counter.
#[derive(Debug, Default)]
pub(crate) struct PanicCounter(AtomicU64);

impl PanicCounter {
    /// Adds one, staying at `u64::MAX` once reached.
    pub(crate) fn record(&self) {
        // The closure always returns Some, so the update cannot fail.
        let _ = self.0.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| Some(n.saturating_add(1)));
    }

    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    #[cfg(test)]
    pub(crate) fn set(&self, n: u64) {
        self.0.store(n, Ordering::Relaxed);
    }
}

/// Calls the observer with a detached copy of `response`; returns whether it panicked (the
/// caller counts). The copy is dropped afterwards, so whatever the observer does to it stays
/// invisible to the settlement.
pub(crate) fn observe(observer: &dyn ModelObserver, invocation: &ModelInvocation, response: &Response) -> bool {
    let copy = response.clone();
    catch_unwind(AssertUnwindSafe(|| observer.on_model_response(invocation, &copy))).is_err()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_saturates() {
        let c = PanicCounter::default();
        c.record();
        assert_eq!(c.get(), 1);
        c.set(u64::MAX - 1);
        c.record();
        c.record();
        assert_eq!(c.get(), u64::MAX);
    }
}
