//! What the host does with an Effect whose outcome is Unknown.

/// What the host does when a tool or model call's outcome cannot be proven (the process
/// crashed while the call was in flight, or the call itself failed without a definite answer).
///
/// The kernel never converts an Unknown by itself: execution of that part of the run stops
/// until the host settles it. The policy says who settles it and how. Tools default to
/// `Hold` (a tool call may have changed the world); model calls default to `Retry` (see
/// [`AgentBuilder::on_model_unknown`](super::AgentBuilder::on_model_unknown)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum UnknownPolicy {
    /// Surface it: a [`RunEvent::Unknown`](super::RunEvent::Unknown) event, an entry in
    /// [`Run::unknowns`](super::Run::unknowns), and the run waits for
    /// [`Run::resolve`](super::Run::resolve) (a
    /// [`RunEvent::ResolutionNeeded`](super::RunEvent::ResolutionNeeded) event says so). The
    /// default for tools.
    #[default]
    Hold,
    /// Settle it as an error result that tells the model the outcome is unknown, so the model
    /// decides what to do next (a model call becomes a failed model call).
    ReportToModel,
    /// Perform the call again and settle it with that outcome. Declare this only for calls
    /// that are safe to repeat (idempotent): the first attempt may have taken effect. If the
    /// repeat fails without a definite answer too, the Unknown is held.
    Retry,
}

impl UnknownPolicy {
    /// The stable name used in the configuration digest.
    pub fn as_str(self) -> &'static str {
        match self {
            UnknownPolicy::Hold => "hold",
            UnknownPolicy::ReportToModel => "report_to_model",
            UnknownPolicy::Retry => "retry",
        }
    }
}
