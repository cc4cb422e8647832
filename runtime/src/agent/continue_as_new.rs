//! Continue-as-new: a long run hands its conversation over to a fresh, linked run before its
//! durable state grows without bound.
//!
//! The hand-over happens at a model-call boundary of the run's root, the one point where
//! nothing is in flight and every tool call of the last turn has its result: instead of
//! calling the model, the run ends (status `failed`, code `interaction.host.failed`, message
//! `continued as run <id> (<reason>) under version <v>`) and a new run starts under a run id
//! derived from the old one, carrying the last messages ([`ContinueAsNew::keep_last_messages`]),
//! or a summary of the older ones besides them ([`ContinueAsNew::carry_summary`]), and
//! recording its predecessor. Every step is a commit a crash may stop after; calling
//! [`Run::successor`](super::Run::successor) (or resuming the old run, which finishes the
//! hand-over by itself) continues from there, and the derived id makes a second successor
//! impossible.

use super::build_error::BuildError;
use super::builder::AgentBuilder;
use crate::chat::{Message, Role};
use crate::json::{Json, ObjectBuilder, ToJson};

/// Messages carried to the successor when none is set.
pub const DEFAULT_KEEP_LAST_MESSAGES: u32 = 20;

/// When a run continues as a new one, and what it carries. Set it with
/// [`AgentBuilder::continue_as_new`]; part of the configuration digest.
///
/// ```
/// use keel::prelude::*;
/// // After 50 model calls, or once the conversation passes 1 MB, continue in a new run that
/// // carries the task (the first user message) and the last 30 messages.
/// let policy = ContinueAsNew::after_model_calls(50).or_after_context_bytes(1 << 20).keep_last_messages(30);
/// # let _ = policy;
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContinueAsNew {
    after_model_calls: Option<u32>,
    after_context_bytes: Option<u64>,
    keep_last_messages: u32,
    summary: bool,
}

impl ContinueAsNew {
    /// Hands over once the run made `calls` model calls (its next call is made by the
    /// successor, which has a fresh [`max_model_calls`](super::AgentBuilder::max_model_calls)).
    pub fn after_model_calls(calls: u32) -> ContinueAsNew {
        ContinueAsNew { after_model_calls: Some(calls), after_context_bytes: None, keep_last_messages: DEFAULT_KEEP_LAST_MESSAGES, summary: false }
    }

    /// Hands over once the conversation (messages as canonical JSON) passes `bytes`, after at
    /// least one model call in this run (so a successor that starts above it still progresses).
    pub fn after_context_bytes(bytes: u64) -> ContinueAsNew {
        ContinueAsNew { after_model_calls: None, after_context_bytes: Some(bytes), keep_last_messages: DEFAULT_KEEP_LAST_MESSAGES, summary: false }
    }

    /// Also hands over once the conversation passes `bytes` (see [`after_context_bytes`](Self::after_context_bytes)).
    pub fn or_after_context_bytes(mut self, bytes: u64) -> ContinueAsNew {
        self.after_context_bytes = Some(bytes);
        self
    }

    /// Only by request ([`Run::continue_as_new`](super::Run::continue_as_new)), never by a
    /// threshold: sets what a requested hand-over carries.
    pub fn on_request() -> ContinueAsNew {
        ContinueAsNew { after_model_calls: None, after_context_bytes: None, keep_last_messages: DEFAULT_KEEP_LAST_MESSAGES, summary: false }
    }

    /// The successor starts with the first user message (the task) and the newest messages,
    /// at most `messages` of them, starting at a whole exchange (a tool result is never
    /// carried without the call it answers). Default [`DEFAULT_KEEP_LAST_MESSAGES`].
    pub fn keep_last_messages(mut self, messages: u32) -> ContinueAsNew {
        self.keep_last_messages = messages;
        self
    }

    /// The successor also starts with a summary of the messages it does not carry verbatim
    /// (everything after the task and before the last [`keep_last_messages`](Self::keep_last_messages)).
    ///
    /// The summary is written by a model at the successor's first model call, inside that
    /// call, the way a [`ContextPolicy::summarize`](super::ContextPolicy::summarize) summary is
    /// (with the policy's summary model and instructions when the agent has one, else the
    /// agent's model and [`DEFAULT_SUMMARY_INSTRUCTIONS`](super::DEFAULT_SUMMARY_INSTRUCTIONS)):
    /// the successor starts with the whole conversation and a marker where the verbatim part
    /// begins, and that call's settlement replaces both by the summary, durably. Its usage
    /// counts in the successor's usage and budgets.
    ///
    /// ```
    /// use keel::prelude::*;
    /// let policy = ContinueAsNew::after_model_calls(40).keep_last_messages(6).carry_summary();
    /// # let _ = policy;
    /// ```
    pub fn carry_summary(mut self) -> ContinueAsNew {
        self.summary = true;
        self
    }

    /// Whether the successor starts with a summary ([`carry_summary`](Self::carry_summary)).
    pub fn carries_summary(&self) -> bool {
        self.summary
    }

    /// The reason text when the root's next model call (`sequence`, 1-based) over a context of
    /// `bytes` is to be made by a successor instead.
    pub(crate) fn due(&self, sequence: u32, bytes: impl FnOnce() -> u64) -> Option<String> {
        if let Some(calls) = self.after_model_calls {
            if sequence > calls {
                return Some(format!("continue-as-new after {calls} model calls"));
            }
        }
        if let Some(limit) = self.after_context_bytes {
            if sequence > 1 && bytes() > limit {
                return Some(format!("continue-as-new past {limit} context bytes"));
            }
        }
        None
    }

    pub(crate) fn check(&self, agent: &str, max_model_calls: u32) -> Result<(), BuildError> {
        let refuse = |detail: String| Err(BuildError::ContinueAsNew { agent: agent.to_owned(), detail });
        if self.keep_last_messages == 0 {
            return refuse("keep_last_messages(0) would carry nothing but the task".into());
        }
        match self.after_model_calls {
            Some(0) => refuse("after_model_calls(0) would hand over before any call".into()),
            Some(n) if n >= max_model_calls => refuse(format!(
                "after_model_calls({n}) is never reached: the run fails at max_model_calls ({max_model_calls}) first"
            )),
            _ if self.after_context_bytes == Some(0) => refuse("after_context_bytes(0) would hand over at every call".into()),
            _ => Ok(()),
        }
    }

    pub(crate) fn to_json(self) -> Json {
        ObjectBuilder::new()
            .opt_field("after_model_calls", self.after_model_calls.as_ref())
            .opt_field("after_context_bytes", self.after_context_bytes.as_ref())
            .field("keep_last_messages", &self.keep_last_messages)
            // Omitted when off: agents configured before summaries keep their identity.
            .opt_field("carry", self.summary.then_some("summary"))
            .build()
    }

    /// What the successor starts with: the system prefix, the first user message, and the
    /// newest whole exchanges holding at most `keep_last_messages` messages (the newest
    /// exchange always: it is what the next model call answers).
    /// With a summary, the whole conversation, the carry marker before that newest part.
    pub(crate) fn carry(&self, messages: &[Message]) -> Vec<Message> {
        if !self.summary {
            return carry_last(messages, self.keep_last_messages as usize);
        }
        // A marker not yet summarized (a hand-over requested at a successor's first call) is
        // folded into this one.
        let messages: Vec<Message> = messages.iter().filter(|m| !super::summary::is_marker(m)).cloned().collect();
        let messages = &messages[..];
        let kept = carry_last(messages, self.keep_last_messages as usize);
        let pinned = super::summary::pinned(messages);
        let from = messages.len() - (kept.len() - pinned.min(kept.len()));
        if from <= pinned {
            return kept; // nothing older than the carried part
        }
        let mut out = messages[..from].to_vec();
        out.push(Message::user(super::summary::CARRIED_MARKER));
        out.extend_from_slice(&messages[from..]);
        out
    }
}

/// The byte size of a conversation as the thresholds count it.
pub(crate) fn context_bytes(messages: &[Message]) -> u64 {
    messages.iter().map(|m| m.to_json().to_canonical_string().len() as u64).sum()
}

fn carry_last(messages: &[Message], keep: usize) -> Vec<Message> {
    let prefix = messages.iter().take_while(|m| m.role == Role::System).count();
    let pinned = prefix + usize::from(messages.get(prefix).is_some_and(|m| m.role == Role::User));
    // Exchanges after the pinned messages: a message and the tool results answering it.
    let mut starts: Vec<usize> = Vec::new();
    for index in pinned..messages.len() {
        if messages[index].role != Role::Tool || starts.is_empty() {
            starts.push(index);
        }
    }
    let from = starts
        .iter()
        .copied()
        .find(|&s| messages.len() - s <= keep)
        .or(starts.last().copied())
        .unwrap_or(messages.len());
    let mut out = messages[..pinned].to_vec();
    out.extend_from_slice(&messages[from..]);
    out
}

impl AgentBuilder {
    /// Continues long runs as new, linked runs (see [`ContinueAsNew`]): once the run passes
    /// the policy's threshold, at its next model call, and whenever
    /// [`Run::continue_as_new`](super::Run::continue_as_new) asks. Part of the configuration
    /// digest.
    pub fn continue_as_new(mut self, policy: ContinueAsNew) -> AgentBuilder {
        self.continuation = Some(policy);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::{ToolCall, ToolOutput, ToolResult};

    fn conversation() -> Vec<Message> {
        let call = |id: &str| Message::assistant_with_calls("", vec![ToolCall::new(id, "t", "{}")]);
        let result = |id: &str| Message::tool_results(vec![ToolResult::ok(id, "t", ToolOutput::text("ok"))]);
        vec![
            Message::user("task"),
            call("a"),
            result("a"),
            call("b"),
            result("b"),
            Message::user("more"),
            call("c"),
            result("c"),
        ]
    }

    #[test]
    fn the_carry_keeps_the_task_and_whole_newest_exchanges() {
        let all = conversation();
        let texts = |ms: &[Message]| ms.iter().map(|m| m.to_json().to_canonical_string()).collect::<Vec<_>>();
        // Two messages: exactly the last exchange (a call and its result).
        assert_eq!(texts(&carry_last(&all, 2)), texts(&[all[0].clone(), all[6].clone(), all[7].clone()]));
        // Three: the user message "more" starts an exchange of its own.
        assert_eq!(texts(&carry_last(&all, 3)), texts(&[&all[..1], &all[5..]].concat()));
        // Four would start at a tool result: moved forward to the next whole exchange.
        assert_eq!(texts(&carry_last(&all, 4)), texts(&carry_last(&all, 3)));
        // One: the newest exchange is kept whole even though it has two messages.
        assert_eq!(texts(&carry_last(&all, 1)), texts(&carry_last(&all, 2)));
        assert_eq!(texts(&carry_last(&all, 100)), texts(&all));
    }

    #[test]
    fn thresholds_and_checks() {
        let p = ContinueAsNew::after_model_calls(3);
        assert_eq!(p.due(3, || 0), None);
        assert!(p.due(4, || 0).is_some());
        let b = ContinueAsNew::after_context_bytes(100);
        assert_eq!(b.due(1, || 1_000), None, "a run makes at least one call");
        assert!(b.due(2, || 101).is_some());
        assert_eq!(b.due(2, || 100), None);
        assert!(ContinueAsNew::after_model_calls(8).check("a", 8).is_err());
        assert!(ContinueAsNew::after_model_calls(7).check("a", 8).is_ok());
        assert!(ContinueAsNew::on_request().keep_last_messages(0).check("a", 8).is_err());
    }
}
