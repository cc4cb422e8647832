//! Q, T6, T7: asking the host to extend a budget instead of failing
//! ([`OnExhausted::AskHuman`]; see [`crate::interaction::budget_question`]).
//!
//! Only the run's own limits ask (its budget plus what the host granted): a limit set by a
//! parent's grant or deadline fails as without the policy, so a shared tree budget is asked
//! about by the run that declared it, when its own next step does not fit.

use super::{count, invalid, Machine};
use crate::interaction::budget::{Exhausted, Limits, OnExhausted};
use crate::interaction::budget_question::{budget_wait_key, BudgetAnswer, BudgetQuestion, PendingBudgetQuestion};
use crate::interaction::codes;
use crate::interaction::error::{ErrorKind, InteractionError};
use crate::interaction::protocol::WaitOpenedPayload;
use crate::interaction::run_clock::TimeExhausted;
use crate::interaction::signals::{classify_signal, IncomingSignal};
use crate::interaction::state::Phase;
use crate::interaction::wire::Wire;
use crate::json::FromJson;
use crate::kernel::effect::{Effect, FrameworkEffect};
use crate::kernel::failure::Failure;
use crate::kernel::ids::SignalId;
use crate::kernel::signal::Signal;
use crate::kernel::transition::Transition;
use crate::kernel::waist::StepError;

/// Which amount exhaustions ask: `own` are the run's own limits (with grants), `None` when
/// the policy does not ask.
#[derive(Clone, Copy)]
pub(super) struct QuestionRule {
    own: Option<Limits>,
}

impl QuestionRule {
    /// The question for `exhausted`, when it is an own limit and the policy asks.
    pub(super) fn question(&self, exhausted: &Exhausted) -> Option<BudgetQuestion> {
        let own = self.own?.get(exhausted.kind)?;
        (own == exhausted.limit).then_some(BudgetQuestion {
            kind: exhausted.kind,
            limit: exhausted.limit,
            spent: exhausted.spent,
            needs: Some(exhausted.reserved),
        })
    }
}

impl Machine<'_> {
    fn asks(&self) -> bool {
        self.rules.budget.budget.exhaustion_policy() == OnExhausted::AskHuman
    }

    pub(super) fn own_question_rule(&self) -> QuestionRule {
        QuestionRule { own: self.asks().then(|| self.s.own_limits(self.rules.budget.budget.limits())) }
    }

    /// The question for a passed deadline, when the run's own limit set it and the policy asks.
    pub(super) fn own_time_question(&self, exhausted: &TimeExhausted) -> Option<BudgetQuestion> {
        let limit = exhausted.limit_ms.filter(|_| self.asks())?;
        Some(BudgetQuestion { kind: crate::interaction::budget::BudgetKind::Time, limit, spent: exhausted.elapsed_ms.unwrap_or(0), needs: None })
    }

    /// Fails with `failure`, or (Q) asks `question`: declares the question's wait. `applied`
    /// are the steers already made visible for the model call the question stops.
    pub(super) fn ask_or_fail(
        &mut self,
        failure: Failure,
        question: Option<BudgetQuestion>,
        applied: Vec<SignalId>,
    ) -> Result<Transition, StepError> {
        let Some(question) = question else { return Ok(self.fail(failure)) };
        let number = self.s.budget_questions.checked_add(1).ok_or_else(|| invalid("budget question count exhausted"))?;
        let input_request = question.input_request().map_err(invalid)?;
        let payload = WaitOpenedPayload { input_request }.to_payload()?;
        let key = budget_wait_key(number)?;
        self.s.budget_questions = number;
        self.s.budget_question = Some(PendingBudgetQuestion {
            question,
            failure: failure.message.as_str().to_owned(),
            applied_steer_signal_ids: applied,
            wait_id: None,
        });
        self.s.phase = Phase::AwaitingBudgetWaitOpen;
        Ok(Transition::Continue {
            consumed: self.consumed,
            effects: vec![Effect::Framework(FrameworkEffect::Wait { key, payload: Some(payload) })],
        })
    }

    /// T6: the opening must echo the question under its key; park on it. Steers before it are
    /// admitted; anything after it (an answer) belongs to the next Step.
    pub(super) fn on_budget_wait_open(&mut self, signals: &[Signal]) -> Result<Transition, StepError> {
        let mut steers = Vec::new();
        let mut opened = None;
        for (i, signal) in signals.iter().enumerate() {
            match classify_signal(signal)? {
                IncomingSignal::Steer(s) => steers.push(s),
                IncomingSignal::Kernel(k) => {
                    opened = Some(WaitOpenedPayload::from_signal(k)?);
                    self.consumed = count(i + 1)?;
                    break;
                }
                _ => return Err(invalid(format!("awaiting_budget_wait_open got an unexpected signal {}", signal.id()))),
            }
        }
        let opened = opened.ok_or_else(|| invalid("awaiting_budget_wait_open needs the wait opening"))?;
        self.admit(&steers)?;
        let question = self.s.budget_question.as_mut().ok_or_else(|| invalid("no budget question"))?;
        if opened.key != budget_wait_key(self.s.budget_questions)? {
            return Err(invalid("the wait opening is for another wait key"));
        }
        if opened.payload.input_request != question.question.input_request().map_err(invalid)? {
            return Err(invalid("the wait opening carries another question"));
        }
        question.wait_id = Some(opened.wait_id.clone());
        self.s.phase = Phase::WaitingBudgetAnswer;
        Ok(Transition::Wait { consumed: self.consumed, wait_id: opened.wait_id })
    }

    /// T7: the answer (plus steers). An extension is added to the durable grants and the run
    /// goes on where it stopped: R without a round, S with one (which asks again if the step
    /// still does not fit). A decline fails with the budget failure.
    pub(super) fn on_budget_answer(&mut self, signals: &[Signal]) -> Result<Transition, StepError> {
        let mut steers = Vec::new();
        let mut answer = None;
        for signal in signals {
            match classify_signal(signal)? {
                IncomingSignal::Steer(s) => steers.push(s),
                IncomingSignal::InputResponse { wait_id, response } if answer.is_none() => answer = Some((wait_id, response)),
                _ => return Err(invalid(format!("waiting_budget_answer got an unexpected signal {}", signal.id()))),
            }
        }
        let (wait_id, response) = answer.ok_or_else(|| invalid("waiting_budget_answer needs the answer"))?;
        self.consumed = count(signals.len())?;
        let pending = self.s.budget_question.take().ok_or_else(|| invalid("no budget question"))?;
        if pending.wait_id.as_ref() != Some(&wait_id) {
            return Err(invalid("the answer addresses another wait"));
        }
        let refused = |detail: String| StepError::from(InteractionError::new(ErrorKind::InvalidToolInputRequest, detail));
        pending
            .question
            .input_request()
            .map_err(invalid)?
            .validate_response(response.response.value())
            .map_err(|e| refused(e.to_string()))?;
        let answer = BudgetAnswer::from_json(response.response.value()).map_err(|e| refused(format!("budget answer: {e}")))?;
        self.admit(&steers)?;
        match answer {
            BudgetAnswer::Decline => Ok(self.fail(codes::failure(
                pending.question.kind.code(),
                &format!("{}; the host declined to extend it", pending.failure),
            ))),
            BudgetAnswer::Extend(extension) => {
                self.s.extended = self.s.extended.saturating_add(extension);
                #[cfg(feature = "mutations")]
                if crate::mutation::active(crate::mutation::Mutation::BudgetGrantedTwice) {
                    // MUTATION: the grant is applied a second time.
                    self.s.extended = self.s.extended.saturating_add(extension);
                }
                if self.s.tool_round.is_some() {
                    self.schedule_tools()
                } else {
                    self.s.phase = Phase::ReadyModel;
                    let mut applied = pending.applied_steer_signal_ids;
                    applied.extend(self.apply_pending());
                    self.request_model(applied)
                }
            }
        }
    }
}
