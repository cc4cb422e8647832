//! The Interaction's Start input.

use crate::chat::{Message, Options, Request};
use super::Lineage;
use crate::interaction::error::{ErrorKind, InteractionError};
use crate::interaction::wire::Wire;
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ToJson};

/// The complete caller-supplied starting context: messages and options, never tools (the
/// Deployment freezes tools, so model-visible definitions cannot drift per Process).
///
/// Wire form: `{"messages":[Message],"options"?:Options,"lineage"?:Lineage,"budget"?:Limits,
/// "started_ms"?:u64,"deadline_ms"?:u64}`;
/// `options` is omitted when default (an explicit `{}` decodes to the same value, as in
/// [`Request`]); `lineage` (the host's version, the run this one continues) is kept in the
/// state and never reaches the model; `budget` is the grant a parent gives a delegate (its
/// share of what remains of the parent's limits), set by the parent only (a model-written
/// `budget` is replaced); `started_ms` is the instant the host started the run on its clock
/// (its time budget counts from there), `deadline_ms` the instant a parent's time budget ends
/// for its delegate (set by the parent only, like `budget`).
///
/// Valid when `{messages, options}` is a valid request: at least one message, every message
/// valid, system messages only in the leading prefix, options valid.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InteractionInput {
    pub messages: Vec<Message>,
    pub options: Options,
    pub lineage: Option<Lineage>,
    /// The limits granted by a parent (a delegate's share of the tree's budget).
    pub budget: Option<crate::interaction::budget::Limits>,
    /// When the host started the run, in milliseconds on its clock.
    pub started_ms: Option<u64>,
    /// The instant a parent's time budget ends (a delegate's deadline).
    pub deadline_ms: Option<u64>,
}

impl InteractionInput {
    pub fn new(messages: Vec<Message>) -> InteractionInput {
        InteractionInput {
            messages,
            options: Options::default(),
            lineage: None,
            budget: None,
            started_ms: None,
            deadline_ms: None,
        }
    }

    /// The same input with its lineage recorded.
    pub fn with_lineage(mut self, lineage: Lineage) -> InteractionInput {
        self.lineage = Some(lineage);
        self
    }

    /// The same input recording that the host started the run at `started_ms`.
    pub fn started_at(mut self, started_ms: u64) -> InteractionInput {
        self.started_ms = Some(started_ms);
        self
    }

    /// The initial WorkingContext: these messages and options, no tools, automatic choice.
    pub fn working_context(&self) -> Request {
        Request { messages: self.messages.clone(), options: self.options.clone(), ..Request::default() }
    }
}

impl Wire for InteractionInput {
    const INVALID: ErrorKind = ErrorKind::InvalidInput;
    const WHAT: &'static str = "interaction input";

    fn validate(&self) -> Result<(), InteractionError> {
        self.working_context().validate().map_err(|e| InteractionError::new(ErrorKind::InvalidInput, e.to_string()))?;
        match &self.lineage {
            Some(lineage) => lineage.validate(),
            None => Ok(()),
        }
    }

    /// A start input is a whole context, so it is bounded per message (each message fits one
    /// payload) and as a whole by [`crate::limits::MAX_CONTEXT_BYTES_CEILING`], not by the
    /// payload limit; the Definition's own `max_context_bytes` applies when it starts.
    fn to_payload(&self) -> Result<crate::json::Payload, InteractionError> {
        self.validate()?;
        let limit = usize::try_from(crate::limits::MAX_CONTEXT_BYTES_CEILING).unwrap_or(usize::MAX);
        crate::json::Payload::from_json_with_limit(self.to_json(), limit)
            .map_err(|e| InteractionError::new(Self::INVALID, format!("{}: {e}", Self::WHAT)))
    }
}

impl ToJson for InteractionInput {
    fn to_json(&self) -> Json {
        let b = ObjectBuilder::new().field("messages", &self.messages);
        let b = if self.options.is_default() { b } else { b.field("options", &self.options) };
        b.opt_field("lineage", self.lineage.as_ref())
            .opt_field("budget", self.budget.as_ref())
            .opt_field("started_ms", self.started_ms.as_ref())
            .opt_field("deadline_ms", self.deadline_ms.as_ref())
            .build()
    }
}

impl FromJson for InteractionInput {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let input =
            InteractionInput {
                messages: r.required("messages")?,
                options: r.optional("options")?.unwrap_or_default(),
                lineage: r.optional("lineage")?,
                budget: r.optional("budget")?,
                started_ms: r.optional("started_ms")?,
                deadline_ms: r.optional("deadline_ms")?,
            };
        r.finish()?;
        input.validate()?;
        Ok(input)
    }
}
