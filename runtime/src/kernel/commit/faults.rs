//! Fault injection for the simulator: a wrapper that consults a programmable plan before every
//! call and can fail it, lose its acknowledgement, report a crash, or hold it until released.
//!
//! The plan is consulted when the method is invoked (not when the future is first polled), so
//! call indices follow the order in which the engine issued the calls.

use super::port::{
    Activation, Checkpoint, CheckpointKind, CommitError, Committer, EffectBoundary,
    EffectBoundaryKind, Head,
};
use crate::env::BoxFuture;
use crate::kernel::ids::{EffectId, ProcessId};
use futures::channel::oneshot;
use std::future::Future;
use std::sync::{Mutex, PoisonError};

/// The `fault` text of `CommitError::Injected` for `Fault::FailBefore`.
pub const FAULT_FAIL_BEFORE: &str = "fail-before";
/// The `fault` text of `CommitError::Injected` for `Fault::LoseAck`.
pub const FAULT_LOST_ACK: &str = "lost-ack";
/// The `fault` text of `CommitError::Injected` for `Fault::CrashAfter`.
pub const FAULT_CRASH: &str = "crash";

/// Which port method a call is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CommitCallKind {
    Checkpoint(CheckpointKind),
    Effect { effect_id: EffectId, kind: EffectBoundaryKind },
    Activation,
    Load,
}

/// The coordinates of one call, as the plan sees them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitCall {
    /// 0-based, counting every call through this wrapper (loads included).
    pub index: u64,
    pub kind: CommitCallKind,
    pub root: ProcessId,
    /// The commit's sequence; `None` for loads.
    pub sequence: Option<u64>,
}

/// What to do with one call.
#[derive(Debug)]
pub enum Fault {
    /// Forward to the inner committer.
    Pass,
    /// Store nothing; return `Injected { fault: "fail-before" }`.
    FailBefore,
    /// Forward, then replace the answer with `Injected { fault: "lost-ack" }`.
    LoseAck,
    /// Forward, then replace the answer with `Injected { fault: "crash" }`; the simulator drops
    /// the engine on seeing it.
    CrashAfter,
    /// Forward only once the sender fires or is dropped.
    Hold(oneshot::Receiver<()>),
}

/// A programmable fault plan.
pub type FaultPlan = Box<dyn FnMut(&CommitCall) -> Fault + Send>;

struct PlanState {
    plan: Option<FaultPlan>,
    next_index: u64,
}

/// Wraps a committer with a fault plan (no plan = every call passes).
pub struct FaultyCommitter<C: Committer> {
    inner: C,
    state: Mutex<PlanState>,
}

impl<C: Committer> FaultyCommitter<C> {
    pub fn new(inner: C) -> FaultyCommitter<C> {
        FaultyCommitter { inner, state: Mutex::new(PlanState { plan: None, next_index: 0 }) }
    }

    /// The wrapped committer (for oracle access such as `MemoryCommitter::history`).
    pub fn inner(&self) -> &C {
        &self.inner
    }

    /// Replaces the plan; later calls consult it.
    pub fn set_fault_plan(&self, plan: FaultPlan) {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).plan = Some(plan);
    }

    /// Removes the plan; later calls pass.
    pub fn clear_fault_plan(&self) {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).plan = None;
    }

    /// How many calls went through this wrapper.
    pub fn calls(&self) -> u64 {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).next_index
    }

    fn consult(&self, kind: CommitCallKind, root: &ProcessId, sequence: Option<u64>) -> Fault {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let call = CommitCall { index: state.next_index, kind, root: root.clone(), sequence };
        state.next_index += 1;
        match state.plan.as_mut() {
            Some(plan) => plan(&call),
            None => Fault::Pass,
        }
    }
}

fn injected(fault: &str) -> CommitError {
    CommitError::Injected { fault: fault.to_owned() }
}

/// Applies `fault` around the inner call `op`. A lost acknowledgement hides the inner answer
/// whatever it was: the caller learns nothing about the head.
async fn with_fault<T, F, Fut>(fault: Fault, op: F) -> Result<T, CommitError>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<T, CommitError>>,
{
    match fault {
        Fault::Pass => op().await,
        Fault::FailBefore => Err(injected(FAULT_FAIL_BEFORE)),
        Fault::LoseAck => {
            let _ = op().await;
            Err(injected(FAULT_LOST_ACK))
        }
        Fault::CrashAfter => {
            let _ = op().await;
            Err(injected(FAULT_CRASH))
        }
        Fault::Hold(release) => {
            // A dropped sender also ends the delay: holding forever would only hang the run.
            let _ = release.await;
            op().await
        }
    }
}

impl<C: Committer> Committer for FaultyCommitter<C> {
    fn commit_checkpoint(&self, checkpoint: &Checkpoint) -> BoxFuture<'_, Result<(), CommitError>> {
        let fault = self.consult(
            CommitCallKind::Checkpoint(checkpoint.kind),
            &checkpoint.cut.root_id,
            Some(checkpoint.sequence),
        );
        let checkpoint = checkpoint.clone();
        Box::pin(
            async move { with_fault(fault, || self.inner.commit_checkpoint(&checkpoint)).await },
        )
    }

    fn commit_effect(&self, boundary: &EffectBoundary) -> BoxFuture<'_, Result<(), CommitError>> {
        let fault = self.consult(
            CommitCallKind::Effect { effect_id: boundary.effect_id.clone(), kind: boundary.kind },
            &boundary.cut.root_id,
            Some(boundary.sequence),
        );
        let boundary = boundary.clone();
        Box::pin(async move { with_fault(fault, || self.inner.commit_effect(&boundary)).await })
    }

    fn activate_tree(&self, activation: &Activation) -> BoxFuture<'_, Result<(), CommitError>> {
        let fault = self.consult(CommitCallKind::Activation, &activation.cut.root_id, Some(0));
        let activation = activation.clone();
        Box::pin(async move { with_fault(fault, || self.inner.activate_tree(&activation)).await })
    }

    fn load_tree(&self, root: &ProcessId) -> BoxFuture<'_, Result<Option<Head>, CommitError>> {
        let fault = self.consult(CommitCallKind::Load, root, None);
        let root = root.clone();
        Box::pin(async move { with_fault(fault, || self.inner.load_tree(&root)).await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::Digest;
    use crate::kernel::commit::conformance::check_committer;
    use crate::kernel::commit::memory::MemoryCommitter;
    use crate::kernel::commit::port::TreeCut;
    use crate::kernel::ids::IncarnationId;
    use futures::executor::block_on;
    use std::sync::Arc;

    fn root() -> ProcessId {
        ProcessId::parse("process:root").unwrap()
    }
    fn inc(n: u8) -> IncarnationId {
        IncarnationId::from_hex(&format!("{n:032x}")).unwrap()
    }
    fn cut(n: u8, incarnation: u8) -> TreeCut {
        crate::kernel::commit::cut::test_cut(root(), inc(incarnation), Digest([n; 32]), vec![n])
    }
    fn start() -> Checkpoint {
        Checkpoint {
            sequence: 1,
            kind: CheckpointKind::Start,
            previous_digest: None,
            cut: cut(1, 1),
        }
    }
    fn progress(sequence: u64, previous: u8, c: u8, incarnation: u8) -> Checkpoint {
        Checkpoint {
            sequence,
            kind: CheckpointKind::Progress,
            previous_digest: Some(Digest([previous; 32])),
            cut: cut(c, incarnation),
        }
    }
    fn pending(sequence: u64, previous: u8, c: u8) -> EffectBoundary {
        EffectBoundary {
            sequence,
            kind: EffectBoundaryKind::Pending,
            process_id: root(),
            effect_id: EffectId::derive(&root(), 1, 0),
            step_sequence: 1,
            batch_index: 0,
            effect_digest: Digest([200; 32]),
            settlement_digest: None,
            previous_digest: Digest([previous; 32]),
            cut: cut(c, 1),
        }
    }
    fn activation(previous: u8, c: u8, new: u8) -> Activation {
        Activation {
            previous_incarnation: inc(1),
            previous_digest: Digest([previous; 32]),
            new_incarnation: inc(new),
            cut: cut(c, new),
        }
    }
    fn faulty() -> FaultyCommitter<MemoryCommitter> {
        FaultyCommitter::new(MemoryCommitter::new())
    }
    fn injected_as(r: &Result<(), CommitError>, fault: &str) -> bool {
        matches!(r, Err(CommitError::Injected { fault: f }) if f == fault)
    }
    fn head_sequence(f: &FaultyCommitter<MemoryCommitter>) -> Option<u64> {
        f.inner().head(&root()).map(|h| h.sequence)
    }

    #[test]
    fn without_a_plan_the_wrapper_is_transparent() {
        block_on(check_committer(faulty)).unwrap();
        let f = faulty();
        f.set_fault_plan(Box::new(|_| Fault::Pass));
        block_on(f.commit_checkpoint(&start())).unwrap();
        assert_eq!(head_sequence(&f), Some(1));
    }

    #[test]
    fn the_plan_sees_every_call_in_invocation_order() {
        let f = faulty();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        f.set_fault_plan(Box::new(move |call| {
            log.lock().unwrap().push(call.clone());
            Fault::Pass
        }));
        // Invoke both before polling either: indices follow invocation, not polling.
        let a = f.commit_checkpoint(&start());
        let b = f.load_tree(&root());
        block_on(async {
            a.await.unwrap();
            b.await.unwrap();
            f.commit_effect(&pending(2, 1, 2)).await.unwrap();
            f.activate_tree(&activation(2, 3, 2)).await.unwrap();
        });
        let seen = seen.lock().unwrap().clone();
        assert_eq!(
            seen,
            vec![
                CommitCall {
                    index: 0,
                    kind: CommitCallKind::Checkpoint(CheckpointKind::Start),
                    root: root(),
                    sequence: Some(1)
                },
                CommitCall { index: 1, kind: CommitCallKind::Load, root: root(), sequence: None },
                CommitCall {
                    index: 2,
                    kind: CommitCallKind::Effect {
                        effect_id: EffectId::derive(&root(), 1, 0),
                        kind: EffectBoundaryKind::Pending
                    },
                    root: root(),
                    sequence: Some(2),
                },
                CommitCall {
                    index: 3,
                    kind: CommitCallKind::Activation,
                    root: root(),
                    sequence: Some(0)
                },
            ]
        );
        assert_eq!(f.calls(), 4);
    }

    #[test]
    fn fail_before_stores_nothing() {
        let f = faulty();
        f.set_fault_plan(Box::new(|_| Fault::FailBefore));
        assert!(injected_as(&block_on(f.commit_checkpoint(&start())), FAULT_FAIL_BEFORE));
        assert!(matches!(
            block_on(f.load_tree(&root())),
            Err(CommitError::Injected { fault }) if fault == FAULT_FAIL_BEFORE
        ));
        assert_eq!(head_sequence(&f), None);
        f.clear_fault_plan();
        block_on(f.commit_checkpoint(&start())).unwrap();
        assert_eq!(f.inner().history(&root()).len(), 1);
    }

    #[test]
    fn lost_ack_and_crash_store_then_report() {
        const LOSE_ACK: fn() -> Fault = || Fault::LoseAck;
        const CRASH_AFTER: fn() -> Fault = || Fault::CrashAfter;
        for (fault, text) in [(LOSE_ACK, FAULT_LOST_ACK), (CRASH_AFTER, FAULT_CRASH)] {
            let f = faulty();
            f.set_fault_plan(Box::new(move |_| fault()));
            assert!(injected_as(&block_on(f.commit_checkpoint(&start())), text));
            assert_eq!(head_sequence(&f), Some(1), "{text}: the commit was installed");
            f.clear_fault_plan();
            // Reconciling a lost answer: the identical retry is acknowledged while current.
            block_on(f.commit_checkpoint(&start())).unwrap();
            assert_eq!(f.inner().history(&root()).len(), 1);
        }
        // A lost answer hides a rejection too.
        let f = faulty();
        block_on(f.commit_checkpoint(&start())).unwrap();
        f.set_fault_plan(Box::new(|_| Fault::LoseAck));
        assert!(injected_as(&block_on(f.commit_checkpoint(&progress(5, 1, 2, 1))), FAULT_LOST_ACK));
        assert_eq!(head_sequence(&f), Some(1));
    }

    #[test]
    fn plan_can_target_one_call() {
        let f = faulty();
        f.set_fault_plan(Box::new(|call| match call.kind {
            CommitCallKind::Effect { kind: EffectBoundaryKind::Pending, .. } => Fault::FailBefore,
            _ => Fault::Pass,
        }));
        block_on(async {
            f.commit_checkpoint(&start()).await.unwrap();
            assert!(injected_as(&f.commit_effect(&pending(2, 1, 2)).await, FAULT_FAIL_BEFORE));
            f.commit_checkpoint(&progress(2, 1, 3, 1)).await.unwrap();
        });
        assert_eq!(head_sequence(&f), Some(2));
    }

    #[test]
    fn a_held_commit_loses_to_activation() {
        let f = faulty();
        block_on(f.commit_checkpoint(&start())).unwrap();
        let (release, held) = oneshot::channel();
        let mut held = Some(held);
        f.set_fault_plan(Box::new(move |call| {
            if call.kind == CommitCallKind::Checkpoint(CheckpointKind::Progress) {
                if let Some(rx) = held.take() {
                    return Fault::Hold(rx);
                }
            }
            Fault::Pass
        }));
        let original = f.commit_checkpoint(&progress(2, 1, 2, 1));
        let (original, restored) = block_on(futures::future::join(original, async {
            // Another engine restores from the same head while the original commit is held.
            let won = f.activate_tree(&activation(1, 3, 2)).await;
            let next = f.commit_checkpoint(&progress(1, 3, 4, 2)).await;
            let _ = release.send(());
            (won, next)
        }));
        assert_eq!(restored, (Ok(()), Ok(())));
        assert!(matches!(original, Err(CommitError::TreeIncarnationConflict { .. })));
        let head = f.inner().head(&root()).unwrap();
        assert_eq!((head.sequence, head.cut.incarnation), (1, inc(2)));
        assert!(head.cut.digest == Digest([4; 32]));
    }

    #[test]
    fn a_dropped_release_ends_the_hold() {
        let f = faulty();
        let (release, held) = oneshot::channel::<()>();
        let mut held = Some(held);
        f.set_fault_plan(Box::new(move |_| held.take().map_or(Fault::Pass, Fault::Hold)));
        drop(release);
        block_on(f.commit_checkpoint(&start())).unwrap();
        assert_eq!(head_sequence(&f), Some(1));
    }
}
