//! Coverage of agent states: which situations a campaign's runs actually put the agent in (an
//! Unknown while an input waits, a steer while tool code runs, a crash at each commit boundary
//! kind, a restore that settles an Unknown under each policy, ...), counted per campaign, so a
//! report says whether the testing reached what matters and what would reach the rest.

use super::reach::Shape;

/// Two runs of tool code overlapped (a batch ran concurrently).
pub(crate) const TOOLS_OVERLAP: &str = "tools.overlap";
/// A tool call's outcome became Unknown while another call waited for input.
pub(crate) const UNKNOWN_WHILE_INPUT_WAITS: &str = "unknown.while_input_waits";
/// A steer reached the run while tool code was running.
pub(crate) const STEER_DURING_BATCH: &str = "steer.during_batch";
/// A steer reached a run restored after a writer stop.
pub(crate) const STEER_AFTER_RESTORE: &str = "steer.after_restore";
/// An input was answered by a restored run (after at least one writer stop).
pub(crate) const ANSWER_AFTER_RESTORE: &str = "answer.after_restore";
/// A model call cut off by a crash was issued again (model Unknown policy `Retry`).
pub(crate) const MODEL_REISSUED: &str = "model.reissued";
/// A cancel reached the run.
pub(crate) const CANCELLED: &str = "host.cancelled";

/// `crash.<boundary>`: a writer stopped by a commit fault at that boundary kind.
pub(crate) fn crash_at(boundary: &str) -> String {
    format!("crash.{boundary}")
}

/// `restore.unknown.<policy>`: a run restored after a writer stop settled an Unknown of a
/// tool with that policy.
pub(crate) fn restore_unknown(policy: &str) -> String {
    format!("restore.unknown.{policy}")
}

/// The states an agent of this shape, under this campaign, can reach, each with what the
/// campaign needs to reach it (printed when a reachable state was not reached).
pub(crate) fn reachable(shape: &Shape) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut add = |state: String, how: &str| out.push((state, how.to_owned()));
    let commits = shape.commit_faults;
    if commits {
        for boundary in shape.boundaries() {
            add(crash_at(boundary), &super::reach::boundary_hint(boundary));
        }
    }
    if shape.max_calls_per_turn >= 2 && shape.max_concurrent >= 2 && shape.tools > 0 {
        add(TOOLS_OVERLAP.into(), "a model turn with two or more tool calls run concurrently");
    }
    if shape.input_with_other_call && shape.unknown_faults {
        add(
            UNKNOWN_WHILE_INPUT_WAITS.into(),
            "a tool fault (panic, host failure, cancel, deadline) on a call while another call of its turn waits for input",
        );
    }
    if shape.steers_during_tools {
        add(STEER_DURING_BATCH.into(), "a steer_during(TOOL, ...) action picked by a seed");
    }
    if shape.steers && commits {
        add(STEER_AFTER_RESTORE.into(), "a steer sent after a commit fault stopped the writer (more seeds, or steer at a later model call)");
    }
    if shape.answers && commits {
        add(ANSWER_AFTER_RESTORE.into(), "a commit fault while an input waits (the parked boundary), then the answer to the restored run");
    }
    if shape.model_retry && commits {
        add(MODEL_REISSUED.into(), "a commit fault while a model call is in flight (model Unknown policy Retry)");
    }
    if shape.cancels {
        add(CANCELLED.into(), "a cancel_at action picked by a seed");
    }
    if commits && shape.tools > 0 {
        for policy in &shape.policies {
            add(
                restore_unknown(policy),
                &format!("a commit fault while a call of a tool with Unknown policy {policy} is in flight, and the restored run settling it"),
            );
        }
    }
    out
}
