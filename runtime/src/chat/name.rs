//! Syntax of tool names and tool call ids.

use super::error::quote;
use super::ChatError;
use crate::limits::{MAX_TOOL_CALL_ID_BYTES, MAX_TOOL_NAME_BYTES};

/// Checks a tool name against `^[A-Za-z0-9_-]{1,64}$`: the intersection of what model
/// providers accept, so a valid name can be sent to any of them unchanged.
pub fn validate_tool_name(name: &str) -> Result<(), ChatError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_TOOL_NAME_BYTES
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(ChatError::InvalidToolName { name: quote(name) })
    }
}

/// Checks a model-assigned tool call id: 1 to 256 bytes, no control characters. Ids are
/// otherwise opaque (providers use many shapes: `call_…`, `toolu_…`, UUIDs).
pub fn validate_call_id(id: &str) -> Result<(), ChatError> {
    if id.is_empty() {
        return Err(ChatError::InvalidCallId {
            reason: "must not be empty",
        });
    }
    if id.len() > MAX_TOOL_CALL_ID_BYTES {
        return Err(ChatError::InvalidCallId {
            reason: "longer than 256 bytes",
        });
    }
    if id.chars().any(char::is_control) {
        return Err(ChatError::InvalidCallId {
            reason: "contains a control character",
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_provider_compatible_names() {
        for name in ["a", "get_weather", "search-web", "A9_-z", &"x".repeat(64)] {
            assert_eq!(validate_tool_name(name), Ok(()), "{name}");
        }
    }

    #[test]
    fn rejects_other_names() {
        let long = "x".repeat(65);
        for name in [
            "",
            "invalid/name",
            "has space",
            "dot.name",
            "ünï",
            "tab\t",
            long.as_str(),
        ] {
            assert!(
                matches!(
                    validate_tool_name(name),
                    Err(ChatError::InvalidToolName { .. })
                ),
                "{name:?}"
            );
        }
    }

    #[test]
    fn error_quotes_long_names_bounded() {
        let e = validate_tool_name(&"é".repeat(10_000)).unwrap_err();
        assert!(e.to_string().len() < 200);
    }

    #[test]
    fn call_ids() {
        for id in [
            "c",
            "call_abc123",
            "toolu_01A",
            "with space",
            "ünïcode",
            &"x".repeat(256),
        ] {
            assert_eq!(validate_call_id(id), Ok(()), "{id}");
        }
        let long = "x".repeat(257);
        for id in ["", "a\nb", "\u{7f}", "nul\0", long.as_str()] {
            assert!(
                matches!(validate_call_id(id), Err(ChatError::InvalidCallId { .. })),
                "{id:?}"
            );
        }
    }
}
