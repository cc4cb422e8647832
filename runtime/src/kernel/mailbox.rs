//! The per-Process mailbox: a pure data structure.
//!
//! * An append-only sequence of [`SignalRecord`]s in arrival order, each carrying its 1-based
//!   arrival sequence, and the count of records ever admitted. Compaction
//!   ([`Mailbox::compact`]) drops consumed Engine records no open wait needs, so the retained
//!   list may have gaps; pending records are never dropped.
//! * A consumption cursor: the count of consumed records. It only moves forward; consuming a
//!   record releases its payload and keeps its digest ([`RecordBody::Consumed`]).
//! * The wait table is derived from history, never stored: openings carry their
//!   [`WaitOpening`] (key, and the child-wait spec) as long as the wait is open, answers are
//!   the addressed records that are not openings, and a wait closes once the cursor passes its
//!   answer. Termination closes every wait too; the Process (which knows its status) applies
//!   that. A closed wait's records may be compacted away; its external answer stays.
//! * Every way in ([`Mailbox::from_records`], [`Mailbox::from_retained`], decoding, admission)
//!   checks the same history rules, so no reachable `Mailbox` contradicts its own history.
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
    /// The retained records in arrival order, each carrying its arrival sequence: every
    /// pending record, and every consumed one compaction has not dropped.
    records: Vec<SignalRecord>,
    cursor: u64,
    /// How many records were ever admitted: the last arrival sequence (the Process's
    /// `accepted_signals` usage). Larger than `records.len()` once compaction dropped some.
    admitted: u64,
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

    /// Rebuilds an uncompacted mailbox from its whole history (record `i` arrived `i`-th),
    /// rejecting any history the admission rules could not have produced: cursor beyond the
    /// end, consumed/pending bodies on the wrong side of the cursor, duplicate ids, answers
    /// without a prior opening, answers from the wrong source, a wait answered twice, a wait
    /// key opened while an earlier wait still held it.
    pub fn from_records(mut records: Vec<SignalRecord>, cursor: u64) -> Result<Mailbox, MailboxError> {
        for (arrival, record) in (1u64..).zip(records.iter_mut()) {
            record.set_arrival(arrival);
        }
        let admitted = records.len() as u64;
        Mailbox::from_retained(records, cursor, admitted)
    }

    /// Rebuilds a mailbox from its retained records (each carrying its arrival), cursor and
    /// admitted count, checking the same rules as [`Mailbox::from_records`] plus the shape of
    /// compaction: arrivals strictly increase up to `admitted`, the pending records are
    /// exactly the arrivals after the cursor (compaction only drops consumed records), and an
    /// answer whose opening is absent is a consumed external answer.
    pub fn from_retained(records: Vec<SignalRecord>, cursor: u64, admitted: u64) -> Result<Mailbox, MailboxError> {
        if cursor > admitted {
            return Err(MailboxError::CursorBeyondEnd { cursor, len: admitted });
        }
        let compacted = admitted != records.len() as u64;
        let mut index = HistoryIndex::default();
        let mut previous = 0u64;
        for record in &records {
            let arrival = record.arrival();
            if arrival <= previous || arrival > admitted {
                return Err(MailboxError::ArrivalOutOfOrder { arrival, admitted });
            }
            previous = arrival;
            match (arrival <= cursor, record.is_consumed()) {
                (true, false) => return Err(MailboxError::PendingBeforeCursor { arrival }),
                (false, true) => return Err(MailboxError::ConsumedAfterCursor { arrival }),
                _ => {}
            }
            index.check(record, arrival, cursor, compacted)?;
            index.apply(record, arrival);
        }
        let pending = records.iter().rev().take_while(|r| r.arrival() > cursor).count() as u64;
        if pending != admitted - cursor {
            return Err(MailboxError::PendingNotContiguous { admitted });
        }
        Ok(Mailbox { records, cursor, admitted, index })
    }

    /// Test-only: builds a mailbox WITHOUT checking its history, so the invariant oracle's
    /// tests can construct mailboxes no admission path could produce.
    #[cfg(test)]
    pub(crate) fn from_records_unchecked_for_tests(mut records: Vec<SignalRecord>, cursor: u64) -> Mailbox {
        for (arrival, record) in (1u64..).zip(records.iter_mut()) {
            record.set_arrival(arrival);
        }
        let index = HistoryIndex::over(&records);
        let admitted = records.len() as u64;
        Mailbox { records, cursor, admitted, index }
    }

    /// Test-only: [`Mailbox::from_retained`] WITHOUT checking (records keep their arrivals).
    #[cfg(test)]
    pub(crate) fn from_retained_unchecked_for_tests(records: Vec<SignalRecord>, cursor: u64, admitted: u64) -> Mailbox {
        let index = HistoryIndex::over(&records);
        Mailbox { records, cursor, admitted, index }
    }

    /// The retained records in arrival order (see [`Mailbox::compact`] for what is dropped).
    pub fn records(&self) -> &[SignalRecord] {
        &self.records
    }

    /// The retained record with 1-based `arrival` sequence.
    pub fn record(&self, arrival: u64) -> Option<&SignalRecord> {
        let i = self.records.binary_search_by_key(&arrival, SignalRecord::arrival).ok()?;
        self.records.get(i)
    }

    /// The arrival sequence of a retained id.
    pub fn arrival_of(&self, id: &SignalId) -> Option<u64> {
        self.index.arrivals.get(id).copied()
    }

    /// Whether a record with `id` is retained: every admitted external id, every Engine id
    /// compaction has not dropped.
    pub fn contains(&self, id: &SignalId) -> bool {
        self.index.arrivals.contains_key(id)
    }

    /// Number of records ever admitted (retained or compacted away): the last arrival.
    pub fn len(&self) -> u64 {
        self.admitted
    }

    pub fn is_empty(&self) -> bool {
        self.admitted == 0
    }

    /// Whether compaction dropped records (the retained list is not the whole history).
    pub fn is_compacted(&self) -> bool {
        self.admitted != self.records.len() as u64
    }

    /// Number of consumed records.
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    /// Number of records after the cursor.
    pub fn pending_count(&self) -> u64 {
        self.admitted - self.cursor
    }

    /// The unconsumed suffix as Signals, in arrival order: a Step's window.
    pub fn pending_window(&self) -> Vec<Signal> {
        self.pending_records().iter().filter_map(SignalRecord::to_signal).collect()
    }

    /// The unconsumed suffix as records (compaction never drops a pending record).
    pub fn pending_records(&self) -> &[SignalRecord] {
        self.records.get(self.pending_start()..).unwrap_or(&[])
    }

    fn pending_start(&self) -> usize {
        // `pending_count ≤ records.len()` always holds: pending records are never dropped.
        self.records.len().saturating_sub(self.pending_count() as usize)
    }

    /// Advances the cursor by `n` (an adopted Step consumed a prefix of its window), releasing
    /// those payloads. Waits whose answers are passed become closed. Never moves backwards.
    pub fn consume(&mut self, n: u64) -> Result<(), ConsumeError> {
        let pending = self.pending_count();
        if n > pending {
            return Err(ConsumeError::BeyondPending { requested: n, pending });
        }
        let start = self.pending_start();
        let end = start + n as usize;
        for record in self.records.get_mut(start..end).unwrap_or(&mut []) {
            record.consume();
        }
        self.cursor += n;
        Ok(())
    }

    /// Compaction: drops every consumed Engine-namespace record that no open wait needs —
    /// settlements and framework results, and the opening and answer of each closed wait.
    /// Their ids are derived from settled Effects and closed waits, so they are never
    /// delivered again and need no deduplication. External records are kept (reduced to
    /// `{id, wait_id?, payload_digest}` by consumption) so a redelivery stays a duplicate or
    /// a conflict. Returns how many records were dropped. Idempotent.
    pub fn compact(&mut self) -> usize {
        #[cfg(feature = "mutations")]
        let drop_external = crate::mutation::active(crate::mutation::Mutation::DropExternalOnCompaction);
        #[cfg(not(feature = "mutations"))]
        let drop_external = false;
        let cursor = self.cursor;
        let index = &self.index;
        let closed = |w: &WaitId| index.waits.get(w).is_none_or(|e| e.closed(cursor));
        let before = self.records.len();
        let keep: Vec<bool> = self
            .records
            .iter()
            .map(|r| {
                let external_dropped = drop_external && r.is_consumed() && !r.id().is_engine_owned();
                !(r.droppable(closed) || external_dropped)
            })
            .collect();
        if keep.iter().all(|k| *k) {
            return 0;
        }
        let mut flags = keep.into_iter();
        self.records.retain(|_| flags.next().unwrap_or(true));
        self.index = HistoryIndex::over(&self.records);
        before - self.records.len()
    }

    /// Whether compaction would drop something: the mailbox holds a consumed Engine record no
    /// open wait needs. A writer that compacts at every finalization never commits one.
    pub fn has_droppable(&self) -> bool {
        let closed = |w: &WaitId| self.index.waits.get(w).is_none_or(|e| e.closed(self.cursor));
        self.records.iter().any(|r| r.droppable(closed))
    }

    /// The derived state of one wait.
    pub fn wait(&self, wait: &WaitId) -> Option<WaitState> {
        self.index.waits.get(wait).map(|e| e.state(self.cursor))
    }

    /// Whether an answer to `wait` was admitted, also for a closed wait whose opening
    /// compaction dropped (its external answer is retained).
    pub fn is_answered(&self, wait: &WaitId) -> bool {
        self.index.waits.get(wait).is_some_and(|e| e.answered_by.is_some())
            || self.index.orphan_answers.contains_key(wait)
    }

    /// What the wait's opening record opened (key, and spec for child waits).
    pub fn wait_opening(&self, wait: &WaitId) -> Option<&WaitOpening> {
        let entry = self.index.waits.get(wait)?;
        self.record(entry.opening_arrival)?.opens()
    }

    /// Every retained wait (each open one, and closed ones compaction kept), in WaitId order.
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
