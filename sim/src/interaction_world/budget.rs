//! The budget invariants of an Interaction-world run, over every acknowledged cut:
//!
//! * `budget_respected` — no Interaction Process's spending (tokens, tool calls, charges for
//!   delegates that reported none) passes its limits (the root's budget, tightened for a
//!   delegate by its parent's grant), under any fault schedule. A scripted call reports 1 + 1
//!   tokens, never more than it reserved, so the limit is never passed even by the last call;
//! * `budget_settled_once` — a Process that folded no delegate's spending has counted exactly
//!   the model responses settled for it so far (distinct Effects across every writer: a call
//!   re-issued after an Unknown or re-read after a restore is one settlement), give or take the
//!   one settlement the next Step has not consumed yet.

use super::spec::Spec;
use crate::world::Violation;
use keel::interaction::budget::Limits;
use keel::interaction::protocol::ModelResult;
use keel::interaction::state::ParentState;
use keel::interaction::wire::Wire;
use keel::kernel::effect::EffectPhase;
use keel::kernel::ids::{EffectId, ProcessId};
use keel::kernel::snapshot::TreeSnapshot;
use std::collections::{BTreeMap, BTreeSet};

/// Checks both invariants; returns (violations, checks).
pub fn check(spec: &Spec, decoded: &[Option<TreeSnapshot>]) -> (Vec<Violation>, u64) {
    let mut violations = Vec::new();
    let mut checks = 0u64;
    let mut settled: BTreeMap<ProcessId, BTreeSet<EffectId>> = BTreeMap::new();
    for (index, snap) in decoded.iter().enumerate() {
        let Some(snap) = snap else { continue };
        for p in snap.processes() {
            for e in p.prepared.iter().flat_map(|x| &x.effects) {
                let EffectPhase::Settled(s) = &e.phase else { continue };
                if let Ok(ModelResult::Response { .. }) = ModelResult::from_payload(&s.payload) {
                    settled.entry(p.id.clone()).or_default().insert(e.id.clone());
                }
            }
        }
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
            if state.artifact_records.is_empty() && state.spending.charged.is_zero() {
                let count = settled.get(&p.id).map_or(0, |s| s.len() as u64);
                // Each scripted response reports one input token.
                let counted = state.usage.input_tokens;
                checks += 1;
                if counted > count || counted + 1 < count {
                    violations.push(Violation::new(
                        "budget_settled_once",
                        format!("acknowledged commit {index}: {} counted {counted} responses, {count} settled so far", p.id),
                    ));
                }
            }
        }
    }
    (violations, checks)
}
