//! Compaction: a finished child whose Result its parent consumed leaves the cut, replaced by
//! its immutable residue record, and its parent's record counts it and keeps its debit
//! (`kernel::retired`); consumed Engine Signals no open wait needs leave the Process's mailbox
//! (`Mailbox::compact`).
//!
//! The moment is the parent's finalization: the adopted Step consumed a child-wait
//! satisfaction listing the child, so the parent holds the Result in its committed state and
//! never needs the child's record again. A child is retired only when nothing can still read
//! it: it is terminal with no unresolved Unknown, no work of it is in flight, it has no
//! children of its own left in the tree, and no open child wait of the parent names it.
//! Everything is decided from the tree alone, so a restored owner retires exactly what the
//! original would have.

use super::control::result_of;
use super::Owner;
use crate::kernel::child::ChildWaitSpec;
use crate::kernel::engine_signal::ChildWaitSatisfied;
use crate::kernel::ids::ProcessId;
use crate::kernel::mailbox::{SignalRecord, WaitOpening};
use crate::kernel::resource::{Allocation, Usage};
use crate::kernel::retired::{result_digest, retirable, RetiredChild};
use crate::kernel::signal::SignalSource;
use crate::json::FromJson;
use crate::kernel::process::Process;
use std::collections::BTreeMap;

/// Bound on the children one parent keeps for a later retirement attempt (one child-wait
/// satisfaction lists at most the children of one wait; the rest simply stay in the cut).
const MAX_RETIRE_LATER: usize = 1024;

/// The child ids listed by the child-wait satisfactions among `records` (the window prefix an
/// adopted Step consumes), in record and outcome order.
pub(super) fn delivered_children(records: &[SignalRecord]) -> Vec<ProcessId> {
    let mut out = Vec::new();
    for record in records.iter().filter(|r| r.source() == SignalSource::ChildWaitAnswer) {
        let Some(signal) = record.to_signal() else { continue };
        if let Ok(satisfied) = ChildWaitSatisfied::parse(&signal) {
            out.extend(satisfied.outcomes.into_iter().map(|o| o.result.process_id));
        }
    }
    out
}

/// The owner's compaction switch and the delivered children it could not retire yet.
#[derive(Debug)]
pub(super) struct Compaction {
    on: bool,
    /// Per parent: children whose Results it consumed while their terminal cut was not yet
    /// acknowledged (retried at the parent's next finalization). Live-only: a child still
    /// listed when the writer is replaced stays in the cut in full.
    later: BTreeMap<ProcessId, Vec<ProcessId>>,
}

impl Default for Compaction {
    fn default() -> Compaction {
        Compaction { on: true, later: BTreeMap::new() }
    }
}

impl Owner {
    /// Whether compaction runs (on by default; off only to compare a run with its
    /// uncompacted twin).
    pub fn set_compaction(&mut self, on: bool) {
        self.compaction.on = on;
    }

    /// Retires each of `delivered` (and those left from earlier) that nothing can still read
    /// (see the module doc).
    pub(super) fn retire_delivered(&mut self, parent: &ProcessId, delivered: Vec<ProcessId>) {
        if !self.compaction.on {
            return;
        }
        let mut candidates = self.compaction.later.remove(parent).unwrap_or_default();
        candidates.extend(delivered);
        let mut later = Vec::new();
        for child_id in candidates {
            let Some(child) = self.processes.get(&child_id) else { continue };
            if child.relation.parent_id.as_ref() != Some(parent)
                || !retirable(child)
                || self.has_job(&child_id)
                || self.processes.values().any(|p| p.relation.parent_id.as_ref() == Some(&child_id))
                || self.named_by_open_wait(parent, &child_id)
            {
                continue;
            }
            // Its Result must already be in an acknowledged head: a Result is published only
            // with a head that holds it, and the next cut no longer will.
            let acknowledged = self.head().and_then(|h| h.process(&child_id)).is_some_and(Process::is_terminal);
            if !acknowledged {
                if later.len() < MAX_RETIRE_LATER {
                    later.push(child_id);
                }
                continue;
            }
            let (Some(key), Some(result)) = (child.relation.child_key.clone(), result_of(child)) else { continue };
            let Some(p) = self.processes.get(parent) else { return };
            // The same debit the grant recorded (a legal grant was checked at start).
            let zero = Allocation::ZERO;
            let Ok(debit) = p.budget.grant_child(&Usage::default(), &zero, &zero, &child.budget) else { continue };
            let Some(debits) = p.retired.debits.checked_add(&debit) else { continue };
            let Some(count) = p.retired.count.checked_add(1) else { continue };
            let residue = RetiredChild {
                parent_id: parent.clone(),
                process_id: child_id.clone(),
                child_key: key,
                result_digest: result_digest(&result),
            };
            if let Some(p) = self.processes.get_mut(parent) {
                p.retired.count = count;
                p.retired.debits = debits;
            }
            self.processes.retire(residue);
            self.live.remove(&child_id);
        }
        if !later.is_empty() {
            self.compaction.later.insert(parent.clone(), later);
        }
    }

    /// Mailbox compaction of a Process whose Step was just adopted: consumed Engine records
    /// no open wait needs leave its record (`Mailbox::compact`). Off with child compaction.
    pub(super) fn compact_mailbox(&self, p: &mut Process) {
        if self.compaction.on {
            p.mailbox.compact();
        }
    }

    fn named_by_open_wait(&self, parent: &ProcessId, child: &ProcessId) -> bool {
        let Some(p) = self.processes.get(parent) else { return false };
        p.mailbox.open_waits().any(|(w, _)| match p.mailbox.wait_opening(w) {
            Some(WaitOpening::Children { spec, .. }) => {
                ChildWaitSpec::from_json(spec).map_or(true, |s| s.children.contains(child))
            }
            _ => false,
        })
    }
}
