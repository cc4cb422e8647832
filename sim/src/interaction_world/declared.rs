//! What a scenario file sets out to exercise, read from its content: the fault kinds of the
//! Interaction world's vocabulary that the features it writes down fire. A campaign over the
//! file flags those that never fired (a tool the script never reaches, a host action whose
//! trigger never comes) and stays quiet about features the file does not use.
//!
//! The rule per feature, walking the root's scripted turns up to `max_model_calls`:
//! * a turn with calls and a finish other than `tool_calls` → `model.calls_with_<finish>`;
//!   `provider_error` / `host_error` turns → `model.provider_error` / `model.host_failure`;
//! * each call (of a turn finishing `tool_calls`) of a tool the model can see (an initial tool, or a deferred one a tool called
//!   in an earlier turn advertises) with arguments the tool accepts → `tool.<outcome>`, plus
//!   `tool.input_request` and `host.input.answer` when it pauses, `tool.advertise` /
//!   `tool.direct` for a text outcome that advertises / is direct, and the Unknown policy's
//!   kind (`unknown.truth_ran`, `unknown.fail`, `unknown.kill`, `unknown.leave`) when the
//!   outcome leaves the call Unknown;
//! * a call of the delegate → the delegate's turns, by the same turn rule;
//! * `mode: stream` → `model.streamed`; `reducer` → `model.reduced`;
//! * each host action → its kind (`host.steer`, `host.steer.duplicate`, `host.steer.conflict`,
//!   `host.input.stale`, `host.kill`, `host.cancel`); `answer_order: reverse` with two pausing
//!   calls in one turn → `host.input.reverse`;
//! * a budget with `on_exhausted: ask_human` and `answers` → `host.input.answer`;
//! * each commit fault kind the file names (at a commit or per mille) → `commit.<kind>` and
//!   `host.crash` (every commit fault stops the writer).
//!
//! No crash point is required: the file names commit indices and probabilities, and which
//! boundary a commit is belongs to the run. The crash points that do fire are listed.

use std::collections::BTreeSet;

use super::spec::{Action, CommitFaultKind, Finish, ModelMode, ModelSpec, Outcome, Spec, ToolSpec, Turn, UnknownPolicy};
use crate::coverage::Expected;

/// The fault kinds `spec` sets out to fire (see the module docs).
pub fn expected_of(spec: &Spec) -> Expected {
    let mut kinds: BTreeSet<&'static str> = BTreeSet::new();
    let mut advertised: BTreeSet<&str> = BTreeSet::new();
    let mut delegate_called = false;
    for turn in spec.model.turns.iter().take(spec.max_model_calls as usize) {
        turn_kinds(turn, &mut kinds);
        // Calls under any other finish are not run (the turn was cut short or refused).
        let Turn::Calls { calls, finish: Finish::ToolCalls } = turn else { continue };
        let mut pausing = 0;
        let mut advertised_now: Vec<&str> = Vec::new();
        for call in calls {
            if spec.delegate.as_ref().is_some_and(|d| d.name == call.name) {
                delegate_called = true;
                continue;
            }
            let visible = spec.tools.iter().find(|t| t.name == call.name).or_else(|| {
                spec.deferred_tools.iter().find(|t| t.name == call.name && advertised.contains(t.name.as_str()))
            });
            let Some(tool) = visible else { continue };
            if !accepts(tool, &call.arguments) {
                continue;
            }
            tool_kinds(tool, spec.unknown_policy, &mut kinds);
            if tool.pauses > 0 {
                pausing += 1;
            }
            if tool.outcome == Outcome::Text {
                advertised_now.extend(tool.advertises.iter().map(String::as_str));
            }
        }
        advertised.extend(advertised_now);
        if pausing > 1 && spec.answer_order == super::spec::AnswerOrder::Reverse {
            kinds.insert("host.input.reverse");
        }
    }
    model_kinds(&spec.model, &mut kinds);
    if let Some(d) = spec.delegate.as_ref().filter(|_| delegate_called) {
        for turn in d.model.turns.iter().take(d.max_model_calls as usize) {
            turn_kinds(turn, &mut kinds);
        }
        model_kinds(&d.model, &mut kinds);
    }
    // A budget that asks, with the host's answers written down: the file sets out to run out
    // and have the host answer.
    if spec.budget.is_some_and(|b| b.exhaustion_policy() == keel::interaction::budget::OnExhausted::AskHuman) && !spec.budget_answers.is_empty() {
        kinds.insert("host.input.answer");
    }
    for action in &spec.host {
        kinds.insert(match action.action {
            Action::Steer { .. } => "host.steer",
            Action::DuplicateSteer { .. } => "host.steer.duplicate",
            Action::ConflictSteer { .. } => "host.steer.conflict",
            Action::StaleAnswer => "host.input.stale",
            Action::Kill => "host.kill",
            Action::Cancel => "host.cancel",
        });
    }
    let f = &spec.faults;
    let per_mille = [
        (CommitFaultKind::CrashAfter, f.crash_per_mille),
        (CommitFaultKind::LoseAck, f.lose_ack_per_mille),
        (CommitFaultKind::FailBefore, f.fail_before_per_mille),
    ];
    let named = f.at.iter().map(|(_, k)| *k).chain(per_mille.iter().filter(|(_, p)| *p > 0).map(|(k, _)| *k));
    for kind in named {
        kinds.insert(commit_kind(kind));
        kinds.insert("host.crash");
    }
    Expected::Only {
        fault_kinds: kinds.into_iter().map(str::to_string).collect(),
        crash_points: BTreeSet::new(),
    }
}

fn turn_kinds(turn: &Turn, kinds: &mut BTreeSet<&'static str>) {
    match turn {
        Turn::Calls { calls, finish } if !calls.is_empty() && *finish != Finish::ToolCalls => {
            kinds.insert(match finish {
                Finish::Stop => "model.calls_with_stop",
                Finish::Length => "model.calls_with_length",
                Finish::ContentFilter => "model.calls_with_content_filter",
                Finish::Refusal => "model.calls_with_refusal",
                Finish::Other | Finish::ToolCalls => "model.calls_with_other",
            });
        }
        Turn::ProviderError { .. } => {
            kinds.insert("model.provider_error");
        }
        Turn::HostError { .. } => {
            kinds.insert("model.host_failure");
        }
        Turn::Calls { .. } | Turn::Text { .. } => {}
    }
}

fn model_kinds(model: &ModelSpec, kinds: &mut BTreeSet<&'static str>) {
    if model.mode == ModelMode::Stream {
        kinds.insert("model.streamed");
    }
    if model.reducer {
        kinds.insert("model.reduced");
    }
}

fn tool_kinds(tool: &ToolSpec, policy: UnknownPolicy, kinds: &mut BTreeSet<&'static str>) {
    kinds.insert(match tool.outcome {
        Outcome::Text => "tool.text",
        Outcome::Error => "tool.error",
        Outcome::Panic => "tool.panic",
        Outcome::HostFailure => "tool.host_failure",
        Outcome::Cancel => "tool.cancel",
        Outcome::Deadline => "tool.deadline",
    });
    if tool.pauses > 0 {
        kinds.insert("tool.input_request");
        kinds.insert("host.input.answer");
    }
    if tool.outcome == Outcome::Text && !tool.advertises.is_empty() {
        kinds.insert("tool.advertise");
    }
    if tool.outcome == Outcome::Text && tool.direct {
        kinds.insert("tool.direct");
    }
    if tool.outcome.is_unknown() {
        kinds.insert(match policy {
            UnknownPolicy::Truth => "unknown.truth_ran",
            UnknownPolicy::Fail => "unknown.fail",
            UnknownPolicy::Kill => "unknown.kill",
            UnknownPolicy::Leave => "unknown.leave",
        });
    }
}

fn commit_kind(kind: CommitFaultKind) -> &'static str {
    match kind {
        CommitFaultKind::CrashAfter => "commit.crash_after",
        CommitFaultKind::LoseAck => "commit.lose_ack",
        CommitFaultKind::FailBefore => "commit.fail_before",
    }
}

/// Whether the tool runs for these arguments: they are a JSON object, with a string `q` when
/// the tool's schema requires one (otherwise the call is refused before the tool runs).
fn accepts(tool: &ToolSpec, arguments: &str) -> bool {
    let Ok(value) = keel::json::parse(arguments.as_bytes()) else { return false };
    let Some(object) = value.as_object() else { return false };
    !tool.strict_arguments || object.get("q").is_some_and(|q| q.as_str().is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction_world::spec_json::decode_bytes;

    fn kinds(json: &str) -> Vec<String> {
        match expected_of(&decode_bytes("t.json", json.as_bytes()).unwrap()) {
            Expected::Only { fault_kinds, crash_points } => {
                assert!(crash_points.is_empty());
                fault_kinds.into_iter().collect()
            }
            Expected::All => panic!("a file never expects everything"),
        }
    }

    #[test]
    fn a_plain_tool_loop_expects_only_its_tool() {
        let k = kinds(
            r#"{"name":"t","user":"hi","model":{"turns":[
                {"calls":[{"id":"c1","name":"weather","arguments":{"city":"Oslo"}}]},
                {"text":"done"}]},
              "tools":[{"name":"weather"}]}"#,
        );
        assert_eq!(k, ["tool.text"]);
    }

    #[test]
    fn features_map_to_their_kinds() {
        let k = kinds(
            r#"{"name":"t","user":"hi","max_model_calls":4,"unknown_policy":"leave","model":{"mode":"stream","turns":[
                {"calls":[{"id":"c1","name":"a","arguments":{}},{"id":"c2","name":"never","arguments":{}},
                          {"id":"c3","name":"s","arguments":{"x":1}}]},
                {"calls":[{"id":"c4","name":"d","arguments":{}},{"id":"c5","name":"helper","arguments":{"messages":[]}}]},
                {"calls":[{"id":"c6","name":"s","arguments":{"q":"z"}}], "finish":"length"},
                {"provider_error":"x"},
                {"calls":[{"id":"c7","name":"s","arguments":{"q":"z"}}], "finish":"refusal"}]},
              "tools":[{"name":"a","outcome":"panic","advertises":["d"]},
                       {"name":"s","strict_arguments":true}],
              "deferred_tools":[{"name":"d","pauses":1}],
              "delegate":{"name":"helper","model":{"turns":[{"host_error":"down"}]}},
              "host":[{"at":{"model_call":1},"do":"kill"}],
              "faults":{"lose_ack_per_mille":5}}"#,
        );
        // `a` panics, so `d` is never advertised; `s` refuses `{"x":1}`; calls cut short by
        // `length` do not run; the fifth turn is beyond max_model_calls.
        assert_eq!(
            k,
            [
                "commit.lose_ack",
                "host.crash",
                "host.kill",
                "model.calls_with_length",
                "model.host_failure",
                "model.provider_error",
                "model.streamed",
                "tool.panic",
                "unknown.leave"
            ]
        );
    }
}
