//! The tool Dispatcher: runs the
//! `tool_call` Effect of one tool child and classifies what the tool did.
//!
//! | what happened | outcome | observer |
//! |---|---|---|
//! | invalid arguments (Prepare failed) | definite error result, tool never called | none |
//! | result (success, ordinary error, invalid output, ...) | `Result` settlement | started + Result |
//! | valid input request | `Checkpoint` settlement (pause count + 1) | started + InputRequired |
//! | host failure, cancel, deadline, invalid request, panic, pause limit | `DispatchError` (unknown) | started + Failure/Unknown |
//! | malformed effect, unknown tool name | `DispatchError` (unknown) | none |
//!
//! Every settlement is `succeeded`: a tool's own error is a definite outcome.

use super::attribution::ToolInvocation;
use super::protocol::{SettledToolResult, ToolCallEffect, ToolCallSettlement, ToolCheckpoint};
use super::toolset::{ObservationCounters, ToolEntry, ToolObserver, ToolSettlement};
use super::wire::Wire;
use crate::env::BoxFuture;
use crate::json::Payload;
use crate::kernel::dispatcher::{DispatchContext, DispatchError, DispatchPolicy, Dispatcher, EffectRequest};
use crate::kernel::effect::Settlement;
use crate::kernel::owner::panic_text;
use crate::tool::{classify_outcome, invalid_arguments_result, Advertiser, ToolContext, ToolError, ToolOutcome};
use futures::FutureExt;
use std::collections::{BTreeMap, BTreeSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// Executes `tool_call` Effects for one ToolSet. Replay policy Never: a tool call may have
/// side effects, so a lost attempt is unknown and needs explicit resolution.
pub struct ToolDispatcher {
    entries: BTreeMap<String, ToolEntry>,
    deferred: Arc<BTreeSet<String>>,
    observer: Option<Arc<dyn ToolObserver>>,
    counters: Arc<ObservationCounters>,
}

impl ToolDispatcher {
    pub(crate) fn new(
        entries: BTreeMap<String, ToolEntry>,
        observer: Option<Arc<dyn ToolObserver>>,
        counters: Arc<ObservationCounters>,
    ) -> ToolDispatcher {
        let deferred = Arc::new(entries.iter().filter(|(_, e)| e.deferred).map(|(n, _)| n.clone()).collect());
        ToolDispatcher { entries, deferred, observer, counters }
    }

    fn started(&self, invocation: &ToolInvocation) {
        if let Some(observer) = &self.observer {
            if catch_unwind(AssertUnwindSafe(|| observer.on_tool_started(invocation))).is_err() {
                self.counters.record_started_panic();
            }
        }
    }

    fn settled(&self, invocation: &ToolInvocation, settlement: ToolSettlement) {
        if let Some(observer) = &self.observer {
            // `settlement` is the observer's own copy; it is dropped afterwards.
            if catch_unwind(AssertUnwindSafe(|| observer.on_tool_settled(invocation, &settlement))).is_err() {
                self.counters.record_settled_panic();
            }
        }
    }

    /// Reports Failure + Unknown to the observer and returns the error that leaves the
    /// Effect unknown.
    fn unknown(&self, invocation: &ToolInvocation, error: DispatchError) -> Result<Settlement, DispatchError> {
        self.settled(invocation, ToolSettlement::unknown(error.to_string()));
        Err(error)
    }

    async fn run(&self, request: EffectRequest, cx: DispatchContext) -> Result<Settlement, DispatchError> {
        let effect = ToolCallEffect::from_payload(&request.payload).map_err(|e| DispatchError::Failed(e.to_string()))?;
        let call = &effect.input.call;
        // The parent never starts a child for an unknown name, so this is a protocol error.
        let entry = self
            .entries
            .get(&call.name)
            .ok_or_else(|| DispatchError::Failed(format!("tool call names no tool of this tool set: {:?}", call.name)))?;
        let invocation = match entry.bound.prepare(call) {
            Ok(invocation) => invocation,
            Err(e) => {
                // Rejected before execution: no observer events, the tool is never called.
                let result = invalid_arguments_result(&e.diagnostic()).into_tool_result(call);
                return settlement(&ToolCallSettlement::Result(SettledToolResult::new(result, false)));
            }
        };
        let continuation = match &effect.resume {
            None => None,
            Some(resume) => Some(
                resume
                    .checkpoint
                    .input_request
                    .resume_with(resume.response.value())
                    .map_err(|e| DispatchError::Failed(e.to_string()))?,
            ),
        };
        let attribution = ToolInvocation::from_effect(&request, &effect);
        // A fresh advertiser per attempt: names staged before an input pause are discarded.
        let advertiser = Advertiser::new(self.deferred.clone());
        let mut tool_cx = ToolContext::new(cx.cancel.clone(), advertiser.clone());
        if let Some(continuation) = continuation {
            tool_cx = tool_cx.with_continuation(continuation);
        }
        let tool_cx = attribution.clone().install(tool_cx);

        self.started(&attribution);
        let outcome = match catch_unwind(AssertUnwindSafe(|| entry.bound.call(&invocation, tool_cx))) {
            Ok(future) => AssertUnwindSafe(future).catch_unwind().await,
            Err(panic) => Err(panic),
        };
        let result = match outcome {
            Ok(result) => result,
            Err(panic) => return self.unknown(&attribution, DispatchError::Panicked(panic_text(&panic))),
        };
        match &result {
            Err(ToolError::Canceled) => return self.unknown(&attribution, DispatchError::Canceled),
            Err(ToolError::DeadlineExceeded) => return self.unknown(&attribution, DispatchError::DeadlineExceeded),
            _ => {}
        }
        match classify_outcome(entry.bound.name(), result) {
            ToolOutcome::Result(visible) => {
                let is_error = visible.is_error;
                let result = visible.into_tool_result(call);
                let settled = SettledToolResult {
                    result,
                    direct: entry.bound.returns_direct_result() && !is_error,
                    // Staged names commit only with a successful, non-error result.
                    advertised_tool_names: if is_error { Vec::new() } else { advertiser.staged() },
                };
                match settlement(&ToolCallSettlement::Result(settled.clone())) {
                    Ok(s) => {
                        self.settled(&attribution, ToolSettlement::result(settled.result));
                        Ok(s)
                    }
                    Err(e) => self.unknown(&attribution, e),
                }
            }
            ToolOutcome::InputRequired(input_request) => {
                let previous = effect.resume.as_ref().map(|r| &r.checkpoint);
                let Some(checkpoint) = ToolCheckpoint::next(previous, input_request) else {
                    return self.unknown(&attribution, DispatchError::Failed("tool input pause limit reached".into()));
                };
                match settlement(&ToolCallSettlement::Checkpoint(checkpoint)) {
                    Ok(s) => {
                        self.settled(&attribution, ToolSettlement::input_required());
                        Ok(s)
                    }
                    Err(e) => self.unknown(&attribution, e),
                }
            }
            ToolOutcome::Unknown { diagnostic } => self.unknown(&attribution, DispatchError::Failed(diagnostic)),
        }
    }
}

fn settlement(settlement: &ToolCallSettlement) -> Result<Settlement, DispatchError> {
    settlement.to_settlement().map_err(|e| DispatchError::InvalidSettlement(e.to_string()))
}

impl Dispatcher for ToolDispatcher {
    fn policy(&self, _effect: &Payload) -> DispatchPolicy {
        DispatchPolicy::never()
    }

    fn dispatch<'a>(&'a self, request: EffectRequest, cx: DispatchContext) -> BoxFuture<'a, Result<Settlement, DispatchError>> {
        Box::pin(self.run(request, cx))
    }
}
