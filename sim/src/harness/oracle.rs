//! The invariants of a harness run, judged against the world's ground truth (the store's
//! records, the requests the model received, the ledger of the user's tool runs), never
//! against what the runtime reports about itself. Names are stable strings:
//!
//! * `kernel_<n>`, `head_round_trip`, `unknown_sticky` — the store checks the Interaction
//!   world uses (every acknowledged cut, the history, Unknowns kept until a resolved boundary);
//! * `results_in_call_order` — every request the model received answers each tool call of an
//!   assistant message exactly once, right after it, in call order;
//! * `model_call_limit` — no model call sequence beyond the agent's `max_model_calls`, and
//!   none twice unless the agent's model Unknown policy is `Retry` (then a call cut off by a
//!   crash is issued again on purpose: one more call, not a double one);
//! * `steers_once_in_order` — each steer reaches the model at most as often as it was sent,
//!   in the order it was sent;
//! * `no_double_dispatch` — the code of a tool whose Unknown policy is not `Retry` never runs
//!   twice for one call;
//! * `retry_safe` — a call an Unknown policy re-performed had the same outcome as the run
//!   that had already taken effect (otherwise the policy re-performed a non-idempotent call);
//! * `idempotent_declared` — (checked at the dispatch boundary) two runs of one call of a tool
//!   declared idempotent agree;
//! * `liveness` — the run ends; `answer_matches_schema`, `answers_given`, `agent_builds` —
//!   the campaign's own setup is usable.

use super::run::{Ending, HostLog};
use super::world::World;
use crate::interaction_world::oracle::{check_store, results_in_call_order};
use crate::interaction_world::store::Store;
use crate::world::{RunReport, Violation};
use keel::agent::{Agent, UnknownPolicy};
use keel::chat::Role;
use keel::kernel::commit::{CommitRecordKind, EffectBoundaryKind};
use keel::kernel::ids::ProcessId;
use std::collections::BTreeSet;

struct Checker<'a> {
    report: &'a mut RunReport,
}

impl Checker<'_> {
    fn expect(&mut self, ok: bool, invariant: &str, detail: impl FnOnce() -> String) {
        self.report.invariants_checked += 1;
        if !ok {
            self.report
                .violations
                .push(Violation::new(invariant, detail()));
        }
    }
}

pub(crate) fn judge(
    report: &mut RunReport,
    world: &World,
    store: &Store,
    root: Option<&ProcessId>,
    agent: &Agent,
    host: &HostLog,
    ending: &Ending,
) {
    // The facade always compacts.
    let (violations, checks) = check_store(store, root, true);
    report.violations.extend(violations);
    report.invariants_checked += checks;
    let mut c = Checker { report };
    model_requests(&mut c, world, agent);
    steers(&mut c, world, host);
    tool_runs(&mut c, world, store, root);
    match ending {
        Ending::Finished(_) => c.expect(true, "liveness", String::new),
        Ending::Stuck => c.expect(false, "liveness", || {
            "the run stopped changing before it ended and needed nothing from the host".into()
        }),
        Ending::TimedOut => c.expect(false, "liveness", || {
            "the run did not end in the simulated time limit".into()
        }),
        Ending::Refused(v) => c.report.violations.push(v.clone()),
    }
    let (violations, checks) = world.findings();
    c.report.violations.extend(violations);
    c.report.invariants_checked += checks;
}

fn model_requests(c: &mut Checker<'_>, world: &World, agent: &Agent) {
    let requests = world.model_requests();
    for m in &requests {
        let wrong = results_in_call_order(&m.request);
        c.expect(wrong.is_empty(), "results_in_call_order", || {
            format!("model call {}: {}", m.sequence, wrong.join("; "))
        });
    }
    let sequences: Vec<u32> = requests.iter().map(|m| m.sequence).collect();
    let reissue = agent.model_unknown_policy() == UnknownPolicy::Retry;
    for (ok, detail) in model_call_limit(&sequences, agent.max_model_calls(), reissue) {
        c.expect(ok, "model_call_limit", || detail);
    }
}

/// One check per model call the model received (`sequences`, in arrival order): within the
/// limit, and new unless `reissue` (the agent issues a call again after an Unknown).
pub(crate) fn model_call_limit(sequences: &[u32], limit: u32, reissue: bool) -> Vec<(bool, String)> {
    let mut seen = BTreeSet::new();
    let mut checks = Vec::new();
    for &sequence in sequences {
        let new = seen.insert(sequence);
        checks.push((new || reissue, format!("model call {sequence} was made twice")));
        checks.push((sequence <= limit, format!("model call {sequence} exceeds max_model_calls {limit}")));
    }
    checks
}

#[cfg(test)]
mod tests {
    use super::model_call_limit;

    fn failures(sequences: &[u32], limit: u32, reissue: bool) -> Vec<String> {
        model_call_limit(sequences, limit, reissue).into_iter().filter(|(ok, _)| !ok).map(|(_, d)| d).collect()
    }

    #[test]
    fn a_reissue_after_an_unknown_is_not_a_double_call_but_stays_within_the_limit() {
        assert_eq!(failures(&[1, 2, 2, 3], 3, true), Vec::<String>::new(), "a re-issued call");
        assert_eq!(failures(&[1, 2, 2], 3, false), ["model call 2 was made twice"], "no re-issue declared");
        assert_eq!(failures(&[1, 2, 3, 3, 4], 3, true), ["model call 4 exceeds max_model_calls 3"]);
    }
}

fn steers(c: &mut Checker<'_>, world: &World, host: &HostLog) {
    if host.steers.is_empty() {
        return;
    }
    let sent: Vec<&str> = host.steers.iter().map(|(t, _)| t.as_str()).collect();
    for m in world.model_requests() {
        // Steer texts as they appear among the request's user messages (the first user message
        // is the run's input).
        let applied: Vec<String> = m
            .request
            .messages
            .iter()
            .filter(|msg| msg.role == Role::User)
            .skip(1)
            .map(|msg| msg.text())
            .filter(|t| sent.contains(&t.as_str()))
            .collect();
        for text in &applied {
            let times_sent = sent.iter().filter(|s| **s == text.as_str()).count();
            let times_seen = applied.iter().filter(|a| *a == text).count();
            c.expect(times_seen <= times_sent, "steers_once_in_order", || {
                format!(
                    "model call {}: steer {text:?} applied {times_seen} times, sent {times_sent}",
                    m.sequence
                )
            });
        }
        // Applied steers must be a subsequence of the sending order.
        let mut cursor = sent.iter();
        let in_order = applied.iter().all(|a| cursor.any(|s| *s == a.as_str()));
        c.expect(in_order, "steers_once_in_order", || {
            format!(
                "model call {}: steers applied as {applied:?}, sent as {sent:?}",
                m.sequence
            )
        });
    }
}

fn tool_runs(c: &mut Checker<'_>, world: &World, store: &Store, root: Option<&ProcessId>) {
    let runs = world.all_runs();
    for (effect, runs) in &runs {
        let real: Vec<_> = runs.iter().filter(|r| !r.probe).collect();
        let Some(first) = real.first() else { continue };
        let tool = first.tool.clone();
        if first.policy != UnknownPolicy::Retry {
            c.expect(real.len() <= 1, "no_double_dispatch", || {
                format!(
                    "call {effect} of tool `{tool}` (Unknown policy {}) ran the tool's code {} times",
                    first.policy.as_str(),
                    real.len()
                )
            });
            continue;
        }
        // The first run that returned took effect; every later run must tell the same outcome.
        let returned: Vec<&String> = real
            .iter()
            .filter_map(|r| r.outcome.as_ref())
            .filter(|o| *o != "input requested")
            .collect();
        if let Some(taken) = returned.first() {
            for later in returned.iter().skip(1) {
                c.expect(later == taken, "retry_safe", || {
                    format!(
                        "tool `{tool}` has Unknown policy retry, and re-performing call {effect} ran its code again after a run had taken effect: `{taken}`, then `{later}` (the call is not idempotent: declare Hold or ReportToModel)"
                    )
                });
            }
        }
    }
    // How each settled Unknown was settled, by the tool's declared policy.
    let Some(root) = root else { return };
    for record in store.memory().history(root) {
        if let CommitRecordKind::Effect {
            effect_id,
            kind: EffectBoundaryKind::Resolved,
            ..
        } = record.kind
        {
            let key = match runs.get(&effect_id).and_then(|r| r.first()) {
                Some(r) => format!("unknown.{}", r.policy.as_str()),
                None => "unknown.other".to_owned(),
            };
            world.fired(&key);
        }
    }
}
