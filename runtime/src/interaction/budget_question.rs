//! Asking the host to extend a budget ([`OnExhausted::AskHuman`](super::budget::OnExhausted)).
//!
//! When the next model call or tool call would pass one of the run's own limits, the run parks
//! on a durable input wait instead of failing. The question travels exactly like a tool's input
//! request: a `wait` Effect whose payload is a [`ToolInputRequest`] (prompt: the
//! [`BudgetQuestion`]; response schema: [`BudgetAnswer`]'s), answered by a wait-addressed
//! `input_response` Signal to the Process that asks. What the host grants is durable state of
//! that Process (its [`BudgetExtension`] sum, added to its own limits), so a restored run never
//! grants twice nor loses a grant, and its time keeps the recorded start.
//!
//! Wire forms:
//! * prompt: `{"budget_exhausted":{"kind":S,"limit":u64,"spent":u64,"needs"?:u64},"question":S}`;
//! * answer: `{"extend":Extension}` or `{"decline":true}`;
//! * Extension (also the state's `extended` sum): `{"input_tokens"?,"output_tokens"?,
//!   "total_tokens"?,"cost_micros"?,"tool_calls"?,"time_ms"?}`, each an integer ≥ 1 (at most
//!   2⁵³ − 1), at least one.

use super::budget::{Amounts, BudgetKind};
use super::ids::BUDGET_WAIT_KEY_PREFIX;
use crate::json::{parse, DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ToJson};
use crate::kernel::ids::{SignalId, WaitId};
use crate::tool::ToolInputRequest;

/// The largest amount an extension may grant (JSON Schema validators compare numbers as
/// doubles: beyond 2⁵³ the schema could not refuse what decoding refuses).
pub const MAX_EXTENSION: u64 = (1 << 53) - 1;

/// The JSON Schema of an answer to a budget question.
pub const BUDGET_ANSWER_SCHEMA: &str = r#"{"oneOf":[{"type":"object","properties":{"extend":{"type":"object","properties":{"cost_micros":{"type":"integer","minimum":1,"maximum":9007199254740991},"input_tokens":{"type":"integer","minimum":1,"maximum":9007199254740991},"output_tokens":{"type":"integer","minimum":1,"maximum":9007199254740991},"time_ms":{"type":"integer","minimum":1,"maximum":9007199254740991},"tool_calls":{"type":"integer","minimum":1,"maximum":9007199254740991},"total_tokens":{"type":"integer","minimum":1,"maximum":9007199254740991}},"additionalProperties":false,"minProperties":1}},"required":["extend"],"additionalProperties":false},{"type":"object","properties":{"decline":{"const":true}},"required":["decline"],"additionalProperties":false}]}"#;

/// What the host grants a run on top of its budget: amounts per kind and time.
///
/// ```
/// use keel::interaction::budget_question::BudgetExtension;
/// use std::time::Duration;
/// let answer = BudgetExtension::new().total_tokens(20_000).time(Duration::from_secs(60)).to_json();
/// assert_eq!(answer.to_canonical_string(), r#"{"extend":{"time_ms":60000,"total_tokens":20000}}"#);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BudgetExtension {
    amounts: Amounts,
    time_ms: u64,
}

impl BudgetExtension {
    /// Grants nothing yet.
    pub fn new() -> BudgetExtension {
        BudgetExtension::default()
    }

    /// `n` more input tokens.
    pub fn input_tokens(mut self, n: u64) -> BudgetExtension {
        self.amounts.input_tokens = n;
        self
    }

    /// `n` more output tokens.
    pub fn output_tokens(mut self, n: u64) -> BudgetExtension {
        self.amounts.output_tokens = n;
        self
    }

    /// `n` more input plus output tokens.
    pub fn total_tokens(mut self, n: u64) -> BudgetExtension {
        self.amounts.total_tokens = n;
        self
    }

    /// `micros` more micro-dollars.
    pub fn cost_usd_micros(mut self, micros: u64) -> BudgetExtension {
        self.amounts.cost_micros = micros;
        self
    }

    /// `n` more tool calls.
    pub fn tool_calls(mut self, n: u64) -> BudgetExtension {
        self.amounts.tool_calls = n;
        self
    }

    /// `extra` more time, counted from the run's recorded start like the limit itself (so the
    /// time the question waited for its answer is part of the elapsed time).
    pub fn time(mut self, extra: std::time::Duration) -> BudgetExtension {
        self.time_ms = u64::try_from(extra.as_millis()).unwrap_or(u64::MAX);
        self
    }

    /// The amounts granted (tokens, cost, tool calls).
    pub fn amounts(&self) -> Amounts {
        self.amounts
    }

    /// The time granted, in milliseconds.
    pub fn time_ms(&self) -> u64 {
        self.time_ms
    }

    /// What it grants of `kind`.
    pub fn get(&self, kind: BudgetKind) -> u64 {
        match kind {
            BudgetKind::Time => self.time_ms,
            other => self.amounts.get(other),
        }
    }

    fn set(&mut self, kind: BudgetKind, value: u64) {
        match kind {
            BudgetKind::Time => self.time_ms = value,
            other => self.amounts.set(other, value),
        }
    }

    /// Whether it grants nothing.
    pub fn is_empty(&self) -> bool {
        self.amounts.is_zero() && self.time_ms == 0
    }

    /// Both grants summed.
    pub fn saturating_add(self, other: BudgetExtension) -> BudgetExtension {
        BudgetExtension { amounts: self.amounts.saturating_add(other.amounts), time_ms: self.time_ms.saturating_add(other.time_ms) }
    }

    /// The answer that grants this extension: `{"extend":{...}}` (pass it to `Run::answer`).
    pub fn to_json(&self) -> Json {
        BudgetAnswer::Extend(*self).to_json()
    }

    /// The bare grant `{"<kind>":n,...}` (the state's `extended` member), zero kinds omitted.
    pub(crate) fn grant_json(&self) -> Json {
        let mut b = ObjectBuilder::new();
        for k in BudgetKind::EVERY {
            let v = self.get(k);
            b = b.opt_field(k.as_str(), (v != 0).then_some(&v));
        }
        b.build()
    }

    /// Reads a bare grant: every member ≥ 1 and at most [`MAX_EXTENSION`], at least one.
    pub(crate) fn from_grant_json(value: &Json, max: u64) -> Result<BudgetExtension, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let mut e = BudgetExtension::default();
        for k in BudgetKind::EVERY {
            match r.optional::<u64>(k.as_str())? {
                None => {}
                Some(n) if n == 0 || n > max => {
                    return Err(DecodeError::invalid(format!("an extension of {} must be 1 to {max}", k.as_str())).in_member(k.as_str()))
                }
                Some(n) => e.set(k, n),
            }
        }
        r.finish()?;
        if e.is_empty() {
            return Err(DecodeError::invalid("an extension grants at least one kind".to_owned()));
        }
        Ok(e)
    }
}

/// The host's answer to a budget question.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BudgetAnswer {
    /// Raise the run's limits by this much; the run goes on where it stopped (and asks again
    /// if the next step still does not fit).
    Extend(BudgetExtension),
    /// Refuse: the run fails with the budget failure it would have failed with.
    Decline,
}

impl BudgetAnswer {
    /// The answer's JSON (pass it to `Run::answer`): `{"extend":{...}}` or `{"decline":true}`.
    pub fn to_json(&self) -> Json {
        <Self as ToJson>::to_json(self)
    }
}

impl ToJson for BudgetAnswer {
    fn to_json(&self) -> Json {
        match self {
            BudgetAnswer::Extend(e) => ObjectBuilder::new().value("extend", e.grant_json()).build(),
            BudgetAnswer::Decline => ObjectBuilder::new().field("decline", &true).build(),
        }
    }
}

impl FromJson for BudgetAnswer {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let answer = if r.has("extend") {
            let e = BudgetExtension::from_grant_json(r.required_value("extend")?, MAX_EXTENSION)
                .map_err(|e| e.in_member("extend"))?;
            BudgetAnswer::Extend(e)
        } else {
            match r.required::<bool>("decline")? {
                true => BudgetAnswer::Decline,
                false => return Err(DecodeError::invalid("`decline` is `true`; to extend, answer `{\"extend\":{...}}`".to_owned()).in_member("decline")),
            }
        };
        r.finish()?;
        Ok(answer)
    }
}

/// What a run asks when a limit ran out: which limit, its value (declared plus granted so far),
/// what was spent, and what the next step would need (`None` for time: any time left).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BudgetQuestion {
    pub kind: BudgetKind,
    pub limit: u64,
    pub spent: u64,
    pub needs: Option<u64>,
}

impl BudgetQuestion {
    /// The question a prompt carries, or `None` when the prompt is not a budget question (a
    /// tool's own question).
    pub fn from_prompt(prompt: &Json) -> Option<BudgetQuestion> {
        let body = prompt.get("budget_exhausted")?;
        BudgetQuestion::from_json(body).ok()
    }

    /// The text shown with the figures.
    pub fn text(&self) -> String {
        let needs = match self.needs {
            Some(n) => format!(", the next step needs {n}"),
            None => String::new(),
        };
        format!(
            "the run's {} budget is exhausted (limit {}, spent {}{needs}); answer {{\"extend\":{{\"{}\":n}}}} to extend it or {{\"decline\":true}} to end the run",
            self.kind.as_str(),
            self.limit,
            self.spent,
            self.kind.as_str()
        )
    }

    /// The prompt: the figures and the text.
    pub fn prompt(&self) -> Json {
        ObjectBuilder::new().value("budget_exhausted", self.to_json()).field("question", &self.text()).build()
    }

    /// The input request the wait carries (no continuation state: the run's own state resumes).
    pub fn input_request(&self) -> Result<ToolInputRequest, String> {
        let schema = parse(BUDGET_ANSWER_SCHEMA.as_bytes()).map_err(|e| format!("budget answer schema: {e}"))?;
        ToolInputRequest::from_values(self.prompt(), schema, Json::object()).map_err(|e| e.to_string())
    }
}

impl ToJson for BudgetQuestion {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .field("kind", self.kind.as_str())
            .field("limit", &self.limit)
            .opt_field("needs", self.needs.as_ref())
            .field("spent", &self.spent)
            .build()
    }
}

impl FromJson for BudgetQuestion {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let name: String = r.required("kind")?;
        let kind = BudgetKind::from_name(&name).ok_or_else(|| DecodeError::invalid("unknown budget kind".to_owned()).in_member("kind"))?;
        let q = BudgetQuestion { kind, limit: r.required("limit")?, needs: r.optional("needs")?, spent: r.required("spent")? };
        r.finish()?;
        Ok(q)
    }
}

/// A question the run is asking (the parent state's `budget_question`, only in the phases
/// `awaiting_budget_wait_open` and `waiting_budget_answer`).
///
/// Wire form: `{"question":BudgetQuestion,"failure":S,"applied_steer_signal_ids"?:[SignalId],
/// "wait_id"?:WaitId}`: `failure` is the message a decline fails with; the steer ids are those
/// applied to the context for the model call the question stopped (reported with that call
/// once it is declared); `wait_id` is set once the wait opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingBudgetQuestion {
    pub question: BudgetQuestion,
    pub failure: String,
    pub applied_steer_signal_ids: Vec<SignalId>,
    pub wait_id: Option<WaitId>,
}

impl ToJson for PendingBudgetQuestion {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .nonempty_field("applied_steer_signal_ids", &self.applied_steer_signal_ids)
            .field("failure", &self.failure)
            .field("question", &self.question)
            .opt_field("wait_id", self.wait_id.as_ref())
            .build()
    }
}

impl FromJson for PendingBudgetQuestion {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let applied: Vec<SignalId> = r.optional_vec("applied_steer_signal_ids")?;
        if r.has("applied_steer_signal_ids") && applied.is_empty() {
            return Err(DecodeError::invalid("an empty list is omitted, not written".to_owned()).in_member("applied_steer_signal_ids"));
        }
        let q = PendingBudgetQuestion {
            applied_steer_signal_ids: applied,
            failure: r.required("failure")?,
            question: r.required("question")?,
            wait_id: r.optional("wait_id")?,
        };
        r.finish()?;
        Ok(q)
    }
}

/// The key of a run's `number`th budget question (1, 2, ...): every question has its own.
pub fn budget_wait_key(number: u32) -> Result<crate::kernel::ids::WaitKey, crate::interaction::error::InteractionError> {
    crate::kernel::ids::WaitKey::parse(&format!("{BUDGET_WAIT_KEY_PREFIX}{number}"))
        .map_err(|e| crate::interaction::error::InteractionError::invalid_state(format!("derived wait key: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Schema;

    #[test]
    fn answers_round_trip_and_bad_ones_are_refused_by_schema_and_decoder_alike() {
        let schema = Schema::compile(&parse(BUDGET_ANSWER_SCHEMA.as_bytes()).unwrap()).unwrap();
        let extend = BudgetExtension::new().total_tokens(5).tool_calls(2).to_json();
        assert_eq!(extend.to_canonical_string(), r#"{"extend":{"tool_calls":2,"total_tokens":5}}"#);
        assert!(schema.validate(&extend).is_ok());
        let decoded = BudgetAnswer::from_json(&extend).unwrap();
        assert_eq!(decoded, BudgetAnswer::Extend(BudgetExtension::new().total_tokens(5).tool_calls(2)));
        let decline = BudgetAnswer::Decline.to_json();
        assert!(schema.validate(&decline).is_ok());
        assert_eq!(BudgetAnswer::from_json(&decline).unwrap(), BudgetAnswer::Decline);
        for bad in [
            r#"{"extend":{}}"#,
            r#"{"extend":{"total_tokens":0}}"#,
            r#"{"extend":{"tokens":5}}"#,
            r#"{"extend":{"total_tokens":9007199254740992}}"#,
            r#"{"decline":false}"#,
            r#"{"extend":{"total_tokens":1},"decline":true}"#,
            r#""more please""#,
        ] {
            let v = parse(bad.as_bytes()).unwrap();
            assert!(schema.validate(&v).is_err(), "schema accepts {bad}");
            assert!(BudgetAnswer::from_json(&v).is_err(), "decoder accepts {bad}");
        }
    }

    #[test]
    fn the_prompt_carries_a_typed_question() {
        let q = BudgetQuestion { kind: BudgetKind::TotalTokens, limit: 100, spent: 90, needs: Some(30) };
        let request = q.input_request().unwrap();
        assert_eq!(BudgetQuestion::from_prompt(request.prompt().value()), Some(q));
        assert!(q.text().contains("limit 100, spent 90, the next step needs 30"), "{}", q.text());
        assert_eq!(BudgetQuestion::from_prompt(&Json::str("Which city?")), None);
        let t = BudgetQuestion { kind: BudgetKind::Time, limit: 500, spent: 700, needs: None };
        assert_eq!(BudgetQuestion::from_json(&t.to_json()).unwrap(), t);
        let p = PendingBudgetQuestion { question: t, failure: "x".into(), applied_steer_signal_ids: vec![], wait_id: None };
        assert_eq!(PendingBudgetQuestion::from_json(&p.to_json()).unwrap(), p);
        let sum = BudgetExtension::new().time(std::time::Duration::from_millis(5)).saturating_add(BudgetExtension::new().input_tokens(1));
        assert_eq!(BudgetExtension::from_grant_json(&sum.grant_json(), u64::MAX).unwrap(), sum);
    }
}
