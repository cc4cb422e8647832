//! One seed of a campaign: the user's agent on the facade's `Runtime` over a faulty store,
//! under madsim; the host answers inputs, settles held Unknowns, performs the triggered
//! actions, and after every writer stop restores the run in a new `Runtime`, as a restarted
//! process would.

use super::campaign::{HostAction, Setup};
use super::faults::SeedPlan;
use super::model::HarnessModel;
use super::oracle;
use super::states;
use super::tool::FaultyTool;
use super::world::World;
use crate::interaction_world::spec::FaultSpec;
use crate::interaction_world::store::Store;
use crate::limits::{
    HOST_QUIET_TICKS, HOST_TICK, INFLIGHT_DRAIN_TIMEOUT, MAX_INTERACTION_CRASHES,
    MAX_INTERACTION_RUN_TIME,
};
use crate::world::{RunOptions, RunReport, Violation};
use futures::future::Either;
use keel::agent::{AnswerError, Idle, Resolution, Run, RunError, RunId, RunResult, Runtime};
use keel::env::Env;
use keel::json::Json;
use keel::kernel::ids::{EffectId, WaitId};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The text a held Unknown is settled with by the harness's host.
pub const HELD_UNKNOWN_TEXT: &str =
    "the harness settled this held call as failed (its outcome was unknown)";

/// How the run ended.
pub(crate) enum Ending {
    Finished(RunResult),
    /// Nothing changed for a long time and the run needs nothing from the host.
    Stuck,
    TimedOut,
    /// The harness could not go on (a setup error: an answer the schema refuses, no answers).
    Refused(Violation),
}

enum Tick {
    Finished(RunResult),
    Stopped,
    Stuck,
    TimedOut,
    Refused(Violation),
}

/// What the host did, for the oracle.
#[derive(Default)]
pub(crate) struct HostLog {
    /// The answer given to each wait (re-sent unchanged after a restore).
    answers: BTreeMap<WaitId, Json>,
    /// Steer texts in the order the host sent them; `false`: the delivery's outcome is unknown
    /// (the writer stopped during it).
    pub steers: Vec<(String, bool)>,
    resolved: BTreeSet<EffectId>,
}

fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Runs one seed under madsim and checks it.
pub(crate) fn run_seed(setup: &Arc<Setup>, seed: u64, options: &RunOptions) -> RunReport {
    run_seed_states(setup, seed, options).0
}

/// [`run_seed`], with the agent states the run reached (see `states`).
pub(crate) fn run_seed_states(
    setup: &Arc<Setup>,
    seed: u64,
    options: &RunOptions,
) -> (RunReport, BTreeMap<String, u64>) {
    let mut states = BTreeMap::new();
    let out = &mut states;
    let report = crate::world::run_guarded(&setup.name, seed, || {
        let rt = madsim::runtime::Runtime::with_seed_and_config(seed, madsim::Config::default());
        let moved = setup.clone();
        let keep_trace = options.keep_trace;
        let report = rt.block_on(async move {
            match keel::env::MadsimEnv::current() {
                Ok(m) => Some(drive(moved, m.env(), seed, keep_trace).await),
                Err(_) => None,
            }
        });
        match report {
            Some((report, reached)) => {
                *out = reached;
                report
            }
            None => {
                let mut r = RunReport::new(setup.name.clone(), seed);
                r.violations
                    .push(Violation::new("environment", "no madsim environment"));
                r
            }
        }
    });
    (report, states)
}

async fn drive(
    setup: Arc<Setup>,
    env: Env,
    seed: u64,
    keep_trace: bool,
) -> (RunReport, BTreeMap<String, u64>) {
    let plan = SeedPlan::draw(seed, &setup.faults, setup.actions.len() + setup.tool_actions.len());
    let triggers = setup
        .actions
        .iter()
        .enumerate()
        .map(|(i, (at, _))| (*at, i))
        .collect();
    // Actions during a tool's run are numbered after the model-call ones.
    let tool_triggers = setup
        .tool_actions
        .iter()
        .enumerate()
        .map(|(i, (tool, _))| (tool.clone(), setup.actions.len() + i))
        .collect();
    let world = Arc::new(World::new(
        env.clone(),
        seed,
        plan.clone(),
        triggers,
        tool_triggers,
        keep_trace,
    ));
    let faults = FaultSpec {
        at: Vec::new(),
        crash_per_mille: plan.crash,
        lose_ack_per_mille: plan.lose_ack,
        fail_before_per_mille: plan.fail_before,
        replay: None,
    };
    // The harness reports through its own ledger and trace; it draws no timeline.
    let timeline = crate::timeline::Recorder::new(env.clock.clone(), false);
    let store = Store::new(faults, seed, timeline);
    let mut report = RunReport::new(setup.name.clone(), seed);
    report.swarm = plan.describe().into_iter().collect();
    world.trace(format!("run {} seed {seed}", setup.name));
    let built = (setup.agent)()
        .model(HarnessModel {
            script: setup.script.clone(),
            world: world.clone(),
        })
        .wrap_tools(FaultyTool::wrap(world.clone(), setup.doubles.clone()))
        .build();
    let agent = match built {
        Ok(a) => a,
        Err(e) => {
            report
                .violations
                .push(Violation::new("agent_builds", e.to_string()));
            report.outcome = "the agent does not build".into();
            return (report, BTreeMap::new());
        }
    };
    let mut host = HostLog::default();
    let mut run_id: Option<RunId> = None;
    let mut stops = 0u64;
    let deadline = env
        .clock
        .now()
        .as_millis()
        .saturating_add(millis(MAX_INTERACTION_RUN_TIME));
    let ending = loop {
        let runtime = Runtime::with_store(agent.clone(), store.clone(), env.clone());
        let opened = match &run_id {
            None => runtime.start(setup.message.clone()).await,
            Some(id) => runtime.resume(id).await,
        };
        let tick = match opened {
            Ok(run) => {
                run_id = Some(run.id());
                host_loop(&world, &setup, &store, &mut host, &run, deadline, stops).await
            }
            Err(e) => {
                world.trace(format!("writer {stops} could not open the run: {e}"));
                if run_id.is_none() {
                    // A start whose first commit reached the store is resumed, else started again.
                    run_id = store
                        .memory()
                        .roots()
                        .first()
                        .and_then(|r| r.as_str().parse().ok());
                }
                Tick::Stopped
            }
        };
        match tick {
            Tick::Finished(r) => break Ending::Finished(r),
            Tick::Stuck => break Ending::Stuck,
            Tick::TimedOut => break Ending::TimedOut,
            Tick::Refused(v) => break Ending::Refused(v),
            Tick::Stopped => {
                stops += 1;
                world.trace(format!("writer {} stopped", stops - 1));
                drop(runtime);
                drain(&world, &mut report).await;
                if stops >= MAX_INTERACTION_CRASHES {
                    store.disarm();
                }
                if stops > MAX_INTERACTION_CRASHES + 2 {
                    report.violations.push(Violation::new(
                        "restore_progress",
                        format!("{stops} writer stops without progress"),
                    ));
                    break Ending::Stuck;
                }
            }
        }
    };
    let root = run_id.as_ref().map(|r| r.process_id().clone());
    let log = store.fault_log();
    oracle::judge(
        &mut report,
        &world,
        &store,
        root.as_ref(),
        &agent,
        &host,
        &ending,
    );
    report.faults_fired = log.fired.clone();
    for (k, v) in world.fired_kinds() {
        *report.faults_fired.entry(k).or_insert(0) += v;
    }
    if stops > 0 {
        report.faults_fired.insert("host.crash".into(), stops);
    }
    report.crash_points_hit = log.points.clone();
    let status = match &ending {
        Ending::Finished(r) => r.status().as_str().to_owned(),
        Ending::Stuck => "stuck".into(),
        Ending::TimedOut => "timed_out".into(),
        Ending::Refused(_) => "refused".into(),
    };
    report.outcome = format!(
        "{status}: {} model calls, {} commits, {stops} writer stops",
        world.model_requests().len(),
        log.commits
    );
    world.trace(format!("end {status} after {} commits", log.commits));
    world.take_trace().finish_into(&mut report);
    for (_, boundary, _) in &log.events {
        world.reached(&states::crash_at(boundary));
    }
    let mut sequences = BTreeSet::new();
    if world.model_requests().iter().any(|m| !sequences.insert(m.sequence)) {
        world.reached(states::MODEL_REISSUED);
    }
    if stops > 0 {
        for (kind, _) in world.fired_kinds() {
            if let Some(policy) = kind.strip_prefix("unknown.") {
                world.reached(&states::restore_unknown(policy));
            }
        }
    }
    (report, world.states())
}

/// Waits (bounded, simulated time) until no tool code of the stopped writer is running.
async fn drain(world: &World, report: &mut RunReport) {
    let until = world
        .env
        .clock
        .now()
        .as_millis()
        .saturating_add(millis(INFLIGHT_DRAIN_TIMEOUT));
    while world.in_flight() > 0 {
        if world.env.clock.now().as_millis() > until {
            report.violations.push(Violation::new(
                "inflight_drains",
                format!(
                    "{} tool runs still in flight after the writer stopped",
                    world.in_flight()
                ),
            ));
            return;
        }
        world.env.clock.sleep(HOST_TICK).await;
    }
}

async fn host_loop(
    world: &World,
    setup: &Setup,
    store: &Store,
    host: &mut HostLog,
    run: &Run,
    deadline: u64,
    writer: u64,
) -> Tick {
    let clock = world.env.clock.clone();
    let mut quiet = 0u64;
    let mut last_commits = u64::MAX;
    loop {
        if clock.now().as_millis() > deadline {
            return Tick::TimedOut;
        }
        for hook in world.take_hooks() {
            act(world, setup, host, run, hook.action, writer).await;
            let _ = hook.release.send(());
        }
        let idle = futures::future::select(Box::pin(run.idle()), clock.sleep(HOST_TICK)).await;
        let mut busy = false;
        match idle {
            Either::Left((Ok(Idle::Finished(result)), _)) => {
                world.trace(format!("run finished {}", result.status().as_str()));
                return Tick::Finished(result);
            }
            Either::Left((Err(e), _)) => {
                world.trace(format!(
                    "run stopped: {}",
                    matches!(e, RunError::Stopped(_))
                ));
                return Tick::Stopped;
            }
            Either::Left((Ok(Idle::NeedsInput(requests)), _)) => {
                for request in requests {
                    let next = host.answers.len();
                    let answer = match host.answers.get(&request.wait) {
                        Some(a) => a.clone(),
                        None => match setup.answers.get(next).or(setup.answers.last()) {
                            Some(a) => a.clone(),
                            None => {
                                return Tick::Refused(Violation::new(
                                    "answers_given",
                                    format!("the agent asked for input (`{}`) and the campaign has no answers: add .answers([...])", request.prompt_text()),
                                ))
                            }
                        },
                    };
                    match run.answer(&request, answer.clone()).await {
                        Ok(accepted) => {
                            if accepted {
                                world.fired("host.input.answer");
                                if writer > 0 {
                                    world.reached(states::ANSWER_AFTER_RESTORE);
                                }
                                busy = true;
                            }
                            world.trace(format!("host answered {} accepted {accepted}", request.prompt_text()));
                            host.answers.insert(request.wait.clone(), answer);
                        }
                        Err(AnswerError::Invalid { schema, detail, .. }) => {
                            return Tick::Refused(Violation::new(
                                "answer_matches_schema",
                                format!(
                                    "the scripted answer {} to `{}` does not match the tool's response schema {schema}: {detail}",
                                    answer.to_canonical_string(),
                                    request.prompt_text()
                                ),
                            ))
                        }
                        Err(e) => world.trace(format!("host answer not delivered: {e}")),
                    }
                }
                clock.sleep(HOST_TICK).await;
            }
            Either::Left((Ok(Idle::NeedsResolution(unknowns)), _)) => {
                for unknown in unknowns {
                    if host.resolved.contains(&unknown.effect) {
                        continue;
                    }
                    match run
                        .resolve(&unknown, Resolution::Failed(HELD_UNKNOWN_TEXT.into()))
                        .await
                    {
                        Ok(()) => {
                            world.trace(format!("host resolved a held {:?}", unknown.kind));
                            host.resolved.insert(unknown.effect.clone());
                            busy = true;
                        }
                        Err(e) => world.trace(format!("host resolve failed: {e}")),
                    }
                }
                clock.sleep(HOST_TICK).await;
            }
            Either::Right(_) => {}
        }
        let commits = store.fault_log().commits;
        busy |= commits != last_commits || world.in_flight() > 0;
        last_commits = commits;
        quiet = if busy { 0 } else { quiet + 1 };
        if quiet > HOST_QUIET_TICKS {
            world.trace("run is stuck".to_owned());
            return Tick::Stuck;
        }
    }
}

async fn act(world: &World, setup: &Setup, host: &mut HostLog, run: &Run, action: usize, writer: u64) {
    let what = match setup.actions.get(action) {
        Some((_, what)) => what,
        None => match setup.tool_actions.get(action - setup.actions.len().min(action)) {
            Some((_, what)) => what,
            None => return,
        },
    };
    match what {
        HostAction::Steer(text) => {
            world.fired("host.steer");
            let during_tools = world.in_flight() > 0;
            let delivered = run.steer(text.clone()).await.is_ok();
            if delivered && during_tools {
                world.reached(states::STEER_DURING_BATCH);
            }
            if delivered && writer > 0 {
                world.reached(states::STEER_AFTER_RESTORE);
            }
            world.trace(format!("host steer {text:?} delivered {delivered}"));
            host.steers.push((text.clone(), delivered));
        }
        HostAction::Cancel => {
            world.fired("host.cancel");
            let delivered = run.cancel("cancelled by the harness").await.is_ok();
            if delivered {
                world.reached(states::CANCELLED);
            }
            world.trace(format!("host cancel delivered {delivered}"));
        }
    }
}
