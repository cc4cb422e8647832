//! What a campaign can reach: the fault kinds, crash points and agent states an agent of its
//! shape (tools, policies, turns of the script, concurrency, answers, host actions) can meet
//! under the campaign's faults, each with what makes it fire. `assert_every_fault_fired`
//! requires only these, and names, for each one that did not fire, what would make it fire.

use super::campaign::{HostAction, Setup};
use super::faults::FaultKind;
use super::model::Script;
use keel::agent::{ScriptedModel, UnknownPolicy};
use std::collections::BTreeSet;

/// Turns of a script the shape looks at (a script repeats its last text turn after its end).
const MAX_SCRIPT_TURNS: u32 = 64;

/// The shape of an agent under one campaign.
#[derive(Clone, Debug, Default)]
pub(crate) struct Shape {
    /// Tools the agent declares (delegates not counted).
    pub tools: usize,
    pub delegates: usize,
    /// The tools' Unknown policies (`hold`, `report_to_model`, `retry`).
    pub policies: BTreeSet<String>,
    pub model_retry: bool,
    /// Tool calls the script makes in total and in its largest turn.
    pub tool_calls: usize,
    pub max_calls_per_turn: usize,
    pub max_concurrent: u32,
    pub answers: bool,
    /// A script turn calls a tool together with another call while answers are given.
    pub input_with_other_call: bool,
    pub steers: bool,
    pub steers_during_tools: bool,
    pub cancels: bool,
    pub commit_faults: bool,
    /// Tool faults that leave a call's outcome Unknown (panic, host failure, cancel, deadline).
    pub unknown_faults: bool,
}

/// The tool calls of each turn of `script`, up to its first text turn.
fn turns(script: &Script, limit: u32) -> Vec<usize> {
    let mut out = Vec::new();
    for sequence in 1..=limit.min(MAX_SCRIPT_TURNS) {
        let calls = script.answer(sequence).map(|r| r.tool_calls().len()).unwrap_or(0);
        if calls == 0 {
            break;
        }
        out.push(calls);
    }
    out
}

impl Shape {
    pub fn of(setup: &Setup) -> Shape {
        let probe = (setup.agent)().model(ScriptedModel::new()).build();
        let Ok(agent) = probe else { return Shape::default() };
        let options = agent.tool_options();
        let turns = turns(&setup.script, agent.max_model_calls());
        let f = &setup.faults;
        let commit_faults = [FaultKind::CrashAfter, FaultKind::LoseAck, FaultKind::FailBefore]
            .into_iter()
            .any(|k| f.contains(k));
        Shape {
            tools: options.len(),
            delegates: agent.delegate_count(),
            policies: options.values().map(|o| o.unknown_policy().as_str().to_owned()).collect(),
            model_retry: agent.model_unknown_policy() == UnknownPolicy::Retry,
            tool_calls: turns.iter().sum(),
            max_calls_per_turn: turns.iter().copied().max().unwrap_or(0),
            max_concurrent: agent.max_concurrent_tool_calls(),
            answers: !setup.answers.is_empty(),
            input_with_other_call: !setup.answers.is_empty() && turns.iter().any(|&n| n >= 2),
            steers: setup.actions.iter().any(|(_, a)| matches!(a, HostAction::Steer(_))),
            steers_during_tools: setup.tool_actions.iter().any(|(_, a)| matches!(a, HostAction::Steer(_))),
            cancels: setup.actions.iter().map(|(_, a)| a).chain(setup.tool_actions.iter().map(|(_, a)| a)).any(|a| *a == HostAction::Cancel),
            commit_faults,
            unknown_faults: [FaultKind::Panic, FaultKind::HostFailure, FaultKind::Cancel, FaultKind::Deadline]
                .into_iter()
                .any(|k| f.contains(k)),
        }
    }

    /// Whether the agent's runs call tools at all.
    fn calls_tools(&self) -> bool {
        self.tools > 0 && self.tool_calls > 0
    }

    /// Whether a batch can leave one call working while another has ended: two calls in a
    /// turn run concurrently, or a delegate.
    fn overlapping_work(&self) -> bool {
        (self.max_calls_per_turn >= 2 && self.max_concurrent >= 2) || self.delegates > 0
    }

    /// The commit boundary kinds this shape's runs commit.
    pub fn boundaries(&self) -> Vec<&'static str> {
        let mut out = vec!["start", "activation", "terminal"];
        if self.calls_tools() {
            out.extend(["child_start", "pending", "settled"]);
            if self.unknown_faults || self.commit_faults {
                out.push("resolved");
            }
        }
        if self.answers || self.steers || self.steers_during_tools {
            out.extend(["parked", "signals"]);
        }
        if self.overlapping_work() || self.steers_during_tools {
            out.push("progress");
        }
        out
    }

    /// `(fault kind or host action, what makes it fire)` this shape can meet.
    pub fn fault_kinds(&self, setup: &Setup) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for kind in setup.faults.kinds() {
            let commit = matches!(kind, FaultKind::CrashAfter | FaultKind::LoseAck | FaultKind::FailBefore);
            if !commit && !self.calls_tools() {
                continue;
            }
            if kind == FaultKind::Repeat && !self.policies.contains("retry") {
                continue;
            }
            let how = if commit {
                "a commit fault drawn at some commit (more seeds)".to_owned()
            } else {
                format!("a tool call meeting the fault at the dispatch boundary (more seeds, or more tool calls in the script: it makes {})", self.tool_calls)
            };
            out.push((kind.as_str().to_owned(), how));
        }
        if self.commit_faults {
            out.push(("host.crash".into(), "a commit fault that stops the writer (more seeds)".into()));
        }
        if self.calls_tools() && (self.commit_faults || self.unknown_faults) {
            for p in &self.policies {
                out.push((format!("unknown.{p}"), format!("an Unknown outcome of a call of a tool with policy {p}, settled (more seeds, or tool and commit faults enabled)")));
            }
        }
        if self.answers {
            out.push(("host.input.answer".into(), "a tool that asks for input (AskHuman) called by the script".into()));
        }
        if self.steers || self.steers_during_tools {
            out.push(("host.steer".into(), "a seed picking the steer action (half of them do) whose trigger is reached: a steer_at(N) needs a script with N model calls".into()));
        }
        if self.cancels {
            out.push(("host.cancel".into(), "a seed picking the cancel action whose trigger is reached".into()));
        }
        out
    }

    /// `(crash point, what makes it fire)` this shape can meet.
    pub fn crash_points(&self, setup: &Setup) -> Vec<(String, String)> {
        let faults: Vec<&str> = [FaultKind::CrashAfter, FaultKind::LoseAck, FaultKind::FailBefore]
            .into_iter()
            .filter(|k| setup.faults.contains(*k))
            .map(|k| k.as_str().trim_start_matches("commit."))
            .collect();
        let mut out = Vec::new();
        for b in self.boundaries() {
            for f in &faults {
                out.push((format!("{b}.{f}"), boundary_hint(b)));
            }
        }
        out
    }
}

/// What commits at a boundary kind, so a crash point there can fire.
pub(crate) fn boundary_hint(boundary: &str) -> String {
    match boundary {
        "start" => "the run's first commit (every run; more seeds)",
        "activation" => "a run activating its tree (every run; more seeds)",
        "terminal" => "the run's last commit (every run that ends; more seeds)",
        "child_start" => "a tool call starting its child Process (a script that calls a tool)",
        "pending" | "settled" => "a tool call dispatched and settled (a script that calls a tool)",
        "resolved" => "an Unknown settled by the agent's policy or the host (tool faults, or commit faults while a tool runs)",
        "parked" => "a commit while every Process waits (an input request: AskHuman with .answers([...]))",
        "signals" => "a signal taken in: an answer to an input request, or a steer",
        "progress" => "a commit while one Process still works and another has ended or waits: two or more tool calls in one model turn (ScriptedModel::call_tools) with max_concurrent_tool_calls(2) or more, a delegate, or a steer_during(TOOL, ...) while a tool runs",
        _ => "more seeds",
    }
    .to_owned()
}
