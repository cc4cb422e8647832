//! C: completion evaluation with the optional validator.

use super::{invalid, Machine};
use crate::chat::Message;
use crate::interaction::codes;
use crate::interaction::completion::CompletionCandidate;
use crate::interaction::output::Output;
use crate::interaction::protocol::EncodedResponse;
use crate::interaction::state::Phase;
use crate::interaction::wire::Wire;
use crate::kernel::transition::Transition;
use crate::kernel::waist::StepError;

impl Machine<'_> {
    /// Accept → Complete(Output). Reject → the completion context and the feedback become
    /// history and the next model call follows (no steer is pending here); only a run with a
    /// validator needs `completion_context`. `response`, when given, is the encoding of the
    /// Output's model response ([`Output::payload_of_valid`]).
    pub(super) fn evaluate_completion(
        &mut self,
        output: Output,
        completion_context: Vec<Message>,
        response: Option<EncodedResponse<'_>>,
    ) -> Result<Transition, StepError> {
        output.validate().map_err(|e| invalid(format!("completion candidate: {}", e.detail())))?;
        if let Some(validator) = self.rules.validator.clone() {
            // The validator sees the context *preceding* the candidate.
            let candidate = CompletionCandidate::new(self.s.working_context.to_request(), output.clone(), self.s.artifacts());
            let decision = match validator(&candidate) {
                Ok(decision) => decision,
                Err(text) => return Ok(self.fail(codes::failure(codes::COMPLETION_VALIDATOR_FAILED, &text))),
            };
            if let Err(rule) = decision.validate() {
                return Ok(self.fail(codes::failure(
                    codes::COMPLETION_DECISION_INVALID,
                    &format!("completion validator returned an invalid decision: {rule}"),
                )));
            }
            if !decision.accepted {
                self.s.working_context.extend(completion_context);
                self.s.working_context.push(Message::user(decision.feedback));
                self.s.tool_round = None;
                self.s.pending_steer = None;
                self.s.phase = Phase::ReadyModel;
                return self.request_model(Vec::new());
            }
        }
        let payload = output.payload_of_valid(response)?;
        self.s.tool_round = None;
        self.s.pending_steer = None;
        self.s.final_output = Some(output);
        self.s.phase = Phase::Completed;
        Ok(Transition::Complete { consumed: self.consumed, output: payload })
    }
}
