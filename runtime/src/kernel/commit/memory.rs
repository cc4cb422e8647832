//! The in-memory store: a [`CommitIndex`] behind a lock and nothing
//! else. The rules (and their order of checks) live in `index`; a decided commit is installed
//! at once. Failed calls record nothing.

use super::index::{CommitIndex, Decision};
use super::port::{
    Activation, Checkpoint, CheckpointKind, CommitError, CommitRequest, Committer, EffectBoundary,
    Head,
};
use crate::env::BoxFuture;
use crate::kernel::ids::ProcessId;
use std::collections::BTreeSet;
use std::sync::{Mutex, MutexGuard, PoisonError};

pub use super::index::{CommitRecord, CommitRecordKind};

/// The in-memory reference committer. Thread-safe and deterministic.
#[derive(Default)]
pub struct MemoryCommitter {
    index: Mutex<CommitIndex>,
}

impl MemoryCommitter {
    pub fn new() -> MemoryCommitter {
        MemoryCommitter::default()
    }

    /// A committer that ignores one rule (to prove the conformance suite notices).
    #[cfg(test)]
    fn skipping(rule: super::index::Rule) -> MemoryCommitter {
        MemoryCommitter { index: Mutex::new(CommitIndex::skipping(rule)) }
    }

    /// Every installed commit of `root`, in installation order.
    pub fn history(&self, root: &ProcessId) -> Vec<CommitRecord> {
        self.lock().history(root).to_vec()
    }

    /// The current head, synchronously (for oracles; engines use `load_tree`).
    pub fn head(&self, root: &ProcessId) -> Option<Head> {
        self.lock().head(root).cloned()
    }

    /// The roots the store knows, in order.
    pub fn roots(&self) -> Vec<ProcessId> {
        self.lock().roots()
    }

    // A panic elsewhere cannot leave a tree half-updated: the index mutates only in `install`,
    // after every check, so a poisoned lock still guards consistent state.
    fn lock(&self) -> MutexGuard<'_, CommitIndex> {
        self.index.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn apply(
        &self,
        decide: impl FnOnce(&CommitIndex) -> Result<Decision, CommitError>,
    ) -> Result<(), CommitError> {
        let mut index = self.lock();
        if let Decision::Install(installation) = decide(&index)? {
            index.install(installation);
        }
        Ok(())
    }
}

impl Committer for MemoryCommitter {
    fn commit_checkpoint(&self, checkpoint: &Checkpoint) -> BoxFuture<'_, Result<(), CommitError>> {
        let checkpoint = checkpoint.clone();
        Box::pin(async move { self.apply(|index| index.decide_checkpoint(&checkpoint)) })
    }
    fn commit_effect(&self, boundary: &EffectBoundary) -> BoxFuture<'_, Result<(), CommitError>> {
        let boundary = boundary.clone();
        Box::pin(async move { self.apply(|index| index.decide_effect(&boundary)) })
    }
    fn activate_tree(&self, activation: &Activation) -> BoxFuture<'_, Result<(), CommitError>> {
        let activation = activation.clone();
        Box::pin(async move { self.apply(|index| index.decide_activation(&activation)) })
    }
    fn load_tree(&self, root: &ProcessId) -> BoxFuture<'_, Result<Option<Head>, CommitError>> {
        let root = root.clone();
        Box::pin(async move { Ok(self.head(&root)) })
    }
    /// All or nothing: every commit of the chain decided first, then all installed.
    fn commit_chain<'a>(&'a self, chain: &'a [CommitRequest]) -> BoxFuture<'a, Result<(), CommitError>> {
        Box::pin(async move {
            let mut index = self.lock();
            for (_, installation) in index.decide_chain(chain)? {
                index.install(installation);
            }
            Ok(())
        })
    }
}

/// Checks one tree's history against the store invariants an oracle relies on: it opens with a
/// start at sequence 1, sequences are consecutive within an incarnation, activation resets to 0
/// under a new writer, identities never repeat, and each Effect has at most one boundary of
/// each kind over the tree's whole life.
pub fn audit_history(history: &[CommitRecord]) -> Result<(), String> {
    let mut identities = BTreeSet::new();
    let mut boundaries = BTreeSet::new();
    let mut last: Option<&CommitRecord> = None;
    for (index, record) in history.iter().enumerate() {
        if !identities.insert(record.identity.as_str()) {
            return Err(format!("record {index}: identity {} installed twice", record.identity));
        }
        match (&record.kind, last) {
            (CommitRecordKind::Checkpoint(CheckpointKind::Start), None) => {
                if record.sequence != 1 {
                    return Err(format!("record {index}: start at sequence {}", record.sequence));
                }
            }
            (_, None) => return Err(format!("record {index}: history does not open with a start")),
            (CommitRecordKind::Checkpoint(CheckpointKind::Start), Some(_)) => {
                return Err(format!("record {index}: a second start"));
            }
            (CommitRecordKind::Activation { previous_incarnation }, Some(prev)) => {
                if record.sequence != 0 {
                    return Err(format!(
                        "record {index}: activation at sequence {}",
                        record.sequence
                    ));
                }
                if *previous_incarnation != prev.incarnation
                    || record.incarnation == prev.incarnation
                {
                    return Err(format!("record {index}: activation does not replace the writer"));
                }
            }
            (_, Some(prev)) => {
                if record.incarnation != prev.incarnation {
                    return Err(format!("record {index}: writer changed without activation"));
                }
                if prev.sequence.checked_add(1) != Some(record.sequence) {
                    return Err(format!(
                        "record {index}: sequence {} after {}",
                        record.sequence, prev.sequence
                    ));
                }
            }
        }
        if let CommitRecordKind::Effect { effect_id, kind, .. } = &record.kind {
            if !boundaries.insert((effect_id.clone(), *kind)) {
                return Err(format!(
                    "record {index}: second {} boundary for {effect_id}",
                    kind.as_str()
                ));
            }
        }
        last = Some(record);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::Digest;
    use crate::kernel::commit::conformance::check_committer;
    use crate::kernel::commit::index::Rule;
    use crate::kernel::commit::{EffectBoundaryKind, TreeCut};
    use crate::kernel::ids::{EffectId, IncarnationId};
    use futures::executor::block_on;

    fn root() -> ProcessId {
        ProcessId::parse("process:root").unwrap()
    }
    fn inc(n: u8) -> IncarnationId {
        IncarnationId::from_hex(&format!("{n:032x}")).unwrap()
    }
    fn cut(n: u8, incarnation: u8) -> TreeCut {
        crate::kernel::commit::cut::test_cut(root(), inc(incarnation), Digest([n; 32]), vec![n; 4])
    }
    fn start(c: u8) -> Checkpoint {
        Checkpoint {
            sequence: 1,
            kind: CheckpointKind::Start,
            previous_digest: None,
            cut: cut(c, 1),
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
    fn boundary(
        sequence: u64,
        kind: EffectBoundaryKind,
        previous: u8,
        c: u8,
        incarnation: u8,
    ) -> EffectBoundary {
        EffectBoundary {
            sequence,
            kind,
            process_id: root(),
            effect_id: EffectId::derive(&root(), 1, 0),
            step_sequence: 1,
            batch_index: 0,
            effect_digest: Digest([200; 32]),
            settlement_digest: (kind != EffectBoundaryKind::Pending).then_some(Digest([201; 32])),
            previous_digest: Digest([previous; 32]),
            cut: cut(c, incarnation),
        }
    }

    #[test]
    fn memory_committer_passes_conformance() {
        block_on(check_committer(MemoryCommitter::new)).unwrap();
    }

    /// Handles of one in-memory store, as the store fault suite opens them.
    struct MemoryFixture(std::sync::Arc<MemoryCommitter>);

    impl crate::kernel::commit::conformance::faults::StoreFixture for MemoryFixture {
        type Store = std::sync::Arc<MemoryCommitter>;
        fn name(&self) -> &'static str {
            "memory"
        }
        fn supports(&self, fault: Fault) -> Support {
            match fault {
                Fault::SecondWriter | Fault::TakeoverRace => Support::Applies,
                Fault::LockDeleted => Support::NotApplicable("no lock: handles of one store in one process"),
                Fault::ForeignFile => Support::NotApplicable("no file: the store lives in the process's memory"),
                _ => Support::NotApplicable("nothing outlives the process: no disk, no reopen"),
            }
        }
        fn exclusion(&self) -> Exclusion {
            Exclusion::Fenced
        }
        async fn open(&self) -> Result<Self::Store, OpenFailure> {
            Ok(self.0.clone())
        }
    }

    use crate::kernel::commit::conformance::faults::{check_faults, Exclusion, Fault, OpenFailure, Support};

    #[test]
    fn the_memory_store_passes_the_store_fault_suite() {
        let report = block_on(check_faults(&MemoryFixture(std::sync::Arc::new(MemoryCommitter::new())))).unwrap();
        assert_eq!(report.ran, [Fault::SecondWriter, Fault::TakeoverRace]);
    }

    #[test]
    fn an_index_seeded_with_one_head_and_fact_decides_like_the_whole_history() {
        use crate::kernel::commit::{CommitIndex, Decision};
        let m = MemoryCommitter::new();
        block_on(async {
            m.commit_checkpoint(&start(1)).await.unwrap();
            m.commit_checkpoint(&progress(2, 1, 2, 1)).await.unwrap();
        });
        let head = m.head(&root());
        let seeded = |identity: &str, content: Digest| {
            CommitIndex::for_tree(root(), head.clone(), [(identity.to_owned(), content)])
        };
        let current = progress(2, 1, 2, 1);
        let index = seeded(&current.identity(), current.content_digest());
        assert_eq!(index.decide_checkpoint(&current), Ok(Decision::Current));
        let mut other = current.clone();
        other.kind = CheckpointKind::Parked;
        assert!(matches!(index.decide_checkpoint(&other), Err(CommitError::CommitConflict { .. })));
        let next = progress(3, 2, 3, 1);
        let index = CommitIndex::for_tree(root(), head.clone(), []);
        assert!(matches!(index.decide_checkpoint(&next), Ok(Decision::Install(_))));
        assert!(matches!(
            index.decide_checkpoint(&progress(3, 2, 3, 9)),
            Err(CommitError::TreeIncarnationConflict { .. })
        ));
        // No head: a start installs, an advance is fenced.
        let empty = CommitIndex::for_tree(root(), None, []);
        assert!(matches!(empty.decide_checkpoint(&start(1)), Ok(Decision::Install(_))));
        assert!(matches!(empty.decide_checkpoint(&next), Err(CommitError::TreeIncarnationConflict { .. })));
    }

    #[test]
    fn conformance_catches_each_broken_rule() {
        for rule in [
            Rule::RetryOnlyWhileCurrent,
            Rule::ContentMatches,
            Rule::Fencing,
            Rule::ConsecutiveSequence,
            Rule::PreviousMatchesHead,
            Rule::StartNeedsNoHead,
        ] {
            let broken = || MemoryCommitter::skipping(rule);
            assert!(block_on(check_committer(broken)).is_err(), "suite missed {rule:?}");
        }
    }

    #[test]
    fn history_lists_installed_commits_in_order() {
        let m = MemoryCommitter::new();
        block_on(async {
            m.commit_checkpoint(&start(1)).await.unwrap();
            m.commit_checkpoint(&start(1)).await.unwrap(); // retry: acknowledged, not installed
            m.commit_effect(&boundary(2, EffectBoundaryKind::Pending, 1, 2, 1)).await.unwrap();
            m.commit_effect(&boundary(3, EffectBoundaryKind::Settled, 2, 3, 1)).await.unwrap();
            let a = Activation {
                previous_incarnation: inc(1),
                previous_digest: Digest([3; 32]),
                new_incarnation: inc(2),
                cut: cut(4, 2),
            };
            m.activate_tree(&a).await.unwrap();
            m.commit_checkpoint(&progress(1, 4, 5, 2)).await.unwrap();
        });
        let h = m.history(&root());
        let kinds: Vec<_> = h.iter().map(|r| (r.sequence, r.kind.clone())).collect();
        let effect = |kind| CommitRecordKind::Effect {
            process_id: root(),
            effect_id: EffectId::derive(&root(), 1, 0),
            kind,
        };
        assert_eq!(
            kinds,
            vec![
                (1, CommitRecordKind::Checkpoint(CheckpointKind::Start)),
                (2, effect(EffectBoundaryKind::Pending)),
                (3, effect(EffectBoundaryKind::Settled)),
                (0, CommitRecordKind::Activation { previous_incarnation: inc(1) }),
                (1, CommitRecordKind::Checkpoint(CheckpointKind::Progress)),
            ]
        );
        assert_eq!(h[0].identity, start(1).identity());
        assert_eq!(h[3].incarnation, inc(2));
        assert!(h[4].cut_digest == Digest([5; 32]));
        audit_history(&h).unwrap();
        assert_eq!(m.roots(), vec![root()]);
        assert!(m.history(&ProcessId::parse("process:other").unwrap()).is_empty());
    }

    #[test]
    fn a_failed_call_records_nothing() {
        let m = MemoryCommitter::new();
        block_on(async {
            // No head yet.
            assert!(m.commit_checkpoint(&progress(2, 1, 2, 1)).await.is_err());
            m.commit_checkpoint(&start(1)).await.unwrap();
            // Wrong previous digest.
            assert!(m.commit_checkpoint(&progress(2, 9, 2, 1)).await.is_err());
            // Same identity, now well-formed: the failed attempt left no fact behind.
            m.commit_checkpoint(&progress(2, 1, 3, 1)).await.unwrap();
        });
        assert_eq!(m.history(&root()).len(), 2);
    }

    #[test]
    fn sequence_never_wraps() {
        let m = MemoryCommitter::new();
        m.lock().force_head(Head { cut: cut(1, 1), sequence: u64::MAX });
        block_on(async {
            for sequence in [0, 1, u64::MAX] {
                let r = m.commit_checkpoint(&progress(sequence, 1, 2, 1)).await;
                assert!(r.is_err(), "sequence {sequence} accepted after u64::MAX");
                let r = m
                    .commit_effect(&boundary(sequence, EffectBoundaryKind::Pending, 1, 2, 1))
                    .await;
                assert!(r.is_err(), "boundary sequence {sequence} accepted after u64::MAX");
            }
        });
        assert_eq!(m.head(&root()).unwrap().sequence, u64::MAX);
    }

    #[test]
    fn audit_rejects_broken_histories() {
        let rec = |identity: &str, kind, sequence, incarnation| CommitRecord {
            identity: identity.to_owned(),
            kind,
            sequence,
            incarnation: inc(incarnation),
            cut_digest: Digest([1; 32]),
        };
        let start = || rec("s", CommitRecordKind::Checkpoint(CheckpointKind::Start), 1, 1);
        let progress = |id: &str, seq, i| {
            rec(id, CommitRecordKind::Checkpoint(CheckpointKind::Progress), seq, i)
        };
        let pending = |id: &str, seq, i| {
            rec(
                id,
                CommitRecordKind::Effect {
                    process_id: root(),
                    effect_id: EffectId::derive(&root(), 1, 0),
                    kind: EffectBoundaryKind::Pending,
                },
                seq,
                i,
            )
        };
        let activation = |id: &str, from, to| {
            rec(id, CommitRecordKind::Activation { previous_incarnation: inc(from) }, 0, to)
        };
        assert!(audit_history(&[]).is_ok());
        assert!(audit_history(&[
            start(),
            progress("p", 2, 1),
            activation("a", 1, 2),
            progress("q", 1, 2)
        ])
        .is_ok());
        assert!(audit_history(&[progress("p", 1, 1)]).is_err(), "no start");
        assert!(audit_history(&[rec(
            "s",
            CommitRecordKind::Checkpoint(CheckpointKind::Start),
            2,
            1
        )])
        .is_err());
        assert!(audit_history(&[start(), progress("p", 3, 1)]).is_err(), "gap");
        assert!(audit_history(&[start(), progress("p", 2, 2)]).is_err(), "writer change");
        assert!(audit_history(&[start(), progress("s", 2, 1)]).is_err(), "identity twice");
        assert!(audit_history(&[start(), start()]).is_err());
        assert!(audit_history(&[start(), activation("a", 2, 3)]).is_err(), "wrong previous writer");
        assert!(audit_history(&[start(), activation("a", 1, 1)]).is_err(), "same writer");
        assert!(
            audit_history(&[
                start(),
                pending("e1", 2, 1),
                activation("a", 1, 2),
                pending("e2", 1, 2)
            ])
            .is_err(),
            "second pending across incarnations"
        );
    }
}
