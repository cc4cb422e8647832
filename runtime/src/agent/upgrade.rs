//! Moving a live run to another version ([`Run::upgrade`]) or into a fresh run of the same
//! version ([`Run::continue_as_new`]), and following a run that did ([`Run::successor`]).
//!
//! Both hand over at the run root's next model call (see `handover`): the run ends naming its
//! successor, whose id is derived from the run's, and the successor starts with the carried
//! conversation and a lineage naming its predecessor. Each step is durable before the next:
//! (1) the model call is pending, (2) it settles as the hand-over and the run ends, (3) the
//! successor's start. A crash after (1) re-issues the call (a threshold hand-over is decided
//! again the same way; a requested one must be requested again, since the request lives in the
//! host); after (2) resuming the run, or [`Run::successor`], starts the successor; after (3)
//! the start finds the successor stored and resumes it. The derived id makes two successors
//! impossible.

use super::builder::Agent;
use super::continue_as_new::ContinueAsNew;
use super::handover::{handed_over, HandedOver, HandoverRequest};
use super::run::{wait_until, Run, RunId};
use super::run_error::RunError;
use super::runtime::engine_error;
use super::tracker::RunShared;
use super::versions::Versions;
use crate::env::BoxFuture;
use crate::interaction::protocol::{InteractionInput, Lineage};
use crate::interaction::state::ParentState;
use crate::interaction::wire::Wire;
use crate::kernel::engine::{Engine, EngineError, ProcessHandle};
use crate::kernel::snapshot::TreeSnapshot;
use std::sync::Arc;

/// The reason an upgrade records.
pub(crate) const UPGRADE: &str = "upgrade";
/// The reason a requested continue-as-new records.
pub(crate) const REQUESTED: &str = "continue-as-new requested";

impl Run {
    /// Continues this run under `to`, another registered version of its agent, as a new run
    /// linked to this one, and returns that run.
    ///
    /// The hand-over happens at the run's next model call: the one point where nothing of it
    /// is in flight (every tool call of the current turn has its result). Until then the run
    /// goes on under its own version; this waits for it. The run then ends with
    /// [`RunError::ContinuedAs`] naming the successor, which starts under `to` with the whole
    /// conversation and records this run as its predecessor. If the run waits for the host
    /// (an input to answer, an Unknown to resolve), this returns [`RunError::NotAtBoundary`]
    /// saying what, and the request stays: answer, and the run hands over at its next model
    /// call instead of calling the model.
    ///
    /// Calling it again, from this process or after a crash and
    /// [`Runtime::resume`](super::Runtime::resume), returns the same successor (its id is
    /// derived from this run's id), never a second one. The request itself lives in this
    /// process: if the process stops before the hand-over, call `upgrade` again after resuming.
    ///
    /// ```
    /// use keel::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build()?.block_on(async {
    /// let agent = |version: &str, model: ScriptedModel| {
    ///     Agent::builder("concierge")
    ///         .version(version)
    ///         .model(model)
    ///         .tool(AskHuman::new("ask_user", "Asks the user a question."))
    ///         .build()
    /// };
    /// // Version 1 asks which city; version 2 takes over once the answer is in.
    /// let v1 = agent("1", ScriptedModel::new().call_tool("ask_user", r#"{"question":"Which city?"}"#).then_text("Booked by v1."))?;
    /// let v2 = agent("2", ScriptedModel::new().then_text("Booked by v2."))?;
    /// let runtime = Runtime::in_memory(v1)?;
    /// runtime.register(&v2)?;
    /// let run = runtime.start("Book me a hotel.").await?;
    /// let Idle::NeedsInput(questions) = run.idle().await? else { unreachable!() };
    /// // The run waits for the user: the upgrade is requested and happens after the answer.
    /// assert!(matches!(run.upgrade(&v2).await, Err(RunError::NotAtBoundary { .. })));
    /// run.answer_text(&questions[0], "Lyon").await?;
    /// let next = run.upgrade(&v2).await?; // the same call again: the successor
    /// assert_eq!(next.version(), "2");
    /// assert_eq!(next.result().await?.text(), "Booked by v2.");
    /// assert!(matches!(run.result().await, Err(RunError::ContinuedAs { .. })));
    /// # Ok(()) })
    /// # }
    /// ```
    pub async fn upgrade(&self, to: &Agent) -> Result<Run, RunError> {
        let versions = &self.runtime.inner.versions;
        let registered = versions.by_version(to.version()).filter(|a| a.deployment_ref() == to.deployment_ref());
        if registered.is_none() {
            return Err(RunError::Version(format!(
                "version `{}` of agent `{}` is not registered in this runtime (registered: {}); call \
                 `Runtime::register` with it first",
                to.version(),
                to.name(),
                versions.listed()
            )));
        }
        if to.version() == self.agent.version() {
            return Err(RunError::Version(format!(
                "run {} already runs under version `{}`; use `Run::continue_as_new` to continue it in a fresh run",
                self.id(),
                to.version()
            )));
        }
        self.hand_over(HandoverRequest { version: to.version().to_owned(), reason: UPGRADE.into() }).await
    }

    /// Continues this run in a fresh run of the same version, carrying the task and the last
    /// messages (the agent's [`ContinueAsNew`] policy, else [`ContinueAsNew::on_request`]'s
    /// default), at its next model call, as [`upgrade`](Run::upgrade) does. Same errors, same
    /// idempotence.
    pub async fn continue_as_new(&self) -> Result<Run, RunError> {
        self.hand_over(HandoverRequest { version: self.agent.version().to_owned(), reason: REQUESTED.into() }).await
    }

    async fn hand_over(&self, request: HandoverRequest) -> Result<Run, RunError> {
        {
            let mut state = self.shared.lock();
            if state.result.is_none() {
                match &state.handover {
                    Some(asked) if asked.version != request.version || asked.reason != request.reason => {
                        return Err(RunError::Version(format!(
                            "run {} already has a hand-over requested ({} to version `{}`)",
                            self.id(),
                            asked.reason,
                            asked.version
                        )))
                    }
                    _ => state.handover = Some(request.clone()),
                }
            }
        }
        // An input this runtime already answered is not waited for (the head that shows the
        // answer consumed may not be projected yet).
        wait_until(&self.shared, |s| {
            let open_inputs = s.inputs.iter().any(|i| !s.answered.contains_key(&i.wait));
            s.result.is_some() || s.stopped.is_some() || (s.resolving.is_empty() && (open_inputs || !s.unknowns.is_empty()))
        })
        .await;
        let state = self.shared.lock();
        if let Some(result) = &state.result {
            return match handed_over(&self.shared.root, result) {
                Some(h) if h.version == request.version => {
                    drop(state);
                    self.successor().await
                }
                Some(h) => Err(RunError::ContinuedAs { run: self.id().to_string(), successor: h.successor, reason: h.reason, version: h.version }),
                None => Err(RunError::Version(format!(
                    "run {} ended ({}) before its next model call, so it has nothing to hand over; start a new run \
                     (`Run::continue_with` continues a completed conversation)",
                    self.id(),
                    result.status().as_str()
                ))),
            };
        }
        if let Some(reason) = &state.stopped {
            return Err(self.stopped(reason));
        }
        let waiting = if let Some(input) = state.inputs.iter().find(|i| !state.answered.contains_key(&i.wait)) {
            format!("an answer to \"{}\" (`Run::answer`)", input.prompt_text())
        } else {
            format!("the resolution of {} call(s) with an Unknown outcome (`Run::resolve`)", state.unknowns.len())
        };
        Err(RunError::NotAtBoundary { run: self.id().to_string(), waiting })
    }

    /// The run that continues this one, once it handed over (an upgrade, a continue-as-new):
    /// waits for this run to end, starts the successor if no one has yet (after a crash
    /// between the two, say), and returns it. A run that ended otherwise has no successor:
    /// its own end is the error ([`RunError::NotCompleted`], or `Ok` would have been its
    /// [`result`](Run::result)).
    pub async fn successor(&self) -> Result<Run, RunError> {
        let ended = match self.result().await {
            Err(RunError::ContinuedAs { .. }) => self.shared.lock().head.clone(),
            Ok(_) => {
                return Err(RunError::Version(format!(
                    "run {} completed: it has no successor (`Run::continue_with` continues its conversation)",
                    self.id()
                )))
            }
            Err(other) => return Err(other),
        };
        let head = ended.ok_or_else(|| RunError::NotFinished(self.id().to_string()))?;
        let result = self.shared.lock().result.clone().ok_or_else(|| RunError::NotFinished(self.id().to_string()))?;
        let h = handed_over(&self.shared.root, &result).ok_or_else(|| RunError::NotFinished(self.id().to_string()))?;
        let runtime = &self.runtime;
        let versions = &runtime.inner.versions;
        let Some(agent) = versions.by_version(&h.version) else {
            return Err(RunError::VersionNotRegistered {
                run: h.successor.to_string(),
                agent: self.agent.name().to_owned(),
                version: h.version,
                registered: versions.listed(),
            });
        };
        self.shared.lock().successor_started = true;
        match start_successor(&runtime.inner.engine, &self.agent, &agent, &head, &h).await? {
            Some(handle) => {
                let shared = agent.inner.hub.get_or_create(h.successor.process_id());
                Ok(Run::new(runtime.clone(), handle, shared, agent))
            }
            // Already stored: live in this runtime, or resumed from the store. The listener's
            // own start may be activating it right now: then wait for it to be published.
            None => loop {
                if let Some(handle) = runtime.inner.engine.lookup(h.successor.process_id()) {
                    let shared = agent.inner.hub.get_or_create(h.successor.process_id());
                    return Ok(Run::new(runtime.clone(), handle, shared, agent));
                }
                match runtime.resume(&h.successor).await {
                    Err(RunError::Conflict(text)) if text.contains("already running in this") => yield_now().await,
                    other => return other,
                }
            },
        }
    }
}

/// Lets every other ready task run once (no timer: the runtime crate keeps tokio's clock out).
pub(crate) async fn yield_now() {
    let mut yielded = false;
    futures::future::poll_fn(|cx| {
        if yielded {
            return std::task::Poll::Ready(());
        }
        yielded = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    })
    .await
}

/// What the successor of `head`'s run (ended by the hand-over `h`) starts with: the
/// conversation, whole for an upgrade, else cut by the old version's continue-as-new policy.
fn successor_input(from: &Agent, to: &Agent, head: &TreeSnapshot, h: &HandedOver) -> Result<InteractionInput, RunError> {
    let state = ParentState::from_execution_state(&head.root().committed_state).map_err(|e| RunError::Engine(e.to_string()))?;
    let messages = state.working_context.to_messages();
    let carried = if h.reason == UPGRADE {
        messages
    } else {
        from.continue_as_new_policy().unwrap_or_else(ContinueAsNew::on_request).carry(&messages)
    };
    let predecessor = head.root_id.clone();
    Ok(InteractionInput::new(carried).with_lineage(Lineage::continuing(to.version(), predecessor, h.reason.clone())))
}

/// Starts the successor under its derived id; `None` when it is already stored (started
/// earlier, by this runtime or before a crash).
async fn start_successor(
    engine: &Engine,
    from: &Agent,
    to: &Agent,
    head: &TreeSnapshot,
    h: &HandedOver,
) -> Result<Option<ProcessHandle>, RunError> {
    let input = successor_input(from, to, head, h)?.to_payload().map_err(|e| RunError::Input(e.to_string()))?;
    let id = h.successor.process_id();
    match engine.start_root(id.clone(), to.deployment().clone(), input).await {
        Ok(handle) => Ok(Some(handle)),
        Err(EngineError::TreeActive(_)) => Ok(None),
        Err(e) => match engine_error(id.as_str(), e) {
            RunError::AlreadyExists(_) => Ok(None),
            other => Err(other),
        },
    }
}

/// The task that starts the successor of a run whose head shows it handed over, once per
/// runtime; `None` when there is nothing to do (or the successor's version is not registered:
/// [`Run::successor`] says so).
pub(crate) fn successor_task(
    engine: &Engine,
    versions: &Versions,
    from: &Agent,
    run: &Arc<RunShared>,
    head: &Arc<TreeSnapshot>,
) -> Option<BoxFuture<'static, ()>> {
    let h = {
        let mut state = run.lock();
        let h = handed_over(&run.root, state.result.as_ref()?)?;
        if state.successor_started {
            return None;
        }
        state.successor_started = true;
        h
    };
    let to = versions.by_version(&h.version)?;
    let (engine, from, head, run) = (engine.clone(), from.clone(), head.clone(), run.clone());
    Some(Box::pin(async move {
        // A failure here is reported by `Run::successor`, which starts it again.
        if start_successor(&engine, &from, &to, &head, &h).await.is_err() {
            run.lock().successor_started = false;
        }
    }))
}

/// The id of the run that continues `run` if it hands over: a function of `run`'s id only.
pub fn successor_of(run: &RunId) -> RunId {
    super::handover::successor_id(run)
}
