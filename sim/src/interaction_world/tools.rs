//! The simulated tools: a spec-driven `keel::tool::Tool` with seeded latency, a concurrency
//! class, input pauses with a response schema and continuation, deferred-tool advertisement,
//! direct results and every outcome the tool contract knows. Before an uncertain failure the
//! tool records in the ledger what it really did (the host settles from that truth).

use super::context::Context;
use super::spec::{ConcurrencySpec, Outcome, ToolSpec, Trigger};
use keel::chat::{ToolOutput, ToolResult};
use keel::env::BoxFuture;
use keel::interaction::attribution::ToolInvocation;
use keel::interaction::protocol::{SettledToolResult, ToolCallSettlement};
use keel::json::{Json, ObjectBuilder};
use keel::kernel::effect::Settlement;
use keel::tool::{require_tool_input, Concurrency, Invocation, Tool, ToolContext, ToolDefinitionInput, ToolError};
use std::sync::Arc;
use std::time::Duration;

pub struct SimTool {
    pub spec: ToolSpec,
    pub cx: Arc<Context>,
}

/// The text a successful call returns: `name(arguments)` plus the answers to its pauses.
pub fn result_text(spec: &ToolSpec, id: &str, arguments: &Json, answers: &[String]) -> String {
    if let Some(super::spec::RecordedCall { result: Ok(text), .. }) = spec.recorded(id) {
        return text.clone();
    }
    let name = &spec.name;
    let mut text = format!("{name}({})", arguments.to_canonical_string());
    if !answers.is_empty() {
        text.push_str(&format!(" answers={}", answers.join("|")));
    }
    text
}

/// The settlement a successful call of `spec` produces (what the host settles from truth).
pub fn success_settlement(spec: &ToolSpec, id: &str, arguments: &Json, answers: &[String]) -> Option<Settlement> {
    let result = ToolResult::ok(id, &spec.name, ToolOutput::text(result_text(spec, id, arguments, answers)));
    let settled = SettledToolResult { result, direct: spec.direct, advertised_tool_names: spec.advertises.clone() };
    ToolCallSettlement::Result(settled).to_settlement().ok()
}

fn answers_of(cx: &ToolContext) -> Vec<String> {
    let Some(c) = cx.continuation() else { return Vec::new() };
    let mut answers: Vec<String> = c
        .state()
        .value()
        .get("answers")
        .and_then(Json::as_array)
        .map(|a| a.iter().filter_map(Json::as_str).map(str::to_owned).collect())
        .unwrap_or_default();
    answers.push(c.response().value().as_str().unwrap_or_default().to_owned());
    answers
}

impl SimTool {
    async fn run(&self, invocation: &Invocation, cx: ToolContext) -> Result<ToolOutput, ToolError> {
        let effect = ToolInvocation::from_context(&cx).map(|i| i.effect_id().clone());
        let host = effect.as_ref().is_some_and(|e| self.cx.ledger.is_host_performing(e));
        let (lo, hi) = self.spec.latency_ms;
        let ms = lo + self.cx.env.rng.next_u64() % (hi - lo + 1);
        let answers = answers_of(&cx);
        let id = invocation.id().to_owned();
        self.cx.trace(format!("tool {} call {id} start (pause {})", self.spec.name, answers.len()));
        if !host && cx.continuation().is_none() {
            self.cx.hook(Trigger::ToolCall(id.clone())).await;
        }
        let args = invocation.arguments_json().clone();
        let last_attempt = answers.len() >= self.spec.pauses as usize;
        let outcome = self.spec.outcome_of(&id);
        if last_attempt && matches!(outcome, Outcome::Text) || outcome.is_unknown() {
            // The work is decided now; if the call is cut off or its report lost, this is the
            // truth the host may settle from.
            if let (true, Some(e), Some(s)) = (last_attempt, &effect, success_settlement(&self.spec, &id, &args, &answers)) {
                self.cx.ledger.record_truth(e, s);
            }
        }
        self.cx.env.clock.sleep(Duration::from_millis(ms)).await;
        if !last_attempt {
            self.cx.fired("tool.input_request");
            let prompt = Json::str(format!("call {id} pause {}", answers.len() + 1)).to_canonical_string();
            let answered: Vec<Json> = answers.iter().map(|a| Json::str(a.clone())).collect();
            let state = ObjectBuilder::new().value("answers", Json::Array(answered)).build().to_canonical_string();
            return Err(require_tool_input(prompt.as_bytes(), br#"{"type":"string"}"#, state.as_bytes()));
        }
        self.cx.fired(&format!("tool.{}", outcome.as_str()));
        self.cx.trace(format!("tool {} call {id} end {}", self.spec.name, outcome.as_str()));
        match outcome {
            Outcome::Text => {
                if !self.spec.advertises.is_empty() {
                    let names: Vec<&str> = self.spec.advertises.iter().map(String::as_str).collect();
                    cx.advertise(&names)?;
                    self.cx.fired("tool.advertise");
                }
                if self.spec.direct {
                    self.cx.fired("tool.direct");
                }
                Ok(ToolOutput::text(result_text(&self.spec, &id, &args, &answers)))
            }
            Outcome::Error => Err(ToolError::failed(match self.spec.recorded(&id) {
                Some(super::spec::RecordedCall { result: Err(message), .. }) => message.clone(),
                _ => format!("{} refused {}", self.spec.name, args.to_canonical_string()),
            })),
            // Silent on purpose: a simulated fault, not a bug (see `crate::panics`).
            Outcome::Panic => crate::panics::simulated_panic(format!("simulated panic in tool {}", self.spec.name)),
            Outcome::HostFailure => Err(ToolError::host_failure("simulated host failure")),
            Outcome::Cancel => Err(ToolError::Canceled),
            Outcome::Deadline => Err(ToolError::DeadlineExceeded),
        }
    }
}

impl Tool for SimTool {
    fn spec(&self) -> ToolDefinitionInput {
        let schema: &[u8] = if self.spec.strict_arguments {
            br#"{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}"#
        } else {
            br#"{"type":"object"}"#
        };
        ToolDefinitionInput {
            name: self.spec.name.clone(),
            description: format!("The simulated {} tool.", self.spec.name),
            // A constant, valid schema text.
            input_schema: keel::json::parse(schema).unwrap_or_else(|_| Json::object()),
        }
    }

    fn call<'a>(&'a self, invocation: &'a Invocation, cx: ToolContext) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(self.run(invocation, cx))
    }

    fn concurrency(&self, invocation: &Invocation) -> Option<Concurrency> {
        match &self.spec.concurrency {
            ConcurrencySpec::Exclusive => None,
            ConcurrencySpec::Shared => Some(Concurrency::shared()),
            ConcurrencySpec::Keyed(arg) => Some(Concurrency::keyed(
                invocation.arguments_json().get(arg).and_then(Json::as_str).unwrap_or_default(),
            )),
        }
    }

    fn returns_direct_result(&self) -> bool {
        self.spec.direct
    }
}
