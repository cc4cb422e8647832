//! Tracing of runs: `tracing` spans and events named after OpenTelemetry's GenAI semantic
//! conventions, so any `tracing` subscriber (a log formatter, an OpenTelemetry exporter such
//! as the `keel-otel` crate) shows what a run did.
//!
//! The spans are driven from the same points that produce [`RunEvent`](super::RunEvent)s:
//! the projection of acknowledged heads (the run, tool calls, input waits, commits, Unknowns
//! and their resolution, the run's end) and the model dispatcher (one span per model-call
//! attempt). Tracing only observes: nothing here is read back by the runtime, so a run does
//! exactly the same with or without a subscriber. Without one every span is disabled and no
//! attribute is computed (`tracing` evaluates field values only for enabled callsites).
//!
//! | span (`otel.name`) | `gen_ai.operation.name` | opened | closed |
//! | --- | --- | --- | --- |
//! | `invoke_agent {agent}` | `invoke_agent` | a run is started or resumed (restored) here | the run ends or its writer stops |
//! | `chat {model}` | `chat` | a model-call attempt begins (live, repeated, or re-issued after a restore) | the attempt returns |
//! | `execute_tool {tool}` | `execute_tool` | a tool call is dispatched (durably) | the call settles |
//! | `execute_tool {delegate}` | `execute_tool` | a delegate's run is started (durably) | the delegate run ends or leaves the tree |
//! | `invoke_agent {delegate agent}` | `invoke_agent` | with the span above, as its child | with it |
//! | `keel.input_wait` | | a tool asks the host for input | the wait is answered or gone |
//! | `keel.unknown` | | a call's outcome is Unknown | it settles (by policy or `Run::resolve`) |
//!
//! A delegate is an agent the model calls as a tool, so its run is an `invoke_agent` span under
//! the parent's `execute_tool` span of that call, and the delegate's own model calls, tool calls
//! and Unknowns nest under it, at any depth. Everything stays in one trace: the delegate's run
//! is a Process of the parent run's tree. A run restored with a delegate in flight opens the
//! delegate's spans again under the restored run span (`keel.run.restored` on the run), as it
//! does for the tool calls in flight: the spans of the crashed writer ended with it.
//!
//! Prompt and completion text (`gen_ai.input.messages`, `gen_ai.output.messages`,
//! `gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`) are recorded only when the agent
//! opts in with [`AgentBuilder::trace_content`](super::AgentBuilder::trace_content).

use super::events::UnknownKind;
use super::input::InputRequest;
use super::recovery::UnknownEffect;
use super::result::RunResult;
use crate::chat::{Message, Part, ToolCall, Usage};
use crate::interaction::model::ModelIdentity;
use crate::interaction::protocol::{ModelCallEffect, ModelResult, ToolCallEffect};
use crate::interaction::wire::Wire;
use crate::json::Payload;
use crate::kernel::dispatcher::EffectRequest;
use crate::kernel::effect::Settlement;
use crate::kernel::ids::{EffectId, ProcessId, WaitId};
use crate::kernel::process::Process;
use crate::kernel::snapshot::TreeSnapshot;
use std::collections::BTreeMap;
use tracing::field::Empty;
use tracing::Span;

/// The target of every span and event (filter with `keel=info`, `keel=debug`).
pub const TRACE_TARGET: &str = "keel";

/// A span of one GenAI operation (`$op`, also the span's name): the fields every such span has,
/// then the caller's own. A `tracing` span lists its fields where it is created; this macro is
/// that list, once, for the run's, a delegate's, a tool call's and a model call's spans.
macro_rules! gen_ai_span {
    (parent: $parent:expr, $op:literal, subject: $subject:expr, kind: $kind:literal, root: $root:expr $(, $($own:tt)*)?) => {
        tracing::info_span!(
            target: TRACE_TARGET,
            parent: $parent,
            $op,
            otel.name = %format_args!("{} {}", $op, $subject),
            otel.kind = $kind,
            otel.status_code = Empty,
            otel.status_description = Empty,
            gen_ai.operation.name = $op,
            gen_ai.conversation.id = %$root,
            error.type = Empty,
            $($($own)*)?
        )
    };
}

/// An `invoke_agent` span (the run's, or a delegate's run): the fields both have, then the
/// caller's own.
macro_rules! invoke_agent_span {
    (parent: $parent:expr, agent: $agent:expr, root: $root:expr $(, $($own:tt)*)?) => {
        gen_ai_span!(
            parent: $parent,
            "invoke_agent",
            subject: $agent,
            kind: "internal",
            root: $root,
            gen_ai.agent.name = %$agent,
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            keel.run.status = Empty,
            $($($own)*)?
        )
    };
}

/// An `execute_tool` span (a tool's call, or a delegate's called as a tool): the fields both
/// have, then the caller's own.
macro_rules! execute_tool_span {
    (parent: $parent:expr, tool: $tool:expr, call_id: $call_id:expr, root: $root:expr, process: $process:expr $(, $($own:tt)*)?) => {
        gen_ai_span!(
            parent: $parent,
            "execute_tool",
            subject: $tool,
            kind: "internal",
            root: $root,
            gen_ai.tool.name = %$tool,
            gen_ai.tool.call.id = %$call_id,
            gen_ai.tool.type = "function",
            gen_ai.tool.call.arguments = Empty,
            gen_ai.tool.call.result = Empty,
            keel.process.id = %$process,
            $($($own)*)?
        )
    };
}

/// What an agent's spans say about it (set at build time, never part of its configuration
/// digest: tracing changes no behavior).
#[derive(Clone, Debug, Default)]
pub(crate) struct TraceConfig {
    pub(crate) agent: String,
    pub(crate) provider: String,
    pub(crate) model: String,
    /// Record prompt, completion, tool argument and tool result text.
    pub(crate) content: bool,
}

/// The open spans of one run in this process.
#[derive(Default)]
pub(crate) struct RunTrace {
    config: TraceConfig,
    run: Option<Span>,
    /// Tool calls by (tool-child Process, model call id).
    tools: BTreeMap<(ProcessId, String), Span>,
    waits: BTreeMap<WaitId, Span>,
    unknowns: BTreeMap<EffectId, Span>,
    /// Delegate runs in the tree, by their Process.
    delegates: BTreeMap<ProcessId, DelegateSpans>,
}

/// The spans of one delegate run: the parent's call of it, and its own run under that call.
struct DelegateSpans {
    agent: Span,
    call: Span,
}

impl RunTrace {
    /// The run span of `root`: a fresh start, or a run restored from the store by this process.
    pub(crate) fn open(config: TraceConfig, root: &ProcessId, restored: bool) -> RunTrace {
        let c = &config;
        let span = invoke_agent_span!(
            parent: None,
            agent: c.agent,
            root: root,
            gen_ai.provider.name = %c.provider,
            gen_ai.request.model = %c.model,
            keel.run.restored = restored,
        );
        if restored {
            tracing::event!(target: TRACE_TARGET, parent: &span, tracing::Level::INFO, keel.run.id = %root, "run restored");
        }
        // A disabled run span (no subscriber, or filtered out) turns every later hook of the
        // run into an early return: nothing is kept for it.
        RunTrace { config, run: (!span.is_disabled()).then_some(span), ..RunTrace::default() }
    }

    fn run_span(&self) -> Span {
        self.run.clone().unwrap_or_else(Span::none)
    }

    /// Whether the run is traced (a subscriber takes its spans).
    pub(crate) fn is_enabled(&self) -> bool {
        self.run.is_some()
    }

    /// The span of the agent run `process` belongs to: its delegate run's, or the run's.
    fn agent_span(&self, process: Option<&ProcessId>) -> Span {
        process.and_then(|p| self.delegates.get(p)).map(|d| d.agent.clone()).unwrap_or_else(|| self.run_span())
    }

    /// The parent of a model-call attempt of `effect` by `process`: the span of its Unknown
    /// while the call is re-issued to settle one, else the span of the agent run making it.
    pub(crate) fn model_parent(&self, effect: &EffectId, process: &ProcessId) -> Span {
        self.unknowns.get(effect).cloned().unwrap_or_else(|| self.agent_span(Some(process)))
    }

    /// Whether `process` is a delegate run whose spans are open.
    pub(crate) fn has_delegate(&self, process: &ProcessId) -> bool {
        self.delegates.contains_key(process)
    }

    /// A delegate run is in the tree: the parent's `execute_tool` span of `call` (the model's
    /// call of the delegate, when the parent's state still names it), and the delegate's
    /// `invoke_agent` span under it.
    pub(crate) fn delegate_started(&mut self, delegate: &Process, call: Option<&ToolCall>, model: Option<&ModelIdentity>) {
        if self.run.is_none() {
            return;
        }
        let parent = self.agent_span(delegate.relation.parent_id.as_ref());
        let agent = delegate.deployment_ref.name().as_str();
        let tool = call.map_or(agent, |c| c.name.as_str());
        let call_span = execute_tool_span!(
            parent: &parent,
            tool: tool,
            call_id: call.map_or("", |c| c.id.as_str()),
            root: delegate.relation.root_id,
            process: delegate.id,
            keel.delegate.agent = %agent,
        );
        if call_span.is_disabled() {
            return;
        }
        if self.config.content {
            if let Some(call) = call {
                call_span.record("gen_ai.tool.call.arguments", call.arguments.as_str());
            }
        }
        let agent_span = invoke_agent_span!(
            parent: &call_span,
            agent: agent,
            root: delegate.relation.root_id,
            gen_ai.provider.name = Empty,
            gen_ai.request.model = Empty,
            keel.process.id = %delegate.id,
        );
        if let Some(model) = model {
            agent_span.record("gen_ai.provider.name", model.provider());
            agent_span.record("gen_ai.request.model", model.model());
        }
        self.delegates.insert(delegate.id.clone(), DelegateSpans { agent: agent_span, call: call_span });
    }

    /// A delegate run ended: both of its spans close with its outcome.
    pub(crate) fn delegate_finished(&mut self, process: &ProcessId, result: &RunResult) {
        let Some(spans) = self.delegates.remove(process) else { return };
        let usage = result.usage();
        spans.agent.record("keel.run.status", result.status().as_str());
        spans.agent.record("gen_ai.usage.input_tokens", otel_int(usage.input_tokens));
        spans.agent.record("gen_ai.usage.output_tokens", otel_int(usage.output_tokens));
        if result.is_completed() {
            if self.config.content {
                spans.call.record("gen_ai.tool.call.result", result.text().as_str());
            }
        } else {
            for span in [&spans.agent, &spans.call] {
                span.record("error.type", result.code().as_str());
                span.record("otel.status_code", "ERROR");
                span.record("otel.status_description", result.reason());
            }
        }
    }

    /// The delegate runs still in the latest head; the spans of the others close (a delegate
    /// that left the tree without this writer seeing it end).
    pub(crate) fn delegates_open(&mut self, in_head: impl Fn(&ProcessId) -> bool) {
        self.delegates.retain(|process, _| in_head(process));
    }

    /// One acknowledged head (a commit of this run).
    pub(crate) fn committed(&self, head: &TreeSnapshot) {
        let Some(run) = &self.run else { return };
        tracing::event!(
            target: TRACE_TARGET,
            parent: run,
            tracing::Level::DEBUG,
            keel.commit.digest = %head.digest(),
            keel.commit.incarnation = %head.incarnation,
            keel.commit.processes = otel_int(head.processes().len() as u64),
            "commit"
        );
    }

    /// A tool call of the agent run `caller` (the tool child's parent) was dispatched.
    pub(crate) fn tool_started(&mut self, process: &ProcessId, caller: Option<&ProcessId>, tool: &str, call_id: &str, payload: &Payload, root: &ProcessId) {
        if self.run.is_none() {
            return;
        }
        let parent = self.agent_span(caller);
        let span = execute_tool_span!(parent: &parent, tool: tool, call_id: call_id, root: root, process: process);
        if span.is_disabled() {
            return;
        }
        if self.config.content {
            if let Ok(effect) = ToolCallEffect::from_payload(payload) {
                span.record("gen_ai.tool.call.arguments", effect.input.call.arguments.as_str());
            }
        }
        self.tools.insert((process.clone(), call_id.to_owned()), span);
    }

    /// A tool call settled: its span ends.
    pub(crate) fn tool_settled(&mut self, process: &ProcessId, call_id: &str, is_error: bool, text: &str) {
        let Some(span) = self.tools.remove(&(process.clone(), call_id.to_owned())) else { return };
        if is_error {
            span.record("error.type", "tool_error");
            span.record("otel.status_code", "ERROR");
        }
        if self.config.content {
            span.record("gen_ai.tool.call.result", text);
        }
    }

    /// A tool asks the host for input: a wait span under its tool call's span.
    pub(crate) fn input_requested(&mut self, request: &InputRequest) {
        let Some(run) = &self.run else { return };
        let parent = self.tools.iter().find(|((p, _), _)| p == &request.process).map(|(_, s)| s.clone()).unwrap_or_else(|| run.clone());
        let span = tracing::info_span!(
            target: TRACE_TARGET,
            parent: &parent,
            "keel.input_wait",
            keel.wait.id = %request.wait,
            keel.process.id = %request.process,
        );
        if span.is_disabled() {
            return;
        }
        self.waits.insert(request.wait.clone(), span);
    }

    /// The waits still open in the latest head; the others were answered or ended.
    pub(crate) fn inputs_open(&mut self, open: &[InputRequest]) {
        self.waits.retain(|wait, _| open.iter().any(|i| &i.wait == wait));
    }

    /// A call's outcome is Unknown: a span that lasts until it settles.
    pub(crate) fn unknown(&mut self, unknown: &UnknownEffect) {
        if self.run.is_none() {
            return;
        }
        // A model call's Process is the agent run making it; a tool call's is its tool child,
        // whose parent is.
        let owner = if self.delegates.contains_key(&unknown.process) { Some(&unknown.process) } else { unknown.relation.parent_id.as_ref() };
        let parent = self.agent_span(owner);
        let (kind, tool) = match &unknown.kind {
            UnknownKind::Model => ("model", ""),
            UnknownKind::Tool(name) => ("tool", name.as_str()),
            UnknownKind::Other => ("other", ""),
        };
        let span = tracing::info_span!(
            target: TRACE_TARGET,
            parent: &parent,
            "keel.unknown",
            otel.status_code = Empty,
            keel.effect.id = %unknown.effect,
            keel.process.id = %unknown.process,
            keel.unknown.kind = kind,
            keel.unknown.policy = unknown.policy.as_str(),
            keel.unknown.resolution = Empty,
            gen_ai.tool.name = tool,
        );
        if span.is_disabled() {
            return;
        }
        tracing::event!(target: TRACE_TARGET, parent: &span, tracing::Level::WARN, keel.effect.id = %unknown.effect, "call outcome unknown");
        self.unknowns.insert(unknown.effect.clone(), span);
    }

    /// An Unknown waits for the host (`Run::resolve`).
    pub(crate) fn resolution_needed(&self, effect: &EffectId, reason: &str) {
        let span = self.unknowns.get(effect).cloned().unwrap_or_else(|| self.run_span());
        tracing::event!(target: TRACE_TARGET, parent: &span, tracing::Level::WARN, keel.effect.id = %effect, keel.reason = reason, "resolution needed");
    }

    /// An Effect settled: an Unknown of it is resolved.
    pub(crate) fn settled(&mut self, effect: &EffectId, ok: bool) {
        if let Some(span) = self.unknowns.remove(effect) {
            span.record("keel.unknown.resolution", if ok { "succeeded" } else { "failed" });
        }
    }

    /// The run ended: every open span of it closes.
    pub(crate) fn finished(&mut self, result: &RunResult) {
        if let Some(run) = self.run.take() {
            let usage = result.usage();
            run.record("keel.run.status", result.status().as_str());
            run.record("gen_ai.usage.input_tokens", otel_int(usage.input_tokens));
            run.record("gen_ai.usage.output_tokens", otel_int(usage.output_tokens));
            if !result.is_completed() {
                run.record("error.type", result.code().as_str());
                run.record("otel.status_code", "ERROR");
                run.record("otel.status_description", result.reason());
            }
        }
        self.close_children();
    }

    /// The run's writer stopped (a store failure, another writer, a crash of the host).
    pub(crate) fn stopped(&mut self, reason: &str) {
        if let Some(run) = self.run.take() {
            tracing::event!(target: TRACE_TARGET, parent: &run, tracing::Level::WARN, keel.reason = reason, "run stopped");
            run.record("keel.run.status", "stopped");
            run.record("error.type", "stopped");
            run.record("otel.status_code", "ERROR");
            run.record("otel.status_description", reason);
        }
        self.close_children();
    }

    fn close_children(&mut self) {
        self.waits.clear();
        self.tools.clear();
        self.unknowns.clear();
        self.delegates.clear();
    }
}

/// The span of one model-call attempt under `parent`.
pub(crate) fn model_span(config: &TraceConfig, parent: &Span, request: &EffectRequest, attempt: u32) -> Span {
    let span = gen_ai_span!(
        parent: parent,
        "chat",
        subject: config.model,
        kind: "client",
        root: request.relation.root_id,
        gen_ai.provider.name = %config.provider,
        gen_ai.request.model = %config.model,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.response.finish_reasons = Empty,
        gen_ai.input.messages = Empty,
        gen_ai.output.messages = Empty,
        keel.effect.id = %request.effect_id,
        keel.process.id = %request.process_id,
        keel.model.call = Empty,
        keel.model.attempt = i64::from(attempt),
        // A request rebuilt from a stored head (no physical attempt of this writer) is a call
        // re-issued after a restore.
        keel.model.reissued = request.attempt_id.is_none(),
    );
    if !span.is_disabled() {
        if let Ok(effect) = ModelCallEffect::from_payload(&request.payload) {
            span.record("keel.model.call", i64::from(effect.model_call_sequence));
            if config.content {
                if let Ok(context) = effect.request(&request.segments) {
                    span.record("gen_ai.input.messages", messages_json(&context.messages).as_str());
                }
            }
        }
    }
    span
}

/// Records an attempt's outcome on its span: usage and finish reason, or the error.
pub(crate) fn model_settled(config: &TraceConfig, span: &Span, outcome: Result<&Settlement, &str>, transient: bool) {
    if span.is_disabled() {
        return;
    }
    let settlement = match outcome {
        Ok(settlement) => settlement,
        Err(error) => {
            span.record("error.type", "unknown");
            span.record("otel.status_code", "ERROR");
            span.record("otel.status_description", error);
            return;
        }
    };
    match ModelResult::from_payload(&settlement.payload) {
        Ok(ModelResult::Response { response, .. }) => {
            let Usage { input_tokens, output_tokens, .. } = response.usage;
            span.record("gen_ai.usage.input_tokens", otel_int(input_tokens));
            span.record("gen_ai.usage.output_tokens", otel_int(output_tokens));
            if let Some(reason) = response.finish_reason {
                // One response, one reason: recorded as a string (tracing fields hold no arrays).
                span.record("gen_ai.response.finish_reasons", reason.as_str());
            }
            if config.content {
                if let Some(message) = &response.message {
                    span.record("gen_ai.output.messages", messages_json(std::slice::from_ref(message)).as_str());
                }
            }
        }
        Ok(ModelResult::Error(error)) => {
            span.record("error.type", if transient { "transient" } else { "provider_error" });
            span.record("otel.status_code", "ERROR");
            span.record("otel.status_description", error.as_str());
        }
        Ok(ModelResult::HostError(error)) => {
            span.record("error.type", "host_error");
            span.record("otel.status_code", "ERROR");
            span.record("otel.status_description", error.as_str());
        }
        Ok(ModelResult::OutOfTime { .. }) => {
            span.record("error.type", "budget_time");
            span.record("otel.status_code", "ERROR");
            span.record("otel.status_description", "the run's time budget passed before the call");
        }
        Err(_) => {}
    }
}

/// Counts as signed integers: OpenTelemetry's integer attributes are i64 (an unsigned field
/// would reach an exporter as text).
fn otel_int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Messages in the GenAI conventions' shape: `[{"role", "parts": [{"type", ...}]}]`.
fn messages_json(messages: &[Message]) -> String {
    use serde_json::{json, Value};
    let list: Vec<Value> = messages
        .iter()
        .map(|m| {
            let parts: Vec<Value> = m
                .parts
                .iter()
                .filter_map(|p| match p {
                    Part::Text(text) => Some(json!({"type": "text", "content": text})),
                    Part::ToolCall(call) => Some(json!({"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.arguments})),
                    Part::ToolResult(result) => {
                        Some(json!({"type": "tool_call_response", "id": result.id, "response": result.output.content}))
                    }
                    Part::Reasoning(_) => None,
                })
                .collect();
            json!({"role": m.role.as_str(), "parts": parts})
        })
        .collect();
    Value::Array(list).to_string()
}
