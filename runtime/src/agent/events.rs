//! What a run reports: semantic events and the stream that delivers them.

use super::input::InputRequest;
use super::recovery::UnknownEffect;
use super::result::RunResult;
use super::tracker::RunShared;
use crate::kernel::ids::{EffectId, ProcessId, SignalId};
use futures::Stream;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// Which kind of call an Unknown Effect was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UnknownKind {
    /// A model call.
    Model,
    /// A call of the named tool.
    Tool(String),
    /// Something else (a delegate's own effect the agent does not know).
    Other,
}

/// One thing that happened in a run.
///
/// Every event except [`ModelDelta`](RunEvent::ModelDelta),
/// [`DeltasDropped`](RunEvent::DeltasDropped) and [`ModelRetrying`](RunEvent::ModelRetrying)
/// is delivered only after the store acknowledged
/// the state that contains it, so an event never describes something a crash could undo.
/// Deltas describe a model call in progress: a crash may repeat or drop them.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum RunEvent {
    /// A piece of a streamed model response's text (not durable). Never empty: increments
    /// carrying only tool-call or finish data are not reported. A delegate's model calls stream
    /// into the run's events too, with `delegate` set.
    ModelDelta {
        /// The Process whose model call streamed it: the run's root, or a delegate's run (two
        /// runs of one delegate have different Processes).
        process: ProcessId,
        /// `None` for the run's own model calls; for a delegate's, the name of the delegate's
        /// agent (at any depth: the delegate that made the call).
        delegate: Option<String>,
        /// The model call it belongs to: the same id as the
        /// [`ModelResponse`](RunEvent::ModelResponse) or [`ModelFailed`](RunEvent::ModelFailed)
        /// event that settles the call.
        call: EffectId,
        /// The text piece.
        text: String,
    },
    /// The per-run delta queue overflowed: `dropped` oldest deltas were discarded since the
    /// last such event. The committed response is complete regardless.
    DeltasDropped {
        /// How many deltas were discarded.
        dropped: u64,
    },
    /// A model call failed with an error that may not happen again (overloaded, rate limited,
    /// server error) and is repeated after `delay`, per the agent's
    /// [`ModelErrorPolicy`](super::ModelErrorPolicy). Not durable, like deltas: deltas of the
    /// failed attempt are not part of the answer.
    ModelRetrying {
        /// The calling Process (the run's root, or a delegate).
        process: ProcessId,
        /// The attempt that failed (1-based).
        attempt: u32,
        /// The most attempts the policy makes.
        attempts: u32,
        /// The error of the failed attempt.
        error: String,
        /// The wait before the next attempt (on the runtime's clock).
        delay: std::time::Duration,
    },
    /// A model call settled with a response.
    ModelResponse {
        /// The calling Process (the run's root, or a delegate).
        process: ProcessId,
        /// The model call (its deltas carry the same id).
        call: EffectId,
        /// The response text.
        text: String,
        /// The tools the model asked to call, in order.
        tool_calls: Vec<String>,
        /// This call's tokens (the run's sum is [`RunResult::usage`](super::RunResult::usage)).
        usage: crate::chat::Usage,
    },
    /// A run's token total changed: a model call of `process` settled, or `process` folded a
    /// delegate's run. Follows the [`ModelResponse`](RunEvent::ModelResponse) that caused it.
    UsageUpdated {
        /// The Process whose total changed (the run's root, or a delegate).
        process: ProcessId,
        /// That Process's total: its own model calls and the delegate runs it folded.
        usage: crate::chat::Usage,
        /// The whole run's running total: the root's and every delegate's still running.
        run: crate::chat::Usage,
    },
    /// A model call settled with an error.
    ModelFailed {
        /// The calling Process.
        process: ProcessId,
        /// The model call (its deltas carry the same id).
        call: EffectId,
        /// The error text.
        error: String,
    },
    /// A tool call was dispatched: once per call, even when the call is dispatched again
    /// (after a tool asked the host for input, or after a restore).
    ToolStarted {
        /// The tool-child Process running the call.
        process: ProcessId,
        /// The tool name.
        tool: String,
        /// The model's call id.
        call_id: String,
    },
    /// A tool call settled.
    ToolSettled {
        /// The tool-child Process.
        process: ProcessId,
        /// The tool name.
        tool: String,
        /// The model's call id.
        call_id: String,
        /// Whether the tool reported an error.
        is_error: bool,
        /// The result text the model sees.
        text: String,
    },
    /// A tool is waiting for an answer from the host ([`Run::answer`](super::Run::answer)).
    InputRequested(InputRequest),
    /// A call's outcome cannot be proven; see [`UnknownPolicy`](super::UnknownPolicy). Its
    /// policy settles it, or it is held: then
    /// [`ResolutionNeeded`](RunEvent::ResolutionNeeded) follows.
    Unknown(UnknownEffect),
    /// The run waits for the host to settle this Unknown call with
    /// [`Run::resolve`](super::Run::resolve) (its policy is `Hold`, or the policy could not
    /// settle it): nothing else happens in that part of the run until then.
    /// [`Run::idle`](super::Run::idle) returns
    /// [`Idle::NeedsResolution`](super::Idle::NeedsResolution) meanwhile.
    ResolutionNeeded {
        /// The held call.
        effect: UnknownEffect,
        /// Why the host must settle it.
        reason: String,
    },
    /// Steering messages were applied to a model call.
    SteerApplied {
        /// The steer signals applied, in order.
        signals: Vec<SignalId>,
    },
    /// The run (or a delegate's run in it) changed model: it was resumed by an agent calling
    /// another model that [allows a model switch](super::AgentBuilder::allow_model_switch),
    /// and its first Step under the new model recorded the switch. Reported once per switch,
    /// by the writer that recorded it.
    ModelSwitched {
        /// The Process that switched (the run's root, or a delegate).
        process: ProcessId,
        /// The model it called before.
        from: crate::interaction::model::ModelIdentity,
        /// The model it calls from then on.
        to: crate::interaction::model::ModelIdentity,
        /// Model calls it had made when the switch was recorded.
        model_calls: u32,
    },
    /// The run ended.
    Finished(RunResult),
    /// The run's writer stopped (a store failure); resume the run from the store.
    Stopped {
        /// Why.
        reason: String,
    },
}

/// The events of one run, as an async stream (`futures::StreamExt::next`). Ends after
/// [`RunEvent::Finished`] or [`RunEvent::Stopped`]. Several streams of one run each see every
/// durable event; model deltas go to whichever stream polls first.
pub struct Events {
    pub(crate) shared: Arc<RunShared>,
    pub(crate) cursor: u64,
    pub(crate) done: bool,
}

impl Stream for Events {
    type Item = RunEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<RunEvent>> {
        if self.done {
            return Poll::Ready(None);
        }
        let cursor = self.cursor;
        match self.shared.next_event(cursor, cx.waker()) {
            Some((next, event)) => {
                self.cursor = next;
                if matches!(event, RunEvent::Finished(_) | RunEvent::Stopped { .. }) {
                    self.done = true;
                }
                Poll::Ready(Some(event))
            }
            None => Poll::Pending,
        }
    }
}
