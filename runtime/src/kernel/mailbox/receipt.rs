//! SignalReceipts: proof of admission for delivery reconciliation.

use super::{Mailbox, SignalRecord};
use crate::json::{Digest, Payload};
use crate::kernel::ids::{SignalId, WaitId};
use crate::kernel::signal::{SettlementStatus, SignalRequest};

/// One admitted record as seen by a Host. `consumed` is committed consumption (the cursor),
/// not "delivered to a candidate Step".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignalReceipt {
    pub id: SignalId,
    pub wait_id: Option<WaitId>,
    pub arrival_sequence: u64,
    pub consumed: bool,
    pub payload_digest: Digest,
    /// The payload while the record is pending.
    pub pending_payload: Option<Payload>,
    pub status: Option<SettlementStatus>,
}

impl SignalReceipt {
    /// Whether this receipt proves external admission of `request` (same id, wait_id and
    /// normalized-payload digest), also after consumption. Engine-owned records never match.
    pub fn matches(&self, request: &SignalRequest) -> bool {
        !self.id.is_engine_owned()
            && self.id == *request.id()
            && self.wait_id.as_ref() == request.wait_id()
            && self.payload_digest == request.payload().digest()
    }
}

impl Mailbox {
    /// A receipt for every retained record, in arrival order. A record compaction dropped (a
    /// consumed Engine record) has none; every external record keeps its receipt.
    pub fn receipts(&self) -> Vec<SignalReceipt> {
        self.records().iter().map(|r| self.receipt_of(r)).collect()
    }

    /// The receipt of one retained id.
    pub fn receipt(&self, id: &SignalId) -> Option<SignalReceipt> {
        Some(self.receipt_of(self.record(self.arrival_of(id)?)?))
    }

    fn receipt_of(&self, record: &SignalRecord) -> SignalReceipt {
        SignalReceipt {
            id: record.id().clone(),
            wait_id: record.wait_id().cloned(),
            arrival_sequence: record.arrival(),
            consumed: record.arrival() <= self.cursor(),
            payload_digest: record.payload_digest(),
            pending_payload: record.pending_payload().cloned(),
            status: record.status(),
        }
    }
}
