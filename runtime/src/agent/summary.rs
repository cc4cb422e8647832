//! Summarizing a long conversation through a model call: [`Summarize`], the summary step of a
//! [`ContextPolicy`](super::ContextPolicy) and the carry of a summarizing
//! [`ContinueAsNew`](super::ContinueAsNew).
//!
//! The summary is made inside the model call's Effect, by the model dispatcher's context
//! reducer, right before the call: older messages are sent to a model as a transcript, and
//! its answer replaces them. The shortened context (system prefix, task, summary, recent
//! messages) travels back in the call's committed settlement and replaces the stored
//! context, so the summary is made once and every later call starts from it. A crash while
//! either call is in flight leaves the whole model call Unknown (the agent's model Unknown
//! policy applies, re-issuing both by default); nothing of an unsettled summary is ever
//! kept. The summary's usage is added to the call's usage: the run's totals and budgets count it.

use crate::chat::{Message, Part, Request, Role, Usage};
use crate::interaction::model::{call_model_once, ModelCallContext, ModelClient, ModelError, ModelMode, ModelStreamer};
use crate::json::{Json, ObjectBuilder};
use std::sync::Arc;

/// Bytes per token in the token forms of the thresholds: an estimate (the same one budgets
/// reserve with), since counting tokens exactly needs each provider's tokenizer.
pub const BYTES_PER_TOKEN: u64 = 4;

/// The summary instructions when none are set.
pub const DEFAULT_SUMMARY_INSTRUCTIONS: &str = "You summarize the earlier part of a conversation between a user, an \
assistant and its tools, so that the assistant can continue the task from your summary alone. Keep every fact, \
result, decision, name, number and open question that may matter for the task, and the state the work is in; \
drop greetings and repetition. Answer with the summary only.";

/// The first line of a summary message in the context (a later summary covers it again).
pub(crate) const SUMMARY_HEADING: &str = "[Summary of the earlier conversation]";

/// The message a summarizing continue-as-new puts between what its successor summarizes
/// (before it) and what it keeps verbatim (after it); the successor's first model call
/// replaces both by the summary.
pub(crate) const CARRIED_MARKER: &str = "[The conversation above was carried over from the previous run and is summarized at the next model call.]";

/// When a conversation is summarized, and how: a step of [`ContextPolicy`](super::ContextPolicy)
/// ([`ContextPolicy::summarize`](super::ContextPolicy::summarize)).
///
/// Once the context passes the threshold, the messages before the newest
/// [`keep_recent_bytes`](Self::keep_recent_bytes) (whole exchanges: a tool result stays with
/// its call) are replaced by one summary message written by a model: the agent's own model, or
/// [`model`](Self::model). The system messages and the task (the first user message) stay.
/// Sizes are the messages' canonical JSON bytes; the token forms count
/// [`BYTES_PER_TOKEN`] bytes per token.
///
/// ```
/// use keel::prelude::*;
/// // Past ~50k tokens, summarize all but the newest ~10k tokens, with a cheaper model.
/// let policy = ContextPolicy::summarize(
///     Summarize::after_tokens(50_000)
///         .keep_recent_tokens(10_000)
///         .model(ScriptedModel::new().then_text("The user wants a hotel in Lyon."))
///         .instructions("Summarize what was decided and what is left to do."),
/// );
/// # let _ = policy;
/// ```
#[derive(Clone)]
pub struct Summarize {
    after_bytes: u64,
    keep_recent_bytes: Option<u64>,
    model: Option<SummaryModel>,
    instructions: Option<String>,
}

#[derive(Clone)]
struct SummaryModel {
    mode: ModelMode,
    identity: String,
}

impl Summarize {
    /// Summarizes once the context passes `bytes` (canonical JSON).
    pub fn after_bytes(bytes: u64) -> Summarize {
        Summarize { after_bytes: bytes, keep_recent_bytes: None, model: None, instructions: None }
    }

    /// Summarizes once the context passes about `tokens` tokens ([`BYTES_PER_TOKEN`] bytes each).
    pub fn after_tokens(tokens: u64) -> Summarize {
        Summarize::after_bytes(tokens.saturating_mul(BYTES_PER_TOKEN))
    }

    /// Keeps the newest exchanges verbatim up to `bytes` (the newest one always); the rest is
    /// summarized. Default: a quarter of the threshold. Must be below the threshold.
    pub fn keep_recent_bytes(mut self, bytes: u64) -> Summarize {
        self.keep_recent_bytes = Some(bytes);
        self
    }

    /// [`keep_recent_bytes`](Self::keep_recent_bytes) in tokens ([`BYTES_PER_TOKEN`] bytes each).
    pub fn keep_recent_tokens(self, tokens: u64) -> Summarize {
        self.keep_recent_bytes(tokens.saturating_mul(BYTES_PER_TOKEN))
    }

    /// The model that writes summaries (default: the agent's own). Its identity is part of the
    /// configuration digest. Its usage is counted with the call it shortens, priced at that
    /// call's model's price.
    pub fn model(mut self, client: impl ModelClient) -> Summarize {
        let identity = client.identity().to_string();
        self.model = Some(SummaryModel { mode: ModelMode::Complete(Arc::new(client)), identity });
        self
    }

    /// [`model`](Self::model), answering with a stream (read to its end; its deltas are not
    /// reported as the run's).
    pub fn model_stream(mut self, streamer: impl ModelStreamer) -> Summarize {
        let identity = streamer.identity().to_string();
        self.model = Some(SummaryModel { mode: ModelMode::Stream(Arc::new(streamer)), identity });
        self
    }

    /// The summarizing model's instructions (its system message); default
    /// [`DEFAULT_SUMMARY_INSTRUCTIONS`].
    pub fn instructions(mut self, text: impl Into<String>) -> Summarize {
        self.instructions = Some(text.into());
        self
    }

    fn recent_bytes(&self) -> u64 {
        self.keep_recent_bytes.unwrap_or(self.after_bytes / 4)
    }

    /// Why these options cannot work, if they cannot.
    pub(crate) fn problem(&self) -> Option<String> {
        if self.after_bytes == 0 {
            return Some("Summarize::after_bytes(0) would summarize before every call".into());
        }
        if self.recent_bytes() >= self.after_bytes {
            return Some(format!(
                "keep_recent_bytes({}) is not below the threshold ({} bytes): a summary could never shorten the context below it",
                self.recent_bytes(),
                self.after_bytes
            ));
        }
        if self.instructions.as_deref().is_some_and(|t| t.trim().is_empty()) {
            return Some("the summary instructions are empty".into());
        }
        None
    }

    /// The canonical form recorded in the configuration digest.
    pub(crate) fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .field("after_bytes", &self.after_bytes)
            .field("keep_recent_bytes", &self.recent_bytes())
            .opt_field("model", self.model.as_ref().map(|m| &m.identity))
            .opt_field("mode", self.model.as_ref().map(|m| m.mode.name()))
            .opt_field("instructions", self.instructions.as_ref())
            .build()
    }

    /// The summarizer these options make, calling `agent_model` unless another model is set.
    pub(crate) fn summarizer(&self, agent_model: &ModelMode) -> Summarizer {
        Summarizer {
            after_bytes: Some(self.after_bytes),
            keep_recent_bytes: self.recent_bytes(),
            mode: self.model.as_ref().map_or_else(|| agent_model.clone(), |m| m.mode.clone()),
            instructions: self.instructions.clone().unwrap_or_else(|| DEFAULT_SUMMARY_INSTRUCTIONS.to_owned()),
        }
    }
}

impl std::fmt::Debug for Summarize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Summarize")
            .field("after_bytes", &self.after_bytes)
            .field("keep_recent_bytes", &self.recent_bytes())
            .field("model", &self.model.as_ref().map(|m| &m.identity))
            .field("instructions", &self.instructions)
            .finish()
    }
}

impl PartialEq for Summarize {
    fn eq(&self, other: &Summarize) -> bool {
        self.to_json() == other.to_json()
    }
}

/// The summary step as the reducer runs it.
#[derive(Clone)]
pub(crate) struct Summarizer {
    /// `None`: only a carried conversation (the marker) is summarized.
    after_bytes: Option<u64>,
    keep_recent_bytes: u64,
    mode: ModelMode,
    instructions: String,
}

/// What to summarize in a context: `messages[older]` is replaced by one summary message, and
/// the message at `drop` (the carry marker), if any, is removed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    pub(crate) older: std::ops::Range<usize>,
    pub(crate) drop: Option<usize>,
}

impl Summarizer {
    /// The summarizer of a summarizing continue-as-new whose agent has no summary step: it
    /// acts on a carried conversation only.
    pub(crate) fn carry_only(agent_model: &ModelMode) -> Summarizer {
        Summarizer { after_bytes: None, keep_recent_bytes: 0, mode: agent_model.clone(), instructions: DEFAULT_SUMMARY_INSTRUCTIONS.to_owned() }
    }

    /// What to summarize in `messages` now, if anything: a pure function of the messages, so
    /// a re-issued call plans the same. A carried conversation (the marker) is summarized up to
    /// the marker whatever its size; otherwise past the threshold, all but the newest
    /// exchanges, unless the only older message is the previous summary (nothing new to add).
    pub(crate) fn plan(&self, messages: &[Message]) -> Option<Plan> {
        let pinned = pinned(messages);
        if let Some(marker) = messages.iter().skip(pinned).position(is_marker).map(|i| i + pinned) {
            return Some(Plan { older: pinned..marker, drop: Some(marker) });
        }
        let threshold = self.after_bytes?;
        if bytes(messages) <= threshold {
            return None;
        }
        let start = recent_start(messages, pinned, self.keep_recent_bytes);
        let older = pinned..start;
        let only_summary = older.len() == 1 && is_summary(&messages[older.start]);
        (!older.is_empty() && !only_summary).then_some(Plan { older, drop: None })
    }

    /// `messages` with the plan applied: the summary call made, its message in place of the
    /// older messages. The summary's usage comes back with it.
    pub(crate) async fn apply(
        &self,
        cx: &ModelCallContext,
        messages: Vec<Message>,
    ) -> Result<(Vec<Message>, Usage), ModelError> {
        let Some(plan) = self.plan(&messages) else { return Ok((messages, Usage::default())) };
        let (summary, usage) = if plan.older.is_empty() {
            (None, Usage::default())
        } else {
            let request = Request {
                messages: vec![Message::system(self.instructions.clone()), Message::user(transcript(&messages, &plan.older))],
                ..Request::default()
            };
            // The typed answer's schema is for the agent's answer, not for the summary.
            let cx = ModelCallContext { output_schema: None, ..cx.clone() };
            let response = call_model_once(&self.mode, &cx, request).await.map_err(|e| match e {
                ModelError::Provider(t) => ModelError::Provider(format!("summarizing call: {t}")),
                ModelError::Transient(t) => ModelError::Transient(format!("summarizing call: {t}")),
                ModelError::Host(t) => ModelError::Host(format!("summarizing call: {t}")),
                ModelError::Unknown(t) => ModelError::Unknown(format!("summarizing call: {t}")),
            })?;
            let text = response.message.as_ref().map(Message::text).unwrap_or_default();
            if text.trim().is_empty() {
                return Err(ModelError::Provider("summarizing call: the model answered no summary text".into()));
            }
            (Some(Message::user(format!("{SUMMARY_HEADING}\n{}", text.trim()))), response.usage)
        };
        Ok((splice(messages, &plan, summary), usage))
    }
}

/// `messages` with `plan.older` replaced by `summary` (or removed) and the marker dropped.
pub(crate) fn splice(messages: Vec<Message>, plan: &Plan, summary: Option<Message>) -> Vec<Message> {
    let mut out = Vec::with_capacity(messages.len());
    for (index, message) in messages.into_iter().enumerate() {
        if index == plan.older.start {
            out.extend(summary.clone());
        }
        if plan.older.contains(&index) || plan.drop == Some(index) {
            continue;
        }
        out.push(message);
    }
    out
}

fn bytes(messages: &[Message]) -> u64 {
    super::continue_as_new::context_bytes(messages)
}

/// The system prefix and the task (the first user message after it): never summarized.
pub(crate) fn pinned(messages: &[Message]) -> usize {
    let prefix = messages.iter().take_while(|m| m.role == Role::System).count();
    prefix + usize::from(messages.get(prefix).is_some_and(|m| m.role == Role::User && !is_marker(m)))
}

/// Where the kept recent messages start: the newest whole exchanges (a message and the tool
/// results after it) within `budget` bytes, the newest one always.
fn recent_start(messages: &[Message], pinned: usize, budget: u64) -> usize {
    let mut start = messages.len();
    let mut used = 0u64;
    let mut unit_end = messages.len();
    for index in (pinned..messages.len()).rev() {
        // A tool-result message belongs to the exchange of the message before it.
        if messages[index].role == Role::Tool && index > pinned {
            continue;
        }
        let unit = bytes(&messages[index..unit_end]);
        if start != messages.len() && used + unit > budget {
            break;
        }
        used += unit;
        start = index;
        unit_end = index;
    }
    start
}

pub(crate) fn is_marker(message: &Message) -> bool {
    message.role == Role::User && message.text() == CARRIED_MARKER
}

fn is_summary(message: &Message) -> bool {
    message.role == Role::User && message.text().starts_with(SUMMARY_HEADING)
}

/// The messages of `older` as text the summarizing model reads (tool calls and results
/// named; reasoning left out), after the task for context.
pub(crate) fn transcript(messages: &[Message], older: &std::ops::Range<usize>) -> String {
    let mut out = String::new();
    if let Some(task) = messages[..older.start].iter().rev().find(|m| m.role == Role::User) {
        out.push_str(&format!("The task (kept as it is, do not summarize it):\n{}\n\n", task.text()));
    }
    out.push_str("The conversation to summarize:\n");
    for message in &messages[older.clone()] {
        let who = match message.role {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        };
        for part in &message.parts {
            match part {
                Part::Text(text) if !text.is_empty() => out.push_str(&format!("{who}: {text}\n")),
                Part::ToolCall(call) => out.push_str(&format!("assistant called tool `{}` with {}\n", call.name, call.arguments)),
                Part::ToolResult(result) => {
                    let verb = if result.is_error { "failed" } else { "returned" };
                    out.push_str(&format!("tool `{}` {verb}: {}\n", result.name, result.output.content));
                }
                Part::Text(_) | Part::Reasoning(_) => {}
            }
        }
    }
    out
}
