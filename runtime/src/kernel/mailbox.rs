//! The per-Process mailbox: a pure data structure.
//!
//! * An append-only sequence of [`SignalRecord`]s in arrival order; the arrival sequence of a
//!   record is its 1-based position.
//! * A consumption cursor: the count of consumed records. It only moves forward; consuming a
//!   record releases its payload and keeps its digest ([`RecordBody::Consumed`]).
//! * The wait table is derived from history, never stored: openings carry their
//!   [`WaitOpening`] (key, and the child-wait spec) for good, answers are the addressed records
//!   that are not openings, and a wait closes once the cursor passes its answer. Termination
//!   closes every wait too; the Process (which knows its status) applies that.
//! * Every way in ([`Mailbox::from_records`], decoding, admission) checks the same history
//!   rules, so no reachable `Mailbox` contradicts its own history.
//!
//! The mailbox knows nothing about Process status, budgets or schemas: admission takes them in
//! an [`AdmissionContext`].

mod admission;
mod codec;
mod history;
mod receipt;
mod record;
#[cfg(test)]
mod tests;

pub use admission::{
    Admission, AdmissionContext, AdmissionError, AdmitOutcome, LimitReason, RejectReason,
    SignalsQuota,
};
pub use history::{MailboxError, WaitState};
pub use receipt::SignalReceipt;
pub use record::{RecordBody, RecordError, SignalRecord, WaitKind, WaitOpening};

use crate::kernel::ids::{SignalId, WaitId, WaitKey};
use crate::kernel::signal::Signal;
use history::HistoryIndex;

/// One Process's Signals, cursor and (derived) wait table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Mailbox {
    records: Vec<SignalRecord>,
    cursor: u64,
    /// Derived from `records` and `cursor`; rebuilt on decode.
    index: HistoryIndex,
}

/// Why a consumption was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConsumeError {
    #[error("cannot consume {requested} records: only {pending} are pending")]
    BeyondPending { requested: u64, pending: u64 },
}

impl Mailbox {
    /// An empty mailbox.
    pub fn new() -> Mailbox {
        Mailbox::default()
    }

    /// Rebuilds a mailbox from its history, rejecting any history the admission rules could
    /// not have produced: cursor beyond the end, consumed/pending bodies on the wrong side of
    /// the cursor, duplicate ids, answers without a prior opening, answers from the wrong
    /// source, a wait answered twice, a wait key opened while an earlier wait still held it.
    pub fn from_records(records: Vec<SignalRecord>, cursor: u64) -> Result<Mailbox, MailboxError> {
        let len = records.len() as u64;
        if cursor > len {
            return Err(MailboxError::CursorBeyondEnd { cursor, len });
        }
        let mut index = HistoryIndex::default();
        for (arrival, record) in (1u64..).zip(&records) {
            match (arrival <= cursor, record.is_consumed()) {
                (true, false) => return Err(MailboxError::PendingBeforeCursor { arrival }),
                (false, true) => return Err(MailboxError::ConsumedAfterCursor { arrival }),
                _ => {}
            }
            index.check(record, arrival, cursor)?;
            index.apply(record, arrival);
        }
        Ok(Mailbox { records, cursor, index })
    }

    /// Test-only: builds a mailbox WITHOUT checking its history, so the invariant oracle's
    /// tests can construct mailboxes no admission path could produce.
    #[cfg(test)]
    pub(crate) fn from_records_unchecked_for_tests(records: Vec<SignalRecord>, cursor: u64) -> Mailbox {
        let mut index = HistoryIndex::default();
        for (arrival, record) in (1u64..).zip(&records) {
            index.apply(record, arrival);
        }
        Mailbox { records, cursor, index }
    }

    /// All records in arrival order.
    pub fn records(&self) -> &[SignalRecord] {
        &self.records
    }

    /// The record with 1-based `arrival` sequence.
    pub fn record(&self, arrival: u64) -> Option<&SignalRecord> {
        let index = usize::try_from(arrival.checked_sub(1)?).ok()?;
        self.records.get(index)
    }

    /// The arrival sequence of an admitted id.
    pub fn arrival_of(&self, id: &SignalId) -> Option<u64> {
        self.index.arrivals.get(id).copied()
    }

    pub fn contains(&self, id: &SignalId) -> bool {
        self.index.arrivals.contains_key(id)
    }

    /// Number of admitted records.
    pub fn len(&self) -> u64 {
        self.records.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Number of consumed records.
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    /// Number of records after the cursor.
    pub fn pending_count(&self) -> u64 {
        self.len() - self.cursor
    }

    /// The unconsumed suffix as Signals, in arrival order: a Step's window.
    pub fn pending_window(&self) -> Vec<Signal> {
        self.pending_records().iter().filter_map(SignalRecord::to_signal).collect()
    }

    /// The unconsumed suffix as records.
    pub fn pending_records(&self) -> &[SignalRecord] {
        // `cursor ≤ len` always holds, so the slice start is in range.
        self.records.get(self.cursor_index()..).unwrap_or(&[])
    }

    /// Advances the cursor by `n` (an adopted Step consumed a prefix of its window), releasing
    /// those payloads. Waits whose answers are passed become closed. Never moves backwards.
    pub fn consume(&mut self, n: u64) -> Result<(), ConsumeError> {
        let pending = self.pending_count();
        if n > pending {
            return Err(ConsumeError::BeyondPending { requested: n, pending });
        }
        let start = self.cursor_index();
        let end = start + n as usize;
        for record in self.records.get_mut(start..end).unwrap_or(&mut []) {
            record.consume();
        }
        self.cursor += n;
        Ok(())
    }

    fn cursor_index(&self) -> usize {
        self.cursor as usize
    }

    /// The derived state of one wait.
    pub fn wait(&self, wait: &WaitId) -> Option<WaitState> {
        self.index.waits.get(wait).map(|e| e.state(self.cursor))
    }

    /// What the wait's opening record opened (key, and spec for child waits).
    pub fn wait_opening(&self, wait: &WaitId) -> Option<&WaitOpening> {
        let entry = self.index.waits.get(wait)?;
        self.record(entry.opening_arrival)?.opens()
    }

    /// Every wait ever opened, in WaitId order.
    pub fn waits(&self) -> impl Iterator<Item = (&WaitId, WaitState)> + '_ {
        self.index.waits.iter().map(|(id, e)| (id, e.state(self.cursor)))
    }

    /// The open waits (answer not yet consumed), in WaitId order.
    pub fn open_waits(&self) -> impl Iterator<Item = (&WaitId, WaitState)> + '_ {
        self.waits().filter(|(_, s)| !s.closed)
    }

    /// The open wait holding `key`, if any (a key is never open twice).
    pub fn open_wait_with_key(&self, key: &WaitKey) -> Option<&WaitId> {
        self.index.open_wait_with_key(key, self.cursor)
    }
}
