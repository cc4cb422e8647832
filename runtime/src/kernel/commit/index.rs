//! The commit rules (compare-and-advance fencing of one head per root, consecutive sequences,
//! identical retries acknowledged only while current), written once: per root a head with its
//! sequence, a map identity → content digest and the ordered list of installed commits, all
//! kept forever. Every store (the in-memory one, the durable file log) keeps one
//! `CommitIndex` and differs only in what it does between deciding and installing.
//!
//! A call is split in two: `decide_*` checks a request against the index without changing it
//! and answers `Current` (an identical retry of the head: acknowledge, install nothing) or an
//! `Installation`; the store makes the installation durable if it is a durable store, then
//! calls `install`. Holding the store's lock across both keeps the pair atomic, and a failed
//! call records nothing because nothing is mutated before `install`.
//!
//! Order of checks for an advance (checkpoint other than start, effect boundary): fencing on a
//! missing head or another incarnation first, then the recorded fact (identical and still
//! current → acknowledged, otherwise `CommitConflict`), then the sequence and previous-digest
//! compare-and-advance.

use super::port::{
    CommitRequest,
    Activation, Checkpoint, CheckpointKind, CommitError, EffectBoundary, EffectBoundaryKind, Head,
    TreeCut,
};
use crate::json::Digest;
use crate::kernel::ids::{EffectId, IncarnationId, ProcessId};
use std::collections::BTreeMap;

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

/// A decided, not yet installed commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Installation {
    pub identity: String,
    pub content_digest: Digest,
    pub kind: CommitRecordKind,
    /// The sequence the head will carry.
    pub sequence: u64,
    /// The whole cut the head will hold: the request's cut resolved against the head it
    /// advances from.
    pub cut: TreeCut,
    /// The request's cut as sent (a delta: only changed records carry bytes). A store that
    /// keeps records apart writes this; one that keeps whole cuts writes `cut`.
    pub carried: TreeCut,
}

/// The answer to a request that the rules accept.
// Returned once per call and moved straight into `install`; boxing would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// An identical retry of the commit the head still is: acknowledge, install nothing.
    Current,
    /// A new commit to install.
    Install(Installation),
}

#[derive(Default)]
struct TreeRecord {
    head: Option<Head>,
    facts: BTreeMap<String, Digest>,
    history: Vec<CommitRecord>,
}

/// Rules a test build can switch off to prove the conformance suite catches each one.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Rule {
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

/// The per-root commit state and the rules that advance it. Deterministic; not synchronized
/// (stores wrap it in their own lock).
#[derive(Default)]
pub struct CommitIndex {
    trees: BTreeMap<ProcessId, TreeRecord>,
    #[cfg(test)]
    skipped: Option<Rule>,
}

impl CommitIndex {
    pub fn new() -> CommitIndex {
        CommitIndex::default()
    }

    /// An index that ignores one rule (to prove the conformance suite notices).
    #[cfg(test)]
    pub(super) fn skipping(rule: Rule) -> CommitIndex {
        CommitIndex { skipped: Some(rule), ..CommitIndex::default() }
    }

    /// An index holding one tree as a database store read it inside its transaction: the
    /// locked head and the recorded facts (identity → content digest) that the request can
    /// touch. A request's decision reads only its own identity's fact, so a store that loads
    /// that one fact decides exactly as if it held the whole history. The history starts
    /// empty: such an index decides, the database installs.
    pub fn for_tree(
        root: ProcessId,
        head: Option<Head>,
        facts: impl IntoIterator<Item = (String, Digest)>,
    ) -> CommitIndex {
        let tree = TreeRecord { head, facts: facts.into_iter().collect(), history: Vec::new() };
        let mut index = CommitIndex::new();
        if tree.head.is_some() || !tree.facts.is_empty() {
            index.trees.insert(root, tree);
        }
        index
    }

    /// Installs a head directly, bypassing every rule (tests of extreme sequences only).
    #[cfg(test)]
    pub(super) fn force_head(&mut self, head: Head) {
        let root = head.cut.root_id.clone();
        self.trees.entry(root).or_default().head = Some(head);
    }

    /// The current head of `root`.
    pub fn head(&self, root: &ProcessId) -> Option<&Head> {
        self.trees.get(root).and_then(|t| t.head.as_ref())
    }

    /// Every installed commit of `root` with its content digest, in installation order (what
    /// a compacted store keeps of the tree besides its head).
    pub fn commits(&self, root: &ProcessId) -> Vec<(CommitRecord, Digest)> {
        let Some(tree) = self.trees.get(root) else { return Vec::new() };
        tree.history
            .iter()
            .filter_map(|c| tree.facts.get(&c.identity).map(|d| (c.clone(), *d)))
            .collect()
    }

    /// Installs a tree as a compacted store kept it: its head and every installed commit with
    /// its content digest, so facts and history answer as before compaction. The caller
    /// checked that the tree is not in the index yet; the last commit must be the head.
    pub fn restore(&mut self, head: Head, commits: Vec<(CommitRecord, Digest)>) -> Result<(), String> {
        let Some((last, _)) = commits.last() else {
            return Err("a compacted tree lists no commits".into());
        };
        if last.sequence != head.sequence || last.cut_digest != head.cut.digest || last.incarnation != head.cut.incarnation {
            return Err("a compacted tree's last commit is not its head".into());
        }
        let history: Vec<CommitRecord> = commits.iter().map(|(c, _)| c.clone()).collect();
        super::memory::audit_history(&history)?;
        let facts = commits.into_iter().map(|(c, d)| (c.identity, d)).collect();
        let root = head.cut.root_id.clone();
        self.trees.insert(root, TreeRecord { head: Some(head), facts, history });
        Ok(())
    }

    /// Every installed commit of `root`, in installation order.
    pub fn history(&self, root: &ProcessId) -> &[CommitRecord] {
        self.trees.get(root).map(|t| t.history.as_slice()).unwrap_or_default()
    }

    /// The roots the index knows, in order.
    pub fn roots(&self) -> Vec<ProcessId> {
        self.trees.keys().cloned().collect()
    }

    #[cfg(test)]
    fn skips(&self, rule: Rule) -> bool {
        self.skipped == Some(rule)
    }
    #[cfg(not(test))]
    fn skips(&self, _rule: Rule) -> bool {
        false
    }

    /// Decides a checkpoint (start or advance).
    pub fn decide_checkpoint(&self, c: &Checkpoint) -> Result<Decision, CommitError> {
        c.validate()?;
        let kind = CommitRecordKind::Checkpoint(c.kind);
        if c.kind != CheckpointKind::Start {
            return self.decide_advance(
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
        let tree = self.trees.get(&c.cut.root_id);
        let head = tree.and_then(|t| t.head.as_ref());
        if let Some(&fact) = tree.and_then(|t| t.facts.get(&identity)) {
            let current = head.is_some_and(|h| h.sequence == 1 && h.cut.same_cut(&c.cut));
            return self.acknowledge_fact(&identity, fact, content, current);
        }
        if head.is_some() && !self.skips(Rule::StartNeedsNoHead) {
            return Err(CommitError::fence("start over an existing head"));
        }
        install(identity, content, kind, 1, &c.cut, None)
    }

    /// Decides an Effect boundary.
    pub fn decide_effect(&self, b: &EffectBoundary) -> Result<Decision, CommitError> {
        b.validate()?;
        let kind = CommitRecordKind::Effect {
            process_id: b.process_id.clone(),
            effect_id: b.effect_id.clone(),
            kind: b.kind,
        };
        self.decide_advance(
            b.identity(),
            b.content_digest(),
            b.sequence,
            Some(b.previous_digest),
            &b.cut,
            kind,
        )
    }

    fn decide_advance(
        &self,
        identity: String,
        content: Digest,
        sequence: u64,
        previous: Option<Digest>,
        cut: &TreeCut,
        kind: CommitRecordKind,
    ) -> Result<Decision, CommitError> {
        let Some(tree) = self.trees.get(&cut.root_id) else {
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
        install(identity, content, kind, sequence, cut, Some(&head.cut))
    }

    /// Decides an activation (change of writer).
    pub fn decide_activation(&self, a: &Activation) -> Result<Decision, CommitError> {
        a.validate()?;
        let identity = a.identity();
        let content = a.content_digest();
        let Some(tree) = self.trees.get(&a.cut.root_id) else {
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
        install(identity, content, kind, 0, &a.cut, Some(&head.cut))
    }

    /// A recorded identity is acknowledged only for identical content that is still the head.
    fn acknowledge_fact(
        &self,
        identity: &str,
        fact: Digest,
        content: Digest,
        current: bool,
    ) -> Result<Decision, CommitError> {
        let same = fact == content || self.skips(Rule::ContentMatches);
        if same && (current || self.skips(Rule::RetryOnlyWhileCurrent)) {
            Ok(Decision::Current)
        } else {
            Err(CommitError::CommitConflict { identity: identity.to_owned() })
        }
    }

    /// Decides one request of any kind.
    pub fn decide(&self, request: &CommitRequest) -> Result<Decision, CommitError> {
        match request {
            CommitRequest::Checkpoint(c) => self.decide_checkpoint(c),
            CommitRequest::Effect(b) => self.decide_effect(b),
            CommitRequest::Activation(a) => self.decide_activation(a),
        }
    }

    /// Decides a chain (`port::check_chain`) as if its commits were installed one after the
    /// other, installing nothing: the installations in order, to be installed together, or the
    /// first refusal (then none is installed), each with the position of its request. An
    /// identical retry of a chain whose last commit is still the head is acknowledged with
    /// nothing to install.
    pub fn decide_chain(&self, chain: &[CommitRequest]) -> Result<Vec<(usize, Installation)>, CommitError> {
        super::port::check_chain(chain)?;
        let root = chain[0].cut().root_id.clone();
        let tree = self.trees.get(&root);
        // Each identity is derived once (a hash) and looked up by it.
        let identities: Vec<String> = chain.iter().map(CommitRequest::identity).collect();
        let fact = |at: usize| tree.and_then(|t| t.facts.get(&identities[at]).copied());
        let last = chain.len() - 1;
        if fact(last).is_some() {
            if let Decision::Current = self.decide(&chain[last])? {
                // Every earlier commit must be installed with the same content too.
                for (at, request) in chain[..last].iter().enumerate() {
                    let content = request_content(request);
                    if fact(at) != Some(content) {
                        return Err(CommitError::CommitConflict { identity: identities[at].clone() });
                    }
                }
                return Ok(Vec::new());
            }
        }
        let facts: Vec<(String, Digest)> =
            (0..chain.len()).filter_map(|at| fact(at).map(|d| (identities[at].clone(), d))).collect();
        let mut scratch = CommitIndex::for_tree(root, tree.and_then(|t| t.head.clone()), facts);
        #[cfg(test)]
        {
            scratch.skipped = self.skipped;
        }
        let mut installations = Vec::with_capacity(chain.len());
        for (at, request) in chain.iter().enumerate() {
            if let Decision::Install(installation) = scratch.decide(request)? {
                scratch.install(installation.clone());
                installations.push((at, installation));
            }
        }
        Ok(installations)
    }

    /// Installs a decided commit: records its fact and history entry and moves the head.
    /// Callers pass only what a `decide_*` call on this index just returned.
    pub fn install(&mut self, i: Installation) {
        let tree = self.trees.entry(i.cut.root_id.clone()).or_default();
        tree.facts.insert(i.identity.clone(), i.content_digest);
        tree.history.push(CommitRecord {
            identity: i.identity,
            kind: i.kind,
            sequence: i.sequence,
            incarnation: i.cut.incarnation.clone(),
            cut_digest: i.cut.digest,
        });
        tree.head = Some(Head { cut: i.cut, sequence: i.sequence });
    }
}

/// An installation of `cut`, resolved against `base` (the head it advances from): a delta
/// keeping a record the head lacks is refused with `MissingRecord`, before anything is stored.
fn install(
    identity: String,
    content_digest: Digest,
    kind: CommitRecordKind,
    sequence: u64,
    cut: &TreeCut,
    base: Option<&TreeCut>,
) -> Result<Decision, CommitError> {
    let whole = cut.resolve(base).map_err(|e| CommitError::from_cut(&cut.root_id, e))?;
    Ok(Decision::Install(Installation {
        identity,
        content_digest,
        kind,
        sequence,
        cut: whole,
        carried: cut.clone(),
    }))
}

fn request_content(request: &CommitRequest) -> Digest {
    match request {
        CommitRequest::Checkpoint(c) => c.content_digest(),
        CommitRequest::Effect(b) => b.content_digest(),
        CommitRequest::Activation(a) => a.content_digest(),
    }
}
