//! A runtime-agnostic cancellation token.
//!
//! Cancellation is cooperative: the owner cancels, the work observes it (by polling
//! [`CancelToken::is_cancelled`] or awaiting [`CancelToken::cancelled`]). Cancelling a token
//! cancels every child derived from it, never the parent.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

#[derive(Clone, Default)]
pub struct CancelToken {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    cancelled: bool,
    wakers: Vec<Waker>,
    children: Vec<CancelToken>,
}

impl CancelToken {
    pub fn new() -> CancelToken {
        CancelToken::default()
    }

    /// A token cancelled whenever `self` is (and independently cancellable).
    pub fn child(&self) -> CancelToken {
        let child = CancelToken::new();
        let mut state = lock(&self.inner.state);
        if state.cancelled {
            drop(state);
            child.cancel();
        } else {
            state.children.retain(|c| !c.is_cancelled());
            state.children.push(child.clone());
        }
        child
    }

    /// Cancels this token and all its descendants. Idempotent.
    pub fn cancel(&self) {
        let (wakers, children) = {
            let mut state = lock(&self.inner.state);
            if state.cancelled {
                return;
            }
            state.cancelled = true;
            (std::mem::take(&mut state.wakers), std::mem::take(&mut state.children))
        };
        for w in wakers {
            w.wake();
        }
        for c in children {
            c.cancel();
        }
    }

    pub fn is_cancelled(&self) -> bool {
        lock(&self.inner.state).cancelled
    }

    /// Resolves once the token is cancelled.
    pub fn cancelled(&self) -> Cancelled {
        Cancelled { token: self.clone() }
    }
}

impl std::fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CancelToken").field("cancelled", &self.is_cancelled()).finish()
    }
}

/// Future returned by [`CancelToken::cancelled`].
pub struct Cancelled {
    token: CancelToken,
}

impl Future for Cancelled {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = lock(&self.token.inner.state);
        if state.cancelled {
            Poll::Ready(())
        } else {
            if !state.wakers.iter().any(|w| w.will_wake(cx.waker())) {
                state.wakers.push(cx.waker().clone());
            }
            Poll::Pending
        }
    }
}

// A poisoned lock only means another holder panicked; the boolean state stays meaningful.
fn lock(m: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancel_propagates_to_children_not_parents() {
        let parent = CancelToken::new();
        let child = parent.child();
        let grandchild = child.child();
        child.cancel();
        assert!(child.is_cancelled() && grandchild.is_cancelled());
        assert!(!parent.is_cancelled());
        parent.cancel();
        assert!(parent.child().is_cancelled(), "children of a cancelled token start cancelled");
    }

    #[test]
    fn cancelled_future_resolves() {
        let t = CancelToken::new();
        let t2 = t.clone();
        t2.cancel();
        futures::executor::block_on(t.cancelled());
    }
}
