//! Quiet, accounted panics inside simulated runs.
//!
//! A simulated fault that panics on purpose (a tool bug) calls [`simulated_panic`], which
//! unwinds without running the panic hook: nothing is printed, no backtrace is captured. Every
//! *other* panic on a thread that is inside a run ([`capture`]) goes to the hook this module
//! installs, which records its message and location for the run instead of printing it, so a
//! panic the runtime swallows (a harness or runtime bug caught at a task boundary) still fails
//! the run by name and cannot drown the progress bar. Panics outside runs reach the hook that
//! was installed before (normally the default one, printing as usual).
//!
//! Thread safety: the hook is process-wide and installed once; what it records is thread-local,
//! and every run executes on one thread (madsim runs its tasks on the calling thread), so
//! campaign workers never see each other's panics and the record is in the run's own order.

use std::cell::RefCell;
use std::panic::{self, PanicHookInfo};
use std::sync::Once;

use crate::world::panic_message;

/// One panic seen inside a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PanicRecord {
    pub message: String,
    /// `file:line:column`, when the panic had a location.
    pub location: Option<String>,
}

impl PanicRecord {
    /// `message (at file:line:col)`.
    pub fn describe(&self) -> String {
        match &self.location {
            Some(at) => format!("{} (at {at})", self.message),
            None => self.message.clone(),
        }
    }
}

thread_local! {
    /// `Some`: this thread is inside a run and panics are recorded here.
    static RECORDED: RefCell<Option<Vec<PanicRecord>>> = const { RefCell::new(None) };
}

static INSTALL: Once = Once::new();

/// Installs the recording hook in front of the current one (idempotent).
pub fn install_hook() {
    INSTALL.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !record(info) {
                previous(info);
            }
        }));
    });
}

/// Records `info` if this thread is inside a run; `false` otherwise (or if the record is busy).
fn record(info: &PanicHookInfo<'_>) -> bool {
    let entry = PanicRecord {
        message: panic_message(info.payload()),
        location: info
            .location()
            .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column())),
    };
    RECORDED
        .try_with(|cell| match cell.try_borrow_mut() {
            Ok(mut slot) => match slot.as_mut() {
                Some(list) => {
                    list.push(entry);
                    true
                }
                None => false,
            },
            Err(_) => false,
        })
        .unwrap_or(false)
}

/// Runs `body` as a run on this thread: panics it raises (caught or not) through the hook are
/// recorded and returned, not printed. Nests: an inner run keeps its own record.
pub fn capture<T>(body: impl FnOnce() -> T) -> (T, Vec<PanicRecord>) {
    install_hook();
    /// Puts the outer run's record back, also when `body` unwinds.
    struct Restore(Option<Vec<PanicRecord>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let outer = self.0.take();
            RECORDED.with(|cell| *cell.borrow_mut() = outer);
        }
    }
    let restore = Restore(RECORDED.with(|cell| cell.replace(Some(Vec::new()))));
    let value = body();
    let mine = RECORDED.with(|cell| cell.borrow_mut().take()).unwrap_or_default();
    drop(restore);
    (value, mine)
}

/// Forgets the last recorded panic of this run if its message is `message`: a panic the
/// harness caught and reported under its own name (a tool needing Tokio's reactor) is not
/// also an unexpected one.
pub fn forget_last(message: &str) {
    let _ = RECORDED.try_with(|cell| {
        if let Ok(mut slot) = cell.try_borrow_mut() {
            if let Some(list) = slot.as_mut() {
                if list.last().is_some_and(|p| p.message == message) {
                    list.pop();
                }
            }
        }
    });
}

/// Panics on purpose (a simulated fault) without running the hook: silent and cheap, and
/// never mistaken for a bug. The payload is the message, like `panic!("{message}")`'s.
pub fn simulated_panic(message: String) -> ! {
    panic::resume_unwind(Box::new(message))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::panic::{catch_unwind, AssertUnwindSafe};

    #[test]
    fn panics_inside_a_run_are_recorded_with_their_location() {
        let (caught, seen) = capture(|| catch_unwind(|| panic!("harness bug {}", 7)).is_err());
        assert!(caught);
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].message, "harness bug 7");
        assert!(
            seen[0].location.as_deref().unwrap_or("").starts_with("sim/src/panics.rs:"),
            "{seen:?}"
        );
        assert!(seen[0].describe().starts_with("harness bug 7 (at sim/src/panics.rs:"));
    }

    #[test]
    fn simulated_panics_unwind_without_a_record() {
        let (payload, seen) = capture(|| {
            catch_unwind(AssertUnwindSafe(|| simulated_panic("tool bug".to_string())))
                .err()
                .map(|p| panic_message(p.as_ref()))
        });
        assert_eq!(payload.as_deref(), Some("tool bug"));
        assert!(seen.is_empty(), "{seen:?}");
    }

    #[test]
    fn nested_runs_keep_their_own_records() {
        let (inner, outer) = capture(|| {
            let _ = catch_unwind(|| panic!("outer one"));
            let (_, inner) = capture(|| catch_unwind(|| panic!("inner")).is_err());
            let _ = catch_unwind(|| panic!("outer two"));
            inner
        });
        let messages = |v: &[PanicRecord]| v.iter().map(|p| p.message.clone()).collect::<Vec<_>>();
        assert_eq!(messages(&inner), ["inner"]);
        assert_eq!(messages(&outer), ["outer one", "outer two"]);
    }

    #[test]
    fn a_panic_escaping_a_run_leaves_the_thread_outside_runs() {
        let escaped = catch_unwind(|| capture(|| panic!("escapes")));
        assert!(escaped.is_err());
        assert!(RECORDED.with(|cell| cell.borrow().is_none()));
    }
}
