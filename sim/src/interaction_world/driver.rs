//! The engine lifecycle: start the root on a real `Engine`, let the host act on every tick,
//! and when the writer stops (crash, lost ack, failed commit) wait for the old engine's
//! physical calls to drain, drop it, build a new Engine over the same store, restore the
//! head and carry on — until the root has a Result, the tree is stuck, or time runs out.

use super::context::Context;
use super::delegate::{build, Deployments};
use super::host::{Host, HostError};
use crate::limits::{HOST_QUIET_TICKS, HOST_TICK, INFLIGHT_DRAIN_TIMEOUT, MAX_INTERACTION_CRASHES, MAX_INTERACTION_RUN_TIME};
use crate::timeline::{MarkKind, HOST_LANE};
use crate::world::Violation;
use futures::future::Either;
use keel::chat::Message;
use keel::interaction::protocol::InteractionInput;
use keel::interaction::wire::Wire;
use keel::kernel::capability::CapabilitySet;
use keel::kernel::engine::{Engine, EngineConfig, ProcessHandle};
use keel::kernel::ids::ProcessId;
use keel::kernel::owner::RootConfig;
use keel::kernel::resource::Budget;
use keel::kernel::snapshot::TreeSnapshot;
use keel::kernel::result::ProcessResult;
use keel::kernel::tree_limits::TreeLimits;
use std::sync::Arc;

/// How a run ended.
#[derive(Clone, Debug)]
pub enum Ending {
    Finished(Box<ProcessResult>),
    /// The tree is live but nothing changes any more.
    Stuck,
    TimedOut,
    /// The deployments or the start could not be built (a scenario error).
    Refused(String),
}

pub struct Driven {
    pub ending: Ending,
    pub host: Option<Host>,
    pub stops: u64,
    pub root: Option<ProcessId>,
    pub violations: Vec<Violation>,
}

enum Tick {
    Finished(Box<ProcessResult>),
    Stopped,
    Stuck,
    TimedOut,
}

fn engine(cx: &Context, d: &Deployments) -> Engine {
    let engine = Engine::new(EngineConfig {
        env: cx.env.clone(),
        committer: cx.store.clone(),
        resolver: d.resolver.clone(),
        root: RootConfig { budget: Budget::unlimited(), capabilities: CapabilitySet::empty(), limits: TreeLimits::default() },
        listeners: vec![],
    });
    engine.set_compaction(cx.spec.compaction);
    engine
}

fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Runs the world of `cx` to its end.
pub async fn drive(cx: Arc<Context>) -> Driven {
    let mut out = Driven { ending: Ending::Stuck, host: None, stops: 0, root: None, violations: Vec::new() };
    let deployments = match build(&cx) {
        Ok(d) => d,
        Err(e) => {
            out.ending = Ending::Refused(e.to_string());
            return out;
        }
    };
    // A time budget counts from the start the host records in the input, as `keel::agent` does.
    let mut input = InteractionInput::new(vec![Message::user(cx.spec.user.clone())]);
    if cx.spec.budget.is_some_and(|b| b.time_ms().is_some()) {
        input = input.started_at(cx.env.clock.now().as_millis());
    }
    let input = match input.to_payload() {
        Ok(i) => i,
        Err(e) => {
            out.ending = Ending::Refused(format!("input: {e}"));
            return out;
        }
    };
    let mut host = Host::new(cx.clone(), &deployments);
    let deadline = cx.env.clock.now().as_millis().saturating_add(millis(MAX_INTERACTION_RUN_TIME));
    // The last head the stopped writer had acknowledged: the restore takes the stored
    // records byte-identical to its records from it instead of parsing them again.
    let mut known: Option<Arc<TreeSnapshot>> = None;
    loop {
        let engine = engine(&cx, &deployments);
        let opened = match &out.root {
            None => {
                cx.trace(format!("engine {} start", cx.incarnation()));
                cx.timeline.mark(HOST_LANE, MarkKind::Start, format!("engine {} start", cx.incarnation()));
                engine.start(deployments.parent.clone(), input.clone()).await
            }
            Some(root) => {
                cx.trace(format!("engine {} restore", cx.incarnation()));
                cx.timeline.mark(HOST_LANE, MarkKind::Restore, format!("engine {} restores the head", cx.incarnation()));
                let restored = engine.load_and_restore_reusing(deployments.parent.clone(), root, known.as_deref()).await;
                if let Some(head) = restored.as_ref().ok().and_then(|h| engine.inspect_head(h.id())) {
                    cx.restored(head);
                }
                restored
            }
        };
        let tick = match opened {
            Ok(handle) => {
                out.root = Some(handle.id().clone());
                cx.set_root(handle.id().clone());
                run_host(&cx, &mut host, &engine, &handle, deadline).await
            }
            Err(e) => {
                cx.trace(format!("engine {} open failed: {e}", cx.incarnation()));
                if out.root.is_none() {
                    // A start whose checkpoint reached the store is restored, else started again.
                    out.root = cx.store.memory().roots().first().cloned();
                }
                Tick::Stopped
            }
        };
        match tick {
            Tick::Finished(result) => {
                out.ending = Ending::Finished(result);
                break;
            }
            Tick::Stuck => {
                out.ending = Ending::Stuck;
                break;
            }
            Tick::TimedOut => {
                out.ending = Ending::TimedOut;
                break;
            }
            Tick::Stopped => {
                out.stops += 1;
                cx.trace(format!("writer {} stopped", cx.incarnation()));
                cx.timeline.mark(HOST_LANE, MarkKind::Stop, format!("writer {} stopped", cx.incarnation()));
                drain(&cx, &mut out).await;
                host.after_stop();
                known = out.root.as_ref().and_then(|r| engine.inspect_head(r)).or(known);
                drop(engine);
                cx.next_incarnation();
                if out.stops >= MAX_INTERACTION_CRASHES {
                    cx.store.disarm();
                }
                if out.stops > MAX_INTERACTION_CRASHES + 2 {
                    out.violations.push(Violation::new("restore_progress", format!("{} writer stops without progress", out.stops)));
                    out.ending = Ending::Stuck;
                    break;
                }
            }
        }
    }
    out.host = Some(host);
    out
}

/// Waits (bounded, simulated time) until no physical call of the stopped writer is in flight.
async fn drain(cx: &Context, out: &mut Driven) {
    let until = cx.env.clock.now().as_millis().saturating_add(millis(INFLIGHT_DRAIN_TIMEOUT));
    while cx.ledger.in_flight() > 0 {
        if cx.env.clock.now().as_millis() > until {
            out.violations.push(Violation::new("inflight_drains", format!("{} calls still in flight after the writer stopped", cx.ledger.in_flight())));
            return;
        }
        cx.env.clock.sleep(HOST_TICK).await;
    }
}

async fn run_host(cx: &Context, host: &mut Host, engine: &Engine, handle: &ProcessHandle, deadline: u64) -> Tick {
    if host.redeliver(engine, handle).await.is_err() {
        return Tick::Stopped;
    }
    let root = handle.id().clone();
    let mut quiet = 0u64;
    let mut last_digest = None;
    loop {
        let waited = futures::future::select(Box::pin(handle.await_result()), cx.env.clock.sleep(HOST_TICK)).await;
        match waited {
            Either::Left((Ok(result), _)) => {
                let _ = handle.join().await;
                cx.trace(format!("root finished {:?}", result.status()));
                cx.timeline.mark(root.as_str(), MarkKind::Finish, format!("root finished {:?}", result.status()));
                return Tick::Finished(Box::new(result));
            }
            Either::Left((Err(_), _)) => return Tick::Stopped,
            Either::Right(_) => {}
        }
        if engine.runtime_error(&root).is_some() {
            return Tick::Stopped;
        }
        let mut busy = false;
        let events = cx.take_hook_events();
        if !events.is_empty() {
            busy = true;
            if let Err(HostError::Stopped) = host.on_hooks(engine, handle, events).await {
                return Tick::Stopped;
            }
        }
        if let Some(head) = engine.inspect_head(&root) {
            match host.settle_unknowns(engine, handle, &head).await {
                Err(HostError::Stopped) => return Tick::Stopped,
                Ok(acted) => busy |= acted,
            }
            match host.answer_inputs(engine, handle, &head).await {
                Err(HostError::Stopped) => return Tick::Stopped,
                Ok(acted) => busy |= acted,
            }
            let digest = head.digest();
            busy |= last_digest.as_ref() != Some(&digest);
            last_digest = Some(digest);
        }
        busy |= cx.ledger.in_flight() > 0;
        quiet = if busy { 0 } else { quiet + 1 };
        if quiet > HOST_QUIET_TICKS {
            cx.trace("tree is stuck".to_string());
            return Tick::Stuck;
        }
        if cx.env.clock.now().as_millis() > deadline {
            return Tick::TimedOut;
        }
    }
}
