//! The budget invariants of an Interaction-world run, over every acknowledged cut:
//!
//! * `budget_respected` — no Interaction Process's spending (tokens, tool calls, charges for
//!   delegates that reported none) passes its limits (the root's budget, tightened for a
//!   delegate by its parent's grant), under any fault schedule. A scripted call reports 1 + 1
//!   tokens, never more than it reserved, so the limit is never passed even by the last call.
//!
//! Counting each settlement once is checked by the runtime's tests (a re-issued call, a resumed
//! run); a recount over acknowledged cuts here is not in place yet (its first form counted
//! settlements it should not have).

use super::spec::Spec;
use crate::world::Violation;
use keel::interaction::budget::Limits;
use keel::interaction::state::ParentState;
use keel::kernel::snapshot::TreeSnapshot;

/// Checks `budget_respected`; returns (violations, checks).
pub fn check(spec: &Spec, decoded: &[Option<TreeSnapshot>]) -> (Vec<Violation>, u64) {
    let mut violations = Vec::new();
    let mut checks = 0u64;
    for (index, snap) in decoded.iter().enumerate() {
        let Some(snap) = snap else { continue };
        for p in snap.processes() {
            if p.committed_state.kind.as_str() != ParentState::KIND {
                continue;
            }
            let Ok(state) = ParentState::from_execution_state(&p.committed_state) else { continue };
            let own = if p.id == snap.root().id { spec.budget.unwrap_or_default().limits() } else { Limits::default() };
            let limits = state.limits(own);
            let spent = state.spending.amounts(state.usage);
            checks += 1;
            if let Some(over) = limits.first_exceeded(spent, Default::default()) {
                violations.push(Violation::new(
                    "budget_respected",
                    format!("acknowledged commit {index}: {} spent {} of {} limit {}", p.id, over.spent, over.kind.as_str(), over.limit),
                ));
            }
        }
    }
    (violations, checks)
}
