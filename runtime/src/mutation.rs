//! Deliberately broken behaviors, compiled only with the `mutations` feature.
//!
//! Each [`Mutation`] names one rule of the kernel or the Interaction and, while active, breaks
//! it in the real code path (the hooks are `#[cfg(feature = "mutations")]` blocks at the
//! place where the rule is kept). The simulator's invariants are proven live by running a
//! campaign with one mutation active and expecting it to fail.
//!
//! Activation is process-global ([`set`]), so every worker of a campaign sees the same
//! mutation; a thread-local override ([`scoped`]) lets unit tests run a mutation on their own
//! thread without disturbing tests that run in parallel. Run one mutation at a time.

use std::cell::Cell;
use std::sync::atomic::{AtomicU8, Ordering};

/// One deliberately broken rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mutation {
    /// The Engine driver acknowledges an Effect's `pending` boundary to the owner before the
    /// committer stored it, so the dispatch starts before its pending record is durable.
    DispatchBeforePending,
    /// The Interaction parent folds a tool batch's results in the order the children
    /// completed instead of call order.
    FoldInCompletionOrder,
    /// On restore, an Unknown dispatcher Effect found in the cut is dispatched again (its
    /// outcome taking the host's `resolved` boundary) instead of waiting for the host.
    RedispatchUnknown,
    /// An applied steer stays pending and is applied a second time at the next model
    /// boundary (and suppresses completion once more).
    SteerAppliedTwice,
    /// Compaction retires a finished child even when it ended with unresolved Unknown
    /// Effects, so those Unknowns leave the cut without a resolution.
    DropUnknownOnCompaction,
    /// Mailbox compaction also drops consumed external Signals, so a redelivery of one is
    /// admitted again instead of being a duplicate (or a conflict).
    DropExternalOnCompaction,
    /// A command addressed to a retired child is refused as `NotFound`, as for an id that
    /// never existed, instead of `ProcessFinished`.
    RetiredChildNotFound,
    /// An answered budget extension is added to the run's grants twice, so its limits grow
    /// by more than the host granted.
    BudgetGrantedTwice,
}

impl Mutation {
    /// Every mutation, in declaration order.
    pub const ALL: [Mutation; 8] = [
        Mutation::DispatchBeforePending,
        Mutation::FoldInCompletionOrder,
        Mutation::RedispatchUnknown,
        Mutation::SteerAppliedTwice,
        Mutation::DropUnknownOnCompaction,
        Mutation::DropExternalOnCompaction,
        Mutation::RetiredChildNotFound,
        Mutation::BudgetGrantedTwice,
    ];

    /// The stable snake_case name (for CLIs and reports).
    pub fn name(self) -> &'static str {
        match self {
            Mutation::DispatchBeforePending => "dispatch_before_pending",
            Mutation::FoldInCompletionOrder => "fold_in_completion_order",
            Mutation::RedispatchUnknown => "redispatch_unknown",
            Mutation::SteerAppliedTwice => "steer_applied_twice",
            Mutation::DropUnknownOnCompaction => "drop_unknown_on_compaction",
            Mutation::DropExternalOnCompaction => "drop_external_on_compaction",
            Mutation::RetiredChildNotFound => "retired_child_not_found",
            Mutation::BudgetGrantedTwice => "budget_granted_twice",
        }
    }

    /// The mutation named `name`, if any.
    pub fn from_name(name: &str) -> Option<Mutation> {
        Mutation::ALL.into_iter().find(|m| m.name() == name)
    }

    fn code(self) -> u8 {
        match self {
            Mutation::DispatchBeforePending => 1,
            Mutation::FoldInCompletionOrder => 2,
            Mutation::RedispatchUnknown => 3,
            Mutation::SteerAppliedTwice => 4,
            Mutation::DropUnknownOnCompaction => 5,
            Mutation::DropExternalOnCompaction => 6,
            Mutation::RetiredChildNotFound => 7,
            Mutation::BudgetGrantedTwice => 8,
        }
    }

    fn from_code(code: u8) -> Option<Mutation> {
        Mutation::ALL.into_iter().find(|m| m.code() == code)
    }
}

/// 0 = none; otherwise [`Mutation::code`].
static ACTIVE: AtomicU8 = AtomicU8::new(0);

thread_local! {
    /// `Some(code)` overrides [`ACTIVE`] on this thread (0 = explicitly none).
    static OVERRIDE: Cell<Option<u8>> = const { Cell::new(None) };
}

fn code_of(m: Option<Mutation>) -> u8 {
    m.map_or(0, Mutation::code)
}

/// Activates `m` for the whole process (`None` deactivates).
pub fn set(m: Option<Mutation>) {
    ACTIVE.store(code_of(m), Ordering::SeqCst);
}

/// The mutation in effect on this thread.
pub fn current() -> Option<Mutation> {
    let code = OVERRIDE.with(Cell::get).unwrap_or_else(|| ACTIVE.load(Ordering::SeqCst));
    Mutation::from_code(code)
}

/// Whether `m` is in effect on this thread (the hooks ask this).
pub fn active(m: Mutation) -> bool {
    current() == Some(m)
}

/// Runs `f` with `m` in effect on this thread only (overriding [`set`]), restoring the
/// previous override afterwards, even if `f` panics.
pub fn scoped<T>(m: Option<Mutation>, f: impl FnOnce() -> T) -> T {
    struct Restore(Option<u8>);
    impl Drop for Restore {
        fn drop(&mut self) {
            OVERRIDE.with(|o| o.set(self.0));
        }
    }
    let _restore = Restore(OVERRIDE.with(|o| o.replace(Some(code_of(m)))));
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_distinct() {
        for m in Mutation::ALL {
            assert_eq!(Mutation::from_name(m.name()), Some(m));
            assert_eq!(Mutation::from_code(m.code()), Some(m));
        }
        assert_eq!(Mutation::from_name("none"), None);
        assert_eq!(Mutation::from_code(0), None);
    }

    #[test]
    fn a_scope_overrides_the_global_setting_on_its_thread_only() {
        // The global stays untouched here: tests of this binary run in parallel.
        let outside = current();
        scoped(Some(Mutation::SteerAppliedTwice), || {
            assert!(active(Mutation::SteerAppliedTwice));
            assert!(!active(Mutation::RedispatchUnknown));
            scoped(None, || assert_eq!(current(), None));
            assert!(active(Mutation::SteerAppliedTwice));
        });
        assert_eq!(current(), outside);
        let caught = std::panic::catch_unwind(|| scoped(Some(Mutation::RedispatchUnknown), || panic!("inside")));
        assert!(caught.is_err());
        assert_eq!(current(), outside, "a panic restores the override");
    }
}
