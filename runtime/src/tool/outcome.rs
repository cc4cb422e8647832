//! The classification of one finished tool call as a pure function, and the
//! model-visible error results produced without running a tool.
//!
//! Panics are not handled here: the dispatcher that polls the call catches them and treats
//! them as unknown.

use super::diagnostic::bounded;
use super::{ToolError, ToolInputRequest};
use crate::chat::{ToolCall, ToolOutput, ToolResult};
use crate::json::Payload;
use crate::limits::MAX_PAYLOAD_BYTES;

/// What one finished call means for the Interaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolOutcome {
    /// A definite result the model sees (an ordinary success or an error result).
    Result(ModelVisibleResult),
    /// The call paused for external input; nothing is shown to the model yet.
    InputRequired(ToolInputRequest),
    /// No definite outcome (host failure, cancellation, deadline, invalid input request): the
    /// call's Effect stays unknown. `diagnostic` is for the host (bounded), never the model.
    Unknown { diagnostic: String },
}

/// The model-visible part of a tool result, before it is matched to its call's id and name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModelVisibleResult {
    pub output: ToolOutput,
    pub is_error: bool,
}

impl ModelVisibleResult {
    /// An error result whose content is `text` and that has no details.
    pub fn error(text: String) -> ModelVisibleResult {
        ModelVisibleResult {
            output: ToolOutput {
                content: text,
                details: None,
            },
            is_error: true,
        }
    }

    /// The chat result answering `call`.
    pub fn into_tool_result(self, call: &ToolCall) -> ToolResult {
        ToolResult {
            id: call.id.clone(),
            name: call.name.clone(),
            output: self.output,
            is_error: self.is_error,
        }
    }
}

/// Maps a call's return value to its outcome:
/// * valid output → a result carrying it; invalid output →
///   `error: tool "<n>" failed: tool returned invalid output: <diag>`;
/// * an ordinary error → `error: tool "<n>" failed: <message, bounded>`;
/// * a complete failure → an error result carrying its (validated) output;
/// * authorization denied → `error: tool "<n>" is not authorized` (the reason is not shown);
/// * input required → [`ToolOutcome::InputRequired`];
/// * invalid input request, host failure, canceled, deadline exceeded → [`ToolOutcome::Unknown`].
pub fn classify_outcome(tool_name: &str, result: Result<ToolOutput, ToolError>) -> ToolOutcome {
    match result {
        Ok(output) => ToolOutcome::Result(checked(tool_name, output, false)),
        Err(ToolError::Failed {
            output: Some(output),
            ..
        }) => ToolOutcome::Result(checked(tool_name, output, true)),
        Err(ToolError::Failed {
            message,
            output: None,
        }) => ToolOutcome::Result(ModelVisibleResult::error(format!(
            "error: tool \"{tool_name}\" failed: {}",
            bounded(&message, "unspecified error")
        ))),
        Err(ToolError::AuthorizationDenied { .. }) => ToolOutcome::Result(
            ModelVisibleResult::error(format!("error: tool \"{tool_name}\" is not authorized")),
        ),
        Err(ToolError::InputRequired(request)) => ToolOutcome::InputRequired(request),
        Err(ToolError::InvalidInputRequest(e)) => {
            unknown(&format!("tool \"{tool_name}\" returned an {e}"))
        }
        Err(ToolError::HostFailure { message }) => unknown(&format!(
            "tool \"{tool_name}\": host failure: {}",
            bounded(&message, "unspecified")
        )),
        Err(ToolError::Canceled) => unknown(&format!("tool \"{tool_name}\" call canceled")),
        Err(ToolError::DeadlineExceeded) => {
            unknown(&format!("tool \"{tool_name}\" call deadline exceeded"))
        }
    }
}

/// The result for a call whose arguments failed preparation (the tool never ran).
pub fn invalid_arguments_result(diagnostic: &str) -> ModelVisibleResult {
    ModelVisibleResult::error(format!(
        "error: invalid arguments: {}",
        bounded(diagnostic, "invalid arguments")
    ))
}

/// The result for a call naming no tool of the manifest (no child, no tool ran).
pub fn unknown_tool_result(name: &str) -> ModelVisibleResult {
    ModelVisibleResult::error(format!(
        "error: tool \"{}\" is not available",
        bounded(name, "")
    ))
}

fn unknown(diagnostic: &str) -> ToolOutcome {
    ToolOutcome::Unknown {
        diagnostic: bounded(diagnostic, "unknown tool outcome"),
    }
}

/// Output the model may see: content within [`MAX_PAYLOAD_BYTES`], details a valid payload
/// (normalized). Anything else becomes the invalid-output error result.
fn checked(tool_name: &str, output: ToolOutput, is_error: bool) -> ModelVisibleResult {
    match validate_output(output) {
        Ok(output) => ModelVisibleResult { output, is_error },
        Err(diagnostic) => ModelVisibleResult::error(format!(
            "error: tool \"{tool_name}\" failed: tool returned invalid output: {}",
            bounded(&diagnostic, "invalid output")
        )),
    }
}

fn validate_output(output: ToolOutput) -> Result<ToolOutput, String> {
    if output.content.len() > MAX_PAYLOAD_BYTES {
        return Err(format!(
            "content is {} bytes, exceeds the limit of {MAX_PAYLOAD_BYTES} bytes",
            output.content.len()
        ));
    }
    let details = match output.details {
        None => None,
        Some(details) => match Payload::from_json(details) {
            Ok(payload) => Some(payload.value().clone()),
            Err(e) => return Err(format!("details: {e}")),
        },
    };
    Ok(ToolOutput {
        content: output.content,
        details,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::Json;
    use crate::limits::MAX_DIAGNOSTIC_BYTES;

    fn text(outcome: ToolOutcome) -> (String, bool) {
        match outcome {
            ToolOutcome::Result(r) => (r.output.content, r.is_error),
            other => panic!("expected a result, got {other:?}"),
        }
    }

    fn output(content: &str) -> ToolOutput {
        ToolOutput {
            content: content.to_owned(),
            details: None,
        }
    }

    #[test]
    fn success_keeps_output() {
        let out = ToolOutput {
            content: "hi".into(),
            details: Some(crate::json::parse(br#"{"n":1}"#).unwrap()),
        };
        assert_eq!(
            classify_outcome("echo", Ok(out.clone())),
            ToolOutcome::Result(ModelVisibleResult {
                output: out,
                is_error: false
            })
        );
        // The zero output is a valid, empty result.
        assert_eq!(
            classify_outcome("echo", Ok(ToolOutput::default())),
            ToolOutcome::Result(ModelVisibleResult::default())
        );
    }

    #[test]
    fn ordinary_error_text_is_bounded() {
        assert_eq!(
            text(classify_outcome(
                "echo",
                Err(ToolError::failed("disk full"))
            )),
            ("error: tool \"echo\" failed: disk full".to_owned(), true)
        );
        assert_eq!(
            text(classify_outcome("echo", Err(ToolError::failed("  ")))).0,
            "error: tool \"echo\" failed: unspecified error"
        );
        let (t, _) = text(classify_outcome(
            "echo",
            Err(ToolError::failed("x".repeat(10_000))),
        ));
        let prefix = "error: tool \"echo\" failed: ";
        assert_eq!(t, format!("{prefix}{}", "x".repeat(MAX_DIAGNOSTIC_BYTES)));
    }

    #[test]
    fn complete_failure_carries_its_output() {
        let (t, is_error) = text(classify_outcome(
            "echo",
            Err(ToolError::failed_with_output("hidden", output("partial"))),
        ));
        assert_eq!((t.as_str(), is_error), ("partial", true));
    }

    #[test]
    fn authorization_reason_is_never_shown() {
        let (t, is_error) = text(classify_outcome(
            "rm",
            Err(ToolError::authorization_denied("policy P7 secret")),
        ));
        assert_eq!(t, "error: tool \"rm\" is not authorized");
        assert!(is_error);
    }

    #[test]
    fn unknown_outcomes() {
        let invalid = crate::tool::require_tool_input(b"1", b"{", b"2");
        for e in [
            ToolError::host_failure("db down"),
            ToolError::Canceled,
            ToolError::DeadlineExceeded,
            invalid,
        ] {
            assert!(e.leaves_unknown());
            match classify_outcome("echo", Err(e)) {
                ToolOutcome::Unknown { diagnostic } => {
                    assert!(!diagnostic.is_empty() && diagnostic.len() <= MAX_DIAGNOSTIC_BYTES)
                }
                other => panic!("expected unknown, got {other:?}"),
            }
        }
        let long = ToolError::host_failure("y".repeat(10_000));
        let ToolOutcome::Unknown { diagnostic } = classify_outcome("echo", Err(long)) else {
            panic!()
        };
        assert!(diagnostic.len() <= MAX_DIAGNOSTIC_BYTES);
    }

    #[test]
    fn input_required_passes_the_request_through() {
        let ToolError::InputRequired(request) =
            crate::tool::require_tool_input(b"1", b"true", b"2")
        else {
            panic!()
        };
        assert!(!ToolError::InputRequired(request.clone()).leaves_unknown());
        assert_eq!(
            classify_outcome("echo", Err(ToolError::InputRequired(request.clone()))),
            ToolOutcome::InputRequired(request)
        );
    }

    #[test]
    fn invalid_output_becomes_an_error_result() {
        let big = output(&"c".repeat(MAX_PAYLOAD_BYTES + 1));
        let (t, is_error) = text(classify_outcome("echo", Ok(big)));
        assert!(
            t.starts_with("error: tool \"echo\" failed: tool returned invalid output: content is"),
            "{t}"
        );
        assert!(is_error);
        let at_limit = output(&"c".repeat(MAX_PAYLOAD_BYTES));
        assert_eq!(
            text(classify_outcome("echo", Ok(at_limit.clone()))),
            (at_limit.content, false)
        );

        let huge_details = ToolOutput {
            content: String::new(),
            details: Some(Json::str("d".repeat(MAX_PAYLOAD_BYTES))),
        };
        let (t, _) = text(classify_outcome("echo", Ok(huge_details.clone())));
        assert!(
            t.starts_with("error: tool \"echo\" failed: tool returned invalid output: details:"),
            "{t}"
        );
        // A complete failure's output is validated the same way.
        let (t, _) = text(classify_outcome(
            "echo",
            Err(ToolError::failed_with_output("m", huge_details)),
        ));
        assert!(
            t.starts_with("error: tool \"echo\" failed: tool returned invalid output:"),
            "{t}"
        );
    }

    #[test]
    fn pre_execution_rejections() {
        let r = invalid_arguments_result("schema violation at /a: wrong type");
        assert_eq!(
            r.output.content,
            "error: invalid arguments: schema violation at /a: wrong type"
        );
        assert!(r.is_error && r.output.details.is_none());
        let long = invalid_arguments_result(&"z".repeat(5000));
        assert_eq!(
            long.output.content.len(),
            "error: invalid arguments: ".len() + MAX_DIAGNOSTIC_BYTES
        );
        let r = unknown_tool_result("nope");
        assert_eq!(r.output.content, "error: tool \"nope\" is not available");
        assert!(r.is_error);
    }

    #[test]
    fn into_tool_result_matches_the_call() {
        let call = ToolCall {
            id: "c1".into(),
            name: "echo".into(),
            arguments: "{}".into(),
        };
        let r = unknown_tool_result("echo").into_tool_result(&call);
        assert_eq!(
            (r.id.as_str(), r.name.as_str(), r.is_error),
            ("c1", "echo", true)
        );
    }
}
