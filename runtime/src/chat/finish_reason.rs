//! Why the model stopped.

use super::error::quote;
use crate::json::{DecodeError, FromJson, Json, ToJson};

/// Why the model stopped producing output.
///
/// Wire form: `"tool_calls" | "stop" | "length" | "content_filter" | "refusal" | "other"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FinishReason {
    /// The model wants its tool calls executed.
    ToolCalls,
    /// A natural end or a stop sequence.
    Stop,
    /// The output token limit was reached.
    Length,
    ContentFilter,
    Refusal,
    /// Anything a provider reports that maps to none of the above.
    Other,
}

impl FinishReason {
    pub const ALL: [FinishReason; 6] = [
        FinishReason::ToolCalls,
        FinishReason::Stop,
        FinishReason::Length,
        FinishReason::ContentFilter,
        FinishReason::Refusal,
        FinishReason::Other,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::ToolCalls => "tool_calls",
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::ContentFilter => "content_filter",
            FinishReason::Refusal => "refusal",
            FinishReason::Other => "other",
        }
    }

    pub fn from_name(name: &str) -> Option<FinishReason> {
        FinishReason::ALL.into_iter().find(|r| r.as_str() == name)
    }
}

impl std::fmt::Display for FinishReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ToJson for FinishReason {
    fn to_json(&self) -> Json {
        Json::str(self.as_str())
    }
}

impl FromJson for FinishReason {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let name = value
            .as_str()
            .ok_or_else(|| DecodeError::wrong_type("string", value))?;
        FinishReason::from_name(name)
            .ok_or_else(|| DecodeError::invalid(format!("unknown finish reason `{}`", quote(name))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        for reason in FinishReason::ALL {
            assert_eq!(FinishReason::from_json(&reason.to_json()), Ok(reason));
        }
        assert_eq!(FinishReason::Stop.to_json(), Json::str("stop"));
        assert_eq!(FinishReason::ToolCalls.to_string(), "tool_calls");
    }

    #[test]
    fn rejections() {
        for bad in ["", "end_turn", "STOP", "tool_use"] {
            assert!(FinishReason::from_json(&Json::str(bad)).is_err(), "{bad}");
        }
        assert!(FinishReason::from_json(&Json::Null).is_err());
        assert!(FinishReason::from_json(&Json::u64(0)).is_err());
    }
}
