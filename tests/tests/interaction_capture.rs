//! The real Interaction runs the fuzz corpus is captured from
//! (`keel_tests::fuzz_props::interaction_runs`): each scenario ends the way its script says,
//! together they reach every feature the corpus is meant to hold, and capturing is
//! deterministic (so `capture-corpus` rewrites the same files).

use keel::interaction::state::ParentState;
use keel::kernel::snapshot::TreeSnapshot;
use keel::kernel::status::Status;
use keel_tests::fuzz_props::interaction_corpus::interaction_corpus;
use keel_tests::fuzz_props::interaction_runs::{capture, interaction_scenarios, Capture};
use std::collections::BTreeMap;

fn last_head(c: &Capture) -> TreeSnapshot {
    TreeSnapshot::decode(c.cuts.last().expect("the run committed")).expect("a committed cut decodes")
}

fn captures() -> BTreeMap<&'static str, Capture> {
    interaction_scenarios().into_iter().map(|s| (s.name, capture(&s))).collect()
}

#[test]
fn every_scenario_ends_as_scripted() {
    let expected: BTreeMap<&str, Status> = [
        ("input-kill", Status::Killed),
        ("input-cancel", Status::Canceled),
        ("provider-error", Status::Failed),
        ("host-error", Status::Failed),
        ("too-many-calls", Status::Failed),
        ("lost-kill", Status::Failed),
        ("stream-error", Status::Failed),
    ]
    .into_iter()
    .collect();
    for (name, c) in captures() {
        let head = last_head(&c);
        let want = expected.get(name).copied().unwrap_or(Status::Completed);
        assert_eq!(head.root().status, want, "scenario {name}");
    }
}

/// What each captured cut's processes hold, as text (enough to look for features).
fn all_cut_text(all: &BTreeMap<&str, Capture>) -> String {
    all.values().flat_map(|c| c.cuts.iter()).map(|b| String::from_utf8_lossy(b).into_owned()).collect()
}

#[test]
fn the_scenarios_reach_every_feature_the_corpus_needs() {
    let all = captures();
    let text = all_cut_text(&all);
    for feature in [
        "\"pending_steer\"",
        "\"waiting_input\"",
        "\"artifact_records\"",
        "\"advertised_tool_names\"",
        "\"replacement_messages\"",
        "\"direct_tool_results\"",
        "\"checkpoint\"",
        "\"host_error\"",
        "\"kind\":\"delegate\"",
        "\"finish_reason\":\"length\"",
        "Do not reject.",
        "resolved by the host",
    ] {
        assert!(text.contains(feature), "no captured cut holds {feature}");
    }
    assert!(all["stream"].recording.deltas.len() > 3, "the streaming root streams");
    let steps: usize = all.values().map(|c| c.recording.steps.len()).sum();
    assert!(steps > 100, "{steps} recorded Steps");
    // Restores happened: some run has cuts from two incarnations.
    let restored = all["input"].cuts.iter().filter_map(|b| TreeSnapshot::decode(b).ok()).map(|s| s.incarnation.clone()).collect::<std::collections::BTreeSet<_>>();
    assert!(restored.len() >= 2, "the input scenario restores under a new incarnation");
    // The parent states of every cut restore under the world's own Definition.
    let world = keel_tests::fuzz_props::interaction_world::fuzz_world();
    for snap in all.values().flat_map(|c| c.cuts.iter()).filter_map(|b| TreeSnapshot::decode(b).ok()) {
        for p in snap.processes().iter().filter(|p| p.committed_state.kind.as_str() == ParentState::KIND) {
            let restored = world.definitions.iter().any(|d| d.restore_state(&p.committed_state).is_ok());
            assert!(restored, "a captured parent state restores");
        }
    }
}

#[test]
fn capturing_is_deterministic() {
    for scenario in interaction_scenarios().into_iter().filter(|s| ["input", "stream-input", "delegate-wait"].contains(&s.name)) {
        assert_eq!(capture(&scenario).cuts, capture(&scenario).cuts, "scenario {}", scenario.name);
    }
    let first = interaction_corpus();
    let second = interaction_corpus();
    assert_eq!(first, second);
    let mut per_target: BTreeMap<&str, usize> = BTreeMap::new();
    for file in &first {
        *per_target.entry(file.target).or_default() += 1;
        assert!(file.bytes.len() <= 64 * 1024, "{} is too large for the replay limit", file.name);
    }
    // Room is left for the seeds and fuzzer finds under the 200-file replay limit.
    for (target, n) in per_target {
        assert!((20..=80).contains(&n), "{target}: {n} captured inputs");
    }
}
