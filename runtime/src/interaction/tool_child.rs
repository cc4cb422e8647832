//! The tool-child Definition and its Execution: the state machine of one tool call.
//!
//! | phase | on Step |
//! |---|---|
//! | `ready` | no signals; emit the `tool_call` Effect (no resume); consume 0 |
//! | `awaiting_result` | the settlement: a result completes; a checkpoint requests the input wait |
//! | `awaiting_wait_open` | the opening (identical request) → park with `Wait`; consume only 1 |
//! | `waiting_input` | the answer to that wait, re-validated → `tool_call` with resume |
//! | `completed` | terminal; any Step is an error |
//!
//! Every Step checks cancellation first (state untouched), re-validates the state, and works
//! on a copy that is adopted only on success.

use super::error::{ErrorKind, InteractionError};
use super::protocol::{
    InputResponse, SettledToolResult, ToolCallEffect, ToolCallInput, ToolCallSettlement, ToolResume,
    WaitOpenedPayload,
};
use super::state::{ToolCallState, ToolChildPhase};
use super::wire::Wire;
use crate::json::{parse, Json, Payload};
use crate::kernel::descriptor::Descriptor;
use crate::kernel::effect::{Effect, FrameworkEffect};
use crate::kernel::signal::Signal;
use crate::kernel::transition::Transition;
use crate::kernel::waist::{Definition, Execution, ExecutionState, StepContext, StepError};

/// JSON Schema of the tool child's input (`toolCall`, [`ToolCallInput`]).
pub const TOOL_CALL_INPUT_SCHEMA: &str = r#"{"type":"object","properties":{"model_call_sequence":{"type":"integer","minimum":1,"maximum":4294967295},"tool_call_index":{"type":"integer","minimum":0,"maximum":4294967295},"call":{"type":"object","properties":{"id":{"type":"string","minLength":1},"name":{"type":"string","minLength":1},"arguments":{"type":"string"}},"required":["id","name","arguments"],"additionalProperties":false}},"required":["model_call_sequence","tool_call_index","call"],"additionalProperties":false}"#;

/// JSON Schema of the tool child's output (`toolCallResult`, [`SettledToolResult`]).
pub const TOOL_CALL_RESULT_SCHEMA: &str = r#"{"type":"object","properties":{"result":{"type":"object","properties":{"id":{"type":"string","minLength":1},"name":{"type":"string","minLength":1},"output":{"type":"object","properties":{"content":{"type":"string"},"details":true},"required":["content"],"additionalProperties":false},"is_error":{"type":"boolean"}},"required":["id","name","output","is_error"],"additionalProperties":false},"direct":{"type":"boolean"},"advertised_tool_names":{"type":"array","items":{"type":"string","minLength":1},"minItems":1}},"required":["result","direct"],"additionalProperties":false}"#;

/// The tool-child Definition: input `toolCall`, output `toolCallResult`, no external
/// unaddressed Signals (answers are wait-addressed). It owns no tools: the Dispatcher of the
/// same Deployment runs them.
pub struct ToolChildDefinition {
    descriptor: Descriptor,
}

fn schema(text: &str) -> Result<Json, InteractionError> {
    parse(text.as_bytes()).map_err(|e| InteractionError::invalid_state(format!("static schema: {e}")))
}

impl ToolChildDefinition {
    /// A Definition named `name` (a kernel qualified name). Errors are
    /// [`ErrorKind::InvalidDefinitionConfig`] (the ToolSet re-classifies them).
    pub fn new(name: &str, description: &str) -> Result<ToolChildDefinition, InteractionError> {
        let descriptor = Descriptor::new(
            name,
            description,
            schema(TOOL_CALL_INPUT_SCHEMA)?,
            schema(TOOL_CALL_RESULT_SCHEMA)?,
            Some(Json::Bool(false)),
        )
        .map_err(|e| InteractionError::new(ErrorKind::InvalidDefinitionConfig, format!("tool child descriptor: {e}")))?;
        Ok(ToolChildDefinition { descriptor })
    }
}

impl Definition for ToolChildDefinition {
    fn descriptor(&self) -> &Descriptor {
        &self.descriptor
    }

    fn start(&self, input: &Payload) -> Result<Box<dyn Execution>, StepError> {
        let call = ToolCallInput::from_payload(input).map_err(|e| e.with_kind(ErrorKind::InvalidInput))?;
        Ok(Box::new(ToolChildExecution { state: ToolCallState::start(call) }))
    }

    fn restore(&self, cx: &StepContext, state: &ExecutionState) -> Result<Box<dyn Execution>, StepError> {
        if cx.cancel.is_cancelled() {
            return Err(StepError::Canceled);
        }
        let state = ToolCallState::from_execution_state(state)?;
        Ok(Box::new(ToolChildExecution { state }))
    }
}

/// One tool call's state machine.
pub struct ToolChildExecution {
    state: ToolCallState,
}

impl ToolChildExecution {
    /// The current state (for inspection).
    pub fn state(&self) -> &ToolCallState {
        &self.state
    }
}

fn first<'a>(signals: &'a [Signal], phase: ToolChildPhase, expected: &str) -> Result<&'a Signal, InteractionError> {
    signals.first().ok_or_else(|| InteractionError::invalid_state(format!("tool child in {phase} expects {expected}")))
}

fn tool_call_effect(call: &ToolCallInput, resume: Option<ToolResume>) -> Result<Effect, InteractionError> {
    let effect = ToolCallEffect { input: call.clone(), resume };
    Ok(Effect::Dispatcher(effect.to_payload()?))
}

/// One Step over a copy of the state; returns the new state and the Transition.
fn advance(state: &ToolCallState, signals: &[Signal]) -> Result<(ToolCallState, Transition), InteractionError> {
    state.validate()?;
    let mut next = state.clone();
    let phase = state.phase;
    match phase {
        ToolChildPhase::Ready => {
            if !signals.is_empty() {
                return Err(InteractionError::invalid_state("tool child in ready accepts no signals"));
            }
            next.phase = ToolChildPhase::AwaitingResult;
            let effect = tool_call_effect(&state.call, None)?;
            Ok((next, Transition::Continue { consumed: 0, effects: vec![effect] }))
        }
        ToolChildPhase::AwaitingResult => {
            let signal = first(signals, phase, "the tool_call settlement")?;
            match ToolCallSettlement::from_signal(signal)? {
                ToolCallSettlement::Result(settled) => {
                    if !settled.result.answers(&state.call.call) {
                        return Err(InteractionError::invalid_state("tool_call settlement does not answer the call"));
                    }
                    let output = settled.to_payload()?;
                    next.phase = ToolChildPhase::Completed;
                    next.checkpoint = None;
                    next.result = Some(settled);
                    Ok((next, Transition::Complete { consumed: 1, output }))
                }
                ToolCallSettlement::Checkpoint(checkpoint) => {
                    let previous = state.checkpoint.as_ref().map_or(0, |c| c.pause_count);
                    let expected = previous
                        .checked_add(1)
                        .ok_or_else(|| InteractionError::invalid_state("tool input pause count is exhausted"))?;
                    if checkpoint.pause_count != expected {
                        return Err(InteractionError::invalid_state(format!(
                            "checkpoint pause_count {} must be {expected}",
                            checkpoint.pause_count
                        )));
                    }
                    let payload = WaitOpenedPayload { input_request: checkpoint.input_request.clone() }.to_payload()?;
                    next.checkpoint = Some(checkpoint);
                    next.phase = ToolChildPhase::AwaitingWaitOpen;
                    let key = next.input_wait_key()?;
                    let wait = Effect::Framework(FrameworkEffect::Wait { key, payload: Some(payload) });
                    Ok((next, Transition::Continue { consumed: 1, effects: vec![wait] }))
                }
            }
        }
        ToolChildPhase::AwaitingWaitOpen => {
            let signal = first(signals, phase, "the input wait opening")?;
            let opened = WaitOpenedPayload::from_signal(signal)?;
            if opened.key != state.input_wait_key()? {
                return Err(InteractionError::invalid_state("wait opening is for another wait key"));
            }
            let checkpoint = state
                .checkpoint
                .as_ref()
                .ok_or_else(|| InteractionError::invalid_state("awaiting_wait_open without a checkpoint"))?;
            if opened.payload.input_request != checkpoint.input_request {
                return Err(InteractionError::invalid_state("wait opening carries another input request"));
            }
            next.wait_id = Some(opened.wait_id.clone());
            next.phase = ToolChildPhase::WaitingInput;
            // Only the opening: an answer queued behind it is the next Step's.
            Ok((next, Transition::Wait { consumed: 1, wait_id: opened.wait_id }))
        }
        ToolChildPhase::WaitingInput => {
            let signal = first(signals, phase, "the input response")?;
            let (wait_id, answer) = InputResponse::from_signal(signal).map_err(|e| e.with_kind(ErrorKind::InvalidExecutionState))?;
            if state.wait_id.as_ref() != Some(&wait_id) {
                return Err(InteractionError::invalid_state("input response addresses another wait"));
            }
            let checkpoint = state
                .checkpoint
                .clone()
                .ok_or_else(|| InteractionError::invalid_state("waiting_input without a checkpoint"))?;
            let response = checkpoint
                .input_request
                .validate_response(answer.response.value())
                .map_err(|e| InteractionError::new(ErrorKind::InvalidToolInputRequest, e.to_string()))?;
            let effect = tool_call_effect(&state.call, Some(ToolResume { checkpoint, response }))?;
            next.wait_id = None;
            next.phase = ToolChildPhase::AwaitingResult;
            Ok((next, Transition::Continue { consumed: 1, effects: vec![effect] }))
        }
        ToolChildPhase::Completed => Err(InteractionError::invalid_state("a completed tool child cannot step")),
    }
}

impl Execution for ToolChildExecution {
    fn step(&mut self, cx: &StepContext, signals: &[Signal]) -> Result<Transition, StepError> {
        if cx.cancel.is_cancelled() {
            return Err(StepError::Canceled);
        }
        let (next, transition) = advance(&self.state, signals)?;
        self.state = next;
        Ok(transition)
    }

    fn snapshot(&self) -> Result<ExecutionState, StepError> {
        Ok(self.state.to_execution_state()?)
    }
}

/// The output a completed child produced, decoded (for the parent).
pub fn decode_tool_child_output(output: &Payload) -> Result<SettledToolResult, InteractionError> {
    SettledToolResult::from_payload(output)
}
