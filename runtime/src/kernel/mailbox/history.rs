//! The index derived from mailbox history: seen ids and the wait table.
//!
//! Wait facts are never stored separately. A wait is open from its opening record until the
//! record answering it is consumed (the cursor passes it); it is answered once an answering
//! record exists. Termination also closes every wait, but the mailbox does not know Process
//! status: callers treat every wait of a terminal Process as closed.
//!
//! Compaction drops the opening (and an Engine answer) of a closed wait, so the table holds
//! the retained waits only: every open wait, plus closed ones of an uncompacted history. A
//! retained external answer whose opening was dropped is an *orphan answer*: its wait is
//! closed and stays answered, which is all admission still needs to know about it.

use super::record::{SignalRecord, WaitKind, WaitOpening};
use crate::kernel::ids::{SignalId, WaitId, WaitKey};
use crate::kernel::signal::SignalSource;
use std::collections::BTreeMap;

/// The derived state of one wait.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WaitState {
    pub key: WaitKey,
    pub kind: WaitKind,
    /// Arrival sequence of the opening record.
    pub opening_arrival: u64,
    /// Arrival sequence of the answering record, once one was admitted.
    pub answered_by: Option<u64>,
    /// Whether the answer has been consumed (the cursor passed it).
    pub closed: bool,
}

/// Why a record history is not a possible mailbox history.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MailboxError {
    #[error("cursor {cursor} is beyond the {len} records")]
    CursorBeyondEnd { cursor: u64, len: u64 },
    #[error("record arrival {arrival} is not after the previous record's and within the {admitted} admitted")]
    ArrivalOutOfOrder { arrival: u64, admitted: u64 },
    #[error("the pending records are not exactly arrivals after the cursor up to {admitted}")]
    PendingNotContiguous { admitted: u64 },
    #[error("record {arrival} answers wait `{wait_id}` whose opening is absent, but is not a consumed external answer")]
    OrphanAnswer { wait_id: WaitId, arrival: u64 },
    #[error("record {arrival} is before the cursor but still holds its payload")]
    PendingBeforeCursor { arrival: u64 },
    #[error("record {arrival} is at or after the cursor but holds only a digest")]
    ConsumedAfterCursor { arrival: u64 },
    #[error("signal `{id}` appears twice (again at record {arrival})")]
    DuplicateId { id: SignalId, arrival: u64 },
    #[error("record {arrival} answers wait `{wait_id}`, which no earlier record opened")]
    AnswerWithoutOpening { wait_id: WaitId, arrival: u64 },
    #[error("record {arrival} answers {kind:?} wait `{wait_id}` from source {source_kind:?}")]
    WrongSource { wait_id: WaitId, kind: WaitKind, source_kind: SignalSource, arrival: u64 },
    #[error("record {arrival} answers wait `{wait_id}` a second time")]
    AnsweredTwice { wait_id: WaitId, arrival: u64 },
    #[error("record {arrival} opens wait key `{key}` while wait `{open}` still holds it")]
    WaitKeyOpenTwice { key: WaitKey, open: WaitId, arrival: u64 },
}

/// Derived per-wait facts (the key and kind come from the opening, kept for lookups).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct WaitEntry {
    pub key: WaitKey,
    pub kind: WaitKind,
    pub opening_arrival: u64,
    pub answered_by: Option<u64>,
}

impl WaitEntry {
    pub fn closed(&self, cursor: u64) -> bool {
        self.answered_by.is_some_and(|a| a <= cursor)
    }
    pub fn state(&self, cursor: u64) -> WaitState {
        WaitState {
            key: self.key.clone(),
            kind: self.kind,
            opening_arrival: self.opening_arrival,
            answered_by: self.answered_by,
            closed: self.closed(cursor),
        }
    }
}

/// Index over the records: arrival of every id, the wait table, and the latest wait per key
/// (a key is never open twice, so only the latest wait with a key can still be open).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct HistoryIndex {
    pub arrivals: BTreeMap<SignalId, u64>,
    pub waits: BTreeMap<WaitId, WaitEntry>,
    pub latest_by_key: BTreeMap<WaitKey, WaitId>,
    /// Waits whose opening was dropped, answered by a retained (external) record: wait →
    /// arrival of the answer.
    pub orphan_answers: BTreeMap<WaitId, u64>,
}

impl HistoryIndex {
    /// The wait currently holding `key`, if it is still open at `cursor`.
    pub fn open_wait_with_key(&self, key: &WaitKey, cursor: u64) -> Option<&WaitId> {
        let wait = self.latest_by_key.get(key)?;
        match self.waits.get(wait) {
            Some(entry) if !entry.closed(cursor) => Some(wait),
            _ => None,
        }
    }

    /// Checks that `record`, arriving at `arrival`, may follow the indexed history.
    ///
    /// `cursor` is the final cursor of the history being replayed. A reused key needs the
    /// earlier wait's answer to precede the new opening (replay is in order, so an indexed
    /// answer always does) and to be consumed by the final cursor: the cursor is monotone, so
    /// that is the strongest condition the history can prove about when the key was released.
    ///
    /// `compacted` says records were dropped from this history: then an answer without a
    /// retained opening is accepted if it is a consumed external answer (its wait closed and
    /// compaction dropped the opening); it is still answered at most once.
    pub fn check(
        &self,
        record: &SignalRecord,
        arrival: u64,
        cursor: u64,
        compacted: bool,
    ) -> Result<(), MailboxError> {
        if self.arrivals.contains_key(record.id()) {
            return Err(MailboxError::DuplicateId { id: record.id().clone(), arrival });
        }
        let Some(wait_id) = record.wait_id() else { return Ok(()) };
        if let Some(opening) = record.opens() {
            if self.waits.contains_key(wait_id) || self.orphan_answers.contains_key(wait_id) {
                return Err(MailboxError::DuplicateId { id: record.id().clone(), arrival });
            }
            return self.check_opening(opening, arrival, cursor);
        }
        let Some(entry) = self.waits.get(wait_id) else {
            if self.orphan_answers.contains_key(wait_id) {
                return Err(MailboxError::AnsweredTwice { wait_id: wait_id.clone(), arrival });
            }
            let orphan_ok = compacted
                && arrival <= cursor
                && record.source() == SignalSource::External;
            if orphan_ok {
                return Ok(());
            }
            if compacted {
                return Err(MailboxError::OrphanAnswer { wait_id: wait_id.clone(), arrival });
            }
            return Err(MailboxError::AnswerWithoutOpening { wait_id: wait_id.clone(), arrival });
        };
        let source = record.source();
        if source != entry.kind.answering_source() {
            return Err(MailboxError::WrongSource {
                wait_id: wait_id.clone(),
                kind: entry.kind,
                source_kind: source,
                arrival,
            });
        }
        if entry.answered_by.is_some() {
            return Err(MailboxError::AnsweredTwice { wait_id: wait_id.clone(), arrival });
        }
        Ok(())
    }

    fn check_opening(
        &self,
        opening: &WaitOpening,
        arrival: u64,
        cursor: u64,
    ) -> Result<(), MailboxError> {
        match self.open_wait_with_key(opening.key(), cursor) {
            None => Ok(()),
            Some(open) => Err(MailboxError::WaitKeyOpenTwice {
                key: opening.key().clone(),
                open: open.clone(),
                arrival,
            }),
        }
    }

    /// Records `record` at `arrival`; the caller has checked it.
    pub fn apply(&mut self, record: &SignalRecord, arrival: u64) {
        self.arrivals.insert(record.id().clone(), arrival);
        let Some(wait_id) = record.wait_id() else { return };
        if let Some(opening) = record.opens() {
            self.waits.insert(
                wait_id.clone(),
                WaitEntry {
                    key: opening.key().clone(),
                    kind: opening.kind(),
                    opening_arrival: arrival,
                    answered_by: None,
                },
            );
            self.latest_by_key.insert(opening.key().clone(), wait_id.clone());
        } else if let Some(entry) = self.waits.get_mut(wait_id) {
            entry.answered_by = Some(arrival);
        } else {
            self.orphan_answers.insert(wait_id.clone(), arrival);
        }
    }

    /// Rebuilds the index over `records` (already checked).
    pub fn over(records: &[SignalRecord]) -> HistoryIndex {
        let mut index = HistoryIndex::default();
        for record in records {
            index.apply(record, record.arrival());
        }
        index
    }
}
