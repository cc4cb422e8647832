//! The tool round (A, E, T3, W, T4, T5, S): segmentation, tool windows
//! and delegate runs as child batches, and the atomic fold of results in call order.

use super::{invalid, Machine};
use crate::chat::{Message, ToolCall, ToolOutput, ToolResult, Usage};
use crate::interaction::artifact::Artifact;
use crate::interaction::codes;
use crate::interaction::delegate::Delegate;
use crate::interaction::diagnostic::normalize_str;
use crate::interaction::ids::{delegate_child_key, tool_child_key};
use crate::interaction::output::Output;
use crate::interaction::budget::{Amounts, Limits, Spending};
use crate::json::{FromJson, Json, ToJson};
use crate::interaction::protocol::{validate_advertised_names, SettledToolResult, ToolCallInput};
use crate::interaction::state::{BatchInvocation, BatchKind, ChildBatch, Phase, ToolRound};
use crate::interaction::window::{next_segment, Segment};
use crate::interaction::wire::Wire;
use crate::json::Payload;
use crate::kernel::child::{Boundary, ChildSpec, ChildWaitSpec, Condition};
use crate::kernel::effect::{Effect, FrameworkEffect};
use crate::kernel::ids::ProcessId;
use crate::kernel::signal::Signal;
use crate::kernel::status::Status;
use crate::kernel::transition::Transition;
use crate::kernel::waist::StepError;
use std::collections::BTreeSet;

fn index_u32(index: usize) -> Result<u32, StepError> {
    u32::try_from(index).map_err(|_| invalid("tool call index too large"))
}

/// Planned invocations (never beyond the batch, even for a state that validation rejects).
fn planned(batch: &ChildBatch) -> usize {
    usize::try_from(batch.next_start_index).unwrap_or(usize::MAX).min(batch.invocations.len())
}

/// Started or keyed invocations without a result: what occupies a concurrency slot.
fn occupied(batch: &ChildBatch) -> usize {
    batch.invocations.iter().filter(|i| i.child_key.is_some() && i.result.is_none()).count()
}

fn error_result(call: &ToolCall, text: &str) -> SettledToolResult {
    SettledToolResult::new(ToolResult::error(&call.id, &call.name, normalize_str(text)), false)
}

/// Blank arguments become `{}`; invalid JSON and schema violations are model-visible
/// error texts.
fn delegate_input(delegate: &Delegate, call: &ToolCall) -> Result<Payload, String> {
    let text = if call.arguments.trim().is_empty() { "{}" } else { call.arguments.as_str() };
    let value = crate::json::parse(text.as_bytes())
        .map_err(|e| format!("error: delegated worker arguments are not valid JSON: {e}"))?;
    delegate.input_schema().validate(&value).map_err(|e| {
        format!("error: delegated worker arguments violate the delegated worker input contract: {}", e.diagnostic())
    })?;
    Payload::from_json(value).map_err(|e| format!("error: delegated worker arguments are not valid JSON: {e}"))
}

/// The delegate's input with the parent's `grant` as its `budget` member and the parent's
/// time `deadline` as its `deadline_ms`. Only a parent sets them: a `budget`, `deadline_ms` or
/// `started_ms` the model wrote is dropped.
fn with_grant(input: Payload, grant: Option<&Limits>, deadline: Option<u64>) -> Result<Payload, String> {
    const SET_BY_PARENT: [&str; 3] = ["budget", "deadline_ms", "started_ms"];
    let Json::Object(object) = input.value() else { return Ok(input) };
    if grant.is_none() && deadline.is_none() && !SET_BY_PARENT.iter().any(|k| object.contains_key(*k)) {
        return Ok(input);
    }
    let mut object = object.clone();
    for key in SET_BY_PARENT {
        object.remove(key);
    }
    if let Some(grant) = grant {
        object.insert("budget".to_owned(), grant.to_json());
    }
    if let Some(deadline) = deadline {
        object.insert("deadline_ms".to_owned(), deadline.to_json());
    }
    Payload::from_json(Json::Object(object)).map_err(|e| format!("error: delegated worker input with its budget: {e}"))
}

/// The order a batch folds in: invocation (= call) order.
fn fold_order(batch: &ChildBatch) -> Vec<&BatchInvocation> {
    #[cfg(feature = "mutations")]
    if crate::mutation::active(crate::mutation::Mutation::FoldInCompletionOrder) {
        // MUTATION: arrival order instead (a stable sort keeps unranked ties in place).
        let mut order: Vec<&BatchInvocation> = batch.invocations.iter().collect();
        order.sort_by_key(|i| i.completed.unwrap_or(u32::MAX));
        return order;
    }
    batch.invocations.iter().collect()
}

impl Machine<'_> {
    fn round(&self) -> Result<&ToolRound, StepError> {
        self.s.tool_round.as_ref().ok_or_else(|| invalid("no tool round"))
    }

    fn round_mut(&mut self) -> Result<&mut ToolRound, StepError> {
        self.s.tool_round.as_mut().ok_or_else(|| invalid("no tool round"))
    }

    fn calls(&self) -> Result<Vec<ToolCall>, StepError> {
        Ok(self.round()?.calls().into_iter().cloned().collect())
    }

    fn batch_mut(&mut self) -> Result<&mut ChildBatch, StepError> {
        self.round_mut()?.child_batch.as_mut().ok_or_else(|| invalid("no child batch"))
    }

    fn batch(&self) -> Result<&ChildBatch, StepError> {
        self.round()?.child_batch.as_ref().ok_or_else(|| invalid("no child batch"))
    }

    /// A: segment the round from its next unsettled call until a batch needs the kernel or
    /// the round is finished.
    pub(super) fn advance(&mut self) -> Result<Transition, StepError> {
        let rules = self.rules;
        loop {
            let calls = self.calls()?;
            let next = self.round()?.next_index();
            if next >= calls.len() {
                return self.finish_round();
            }
            let segment = next_segment(&calls, next, rules, rules.max_concurrent_tool_calls)
                .map_err(|e| invalid(format!("planning: {e}")))?;
            match segment {
                Segment::Unknown { index } => {
                    let call = &calls[index];
                    let text = format!("error: tool \"{}\" is not available", call.name);
                    let round = self.round_mut()?;
                    round.results.push(error_result(call, &text).result);
                    round.direct_result_eligible = false;
                }
                Segment::Delegates { start, end } => {
                    if let Some(t) = self.start_delegates(&calls[start..end])? {
                        return Ok(t);
                    }
                }
                Segment::Tools { start, end } => {
                    self.round_mut()?.child_batch = Some(ChildBatch {
                        kind: BatchKind::Tool,
                        invocations: vec![BatchInvocation::default(); end - start],
                        next_start_index: 0,
                        wait_id: None,
                    });
                    return self.schedule_tools();
                }
            }
        }
    }

    /// S: start tool children while slots are free; else wait; else fold and continue. A
    /// call that would pass a limit fails the run, or under `OnExhausted::AskHuman` (an own
    /// limit) stops starting: the children in flight finish first, then the run asks (Q).
    pub(super) fn schedule_tools(&mut self) -> Result<Transition, StepError> {
        let rules = self.rules;
        let tools = rules.tools.as_ref().ok_or_else(|| invalid("a tool batch without a tool set"))?;
        let sequence = self.s.model_call_count;
        let calls = self.calls()?;
        let next = self.round()?.next_index();
        let max = usize::try_from(rules.max_concurrent_tool_calls).unwrap_or(usize::MAX);
        let limits = self.limits();
        let mut spent = self.spent();
        let mut started = 0u64;
        let time = self.s.clock.exhausted(self.time_limit());
        let time_question = time.as_ref().and_then(|e| self.own_time_question(e));
        let asks = self.own_question_rule();
        let batch = self.batch_mut()?;
        let mut effects = Vec::new();
        // What stopped the starts when the policy asks: the failure a decline ends with and the
        // question.
        let mut blocked = None;
        if let (Some(exhausted), true) = (time, occupied(batch) < max && planned(batch) < batch.invocations.len()) {
            // No tool starts once the time budget has passed (checked against the last reading).
            let failure = exhausted.failure("the next tool call");
            match time_question {
                Some(question) => blocked = Some((failure, question)),
                None => return Ok(self.fail(failure)),
            }
        }
        while blocked.is_none() && occupied(batch) < max && planned(batch) < batch.invocations.len() {
            // Each tool call is counted once, when it is started.
            let one = Amounts { tool_calls: 1, ..Amounts::default() };
            if let Some(exhausted) = limits.first_exceeded(spent, one) {
                let failure = exhausted.failure("the next tool call");
                match asks.question(&exhausted) {
                    Some(question) => {
                        blocked = Some((failure, question));
                        break;
                    }
                    None => return Ok(self.fail(failure)),
                }
            }
            spent = spent.saturating_add(one);
            started += 1;
            let j = planned(batch);
            let index = next + j;
            let call = calls.get(index).ok_or_else(|| invalid("batch beyond the calls"))?.clone();
            let key = tool_child_key(sequence, &call.id)?;
            let input = ToolCallInput { model_call_sequence: sequence, tool_call_index: index_u32(index)?, call }
                .to_payload()
                .map_err(|e| invalid(format!("tool child input: {}", e.detail())))?;
            effects.push(Effect::Framework(FrameworkEffect::StartChild(ChildSpec {
                key: key.clone(),
                deployment_ref: tools.deployment_ref().clone(),
                input,
                budget: rules.tool_budget,
                capabilities: rules.tool_capabilities.clone(),
            })));
            batch.invocations[j].child_key = Some(key);
            batch.next_start_index += 1;
        }
        let active = batch.active_count();
        self.s.spending.tool_calls = self.s.spending.tool_calls.saturating_add(started);
        if !effects.is_empty() {
            self.s.phase = Phase::AwaitingChildStarts;
            return Ok(Transition::Continue { consumed: self.consumed, effects });
        }
        if active > 0 {
            return self.declare_wait();
        }
        if let Some((failure, question)) = blocked {
            return self.ask_or_fail(failure, Some(question), Vec::new());
        }
        self.fold_batch(Vec::new())?;
        self.advance()
    }

    /// Every call of the run is started in this Step (no concurrency limit). Returns
    /// `None` when nothing could start: the batch is folded and the round goes on.
    fn start_delegates(&mut self, run: &[ToolCall]) -> Result<Option<Transition>, StepError> {
        let rules = self.rules;
        let sequence = self.s.model_call_count;
        let mut invocations = Vec::with_capacity(run.len());
        let mut effects = Vec::new();
        let inputs: Vec<Result<Payload, String>> = run
            .iter()
            .map(|call| {
                let delegate = rules.delegate(&call.name).ok_or_else(|| invalid("a delegate run names no delegate"))?;
                Ok(delegate_input(delegate, call))
            })
            .collect::<Result<_, StepError>>()?;
        let grant = self.delegate_grant(inputs.iter().filter(|i| i.is_ok()).count());
        // Delegates run beside each other in the parent's time: each gets its whole deadline.
        let deadline = self.s.clock.deadline(self.time_limit());
        for (call, input) in run.iter().zip(inputs) {
            let delegate = rules.delegate(&call.name).ok_or_else(|| invalid("a delegate run names no delegate"))?;
            let mut invocation = BatchInvocation::default();
            match input.and_then(|input| with_grant(input, grant.as_ref(), deadline)) {
                Err(text) => invocation.result = Some(error_result(call, &text)),
                Ok(input) => {
                    let key = delegate_child_key(sequence, call)?;
                    effects.push(Effect::Framework(FrameworkEffect::StartChild(ChildSpec {
                        key: key.clone(),
                        deployment_ref: delegate.deployment_ref().clone(),
                        input,
                        budget: delegate.budget(),
                        capabilities: delegate.capabilities().clone(),
                    })));
                    invocation.child_key = Some(key);
                }
            }
            invocations.push(invocation);
        }
        let count = u32::try_from(invocations.len()).map_err(|_| invalid("delegate run too long"))?;
        let round = self.round_mut()?;
        // Delegates are never direct.
        round.direct_result_eligible = false;
        round.child_batch =
            Some(ChildBatch { kind: BatchKind::Delegate, invocations, next_start_index: count, wait_id: None });
        if effects.is_empty() {
            self.fold_batch(Vec::new())?;
            return Ok(None);
        }
        self.s.phase = Phase::AwaitingChildStarts;
        Ok(Some(Transition::Continue { consumed: self.consumed, effects }))
    }

    /// Each of `started` delegates started together gets an equal share of what remains of
    /// every limit; `None` without limits. Recomputed when the batch is folded (the parent's
    /// spending does not change while it waits for the batch).
    fn delegate_grant(&self, started: usize) -> Option<Limits> {
        let limits = self.limits();
        (!limits.is_unlimited() && started > 0)
            .then(|| limits.share_of_remaining(self.spent(), u64::try_from(started).unwrap_or(u64::MAX)))
    }

    /// The child wait the batch needs now (W), recomputed from the state.
    fn wait_spec(&self) -> Result<ChildWaitSpec, StepError> {
        let round = self.round()?;
        let batch = self.batch()?;
        Ok(ChildWaitSpec {
            key: round.child_wait_key(self.s.model_call_count)?,
            children: batch.active_children(),
            boundary: Boundary::SubtreeDrained,
            condition: match batch.kind {
                BatchKind::Tool => Condition::Any,
                BatchKind::Delegate => Condition::All,
            },
        })
    }

    /// W.
    fn declare_wait(&mut self) -> Result<Transition, StepError> {
        let spec = self.wait_spec()?;
        self.s.phase = Phase::AwaitingChildWaitOpen;
        Ok(Transition::Continue {
            consumed: self.consumed,
            effects: vec![Effect::Framework(FrameworkEffect::WaitChildren(spec))],
        })
    }

    /// T3: start results, matched positionally against the pending invocations.
    pub(super) fn on_starts(&mut self, signals: &[Signal]) -> Result<Transition, StepError> {
        let (starts, steers) = self.collect_starts(signals)?;
        self.admit(&steers)?;
        let rules = self.rules;
        let calls = self.calls()?;
        let next = self.round()?.next_index();
        let batch = self.batch_mut()?;
        let kind = batch.kind;
        let pending: Vec<usize> = (0..planned(batch)).filter(|j| batch.invocations[*j].is_pending()).collect();
        if starts.len() != pending.len() {
            return Err(invalid(format!("{} child start results for {} pending starts", starts.len(), pending.len())));
        }
        let mut seen: BTreeSet<ProcessId> = batch.invocations.iter().filter_map(|i| i.process_id.clone()).collect();
        for (j, start) in pending.into_iter().zip(starts) {
            let call = calls.get(next + j).ok_or_else(|| invalid("batch beyond the calls"))?;
            let expected = match kind {
                BatchKind::Tool => rules.tools.as_ref().map(|t| t.deployment_ref()),
                BatchKind::Delegate => rules.delegate(&call.name).map(Delegate::deployment_ref),
            };
            let invocation = &mut batch.invocations[j];
            if invocation.child_key.as_ref() != Some(&start.key) || expected != Some(&start.deployment_ref) {
                return Err(invalid(format!("child start result {j} does not match its invocation")));
            }
            match start.outcome {
                Ok(process) => {
                    if !seen.insert(process.clone()) {
                        return Err(invalid(format!("child start results repeat process {process}")));
                    }
                    invocation.process_id = Some(process);
                }
                Err(failure) => {
                    let detail = format!("{}: {}", failure.code.as_str(), failure.message.as_str());
                    match kind {
                        BatchKind::Tool => {
                            return Ok(self.fail(codes::failure(
                                codes::TOOL_START_FAILED,
                                &format!("tool child for call \"{}\" failed to start: {detail}", call.name),
                            )))
                        }
                        BatchKind::Delegate => {
                            invocation.result = Some(error_result(
                                call,
                                &format!("error: delegated worker child start failed: {detail}"),
                            ))
                        }
                    }
                }
            }
        }
        match kind {
            BatchKind::Tool => self.schedule_tools(),
            BatchKind::Delegate if batch.active_count() == 0 => {
                self.fold_batch(Vec::new())?;
                self.advance()
            }
            BatchKind::Delegate => self.declare_wait(),
        }
    }

    /// T4: the opening must match the recomputed spec exactly.
    pub(super) fn on_wait_open(&mut self, signals: &[Signal]) -> Result<Transition, StepError> {
        let (opened, steers) = self.collect_wait_open(signals)?;
        self.admit(&steers)?;
        let spec = self.wait_spec()?;
        if opened.spec != spec {
            return Err(invalid("the child wait opening does not match the requested wait"));
        }
        let batch = self.batch_mut()?;
        if batch.wait_id.is_some() {
            return Err(invalid("the child batch already holds a wait"));
        }
        batch.wait_id = Some(opened.wait_id.clone());
        self.s.phase = Phase::WaitingChildren;
        Ok(Transition::Wait { consumed: self.consumed, wait_id: opened.wait_id })
    }

    /// T5: settle each outcome, in strictly increasing invocation order.
    pub(super) fn on_wait_satisfied(&mut self, signals: &[Signal]) -> Result<Transition, StepError> {
        let (satisfied, steers) = self.collect_satisfied(signals)?;
        self.admit(&steers)?;
        let rules = self.rules;
        let sequence = self.s.model_call_count;
        let spec = self.wait_spec()?;
        let calls = self.calls()?;
        let next = self.round()?.next_index();
        let mut delegate_usage = Usage::default();
        let mut delegate_spending = Spending::default();
        let grant = {
            let batch = self.batch()?;
            self.delegate_grant(batch.invocations.iter().filter(|i| i.child_key.is_some()).count())
        };
        let batch = self.batch_mut()?;
        let kind = batch.kind;
        if batch.wait_id.as_ref() != Some(&satisfied.wait_id) || satisfied.key != spec.key {
            return Err(invalid("the child wait satisfaction is for another wait"));
        }
        if satisfied.boundary != Boundary::SubtreeDrained {
            return Err(invalid("the child wait satisfaction must be at the drained boundary"));
        }
        if satisfied.outcomes.is_empty() {
            return Err(invalid("the child wait satisfaction carries no outcome"));
        }
        if kind == BatchKind::Delegate && satisfied.outcomes.len() != spec.children.len() {
            return Err(invalid("a delegate batch settles every waited child at once"));
        }
        let mut artifacts = Vec::new();
        let mut last: Option<usize> = None;
        for outcome in satisfied.outcomes {
            let process = &outcome.result.process_id;
            let j = batch
                .invocations
                .iter()
                .position(|i| i.is_active() && i.process_id.as_ref() == Some(process))
                .ok_or_else(|| invalid(format!("outcome for process {process}, which is not an active child")))?;
            if last.is_some_and(|l| j <= l) {
                return Err(invalid("child outcomes must arrive in increasing invocation order"));
            }
            last = Some(j);
            if batch.invocations[j].child_key.as_ref() != Some(&outcome.key) || outcome.boundary != Boundary::SubtreeDrained
            {
                return Err(invalid(format!("outcome for process {process} does not match its invocation")));
            }
            let call = calls.get(next + j).ok_or_else(|| invalid("batch beyond the calls"))?;
            let status = outcome.result.status();
            let termination = &outcome.result.termination;
            let settled = match kind {
                BatchKind::Tool => {
                    if status != Status::Completed {
                        // The child's own failure propagates verbatim; a kernel resource
                        // limit (the child was stopped, it did not fail) is process_failed.
                        let own = termination.failure.clone().filter(|f| !f.code.as_str().starts_with("engine.limit."));
                        let failure = own.unwrap_or_else(|| {
                            codes::failure(
                                codes::TOOL_PROCESS_FAILED,
                                &format!(
                                    "Tool child {process} ended with {} ({}): {}",
                                    status.as_str(),
                                    termination.cause.as_str(),
                                    termination.reason
                                ),
                            )
                        });
                        return Ok(self.fail(failure));
                    }
                    let output = outcome.result.output.as_ref().ok_or_else(|| invalid("a completed tool child has no output"))?;
                    let settled = SettledToolResult::from_payload(output)?;
                    if !settled.result.answers(call) {
                        return Err(invalid(format!("tool child {process} answered another call")));
                    }
                    settled
                }
                BatchKind::Delegate if status != Status::Completed => {
                    // It reported no spending: the whole grant it was given counts.
                    if let Some(g) = &grant {
                        delegate_spending.charged = delegate_spending.charged.saturating_add(g.as_charge());
                    }
                    let mut text = format!(
                        "error: delegated worker child ended with {} ({})",
                        status.as_str(),
                        termination.cause.as_str()
                    );
                    if !termination.reason.trim().is_empty() {
                        text = format!("{text}: {}", termination.reason);
                    }
                    error_result(call, &text)
                }
                BatchKind::Delegate => {
                    let delegate = rules.delegate(&call.name).ok_or_else(|| invalid("a delegate call names no delegate"))?;
                    let output = outcome.result.output.clone().ok_or_else(|| invalid("a completed delegate has no output"))?;
                    delegate.output_schema().validate(output.value()).map_err(|e| {
                        invalid(format!("delegate `{}` output violates its output schema: {}", call.name, e.diagnostic()))
                    })?;
                    let result = ToolResult::ok(
                        &call.id,
                        &call.name,
                        ToolOutput { content: String::new(), details: Some(output.value().clone()) },
                    );
                    // A delegate that is an Interaction reports its tree's tokens in its Output:
                    // they belong to this run's tree total.
                    if let Ok(child) = Output::from_json(output.value()) {
                        delegate_usage = delegate_usage.saturating_add(child.usage);
                        delegate_spending = delegate_spending.saturating_add(child.spending);
                    }
                    artifacts.push(Artifact::new(sequence, index_u32(next + j)?, &call.id, &call.name, output)?);
                    SettledToolResult::new(result, false)
                }
            };
            batch.invocations[j].result = Some(settled);
            #[cfg(feature = "mutations")]
            if kind == BatchKind::Tool
                && crate::mutation::active(crate::mutation::Mutation::FoldInCompletionOrder)
            {
                batch.invocations[j].completed = u32::try_from(batch.settled_count()).ok();
            }
        }
        batch.wait_id = None;
        self.s.usage = self.s.usage.saturating_add(delegate_usage);
        self.s.spending = self.s.spending.saturating_add(delegate_spending);
        match kind {
            BatchKind::Tool => self.schedule_tools(),
            BatchKind::Delegate => {
                self.fold_batch(artifacts)?;
                self.advance()
            }
        }
    }

    /// Appends the batch's results in invocation (= call) order and merge their
    /// advertisements, validating everything before changing anything.
    fn fold_batch(&mut self, artifacts: Vec<Artifact>) -> Result<(), StepError> {
        let batch = self.batch()?;
        let mut names = self.s.advertised_tool_names.clone();
        let mut results = Vec::with_capacity(batch.invocations.len());
        let mut all_direct = batch.kind == BatchKind::Tool;
        for invocation in fold_order(batch) {
            let settled = invocation.result.as_ref().ok_or_else(|| invalid("folding an unsettled invocation"))?;
            for name in &settled.advertised_tool_names {
                if !names.contains(name) {
                    names.push(name.clone());
                }
            }
            all_direct &= settled.direct;
            results.push(settled.result.clone());
        }
        validate_advertised_names(&names).map_err(|d| invalid(format!("advertisements: {d}")))?;
        let round = self.round_mut()?;
        round.results.extend(results);
        round.child_batch = None;
        if !all_direct {
            round.direct_result_eligible = false;
        }
        self.s.advertised_tool_names = names;
        self.s.artifact_records.extend(artifacts);
        Ok(())
    }

    /// E: the round is settled; complete with direct results or go back to the model.
    fn finish_round(&mut self) -> Result<Transition, StepError> {
        let round = self.s.tool_round.take().ok_or_else(|| invalid("no tool round"))?;
        let message = round.response.message.clone().ok_or_else(|| invalid("a tool round needs a message"))?;
        let context = vec![message, Message::tool_results(round.results.clone())];
        let direct = round.direct_result_eligible && self.s.pending_steer.is_none();
        self.s.phase = Phase::ReadyModel;
        if direct {
            let output = Output::direct_tool_results(round.results, self.s.model_call_count)
                .with_usage(self.s.usage)
                .with_spending(self.s.spending);
            return self.evaluate_completion(output, context, None);
        }
        self.s.working_context.extend(context);
        let applied = self.apply_pending();
        self.s.working_context.validate().map_err(|e| invalid(format!("working context: {e}")))?;
        self.request_model(applied)
    }
}
