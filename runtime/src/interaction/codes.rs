//! The stable failure codes of Interaction Process termination, each with its kind,
//! and helpers that build Failures with Interaction-normalized messages.
//!
//! A validator panic is not listed: the kernel records it as kind `panic` with code
//! `execution.step.failed` ([`crate::kernel::failure::codes::STEP_PANICKED`]).

use super::diagnostic::normalize_str;
use crate::kernel::failure::{Failure, FailureCode, FailureKind::*};
use crate::kernel::waist::StepError;

/// `MaxModelCalls` reached before another model request.
pub const LIMIT_MODEL_CALLS: FailureCode = FailureCode::new("interaction.limit.model_calls", Execution);
/// The working context outgrew its byte bound (`max_context_bytes`).
pub const LIMIT_CONTEXT: FailureCode = FailureCode::new("interaction.limit.context", Execution);
/// The model settlement carries a host error (host failure, reducer error, invalid reduction).
pub const HOST_FAILED: FailureCode = FailureCode::new("interaction.host.failed", External);
/// The model settlement carries a provider error.
pub const MODEL_FAILED: FailureCode = FailureCode::new("interaction.model.failed", External);
/// Tool calls arrived with a finish reason other than `tool_calls` or `length`.
pub const MODEL_TOOL_CALLS_NOT_COMPLETED: FailureCode =
    FailureCode::new("interaction.model.tool_calls_not_completed", External);
/// The completion validator returned an error.
pub const COMPLETION_VALIDATOR_FAILED: FailureCode =
    FailureCode::new("interaction.completion.validator_failed", Execution);
/// The completion validator returned an invalid decision (including the zero decision).
pub const COMPLETION_DECISION_INVALID: FailureCode =
    FailureCode::new("interaction.completion.decision_invalid", Contract);
/// A tool child could not be started.
pub const TOOL_START_FAILED: FailureCode = FailureCode::new("interaction.tool.start_failed", Execution);
/// A tool child ended without completing.
pub const TOOL_PROCESS_FAILED: FailureCode = FailureCode::new("interaction.tool.process_failed", Execution);

/// The next model call's reservation would pass the input-token budget.
pub const BUDGET_INPUT_TOKENS: FailureCode = FailureCode::new("interaction.budget.input_tokens", Execution);
/// The next model call's reservation would pass the output-token budget.
pub const BUDGET_OUTPUT_TOKENS: FailureCode = FailureCode::new("interaction.budget.output_tokens", Execution);
/// The next model call's reservation would pass the total-token budget.
pub const BUDGET_TOTAL_TOKENS: FailureCode = FailureCode::new("interaction.budget.total_tokens", Execution);
/// The next model call's reservation would pass the cost budget (or its model has no price).
pub const BUDGET_COST: FailureCode = FailureCode::new("interaction.budget.cost_micros", Execution);
/// The next tool call would pass the tool-call budget.
pub const BUDGET_TOOL_CALLS: FailureCode = FailureCode::new("interaction.budget.tool_calls", Execution);
/// The run's time budget (or the deadline its parent set) passed before its next model call or
/// tool batch.
pub const BUDGET_TIME: FailureCode = FailureCode::new("interaction.budget.time", Execution);

/// Every code above.
pub const ALL: &[FailureCode] = &[
    LIMIT_MODEL_CALLS,
    LIMIT_CONTEXT,
    HOST_FAILED,
    MODEL_FAILED,
    MODEL_TOOL_CALLS_NOT_COMPLETED,
    COMPLETION_VALIDATOR_FAILED,
    COMPLETION_DECISION_INVALID,
    TOOL_START_FAILED,
    TOOL_PROCESS_FAILED,
    BUDGET_INPUT_TOKENS,
    BUDGET_OUTPUT_TOKENS,
    BUDGET_TOTAL_TOKENS,
    BUDGET_COST,
    BUDGET_TOOL_CALLS,
    BUDGET_TIME,
];

/// A Failure for `code` whose message is normalized by the Interaction rules
/// ([`super::diagnostic`]: U+FFFD, trim, "Interaction operation failed" when empty,
/// ≤ 2048 bytes).
pub fn failure(code: FailureCode, message: &str) -> Failure {
    Failure::new(code, &normalize_str(message))
}

/// The same Failure as a classified Step error (the kernel records exactly this Failure).
pub fn classified(code: FailureCode, message: &str) -> StepError {
    StepError::Classified(failure(code, message))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::failure::FailureKind;
    use crate::limits::MAX_DIAGNOSTIC_BYTES;
    use crate::text::QualifiedName;

    #[test]
    fn codes_and_kinds_are_pinned() {
        let expected = [
            ("interaction.limit.model_calls", FailureKind::Execution),
            ("interaction.limit.context", FailureKind::Execution),
            ("interaction.host.failed", FailureKind::External),
            ("interaction.model.failed", FailureKind::External),
            ("interaction.model.tool_calls_not_completed", FailureKind::External),
            ("interaction.completion.validator_failed", FailureKind::Execution),
            ("interaction.completion.decision_invalid", FailureKind::Contract),
            ("interaction.tool.start_failed", FailureKind::Execution),
            ("interaction.tool.process_failed", FailureKind::Execution),
            ("interaction.budget.input_tokens", FailureKind::Execution),
            ("interaction.budget.output_tokens", FailureKind::Execution),
            ("interaction.budget.total_tokens", FailureKind::Execution),
            ("interaction.budget.cost_micros", FailureKind::Execution),
            ("interaction.budget.tool_calls", FailureKind::Execution),
            ("interaction.budget.time", FailureKind::Execution),
        ];
        assert_eq!(ALL.len(), expected.len());
        for (code, (name, kind)) in ALL.iter().zip(expected) {
            assert_eq!(code.name(), name);
            assert_eq!(code.kind(), kind);
            assert!(QualifiedName::parse(code.name()).is_ok());
        }
    }

    #[test]
    fn failure_messages_are_normalized() {
        let f = failure(MODEL_FAILED, "  rate limited \n");
        assert!(f.is(MODEL_FAILED));
        assert_eq!(f.kind, FailureKind::External);
        assert_eq!(f.message.as_str(), "rate limited");
        assert_eq!(failure(HOST_FAILED, "").message.as_str(), "Interaction operation failed");
        let long = failure(LIMIT_MODEL_CALLS, &"x".repeat(5000));
        assert_eq!(long.message.as_str().len(), MAX_DIAGNOSTIC_BYTES);
        assert_eq!(classified(TOOL_START_FAILED, "no"), StepError::Classified(failure(TOOL_START_FAILED, "no")));
    }
}
