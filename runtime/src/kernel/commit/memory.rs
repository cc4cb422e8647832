//! The reference store (spec kernel.md §9.4): per root a head with its sequence, a map
//! identity → content digest, and the ordered list of installed commits, all kept forever.
//!
//! Order of checks for an advance (checkpoint other than start, effect boundary): fencing on a
//! missing head or another incarnation first, then the recorded fact (identical and still
//! current → acknowledged, otherwise `CommitConflict`), then the sequence and previous-digest
//! compare-and-advance. Failed calls record nothing.

use super::port::{
    Activation, Checkpoint, CheckpointKind, CommitError, Committer, EffectBoundary,
    EffectBoundaryKind, Head, TreeCut,
};
use crate::env::BoxFuture;
use crate::json::Digest;
use crate::kernel::ids::{EffectId, IncarnationId, ProcessId};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// What an installed commit was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CommitRecordKind {
    Checkpoint(CheckpointKind),
    Effect { process_id: ProcessId, effect_id: EffectId, kind: EffectBoundaryKind },
    Activation { previous_incarnation: IncarnationId },
}

/// One installed commit. Identical retries are acknowledged but install nothing, so they do not
/// appear; the history is exactly the sequence of heads the store held.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitRecord {
    pub identity: String,
    pub kind: CommitRecordKind,
    pub sequence: u64,
    /// The writer incarnation of the installed head.
    pub incarnation: IncarnationId,
    pub cut_digest: Digest,
}

#[derive(Default)]
struct TreeRecord {
    head: Option<Head>,
    facts: BTreeMap<String, Digest>,
    history: Vec<CommitRecord>,
}

/// Rules a test build can switch off to prove the conformance suite catches each one.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Rule {
    /// An identical retry is acknowledged only while it is still the head.
    RetryOnlyWhileCurrent,
    /// Same identity with different content conflicts.
    ContentMatches,
    /// Commits must come from the head's incarnation.
    Fencing,
    /// Sequences advance by exactly one.
    ConsecutiveSequence,
    /// The previous digest must equal the head.
    PreviousMatchesHead,
    /// A start never replaces an existing head.
    StartNeedsNoHead,
}

/// The in-memory reference committer. Thread-safe and deterministic.
#[derive(Default)]
pub struct MemoryCommitter {
    trees: Mutex<BTreeMap<ProcessId, TreeRecord>>,
    #[cfg(test)]
    skipped: Option<Rule>,
}

impl MemoryCommitter {
    pub fn new() -> MemoryCommitter {
        MemoryCommitter::default()
    }

    /// Every installed commit of `root`, in installation order.
    pub fn history(&self, root: &ProcessId) -> Vec<CommitRecord> {
        self.lock().get(root).map(|t| t.history.clone()).unwrap_or_default()
    }

    /// The current head, synchronously (for oracles; engines use `load_tree`).
    pub fn head(&self, root: &ProcessId) -> Option<Head> {
        self.lock().get(root).and_then(|t| t.head.clone())
    }

    /// The roots the store knows, in order.
    pub fn roots(&self) -> Vec<ProcessId> {
        self.lock().keys().cloned().collect()
    }

    // A panic elsewhere cannot leave a tree half-updated: every mutation below happens after
    // all checks, so a poisoned lock still guards consistent state.
    fn lock(&self) -> MutexGuard<'_, BTreeMap<ProcessId, TreeRecord>> {
        self.trees.lock().unwrap_or_else(PoisonError::into_inner)
    }

    #[cfg(test)]
    fn skips(&self, rule: Rule) -> bool {
        self.skipped == Some(rule)
    }
    #[cfg(not(test))]
    fn skips(&self, _rule: Rule) -> bool {
        false
    }

    fn apply_checkpoint(&self, c: &Checkpoint) -> Result<(), CommitError> {
        c.validate()?;
        let kind = CommitRecordKind::Checkpoint(c.kind);
        if c.kind != CheckpointKind::Start {
            return self.advance(
                c.identity(),
                c.content_digest(),
                c.sequence,
                c.previous_digest,
                &c.cut,
                kind,
            );
        }
        let identity = c.identity();
        let content = c.content_digest();
        let mut trees = self.lock();
        let tree = trees.entry(c.cut.root_id.clone()).or_default();
        if let Some(&fact) = tree.facts.get(&identity) {
            let current =
                tree.head.as_ref().is_some_and(|h| h.sequence == 1 && h.cut.same_cut(&c.cut));
            return self.acknowledge_fact(&identity, fact, content, current);
        }
        if tree.head.is_some() && !self.skips(Rule::StartNeedsNoHead) {
            return Err(CommitError::fence("start over an existing head"));
        }
        install(tree, identity, content, kind, 1, &c.cut);
        Ok(())
    }

    fn apply_effect(&self, b: &EffectBoundary) -> Result<(), CommitError> {
        b.validate()?;
        let kind = CommitRecordKind::Effect {
            process_id: b.process_id.clone(),
            effect_id: b.effect_id.clone(),
            kind: b.kind,
        };
        self.advance(
            b.identity(),
            b.content_digest(),
            b.sequence,
            Some(b.previous_digest),
            &b.cut,
            kind,
        )
    }

    fn advance(
        &self,
        identity: String,
        content: Digest,
        sequence: u64,
        previous: Option<Digest>,
        cut: &TreeCut,
        kind: CommitRecordKind,
    ) -> Result<(), CommitError> {
        let mut trees = self.lock();
        let Some(tree) = trees.get_mut(&cut.root_id) else {
            return Err(CommitError::fence("no head for this root"));
        };
        let Some(head) = tree.head.as_ref() else {
            return Err(CommitError::fence("no head for this root"));
        };
        if head.cut.incarnation != cut.incarnation && !self.skips(Rule::Fencing) {
            return Err(CommitError::fence(format!(
                "head belongs to {}, commit to {}",
                head.cut.incarnation, cut.incarnation
            )));
        }
        if let Some(&fact) = tree.facts.get(&identity) {
            let current = head.sequence == sequence && head.cut.same_cut(cut);
            return self.acknowledge_fact(&identity, fact, content, current);
        }
        if head.sequence.checked_add(1) != Some(sequence) && !self.skips(Rule::ConsecutiveSequence)
        {
            return Err(CommitError::fence(format!(
                "sequence {sequence} does not follow head sequence {}",
                head.sequence
            )));
        }
        if previous != Some(head.cut.digest) && !self.skips(Rule::PreviousMatchesHead) {
            return Err(CommitError::fence("previous digest is not the head"));
        }
        install(tree, identity, content, kind, sequence, cut);
        Ok(())
    }

    fn apply_activation(&self, a: &Activation) -> Result<(), CommitError> {
        a.validate()?;
        let identity = a.identity();
        let content = a.content_digest();
        let mut trees = self.lock();
        let Some(tree) = trees.get_mut(&a.cut.root_id) else {
            return Err(CommitError::fence("no head for this root"));
        };
        if let Some(&fact) = tree.facts.get(&identity) {
            let current =
                tree.head.as_ref().is_some_and(|h| h.sequence == 0 && h.cut.same_cut(&a.cut));
            return self.acknowledge_fact(&identity, fact, content, current);
        }
        let Some(head) = tree.head.as_ref() else {
            return Err(CommitError::fence("no head for this root"));
        };
        if head.cut.incarnation != a.previous_incarnation && !self.skips(Rule::Fencing) {
            return Err(CommitError::fence(format!(
                "head belongs to {}, activation expected {}",
                head.cut.incarnation, a.previous_incarnation
            )));
        }
        if head.cut.digest != a.previous_digest && !self.skips(Rule::PreviousMatchesHead) {
            return Err(CommitError::fence("previous digest is not the head"));
        }
        let kind =
            CommitRecordKind::Activation { previous_incarnation: a.previous_incarnation.clone() };
        install(tree, identity, content, kind, 0, &a.cut);
        Ok(())
    }

    /// A recorded identity is acknowledged only for identical content that is still the head.
    fn acknowledge_fact(
        &self,
        identity: &str,
        fact: Digest,
        content: Digest,
        current: bool,
    ) -> Result<(), CommitError> {
        let same = fact == content || self.skips(Rule::ContentMatches);
        if same && (current || self.skips(Rule::RetryOnlyWhileCurrent)) {
            Ok(())
        } else {
            Err(CommitError::CommitConflict { identity: identity.to_owned() })
        }
    }
}

fn install(
    tree: &mut TreeRecord,
    identity: String,
    content: Digest,
    kind: CommitRecordKind,
    sequence: u64,
    cut: &TreeCut,
) {
    tree.facts.insert(identity.clone(), content);
    tree.history.push(CommitRecord {
        identity,
        kind,
        sequence,
        incarnation: cut.incarnation.clone(),
        cut_digest: cut.digest,
    });
    tree.head = Some(Head { cut: cut.clone(), sequence });
}

impl Committer for MemoryCommitter {
    fn commit_checkpoint(&self, checkpoint: &Checkpoint) -> BoxFuture<'_, Result<(), CommitError>> {
        let checkpoint = checkpoint.clone();
        Box::pin(async move { self.apply_checkpoint(&checkpoint) })
    }
    fn commit_effect(&self, boundary: &EffectBoundary) -> BoxFuture<'_, Result<(), CommitError>> {
        let boundary = boundary.clone();
        Box::pin(async move { self.apply_effect(&boundary) })
    }
    fn activate_tree(&self, activation: &Activation) -> BoxFuture<'_, Result<(), CommitError>> {
        let activation = activation.clone();
        Box::pin(async move { self.apply_activation(&activation) })
    }
    fn load_tree(&self, root: &ProcessId) -> BoxFuture<'_, Result<Option<Head>, CommitError>> {
        let root = root.clone();
        Box::pin(async move { Ok(self.head(&root)) })
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
    use crate::kernel::commit::conformance::check_committer;
    use futures::executor::block_on;
    use std::sync::Arc;

    fn root() -> ProcessId {
        ProcessId::parse("process:root").unwrap()
    }
    fn inc(n: u8) -> IncarnationId {
        IncarnationId::from_hex(&format!("{n:032x}")).unwrap()
    }
    fn cut(n: u8, incarnation: u8) -> TreeCut {
        TreeCut {
            root_id: root(),
            incarnation: inc(incarnation),
            digest: Digest([n; 32]),
            bytes: Arc::from(vec![n]),
        }
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
            let broken = || MemoryCommitter { skipped: Some(rule), ..MemoryCommitter::default() };
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
        m.lock().entry(root()).or_default().head =
            Some(Head { cut: cut(1, 1), sequence: u64::MAX });
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
