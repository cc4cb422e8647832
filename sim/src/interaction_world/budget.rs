//! The budget invariants of an Interaction-world run, over every acknowledged cut:
//!
//! * `budget_respected` — no Interaction Process's spending (tokens, tool calls, charges for
//!   delegates that reported none) passes its limits (the root's budget, tightened for a
//!   delegate by its parent's grant), under any fault schedule. A scripted call reports 1 + 1
//!   tokens, never more than it reserved, so the limit is never passed even by the last call.
//!
//! * `budget_respected` (time) — no Interaction Process's settled model call started at or
//!   after its deadline (the root's recorded start plus the time limit, tightened for a
//!   delegate by the deadline its parent passed down), and the root's recorded start never
//!   changes from one acknowledged cut to the next (a restore does not restart the clock).
//!
//! * Under `OnExhausted::AskHuman` a limit is the declared one plus what the host granted
//!   (`ParentState::extended`, which `limits`/`time_limit` add): a Process's grants never
//!   shrink from one acknowledged cut to the next (a restore loses none) and never exceed the
//!   sum of every extension the spec's host may give (none is applied twice).
//!
//! Counting each settlement once is checked by the runtime's tests (a re-issued call, a resumed
//! run); a recount over acknowledged cuts here is not in place yet (its first form counted
//! settlements it should not have).

use super::spec::Spec;
use crate::world::Violation;
use keel::interaction::budget::{BudgetKind, Limits};
use keel::interaction::budget_question::{BudgetAnswer, BudgetExtension};
use keel::interaction::state::ParentState;
use keel::kernel::ids::ProcessId;
use keel::kernel::snapshot::TreeSnapshot;
use keel::kernel::waist::ExecutionState;
use std::collections::BTreeMap;

/// Checks `budget_respected`; returns (violations, checks).
pub fn check(spec: &Spec, decoded: &[Option<TreeSnapshot>]) -> (Vec<Violation>, u64) {
    let mut violations = Vec::new();
    let mut checks = 0u64;
    let mut root_start: Option<u64> = None;
    // Most commits leave a Process's committed state as it was (an effect boundary, another
    // Process's step): each distinct state is decoded once per Process, not once per cut.
    // Comparing the states costs a byte comparison of their canonical text, decoding one a
    // parse and a typed decode.
    let mut states: BTreeMap<ProcessId, (ExecutionState, Option<ParentState>)> = BTreeMap::new();
    let offered = spec.budget_answers.iter().fold(BudgetExtension::default(), |sum, a| match a {
        BudgetAnswer::Extend(e) => sum.saturating_add(*e),
        BudgetAnswer::Decline => sum,
    });
    let mut granted: BTreeMap<ProcessId, BudgetExtension> = BTreeMap::new();
    for (index, snap) in decoded.iter().enumerate() {
        let Some(snap) = snap else { continue };
        for p in snap.processes() {
            if p.committed_state.kind.as_str() != ParentState::KIND {
                continue;
            }
            if !states.get(&p.id).is_some_and(|(seen, _)| *seen == p.committed_state) {
                let state = ParentState::from_execution_state(&p.committed_state).ok();
                states.insert(p.id.clone(), (p.committed_state.clone(), state));
            }
            let Some(state) = states.get(&p.id).and_then(|(_, s)| s.as_ref()) else { continue };
            checks += 1;
            let before = granted.insert(p.id.clone(), state.extended).unwrap_or_default();
            if let Some(k) = BudgetKind::EVERY.iter().find(|k| state.extended.get(**k) < before.get(**k) || state.extended.get(**k) > offered.get(**k)) {
                violations.push(Violation::new(
                    "budget_respected",
                    format!(
                        "acknowledged commit {index}: {} holds a grant of {} {} (before {}, the host offers {} in all)",
                        p.id,
                        state.extended.get(*k),
                        k.as_str(),
                        before.get(*k),
                        offered.get(*k)
                    ),
                ));
            }
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
            let time = state.time_limit(if p.id == snap.root().id { spec.budget.and_then(|b| b.time_ms()) } else { None });
            if let (Some(deadline), Some(last)) = (state.clock.deadline(time), state.clock.last_call_ms) {
                checks += 1;
                if last >= deadline {
                    violations.push(Violation::new(
                        "budget_respected",
                        format!("acknowledged commit {index}: {} started a model call at {last} ms, at or past its deadline {deadline} ms", p.id),
                    ));
                }
            }
            if p.id == snap.root().id && time.is_some() {
                checks += 1;
                match (root_start, state.clock.started_ms) {
                    (None, now) => root_start = now,
                    (Some(first), now) if now != Some(first) => violations.push(Violation::new(
                        "budget_respected",
                        format!("acknowledged commit {index}: the run's recorded start changed from {first} ms to {now:?}"),
                    )),
                    _ => {}
                }
            }
        }
    }
    (violations, checks)
}
