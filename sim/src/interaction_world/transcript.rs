//! Recorded runs as scenarios: a `keel::transcript` file (what a real run asked its model and
//! tools, and what they answered) becomes an Interaction-world spec whose model serves the
//! recorded responses in call order and whose tools serve the recorded results by call id.
//!
//! A campaign over it runs the real Interaction on the real Engine under madsim with the
//! world's commit faults (crash after, lost acknowledgement, failure before a commit) and, per
//! seed, may turn one recorded tool call into an Unknown outcome (panic, host failure,
//! cancellation, deadline) whose truth is the recorded result: the host restores, settles from
//! truth and the run must end with the recorded answer. Recorded timing is never used: the
//! simulated latencies come from the seed.

use super::declared::expected_of;
use super::scenarios::guarded_outcome;
use super::spec::{CallSpec, ConcurrencySpec, ExpectStatus, Finish, Outcome, RecordedCall, Spec, ToolSpec, Turn};
use crate::coverage::{Coverage, Expected};
use crate::swarm_rng::SwarmRng;
use crate::world::{RunOptions, RunReport, Scenario};
use keel::chat::{FinishReason, Role};
use keel::transcript::{ModelOutcome, ToolOutcome, Transcript};

/// Commit faults per mille a transcript campaign draws at every commit.
pub const TRANSCRIPT_CRASH_PER_MILLE: u64 = 40;
pub const TRANSCRIPT_LOSE_ACK_PER_MILLE: u64 = 20;
pub const TRANSCRIPT_FAIL_BEFORE_PER_MILLE: u64 = 20;
/// Percent of seeds whose run turns one recorded tool call into an Unknown outcome.
pub const TRANSCRIPT_TOOL_FAULT_PERCENT: u64 = 50;

/// The Unknown outcomes a seed may inject on a recorded tool call.
const TOOL_FAULTS: [Outcome; 4] = [Outcome::Panic, Outcome::HostFailure, Outcome::Cancel, Outcome::Deadline];

/// Why a transcript cannot be replayed.
#[derive(Debug, thiserror::Error)]
pub enum TranscriptSpecError {
    #[error("the transcript has no model calls")]
    Empty,
    #[error("model call {0} ended with an unknown outcome: a replay has no answer to serve for it (record a run whose calls all answered)")]
    UnknownModelCall(u64),
    #[error("tool call `{0}` asked for input and was never answered in the recorded run: record a run whose input requests were all answered")]
    InputRequired(String),
    #[error("calls of tool `{0}` asked for input a different number of times: a replayed tool pauses the same number of times on every call")]
    UnevenPauses(String),
    #[error("tool call `{0}` appears twice in the transcript (call ids must be unique)")]
    DuplicateCall(String),
}

fn finish_of(f: Option<FinishReason>) -> Finish {
    match f {
        Some(FinishReason::ToolCalls) => Finish::ToolCalls,
        Some(FinishReason::Stop) | None => Finish::Stop,
        Some(FinishReason::Length) => Finish::Length,
        Some(FinishReason::ContentFilter) => Finish::ContentFilter,
        Some(FinishReason::Refusal) => Finish::Refusal,
        Some(FinishReason::Other) => Finish::Other,
    }
}

/// The spec that replays `transcript` (without faults; [`TranscriptScenario`] adds them).
pub fn spec_of_transcript(name: &str, transcript: &Transcript) -> Result<Spec, TranscriptSpecError> {
    let first = transcript.model_calls.first().ok_or(TranscriptSpecError::Empty)?;
    let mut spec = Spec::minimal(name);
    spec.description = format!(
        "recorded run: {} model calls and {} tool calls served from the transcript",
        transcript.model_calls.len(),
        transcript.tool_calls.len()
    );
    spec.user = first.request.messages.iter().rev().find(|m| m.role == Role::User).map(|m| m.text()).unwrap_or_default();
    for call in &transcript.model_calls {
        spec.model.turns.push(match &call.outcome {
            ModelOutcome::Response(r) => {
                let finish = finish_of(r.finish_reason);
                let calls: Vec<CallSpec> = r
                    .tool_calls()
                    .into_iter()
                    .map(|c| CallSpec { id: c.id.clone(), name: c.name.clone(), arguments: c.arguments.clone() })
                    .collect();
                if calls.is_empty() {
                    Turn::Text { text: r.message.as_ref().map(|m| m.text()).unwrap_or_default(), finish }
                } else {
                    Turn::Calls { calls, finish }
                }
            }
            ModelOutcome::Error { class, message } if class == "provider" => Turn::ProviderError { message: message.clone() },
            ModelOutcome::Error { class, message } if class == "host" => Turn::HostError { message: message.clone() },
            ModelOutcome::Error { .. } => return Err(TranscriptSpecError::UnknownModelCall(call.sequence)),
        });
    }
    let calls = u32::try_from(spec.model.turns.len()).unwrap_or(u32::MAX);
    spec.max_model_calls = calls;
    // A call that asked for input is recorded once per request it made, then once more with
    // its outcome once answered: replayed as a tool pausing that many times (the simulated
    // host answers), then serving the recorded outcome.
    let mut asked: std::collections::BTreeMap<&str, u32> = std::collections::BTreeMap::new();
    for call in &transcript.tool_calls {
        if matches!(&call.outcome, ToolOutcome::Error { class, .. } if class == "input_required") {
            *asked.entry(call.id.as_str()).or_insert(0) += 1;
        }
    }
    for call in &transcript.tool_calls {
        let result = match &call.outcome {
            ToolOutcome::Result(text) => Ok(text.clone()),
            ToolOutcome::Error { class, .. } if class == "input_required" => continue,
            ToolOutcome::Error { message, .. } => Err(message.clone()),
        };
        if spec.all_tools().any(|t| t.recorded(&call.id).is_some()) {
            return Err(TranscriptSpecError::DuplicateCall(call.id.clone()));
        }
        let pauses = asked.remove(call.id.as_str()).unwrap_or(0);
        let recorded = RecordedCall { id: call.id.clone(), result, fault: None };
        match spec.tools.iter_mut().find(|t| t.name == call.name) {
            Some(tool) if tool.pauses != pauses => return Err(TranscriptSpecError::UnevenPauses(call.name.clone())),
            Some(tool) => tool.recorded.push(recorded),
            None => spec.tools.push(ToolSpec {
                name: call.name.clone(),
                concurrency: ConcurrencySpec::Exclusive,
                latency_ms: (1, 5),
                outcome: Outcome::Text,
                direct: false,
                pauses,
                advertises: Vec::new(),
                strict_arguments: false,
                recorded: vec![recorded],
            }),
        }
    }
    if let Some(id) = asked.keys().next() {
        return Err(TranscriptSpecError::InputRequired((*id).to_owned()));
    }
    // The recorded run's answer is what every replay, crashed or not, must end with.
    if let Some(Turn::Text { text, finish: Finish::Stop }) = spec.model.turns.last() {
        spec.expect.status = Some(ExpectStatus::Completed);
        spec.expect.output_text = Some(text.clone());
        spec.expect.model_calls = Some(calls);
    }
    spec.faults.crash_per_mille = TRANSCRIPT_CRASH_PER_MILLE;
    spec.faults.lose_ack_per_mille = TRANSCRIPT_LOSE_ACK_PER_MILLE;
    spec.faults.fail_before_per_mille = TRANSCRIPT_FAIL_BEFORE_PER_MILLE;
    Ok(spec)
}

/// A transcript run as a scenario: commit faults every seed, and on some seeds one recorded
/// tool call made Unknown.
pub struct TranscriptScenario {
    pub spec: Spec,
    pub replay_name: String,
    expected: Expected,
}

/// The recorded tool calls that succeeded (the ones a fault may be injected on).
fn injectable(spec: &Spec) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for (t, tool) in spec.tools.iter().enumerate() {
        for (c, call) in tool.recorded.iter().enumerate() {
            if call.result.is_ok() {
                out.push((t, c));
            }
        }
    }
    out
}

impl TranscriptScenario {
    pub fn new(spec: Spec, replay_name: String) -> TranscriptScenario {
        // What it sets out to exercise: the replayed spec's own features plus, when a call
        // can be faulted, every Unknown outcome (settled from truth).
        let mut expected = expected_of(&spec);
        if let Some(&(t, _)) = injectable(&spec).first() {
            for fault in TOOL_FAULTS {
                let mut faulted = spec.clone();
                faulted.tools[t].outcome = fault;
                expected = expected.union(expected_of(&faulted));
            }
        }
        TranscriptScenario { spec, replay_name, expected }
    }

    /// The spec of `seed`: the transcript's, with the seed's tool fault (if any).
    fn spec_for(&self, seed: u64) -> (Spec, Option<String>) {
        let mut spec = self.spec.clone();
        let mut rng = SwarmRng::new(seed, 0x7A5C);
        let targets = injectable(&spec);
        if targets.is_empty() || !rng.percent(TRANSCRIPT_TOOL_FAULT_PERCENT) {
            return (spec, None);
        }
        let (t, c) = targets[rng.below(targets.len() as u64) as usize];
        let fault = TOOL_FAULTS[rng.below(TOOL_FAULTS.len() as u64) as usize];
        let call = &mut spec.tools[t].recorded[c];
        call.fault = Some(fault);
        let label = format!("{}:{}", call.id, fault.as_str());
        (spec, Some(label))
    }
}

impl Scenario for TranscriptScenario {
    fn name(&self) -> &str {
        &self.spec.name
    }
    fn replay_name(&self) -> &str {
        &self.replay_name
    }
    fn description(&self) -> &str {
        &self.spec.description
    }
    fn coverage(&self) -> Option<&'static Coverage> {
        Some(&super::COVERAGE)
    }
    fn expected_coverage(&self) -> Expected {
        self.expected.clone()
    }
    fn run(&self, seed: u64, options: &RunOptions) -> RunReport {
        let (spec, fault) = self.spec_for(seed);
        let mut report = guarded_outcome(&self.spec.name, &spec, seed, options).report;
        report.swarm.insert("transcript.tool_fault".into(), fault.unwrap_or_else(|| "none".into()));
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel::chat::{Message, Request, Response, ToolCall, Usage};
    use keel::transcript::{ModelCallRecord, ToolCallRecord};

    fn model_call(sequence: u64, response: Response) -> ModelCallRecord {
        ModelCallRecord {
            sequence,
            started_ms: 0,
            ended_ms: 1,
            request: Request::new(vec![Message::user("Which city?")]),
            outcome: ModelOutcome::Response(response),
        }
    }

    fn tool_call(outcome: ToolOutcome, answer: Option<&str>) -> ToolCallRecord {
        ToolCallRecord {
            id: "call_ask".into(),
            name: "ask_user".into(),
            arguments: r#"{"question":"Which city?"}"#.into(),
            started_ms: 0,
            ended_ms: 1,
            outcome,
            answer: answer.map(str::to_owned),
        }
    }

    fn transcript(answered: bool) -> Transcript {
        let asks = Response::new(
            Message::assistant_with_calls("", vec![ToolCall::new("call_ask", "ask_user", r#"{"question":"Which city?"}"#)]),
            FinishReason::ToolCalls,
            Usage::new(1, 1),
        );
        let done = Response::new(Message::assistant("Paris it is."), FinishReason::Stop, Usage::new(1, 1));
        let mut tool_calls = vec![tool_call(ToolOutcome::Error { class: "input_required".into(), message: "input required".into() }, None)];
        if answered {
            tool_calls.push(tool_call(ToolOutcome::Result("Paris".into()), Some("\"Paris\"")));
        }
        Transcript { model_calls: vec![model_call(1, asks), model_call(2, done)], tool_calls, dropped: 0 }
    }

    #[test]
    fn a_recorded_run_with_an_answered_question_replays_as_a_pausing_tool() {
        let spec = spec_of_transcript("asked", &transcript(true)).unwrap();
        assert_eq!(spec.tools.len(), 1);
        assert_eq!(spec.tools[0].pauses, 1, "the question paused once");
        assert_eq!(spec.tools[0].recorded[0].result.as_deref(), Ok("Paris"));
        let scenario = TranscriptScenario::new(spec, "asked".into());
        for seed in 0..40 {
            let report = scenario.run(seed, &RunOptions::default());
            assert!(report.passed(), "{report}");
        }
    }

    #[test]
    fn a_question_never_answered_is_a_typed_error_naming_the_call() {
        let e = spec_of_transcript("asked", &transcript(false)).unwrap_err();
        assert!(matches!(&e, TranscriptSpecError::InputRequired(id) if id == "call_ask"), "{e}");
        assert!(e.to_string().contains("never answered"), "{e}");
    }
}
