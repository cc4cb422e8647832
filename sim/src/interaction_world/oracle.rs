//! The invariants of an Interaction-world run. Names are stable strings (reports, minimizer):
//!
//! * `kernel_<n>` — the kernel invariants over every writer's acknowledged commits and the
//!   store history (`check_commits`, `check_history`);
//! * `head_round_trip` — every acknowledged cut decodes and re-encodes byte-identically;
//! * `results_in_call_order` — every request the model received answers each tool call of
//!   an assistant message exactly once, right after it, in call order;
//! * `no_double_dispatch`, `pending_before_dispatch`, `tool_concurrency` — checked by the
//!   ledger while calls start;
//! * `unknown_sticky` — an Unknown stays Unknown in every later acknowledged head (across
//!   restores and compaction: a child holding one is never retired) until a resolved
//!   boundary settles it; `unknown_left_retained` — one the
//!   host left is still Unknown at the end and was never dispatched again;
//! * `mailbox_bounded` — with compaction on, no acknowledged cut keeps a consumed Engine
//!   Signal no open wait needs;
//! * `steers_once_in_order` — steers reach the model at most once each, in acceptance order;
//! * `model_call_limit` — no model call sequence twice, none beyond `max_model_calls`;
//! * `signal_dedupe`, `signal_conflict_refused`, `stale_answer_refused`, `resolve_accepted`
//!   — checked by the host as it acts;
//! * `expect.*` — the scenario's own expectations; `same_output` — a crash run settled from
//!   truth, restored from compacted cuts, ends like the fault-free run without compaction;
//! * `budget_respected` — see `budget.rs`;
//! * `restore_decodes_alike` — a restored writer's first acknowledged head, whose records the
//!   restore partly took from the stopped writer's head instead of parsing them, equals the
//!   strict decoding of the same stored bytes;
//! * `log_compaction_same_head` — on every eighth seed, after the run (`run.rs`): the run's
//!   commits replayed into a compacted, reopened file log end at the memory store's heads
//!   (`crate::log_compaction`).

use super::context::Context;
use super::driver::Ending;
use super::host::Host;
use super::ledger::Caller;
use super::store::{Recorded, Store};
use crate::world::Violation;
use keel::interaction::output::{CompletionSource, Output};
use keel::interaction::wire::Wire;
use keel::kernel::commit::{CommitRecordKind, EffectBoundaryKind};
use keel::kernel::effect::EffectPhase;
use keel::kernel::ids::{EffectId, IncarnationId, ProcessId};
use keel::kernel::invariants::{check_commit_reusing, check_history};
use keel::kernel::owner::CommitRequest;
use keel::kernel::snapshot::TreeSnapshot;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// What a run ended with, comparable across runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// `completed`, `failed`, `killed`, `canceled`, `timed_out`, `stuck`, `refused`.
    pub status: String,
    pub output_source: Option<String>,
    pub output_text: Option<String>,
    pub failure_code: Option<String>,
    pub root_model_calls: u32,
}

pub fn summarize(ending: &Ending, cx: &Context) -> Summary {
    let root_model_calls = cx.ledger.model_calls().iter().filter(|m| m.model == "root").count() as u32;
    let mut s = Summary { root_model_calls, ..Summary::default() };
    match ending {
        Ending::Finished(result) => {
            s.status = format!("{:?}", result.status()).to_lowercase();
            s.failure_code = result.termination.failure.as_ref().map(|f| f.code.as_str().to_owned());
            if let Some(output) = result.output.as_ref().and_then(|p| Output::from_payload(p).ok()) {
                match output.source() {
                    CompletionSource::DirectToolResults => {
                        s.output_source = Some("direct_tool_results".into());
                        let parts: Vec<String> = output.tool_results().unwrap_or_default().iter().map(|r| r.output.content.clone()).collect();
                        s.output_text = Some(parts.join("\n"));
                    }
                    _ => {
                        s.output_source = Some("model".into());
                        s.output_text = output.response().and_then(|r| r.message.as_ref()).map(|m| m.text());
                    }
                }
            }
        }
        Ending::Stuck => s.status = "stuck".into(),
        Ending::TimedOut => s.status = "timed_out".into(),
        Ending::Refused(why) => s.status = format!("refused: {why}"),
    }
    s
}

struct Checker {
    checks: u64,
    violations: Vec<Violation>,
}

impl Checker {
    fn expect(&mut self, ok: bool, invariant: &str, detail: impl FnOnce() -> String) {
        self.checks += 1;
        if !ok {
            self.violations.push(Violation::new(invariant, detail()));
        }
    }
}

/// Every invariant; returns (violations, checks).
pub fn check(cx: &Context, host: &Host, root: Option<&ProcessId>, summary: &Summary) -> (Vec<Violation>, u64) {
    let mut c = Checker { checks: 0, violations: Vec::new() };
    let (violations, checks, decoded) = check_store_decoded(&cx.store, root, cx.spec.compaction);
    c.violations.extend(violations);
    c.checks += checks;
    model_requests(&mut c, cx, host);
    left_unknowns(&mut c, cx, host, root, &decoded);
    let (violations, checks) = super::budget::check(&cx.spec, &decoded);
    c.violations.extend(violations);
    c.checks += checks;
    let (violations, checks) = restore_decodes_alike(&cx.restored_heads(), &decoded);
    c.violations.extend(violations);
    c.checks += checks;
    expectations(&mut c, cx, summary);
    let (ledger, checks) = cx.ledger.findings();
    c.violations.extend(ledger);
    c.violations.extend(host.violations.iter().cloned());
    (c.violations, c.checks + checks + host.checks)
}

/// The store invariants of a run: the kernel invariants over every writer's acknowledged
/// commits and the store history, every cut's round trip, and Unknowns sticky until a
/// resolved boundary, and (when the writers compact) every mailbox fully compacted. Returns
/// (violations, checks). The facade harness judges its stores with the same checks.
pub(crate) fn check_store(store: &Store, root: Option<&ProcessId>, compacting: bool) -> (Vec<Violation>, u64) {
    let (violations, checks, _) = check_store_decoded(store, root, compacting);
    (violations, checks)
}

/// [`check_store`], also returning every acknowledged cut as decoded (`None`: it does not
/// decode), in record order, for later checks that read a head.
fn check_store_decoded(store: &Store, root: Option<&ProcessId>, compacting: bool) -> (Vec<Violation>, u64, Vec<Option<TreeSnapshot>>) {
    let mut c = Checker { checks: 0, violations: Vec::new() };
    let records = store.records();
    let decoded = kernel(&mut c, store, &records, root);
    heads(&mut c, &records, &decoded, root, store);
    if compacting {
        mailbox_bounded(&mut c, &decoded);
    }
    (c.violations, c.checks, decoded)
}

/// `restore_decodes_alike`: a restored writer's first acknowledged head, as its owner holds
/// it (records the restore took from the stopped writer's head instead of parsing them),
/// equals this oracle's strict decoding of the same acknowledged cut from the store's bytes,
/// record for record. A head with no acknowledged cut of the same writer and digest here is
/// not judged. Returns (violations, checks).
pub fn restore_decodes_alike(restored: &[Arc<TreeSnapshot>], decoded: &[Option<TreeSnapshot>]) -> (Vec<Violation>, u64) {
    let mut c = Checker { checks: 0, violations: Vec::new() };
    for head in restored {
        let same_cut = |d: &&TreeSnapshot| d.incarnation == head.incarnation && d.digest() == head.digest();
        let Some(d) = decoded.iter().flatten().find(same_cut) else { continue };
        let differences = differences(head, d);
        c.expect(differences.is_empty(), "restore_decodes_alike", || {
            format!("restored head {}: {} differ from the decoding of the stored bytes", head.digest(), differences.join(", "))
        });
    }
    (c.violations, c.checks)
}

/// What differs between a head as held and the decoding of its stored bytes: the records
/// (by ProcessId), the residues, the tree limits.
pub fn differences(held: &TreeSnapshot, decoded: &TreeSnapshot) -> Vec<String> {
    let mut out = Vec::new();
    if held.processes() != decoded.processes() {
        let ids: BTreeSet<&ProcessId> = held.processes().iter().chain(decoded.processes()).map(|p| &p.id).collect();
        out.extend(ids.into_iter().filter(|id| held.process(id) != decoded.process(id)).map(|id| format!("record {id}")));
    }
    if held.residues() != decoded.residues() {
        out.push("residues".to_owned());
    }
    if held.limits != decoded.limits {
        out.push("tree limits".to_owned());
    }
    out
}

/// `mailbox_bounded`: a compacting writer drops every consumed Engine record no open wait
/// needs at the finalization that consumed it, so no acknowledged cut keeps one and a long
/// tool loop's mailboxes do not grow with its rounds.
fn mailbox_bounded(c: &mut Checker, decoded: &[Option<TreeSnapshot>]) {
    for (index, snap) in decoded.iter().enumerate() {
        let Some(snap) = snap else { continue };
        for p in snap.processes() {
            c.expect(!p.mailbox.has_droppable(), "mailbox_bounded", || {
                format!("acknowledged commit {index}: {} keeps a consumed Engine record no open wait needs", p.id)
            });
        }
    }
}

/// The kernel invariants over every writer's acknowledged commits (each against that writer's
/// previous acknowledged head) and the store history. Returns every acknowledged cut decoded
/// (`None`: it does not decode), in record order, so later checks need not decode again.
fn kernel(c: &mut Checker, store: &Store, records: &[Recorded], root: Option<&ProcessId>) -> Vec<Option<TreeSnapshot>> {
    let mut decoded: Vec<Option<TreeSnapshot>> = Vec::new();
    // Per writer: its commits so far and the position in `decoded` of its last decoded head.
    let mut writers: BTreeMap<IncarnationId, (u64, Option<usize>)> = BTreeMap::new();
    // The position of the last decoded head of any writer: a new writer's first cut (the
    // activation after a restore) repeats most of its records, which need no second parse.
    let mut last: Option<usize> = None;
    for r in records.iter().filter(|r| r.acknowledged) {
        let writer = writers.entry(r.request.cut().incarnation.clone()).or_insert((0, None));
        let previous = writer.1.and_then(|i| decoded.get(i)).and_then(Option::as_ref);
        let known = last.and_then(|i| decoded.get(i)).and_then(Option::as_ref);
        let (snap, violations) = check_commit_reusing(previous, known, &r.request);
        for v in violations {
            let detail = format!("commit {} ({}): {}", writer.0, r.request.boundary_name(), v.detail);
            c.violations.push(Violation::new(format!("kernel_{}", v.invariant), detail));
        }
        c.checks += 1;
        writer.0 += 1;
        if snap.is_some() {
            writer.1 = Some(decoded.len());
            last = Some(decoded.len());
        }
        decoded.push(snap);
    }
    if let Some(root) = root {
        let history = store.memory().history(root);
        for v in check_history(&history) {
            c.violations.push(Violation::new(format!("kernel_{}", v.invariant), v.to_string()));
        }
        c.checks += history.len() as u64;
    }
    decoded
}

fn unknowns_of(s: &TreeSnapshot) -> BTreeMap<EffectId, ProcessId> {
    let mut out = BTreeMap::new();
    for p in s.processes() {
        for e in p.prepared.iter().flat_map(|x| &x.effects) {
            if e.phase == EffectPhase::Unknown {
                out.insert(e.id.clone(), p.id.clone());
            }
        }
    }
    out
}

fn heads(c: &mut Checker, records: &[Recorded], decoded: &[Option<TreeSnapshot>], root: Option<&ProcessId>, store: &Store) {
    let resolved: BTreeSet<EffectId> = root
        .map(|r| store.memory().history(r))
        .unwrap_or_default()
        .into_iter()
        .filter_map(|h| match h.kind {
            CommitRecordKind::Effect { effect_id, kind: EffectBoundaryKind::Resolved, .. } => Some(effect_id),
            _ => None,
        })
        .collect();
    let mut sticky: BTreeSet<EffectId> = BTreeSet::new();
    for (index, (r, snap)) in records.iter().filter(|r| r.acknowledged).zip(decoded).enumerate() {
        // Decoding re-encodes and compares: a decoded cut is byte-identical canonical JSON.
        c.expect(snap.is_some(), "head_round_trip", || format!("acknowledged commit {index} does not decode to the same bytes"));
        let Some(snap) = snap else { continue };
        let now = unknowns_of(snap);
        for e in &sticky {
            let resolved_here = matches!(&r.request, CommitRequest::Effect(b) if b.kind == EffectBoundaryKind::Resolved && &b.effect_id == e);
            c.expect(now.contains_key(e) || resolved_here || resolved.contains(e), "unknown_sticky", || {
                format!("unknown {e} left acknowledged commit {index} ({}) without a resolution", r.request.boundary_name())
            });
        }
        sticky.retain(|e| now.contains_key(e));
        sticky.extend(now.into_keys());
    }
}

fn model_requests(c: &mut Checker, cx: &Context, host: &Host) {
    let calls = cx.ledger.model_calls();
    let mut per_model: BTreeMap<(&str, &str), Vec<u32>> = BTreeMap::new();
    for m in &calls {
        per_model.entry((m.model.as_str(), m.process.as_str())).or_default().push(m.sequence);
        c.checks += 1;
        for detail in results_in_call_order(&m.request) {
            c.violations.push(Violation::new("results_in_call_order", format!("{} call {}: {detail}", m.model, m.sequence)));
        }
    }
    for ((model, process), seqs) in &per_model {
        let unique: BTreeSet<&u32> = seqs.iter().collect();
        c.expect(unique.len() == seqs.len(), "model_call_limit", || format!("model {model} of {process} saw a sequence twice: {seqs:?}"));
        let limit = if *model == "root" { cx.spec.max_model_calls } else { cx.spec.delegate.as_ref().map_or(0, |d| d.max_model_calls) };
        c.expect(seqs.iter().all(|s| *s <= limit), "model_call_limit", || format!("model {model} calls {seqs:?} exceed {limit}"));
    }
    let mut root_calls: Vec<_> = calls.iter().filter(|m| m.model == "root").collect();
    root_calls.sort_by_key(|m| m.sequence);
    let applied: Vec<_> = root_calls.iter().flat_map(|m| m.applied_steers.iter().cloned()).collect();
    let unique: BTreeSet<_> = applied.iter().collect();
    c.expect(unique.len() == applied.len(), "steers_once_in_order", || format!("a steer was applied twice: {applied:?}"));
    let positions: Vec<Option<usize>> = applied.iter().map(|a| host.accepted_steers.iter().position(|x| x == a)).collect();
    c.expect(positions.iter().all(Option::is_some), "steers_once_in_order", || {
        format!("applied steers {applied:?} include one never accepted ({:?})", host.accepted_steers)
    });
    c.expect(positions.windows(2).all(|w| w[0] < w[1]), "steers_once_in_order", || {
        format!("steers applied as {applied:?}, accepted as {:?}", host.accepted_steers)
    });
}

/// `results_in_call_order` over one request a model received: every tool call of an assistant
/// message is answered exactly once, right after it, in call order. Returns what is wrong.
pub(crate) fn results_in_call_order(request: &keel::chat::Request) -> Vec<String> {
    let messages = &request.messages;
    let mut wrong = Vec::new();
    let mut answered = BTreeSet::new();
    for (i, msg) in messages.iter().enumerate() {
        let ids: Vec<&str> = msg.tool_calls().map(|t| t.id.as_str()).collect();
        for r in msg.results() {
            if !answered.insert(r.id.clone()) {
                wrong.push(format!("tool call {} answered twice", r.id));
            }
        }
        if ids.is_empty() {
            continue;
        }
        let next: Vec<&str> = messages.get(i + 1).map(|n| n.results().map(|r| r.id.as_str()).collect()).unwrap_or_default();
        if next != ids {
            wrong.push(format!("calls {ids:?} answered by {next:?}"));
        }
    }
    wrong
}

fn left_unknowns(c: &mut Checker, cx: &Context, host: &Host, root: Option<&ProcessId>, decoded: &[Option<TreeSnapshot>]) {
    let head = root.and_then(|r| cx.store.memory().head(r));
    // The store's head is usually the last acknowledged cut, already decoded strictly: a
    // decoded cut equal to it record for record (same keys, digests and bytes) is its
    // decoding. Otherwise (a head whose acknowledgement was lost) it is decoded here.
    let known = head.as_ref().and_then(|h| decoded.iter().rev().flatten().find(|s| *s.tree_cut() == h.cut));
    let fresh = match (&head, known) {
        (Some(h), None) => TreeSnapshot::from_cut(&h.cut).ok(),
        _ => None,
    };
    let now = known.or(fresh.as_ref()).map(unknowns_of).unwrap_or_default();
    for e in &host.left {
        c.expect(now.contains_key(e), "unknown_left_retained", || format!("unknown {e} left by the host is gone from the final head"));
        let engine_calls = cx.ledger.dispatches(e).iter().filter(|d| d.caller != Caller::Host).count();
        c.expect(engine_calls <= 1, "unknown_left_retained", || format!("unknown {e} was dispatched {engine_calls} times"));
    }
}

fn expectations(c: &mut Checker, cx: &Context, s: &Summary) {
    let e = &cx.spec.expect;
    if let Some(status) = e.status {
        c.expect(s.status == status.as_str(), "expect.status", || format!("ended {}, expected {}", s.status, status.as_str()));
    }
    if let Some(text) = &e.output_text {
        c.expect(s.output_text.as_ref() == Some(text), "expect.output_text", || format!("output {:?}, expected {text:?}", s.output_text));
    }
    if let Some(source) = &e.output_source {
        c.expect(s.output_source.as_ref() == Some(source), "expect.output_source", || format!("source {:?}, expected {source}", s.output_source));
    }
    if let Some(code) = &e.failure_code {
        c.expect(s.failure_code.as_ref() == Some(code), "expect.failure_code", || format!("failure {:?}, expected {code}", s.failure_code));
    }
    if let Some(n) = e.model_calls {
        c.expect(s.root_model_calls == n, "expect.model_calls", || format!("{} root model calls, expected {n}", s.root_model_calls));
    }
    let calls = cx.ledger.model_calls();
    // A tool result shows the model its content and (delegate artifacts) its JSON details.
    let seen = |needle: &str| {
        calls.iter().any(|m| {
            m.request.messages.iter().any(|msg| {
                msg.text().contains(needle)
                    || msg.results().any(|r| {
                        r.output.content.contains(needle)
                            || r.output.details.as_ref().is_some_and(|d| d.to_canonical_string().contains(needle))
                    })
            })
        })
    };
    for needle in &e.model_saw {
        c.expect(seen(needle), "expect.model_saw", || format!("no model request contained {needle:?}"));
    }
    for needle in &e.model_never_saw {
        c.expect(!seen(needle), "expect.model_never_saw", || format!("a model request contained {needle:?}"));
    }
}
