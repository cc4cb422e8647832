//! The final semantic result of an Interaction: a final model response without tool calls, or
//! the results of a tool round in which every call was a successful direct-result tool.

use super::error::{ErrorKind, InteractionError};
use super::protocol::EncodedResponse;
use super::wire::Wire;
use crate::chat::{Response, ToolResult, Usage};
use crate::interaction::budget::Spending;
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ObjectWriter, Payload, ToJson};
use std::collections::BTreeSet;

/// Which value completed the Interaction. Wire form: `"model_response" | "direct_tool_results"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CompletionSource {
    /// A model response without tool calls.
    ModelResponse,
    /// Every call of one tool round targeted a direct-result tool and succeeded, and no steer was
    /// pending: the results complete the Interaction without another model call.
    DirectToolResults,
}

impl CompletionSource {
    pub const ALL: [CompletionSource; 2] = [CompletionSource::ModelResponse, CompletionSource::DirectToolResults];

    pub fn as_str(self) -> &'static str {
        match self {
            CompletionSource::ModelResponse => "model_response",
            CompletionSource::DirectToolResults => "direct_tool_results",
        }
    }

    pub fn from_name(name: &str) -> Option<CompletionSource> {
        CompletionSource::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

impl std::fmt::Display for CompletionSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ToJson for CompletionSource {
    fn to_json(&self) -> Json {
        Json::str(self.as_str())
    }
}

impl FromJson for CompletionSource {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let name = crate::json::decode_str(value)?;
        CompletionSource::from_name(name)
            .ok_or_else(|| DecodeError::invalid("completion source must be model_response or direct_tool_results"))
    }
}

/// The authoritative value of an [`Output`], one variant per [`CompletionSource`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Completion {
    ModelResponse(Response),
    /// In tool-call order.
    DirectToolResults(Vec<ToolResult>),
}

/// The final semantic result.
///
/// Wire form: `{"source":CompletionSource,"model_response"?:Response,
/// "direct_tool_results"?:[ToolResult],"model_calls":u32,"usage"?:Usage,"spending"?:Spending}`,
/// with exactly the member that `source` names (the other is rejected); `usage` and `spending`
/// are omitted when zero (an explicit zero is rejected, so bytes stay canonical).
///
/// Valid when `model_calls > 0` and:
/// * `model_response`: the response is valid, has a message and a finish reason, and its
///   message holds no tool-call parts;
/// * `direct_tool_results`: the list is non-empty, every result is valid and **not** an error,
///   and the call ids are unique.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Output {
    pub completion: Completion,
    /// The number of model Effects the Interaction declared.
    pub model_calls: u32,
    /// The tokens of every model call of this run and of its delegates' runs, summed
    /// ([`Usage::saturating_add`]).
    pub usage: Usage,
    /// Cost, tool calls and charges of this run and its delegates' runs, summed
    /// ([`crate::interaction::budget::Spending`]).
    pub spending: Spending,
}

impl Output {
    pub fn model_response(response: Response, model_calls: u32) -> Output {
        Output { completion: Completion::ModelResponse(response), model_calls, usage: Usage::default(), spending: Spending::default() }
    }

    pub fn direct_tool_results(results: Vec<ToolResult>, model_calls: u32) -> Output {
        Output { completion: Completion::DirectToolResults(results), model_calls, usage: Usage::default(), spending: Spending::default() }
    }

    /// The same Output with the run's summed `usage`.
    pub fn with_usage(mut self, usage: Usage) -> Output {
        self.usage = usage;
        self
    }

    /// The same Output with the run's summed `spending`.
    pub fn with_spending(mut self, spending: Spending) -> Output {
        self.spending = spending;
        self
    }

    pub fn source(&self) -> CompletionSource {
        match self.completion {
            Completion::ModelResponse(_) => CompletionSource::ModelResponse,
            Completion::DirectToolResults(_) => CompletionSource::DirectToolResults,
        }
    }

    /// The response when the source is `model_response`.
    pub fn response(&self) -> Option<&Response> {
        match &self.completion {
            Completion::ModelResponse(r) => Some(r),
            Completion::DirectToolResults(_) => None,
        }
    }

    /// The results when the source is `direct_tool_results`.
    pub fn tool_results(&self) -> Option<&[ToolResult]> {
        match &self.completion {
            Completion::DirectToolResults(r) => Some(r),
            Completion::ModelResponse(_) => None,
        }
    }
}

impl Output {
    /// [`Wire::to_payload`] of an Output that passed [`Wire::validate`]. `response`, when
    /// given, is the encoding of its model response (the settlement's
    /// [`crate::interaction::protocol::ModelResult::remembered_response`]): the payload's
    /// value and text are then built around it instead of encoding the response again. The
    /// Output nests one level less deep than the settlement that held the response, which
    /// passed the depth limit, so only the size is checked.
    pub(crate) fn payload_of_valid(&self, response: Option<EncodedResponse<'_>>) -> Result<Payload, InteractionError> {
        if let (Completion::ModelResponse(_r), Some(response)) = (&self.completion, response) {
            #[cfg(test)]
            assert_eq!(response.value, &_r.to_json(), "the settlement's encoding is the response's own");
            let value = ObjectBuilder::new()
                .field("source", &self.source())
                .field("model_calls", &self.model_calls)
                .value("model_response", response.value.clone())
                .opt_field("usage", (self.usage != Usage::default()).then_some(&self.usage))
                .opt_field("spending", (!self.spending.is_zero()).then_some(&self.spending))
                .build();
            #[cfg(test)]
            assert_eq!(value, self.to_json(), "the Output's value around the response is its encoding");
            let mut text = String::with_capacity(response.text.len() + 160);
            let mut w = ObjectWriter::new(&mut text);
            w.u64("model_calls", u64::from(self.model_calls))
                .canonical("model_response", response.text)
                .str("source", self.source().as_str());
            if !self.spending.is_zero() {
                w.field("spending", &self.spending);
            }
            if self.usage != Usage::default() {
                w.write("usage", &self.usage);
            }
            w.finish();
            // Over the size limit: the tree path below names the limit.
            if let Some(payload) = Payload::from_parts(value, text) {
                return Ok(payload);
            }
        }
        Payload::from_json(self.to_json()).map_err(|e| InteractionError::new(Self::INVALID, format!("{}: {e}", Self::WHAT)))
    }
}

impl Wire for Output {
    const INVALID: ErrorKind = ErrorKind::InvalidExecutionState;
    const WHAT: &'static str = "output";

    fn validate(&self) -> Result<(), InteractionError> {
        let invalid = |detail: String| InteractionError::invalid_state(format!("output: {detail}"));
        if self.model_calls == 0 {
            return Err(invalid("model_calls must be > 0".into()));
        }
        match &self.completion {
            Completion::ModelResponse(response) => {
                response.validate().map_err(|e| invalid(format!("model_response: {e}")))?;
                let Some(message) = &response.message else {
                    return Err(invalid("model_response has no message".into()));
                };
                if response.finish_reason.is_none() {
                    return Err(invalid("model_response has no finish reason".into()));
                }
                if message.tool_calls().next().is_some() {
                    return Err(invalid("model_response holds tool calls".into()));
                }
            }
            Completion::DirectToolResults(results) => {
                if results.is_empty() {
                    return Err(invalid("direct_tool_results is empty".into()));
                }
                let mut ids = BTreeSet::new();
                for (index, result) in results.iter().enumerate() {
                    result.validate().map_err(|e| invalid(format!("direct tool result {index}: {e}")))?;
                    if result.is_error {
                        return Err(invalid(format!("direct tool result {index} is an error")));
                    }
                    if !ids.insert(result.id.as_str()) {
                        return Err(invalid(format!("direct tool result {index} repeats a call id")));
                    }
                }
            }
        }
        Ok(())
    }
}

impl ToJson for Output {
    fn to_json(&self) -> Json {
        let b = ObjectBuilder::new().field("source", &self.source()).field("model_calls", &self.model_calls);
        match &self.completion {
            Completion::ModelResponse(r) => b.field("model_response", r),
            Completion::DirectToolResults(r) => b.field("direct_tool_results", r),
        }
        .opt_field("usage", (self.usage != Usage::default()).then_some(&self.usage))
        .opt_field("spending", (!self.spending.is_zero()).then_some(&self.spending))
        .build()
    }
}

impl FromJson for Output {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let source: CompletionSource = r.required("source")?;
        let model_calls = r.required("model_calls")?;
        // Reading only the member the source names leaves the other one unread, so `finish`
        // rejects it as unknown.
        let completion = match source {
            CompletionSource::ModelResponse => Completion::ModelResponse(r.required("model_response")?),
            CompletionSource::DirectToolResults => Completion::DirectToolResults(r.required("direct_tool_results")?),
        };
        let usage = read_usage(&mut r)?;
        let spending = crate::interaction::budget::read_spending(&mut r)?;
        r.finish()?;
        let output = Output { completion, model_calls, usage, spending };
        output.validate()?;
        Ok(output)
    }
}

/// An optional summed `usage` member: absent is zero, an explicit zero is refused (it would
/// not encode back to the same bytes).
pub(crate) fn read_usage(r: &mut ObjectReader<'_>) -> Result<Usage, DecodeError> {
    match r.optional::<Usage>("usage")? {
        Some(u) if u == Usage::default() => {
            Err(DecodeError::invalid("a zero usage is omitted, not written".to_owned()).in_member("usage"))
        }
        other => Ok(other.unwrap_or_default()),
    }
}
