//! The parent Interaction snapshot (kind `"interaction"`).

use super::pending_steer::PendingSteer;
use super::phase::Phase;
use super::round::ToolRound;
use super::context::{ContextHead, WorkingContext};
use crate::interaction::artifact::{Artifact, Artifacts};
use crate::interaction::error::{ErrorKind, InteractionError};
use crate::chat::Usage;
use crate::interaction::budget::{read_spending, Limits, Spending};
use crate::interaction::budget_question::{BudgetExtension, PendingBudgetQuestion};
use crate::interaction::run_clock::RunClock;
use crate::interaction::output::{read_usage, Output};
use crate::interaction::protocol::{InteractionInput, Lineage};
use crate::interaction::wire::{read_nonempty_list, Wire};
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ObjectWriter, Payload, ToJson};
use crate::kernel::waist::ExecutionState;

/// The complete, self-sufficient state of one parent Interaction Execution.
///
/// Full wire form (the [`Wire`] codec: tests, fuzzing): `{"phase":Phase,"working_context":Request,
/// "model_call_count":u32,"usage"?:Usage,"spending"?:Spending,"granted"?:Limits,"clock"?:RunClock,
/// "extended"?:Extension,"budget_questions"?:u32,"budget_question"?:PendingBudgetQuestion,
/// "advertised_tool_names"?:[S],"tool_round"?:ToolRound,
/// "pending_steer"?:PendingSteer,"artifact_records"?:[Artifact],"final_output"?:Output,
/// "model"?:ModelRecord,"lineage"?:Lineage}`.
/// Optional lists are omitted when empty and an explicit `[]` is rejected, so restore →
/// snapshot is byte-identical.
///
/// As an [`ExecutionState`] of kind [`ParentState::KIND`] the messages are not in the payload:
/// they are the state's segments (one per Step that appended), and the payload's
/// `working_context` is the [`ContextHead`] naming them (`{"chain","messages","options"?}`).
///
/// Decoding runs [`ParentState::validate_structure`]; the Definition adds
/// [`ParentState::validate_against`] (rules that need its configuration).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParentState {
    pub phase: Phase,
    /// Everything the next model call needs (history, steers, feedback, reduced context).
    /// Never holds tool definitions: the Dispatcher adds the manifest per call.
    pub working_context: WorkingContext,
    /// Model Effects declared so far (counted when declared, not when settled).
    pub model_call_count: u32,
    /// The tokens of every model response settled so far and of every delegate run folded so
    /// far (their own sums), added when the settlement is adopted; omitted when zero.
    pub usage: Usage,
    /// Cost, tool calls and charges beside `usage` ([`crate::interaction::budget`]), summed
    /// like it; omitted when zero.
    pub spending: Spending,
    /// The limits a parent granted this run as its delegate (from the input); `None` for a
    /// run started by a host.
    pub granted: Option<Limits>,
    /// The run's start, a parent's deadline and the clock readings of its model calls
    /// ([`crate::interaction::run_clock`]); omitted when empty.
    pub clock: RunClock,
    /// What the host granted on top of the run's own budget, summed over every answered
    /// budget question ([`crate::interaction::budget_question`]); omitted when empty.
    pub extended: BudgetExtension,
    /// How many budget questions the run has asked (each has its own wait key); omitted
    /// when zero.
    pub budget_questions: u32,
    /// The question being asked; only in the budget phases.
    pub budget_question: Option<PendingBudgetQuestion>,
    /// Deferred tools made visible so far, append-only, in commit order.
    pub advertised_tool_names: Vec<String>,
    /// Exists only in the child phases.
    pub tool_round: Option<ToolRound>,
    /// Steers admitted but not yet applied.
    pub pending_steer: Option<PendingSteer>,
    /// Successful Delegate outputs, in tool-call order across model calls.
    pub artifact_records: Vec<Artifact>,
    /// Only in `completed`.
    pub final_output: Option<Output>,
    /// The model the run calls and its switches; absent until the first Step of a Definition
    /// that names its model (and always absent for one that does not).
    pub model: Option<super::ModelRecord>,
    /// The start input's lineage (version, predecessor), kept unchanged for the run's life;
    /// never part of a model request.
    pub lineage: Option<Lineage>,
}

impl ParentState {
    /// The state kind.
    pub const KIND: &'static str = "interaction";

    /// The state created by `Start`: `ready_model` with the input as WorkingContext.
    pub fn start(input: &InteractionInput) -> ParentState {
        ParentState {
            phase: Phase::ReadyModel,
            working_context: WorkingContext::new(input.messages.clone(), input.options.clone()),
            model_call_count: 0,
            usage: Usage::default(),
            spending: Spending::default(),
            granted: input.budget,
            clock: RunClock::start(input.started_ms, input.deadline_ms),
            extended: BudgetExtension::default(),
            budget_questions: 0,
            budget_question: None,
            advertised_tool_names: Vec::new(),
            tool_round: None,
            pending_steer: None,
            artifact_records: Vec::new(),
            final_output: None,
            model: None,
            lineage: input.lineage.clone(),
        }
    }

    /// The limits this run applies: its own budget's raised by what the host granted,
    /// tightened by a parent's grant.
    pub fn limits(&self, own: Limits) -> Limits {
        let own = self.own_limits(own);
        match self.granted {
            Some(g) => own.min(g),
            None => own,
        }
    }

    /// The run's own limits (its budget's `own`) raised by what the host granted.
    pub fn own_limits(&self, own: Limits) -> Limits {
        own.extended_by(self.extended.amounts())
    }

    /// The run's own time limit (its budget's `own_ms`) raised by what the host granted.
    pub fn time_limit(&self, own_ms: Option<u64>) -> Option<u64> {
        own_ms.map(|l| l.saturating_add(self.extended.time_ms()))
    }

    /// The Artifacts as validators see them.
    pub fn artifacts(&self) -> Artifacts {
        Artifacts::new(self.artifact_records.clone())
    }

    /// Validates the structure, then encodes as an [`ExecutionState`] of kind `"interaction"`:
    /// the payload names the context by its head, the messages travel as segments. An
    /// unsealed tail is sealed on a copy first (a Step seals its own before it ends).
    pub fn to_execution_state(&self) -> Result<ExecutionState, InteractionError> {
        self.to_execution_state_with(None)
    }

    /// [`ParentState::to_execution_state`] with `output`, when given, as the already built
    /// encoding of `final_output` (the Complete transition's payload), so the Output is
    /// encoded once per completion, not once per use.
    pub(crate) fn to_execution_state_with(&self, output: Option<&Payload>) -> Result<ExecutionState, InteractionError> {
        self.validate_structure()?;
        self.encode_valid(output)
    }

    /// [`ParentState::to_execution_state_with`] of a state known to be valid (a parent
    /// Execution only ever holds a state that passed the complete validation): encodes
    /// without checking the structure again.
    pub(crate) fn encode_valid(&self, output: Option<&Payload>) -> Result<ExecutionState, InteractionError> {
        let sealed;
        let context = if self.working_context.is_sealed() {
            &self.working_context
        } else {
            let mut copy = self.working_context.clone();
            copy.seal().map_err(|e| InteractionError::invalid_state(format!("working_context: {e}")))?;
            sealed = copy;
            &sealed
        };
        let head = context.head();
        let payload = match self.write_payload(&head, output) {
            Some(payload) => payload,
            // Too deep or too large: the tree path names the limit.
            None => Payload::from_json(self.members(head.to_json(), output))
                .map_err(|e| InteractionError::invalid_state(format!("interaction state: {e}")))?,
        };
        Ok(ExecutionState { kind: super::state_kind(Self::KIND)?, payload, segments: context.segments() })
    }

    /// The payload written straight to canonical text (no tree of the state is built, the
    /// Output's stored encoding is copied), byte-identical to encoding [`ParentState::members`]
    /// (test builds compare the two, and scan the text as canonical, on every call). The text
    /// is canonical by construction, so only the limits are checked here: `None` when it nests
    /// deeper than [`crate::limits::MAX_JSON_DEPTH`] or is over the payload size limit.
    fn write_payload(&self, head: &ContextHead, output: Option<&Payload>) -> Option<Payload> {
        let mut text = String::with_capacity(256 + output.map_or(0, Payload::len));
        self.write_members(head, output, &mut text);
        #[cfg(test)]
        assert_eq!(
            text,
            self.members(head.to_json(), output).to_canonical_string(),
            "the direct writer encodes exactly the members' tree"
        );
        if crate::json::canonical::depth(&text) > crate::limits::MAX_JSON_DEPTH {
            return None;
        }
        #[cfg(test)]
        assert_eq!(crate::json::canonical::scan(&text, 0, 0), Some(text.len()), "the writer's text is canonical");
        Payload::from_scanned(&text)
    }

    /// The tree encoding the direct writer must equal: [`ParentState::members`] of a state
    /// whose context is sealed, encoded.
    #[cfg(test)]
    pub(super) fn tree_encoding(&self, output: Option<&Payload>) -> String {
        self.members(self.working_context.head().to_json(), output).to_canonical_string()
    }

    /// The direct writer's text for a state whose context is sealed.
    #[cfg(test)]
    pub(super) fn direct_encoding(&self, output: Option<&Payload>) -> String {
        let mut text = String::new();
        self.write_members(&self.working_context.head(), output, &mut text);
        text
    }

    /// [`ParentState::members`], written member by member in canonical key order.
    fn write_members(&self, head: &ContextHead, output: Option<&Payload>, out: &mut String) {
        let mut w = ObjectWriter::new(out);
        if !self.advertised_tool_names.is_empty() {
            w.write("advertised_tool_names", &self.advertised_tool_names);
        }
        if !self.artifact_records.is_empty() {
            w.field("artifact_records", self.artifact_records.as_slice());
        }
        w.opt_field("budget_question", self.budget_question.as_ref());
        if self.budget_questions != 0 {
            w.u64("budget_questions", u64::from(self.budget_questions));
        }
        if !self.clock.is_empty() {
            w.field("clock", &self.clock);
        }
        if !self.extended.is_empty() {
            w.value("extended", &self.extended.grant_json());
        }
        match (&self.final_output, output) {
            (Some(_), Some(encoded)) => {
                w.write("final_output", encoded);
            }
            (Some(o), None) => {
                w.field("final_output", o);
            }
            (None, _) => {}
        }
        w.opt_field("granted", self.granted.as_ref());
        w.opt_field("lineage", self.lineage.as_ref());
        w.opt_field("model", self.model.as_ref());
        w.u64("model_call_count", u64::from(self.model_call_count));
        w.opt_field("pending_steer", self.pending_steer.as_ref());
        w.field("phase", &self.phase);
        if !self.spending.is_zero() {
            w.field("spending", &self.spending);
        }
        w.opt_field("tool_round", self.tool_round.as_ref());
        if self.usage != Usage::default() {
            w.write("usage", &self.usage);
        }
        let mut context = ObjectWriter::new(w.key("working_context"));
        context.write("chain", &head.chain).u64("messages", head.messages);
        if !head.options.is_default() {
            context.field("options", &head.options);
        }
        context.finish();
        w.finish();
    }

    /// Checks the kind, decodes the payload strictly, attaches the segments (reusing their
    /// decoded messages when present; the chain digest and count must match) and validates the
    /// structure.
    pub fn from_execution_state(state: &ExecutionState) -> Result<ParentState, InteractionError> {
        if state.kind.as_str() != Self::KIND {
            return Err(InteractionError::invalid_state(format!(
                "state kind `{}`, expected `{}`",
                crate::interaction::protocol::excerpt(state.kind.as_str()),
                Self::KIND
            )));
        }
        let decode = |e: DecodeError| InteractionError::decode(Self::INVALID, Self::WHAT, e);
        let parent = decode_members(state.payload.value(), |v| {
            let head = ContextHead::from_json(v)?;
            WorkingContext::attach(&head, &state.segments)
        })
        .map_err(decode)?;
        parent.validate_structure()?;
        Ok(parent)
    }

    /// Every member, with `context` as the `working_context` member and `output` (when given)
    /// as the encoding of `final_output`.
    fn members(&self, context: Json, output: Option<&Payload>) -> Json {
        let final_output = match (&self.final_output, output) {
            (Some(_o), Some(encoded)) => {
                // Test builds check the shared encoding is the Output's own.
                #[cfg(test)]
                assert_eq!(encoded.value(), &_o.to_json(), "the shared output payload encodes final_output");
                Some(encoded.value().clone())
            }
            (Some(o), None) => Some(o.to_json()),
            (None, _) => None,
        };
        ObjectBuilder::new()
            .field("phase", &self.phase)
            .value("working_context", context)
            .field("model_call_count", &self.model_call_count)
            .opt_field("usage", (self.usage != Usage::default()).then_some(&self.usage))
            .opt_field("spending", (!self.spending.is_zero()).then_some(&self.spending))
            .opt_field("granted", self.granted.as_ref())
            .opt_field("clock", (!self.clock.is_empty()).then_some(&self.clock))
            .opt_value("extended", (!self.extended.is_empty()).then(|| self.extended.grant_json()))
            .opt_field("budget_questions", (self.budget_questions != 0).then_some(&self.budget_questions))
            .opt_field("budget_question", self.budget_question.as_ref())
            .nonempty_field("advertised_tool_names", &self.advertised_tool_names)
            .opt_field("tool_round", self.tool_round.as_ref())
            .opt_field("pending_steer", self.pending_steer.as_ref())
            .nonempty_field("artifact_records", &self.artifact_records)
            .opt_value("final_output", final_output)
            .opt_field("model", self.model.as_ref())
            .opt_field("lineage", self.lineage.as_ref())
            .build()
    }
}

/// Decodes every member, reading `working_context` with `context`.
fn decode_members(
    value: &Json,
    context: impl FnOnce(&Json) -> Result<WorkingContext, DecodeError>,
) -> Result<ParentState, DecodeError> {
    let mut r = ObjectReader::new(value)?;
    let phase = r.required("phase")?;
    let working_context = context(r.required_value("working_context")?).map_err(|e| e.in_member("working_context"))?;
    let state = ParentState {
        phase,
        working_context,
        model_call_count: r.required("model_call_count")?,
        usage: read_usage(&mut r)?,
        spending: read_spending(&mut r)?,
        granted: r.optional("granted")?,
        clock: r.optional("clock")?.unwrap_or_default(),
        extended: match r.optional_value("extended")? {
            Some(v) => BudgetExtension::from_grant_json(v, u64::MAX).map_err(|e| e.in_member("extended"))?,
            None => BudgetExtension::default(),
        },
        budget_questions: match r.optional::<u32>("budget_questions")? {
            Some(0) => return Err(DecodeError::invalid("a zero count is omitted, not written".to_owned()).in_member("budget_questions")),
            other => other.unwrap_or(0),
        },
        budget_question: r.optional("budget_question")?,
        advertised_tool_names: read_nonempty_list(&mut r, "advertised_tool_names")?,
        tool_round: r.optional("tool_round")?,
        pending_steer: r.optional("pending_steer")?,
        artifact_records: read_nonempty_list(&mut r, "artifact_records")?,
        final_output: r.optional("final_output")?,
        model: r.optional("model")?,
        lineage: r.optional("lineage")?,
    };
    r.finish()?;
    Ok(state)
}

impl Wire for ParentState {
    const INVALID: ErrorKind = ErrorKind::InvalidExecutionState;
    const WHAT: &'static str = "interaction state";

    fn validate(&self) -> Result<(), InteractionError> {
        self.validate_structure()
    }
}

impl ToJson for ParentState {
    fn to_json(&self) -> Json {
        self.members(self.working_context.to_json(), None)
    }
}

impl FromJson for ParentState {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let state = decode_members(value, WorkingContext::from_json)?;
        state.validate_structure()?;
        Ok(state)
    }
}
