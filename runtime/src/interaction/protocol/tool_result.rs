//! The tool call settlement and `toolCallResult`, the tool child's Output.

use super::checkpoint::ToolCheckpoint;
use super::names::validate_advertised_names;
use super::{envelope, open, Operation};
use crate::chat::ToolResult;
use crate::interaction::error::{ErrorKind, InteractionError};
use crate::interaction::wire::{read_nonempty_list, Wire};
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ToJson};
use crate::kernel::effect::Settlement;
use crate::kernel::signal::{SettlementStatus, Signal};

/// The definite result of one tool call (`toolCallResult`): the tool child's Output, the body
/// of a result settlement, and what the parent stores per settled invocation.
///
/// Wire form: `{"result":ToolResult,"direct":B,"advertised_tool_names"?:[S]}` (the list is
/// omitted when empty; an explicit `[]` is rejected).
///
/// Valid when: the result is valid; `direct && is_error` is rejected (only a successful
/// result of a direct-result tool is direct); an error result carries no advertisements
/// (staged names commit only on success); advertised names follow
/// [`validate_advertised_names`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SettledToolResult {
    pub result: ToolResult,
    pub direct: bool,
    /// Deferred tools this call advertised, committed with its success, in staging order.
    pub advertised_tool_names: Vec<String>,
}

impl SettledToolResult {
    /// A result with no advertisements.
    pub fn new(result: ToolResult, direct: bool) -> SettledToolResult {
        SettledToolResult { result, direct, advertised_tool_names: Vec::new() }
    }

    fn write_members(&self, b: ObjectBuilder) -> ObjectBuilder {
        b.field("result", &self.result)
            .field("direct", &self.direct)
            .nonempty_field("advertised_tool_names", &self.advertised_tool_names)
    }

    fn read_members(r: &mut ObjectReader<'_>) -> Result<SettledToolResult, DecodeError> {
        Ok(SettledToolResult {
            result: r.required("result")?,
            direct: r.required("direct")?,
            advertised_tool_names: read_nonempty_list(r, "advertised_tool_names")?,
        })
    }
}

impl Wire for SettledToolResult {
    const INVALID: ErrorKind = ErrorKind::InvalidExecutionState;
    const WHAT: &'static str = "tool call result";

    fn validate(&self) -> Result<(), InteractionError> {
        let invalid = |detail: String| InteractionError::invalid_state(format!("tool call result: {detail}"));
        self.result.validate().map_err(|e| invalid(e.to_string()))?;
        if self.direct && self.result.is_error {
            return Err(invalid("an error result cannot be direct".into()));
        }
        if self.result.is_error && !self.advertised_tool_names.is_empty() {
            return Err(invalid("an error result cannot advertise tools".into()));
        }
        validate_advertised_names(&self.advertised_tool_names).map_err(invalid)
    }
}

impl ToJson for SettledToolResult {
    fn to_json(&self) -> Json {
        self.write_members(ObjectBuilder::new()).build()
    }
}

impl FromJson for SettledToolResult {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let settled = SettledToolResult::read_members(&mut r)?;
        r.finish()?;
        settled.validate()?;
        Ok(settled)
    }
}

/// The tool Dispatcher's definite outcome of one tool call Effect. Both variants settle with
/// status `succeeded`: a tool's own error is a definite result, and a checkpoint is control
/// flow, not a failure.
///
/// Wire form: `{"operation":"tool_call","tool_result":B}` where `B` is either the members of
/// [`SettledToolResult`] or exactly `{"checkpoint":ToolCheckpoint}` (members of the other
/// variant are rejected as unknown).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolCallSettlement {
    Result(SettledToolResult),
    /// The tool asked for input; the child opens a wait for it.
    Checkpoint(ToolCheckpoint),
}

impl ToolCallSettlement {
    /// The Dispatcher's settlement (always `succeeded`).
    pub fn to_settlement(&self) -> Result<Settlement, InteractionError> {
        // The tool child decodes this payload on its next Step: it takes the value back instead.
        Ok(Settlement { status: SettlementStatus::Succeeded, payload: self.to_payload_remembered()? })
    }

    /// Parses the tool child's settlement Signal: unaddressed, status `succeeded`.
    pub fn from_signal(signal: &Signal) -> Result<ToolCallSettlement, InteractionError> {
        if signal.wait_id().is_some() {
            return Err(InteractionError::invalid_state(format!(
                "tool_call settlement {} must not be wait-addressed",
                signal.id()
            )));
        }
        match signal.status() {
            Some(SettlementStatus::Succeeded) => ToolCallSettlement::from_payload_reusing(signal.payload()),
            Some(SettlementStatus::Failed) => Err(InteractionError::invalid_state(format!(
                "tool_call settlement {} must have status succeeded",
                signal.id()
            ))),
            None => Err(InteractionError::invalid_state(format!(
                "signal {} carries a tool_call result but is not a settlement",
                signal.id()
            ))),
        }
    }
}

impl Wire for ToolCallSettlement {
    const INVALID: ErrorKind = ErrorKind::InvalidExecutionState;
    const WHAT: &'static str = "tool_call settlement";

    fn validate(&self) -> Result<(), InteractionError> {
        match self {
            ToolCallSettlement::Result(settled) => settled.validate(),
            ToolCallSettlement::Checkpoint(checkpoint) => checkpoint
                .validate()
                .map_err(|e| InteractionError::invalid_state(format!("tool_call settlement: {}", e.detail()))),
        }
    }
}

impl ToJson for ToolCallSettlement {
    fn to_json(&self) -> Json {
        let body = match self {
            ToolCallSettlement::Result(settled) => settled.to_json(),
            ToolCallSettlement::Checkpoint(checkpoint) => ObjectBuilder::new().field("checkpoint", checkpoint).build(),
        };
        envelope(Operation::ToolCall, "tool_result", body)
    }
}

impl FromJson for ToolCallSettlement {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let body = open(value, Operation::ToolCall, "tool_result")?;
        decode_body(body).map_err(|e| e.in_member("tool_result"))
    }
}

fn decode_body(body: &Json) -> Result<ToolCallSettlement, DecodeError> {
    let mut r = ObjectReader::new(body)?;
    let settlement = if r.has("checkpoint") {
        ToolCallSettlement::Checkpoint(r.required("checkpoint")?)
    } else {
        ToolCallSettlement::Result(SettledToolResult::read_members(&mut r)?)
    };
    r.finish()?;
    settlement.validate()?;
    Ok(settlement)
}
