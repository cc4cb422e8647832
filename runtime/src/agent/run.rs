//! The handle of one run: events, inputs, steering, termination, Unknowns, the result.

use super::events::Events;
use super::input::{answer_signal_id, InputRequest};
use super::recovery::{Resolution, UnknownEffect};
use super::result::RunResult;
use super::run_error::{AnswerError, RunError};
use super::runtime::{engine_error, Runtime};
use super::tracker::{RunShared, RunState};
use crate::chat::Message;
use crate::env::random_hex;
use crate::interaction::pending_inputs::pending_tool_inputs;
use crate::interaction::signals::steer_signal;
use crate::interaction::state::ParentState;
use crate::json::Json;
use crate::kernel::engine::{EngineError, ProcessHandle};
use crate::kernel::owner::CommandError;
use crate::kernel::ids::{ProcessId, SignalId};
use crate::kernel::snapshot::TreeSnapshot;
use std::sync::Arc;
use std::task::Poll;

/// The durable identity of a run: print it, store it, and pass it to
/// [`Runtime::resume`] in a later process.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RunId(ProcessId);

impl RunId {
    /// The run id a work queue derives from its own key (a job name, a ticket number): the
    /// same key always names the same run, different keys name different runs (the first 128
    /// bits of SHA-256 of the key). Start it with [`Runtime::start_with_id`](super::Runtime::start_with_id).
    pub fn from_key(key: &str) -> RunId {
        use sha2::{Digest as _, Sha256};
        let digest = Sha256::digest(key.as_bytes());
        let mut hex = String::new();
        crate::text::push_lower_hex(&mut hex, &digest[..16]);
        // 32 lowercase hex digits always form a valid root id.
        RunId(ProcessId::root_from_hex(&hex).unwrap_or_else(|_| unreachable!("32 hex digits")))
    }

    /// The root Process of the run.
    pub fn process_id(&self) -> &ProcessId {
        &self.0
    }

    /// The run whose root is `root`.
    pub(crate) fn from_process(root: ProcessId) -> RunId {
        RunId(root)
    }
}

impl std::fmt::Display for RunId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.as_str())
    }
}

impl std::str::FromStr for RunId {
    type Err = RunError;
    fn from_str(s: &str) -> Result<RunId, RunError> {
        ProcessId::parse(s.trim()).map(RunId).map_err(|e| RunError::InvalidRunId(format!("{s} ({e})")))
    }
}

/// Why a run needs nothing more from the host right now, or what it needs.
#[derive(Clone, Debug, PartialEq)]
pub enum Idle {
    /// The run ended.
    Finished(RunResult),
    /// Tools wait for answers ([`Run::answer`]).
    NeedsInput(Vec<InputRequest>),
    /// Calls with Unknown outcomes wait for [`Run::resolve`].
    NeedsResolution(Vec<UnknownEffect>),
}

/// One durable run of an agent. Dropping the handle does not stop the run.
///
/// Watch it with [`events`](Run::events), answer its questions with
/// [`answer_text`](Run::answer_text), steer, cancel or kill it, and read its outcome with
/// [`result`](Run::result) (or drive it step by step with [`idle`](Run::idle)).
///
/// ```
/// use keel::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # tokio::runtime::Builder::new_current_thread().enable_time().build()?.block_on(async {
/// let agent = Agent::builder("concierge")
///     .version("1")
///     .model(ScriptedModel::new().call_tool("ask_user", r#"{"question":"Which city?"}"#).then_text("Booked."))
///     .tool(AskHuman::new("ask_user", "Asks the user a question."))
///     .build()?;
/// let run = Runtime::in_memory(agent)?.start("Book me a hotel.").await?;
/// let mut events = run.events();
/// while let Some(event) = events.next().await {
///     if let RunEvent::InputRequested(request) = event {
///         run.answer_text(&request, "Lyon").await?; // the tool's answer to the model
///     }
/// }
/// assert_eq!(run.result().await?.text(), "Booked.");
/// # Ok(()) })
/// # }
/// ```
pub struct Run {
    pub(super) runtime: Runtime,
    handle: ProcessHandle,
    pub(super) shared: Arc<RunShared>,
    /// The registered version this run runs under (the one it recorded when it started).
    pub(super) agent: super::builder::Agent,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Run").field("id", &self.shared.root.as_str()).finish_non_exhaustive()
    }
}

/// Waits until `done` holds for the run's state, woken by every change (never polls).
pub(crate) async fn wait_until(shared: &RunShared, mut done: impl FnMut(&RunState) -> bool) {
    futures::future::poll_fn(|cx| {
        let mut state = shared.lock();
        if done(&state) {
            Poll::Ready(())
        } else {
            state.register_waker(cx.waker());
            Poll::Pending
        }
    })
    .await
}

/// What the durable head says about an answer's signal.
enum Admitted {
    /// The tool child admitted this exact answer (same wait, same canonical answer).
    This,
    /// The tool child admitted a different answer to this wait.
    Other,
    /// The tool child admitted no answer to this wait.
    Nothing,
    /// The tool child is no longer in the head (its call finished and was compacted).
    ChildGone,
}

fn admitted_answer(head: &TreeSnapshot, request: &InputRequest, id: &SignalId) -> Admitted {
    let Some(child) = head.process(&request.process) else { return Admitted::ChildGone };
    let this = child.mailbox.arrival_of(id).and_then(|a| child.mailbox.record(a));
    if this.is_some_and(|r| r.wait_id() == Some(&request.wait)) {
        return Admitted::This;
    }
    let answered = child.mailbox.records().iter().any(|r| r.is_answer() && r.wait_id() == Some(&request.wait));
    if answered {
        Admitted::Other
    } else {
        Admitted::Nothing
    }
}

impl Run {
    pub(crate) fn new(runtime: Runtime, handle: ProcessHandle, shared: Arc<RunShared>, agent: super::builder::Agent) -> Run {
        Run { runtime, handle, shared, agent }
    }

    /// The version of the agent this run runs under: the one that started it, whichever
    /// version new runs of its runtime start under.
    pub fn version(&self) -> &str {
        self.agent.version()
    }

    #[cfg(test)]
    pub(crate) fn shared_for_tests(&self) -> Arc<RunShared> {
        self.shared.clone()
    }

    /// The run's durable id.
    pub fn id(&self) -> RunId {
        RunId(self.shared.root.clone())
    }

    /// The run's events from the beginning of this handle's view (see [`RunEvent`](super::RunEvent)).
    pub fn events(&self) -> Events {
        Events { shared: self.shared.clone(), cursor: 0, done: false }
    }

    /// The tool input requests open in the latest acknowledged state.
    pub fn pending_inputs(&self) -> Vec<InputRequest> {
        self.shared.lock().inputs.clone()
    }

    /// The Unknown calls held for the host ([`Run::resolve`]).
    pub fn unknowns(&self) -> Vec<UnknownEffect> {
        self.shared.lock().unknowns.values().cloned().collect()
    }

    /// The run's tokens so far, in the latest acknowledged state: the root's model calls, the
    /// delegate runs it folded and every delegate still running. A run that failed or was
    /// canceled keeps what it spent (also in [`RunFailure::usage`](super::RunFailure::usage)).
    pub fn usage(&self) -> crate::chat::Usage {
        self.shared.lock().run_usage
    }

    /// Model deltas dropped so far because the delta queue was full.
    pub fn dropped_deltas(&self) -> u64 {
        self.shared.lock().dropped_total
    }

    /// Answers an input request with a JSON value, validated here against the request's
    /// response schema. Returns `true` when the answer was newly accepted and `false` when it
    /// repeats an answer already admitted (the signal id is derived from the wait and the
    /// answer, so a retry is never applied twice). An answer to a wait the run is not on, or a
    /// different answer to a wait already answered, is refused with [`AnswerError::WrongWait`].
    ///
    /// Whether the answer was admitted is read from the run's durable head, so a retry sent by
    /// a new process after [`Runtime::resume`] is recognized like one sent by this process:
    /// the tool child's mailbox keeps every admitted signal's id, consumed or not. Once the
    /// tool's call has finished, an answer is refused with [`AnswerError::CallEnded`] (this
    /// question was already answered or its call ended), also after its child has been
    /// compacted away: then no durable record of the answer remains, and only an answer this
    /// runtime itself delivered is still reported as a duplicate.
    pub async fn answer(&self, request: &InputRequest, answer: Json) -> Result<bool, AnswerError> {
        let wait = request.wait.as_str().to_owned();
        let canonical = answer.to_canonical_string();
        let not_delivered = |detail: String| AnswerError::NotDelivered { wait: wait.clone(), detail };
        let wrong_wait = || AnswerError::WrongWait { wait: wait.clone(), current: self.shared.lock().inputs.len() };
        let call_ended = || AnswerError::CallEnded { wait: wait.clone() };
        let id = answer_signal_id(&request.wait, &answer).map_err(|e| not_delivered(e.to_string()))?;
        let head = self.durable_head().await.map_err(not_delivered)?;
        let signal = match admitted_answer(&head, request, &id) {
            Admitted::This => return Ok(false),
            Admitted::Other => return Err(wrong_wait()),
            Admitted::ChildGone => {
                // No durable record of the answer is left; only this runtime's own delivery
                // can be recognized. A retired child's residue still says its call ended.
                let repeats = self.shared.lock().answered.get(&request.wait) == Some(&canonical);
                return match (repeats, head.residue(&request.process).is_some()) {
                    (true, _) => Ok(false),
                    (false, true) => Err(call_ended()),
                    (false, false) => Err(wrong_wait()),
                };
            }
            Admitted::Nothing => {
                let pending = pending_tool_inputs(&head)
                    .ok()
                    .and_then(|all| all.into_iter().find(|p| p.wait_id() == &request.wait && p.process_id() == &request.process));
                let Some(pending) = pending else {
                    let ended = head.process(&request.process).is_some_and(|p| p.is_terminal());
                    return Err(if ended { call_ended() } else { wrong_wait() });
                };
                pending.response_signal(id, &answer).map_err(|e| AnswerError::Invalid {
                    wait: wait.clone(),
                    schema: pending.response_schema().canonical().to_owned(),
                    detail: e.to_string(),
                })?
            }
        };
        let target = self
            .runtime
            .inner
            .engine
            .lookup(&request.process)
            .ok_or_else(|| not_delivered(format!("process {} is not live in this runtime", request.process)))?;
        let accepted = target.deliver_signals(vec![signal]).await.map_err(|e| match e {
            // The call ended between reading the head and delivering.
            EngineError::Command(CommandError::ProcessFinished(_)) => call_ended(),
            e => not_delivered(e.to_string()),
        })?;
        self.shared.lock().answered.insert(request.wait.clone(), canonical);
        // `false`: a concurrent identical answer was admitted first; the kernel deduplicated it.
        Ok(accepted)
    }

    /// The run's latest acknowledged head, read from the store.
    async fn durable_head(&self) -> Result<TreeSnapshot, String> {
        let root = &self.shared.root;
        let head = self.runtime.inner.committer.load_tree(root).await.map_err(|e| e.to_string())?;
        let head = head.ok_or_else(|| format!("run {root} is not in the store"))?;
        TreeSnapshot::from_cut(&head.cut).map_err(|e| format!("the stored run does not decode: {e}"))
    }

    /// Answers an input request with a text (a JSON string).
    pub async fn answer_text(&self, request: &InputRequest, text: impl Into<String>) -> Result<bool, AnswerError> {
        self.answer(request, Json::str(text)).await
    }

    /// Adds a user message to the conversation; it is applied at the next model call.
    pub async fn steer(&self, text: impl Into<String>) -> Result<(), RunError> {
        let hex = random_hex(self.runtime.inner.env.rng.as_ref(), 16);
        let id = SignalId::external(&format!("steer:{hex}")).map_err(|e| RunError::Input(e.to_string()))?;
        let signal = steer_signal(id, vec![Message::user(text)]).map_err(|e| RunError::Input(e.to_string()))?;
        self.handle.deliver_signals(vec![signal]).await.map_err(|e| engine_error(self.shared.root.as_str(), e))?;
        Ok(())
    }

    /// Asks the run to stop; it ends `cancelled` once in-flight calls return.
    pub async fn cancel(&self, reason: impl Into<String>) -> Result<(), RunError> {
        self.handle.request_cancellation(reason).await.map_err(|e| engine_error(self.shared.root.as_str(), e))
    }

    /// Ends the run now (`killed`).
    pub async fn kill(&self, reason: impl Into<String>) -> Result<(), RunError> {
        self.handle.kill(reason).await.map_err(|e| engine_error(self.shared.root.as_str(), e))
    }

    /// Settles a held Unknown call.
    pub async fn resolve(&self, unknown: &UnknownEffect, resolution: Resolution) -> Result<(), RunError> {
        let fail = |detail: String| RunError::Resolve { effect: unknown.effect.to_string(), detail };
        let settlement = match resolution {
            Resolution::Succeeded(text) => unknown.settlement(true, &text),
            Resolution::Failed(text) => unknown.settlement(false, &text),
            Resolution::Retry => {
                let deployment = self
                    .agent
                    .deployments()
                    .iter()
                    .find(|d| d.reference() == &unknown.deployment_ref)
                    .ok_or_else(|| fail("no deployment of this agent runs it".into()))?;
                unknown.retry(deployment).await
            }
        }
        .map_err(fail)?;
        let target = self
            .runtime
            .inner
            .engine
            .lookup(&unknown.process)
            .ok_or_else(|| fail(format!("process {} is not live in this runtime", unknown.process)))?;
        target.resolve_unknown_effect(unknown.effect.clone(), settlement).await.map_err(|e| fail(e.to_string()))?;
        self.shared.lock().unknowns.remove(&unknown.effect);
        Ok(())
    }

    /// Waits for the run to end; `Ok` only when it completed.
    ///
    /// A run that failed, was canceled, timed out or was killed is
    /// `Err(`[`RunError::NotCompleted`]`)` with its status, failure code and message, so a
    /// failed run is never read as an empty answer. A run that continued as a new run (an
    /// upgrade, a continue-as-new) is `Err(`[`RunError::ContinuedAs`]`)` naming its successor. A writer that stopped (another writer took
    /// the run over, or the store failed) is an `Err` that says which.
    ///
    /// ```
    /// use keel::prelude::*;
    /// # async fn demo(run: &Run) -> Result<(), RunError> {
    /// match run.result().await {
    ///     Ok(result) => println!("{}", result.text()),
    ///     Err(RunError::NotCompleted(failure)) => eprintln!("no answer: {failure}"),
    ///     Err(other) => return Err(other),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn result(&self) -> Result<RunResult, RunError> {
        wait_until(&self.shared, |s| s.result.is_some() || s.stopped.is_some()).await;
        let state = self.shared.lock();
        if let Some(h) = state.result.as_ref().and_then(|r| super::handover::handed_over(&self.shared.root, r)) {
            return Err(RunError::ContinuedAs { run: self.id().to_string(), successor: h.successor, reason: h.reason, version: h.version });
        }
        match (&state.result, &state.stopped) {
            (Some(r), _) => RunResult::new(r.clone(), state.root_model.clone(), state.root_spent).into_completed().map_err(RunError::NotCompleted),
            (None, Some(reason)) => Err(self.stopped(reason)),
            (None, None) => Err(RunError::Stopped("the run stopped".into())),
        }
    }

    /// The error for this run's stopped writer: the engine's typed reason when it has one.
    pub(super) fn stopped(&self, reason: &str) -> RunError {
        match self.runtime.inner.engine.runtime_error(&self.shared.root) {
            Some(error) => super::runtime::stopped_error(&error),
            None => RunError::Stopped(reason.to_owned()),
        }
    }

    /// Waits until the run ended or needs the host (an input to answer, an Unknown to resolve).
    pub async fn idle(&self) -> Result<Idle, RunError> {
        wait_until(&self.shared, |s| {
            s.result.is_some() || s.stopped.is_some() || (s.resolving.is_empty() && (!s.inputs.is_empty() || !s.unknowns.is_empty()))
        })
        .await;
        let state = self.shared.lock();
        if let Some(r) = &state.result {
            return Ok(Idle::Finished(RunResult::new(r.clone(), state.root_model.clone(), state.root_spent)));
        }
        if let Some(reason) = &state.stopped {
            return Err(self.stopped(reason));
        }
        if !state.inputs.is_empty() {
            return Ok(Idle::NeedsInput(state.inputs.clone()));
        }
        Ok(Idle::NeedsResolution(state.unknowns.values().cloned().collect()))
    }

    /// Continues a completed conversation with a new user message: a new run whose input is
    /// the whole conversation so far plus `message`. A run that did not complete has no
    /// conversation to continue: [`RunError::NotCompleted`].
    pub async fn continue_with(&self, message: impl Into<String>) -> Result<Run, RunError> {
        self.result().await?;
        let mut messages = self.conversation()?;
        messages.push(Message::user(message));
        self.runtime.start_messages(messages).await
    }

    /// The conversation of a completed run: its working context plus the final answer.
    fn conversation(&self) -> Result<Vec<Message>, RunError> {
        let head = self.shared.lock().head.clone().ok_or_else(|| RunError::NotFinished(self.id().to_string()))?;
        let state = ParentState::from_execution_state(&head.root().committed_state).map_err(|e| RunError::Engine(e.to_string()))?;
        let mut messages = state.working_context.to_messages();
        if let Some(final_message) = state.final_output.as_ref().and_then(|o| o.response()).and_then(|r| r.message.clone()) {
            if messages.last() != Some(&final_message) {
                messages.push(final_message);
            }
        }
        Ok(messages)
    }
}
