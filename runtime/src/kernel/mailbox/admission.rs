//! Atomic batch admission: every new Signal of a batch is appended, or none is.
//!
//! A batch is preflighted as a whole against the history plus what earlier members of the same
//! batch would add; only if every member passes is anything appended (in request order).
//! Preflight order per member: same id earlier in the batch → `Conflict`; id in history →
//! identical content is skipped (no charge), different content → `Conflict`; then the record
//! shape, addressing, current-wait gating and schema rules. Capacity is checked last, over the
//! number of new records.
//!
//! Rule 3 (terminal Process) is the caller's: `ctx.terminal` makes external admission fail
//! with [`AdmissionError::Terminal`] (the public path answers `ProcessFinished`) and makes
//! internal deliveries a no-op (spec: they are simply skipped).

use super::record::{classify, RecordError, SignalRecord, WaitKind, WaitOpening};
use super::Mailbox;
use crate::json::{Json, Payload};
use crate::kernel::ids::{EffectId, SignalId, WaitId, WaitKey};
use crate::kernel::signal::{SettlementStatus, SignalRequest, SignalSource};
use std::collections::{BTreeMap, BTreeSet};

/// One Engine-internal delivery: a settlement, framework result, wait opening or child-wait
/// answer. The source is derived from the identity; the id must be Engine-owned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Admission {
    pub id: SignalId,
    pub wait_id: Option<WaitId>,
    pub payload: Payload,
    pub status: Option<SettlementStatus>,
    pub opens: Option<WaitOpening>,
}

impl Admission {
    /// The settlement (or framework result, `status: None`) of an Effect.
    pub fn settlement(
        effect: &EffectId,
        payload: Payload,
        status: Option<SettlementStatus>,
    ) -> Admission {
        Admission { id: SignalId::settlement(effect), wait_id: None, payload, status, opens: None }
    }
    /// The opening of a wait; the payload is whatever the kernel renders for the Execution.
    pub fn opening(wait: WaitId, opens: WaitOpening, payload: Payload) -> Admission {
        Admission {
            id: SignalId::wait_opening(&wait),
            wait_id: Some(wait),
            payload,
            status: None,
            opens: Some(opens),
        }
    }
    /// The satisfaction Signal of a child wait.
    pub fn child_wait_answer(wait: WaitId, payload: Payload) -> Admission {
        Admission {
            id: SignalId::child_wait_satisfied(&wait),
            wait_id: Some(wait),
            payload,
            status: None,
            opens: None,
        }
    }
}

/// The Signals quota of the Process: `accepted + allocated + prepared_reserved + n ≤ maximum`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SignalsQuota {
    /// Signals already charged to the Process (usage).
    pub accepted: u64,
    /// Signals allocated to children.
    pub allocated: u64,
    /// `None` = unlimited.
    pub maximum: Option<u64>,
}

/// What admission needs to know about the Process; the mailbox holds none of it.
#[derive(Clone, Copy)]
pub struct AdmissionContext<'a> {
    /// Terminal Process: external admission fails, internal deliveries are skipped.
    pub terminal: bool,
    /// The wait the Process is currently blocked on (Waiting, or Paused with a wait).
    pub current_wait_id: Option<&'a WaitId>,
    /// The Descriptor's signal schema, applied to unaddressed external payloads.
    pub signal_schema: &'a dyn Fn(&Json) -> bool,
    pub max_pending_signals: u32,
    /// Records the prepared Step will consume when adopted.
    pub prepared_consumption: u32,
    /// Settlement Signals reserved by the prepared batch, excluding members of this batch
    /// (the caller releases a settlement's reservation as it delivers it).
    pub prepared_reserved_settlements: u32,
    pub signals_quota: SignalsQuota,
}

/// What an accepted batch changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AdmitOutcome {
    /// Arrival sequences of the newly appended records, in request order.
    pub appended: Vec<u64>,
    /// Members skipped as identical re-deliveries.
    pub duplicates: usize,
    /// Whether an answer to `ctx.current_wait_id` was appended (the Process leaves Waiting;
    /// a Paused Process stays Paused).
    pub released_current_wait: bool,
}

impl AdmitOutcome {
    /// `accepted` in the DeliverSignals sense: at least one new identity.
    pub fn accepted(&self) -> bool {
        !self.appended.is_empty()
    }
}

/// Why a batch was refused; nothing was appended.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AdmissionError {
    #[error("an admission batch must hold at least one signal")]
    Empty,
    #[error("the Process is terminal")]
    Terminal,
    #[error("signal `{id}` conflicts with an admitted signal or appears twice in the batch")]
    Conflict { id: SignalId },
    #[error("signal `{id}` rejected: {reason}")]
    Rejected { id: SignalId, reason: RejectReason },
    #[error("signal admission exceeds a limit: {reason}")]
    LimitExceeded { reason: LimitReason },
}

/// Why one member was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RejectReason {
    #[error("internal deliveries must use Engine-owned ids")]
    NotEngineOwned,
    #[error(transparent)]
    Malformed(#[from] RecordError),
    #[error("wait `{wait_id}` does not exist")]
    UnknownWait { wait_id: WaitId },
    #[error("{kind:?} wait `{wait_id}` cannot be answered by {source_kind:?} input")]
    WrongSource { wait_id: WaitId, kind: WaitKind, source_kind: SignalSource },
    #[error("wait `{wait_id}` is already answered")]
    AlreadyAnswered { wait_id: WaitId },
    #[error("wait `{wait_id}` is answered twice in this batch")]
    AnsweredTwiceInBatch { wait_id: WaitId },
    #[error("the Process waits on `{current}`, not `{wait_id}`")]
    NotCurrentWait { wait_id: WaitId, current: WaitId },
    #[error("unaddressed input is blocked until external wait `{current}` is answered")]
    BlockedByCurrentWait { current: WaitId },
    #[error("wait key `{key}` is held by open wait `{open}`")]
    WaitKeyOpen { key: WaitKey, open: WaitId },
    #[error("the payload does not satisfy the signal schema")]
    SchemaMismatch,
}

/// Which capacity rule refused the batch (`incoming` = new records in the batch).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LimitReason {
    #[error("{pending} pending + {incoming} incoming exceeds max_pending_signals {max}")]
    MaxPendingSignals { pending: u64, incoming: u64, max: u32 },
    #[error(
        "{remaining} pending after prepared consumption + {reserved} reserved + {incoming} \
         incoming exceeds max_pending_signals {max}"
    )]
    PreparedReservations { remaining: u64, reserved: u32, incoming: u64, max: u32 },
    #[error("{charged} charged + {incoming} incoming exceeds the signals quota {maximum}")]
    SignalsQuota { charged: u64, incoming: u64, maximum: u64 },
}

/// One batch member, borrowed from either request type.
struct Candidate<'a> {
    id: &'a SignalId,
    wait_id: Option<&'a WaitId>,
    payload: &'a Payload,
    status: Option<SettlementStatus>,
    opens: Option<&'a WaitOpening>,
}

/// What earlier members of the batch would add to the history.
#[derive(Default)]
struct Overlay<'a> {
    ids: BTreeSet<&'a SignalId>,
    opened: BTreeMap<&'a WaitId, WaitKind>,
    keys: BTreeMap<&'a WaitKey, &'a WaitId>,
    answered: BTreeSet<&'a WaitId>,
}

struct Plan {
    records: Vec<SignalRecord>,
    duplicates: usize,
    released_current_wait: bool,
}

impl Mailbox {
    /// Admits Host input atomically (see the module docs for the rules).
    pub fn admit_external(
        &mut self,
        batch: &[SignalRequest],
        ctx: &AdmissionContext<'_>,
    ) -> Result<AdmitOutcome, AdmissionError> {
        if batch.is_empty() {
            return Err(AdmissionError::Empty);
        }
        if ctx.terminal {
            return Err(AdmissionError::Terminal);
        }
        let candidates: Vec<Candidate<'_>> = batch
            .iter()
            .map(|r| Candidate {
                id: r.id(),
                wait_id: r.wait_id(),
                payload: r.payload(),
                status: None,
                opens: None,
            })
            .collect();
        let plan = self.preflight(&candidates, ctx, true)?;
        Ok(self.commit(plan))
    }

    /// Admits Engine-internal deliveries atomically; a terminal Process skips them.
    pub fn admit(
        &mut self,
        batch: &[Admission],
        ctx: &AdmissionContext<'_>,
    ) -> Result<AdmitOutcome, AdmissionError> {
        if batch.is_empty() {
            return Err(AdmissionError::Empty);
        }
        if ctx.terminal {
            return Ok(AdmitOutcome::default());
        }
        let candidates: Vec<Candidate<'_>> = batch
            .iter()
            .map(|a| Candidate {
                id: &a.id,
                wait_id: a.wait_id.as_ref(),
                payload: &a.payload,
                status: a.status,
                opens: a.opens.as_ref(),
            })
            .collect();
        let plan = self.preflight(&candidates, ctx, false)?;
        Ok(self.commit(plan))
    }

    fn preflight<'a>(
        &self,
        batch: &'a [Candidate<'a>],
        ctx: &AdmissionContext<'_>,
        external: bool,
    ) -> Result<Plan, AdmissionError> {
        let mut overlay = Overlay::default();
        let mut plan = Plan { records: Vec::new(), duplicates: 0, released_current_wait: false };
        for c in batch {
            if !overlay.ids.insert(c.id) {
                return Err(AdmissionError::Conflict { id: c.id.clone() });
            }
            if let Some(existing) = self.index.arrivals.get(c.id).and_then(|a| self.record(*a)) {
                if is_identical(existing, c) {
                    plan.duplicates += 1;
                    continue;
                }
                return Err(AdmissionError::Conflict { id: c.id.clone() });
            }
            let reject =
                |reason: RejectReason| AdmissionError::Rejected { id: c.id.clone(), reason };
            if !external && !c.id.is_engine_owned() {
                return Err(reject(RejectReason::NotEngineOwned));
            }
            let source =
                classify(c.id, c.wait_id, c.status, c.opens).map_err(|e| reject(e.into()))?;
            match (c.wait_id, c.opens) {
                (Some(wait), Some(opening)) => {
                    let key = opening.key();
                    let held = self
                        .index
                        .open_wait_with_key(key, self.cursor)
                        .or_else(|| overlay.keys.get(key).copied());
                    if let Some(open) = held {
                        return Err(reject(RejectReason::WaitKeyOpen {
                            key: key.clone(),
                            open: open.clone(),
                        }));
                    }
                    overlay.opened.insert(wait, opening.kind());
                    overlay.keys.insert(key, wait);
                }
                (Some(wait), None) => {
                    self.check_answer(wait, source, &overlay, ctx, external).map_err(reject)?;
                    overlay.answered.insert(wait);
                    if ctx.current_wait_id == Some(wait) {
                        plan.released_current_wait = true;
                    }
                }
                (None, _) => {
                    if external {
                        if let Some(current) = self.blocking_wait(ctx, &overlay) {
                            return Err(reject(RejectReason::BlockedByCurrentWait {
                                current: current.clone(),
                            }));
                        }
                        if !(ctx.signal_schema)(c.payload.value()) {
                            return Err(reject(RejectReason::SchemaMismatch));
                        }
                    }
                }
            }
            plan.records.push(SignalRecord::from_valid_parts(
                c.id.clone(),
                c.wait_id.cloned(),
                c.status,
                c.opens.cloned(),
                c.payload.clone(),
            ));
        }
        if !plan.records.is_empty() {
            self.check_capacity(plan.records.len() as u64, ctx)?;
        }
        Ok(plan)
    }

    /// Rule 4 (addressing) and the addressed half of rule 5 (current-wait gating).
    fn check_answer(
        &self,
        wait: &WaitId,
        source: SignalSource,
        overlay: &Overlay<'_>,
        ctx: &AdmissionContext<'_>,
        external: bool,
    ) -> Result<(), RejectReason> {
        // A closed wait whose opening compaction dropped but whose external answer is kept:
        // still answered (without compaction this is the same rejection).
        if self.index.orphan_answers.contains_key(wait) {
            return Err(RejectReason::AlreadyAnswered { wait_id: wait.clone() });
        }
        let kind = overlay
            .opened
            .get(wait)
            .copied()
            .or_else(|| self.index.waits.get(wait).map(|e| e.kind))
            .ok_or_else(|| RejectReason::UnknownWait { wait_id: wait.clone() })?;
        if source != kind.answering_source() {
            return Err(RejectReason::WrongSource {
                wait_id: wait.clone(),
                kind,
                source_kind: source,
            });
        }
        if self.index.waits.get(wait).is_some_and(|e| e.answered_by.is_some()) {
            return Err(RejectReason::AlreadyAnswered { wait_id: wait.clone() });
        }
        if overlay.answered.contains(wait) {
            return Err(RejectReason::AnsweredTwiceInBatch { wait_id: wait.clone() });
        }
        if external {
            if let Some(current) = ctx.current_wait_id.filter(|c| *c != wait) {
                return Err(RejectReason::NotCurrentWait {
                    wait_id: wait.clone(),
                    current: current.clone(),
                });
            }
        }
        Ok(())
    }

    /// The current wait, when it is an external wait not yet answered (in history or earlier
    /// in this batch): it blocks unaddressed external input. Child waits never block.
    fn blocking_wait<'c>(
        &self,
        ctx: &AdmissionContext<'c>,
        overlay: &Overlay<'_>,
    ) -> Option<&'c WaitId> {
        let current = ctx.current_wait_id?;
        let entry = self.index.waits.get(current)?;
        let blocks = entry.kind == WaitKind::External
            && entry.answered_by.is_none()
            && !overlay.answered.contains(current);
        blocks.then_some(current)
    }

    /// Rule 7 over `incoming` new records.
    fn check_capacity(
        &self,
        incoming: u64,
        ctx: &AdmissionContext<'_>,
    ) -> Result<(), AdmissionError> {
        let limit = |reason| Err(AdmissionError::LimitExceeded { reason });
        let max = ctx.max_pending_signals;
        let pending = self.pending_count();
        if pending.saturating_add(incoming) > u64::from(max) {
            return limit(LimitReason::MaxPendingSignals { pending, incoming, max });
        }
        let remaining = pending.saturating_sub(u64::from(ctx.prepared_consumption));
        let reserved = ctx.prepared_reserved_settlements;
        if remaining.saturating_add(u64::from(reserved)).saturating_add(incoming) > u64::from(max) {
            return limit(LimitReason::PreparedReservations { remaining, reserved, incoming, max });
        }
        let quota = ctx.signals_quota;
        if let Some(maximum) = quota.maximum {
            let charged =
                quota.accepted.saturating_add(quota.allocated).saturating_add(u64::from(reserved));
            if charged.saturating_add(incoming) > maximum {
                return limit(LimitReason::SignalsQuota { charged, incoming, maximum });
            }
        }
        Ok(())
    }

    fn commit(&mut self, plan: Plan) -> AdmitOutcome {
        let mut appended = Vec::with_capacity(plan.records.len());
        for mut record in plan.records {
            let arrival = self.admitted + 1;
            record.set_arrival(arrival);
            self.index.apply(&record, arrival);
            self.records.push(record);
            self.admitted = arrival;
            appended.push(arrival);
        }
        AdmitOutcome {
            appended,
            duplicates: plan.duplicates,
            released_current_wait: plan.released_current_wait,
        }
    }
}

/// Rule 2: same id, wait_id, status, opening and normalized payload.
fn is_identical(existing: &SignalRecord, c: &Candidate<'_>) -> bool {
    existing.wait_id() == c.wait_id
        && existing.status() == c.status
        && existing.opens() == c.opens
        && existing.body().same_content(c.payload)
}
