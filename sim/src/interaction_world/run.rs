//! Running one spec: on madsim (campaigns: seeded scheduling and time) or on a current-thread
//! tokio runtime with paused time (benchmarks: the same world on a real async runtime).

use super::context::Context;
use super::driver::{drive, Ending};
use super::oracle::{check, summarize, Summary};
use super::spec::{Spec, UnknownPolicy};
use super::store::Store;
use super::trace::closing_lines;
use crate::timeline::{MarkKind, Recorder, HOST_LANE};
use crate::schedule::{FaultEvent, FaultSchedule};
use crate::world::{RunOptions, RunReport, Violation};
use keel::env::{Env, SeededRng};
use keel::kernel::owner::CommitRequest;
use std::sync::Arc;

/// A report plus the comparable summary of how the run ended.
#[derive(Clone, Debug)]
pub struct RunOutcome {
    pub report: RunReport,
    pub summary: Summary,
    /// Commits the run made (the crash matrix crashes at each of them).
    pub commits: u64,
    /// The commit faults that fired, by commit index: replaying it reproduces the run.
    pub schedule: FaultSchedule,
    /// The run's store (`None` when the run could not start), kept so a caller can read the
    /// cuts afterwards without the campaign paying for it on every run.
    pub(crate) store: Option<Arc<Store>>,
}

impl RunOutcome {
    /// Every acknowledged cut, in commit order across writers (shared bytes, no copies):
    /// real snapshots for the fuzz corpus (`capture-cuts`).
    pub fn acknowledged_cuts(&self) -> Vec<Arc<[u8]>> {
        let records = self.store.as_ref().map(|s| s.records()).unwrap_or_default();
        // Commits are deltas against the head before them: resolve each acknowledged one
        // against the previous acknowledged cut (starts and activations are whole).
        let mut head: Option<keel::kernel::commit::TreeCut> = None;
        let mut out = Vec::new();
        for r in records.into_iter().filter(|r| r.acknowledged) {
            if let Ok(whole) = r.request.cut().resolve(head.as_ref()) {
                out.extend(whole.bytes().ok());
                head = Some(whole);
            }
        }
        out
    }
}

/// The swarm options a spec prints with its report.
fn swarm_of(spec: &Spec) -> std::collections::BTreeMap<String, String> {
    let mut m = std::collections::BTreeMap::new();
    m.insert("spec".into(), spec.name.clone());
    m.insert("unknown_policy".into(), spec.unknown_policy.as_str().into());
    m.insert("model.mode".into(), format!("{:?}", spec.model.mode).to_lowercase());
    m.insert("tools".into(), spec.tools.len().to_string());
    m.insert("max_concurrent".into(), spec.max_concurrent_tool_calls.to_string());
    let f = &spec.faults;
    if !f.at.is_empty() {
        let at: Vec<String> = f.at.iter().map(|(k, kind)| format!("{k}:{}", kind.as_str())).collect();
        m.insert("faults.at".into(), at.join(","));
    }
    for (k, v) in [("crash", f.crash_per_mille), ("lose_ack", f.lose_ack_per_mille), ("fail_before", f.fail_before_per_mille)] {
        if v > 0 {
            m.insert(format!("p.{k}"), format!("{v}/1000"));
        }
    }
    m
}

/// The world itself, on whatever environment `env` is.
pub async fn run_world(env: Env, spec: Spec, scenario: &str, seed: u64, options: &RunOptions) -> RunOutcome {
    let timeline = Recorder::new(env.clock.clone(), options.keep_trace);
    let store = Store::new(spec.faults.clone(), seed, timeline.clone());
    let cx = Context::new(env, spec, store.clone(), timeline.clone(), options.keep_trace);
    cx.trace(format!("run {} seed {seed}", cx.spec.name));
    let driven = drive(cx.clone()).await;
    let summary = summarize(&driven.ending, &cx);
    let log = store.fault_log();
    for line in closing_lines(&log, &summary, driven.stops) {
        cx.trace(line);
    }
    let mut report = RunReport::new(scenario, seed);
    report.swarm = swarm_of(&cx.spec);
    report.faults_fired = log.fired.clone();
    for (k, v) in cx.fired_kinds() {
        *report.faults_fired.entry(k).or_insert(0) += v;
    }
    if driven.stops > 0 {
        report.faults_fired.insert("host.crash".into(), driven.stops);
    }
    report.crash_points_hit = log.points.clone();
    report.violations = driven.violations.clone();
    if let Ending::Refused(why) = &driven.ending {
        report.violations.push(Violation::new("scenario_valid", why.clone()));
    }
    if let Some(host) = &driven.host {
        let (violations, checks) = check(&cx, host, driven.root.as_ref(), &summary);
        report.violations.extend(violations);
        report.invariants_checked = checks;
        let stuck_expected = !host.left.is_empty() || cx.spec.expect.status == Some(super::spec::ExpectStatus::Stuck);
        report.invariants_checked += 1;
        if matches!(driven.ending, Ending::Stuck | Ending::TimedOut) && !stuck_expected {
            report.violations.push(Violation::new("liveness", format!("the run ended {} with nothing left unknown on purpose", summary.status)));
        }
    }
    report.outcome = format!(
        "{}: {} root model calls, {} commits, {} writer stops",
        summary.status, summary.root_model_calls, log.commits, driven.stops
    );
    // Invariants judged after the run are pinned at its end; those seen live were marked
    // where they broke.
    let live: Vec<Violation> = cx.ledger.findings().0.into_iter().chain(driven.host.iter().flat_map(|h| h.violations.clone())).collect();
    for v in &report.violations {
        if !live.contains(v) {
            timeline.mark(HOST_LANE, MarkKind::Violation, format!("{}: {}", v.invariant, v.detail));
        }
    }
    report.timeline = timeline.finish();
    cx.take_trace().finish_into(&mut report);
    let schedule = FaultSchedule::new(
        log.events.iter().map(|(at, _, kind)| FaultEvent { at: *at, kind: kind.as_str().to_owned() }).collect(),
    );
    RunOutcome { report, summary, commits: log.commits, schedule, store: Some(store) }
}

/// Runs `spec` under madsim with `seed` (scheduling, latencies and ids all from the seed),
/// then, on the seeds it samples, checks `log_compaction_same_head` over the run's commits.
pub fn run_outcome_on_madsim(spec: &Spec, scenario: &str, seed: u64, options: &RunOptions) -> RunOutcome {
    let mut out = run_outcome_unchecked(spec, scenario, seed, options);
    check_log_compaction(&mut out, seed);
    out
}

/// `log_compaction_same_head` (see [`crate::log_compaction`]) on a finished run: after the
/// simulated runtime is gone, from the recorded requests only, so the trace is the run's.
fn check_log_compaction(out: &mut RunOutcome, seed: u64) {
    if !crate::log_compaction::selected(seed) {
        return;
    }
    let Some(store) = &out.store else { return };
    let requests: Vec<CommitRequest> = store.records().into_iter().filter(|r| r.reached).map(|r| r.request).collect();
    crate::log_compaction::check_into(&mut out.report, seed, &requests, store.memory());
}

/// [`run_outcome_on_madsim`] without the file-log replay: for a run made as a reference (the
/// crash matrix's fault-free run; the faulted run it is compared with is checked).
pub(crate) fn run_outcome_unchecked(spec: &Spec, scenario: &str, seed: u64, options: &RunOptions) -> RunOutcome {
    let spec = spec.clone();
    let scenario = scenario.to_owned();
    let options = options.clone();
    let mut fallback = RunReport::new(scenario.clone(), seed);
    let rt = madsim::runtime::Runtime::with_seed_and_config(seed, madsim::Config::default());
    let out = rt.block_on(async move {
        match keel::env::MadsimEnv::current() {
            Ok(m) => Some(run_world(m.env(), spec, &scenario, seed, &options).await),
            Err(_) => None,
        }
    });
    out.unwrap_or_else(|| {
        fallback.violations.push(Violation::new("environment", "no madsim environment"));
        RunOutcome { report: fallback, summary: Summary::default(), commits: 0, schedule: FaultSchedule::default(), store: None }
    })
}

/// Runs `spec` under madsim; see [`run_outcome_on_madsim`].
pub fn run_on_madsim(spec: &Spec, seed: u64, options: &RunOptions) -> RunReport {
    crate::world::run_guarded(&spec.name, seed, || run_outcome_on_madsim(spec, &spec.name, seed, options).report)
}

/// Runs `spec` on a current-thread tokio runtime with paused (virtual) time; ids and
/// latencies come from a rng seeded with `seed`.
pub fn run_on_tokio(spec: &Spec, seed: u64, options: &RunOptions) -> RunReport {
    crate::world::run_guarded(&spec.name, seed, || {
        let mut report = RunReport::new(spec.name.clone(), seed);
        let rt = match tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build() {
            Ok(rt) => rt,
            Err(e) => {
                report.violations.push(Violation::new("environment", format!("tokio runtime: {e}")));
                return report;
            }
        };
        let spec = spec.clone();
        let options = options.clone();
        rt.block_on(async move {
            let tokio_env = match keel::env::TokioEnv::current() {
                Ok(t) => Arc::new(t),
                Err(e) => {
                    report.violations.push(Violation::new("environment", format!("tokio env: {e}")));
                    return report;
                }
            };
            let env = Env::new(tokio_env.clone(), tokio_env, Arc::new(SeededRng::new(seed)));
            let name = spec.name.clone();
            run_world(env, spec, &name, seed, &options).await.report
        })
    })
}

/// Whether a crash run of `spec` must end with the fault-free output.
pub fn compares_output(spec: &Spec) -> bool {
    spec.expect.same_output_under_crash && spec.unknown_policy == UnknownPolicy::Truth
}
