//! What a run's model sees of a long conversation: a context policy, applied right before each
//! model call, so a conversation that outgrows the window is shortened instead of failing.
//!
//! A policy runs through the model dispatcher's context reducer, inside the model call's
//! Effect: the shortened context travels back in the call's committed settlement and replaces
//! the run's stored context, so the stored history stops growing too, a restored run sees
//! exactly what the model saw, and a re-issued call is shortened the same way (trimming and
//! dropping are pure functions of the messages; a summary is a model call of the same Effect,
//! see [`Summarize`]). The policy is part of the agent's configuration digest: a run is never
//! resumed under a different one.
//!
//! Shortening never reorders messages and never separates a tool result from its call: an
//! assistant message that calls tools and the tool-result messages answering it are kept or
//! dropped together, and a trimmed tool result keeps its call id, tool name and error flag.

use super::build_error::BuildError;
use super::builder::AgentBuilder;
use super::summary::{Summarize, Summarizer};
use crate::chat::{Message, Part, Request, Role, ToolOutput};
use crate::env::BoxFuture;
use crate::interaction::model::{DispatcherConfig, ModelCallContext, ModelContextReducer, ModelError, Reduction};
use crate::json::{Json, ObjectBuilder, ToJson};
use std::sync::Arc;

/// How much of a conversation each model call sees: [`AgentBuilder::context_policy`](super::AgentBuilder::context_policy).
///
/// The steps run in this order: trim old tool outputs, then summarize older messages through a
/// model call once the context passes a threshold ([`ContextPolicy::summarize`]), then drop
/// the oldest messages past the byte budget. The system messages and the first user message (the task) are always kept,
/// and so is the newest exchange, even when it alone is over the budget (the run's
/// [`max_context_bytes`](super::AgentBuilder::max_context_bytes) limit still applies).
///
/// ```
/// use keel::prelude::*;
///
/// let policy = ContextPolicy::new().trim_tool_outputs(3).keep_last_bytes(200_000);
/// let agent = Agent::builder("researcher")
///     .version("1")
///     .model(ScriptedModel::new().then_text("Done."))
///     .context_policy(policy)
///     .build()?;
/// # Ok::<(), keel::agent::BuildError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ContextPolicy {
    keep_tool_outputs: Option<usize>,
    keep_bytes: Option<u64>,
    summary: Option<Summarize>,
}

/// The start of the text that replaces a trimmed tool output.
const TRIMMED: &str = "[output trimmed to save context: ";

/// The text that replaces a trimmed tool output, with its size (the model learns the result
/// existed and how big it was, and can call the tool again).
fn trimmed_text(bytes: usize) -> String {
    format!("{TRIMMED}{bytes} bytes]")
}

impl ContextPolicy {
    /// A policy that keeps everything (add steps with the methods below).
    pub fn new() -> ContextPolicy {
        ContextPolicy::default()
    }

    /// Keeps the outputs of the newest `n` tool results whole and replaces each older one by
    /// a short note giving its size (call id, tool name and error flag stay).
    pub fn trim_tool_outputs(mut self, n: usize) -> ContextPolicy {
        self.keep_tool_outputs = Some(n);
        self
    }

    /// Drops the oldest messages until the context (messages in their canonical JSON form)
    /// holds at most `bytes` bytes.
    pub fn keep_last_bytes(mut self, bytes: u64) -> ContextPolicy {
        self.keep_bytes = Some(bytes);
        self
    }

    /// A policy that replaces older messages by a summary written by a model once the context
    /// passes `summarize`'s threshold (more steps can follow: `ContextPolicy::summarize(s).trim_tool_outputs(5)`).
    ///
    /// The summary is made inside the model call it shortens, right before it: durable with
    /// that call's settlement (made once, then every later call starts from it), and never
    /// kept if the call does not settle (a crash leaves the call Unknown, and the model
    /// Unknown policy re-issues both). Its usage counts in the run's usage and budgets.
    ///
    /// ```
    /// use keel::prelude::*;
    /// let agent = Agent::builder("researcher")
    ///     .version("1")
    ///     .model(ScriptedModel::new().then_text("Done."))
    ///     .context_policy(ContextPolicy::summarize(Summarize::after_bytes(400_000).keep_recent_bytes(100_000)))
    ///     .build()?;
    /// # Ok::<(), keel::agent::BuildError>(())
    /// ```
    pub fn summarize(summarize: Summarize) -> ContextPolicy {
        ContextPolicy { summary: Some(summarize), ..ContextPolicy::default() }
    }

    /// Whether the policy changes nothing.
    pub fn is_keep_all(&self) -> bool {
        self.keep_tool_outputs.is_none() && self.keep_bytes.is_none() && self.summary.is_none()
    }

    /// The canonical form recorded in the configuration digest.
    pub(crate) fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .opt_field("keep_last_bytes", self.keep_bytes.as_ref())
            .opt_value("summarize", self.summary.as_ref().map(Summarize::to_json))
            .opt_field("trim_tool_outputs", self.keep_tool_outputs.map(|n| n as u64).as_ref())
            .build()
    }

    /// The context the model sees: `messages` shortened by this policy's pure steps (trimming
    /// and dropping; a summary needs a model call, made by the agent's model calls).
    pub fn apply(&self, messages: &[Message]) -> Vec<Message> {
        let mut out = messages.to_vec();
        if let Some(keep) = self.keep_tool_outputs {
            trim_tool_outputs(&mut out, keep);
        }
        if let Some(bytes) = self.keep_bytes {
            out = keep_last_bytes(out, bytes);
        }
        out
    }
}

fn trim_tool_outputs(messages: &mut [Message], keep: usize) {
    let mut seen = 0usize;
    for message in messages.iter_mut().rev() {
        for part in message.parts.iter_mut().rev() {
            let Part::ToolResult(result) = part else { continue };
            seen += 1;
            if seen <= keep {
                continue;
            }
            let bytes = result.output.content.len() + result.output.details.as_ref().map_or(0, |d| d.to_canonical_string().len());
            let note = trimmed_text(bytes);
            // Already trimmed, or smaller than its note: keep it as it is.
            let small = result.output.content.len() <= note.len() || result.output.content.starts_with(TRIMMED);
            if result.output.details.is_none() && small {
                continue;
            }
            result.output = ToolOutput::text(note);
        }
    }
}

fn size(message: &Message) -> u64 {
    message.to_json().to_canonical_string().len() as u64
}

/// Keeps the system prefix, the first user message, and the newest exchanges that fit.
fn keep_last_bytes(messages: Vec<Message>, budget: u64) -> Vec<Message> {
    let total: u64 = messages.iter().map(size).sum();
    if total <= budget {
        return messages;
    }
    let prefix = messages.iter().take_while(|m| m.role == Role::System).count();
    let pinned = prefix + usize::from(messages.get(prefix).is_some_and(|m| m.role == Role::User));
    // Exchanges after the pinned messages: a message, plus the tool-result messages that
    // follow it (they answer its calls), as one unit that is kept or dropped whole.
    let mut units: Vec<std::ops::Range<usize>> = Vec::new();
    for index in pinned..messages.len() {
        let answers_previous = messages[index].role == Role::Tool && !units.is_empty();
        match units.last_mut() {
            Some(unit) if answers_previous => unit.end = index + 1,
            _ => units.push(index..index + 1),
        }
    }
    let mut used: u64 = messages[..pinned].iter().map(size).sum();
    let mut first_kept = units.len();
    for (i, unit) in units.iter().enumerate().rev() {
        let bytes: u64 = messages[unit.clone()].iter().map(size).sum();
        // The newest exchange is always kept: the model must see what it answers.
        if i + 1 != units.len() && used + bytes > budget {
            break;
        }
        used += bytes;
        first_kept = i;
    }
    let start = units.get(first_kept).map_or(messages.len(), |u| u.start);
    let mut out = messages;
    out.drain(pinned..start);
    out
}

/// The policy as the model dispatcher's context reducer.
pub(crate) struct PolicyReducer {
    policy: ContextPolicy,
    /// The summary step, or a summarizer of a carried conversation only.
    summarizer: Option<Summarizer>,
}

impl ModelContextReducer for PolicyReducer {
    /// The pure steps only (the dispatcher calls [`reduce_with_usage`](Self::reduce_with_usage)).
    fn reduce<'a>(&'a self, _cx: &'a ModelCallContext, request: &'a Request) -> BoxFuture<'a, Result<Vec<Message>, String>> {
        let messages = self.policy.apply(&request.messages);
        Box::pin(async move { Ok(messages) })
    }

    fn reduce_with_usage<'a>(&'a self, cx: &'a ModelCallContext, request: &'a Request) -> BoxFuture<'a, Result<Reduction, ModelError>> {
        Box::pin(async move {
            let mut messages = request.messages.clone();
            if let Some(keep) = self.policy.keep_tool_outputs {
                trim_tool_outputs(&mut messages, keep);
            }
            let mut usage = crate::chat::Usage::default();
            if let Some(summarizer) = &self.summarizer {
                (messages, usage) = summarizer.apply(cx, messages).await?;
            }
            if let Some(bytes) = self.policy.keep_bytes {
                messages = keep_last_bytes(messages, bytes);
            }
            Ok(Reduction { messages, usage })
        })
    }
}

impl ContextPolicy {
    /// Installs the policy as `model`'s context reducer (nothing for the keep-all policy,
    /// unless `carries_summary`: a summarizing continue-as-new needs the summary step in its
    /// successor's calls).
    pub(crate) fn install(self, agent: &str, model: DispatcherConfig, carries_summary: bool) -> Result<DispatcherConfig, BuildError> {
        if self.is_keep_all() && !carries_summary {
            return Ok(model);
        }
        if model.reducer.is_some() {
            return Err(BuildError::ContextPolicyWithReducer { agent: agent.to_owned() });
        }
        let refuse = |detail: String| Err(BuildError::ContextPolicy { agent: agent.to_owned(), detail });
        if self.keep_bytes == Some(0) {
            return refuse("keep_last_bytes(0) would keep nothing".into());
        }
        if let Some(problem) = self.summary.as_ref().and_then(Summarize::problem) {
            return refuse(problem);
        }
        let summarizer = match &self.summary {
            Some(summary) => Some(summary.summarizer(&model.mode)),
            None => carries_summary.then(|| Summarizer::carry_only(&model.mode)),
        };
        Ok(model.with_reducer(Arc::new(PolicyReducer { policy: self, summarizer })))
    }
}

impl AgentBuilder {
    /// How much of a long conversation each model call sees (default: everything, up to
    /// [`max_context_bytes`](Self::max_context_bytes), where the run fails). Part of the
    /// configuration digest. See [`ContextPolicy`].
    pub fn context_policy(mut self, policy: ContextPolicy) -> AgentBuilder {
        self.context = policy;
        self
    }
}
