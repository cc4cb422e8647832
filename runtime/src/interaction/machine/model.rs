//! The model side of the loop (T1, R, T2, F, L) and steer bookkeeping: steers wait in the
//! state until the next safe model boundary, then become visible in admission order.

use super::{invalid, Machine};
use crate::chat::{FinishReason, Message, Response, ToolCall, ToolResult};
use crate::interaction::codes;
use crate::interaction::diagnostic::normalize_str;
use crate::interaction::output::Output;
use crate::interaction::protocol::{EncodedResponse, ModelCallEffect, ModelResult};
use crate::interaction::signals::SteerSignal;
use crate::interaction::state::{PendingSteer, Phase, ToolRound};
use crate::interaction::wire::Wire;
use crate::kernel::effect::Effect;
use crate::kernel::ids::SignalId;
use crate::kernel::signal::Signal;
use crate::kernel::transition::Transition;
use crate::kernel::waist::StepError;
use std::collections::BTreeSet;

impl Machine<'_> {
    /// Appends admitted steers to `pending_steer` in signal order (a duplicate id is an error).
    pub(super) fn admit(&mut self, steers: &[SteerSignal]) -> Result<(), StepError> {
        if steers.is_empty() {
            return Ok(());
        }
        let mut pending = self.s.pending_steer.take().unwrap_or_default();
        pending.admit(steers)?;
        self.s.pending_steer = Some(pending);
        Ok(())
    }

    /// Makes every pending steer visible (a safe model boundary) and returns their ids.
    pub(super) fn apply_pending(&mut self) -> Vec<SignalId> {
        #[cfg(feature = "mutations")]
        if crate::mutation::active(crate::mutation::Mutation::SteerAppliedTwice) {
            return self.apply_pending_twice();
        }
        let PendingSteer { messages, signal_ids } = self.s.pending_steer.take().unwrap_or_default();
        self.s.working_context.extend(messages);
        signal_ids
    }

    /// MUTATION SteerAppliedTwice: the first application leaves the steer pending, so the
    /// next model boundary applies it again (recognized by its messages already being in
    /// the context) and only then clears it.
    #[cfg(feature = "mutations")]
    fn apply_pending_twice(&mut self) -> Vec<SignalId> {
        let Some(pending) = self.s.pending_steer.take() else { return Vec::new() };
        let again = pending.messages.iter().all(|m| self.s.working_context.messages().any(|c| c == m));
        self.s.working_context.extend(pending.messages.iter().cloned());
        let ids = pending.signal_ids.clone();
        if !again {
            self.s.pending_steer = Some(pending);
        }
        ids
    }

    /// T1: `ready_model` + steers.
    pub(super) fn on_ready(&mut self, signals: &[Signal]) -> Result<Transition, StepError> {
        let steers = self.collect_ready(signals)?;
        self.admit(&steers)?;
        let applied = self.apply_pending();
        self.request_model(applied)
    }

    /// R: declare the next model call (counted when declared), or fail at the limit (or ask, Q).
    pub(super) fn request_model(&mut self, applied: Vec<SignalId>) -> Result<Transition, StepError> {
        if self.s.model_call_count >= self.rules.max_model_calls {
            return Ok(self.fail(codes::failure(
                codes::LIMIT_MODEL_CALLS,
                &format!("the Interaction reached its limit of {} model calls", self.rules.max_model_calls),
            )));
        }
        // The call names the context (its segments travel with the request), so everything
        // appended so far is sealed first.
        if let Some(failure) = self.seal()? {
            return Ok(self.fail(failure));
        }
        // The call is reserved before it is declared: it starts only if it fits every limit.
        let limits = self.limits();
        if !limits.is_unlimited() {
            let options = &self.s.working_context.options;
            let reserved = match self.rules.budget.reservation(&limits, self.s.working_context.sealed_bytes(), options) {
                Ok(r) => r,
                Err(text) => return Ok(self.fail(codes::failure(codes::BUDGET_COST, &text))),
            };
            if let Some(exhausted) = limits.first_exceeded(self.spent(), reserved) {
                let question = self.own_question_rule().question(&exhausted);
                return self.ask_or_fail(exhausted.failure("the next model call's reservation"), question, applied);
            }
        }
        // Time: the last reading the run has is already past its deadline.
        if let Some(exhausted) = self.s.clock.exhausted(self.time_limit()) {
            let question = self.own_time_question(&exhausted);
            return self.ask_or_fail(exhausted.failure("the next model call"), question, applied);
        }
        let sequence = self.s.model_call_count + 1;
        let effect = ModelCallEffect {
            model_call_sequence: sequence,
            context: self.s.working_context.head(),
            advertised_tool_names: self.s.advertised_tool_names.clone(),
            applied_steer_signal_ids: applied,
            time: self.call_time(),
        };
        let payload = effect.to_payload()?;
        self.s.model_call_count = sequence;
        self.s.phase = Phase::AwaitingModel;
        self.s.tool_round = None;
        #[cfg(feature = "mutations")]
        let keep = crate::mutation::active(crate::mutation::Mutation::SteerAppliedTwice);
        #[cfg(not(feature = "mutations"))]
        let keep = false;
        if !keep {
            self.s.pending_steer = None;
        }
        Ok(Transition::Continue { consumed: self.consumed, effects: vec![Effect::Dispatcher(payload)] })
    }

    /// T2: `awaiting_model` + the settlement (and steers), in this order: host error,
    /// provider error, replacement context, call extraction, finish reason, then the steers.
    pub(super) fn on_model(&mut self, signals: &[Signal]) -> Result<Transition, StepError> {
        let (result, steers, encoded) = self.collect_model(signals)?;
        let (response, replacement) = match result {
            ModelResult::HostError(text) => return Ok(self.fail(codes::failure(codes::HOST_FAILED, &text))),
            ModelResult::Error(text) => return Ok(self.fail(codes::failure(codes::MODEL_FAILED, &text))),
            ModelResult::OutOfTime { at_ms, deadline_ms } => {
                self.s.clock.observe(at_ms);
                let exhausted = self.s.clock.exhaustion(self.time_limit(), deadline_ms, at_ms);
                let question = self.own_time_question(&exhausted);
                if question.is_some() {
                    // The run goes on after an extension: the steers wait for its next call.
                    self.admit(&steers)?;
                }
                return self.ask_or_fail(exhausted.failure("the model call"), question, Vec::new());
            }
            ModelResult::Response { response, replacement_messages, clock } => {
                if let Some(readings) = clock {
                    self.s.clock.observe_call(readings);
                }
                (response, replacement_messages)
            }
        };
        // Every settled call's tokens count, whatever the run does with the answer.
        self.s.usage = self.s.usage.saturating_add(response.usage);
        if let Some(price) = self.rules.budget.price(&self.s.working_context.options) {
            self.s.spending.cost_micros = self.s.spending.cost_micros.saturating_add(price.cost_micros(response.usage));
        }
        if let Some(messages) = replacement {
            self.s.working_context.replace(messages);
            self.s
                .working_context
                .validate()
                .map_err(|e| invalid(format!("replacement messages make an invalid context: {e}")))?;
        }
        let calls: Vec<ToolCall> = response.tool_calls().into_iter().cloned().collect();
        let mut ids = BTreeSet::new();
        if calls.iter().any(|c| !ids.insert(c.id.as_str())) {
            return Err(invalid("the model response repeats a tool call id"));
        }
        if !calls.is_empty() && !matches!(response.finish_reason, Some(FinishReason::ToolCalls | FinishReason::Length)) {
            let reason = response.finish_reason.map_or("no finish reason", FinishReason::as_str);
            return Ok(self.fail(codes::failure(
                codes::MODEL_TOOL_CALLS_NOT_COMPLETED,
                &format!("model output ended with {reason}; tool calls were not executed"),
            )));
        }
        self.admit(&steers)?;
        if calls.is_empty() {
            return self.final_response(response, encoded);
        }
        if response.finish_reason == Some(FinishReason::Length) {
            return self.truncation_feedback(response, &calls);
        }
        self.s.tool_round = Some(ToolRound::new(response));
        self.advance()
    }

    /// F: a response without calls completes, unless a steer is pending. `encoded` is the
    /// response's encoding when the settlement carried it.
    fn final_response(&mut self, response: Response, encoded: Option<EncodedResponse<'_>>) -> Result<Transition, StepError> {
        let Some(message) = &response.message else {
            return Err(invalid("a final response needs a message"));
        };
        if response.finish_reason.is_none() {
            return Err(invalid("a final response needs a finish reason"));
        }
        self.s.phase = Phase::ReadyModel;
        if self.s.pending_steer.is_none() {
            // The answer becomes history only when a validator rejects it.
            let context = if self.rules.validator.is_some() { vec![message.clone()] } else { Vec::new() };
            let output = Output::model_response(response, self.s.model_call_count)
                .with_usage(self.s.usage)
                .with_spending(self.s.spending);
            return self.evaluate_completion(output, context, encoded);
        }
        // The steer overrides completion: the answer becomes history, never a candidate.
        self.s.working_context.push(message.clone());
        let applied = self.apply_pending();
        self.request_model(applied)
    }

    /// L: calls cut off by the token limit are answered with errors, never executed.
    fn truncation_feedback(&mut self, response: Response, calls: &[ToolCall]) -> Result<Transition, StepError> {
        let results: Vec<ToolResult> = calls
            .iter()
            .map(|c| {
                ToolResult::error(
                    &c.id,
                    &c.name,
                    normalize_str(&format!(
                        "error: tool \"{}\" was not executed because model output reached its token limit; emit the complete call again",
                        c.name
                    )),
                )
            })
            .collect();
        let message = response.message.ok_or_else(|| invalid("a response with calls has a message"))?;
        self.s.working_context.push(message);
        self.s.working_context.push(Message::tool_results(results));
        self.s.phase = Phase::ReadyModel;
        let applied = self.apply_pending();
        self.s.working_context.validate().map_err(|e| invalid(format!("working context: {e}")))?;
        self.request_model(applied)
    }
}
