//! Failure codes through the real owner: every stable failure code ends a real run with its pinned
//! kind, and diagnostic normalization applies to failure messages and model-visible error
//! texts.

use super::*;
use crate::interaction::budget::{Budget as RunBudget, BudgetConfig, Price, Prices};
use crate::interaction::codes;
use crate::interaction::completion::{CompletionCandidate, CompletionDecision};
use crate::kernel::failure::FailureCode;
use crate::kernel::status::{Cause, Status};
use crate::limits::MAX_DIAGNOSTIC_BYTES;
use std::collections::BTreeSet;

/// A model client failing every call with `error`.
struct Failing(ModelError);

impl ModelClient for Failing {
    fn call<'a>(&'a self, _: &'a ModelCallContext, _: Request) -> BoxFuture<'a, Result<Response, ModelError>> {
        let error = self.0.clone();
        Box::pin(async move { Err(error) })
    }
}

fn failing(error: ModelError) -> Harness {
    harness_full(tool_set(), vec![], |_| {}, |_| {}, move |_| DispatcherConfig::complete(Arc::new(Failing(error))))
}

fn validating(answer_text: &str, validator: crate::interaction::completion::CompletionValidator) -> Harness {
    harness(vec![answer(answer_text)], move |c| c.completion_validator = Some(validator))
}

/// A run calling the weather tool under `budget` (priced: 1 micro-dollar per million tokens).
fn budgeted(budget: RunBudget) -> Harness {
    let weather = calls_response(vec![call("c1", "weather", "{}")]);
    harness(vec![weather], move |c| {
        c.budget = BudgetConfig {
            budget,
            prices: Prices::new().model("m", Price::per_million_usd_micros(1, 1)),
            model: "m".into(),
        }
    })
}

/// The failed root's Failure, after checking the kernel's oracle over the run.
fn failed(h: &Harness) -> Failure {
    let (_r, result) = h.run("go");
    assert_eq!(result.status(), Status::Failed, "{result:?}");
    failure_of(&result)
}

#[test]
fn every_stable_failure_code_ends_a_real_run_with_its_kind() {
    let weather = || calls_response(vec![call("c1", "weather", "{}")]);
    let cases: Vec<(FailureCode, Harness)> = vec![
        (codes::LIMIT_MODEL_CALLS, harness(vec![weather()], |c| c.max_model_calls = 1)),
        // The start context fits 200 bytes; the truncation feedback of the first call does not.
        (
            codes::LIMIT_CONTEXT,
            harness(vec![with_finish(vec![call("c1", "weather", "{}")], FinishReason::Length)], |c| c.max_context_bytes = 200),
        ),
        (codes::HOST_FAILED, failing(ModelError::Host("gateway unreachable".into()))),
        (codes::MODEL_FAILED, failing(ModelError::Provider("rate limited".into()))),
        (codes::MODEL_TOOL_CALLS_NOT_COMPLETED, harness(vec![with_finish(vec![call("c1", "weather", "{}")], FinishReason::Stop)], |_| {})),
        (codes::COMPLETION_VALIDATOR_FAILED, validating("x", Arc::new(|_: &CompletionCandidate| Err("broken".into())))),
        (
            codes::COMPLETION_DECISION_INVALID,
            validating("x", Arc::new(|_: &CompletionCandidate| Ok(CompletionDecision::reject("  padded  ")))),
        ),
        // The root grants no capabilities, so a tool child asking for one cannot start.
        (
            codes::TOOL_START_FAILED,
            harness(vec![weather()], |c| c.tool_capabilities = crate::kernel::capability::CapabilitySet::from_names(&["net.fetch"]).unwrap()),
        ),
        // One step cannot both dispatch and complete: the tool child is stopped by its budget.
        (codes::TOOL_PROCESS_FAILED, harness(vec![weather()], |c| c.tool_budget = Some(Budget::finite(1, 100, 100)))),
        // A zero limit: the first model call's reservation (or the first tool call) passes it.
        (codes::BUDGET_INPUT_TOKENS, budgeted(RunBudget::new().input_tokens(0))),
        (codes::BUDGET_OUTPUT_TOKENS, budgeted(RunBudget::new().output_tokens(0))),
        (codes::BUDGET_TOTAL_TOKENS, budgeted(RunBudget::new().total_tokens(0))),
        (codes::BUDGET_COST, budgeted(RunBudget::new().cost_usd_micros(0))),
        (codes::BUDGET_TOOL_CALLS, budgeted(RunBudget::new().tool_calls(0))),
        // A zero time limit: the first call's end is past it, so its tool batch never starts.
        (codes::BUDGET_TIME, super::time_budget::timed(vec![weather()], 0, 1)),
    ];
    let mut seen = BTreeSet::new();
    for (code, h) in &cases {
        let f = failed(h);
        assert!(f.is(*code), "expected {}, got {f:?}", code.name());
        assert_eq!(f.kind, code.kind(), "{}", code.name());
        assert!(!f.message.as_str().is_empty());
        seen.insert(code.name());
    }
    let all: BTreeSet<&str> = codes::ALL.iter().map(|c| c.name()).collect();
    assert_eq!(seen, all, "every stable code is reached");
    // Each code's kind is pinned once, in `interaction::codes::tests::codes_and_kinds_are_pinned`;
    // here every code is reached by a real run and ends it with that kind.
}

#[test]
fn a_tool_start_failure_fails_the_parent_and_the_tool_never_runs() {
    let bad = FaultTool::new("bad", Fault::Panic);
    let h = harness_tools(vec![bad.clone()], vec![calls_response(vec![call("b1", "bad", "{}")])], |c| {
        c.tool_capabilities = crate::kernel::capability::CapabilitySet::from_names(&["net.fetch"]).unwrap()
    });
    let f = failed(&h);
    assert!(f.is(codes::TOOL_START_FAILED), "{f:?}");
    assert!(f.message.as_str().starts_with("tool child for call \"bad\" failed to start: "), "{f:?}");
    assert_eq!(bad.count(), 0);
    assert_eq!(h.head().processes().len(), 1, "no tool child exists");
}

#[test]
fn failure_messages_are_normalized() {
    // Whitespace only → the default text.
    let h = validating("x", Arc::new(|_: &CompletionCandidate| Err(" \n\t ".into())));
    assert_eq!(failed(&h).message.as_str(), "Interaction operation failed");
    // Surrounding whitespace is trimmed.
    let h = validating("x", Arc::new(|_: &CompletionCandidate| Err("  store offline \n".into())));
    assert_eq!(failed(&h).message.as_str(), "store offline");
    // 1 + 2 × 1500 bytes: cut at 2048 lands inside a two-byte char and backs off to 2047.
    let long = format!("a{}", "é".repeat(1500));
    let h = validating("x", Arc::new(move |_: &CompletionCandidate| Err(long.clone())));
    let message = failed(&h).message.as_str().to_owned();
    assert_eq!(MAX_DIAGNOSTIC_BYTES, 2048);
    assert_eq!(message, format!("a{}", "é".repeat(1023)));
    // A provider's text reaches the failure normalized too.
    let h = failing(ModelError::Provider(format!("  {}  ", "z".repeat(3000))));
    assert_eq!(failed(&h).message.as_str(), "z".repeat(2048));
}

/// Fails every call with a long, padded message.
struct Loud;

impl Tool for Loud {
    fn spec(&self) -> ToolDefinitionInput {
        ToolDefinitionInput {
            name: "loud".into(),
            description: "Fails loudly.".into(),
            input_schema: crate::json::parse(br#"{"type":"object"}"#).unwrap(),
        }
    }
    fn call<'a>(&'a self, _: &'a Invocation, _: ToolContext) -> BoxFuture<'a, Result<crate::chat::ToolOutput, ToolError>> {
        Box::pin(async { Err(ToolError::failed(format!("   a{}   ", "ü".repeat(3000)))) })
    }
}

#[test]
fn model_visible_error_texts_are_normalized() {
    let h = harness_tools(vec![Arc::new(Loud)], vec![calls_response(vec![call("l1", "loud", "{}")]), answer("ok")], |_| {});
    let (_r, result) = h.run("go");
    assert_eq!(result.status(), Status::Completed);
    let results = results_at(&h.model.request(1), 2);
    assert!(results[0].is_error);
    // The diagnostic inside the text is normalized to ≤ 2048 bytes (trimmed, cut inside
    // a two-byte char and backed off); the fixed prefix comes on top.
    let diagnostic = format!("a{}", "ü".repeat(1023));
    assert_eq!(diagnostic.len(), MAX_DIAGNOSTIC_BYTES - 1);
    assert_eq!(results[0].output.content, format!("error: tool \"loud\" failed: {diagnostic}"));
}

#[test]
fn a_contract_failure_terminates_with_the_contract_cause() {
    let h = validating("x", Arc::new(|_: &CompletionCandidate| Ok(CompletionDecision::default())));
    let (_r, result) = h.run("go");
    assert!(failure_of(&result).is(codes::COMPLETION_DECISION_INVALID));
    assert_eq!(result.termination.cause, Cause::ContractFailure);
    let h = harness(vec![], |_| {});
    let (_r, result) = h.run("go");
    assert_eq!(result.termination.cause, Cause::ExternalFailure, "an External failure ends with the external cause");
}
