//! Seed → spec (swarm testing): every seed draws its own fault probabilities, tool outcomes,
//! model script, host actions and Unknown policy, so a campaign covers mixes no hand-written
//! scenario does. The drawn options are printed in `RunReport::swarm`.

use super::spec::{
    Action, AnswerOrder, CallSpec, ConcurrencySpec, DelegateSpec, Finish, HostAction, ModelMode, Outcome, Spec, ToolSpec,
    Trigger, Turn, UnknownPolicy,
};
use crate::swarm_rng::SwarmRng;
use keel::chat::Message;
use keel::interaction::protocol::InteractionInput;
use keel::json::ToJson;
use std::collections::BTreeMap;

/// The options a seed drew, for the report.
pub type SwarmOptions = BTreeMap<String, String>;

fn pick_weighted<T: Copy>(rng: &mut SwarmRng, choices: &[(T, u64)]) -> T {
    let total: u64 = choices.iter().map(|(_, w)| w).sum();
    let mut x = rng.below(total.max(1));
    for (c, w) in choices {
        if x < *w {
            return *c;
        }
        x -= w;
    }
    choices[0].0
}

fn tool(rng: &mut SwarmRng, name: &str, unknown_rate: u64, pause_rate: u64) -> ToolSpec {
    let outcome = if rng.percent(unknown_rate) {
        pick_weighted(rng, &[(Outcome::Panic, 1), (Outcome::HostFailure, 1), (Outcome::Cancel, 1), (Outcome::Deadline, 1)])
    } else if rng.percent(12) {
        Outcome::Error
    } else {
        Outcome::Text
    };
    let concurrency = match rng.below(3) {
        0 => ConcurrencySpec::Exclusive,
        1 => ConcurrencySpec::Shared,
        _ => ConcurrencySpec::Keyed("key".into()),
    };
    let lo = rng.range_inclusive(0, 4);
    ToolSpec {
        name: name.to_owned(),
        concurrency,
        latency_ms: (lo, lo + rng.range_inclusive(0, 8)),
        outcome,
        direct: false,
        pauses: if rng.percent(pause_rate) { rng.range_inclusive(1, 2) as u32 } else { 0 },
        advertises: Vec::new(),
        strict_arguments: rng.percent(20),
        recorded: Vec::new(),
    }
}

/// The spec of swarm seed `seed` and the options it drew.
pub fn generate(seed: u64) -> (Spec, SwarmOptions) {
    let mut rng = SwarmRng::new(seed, 0x1A7E);
    let mut o = SwarmOptions::new();
    let mut spec = Spec::minimal("interaction-swarm");
    spec.expect.same_output_under_crash = false;
    spec.user = format!("task {seed}");
    let crash = *rng.pick(&[0u64, 15, 40, 90]).unwrap_or(&0);
    let lose = *rng.pick(&[0u64, 15, 40]).unwrap_or(&0);
    let fail = *rng.pick(&[0u64, 15, 40]).unwrap_or(&0);
    spec.faults.crash_per_mille = crash;
    spec.faults.lose_ack_per_mille = lose;
    spec.faults.fail_before_per_mille = fail;
    let unknown_rate = *rng.pick(&[0u64, 10, 30]).unwrap_or(&0);
    let pause_rate = *rng.pick(&[0u64, 20, 50]).unwrap_or(&0);
    spec.unknown_policy =
        pick_weighted(&mut rng, &[(UnknownPolicy::Truth, 6), (UnknownPolicy::Fail, 2), (UnknownPolicy::Kill, 1), (UnknownPolicy::Leave, 1)]);
    spec.model.mode = if rng.percent(30) { ModelMode::Stream } else { ModelMode::Complete };
    spec.model.reducer = rng.percent(15);
    spec.model.validator_rejections = u32::from(rng.percent(15));
    spec.max_concurrent_tool_calls = rng.range_inclusive(1, 4) as u32;
    spec.answer_order = if rng.percent(50) { AnswerOrder::Reverse } else { AnswerOrder::Snapshot };
    let tool_count = rng.range_inclusive(1, 4);
    spec.tools = (0..tool_count).map(|i| tool(&mut rng, &format!("t{i}"), unknown_rate, pause_rate)).collect();
    if rng.percent(15) {
        let i = rng.below(tool_count) as usize;
        if spec.tools[i].outcome == Outcome::Text && spec.tools[i].pauses == 0 {
            spec.tools[i].direct = true;
        }
    }
    if rng.percent(20) {
        spec.deferred_tools.push(tool(&mut rng, "late", 0, 0));
        spec.tools[0].advertises = vec!["late".into()];
        spec.tools[0].outcome = Outcome::Text;
    }
    if rng.percent(25) {
        let mut model = spec.model.clone();
        model.turns = vec![if rng.percent(20) {
            Turn::ProviderError { message: "delegate model down".into() }
        } else {
            Turn::Text { text: "delegated answer".into(), finish: Finish::Stop }
        }];
        model.validator_rejections = 0;
        model.reducer = false;
        spec.delegate = Some(DelegateSpec { name: "helper".into(), model, max_model_calls: 2, budget_steps: None });
    }
    let names: Vec<String> = spec.all_tools().filter(|t| !spec.deferred_tools.contains(t)).map(|t| t.name.clone()).collect();
    let delegate_args = InteractionInput::new(vec![Message::user("sub task")]).to_json().to_canonical_string();
    let rounds = rng.range_inclusive(0, 3);
    let mut call_ids = Vec::new();
    for round in 0..rounds {
        let n = rng.range_inclusive(1, 4);
        let mut calls = Vec::new();
        for j in 0..n {
            let id = format!("c{round}_{j}");
            let (name, arguments) = if spec.delegate.is_some() && rng.percent(15) {
                ("helper".to_owned(), delegate_args.clone())
            } else if rng.percent(4) {
                ("nosuch".to_owned(), "{}".to_owned())
            } else {
                let name = rng.pick(&names).cloned().unwrap_or_else(|| "t0".into());
                let args = if rng.percent(5) {
                    "{not json".to_owned()
                } else {
                    format!(r#"{{"key":"k{}","q":"x{round}{j}"}}"#, rng.below(3))
                };
                (name, args)
            };
            call_ids.push(id.clone());
            calls.push(CallSpec { id, name, arguments });
        }
        if round == 1 && spec.tools.iter().any(|t| !t.advertises.is_empty()) {
            calls.push(CallSpec { id: format!("c{round}_late"), name: "late".into(), arguments: r#"{"q":"late"}"#.into() });
        }
        // Calls under any finish reason but `tool_calls` are fatal: each is drawn now and then.
        let finish = pick_weighted(
            &mut rng,
            &[
                (Finish::ToolCalls, 40),
                (Finish::Length, 2),
                (Finish::Refusal, 1),
                (Finish::Other, 1),
                (Finish::Stop, 1),
                (Finish::ContentFilter, 1),
            ],
        );
        spec.model.turns.push(Turn::Calls { calls, finish });
    }
    let end = rng.below(100);
    spec.model.turns.push(if end < 3 {
        Turn::ProviderError { message: "model down".into() }
    } else if end < 6 {
        Turn::HostError { message: "gateway lost".into() }
    } else {
        Turn::Text { text: format!("answer {seed}"), finish: Finish::Stop }
    });
    let turns = spec.model.turns.len() as u32;
    spec.max_model_calls = turns + 1 + spec.model.validator_rejections + rng.range_inclusive(0, 2) as u32;
    if rng.percent(35) {
        let at = rng.range_inclusive(1, u64::from(turns)) as u32;
        spec.host.push(HostAction { trigger: Trigger::ModelCall(at), action: Action::Steer { id: "s1".into(), text: "steer one".into() } });
        if rng.percent(40) {
            spec.host.push(HostAction { trigger: Trigger::ModelCall(at), action: Action::DuplicateSteer { id: "s1".into() } });
        }
        if rng.percent(40) {
            spec.host.push(HostAction {
                trigger: Trigger::ModelCall(at),
                action: Action::ConflictSteer { id: "s1".into(), text: "other words".into() },
            });
        }
    }
    if let (true, Some(id)) = (rng.percent(25), rng.pick(&call_ids).cloned()) {
        spec.host.push(HostAction { trigger: Trigger::ToolCall(id), action: Action::Steer { id: "s2".into(), text: "steer two".into() } });
    }
    if rng.percent(20) {
        spec.host.push(HostAction { trigger: Trigger::InputWait(1), action: Action::Steer { id: "s3".into(), text: "steer three".into() } });
    }
    if rng.percent(20) {
        spec.host.push(HostAction { trigger: Trigger::InputWait(2), action: Action::StaleAnswer });
    }
    if rng.percent(8) {
        let action = if rng.percent(50) { Action::Kill } else { Action::Cancel };
        let at = rng.range_inclusive(1, u64::from(turns)) as u32;
        spec.host.push(HostAction { trigger: Trigger::ModelCall(at), action });
    }
    // Several tool calls parked on input together, so the host's answer order matters.
    let parallel_inputs = rng.percent(12);
    if parallel_inputs {
        let t = &mut spec.tools[0];
        t.concurrency = ConcurrencySpec::Shared;
        t.outcome = Outcome::Text;
        t.pauses = t.pauses.max(1);
        t.direct = false;
        t.strict_arguments = false;
        let name = t.name.clone();
        spec.max_concurrent_tool_calls = spec.max_concurrent_tool_calls.max(2);
        let calls = (0..2)
            .map(|j| CallSpec { id: format!("p{j}"), name: name.clone(), arguments: format!(r#"{{"q":"p{j}"}}"#) })
            .collect();
        spec.model.turns.insert(0, Turn::Calls { calls, finish: Finish::ToolCalls });
        spec.max_model_calls += 1;
    }
    o.insert("parallel_inputs".into(), parallel_inputs.to_string());
    // Budgets: sometimes wide enough for the whole script, sometimes exhausted part-way (a
    // scripted call reports 1 + 1 tokens and reserves context bytes / 4 + 8).
    if rng.percent(30) {
        let mut b = keel::interaction::budget::Budget::new().reserve_output_tokens(8);
        if rng.percent(70) {
            b = b.total_tokens(rng.range_inclusive(40, 4000));
        }
        if rng.percent(50) {
            b = b.tool_calls(rng.range_inclusive(0, 4));
        }
        // A time limit on the simulated clock: model calls and tools take 0 to 12 ms each.
        if rng.percent(40) {
            b = b.time(std::time::Duration::from_millis(rng.range_inclusive(0, 60)));
        }
        // Half the token budgets ask the host when they run out (an odd limit: decided from
        // the draws above, so the seed's later draws stay as they were), with a limit of 41 to
        // 199 tokens so that most of them do run out. The host grants half the token limit
        // (and one tool call, 10 ms) once, then declines.
        if let Some(drawn) = b.limits().total_tokens.filter(|t| t % 2 == 1) {
            use keel::interaction::budget_question::{BudgetAnswer, BudgetExtension};
            let tokens = 41 + 2 * ((drawn / 2) % 80);
            b = b.total_tokens(tokens).on_exhausted(keel::interaction::budget::OnExhausted::AskHuman);
            let mut grant = BudgetExtension::new().total_tokens((tokens / 2).max(1));
            if b.limits().tool_calls.is_some() {
                grant = grant.tool_calls(1);
            }
            if b.time_ms().is_some() {
                grant = grant.time(std::time::Duration::from_millis(10));
            }
            spec.budget_answers = vec![BudgetAnswer::Extend(grant), BudgetAnswer::Decline];
            o.insert("budget_answers".into(), format!("{:?}", spec.budget_answers));
        }
        o.insert("budget".into(), format!("{:?} time_ms {:?}", b.limits(), b.time_ms()));
        spec.budget = Some(b);
    }
    o.insert("p.crash".into(), format!("{crash}/1000"));
    o.insert("p.lose_ack".into(), format!("{lose}/1000"));
    o.insert("p.fail_before".into(), format!("{fail}/1000"));
    o.insert("p.tool_unknown".into(), format!("{unknown_rate}%"));
    o.insert("p.tool_pause".into(), format!("{pause_rate}%"));
    o.insert("host.actions".into(), spec.host.len().to_string());
    o.insert("model.turns".into(), spec.model.turns.len().to_string());
    o.insert("delegate".into(), spec.delegate.is_some().to_string());
    (spec, o)
}
