//! The harness oracle: reusable checks the simulator and kernel tests run
//! after every run, and cheaply after every owner turn.
//!
//! * [`check_snapshot`] — invariants visible on one cut.
//! * [`check_transition`] — invariants between two consecutive acknowledged heads.
//! * [`check_commit`] / [`check_commits`] — the same over committer requests, plus the rules
//!   that need to know which boundary produced a head (an Unknown leaves only through a
//!   `resolved` boundary; a `settled` boundary follows a committed `pending`).
//! * [`check_history`] — a store's installed-commit history (boundaries per Effect, fencing,
//!   consecutive sequences).
//! * [`check_publications`] — every published Start/Result is in an acknowledged head.
//!
//! The oracle re-derives facts independently of the owner (identities, budgets, limits, wait
//! state) and never trusts `TreeSnapshot::build` validation: cuts may come from any writer.
//! Checks never panic; every finding is a [`Violation`] naming its invariant number.

use super::child::{Boundary, ChildWaitSpec};
use super::commit::{audit_history, CheckpointKind, CommitRecord, CommitRecordKind, EffectBoundaryKind, TreeCut};
use super::effect::{Effect, EffectPhase, FrameworkEffect};
use super::engine_signal::ChildWaitSatisfied;
use super::ids::{EffectId, IncarnationId, ProcessId, SignalId, WaitId};
use super::mailbox::WaitOpening;
use super::owner::{CommitRequest, Publication};
use super::process::Process;
use super::resource::{Allocation, Dimension, Quota};
use super::result::ProcessResult;
use super::signal::{SettlementStatus, SignalSource};
use super::snapshot::TreeSnapshot;
use super::status::{Cause, IntentOwner, Status};
use crate::json::{FromJson, ToJson};
use std::collections::{BTreeMap, BTreeSet};

/// One broken invariant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The invariant's number (1–28; see [`invariant_name`]).
    pub invariant: u8,
    /// The invariant's short name (see [`invariant_name`]).
    pub name: &'static str,
    pub detail: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invariant {} {}: {}", self.invariant, self.name, self.detail)
    }
}

/// The short name of a numbered invariant.
pub fn invariant_name(invariant: u8) -> &'static str {
    match invariant {
        1 => "frontier shape",
        2 => "pending before dispatch",
        3 => "no double dispatch unless replay-safe",
        4 => "unknown is sticky",
        5 => "unknown evidence is not erased by replay",
        6 => "one boundary of each kind per effect",
        7 => "original-order results",
        8 => "settlement signal identity",
        9 => "no signal consumed twice",
        10 => "no input swallowed",
        11 => "dedup and conflict",
        12 => "durable ack",
        13 => "wait discipline",
        14 => "budget never exceeded",
        15 => "allocation accounting",
        16 => "monotone privilege",
        17 => "tree limits",
        18 => "first terminal wins",
        19 => "terminal consistency",
        20 => "restore-before-adopt",
        21 => "published within acknowledged",
        22 => "fencing",
        23 => "commit sequence",
        24 => "snapshot round trip",
        25 => "deterministic identity",
        26 => "exact resolution continuation",
        27 => "progress determinism",
        28 => "drained implies quiescent",
        _ => "unknown invariant",
    }
}

/// Bound on identity derivations spent searching for a coordinate that is not where the
/// ordered scan expects it (only on the failure path or for a child id).
const SEARCH_BUDGET: u64 = 1 << 14;

#[derive(Default)]
struct Report(Vec<Violation>);

impl Report {
    fn push(&mut self, invariant: u8, detail: impl Into<String>) {
        self.0.push(Violation { invariant, name: invariant_name(invariant), detail: detail.into() });
    }
}

// ---------------------------------------------------------------------------------------------
// One cut
// ---------------------------------------------------------------------------------------------

/// Invariants checkable on one cut: 1, 7 (batch and child-wait order), 8, 9, 10 (prepared
/// consumption), 13 (as far as one cut shows), 14, 15, 16, 17, 19, 24, 25 (derived ids), 28.
pub fn check_snapshot(s: &TreeSnapshot) -> Vec<Violation> {
    let mut r = Report::default();
    round_trip(s, &mut r);
    r.0.extend(check_decoded_snapshot(s));
    r.0
}

/// [`check_snapshot`] without the round trip, for a cut that was just decoded from stored
/// bytes: decoding already proved what the round trip checks (the bytes re-encode
/// byte-identically, the digest is SHA-256 of exactly those bytes), so repeating it would
/// only re-encode and re-hash the same bytes.
pub fn check_decoded_snapshot(s: &TreeSnapshot) -> Vec<Violation> {
    let mut r = Report::default();
    let by_id: BTreeMap<&ProcessId, &Process> = s.processes().iter().map(|p| (&p.id, &**p)).collect();
    let mut children: BTreeMap<&ProcessId, Vec<&Process>> = BTreeMap::new();
    for p in s.processes() {
        if let Some(parent) = &p.relation.parent_id {
            children.entry(parent).or_default().push(p);
        }
    }
    if !s.limits.max_tree_processes().admits(0, s.processes().len() as u64) {
        r.push(17, format!("{} processes exceed max_tree_processes", s.processes().len()));
    }
    // The length of the whole text, summed from its pieces: building the text per head would
    // copy every record of every cut once more.
    let len = s.tree_cut().whole_len().unwrap_or(u64::MAX);
    if !s.limits.max_snapshot_bytes().admits(0, len) {
        r.push(17, format!("cut of {len} bytes exceeds max_snapshot_bytes"));
    }
    for p in s.processes() {
        let kids = children.get(&p.id).map(Vec::as_slice).unwrap_or(&[]);
        let parent = p.relation.parent_id.as_ref().and_then(|q| by_id.get(q).copied());
        check_process(s, p, parent, kids, &by_id, &mut r);
    }
    residues_in_cut(s, &by_id, &children, &mut r);
    r.0
}

/// 25 on one cut: every residue record names a present parent (a retired parent's residues
/// leave with it), is never a live id nor retired twice, keeps its key used under its parent
/// (keys unique over present and retired children), and each parent counts exactly its
/// residue records.
fn residues_in_cut(
    s: &TreeSnapshot,
    by_id: &BTreeMap<&ProcessId, &Process>,
    children: &BTreeMap<&ProcessId, Vec<&Process>>,
    r: &mut Report,
) {
    let mut counts: BTreeMap<&ProcessId, u64> = BTreeMap::new();
    let mut ids: BTreeSet<&ProcessId> = BTreeSet::new();
    let mut keys: BTreeSet<(&ProcessId, &str)> = BTreeSet::new();
    for (parent, kids) in children {
        for k in kids {
            if let Some(key) = &k.relation.child_key {
                keys.insert((parent, key.as_str()));
            }
        }
    }
    for res in s.residues() {
        let id = &res.process_id;
        if !by_id.contains_key(&res.parent_id) {
            r.push(25, format!("{id}: residue of absent parent {}", res.parent_id));
        }
        if by_id.contains_key(id) {
            r.push(25, format!("{id}: retired child is still in the tree"));
        }
        if !ids.insert(id) {
            r.push(25, format!("{id}: retired twice"));
        }
        if !keys.insert((&res.parent_id, res.child_key.as_str())) {
            r.push(25, format!("{id}: child key {} used twice under {}", res.child_key, res.parent_id));
        }
        *counts.entry(&res.parent_id).or_default() += 1;
    }
    for p in s.processes() {
        let counted = counts.get(&p.id).copied().unwrap_or(0);
        if counted != p.retired.count {
            r.push(25, format!("{}: counts {} retired children, the cut holds {counted} residues", p.id, p.retired.count));
        }
    }
}

/// 24: decode(encode(s)) == s, the bytes are the canonical encoding, digest = the tree digest
/// of the records the bytes split into.
fn round_trip(s: &TreeSnapshot, r: &mut Report) {
    let bytes = s.bytes();
    if TreeCut::from_whole(bytes).map(|c| c.digest).ok() != Some(s.digest()) {
        r.push(24, "digest is not the tree digest of the canonical bytes");
    }
    if s.to_json().to_canonical_bytes() != **bytes {
        r.push(24, "bytes are not the canonical encoding of the cut");
    }
    match TreeSnapshot::decode(bytes) {
        Ok(decoded) if decoded == *s => {}
        Ok(_) => r.push(24, "decoding the bytes yields a different cut"),
        Err(e) => r.push(24, format!("the cut does not decode: {e}")),
    }
}

fn check_process(
    s: &TreeSnapshot,
    p: &Process,
    parent: Option<&Process>,
    kids: &[&Process],
    by_id: &BTreeMap<&ProcessId, &Process>,
    r: &mut Report,
) {
    let pid = &p.id;
    // 1: frontier shape.
    if let Some(prepared) = &p.prepared {
        if let Err(e) = prepared.check_frontier() {
            r.push(1, format!("{pid}: {e}"));
        }
        // 25: EffectIds are derived from (process, step sequence, index).
        for (i, e) in prepared.effects.iter().enumerate() {
            if e.id != EffectId::derive(pid, prepared.sequence, i as u32) {
                r.push(25, format!("{pid}: effect {i} of step {} has an underived id {}", prepared.sequence, e.id));
            }
        }
        if Some(prepared.sequence) != p.committed_steps.checked_add(1) {
            r.push(25, format!("{pid}: prepared step {} is not committed_steps + 1", prepared.sequence));
        }
        // 10: a prepared Step consumes only pending input.
        if u64::from(prepared.intent.consumed()) > p.mailbox.pending_count() {
            r.push(10, format!("{pid}: the prepared step consumes more than is pending"));
        }
    }
    mailbox_identities(p, r);
    consumed_bodies(p, r);
    waits_in_cut(p, kids, r);
    budget_in_cut(p, kids, r);
    privilege_in_cut(p, parent, r);
    limits_in_cut(s, p, parent, kids, r);
    terminal_in_cut(p, r);
    child_wait_answers(p, kids, by_id, r);
    if let Some(parent) = parent {
        child_identity(p, parent, r);
    }
}

/// 8 and 7: every Engine-namespace record has its derived identity, and Effect-owned records
/// (settlements, framework results, wait openings) appear in (step, batch index) order with a
/// contiguous index run per Step. No external record uses the Engine namespace.
///
/// Compaction drops consumed Engine records, so after a gap in the arrivals the next
/// Effect-owned record is only known to come later: it is located by a bounded search
/// ([`locate_after`]) instead of the next-coordinate scan.
fn mailbox_identities(p: &Process, r: &mut Report) {
    let pid = &p.id;
    let max_step = p.committed_steps;
    // (step, index) of the last Effect-owned record.
    let mut cursor: Option<(u64, u32)> = None;
    let mut previous_arrival = 0u64;
    // Whether a record was dropped since the last Effect-owned record.
    let mut gap = false;
    for rec in p.mailbox.records() {
        let arrival = rec.arrival();
        gap |= arrival != previous_arrival.saturating_add(1);
        previous_arrival = arrival;
        match rec.source() {
            SignalSource::External => {
                if rec.id().is_engine_owned() {
                    r.push(8, format!("{pid}: external record {arrival} uses the engine namespace"));
                }
                if rec.status().is_some() {
                    r.push(8, format!("{pid}: external record {arrival} carries a settlement status"));
                }
            }
            SignalSource::ChildWaitAnswer => match rec.wait_id() {
                Some(w) if *rec.id() == SignalId::child_wait_satisfied(w) => {}
                _ => r.push(8, format!("{pid}: child-wait answer {arrival} has an underived id {}", rec.id())),
            },
            SignalSource::Settlement => {
                let matches = |e: &EffectId| match rec.wait_id() {
                    Some(w) => WaitId::of_effect(e) == *w && *rec.id() == SignalId::wait_opening(w),
                    None => SignalId::settlement(e) == *rec.id(),
                };
                let next = if std::mem::take(&mut gap) {
                    match locate_after(pid, cursor, max_step, p.prepared_effects, &matches) {
                        Located::At(c) => Some(c),
                        Located::Nowhere => None,
                        // Too far to search cheaply: the record stays unplaced.
                        Located::Undecided => {
                            gap = true;
                            continue;
                        }
                    }
                } else {
                    let next = cursor
                        .and_then(|(st, i)| i.checked_add(1).map(|i| (st, i)))
                        .filter(|(st, i)| matches(&EffectId::derive(pid, *st, *i)));
                    next.or_else(|| {
                        let from = cursor.map(|(st, _)| st + 1).unwrap_or(1);
                        (from..=max_step).find(|st| matches(&EffectId::derive(pid, *st, 0))).map(|st| (st, 0))
                    })
                };
                match next {
                    Some(c) => cursor = Some(c),
                    None => match search_coordinate(pid, max_step, p.prepared_effects, &matches) {
                        Some((st, i)) => r.push(
                            7,
                            format!("{pid}: record {arrival} belongs to effect ({st}, {i}) out of declaration order"),
                        ),
                        None => r.push(
                            8,
                            format!("{pid}: engine record {arrival} ({}) is not derived from any effect of this process", rec.id()),
                        ),
                    },
                }
            }
        }
    }
}

/// Where [`locate_after`] found a record's coordinate.
enum Located {
    At((u64, u32)),
    /// Searched every coordinate after the cursor: none matches.
    Nowhere,
    /// The search budget ran out first.
    Undecided,
}

/// The coordinate after `after` (exclusive; `None` = from the first) that `matches`, among
/// steps `..=max_step` and indices `< max_index`. Records left after compaction are mostly
/// recent (pending settlements, the opening of a wait opened lately) or right after the last
/// placed one, so the search walks forward from `after` and backward from `max_step` at once,
/// small indices first, within [`SEARCH_BUDGET`] derivations.
fn locate_after(
    pid: &ProcessId,
    after: Option<(u64, u32)>,
    max_step: u64,
    max_index: u64,
    matches: &dyn Fn(&EffectId) -> bool,
) -> Located {
    let (first_step, first_index) = match after {
        Some((st, i)) => (st, u64::from(i) + 1),
        None => (1, 0),
    };
    if max_step < first_step || max_index == 0 {
        return Located::Nowhere;
    }
    let span = max_step - first_step;
    let eligible = |st: u64, i: u64| i < max_index && (st != first_step || i >= first_index);
    let mut spent = 0u64;
    // Diagonal k holds the pairs (d, i) with d + i = k: d steps from either end, index i.
    for k in 0..=span.saturating_add(max_index) {
        for d in 0..=k.min(span) {
            let i = k - d;
            for st in [first_step + d, max_step - d] {
                if !eligible(st, i) || u32::try_from(i).is_err() {
                    continue;
                }
                spent += 1;
                if spent > SEARCH_BUDGET {
                    return Located::Undecided;
                }
                if matches(&EffectId::derive(pid, st, i as u32)) {
                    return Located::At((st, i as u32));
                }
            }
        }
    }
    Located::Nowhere
}

/// Exhaustive (bounded) search for the coordinate an Engine record was derived from.
fn search_coordinate(
    pid: &ProcessId,
    max_step: u64,
    max_index: u64,
    matches: &dyn Fn(&EffectId) -> bool,
) -> Option<(u64, u32)> {
    let indices = max_index.min(u64::from(u32::MAX));
    if max_step.saturating_mul(indices) > SEARCH_BUDGET {
        return None;
    }
    for st in 1..=max_step {
        for i in 0..indices as u32 {
            if matches(&EffectId::derive(pid, st, i)) {
                return Some((st, i));
            }
        }
    }
    None
}

/// 9: consumed records keep their digest only; pending ones keep their payload.
fn consumed_bodies(p: &Process, r: &mut Report) {
    let cursor = p.mailbox.cursor();
    for rec in p.mailbox.records() {
        let arrival = rec.arrival();
        if (arrival <= cursor) != rec.is_consumed() {
            let what = if arrival <= cursor { "keeps its payload after consumption" } else { "lost its payload before consumption" };
            r.push(9, format!("{}: record {arrival} {what}", p.id));
        }
    }
}

/// 13 on one cut: answered at most once, by the right source; a key is never open twice; the
/// current wait matches the status; open child waits name direct children.
fn waits_in_cut(p: &Process, kids: &[&Process], r: &mut Report) {
    let pid = &p.id;
    let mut answers: BTreeMap<&WaitId, u32> = BTreeMap::new();
    for rec in p.mailbox.records() {
        let Some(w) = rec.wait_id() else { continue };
        if !rec.is_answer() {
            continue;
        }
        *answers.entry(w).or_default() += 1;
        match p.mailbox.wait(w) {
            // Compaction dropped the opening of this closed wait; only a consumed external
            // answer is kept without it.
            None if p.mailbox.is_compacted()
                && rec.source() == SignalSource::External
                && rec.arrival() <= p.mailbox.cursor() => {}
            None => r.push(13, format!("{pid}: answer to wait {w} that was never opened")),
            Some(state) if state.kind.answering_source() != rec.source() => {
                r.push(13, format!("{pid}: wait {w} answered by the wrong source"))
            }
            Some(_) => {}
        }
    }
    for (w, n) in answers {
        if n > 1 {
            r.push(13, format!("{pid}: wait {w} answered {n} times"));
        }
    }
    if !p.is_terminal() {
        let mut keys = BTreeSet::new();
        for (w, state) in p.mailbox.open_waits() {
            if !keys.insert(state.key.clone()) {
                r.push(13, format!("{pid}: wait key {} is open twice (again by {w})", state.key));
            }
            if state.answered_by.is_some() {
                continue;
            }
            if let Some(WaitOpening::Children { spec, .. }) = p.mailbox.wait_opening(w) {
                match ChildWaitSpec::from_json(spec) {
                    Ok(spec) => {
                        for c in &spec.children {
                            if !kids.iter().any(|k| &k.id == c) {
                                r.push(13, format!("{pid}: open child wait {w} names {c}, not a direct child"));
                            }
                        }
                    }
                    Err(e) => r.push(13, format!("{pid}: child wait {w} has an invalid spec: {e}")),
                }
            }
        }
    }
    match (p.status, &p.current_wait_id) {
        (Status::Waiting, None) => r.push(13, format!("{pid}: waiting without a current wait")),
        (Status::Waiting | Status::Paused, Some(w)) => match p.mailbox.wait(w) {
            Some(state) if !state.closed && state.answered_by.is_none() => {}
            Some(_) => r.push(13, format!("{pid}: current wait {w} is already answered or closed")),
            None => r.push(13, format!("{pid}: current wait {w} was never opened")),
        },
        (status, Some(w)) => r.push(13, format!("{pid}: {} process holds current wait {w}", status.as_str())),
        _ => {}
    }
    if matches!(p.status, Status::Waiting | Status::Paused) && p.prepared.is_some() {
        r.push(13, format!("{pid}: a {} process holds a prepared step", p.status.as_str()));
    }
}

/// The debit a (parent) budget records for granting `child`, per dimension: the child's
/// maximum under a finite parent dimension, nothing under an unlimited one. `Err` names a
/// dimension where the grant is illegal.
fn debit_of(parent: &super::resource::Budget, child: &super::resource::Budget) -> Result<Allocation, String> {
    let mut debit = Allocation::ZERO;
    for d in Dimension::ALL {
        match (parent.quota(d), child.quota(d)) {
            (Quota::Unlimited, _) => {}
            (Quota::Finite(_), Quota::Unlimited) => return Err(format!("{d}: finite parent granted an unlimited quota")),
            (Quota::Finite(pmax), Quota::Finite(cmax)) if cmax > pmax => {
                return Err(format!("{d}: child maximum {cmax} exceeds parent maximum {pmax}"))
            }
            (Quota::Finite(_), Quota::Finite(cmax)) => debit.set(d, cmax),
        }
    }
    Ok(debit)
}

/// 14 and 15 on one cut.
fn budget_in_cut(p: &Process, kids: &[&Process], r: &mut Report) {
    let pid = &p.id;
    let usage = p.usage();
    if let Err(e) = p.budget.check(&usage, &p.allocated) {
        r.push(14, format!("{pid}: {e}"));
    }
    // A prepared Step of a live Process still holds its Step and one settlement Signal per Effect.
    if let (Some(prepared), false) = (&p.prepared, p.is_terminal()) {
        let n = prepared.effects.len() as u64;
        if !p.budget.steps.admits(p.committed_steps.saturating_add(p.allocated.steps), 1) {
            r.push(14, format!("{pid}: the steps quota no longer holds the prepared step"));
        }
        if !p.budget.signals.admits(usage.accepted_signals.saturating_add(p.allocated.signals), n) {
            r.push(14, format!("{pid}: the signals quota no longer holds the batch's {n} settlement signals"));
        }
    }
    // Retired children keep their debits in one aggregate (grants are permanent debits).
    let mut sum = p.retired.debits;
    for c in kids {
        match debit_of(&p.budget, &c.budget) {
            Ok(d) => match sum.checked_add(&d) {
                Some(total) => sum = total,
                None => r.push(15, format!("{pid}: child debits overflow")),
            },
            Err(e) => r.push(15, format!("{pid}: child {} is not a legal grant: {e}", c.id)),
        }
    }
    if sum != p.allocated {
        r.push(15, format!("{pid}: allocated_resources {:?} differ from the children's debits {sum:?}", p.allocated));
    }
}

/// 16 on one cut: a child never holds authority its parent lacks; an admitted child start
/// never asked for it either.
fn privilege_in_cut(p: &Process, parent: Option<&Process>, r: &mut Report) {
    if let Some(parent) = parent {
        if let Some(missing) = p.capabilities.first_missing_from(&parent.capabilities) {
            r.push(16, format!("{}: holds {missing}, which its parent {} lacks", p.id, parent.id));
        }
    }
    for e in p.prepared.iter().flat_map(|s| &s.effects) {
        if let (Effect::Framework(FrameworkEffect::StartChild(spec)), EffectPhase::Settled(st)) = (&e.effect, &e.phase) {
            if st.status == SettlementStatus::Succeeded && !spec.capabilities.is_subset_of(&p.capabilities) {
                r.push(16, format!("{}: child start {} succeeded with escalated capabilities", p.id, e.id));
            }
        }
    }
}

/// 17 on one cut.
fn limits_in_cut(s: &TreeSnapshot, p: &Process, parent: Option<&Process>, kids: &[&Process], r: &mut Report) {
    let pid = &p.id;
    let limits = &s.limits;
    if p.relation.root_id != s.root_id {
        r.push(17, format!("{pid}: belongs to root {}", p.relation.root_id));
    }
    if !limits.admits_depth(p.relation.depth) {
        r.push(17, format!("{pid}: depth {} exceeds max_depth {}", p.relation.depth, limits.max_depth()));
    }
    match (&p.relation.parent_id, parent) {
        (Some(parent_id), None) => r.push(17, format!("{pid}: parent {parent_id} is absent")),
        (Some(_), Some(q)) if q.relation.depth.checked_add(1) != Some(p.relation.depth) => {
            r.push(17, format!("{pid}: depth is not its parent's depth + 1"))
        }
        _ => {}
    }
    let lifetime = (kids.len() as u64).saturating_add(p.retired.count);
    if !limits.max_children().admits(0, lifetime) {
        r.push(17, format!("{pid}: {lifetime} lifetime children exceed max_children"));
    }
    let active = kids.iter().filter(|c| !c.is_terminal()).count();
    if active > limits.max_active_children() as usize {
        r.push(17, format!("{pid}: {active} active children exceed max_active_children {}", limits.max_active_children()));
    }
    let max_pending = u64::from(limits.max_pending_signals());
    let pending = p.mailbox.pending_count();
    if pending > max_pending {
        r.push(17, format!("{pid}: {pending} pending signals exceed max_pending_signals {max_pending}"));
    }
    if let (Some(prepared), false) = (&p.prepared, p.is_terminal()) {
        let after = pending.saturating_sub(u64::from(prepared.intent.consumed())) + prepared.effects.len() as u64;
        if after > max_pending {
            r.push(17, format!("{pid}: pending after the prepared step ({after}) exceeds max_pending_signals {max_pending}"));
        }
    }
    let quota = limits.max_process_snapshot_bytes();
    if !quota.is_unlimited() {
        let len = p.to_json().canonical_len() as u64;
        if !quota.admits(0, len) {
            r.push(17, format!("{pid}: encoded size {len} exceeds max_process_snapshot_bytes"));
        }
    }
}

/// 19 on one cut.
fn terminal_in_cut(p: &Process, r: &mut Report) {
    let pid = &p.id;
    match (&p.finish, p.is_terminal()) {
        (None, true) => r.push(19, format!("{pid}: terminal without termination facts")),
        (Some(_), false) => r.push(19, format!("{pid}: {} with termination facts", p.status.as_str())),
        (None, false) => {}
        (Some(f), true) => {
            if f.termination.status() != p.status {
                r.push(19, format!("{pid}: termination says {}, status {}", f.termination.status().as_str(), p.status.as_str()));
            }
            if let Err(e) = f.termination.validate() {
                r.push(19, format!("{pid}: invalid termination: {e}"));
            }
            if (p.status == Status::Completed) != f.output.is_some() {
                r.push(19, format!("{pid}: only a completed process has output"));
            }
            if !p.pending_control.is_empty() {
                r.push(19, format!("{pid}: a terminal process keeps pending control"));
            }
            let unknown = p.prepared.as_ref().map(|s| s.unknown_ids()).unwrap_or_default();
            if f.termination.unresolved_effect_ids != unknown {
                r.push(19, format!("{pid}: termination's unresolved ids differ from the batch's unknowns"));
            }
            if p.prepared.as_ref().is_some_and(|s| s.has_pending()) {
                r.push(19, format!("{pid}: a terminal process keeps a pending effect"));
            }
            if p.status == Status::Completed && p.prepared.is_some() {
                r.push(19, format!("{pid}: a completed process keeps a prepared step"));
            }
        }
    }
}

/// The Result a terminal Process publishes (the same projection the owner uses).
fn result_of(p: &Process) -> Option<ProcessResult> {
    let f = p.finish.as_ref()?;
    Some(ProcessResult {
        process_id: p.id.clone(),
        deployment_ref: p.deployment_ref.clone(),
        termination: f.termination.clone(),
        output: f.output.clone(),
    })
}

/// Walks the subtree of `root` (inclusive): whether every member is terminal, and the sorted
/// union of their terminations' unresolved Effects.
fn subtree_facts(root: &Process, by_id: &BTreeMap<&ProcessId, &Process>) -> (bool, Vec<(ProcessId, EffectId)>) {
    let mut all_terminal = true;
    let mut unresolved = Vec::new();
    let mut stack = vec![root];
    // A well-formed tree is finite and acyclic; the visited set guards a corrupt one.
    let mut seen = BTreeSet::new();
    while let Some(p) = stack.pop() {
        if !seen.insert(&p.id) {
            continue;
        }
        all_terminal &= p.is_terminal();
        if let Some(f) = &p.finish {
            unresolved.extend(f.termination.unresolved_effect_ids.iter().map(|e| (p.id.clone(), e.clone())));
        }
        stack.extend(by_id.values().filter(|c| c.relation.parent_id.as_ref() == Some(&p.id)));
    }
    unresolved.sort();
    (all_terminal, unresolved)
}

/// 28, 7 and 13 for pending child-wait satisfactions: they answer their registration, list
/// children in request order, carry the children's captured Results, and a drained outcome
/// implies a terminal subtree whose unresolved Effects it lists exactly.
fn child_wait_answers(p: &Process, kids: &[&Process], by_id: &BTreeMap<&ProcessId, &Process>, r: &mut Report) {
    let pid = &p.id;
    for rec in p.mailbox.records() {
        let arrival = rec.arrival();
        if rec.source() != SignalSource::ChildWaitAnswer {
            continue;
        }
        let (Some(signal), Some(w)) = (rec.to_signal(), rec.wait_id()) else { continue };
        let sat = match ChildWaitSatisfied::parse(&signal) {
            Ok(s) => s,
            Err(e) => {
                r.push(28, format!("{pid}: child-wait answer {arrival} does not parse: {e}"));
                continue;
            }
        };
        let spec = match p.mailbox.wait_opening(w) {
            Some(WaitOpening::Children { spec, .. }) => match ChildWaitSpec::from_json(spec) {
                Ok(spec) => spec,
                Err(_) => continue, // reported by waits_in_cut while the wait is open
            },
            _ => continue, // reported by waits_in_cut
        };
        if sat.key != spec.key || sat.boundary != spec.boundary {
            r.push(13, format!("{pid}: answer {arrival} does not match its registration's key/boundary"));
        }
        if sat.outcomes.len() < spec.condition.required(spec.children.len()) {
            r.push(13, format!("{pid}: answer {arrival} lists fewer children than its condition requires"));
        }
        let mut last_position: Option<usize> = None;
        for o in &sat.outcomes {
            let Some(child) = kids.iter().find(|c| c.relation.child_key.as_ref() == Some(&o.key)) else {
                r.push(13, format!("{pid}: answer {arrival} names child key {} with no child", o.key));
                continue;
            };
            let Some(position) = spec.children.iter().position(|c| *c == child.id) else {
                r.push(13, format!("{pid}: answer {arrival} lists {} which the wait does not name", child.id));
                continue;
            };
            if last_position.is_some_and(|last| position <= last) {
                r.push(7, format!("{pid}: answer {arrival} does not list children in request order"));
            }
            last_position = Some(position);
            if o.boundary != spec.boundary {
                r.push(13, format!("{pid}: answer {arrival} outcome boundary differs from the wait's"));
            }
            match result_of(child) {
                None => r.push(
                    if spec.boundary == Boundary::SubtreeDrained { 28 } else { 13 },
                    format!("{pid}: answer {arrival} lists {} which is not terminal", child.id),
                ),
                Some(result) if result.to_json() != o.result.to_json() => {
                    r.push(18, format!("{pid}: answer {arrival} carries a result for {} that differs from its captured result", child.id))
                }
                Some(_) => {}
            }
            if spec.boundary == Boundary::SubtreeDrained {
                let (quiet, unresolved) = subtree_facts(child, by_id);
                if !quiet {
                    r.push(28, format!("{pid}: drained outcome for {} while its subtree is not terminal", child.id));
                }
                if unresolved != o.subtree_unresolved_effects {
                    r.push(28, format!("{pid}: drained outcome for {} lists other unresolved effects than its subtree", child.id));
                }
            }
        }
    }
}

thread_local! {
    /// (parent, child) → the (step, index) of the parent's Effect whose derived child id is
    /// the child's, for children whose start effect was found by search (see
    /// `child_identity`).
    static START_EFFECTS: std::cell::RefCell<BTreeMap<(ProcessId, ProcessId), (u64, u32)>> =
        const { std::cell::RefCell::new(BTreeMap::new()) };
}

/// Bound on [`START_EFFECTS`] (cleared when full; a cache only).
const START_EFFECTS_KEPT: usize = 4096;

/// 25 on one cut: a child's ProcessId is derived from the EffectId of the start that made it.
fn child_identity(c: &Process, parent: &Process, r: &mut Report) {
    let from_batch = parent.prepared.iter().flat_map(|s| &s.effects).any(|e| ProcessId::child(&e.id) == c.id);
    if from_batch {
        return;
    }
    let steps = parent.committed_steps;
    let indices = parent.prepared_effects.min(u64::from(u32::MAX));
    if steps.saturating_mul(indices) > SEARCH_BUDGET {
        return; // too costly to prove here; the identity is re-derived on every start anyway
    }
    // Index-major: a Step declares few Effects, so a child's start sits at a small index of
    // some Step; walking every Step per index finds it after about `index × steps`
    // derivations instead of `step × indices` (the same finite set, so the same verdict).
    // A start effect found once for this (parent, child) is a proof that stays true (ids are
    // pure functions of their parts): it answers again while it is within the ranges, and the
    // search runs only otherwise. The oracle checks every child on every commit.
    let key = (parent.id.clone(), c.id.clone());
    let known = START_EFFECTS.with(|m| m.borrow().get(&key).copied());
    let found = known.is_some_and(|(st, i)| u64::from(i) < indices && (1..=steps).contains(&st)) || {
        let hit = (0..indices as u32)
            .find_map(|i| (1..=steps).find(|&st| ProcessId::child(&EffectId::derive(&parent.id, st, i)) == c.id).map(|st| (st, i)));
        if let Some(hit) = hit {
            START_EFFECTS.with(|m| {
                let mut m = m.borrow_mut();
                if m.len() >= START_EFFECTS_KEPT {
                    m.clear();
                }
                m.insert(key, hit);
            });
        }
        hit.is_some()
    };
    if !found {
        r.push(25, format!("{}: not derived from any start effect of its parent {}", c.id, parent.id));
    }
}

// ---------------------------------------------------------------------------------------------
// Consecutive heads
// ---------------------------------------------------------------------------------------------

/// Precedence rank of a cause (lower wins): kill > deadline > cancel > failure > completion.
fn rank(cause: Cause) -> u8 {
    match cause {
        Cause::EngineKill => 1,
        Cause::HostDeadline | Cause::ParentDeadline => 2,
        Cause::HostCancellation | Cause::ParentCancellation => 3,
        Cause::ContractFailure | Cause::ExternalFailure | Cause::Panic | Cause::ExecutionFailure => 4,
        Cause::Completion => 5,
    }
}

fn phase_rank(phase: &EffectPhase) -> u8 {
    match phase {
        EffectPhase::Planned => 0,
        EffectPhase::Pending => 1,
        EffectPhase::Unknown => 2,
        EffectPhase::Settled(_) => 3,
    }
}

/// Invariants across two consecutive acknowledged heads of one tree: 1/2/4/6 (effect phase
/// progression), 9 (append-only mailbox, monotone cursor), 10 (no adoption ⇒ no consumption;
/// a terminal interruption keeps mailbox, committed state and batch), 13 (only an answer
/// releases Waiting), 14 (usage monotone, replay does not charge), 15 (debits permanent), 16
/// (grants unchanged), 17 (limits fixed), 18 (first terminal wins, precedence, first intent
/// wins), 25 (identity facts fixed).
pub fn check_transition(before: &TreeSnapshot, after: &TreeSnapshot) -> Vec<Violation> {
    let mut r = Report::default();
    if before.root_id != after.root_id {
        r.push(22, format!("heads of different roots {} and {}", before.root_id, after.root_id));
        return r.0;
    }
    if before.limits != after.limits {
        r.push(17, "tree limits changed between heads");
    }
    for b in before.processes() {
        let pid = &b.id;
        let Some(a) = after.process(pid) else {
            left_the_tree(b, after, &mut r);
            continue;
        };
        process_transition(b, a, &mut r);
    }
    retired_transition(before, after, &mut r);
    for a in after.processes() {
        if before.process(&a.id).is_some() {
            continue;
        }
        if before.residue(&a.id).is_some() {
            r.push(25, format!("{}: a retired id is live again", a.id));
        }
        if let Some(parent) = a.relation.parent_id.as_ref().and_then(|q| before.process(q)) {
            if parent.is_terminal() {
                r.push(18, format!("{}: started under terminal parent {}", a.id, parent.id));
            }
        }
    }
    r.0
}

/// A Process may leave the tree only by retirement (compaction): it was terminal, a residue
/// record under its parent took its place (same key, the digest of the Result it ended with),
/// and it held no unresolved Unknown (4: an Unknown never leaves the store without a
/// resolution).
fn left_the_tree(b: &Process, after: &TreeSnapshot, r: &mut Report) {
    let pid = &b.id;
    let residue = after.residue(pid).filter(|res| Some(&res.parent_id) == b.relation.parent_id.as_ref());
    let Some(residue) = residue else {
        r.push(if b.is_terminal() { 18 } else { 10 }, format!("{pid}: left the tree"));
        return;
    };
    let Some(result) = result_of(b) else {
        r.push(10, format!("{pid}: retired while not terminal"));
        return;
    };
    let unknowns: BTreeSet<EffectId> =
        result.termination.unresolved_effect_ids.iter().cloned().chain(b.unknown_effect_ids()).collect();
    if !unknowns.is_empty() {
        r.push(4, format!("{pid}: retired with unresolved unknowns {unknowns:?}, which left the store"));
    }
    if Some(&residue.child_key) != b.relation.child_key.as_ref()
        || residue.result_digest != super::retired::result_digest(&result)
    {
        r.push(25, format!("{pid}: retired residue disagrees with the child's key or Result"));
    }
}

/// 15 and 25 across heads: a residue record never changes and leaves only with its parent
/// (retired in between); a new one replaces a Process of the previous head; each parent's
/// count grows by exactly its new residues and its debit aggregate by exactly their debits.
fn retired_transition(before: &TreeSnapshot, after: &TreeSnapshot, r: &mut Report) {
    for rb in before.residues() {
        let id = &rb.process_id;
        match after.residue(id) {
            Some(ra) if ra == &**rb => {}
            Some(_) => r.push(25, format!("{id}: residue record changed between heads")),
            None if after.process(&rb.parent_id).is_none() && after.residue(&rb.parent_id).is_some() => {}
            None => r.push(25, format!("{id}: residue record left while its parent {} did not retire", rb.parent_id)),
        }
    }
    let mut new: BTreeMap<&ProcessId, Vec<&Process>> = BTreeMap::new();
    for ra in after.residues() {
        if before.residue(&ra.process_id).is_some() {
            continue;
        }
        match before.process(&ra.process_id) {
            Some(child) => new.entry(&ra.parent_id).or_default().push(child),
            None => r.push(25, format!("{}: retired, which the previous head did not hold", ra.process_id)),
        }
    }
    for a in after.processes() {
        let pid = &a.id;
        let (count, debits) = before.process(pid).map_or((0, Allocation::ZERO), |b| (b.retired.count, b.retired.debits));
        let retired = new.get(pid).map(Vec::as_slice).unwrap_or(&[]);
        if count.checked_add(retired.len() as u64) != Some(a.retired.count) {
            r.push(25, format!("{pid}: retired count {} is not {count} plus the {} retired since", a.retired.count, retired.len()));
        }
        let mut expected = debits;
        for child in retired {
            match debit_of(&a.budget, &child.budget).ok().and_then(|d| expected.checked_add(&d)) {
                Some(total) => expected = total,
                None => r.push(15, format!("{pid}: retired child {} carries no legal debit", child.id)),
            }
        }
        if expected != a.retired.debits {
            r.push(15, format!("{pid}: retired debits {:?} differ from the retired children's debits {expected:?}", a.retired.debits));
        }
    }
}

fn process_transition(b: &Process, a: &Process, r: &mut Report) {
    let pid = &b.id;
    // 25 / 14 / 16: identity facts, budget and grants are fixed for life.
    if a.relation != b.relation
        || a.deployment_ref != b.deployment_ref
        || a.started_at != b.started_at
        || a.child_request_digest != b.child_request_digest
    {
        r.push(25, format!("{pid}: identity facts changed"));
    }
    if a.budget != b.budget {
        r.push(14, format!("{pid}: budget changed"));
    }
    if a.capabilities != b.capabilities {
        r.push(16, format!("{pid}: capabilities changed"));
    }
    // 14: usage is monotone.
    let (ub, ua) = (b.usage(), a.usage());
    if ua.committed_steps < ub.committed_steps
        || ua.prepared_effects < ub.prepared_effects
        || ua.accepted_signals < ub.accepted_signals
        || ua.dropped_deltas < ub.dropped_deltas
    {
        r.push(14, format!("{pid}: usage went backwards ({ub:?} → {ua:?})"));
    }
    // 15: debits are permanent.
    if Dimension::ALL.iter().any(|d| a.allocated.get(*d) < b.allocated.get(*d)) {
        r.push(15, format!("{pid}: a child debit was released"));
    }
    mailbox_transition(b, a, r);
    // 10: input is consumed only by an adopted Step.
    if a.committed_steps == b.committed_steps {
        if a.mailbox.cursor() != b.mailbox.cursor() {
            r.push(10, format!("{pid}: the cursor moved without an adopted step"));
        }
        if a.committed_state != b.committed_state {
            r.push(10, format!("{pid}: the committed state changed without an adopted step"));
        }
    }
    if b.is_terminal() {
        terminal_frozen(b, a, r);
        return;
    }
    batch_transition(b, a, r);
    intents_transition(b, a, r);
    // 13: only an answer to the current wait releases Waiting.
    if let (Status::Waiting, Some(w)) = (b.status, &b.current_wait_id) {
        let still = a.current_wait_id.as_ref() == Some(w);
        // A wait no longer retained was closed (answered and consumed) and compacted away.
        let answered = a.mailbox.is_answered(w) || (a.mailbox.is_compacted() && a.mailbox.wait(w).is_none());
        if !a.is_terminal() && !still && !answered {
            r.push(13, format!("{pid}: left Waiting on {w} without an answer to it"));
        }
    }
}

/// 9 across heads: the mailbox is append-only with identical record facts; the cursor is
/// monotone, so every record is consumed at most once. Compaction may drop a record only if it
/// is a consumed Engine record no open wait needs (9, 13); an external record is never dropped,
/// since deduplication and conflict detection read it (11); a dropped record never returns.
fn mailbox_transition(b: &Process, a: &Process, r: &mut Report) {
    let pid = &b.id;
    let (mb, ma) = (&b.mailbox, &a.mailbox);
    if ma.cursor() < mb.cursor() {
        r.push(9, format!("{pid}: cursor moved back from {} to {}", mb.cursor(), ma.cursor()));
    }
    if ma.len() < mb.len() {
        r.push(9, format!("{pid}: mailbox lost records"));
        return;
    }
    for rb in mb.records() {
        let arrival = rb.arrival();
        let Some(ra) = ma.record(arrival) else {
            if !rb.id().is_engine_owned() {
                r.push(11, format!("{pid}: external record {arrival} ({}) was dropped: a redelivery would be admitted again", rb.id()));
            } else if arrival > ma.cursor() {
                r.push(9, format!("{pid}: pending record {arrival} was dropped"));
            } else if let Some(w) = rb.wait_id().filter(|w| ma.wait(w).is_some_and(|s| !s.closed)) {
                r.push(13, format!("{pid}: record {arrival} of open wait {w} was dropped"));
            }
            continue;
        };
        if rb.id() != ra.id()
            || rb.wait_id() != ra.wait_id()
            || rb.status() != ra.status()
            || rb.opens() != ra.opens()
            || rb.payload_digest() != ra.payload_digest()
        {
            r.push(9, format!("{pid}: record {arrival} changed between heads"));
            return;
        }
    }
    for ra in ma.records().iter().take_while(|ra| ra.arrival() <= mb.len()) {
        if mb.record(ra.arrival()).is_none() {
            r.push(9, format!("{pid}: record {} reappeared after it was dropped", ra.arrival()));
        }
    }
}

/// 18: a terminal Process never changes: status, termination and output first of all.
fn terminal_frozen(b: &Process, a: &Process, r: &mut Report) {
    let pid = &b.id;
    if a.status != b.status || a.finish != b.finish {
        r.push(18, format!("{pid}: terminal {} became {} or its termination changed", b.status.as_str(), a.status.as_str()));
    } else if a != b {
        r.push(18, format!("{pid}: a terminal process changed"));
    }
}

/// 1, 2, 4, 6, 10, 14 for a batch seen in both heads (same Step sequence), and what may happen
/// to a batch that is gone from the later head.
fn batch_transition(b: &Process, a: &Process, r: &mut Report) {
    let pid = &b.id;
    let Some(pb) = &b.prepared else { return };
    let same = a.prepared.as_ref().filter(|pa| pa.sequence == pb.sequence);
    let Some(pa) = same else {
        // The batch left: it must have been finalized (adopted), which needs every Effect to
        // have been definitely settled in a committed head first.
        for e in &pb.effects {
            match e.phase {
                EffectPhase::Unknown => r.push(4, format!("{pid}: unknown {} vanished without a resolution", e.id)),
                EffectPhase::Pending => r.push(6, format!("{pid}: pending {} vanished without a settled head", e.id)),
                _ => {}
            }
        }
        if a.committed_steps < pb.sequence {
            r.push(10, format!("{pid}: prepared step {} dropped without adoption", pb.sequence));
        }
        return;
    };
    if pa.candidate_state != pb.candidate_state || pa.intent != pb.intent || pa.effects.len() != pb.effects.len() {
        r.push(25, format!("{pid}: prepared step {} changed its candidate or intent", pb.sequence));
        return;
    }
    if a.prepared_effects != b.prepared_effects {
        r.push(14, format!("{pid}: prepared_effects changed while step {} stayed prepared", pb.sequence));
    }
    for (eb, ea) in pb.effects.iter().zip(&pa.effects) {
        if eb.id != ea.id || eb.effect != ea.effect {
            r.push(25, format!("{pid}: effect {} changed its identity or request", eb.id));
            continue;
        }
        let id = &eb.id;
        match (&eb.phase, &ea.phase) {
            (x, y) if x == y => {}
            (EffectPhase::Settled(_), _) => r.push(6, format!("{pid}: definite settlement of {id} changed")),
            (EffectPhase::Unknown, EffectPhase::Settled(_)) => {}
            (EffectPhase::Unknown, _) => r.push(4, format!("{pid}: unknown {id} became {}", ea.phase.name())),
            (EffectPhase::Pending, EffectPhase::Planned) if !a.is_terminal() => {
                r.push(1, format!("{pid}: pending {id} was revoked while the process lives"))
            }
            (EffectPhase::Planned, EffectPhase::Unknown) => {
                r.push(2, format!("{pid}: {id} became unknown without a committed pending head"))
            }
            (x, y) if phase_rank(y) < phase_rank(x) && !matches!(x, EffectPhase::Pending) => {
                r.push(1, format!("{pid}: {id} went back from {} to {}", x.name(), y.name()))
            }
            _ => {}
        }
        if eb.phase == EffectPhase::Unknown && eb.diagnostic.is_some() && ea.diagnostic != eb.diagnostic {
            r.push(4, format!("{pid}: the diagnostic of unknown {id} was not retained"));
        }
    }
}

/// 18 (precedence, first intent wins) and 10 (terminal interruption preserves input) for a
/// Process that was live in the earlier head.
fn intents_transition(b: &Process, a: &Process, r: &mut Report) {
    let pid = &b.id;
    let pc = &b.pending_control;
    if !a.is_terminal() {
        let pa = &a.pending_control;
        let kept = (pc.kill.is_none() || pa.kill == pc.kill)
            && (pc.deadline.is_none() || pa.deadline == pc.deadline)
            && (pc.cancellation.is_none() || pa.cancellation == pc.cancellation)
            && (pc.failure.is_none() || pa.failure == pc.failure);
        if !kept {
            r.push(18, format!("{pid}: a recorded intent was replaced or dropped"));
        }
        return;
    }
    let Some(f) = &a.finish else { return };
    let t = &f.termination;
    if let Some((strongest, _, _)) = pc.resolve(None) {
        if rank(t.cause) > rank(strongest) {
            r.push(18, format!("{pid}: ended {} despite a recorded {} intent", t.cause.as_str(), strongest.as_str()));
        }
    }
    let first_reason = match t.cause {
        Cause::EngineKill => pc.kill.clone(),
        Cause::HostDeadline | Cause::ParentDeadline => pc.deadline.as_ref().map(|(o, reason)| {
            if (*o == IntentOwner::Host) != (t.cause == Cause::HostDeadline) {
                r.push(18, format!("{pid}: deadline owner differs from the recorded intent"));
            }
            reason.clone()
        }),
        Cause::HostCancellation | Cause::ParentCancellation => pc.cancellation.as_ref().map(|(o, reason)| {
            if (*o == IntentOwner::Host) != (t.cause == Cause::HostCancellation) {
                r.push(18, format!("{pid}: cancellation owner differs from the recorded intent"));
            }
            reason.clone()
        }),
        _ => None,
    };
    if first_reason.is_some_and(|reason| reason != t.reason) {
        r.push(18, format!("{pid}: termination reason is not the first recorded intent's"));
    }
    if let (Some(failure), Some(got)) = (&pc.failure, &t.failure) {
        if rank(t.cause) == 4 && got != failure {
            r.push(18, format!("{pid}: termination failure is not the first recorded failure"));
        }
    }
    // 10: a terminal interruption (no Step adopted) keeps input and the batch as evidence.
    if a.committed_steps == b.committed_steps && t.cause != Cause::Completion {
        if rank(t.cause) <= 3 && a.mailbox.len() != b.mailbox.len() {
            r.push(10, format!("{pid}: the mailbox changed during a terminal interruption"));
        }
        if let Some(pb) = &b.prepared {
            let kept = a.prepared.as_ref().is_some_and(|pa| {
                pa.sequence == pb.sequence && pa.candidate_state == pb.candidate_state && pa.intent == pb.intent
            });
            if !kept {
                r.push(10, format!("{pid}: the interrupted batch of step {} was not kept as evidence", pb.sequence));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Commit requests
// ---------------------------------------------------------------------------------------------

/// Checks one acknowledged commit against the previous acknowledged head of the same writer
/// (`None` for the first). Returns the decoded head (if it decodes) and the violations:
/// [`check_snapshot`], [`check_transition`], and the boundary-aware rules — 4 (an Unknown
/// becomes definite only in a `resolved` boundary for it), 2 (a `settled` boundary follows a
/// head where the Effect was pending), 22 (an activation changes only the incarnation).
pub fn check_commit(previous: Option<&TreeSnapshot>, request: &CommitRequest) -> (Option<TreeSnapshot>, Vec<Violation>) {
    check_commit_reusing(previous, None, request)
}

/// [`check_commit`] for a reader that has already decoded other heads: when the writer has
/// no previous head here (its first commit, e.g. the activation after a restore), records
/// byte-identical to `known`'s (any head already decoded from the same store, typically the
/// previous writer's last) are taken from it instead of being parsed again. Only a cache:
/// every check and its verdict are [`check_commit`]'s, for any `known`.
pub fn check_commit_reusing(
    previous: Option<&TreeSnapshot>,
    known: Option<&TreeSnapshot>,
    request: &CommitRequest,
) -> (Option<TreeSnapshot>, Vec<Violation>) {
    let mut r = Report::default();
    // A delta names its unchanged records by key and digest: resolve it against the
    // previous acknowledged head, as the store does.
    let cut = match request.cut().resolve(previous.map(TreeSnapshot::tree_cut)) {
        Ok(c) => c,
        Err(e) => {
            r.push(24, format!("{} commit: the delta does not resolve against the previous head: {e}", request.boundary_name()));
            return (None, r.0);
        }
    };
    // One strict decode of the resolved records: each record the previous head did not hold
    // is parsed, re-encoded byte-identically and hashed from its bytes; the tree digest is
    // recomputed (compared below). Same verdict as decoding the whole text.
    let snap = match TreeSnapshot::decode_reusing(&cut, previous.or(known)) {
        Ok(s) => s,
        Err(e) => {
            let bytes = cut.bytes().unwrap_or_else(|_| std::sync::Arc::from(&[][..]));
            if TreeCut::from_whole(&bytes).map(|c| c.digest).ok() != Some(cut.digest) {
                r.push(24, format!("{} commit: cut digest is not the tree digest of its records", request.boundary_name()));
            }
            r.push(24, format!("{} commit: the cut does not decode: {e}", request.boundary_name()));
            return (None, r.0);
        }
    };
    if snap.digest() != cut.digest {
        r.push(24, format!("{} commit: cut digest is not the tree digest of its records", request.boundary_name()));
    }
    if snap.root_id != cut.root_id || snap.incarnation != cut.incarnation {
        r.push(22, format!("{} commit: cut root/incarnation differ from the request's", request.boundary_name()));
    }
    r.0.extend(check_decoded_snapshot(&snap));
    match request {
        CommitRequest::Checkpoint(c) => {
            if c.kind == CheckpointKind::Start && previous.is_some() {
                r.push(22, "a start checkpoint after an acknowledged head");
            }
            let is_class = matches!(c.kind, CheckpointKind::Progress | CheckpointKind::Parked | CheckpointKind::Terminal);
            if is_class && c.kind != cut_class(&snap) {
                r.push(23, format!("{} checkpoint of a {} cut", c.kind.as_str(), cut_class(&snap).as_str()));
            }
        }
        CommitRequest::Effect(bd) => {
            let phase = snap
                .process(&bd.process_id)
                .and_then(|p| p.prepared.as_ref())
                .and_then(|s| s.effects.iter().find(|e| e.id == bd.effect_id))
                .map(|e| e.phase.clone());
            let before = previous
                .and_then(|s| s.process(&bd.process_id))
                .and_then(|p| p.prepared.as_ref())
                .and_then(|s| s.effects.iter().find(|e| e.id == bd.effect_id))
                .map(|e| e.phase.clone());
            match bd.kind {
                EffectBoundaryKind::Pending if phase != Some(EffectPhase::Pending) => {
                    r.push(2, format!("pending boundary for {} whose effect is not pending in the cut", bd.effect_id))
                }
                EffectBoundaryKind::Settled => {
                    if !matches!(phase, Some(EffectPhase::Settled(_) | EffectPhase::Unknown)) {
                        r.push(6, format!("settled boundary for {} whose effect is not settled in the cut", bd.effect_id));
                    }
                    if previous.is_some() && before != Some(EffectPhase::Pending) {
                        r.push(2, format!("settled boundary for {} that was not pending in the previous head", bd.effect_id));
                    }
                }
                EffectBoundaryKind::Resolved => {
                    if !matches!(phase, Some(EffectPhase::Settled(_))) {
                        r.push(4, format!("resolved boundary for {} without a definite settlement", bd.effect_id));
                    }
                    if previous.is_some() && before != Some(EffectPhase::Unknown) {
                        r.push(4, format!("resolved boundary for {} that was not unknown in the previous head", bd.effect_id));
                    }
                }
                _ => {}
            }
        }
        CommitRequest::Activation(act) => {
            if let Some(prev) = previous {
                if prev.digest() != act.previous_digest {
                    r.push(22, "activation does not follow the previous head");
                }
            }
        }
    }
    if let Some(prev) = previous {
        r.0.extend(check_transition(prev, &snap));
        unknown_exits(prev, &snap, request, &mut r);
        if let CommitRequest::Activation(_) = request {
            if prev.processes() != snap.processes() || prev.limits != snap.limits {
                r.push(22, "activation changed the cut beyond its incarnation");
            }
        }
    }
    (Some(snap), r.0)
}

/// 4: an Unknown becomes definite only through a `resolved` boundary naming it.
fn unknown_exits(before: &TreeSnapshot, after: &TreeSnapshot, request: &CommitRequest, r: &mut Report) {
    for b in before.processes() {
        let (Some(pb), Some(pa)) = (&b.prepared, after.process(&b.id).and_then(|a| a.prepared.as_ref())) else { continue };
        if pa.sequence != pb.sequence {
            continue;
        }
        for (eb, ea) in pb.effects.iter().zip(&pa.effects) {
            if eb.phase == EffectPhase::Unknown && ea.phase.is_definite() {
                let resolved_here = matches!(request, CommitRequest::Effect(bd)
                    if bd.kind == EffectBoundaryKind::Resolved && bd.effect_id == eb.id);
                if !resolved_here {
                    r.push(4, format!("{}: unknown {} became definite outside a resolved boundary", b.id, eb.id));
                }
            }
        }
    }
}

/// The checkpoint class of a cut, recomputed independently of the owner.
fn cut_class(s: &TreeSnapshot) -> CheckpointKind {
    let live: Vec<&Process> = s.processes().iter().map(|p| &**p).filter(|p| !p.is_terminal()).collect();
    if live.is_empty() {
        CheckpointKind::Terminal
    } else if live.iter().all(|p| p.is_parked()) {
        CheckpointKind::Parked
    } else {
        CheckpointKind::Progress
    }
}

/// Checks a writer's acknowledged commits in order (see [`check_commit`]).
pub fn check_commits<'a>(requests: impl IntoIterator<Item = &'a CommitRequest>) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut previous: Option<TreeSnapshot> = None;
    for (index, request) in requests.into_iter().enumerate() {
        let (snap, violations) = check_commit(previous.as_ref(), request);
        out.extend(violations.into_iter().map(|mut v| {
            v.detail = format!("commit {index} ({}): {}", request.boundary_name(), v.detail);
            v
        }));
        if snap.is_some() {
            previous = snap;
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Store history
// ---------------------------------------------------------------------------------------------

/// Invariants of one tree's installed-commit history: 6 (at most one pending, settled and
/// resolved boundary per Effect over the tree's life, in that order), 22 (writers change only
/// by activation of the current writer; a historical commit never installs twice), 23 (start
/// at 1, activation at 0, otherwise consecutive). `commit::audit_history` is the backstop: any
/// history it rejects yields at least one violation.
pub fn check_history(history: &[CommitRecord]) -> Vec<Violation> {
    let mut r = Report::default();
    let mut identities = BTreeSet::new();
    let mut incarnations: BTreeSet<&IncarnationId> = BTreeSet::new();
    let mut boundaries: BTreeMap<&EffectId, Vec<EffectBoundaryKind>> = BTreeMap::new();
    let mut last: Option<&CommitRecord> = None;
    for (index, rec) in history.iter().enumerate() {
        if !identities.insert(rec.identity.as_str()) {
            r.push(22, format!("record {index}: commit {} installed twice", rec.identity));
        }
        match (&rec.kind, last) {
            (CommitRecordKind::Checkpoint(CheckpointKind::Start), None) => {
                if rec.sequence != 1 {
                    r.push(23, format!("record {index}: start at sequence {}", rec.sequence));
                }
            }
            (_, None) => r.push(23, format!("record {index}: history does not open with a start")),
            (CommitRecordKind::Checkpoint(CheckpointKind::Start), Some(_)) => {
                r.push(22, format!("record {index}: a second start replaced the head"))
            }
            (CommitRecordKind::Activation { previous_incarnation }, Some(prev)) => {
                if rec.sequence != 0 {
                    r.push(23, format!("record {index}: activation at sequence {}", rec.sequence));
                }
                if *previous_incarnation != prev.incarnation {
                    r.push(22, format!("record {index}: activation fenced {previous_incarnation}, not the head's writer"));
                }
                if incarnations.contains(&rec.incarnation) {
                    r.push(22, format!("record {index}: activation reuses incarnation {}", rec.incarnation));
                }
            }
            (_, Some(prev)) => {
                if rec.incarnation != prev.incarnation {
                    r.push(22, format!("record {index}: {} committed over {}'s head without activation", rec.incarnation, prev.incarnation));
                }
                if prev.sequence.checked_add(1) != Some(rec.sequence) {
                    r.push(23, format!("record {index}: sequence {} after {}", rec.sequence, prev.sequence));
                }
            }
        }
        incarnations.insert(&rec.incarnation);
        if let CommitRecordKind::Effect { effect_id, kind, .. } = &rec.kind {
            let seen = boundaries.entry(effect_id).or_default();
            if seen.contains(kind) {
                r.push(6, format!("record {index}: second {} boundary for {effect_id}", kind.as_str()));
            } else if seen.iter().any(|k| boundary_order(*k) > boundary_order(*kind)) {
                r.push(6, format!("record {index}: {} boundary for {effect_id} after a later kind", kind.as_str()));
            } else if *kind == EffectBoundaryKind::Resolved && !seen.contains(&EffectBoundaryKind::Settled) {
                r.push(6, format!("record {index}: resolved boundary for {effect_id} without a settled one"));
            }
            seen.push(*kind);
        }
        last = Some(rec);
    }
    if let Err(e) = audit_history(history) {
        if r.0.is_empty() {
            r.push(23, format!("audit_history: {e}"));
        }
    }
    r.0
}

fn boundary_order(kind: EffectBoundaryKind) -> u8 {
    match kind {
        EffectBoundaryKind::Pending => 0,
        EffectBoundaryKind::Settled => 1,
        EffectBoundaryKind::Resolved => 2,
    }
}

// ---------------------------------------------------------------------------------------------
// Publications
// ---------------------------------------------------------------------------------------------

/// 21: every published Process start and Result is a fact of some acknowledged head, and a
/// writer that published a RuntimeError publishes nothing committed after it.
pub fn check_publications(published: &[Publication], acknowledged: &[TreeSnapshot]) -> Vec<Violation> {
    let mut r = Report::default();
    let mut stopped = false;
    for (index, p) in published.iter().enumerate() {
        match p {
            Publication::Started { process, .. } => {
                if stopped {
                    r.push(21, format!("publication {index}: {} published after the writer stopped", process.id));
                }
                if !acknowledged.iter().any(|s| s.process(&process.id).is_some()) {
                    r.push(21, format!("publication {index}: {} published but in no acknowledged head", process.id));
                }
            }
            Publication::Finished { result } => {
                if stopped {
                    r.push(21, format!("publication {index}: result of {} published after the writer stopped", result.process_id));
                }
                let known = acknowledged
                    .iter()
                    .filter_map(|s| s.process(&result.process_id).and_then(result_of))
                    .any(|res| res == *result);
                if !known {
                    r.push(21, format!("publication {index}: result of {} is in no acknowledged head", result.process_id));
                }
            }
            Publication::Stopped { .. } => stopped = true,
            Publication::Event(_) => {}
        }
    }
    r.0
}
