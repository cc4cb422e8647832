//! The oracle: invariant checks against the GROUND TRUTH of the simulated world (the ledger of
//! physical dispatches, the store's history and heads, what the host submitted), which the
//! kernel cannot see. Cheap checks run on every installed head and every physical dispatch;
//! whole-history checks run once at the end.
//!
//! Invariant names (the `invariant` of a [`Violation`]):
//! * `a.pending_before_dispatch` — a physical dispatch happens only after a `pending` boundary
//!   for its EffectId was installed and acknowledged to the dispatching writer (or the writer
//!   restored it as pending);
//! * `b.no_double_dispatch` — at most one physical dispatch per `never` EffectId, ever;
//! * `c.unknown_sticky` — once Unknown in a head, an Effect is Unknown in every later head
//!   until a `resolved` boundary for it is installed;
//! * `d.one_boundary_per_kind` — the store history passes `audit_history`;
//! * `e.published_acknowledged` — every published Started/Finished is a fact of the head last
//!   acknowledged to its writer; a stopped writer publishes nothing after its Stopped; a writer
//!   that dies on a commit fault publishes Stopped;
//! * `f.snapshot_round_trip` — every head decodes, re-encodes byte-identically, and its digest
//!   is the SHA-256 of its bytes;
//! * `g.budget` — finite `usage + allocated ≤ quota`; unlimited dimensions carry nothing;
//! * `h.termination` — the run ends with every Process terminal unless an Unknown was left
//!   unadjudicated by policy;
//! * `j.settlement_truth` — a settled dispatcher Effect carries the world's real answer or a
//!   settlement the host submitted for it;
//! * plus `runtime_error` (its head and unresolved Effects against what the world saw),
//!   `mailbox_monotone` (records never change; only consumed Engine records leave, by
//!   compaction), `mailbox_bounded` (no head keeps a record compaction would drop),
//!   `usage_monotone`, `first_terminal_wins`, `frontier`, `terminal_consistency`, `allocation`, `fencing`, `durable_ack`,
//!   `signal_admission`, `strategy_order`, `restore`, `commit_in_flight`, `kernel_contract`;
//! * after the run (`retired`), `retired_addressing`: commands to a retired child are refused
//!   `ProcessFinished`, to an id that never existed `NotFound`;
//! * and, on every eighth seed after the run (`world::run_world`), `log_compaction_same_head`
//!   (`crate::log_compaction`): the commits replayed into a compacted, reopened file log.

use super::bounds::MAX_VIOLATIONS;
use super::compat::Violation;
use super::ledger::{Ledger, PhysicalCall};
use super::strategy::STRATEGY_INVARIANT;
use keel::kernel::commit::{audit_history, CommitRecord, CommitRecordKind, EffectBoundaryKind, Head};
use keel::kernel::dispatcher::ReplayPolicy;
use keel::kernel::effect::{Effect, EffectPhase, Settlement};
use keel::json::Digest;
use keel::kernel::ids::{EffectId, ProcessId, SignalId};
use keel::kernel::process::{Finish, Process};
use keel::kernel::resource::{Allocation, Budget, Dimension, Quota};
use keel::kernel::snapshot::TreeSnapshot;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

#[derive(Default)]
pub struct Oracle {
    checks: u64,
    violations: Vec<Violation>,
    /// Violations beyond [`MAX_VIOLATIONS`] (counted, not kept).
    dropped: u64,
    /// Effects that were Unknown in some installed head, with their Process.
    ever_unknown: BTreeMap<EffectId, ProcessId>,
    installed: BTreeSet<(EffectId, &'static str)>,
    /// Settlements the host submitted per Effect (resolutions).
    submitted: BTreeMap<EffectId, Vec<Settlement>>,
    /// What earlier heads said about each Process (monotone facts).
    tracks: BTreeMap<ProcessId, Track>,
    history_seen: usize,
}

/// The monotone facts of one Process across installed heads.
#[derive(Default)]
struct Track {
    finish: Option<Finish>,
    /// Arrival → (SignalId, payload digest) of the retained records: the mailbox is
    /// append-only; compaction drops only consumed Engine records.
    records: BTreeMap<u64, (SignalId, Digest)>,
    /// Records ever admitted.
    admitted: u64,
    cursor: u64,
    steps: u64,
    effects: u64,
}

fn boundary_name(kind: EffectBoundaryKind) -> &'static str {
    kind.as_str()
}

impl Oracle {
    pub fn checks(&self) -> u64 {
        self.checks
    }

    pub fn into_violations(mut self) -> Vec<Violation> {
        if self.dropped > 0 {
            self.violations.push(Violation {
                invariant: "oracle".into(),
                detail: format!("{} further violations not kept", self.dropped),
            });
        }
        self.violations
    }

    /// Counts one check; records a violation when it fails.
    pub fn check(&mut self, ok: bool, invariant: &str, detail: impl FnOnce() -> String) -> bool {
        self.checks += 1;
        if !ok {
            self.violate(invariant, detail());
        }
        ok
    }

    pub fn violate(&mut self, invariant: &str, detail: String) {
        if self.violations.len() < MAX_VIOLATIONS {
            self.violations.push(Violation { invariant: invariant.to_owned(), detail });
        } else {
            self.dropped += 1;
        }
    }

    /// The host submitted `settlement` for `effect` (so a later head may carry it).
    pub fn submitted(&mut self, effect: &EffectId, settlement: &Settlement) {
        self.submitted.entry(effect.clone()).or_default().push(settlement.clone());
    }

    pub fn boundary_installed(&self, effect: &EffectId, kind: EffectBoundaryKind) -> bool {
        self.installed.contains(&(effect.clone(), boundary_name(kind)))
    }

    /// Folds newly installed history records in (called whenever the head moved).
    pub fn on_history(&mut self, history: &[CommitRecord]) {
        let start = self.history_seen.min(history.len());
        for record in &history[start..] {
            if let CommitRecordKind::Effect { effect_id, kind, .. } = &record.kind {
                let fresh = self.installed.insert((effect_id.clone(), boundary_name(*kind)));
                self.check(fresh, "d.one_boundary_per_kind", || {
                    format!("a second {} boundary for {effect_id} was installed", kind.as_str())
                });
            }
        }
        self.history_seen = history.len();
    }

    /// `f`: decodes a stored head with the real decoder; it must re-encode to the same bytes
    /// and digest.
    pub fn round_trip(&mut self, head: &Head) -> Option<Arc<TreeSnapshot>> {
        let snap = match TreeSnapshot::from_cut(&head.cut) {
            Ok(s) => s,
            Err(e) => {
                self.check(false, "f.snapshot_round_trip", || format!("head at sequence {} does not decode: {e}", head.sequence));
                return None;
            }
        };
        self.check(
            head.cut.bytes().is_ok_and(|b| *b == **snap.bytes()) && snap.digest() == head.cut.digest && snap.incarnation == head.cut.incarnation,
            "f.snapshot_round_trip",
            || format!("head at sequence {} does not re-encode to its bytes, digest and incarnation", head.sequence),
        );
        Some(Arc::new(snap))
    }

    /// Decodes a stored head and checks its contents.
    pub fn on_head(&mut self, head: &Head, ledger: &Ledger) -> Option<Arc<TreeSnapshot>> {
        let snap = self.round_trip(head)?;
        self.check_contents(&snap, ledger);
        Some(snap)
    }

    /// Checks a stored head through the snapshot its writer built, once the writer's
    /// acknowledged head proves to be byte-identical to what the store holds (saves a decode).
    pub fn on_head_built(&mut self, head: &Head, snap: &TreeSnapshot, ledger: &Ledger) {
        // Records compare by key, digest and bytes; shared records compare by pointer.
        let same = snap.digest() == head.cut.digest && *snap.tree_cut() == head.cut;
        if self.check(same, "f.snapshot_round_trip", || format!("head at sequence {} differs from the cut its writer built", head.sequence)) {
            self.check_contents(snap, ledger);
        }
    }

    /// The per-head content checks (installation order matters for `c`).
    fn check_contents(&mut self, snap: &TreeSnapshot, ledger: &Ledger) {
        for p in snap.processes() {
            self.check_process(snap, p, ledger);
        }
        // `c` across compaction: a Process holding an Unknown never leaves the store (a
        // retired child is gone from the head) unless the Unknown was resolved.
        let gone: Vec<(EffectId, ProcessId)> = self
            .ever_unknown
            .iter()
            .filter(|(_, pid)| snap.process(pid).is_none())
            .map(|(e, pid)| (e.clone(), pid.clone()))
            .collect();
        for (e, pid) in gone {
            let resolved = self.boundary_installed(&e, EffectBoundaryKind::Resolved);
            self.check(resolved, "c.unknown_sticky", || format!("{e} was Unknown and left the store with {pid} without a resolved boundary"));
        }
    }

    /// Facts that only move forward between heads: the mailbox (records and cursor), usage, and
    /// a terminal state once recorded.
    fn check_monotone(&mut self, p: &Process) {
        let track = self.tracks.remove(&p.id).unwrap_or_default();
        let records: BTreeMap<u64, (SignalId, Digest)> =
            p.mailbox.records().iter().map(|r| (r.arrival(), (r.id().clone(), r.payload_digest()))).collect();
        let admitted = p.mailbox.len();
        self.check(admitted >= track.admitted, "mailbox_monotone", || {
            format!("{}: admitted records went back {} -> {admitted}", p.id, track.admitted)
        });
        for (arrival, (id, digest)) in &track.records {
            match records.get(arrival) {
                Some(now) => self.check(now == &(id.clone(), *digest), "mailbox_monotone", || {
                    format!("{}: record {arrival} changed between heads", p.id)
                }),
                // Only a consumed Engine record may leave: an external one is what makes a
                // redelivery a duplicate or a conflict.
                None => self.check(id.is_engine_owned() && *arrival <= p.mailbox.cursor(), "mailbox_monotone", || {
                    format!("{}: record {arrival} ({id}) left the mailbox", p.id)
                }),
            };
        }
        for arrival in records.keys().take_while(|a| **a <= track.admitted) {
            self.check(track.records.contains_key(arrival), "mailbox_monotone", || {
                format!("{}: record {arrival} came back after compaction dropped it", p.id)
            });
        }
        // The world's writers compact at every finalization: no committed mailbox holds a
        // consumed Engine record no open wait needs, so it grows only with external input.
        self.check(!p.mailbox.has_droppable(), "mailbox_bounded", || {
            format!("{}: the mailbox keeps a consumed Engine record no open wait needs", p.id)
        });
        let cursor = p.mailbox.cursor();
        self.check(cursor >= track.cursor, "mailbox_monotone", || format!("{}: cursor moved back {} -> {cursor}", p.id, track.cursor));
        let (steps, effects) = (p.committed_steps, p.prepared_effects);
        self.check(steps >= track.steps && effects >= track.effects, "usage_monotone", || {
            format!("{}: usage moved back (steps {} -> {steps}, effects {} -> {effects})", p.id, track.steps, track.effects)
        });
        if let Some(earlier) = &track.finish {
            self.check(p.finish.as_ref() == Some(earlier), "first_terminal_wins", || {
                format!("{}: terminal {:?} changed to {:?}", p.id, earlier.termination, p.finish.as_ref().map(|f| &f.termination))
            });
        }
        let finish = track.finish.or_else(|| p.finish.clone());
        self.tracks.insert(p.id.clone(), Track { finish, records, admitted, cursor, steps, effects });
    }

    fn check_process(&mut self, snap: &TreeSnapshot, p: &Process, ledger: &Ledger) {
        self.check_monotone(p);
        // g: budgets.
        let usage = p.usage();
        for d in Dimension::ALL {
            let used = usage.used(d);
            let allocated = p.allocated.get(d);
            let ok = match p.budget.quota(d) {
                Quota::Unlimited => allocated == 0,
                Quota::Finite(max) => used.checked_add(allocated).is_some_and(|t| t <= max),
            };
            self.check(ok, "g.budget", || {
                format!("{}: {} used {used} + allocated {allocated} exceeds {:?}", p.id, d.as_str(), p.budget.quota(d))
            });
        }
        // allocation accounting: a parent's allocation is the sum of its children's grants.
        // Retired children keep their grants in the parent's aggregate.
        let mut grants = p.retired.debits;
        for c in snap.processes().iter().filter(|c| c.relation.parent_id.as_ref() == Some(&p.id)) {
            grants = grants.checked_add(&finite_part(&c.budget, &p.budget)).unwrap_or(grants);
        }
        self.check(grants == p.allocated, "allocation", || {
            format!("{}: allocated {:?} but children were granted {:?}", p.id, p.allocated, grants)
        });
        // terminal consistency.
        let terminal = p.is_terminal();
        self.check(terminal == p.finish.is_some(), "terminal_consistency", || {
            format!("{}: status {} with finish {:?}", p.id, p.status.as_str(), p.finish.is_some())
        });
        if let Some(finish) = &p.finish {
            let unknown = p.prepared.as_ref().map(|s| s.unknown_ids()).unwrap_or_default();
            self.check(finish.termination.unresolved_effect_ids == unknown, "terminal_consistency", || {
                format!("{}: termination lists {:?} unresolved, batch holds {:?}", p.id, finish.termination.unresolved_effect_ids, unknown)
            });
            self.check(
                p.prepared.as_ref().is_none_or(|s| !s.has_pending()) && p.current_wait_id.is_none(),
                "terminal_consistency",
                || format!("{}: terminal with a pending Effect or an open current wait", p.id),
            );
            if let Some(f) = &finish.termination.failure {
                let message = f.message.as_str();
                self.check(!message.contains(STRATEGY_INVARIANT), "strategy_order", || format!("{}: {message}", p.id));
            }
        }
        let Some(prepared) = &p.prepared else {
            self.check_vanished_unknowns(snap, p, None);
            return;
        };
        self.check(prepared.check_frontier().is_ok(), "frontier", || format!("{}: {:?}", p.id, prepared.check_frontier()));
        for e in &prepared.effects {
            match &e.phase {
                EffectPhase::Unknown => {
                    self.ever_unknown.insert(e.id.clone(), p.id.clone());
                }
                EffectPhase::Settled(s) => {
                    if self.ever_unknown.contains_key(&e.id) {
                        let resolved = self.boundary_installed(&e.id, EffectBoundaryKind::Resolved);
                        self.check(resolved, "c.unknown_sticky", || {
                            format!("{} was Unknown and is now settled without a resolved boundary", e.id)
                        });
                    }
                    if let Effect::Dispatcher(_) = e.effect {
                        let truthful = ledger.truth(&e.id) == Some(s)
                            || self.submitted.get(&e.id).is_some_and(|v| v.contains(s));
                        self.check(truthful, "j.settlement_truth", || {
                            format!("{} settled {:?} but the world answered {:?}", e.id, s, ledger.truth(&e.id))
                        });
                    }
                }
                EffectPhase::Planned | EffectPhase::Pending => {
                    self.check(!self.ever_unknown.contains_key(&e.id), "c.unknown_sticky", || {
                        format!("{} was Unknown and is now {}", e.id, e.phase.name())
                    });
                }
            }
        }
        self.check_vanished_unknowns(snap, p, Some(prepared.sequence));
    }

    /// An Unknown whose batch is gone from the head (finalized) must have been resolved.
    fn check_vanished_unknowns(&mut self, _snap: &TreeSnapshot, p: &Process, current_step: Option<u64>) {
        let ids: Vec<EffectId> = self
            .ever_unknown
            .iter()
            .filter(|(_, pid)| **pid == p.id)
            .map(|(e, _)| e.clone())
            .filter(|e| match (&p.prepared, current_step) {
                (Some(s), Some(_)) => s.effect_index(e).is_none(),
                _ => true,
            })
            .collect();
        for e in ids {
            let resolved = self.boundary_installed(&e, EffectBoundaryKind::Resolved);
            self.check(resolved, "c.unknown_sticky", || format!("{e} was Unknown and vanished from {} without a resolved boundary", p.id));
        }
    }

    /// A physical dispatch is about to happen. `acknowledged`: the writer had the pending
    /// boundary acknowledged (or restored the Effect as pending).
    pub fn on_physical_dispatch(&mut self, effect: &EffectId, acknowledged: bool, count: u64, policy: ReplayPolicy) {
        let installed = self.boundary_installed(effect, EffectBoundaryKind::Pending);
        self.check(installed && acknowledged, "a.pending_before_dispatch", || {
            format!("{effect} dispatched with pending installed={installed} acknowledged={acknowledged}")
        });
        self.check(policy == ReplayPolicy::SameIdentity || count <= 1, "b.no_double_dispatch", || {
            format!("{effect} (replay never) physically dispatched {count} times")
        });
    }

    /// Whole-run checks at the end: the store history audit, and the ledger recounted from
    /// scratch (independently of the per-call checks).
    pub fn on_finish(&mut self, history: &[CommitRecord], ledger: &Ledger) {
        let audit = audit_history(history);
        self.check(audit.is_ok(), "d.one_boundary_per_kind", || format!("{audit:?}"));
        let mut calls: BTreeMap<&EffectId, Vec<&PhysicalCall>> = BTreeMap::new();
        for c in ledger.calls() {
            calls.entry(&c.effect).or_default().push(c);
        }
        for (effect, cs) in calls {
            let never = cs.iter().any(|c| c.policy == ReplayPolicy::Never);
            self.check(!never || cs.len() <= 1, "b.no_double_dispatch", || {
                let who: Vec<String> = cs.iter().map(|c| format!("instance {} at t={} for {}", c.instance, c.time, c.process)).collect();
                format!("{effect} (replay never) ran {} times: {who:?}", cs.len())
            });
        }
    }
}

/// The debit a grant of `child` makes on `parent`: finite parent dimensions only.
fn finite_part(child: &Budget, parent: &Budget) -> Allocation {
    let mut a = Allocation::default();
    for d in Dimension::ALL {
        if let (Quota::Finite(_), Some(max)) = (parent.quota(d), child.quota(d).maximum()) {
            a.set(d, max);
        }
    }
    a
}
