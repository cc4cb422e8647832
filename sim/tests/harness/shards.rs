//! `run --shard K/N --summary-out FILE` on N machines, then `merge`: the shards run disjoint
//! seeds whose union is the whole campaign, and the merged summary is the unsharded one (same
//! totals, tables, failures and traces digest).

use std::collections::BTreeSet;
use std::fs;
use std::sync::Arc;

use keel_sim::campaign::{decode_summary, encode_summary, merge, Campaign, CampaignSummary, MergeError};
use keel_sim::scenarios::ClockAndRng;
use keel_sim::world::Scenario;

use crate::support::{cli_with_regressions, temp_dir, test_registry, without_timing, Flaky};

fn quiet(c: Campaign) -> CampaignSummary {
    c.run(&mut std::io::sink()).unwrap()
}

#[test]
fn two_shards_merge_into_the_unsharded_summary() {
    let dir = temp_dir("shards");
    fs::write(dir.join("seeds.txt"), "flaky 700\nclock-and-rng 5\nflaky 3\n").unwrap();
    let registry = test_registry();
    let base = format!(
        "run --seeds 30 --from 2 --scenario clock-and-rng --scenario flaky --regressions {} --no-record",
        dir.display()
    );
    let whole = cli_with_regressions(&registry, &format!("{base} --summary-out {}", dir.join("all.json").display()), "/x".into());
    assert_eq!(whole.code, 1, "{}", whole.err);
    let mut files = Vec::new();
    for (k, jobs) in [(1, 1), (2, 2)] {
        let file = dir.join(format!("shard{k}.json"));
        let line = format!("{base} --shard {k}/2 --jobs {jobs} --summary-out {}", file.display());
        let out = cli_with_regressions(&registry, &line, "/x".into());
        assert_eq!(out.code, 1, "{}", out.err);
        assert!(out.out.contains(&format!("shard          {k}/2 (seeds {}, {}, ...", k + 1, k + 3)), "{}", out.out);
        files.push(file.display().to_string());
    }
    let shard = |k: usize| decode_summary("s", &fs::read(&files[k]).unwrap()).unwrap();
    let (one, two) = (shard(0), shard(1));
    // Disjoint, and together everything: 3 stored seeds (2 + 1) and 30 seeds of 2 scenarios.
    assert_eq!((one.regression_runs, two.regression_runs), (2, 1));
    assert_eq!(one.runs + two.runs, 63);
    let seeds = |s: &CampaignSummary| -> BTreeSet<u64> { s.failures.iter().map(|f| f.index).collect() };
    assert!(seeds(&one).is_disjoint(&seeds(&two)));

    // Files in any order.
    let merged = cli_with_regressions(&registry, &format!("merge {} {}", files[1], files[0]), "/x".into());
    assert_eq!(merged.code, 1, "{}", merged.err);
    assert_eq!(without_timing(&merged.out), without_timing(&whole.out), "merged vs unsharded");
    let traces = |s: &str| s.lines().find(|l| l.starts_with("traces")).unwrap().to_string();
    assert_eq!(traces(&merged.out), traces(&whole.out));
    assert!(merged.out.contains("runs           63\n"), "{}", merged.out);
    assert!(merged.err.contains("merged 2 shard summaries"));

    // A shard missing, given twice, or of another campaign: refused.
    let out = cli_with_regressions(&registry, &format!("merge {}", files[0]), "/x".into());
    assert_eq!(out.code, 2);
    assert!(out.err.contains("shard 2/2 is missing"), "{}", out.err);
    let out = cli_with_regressions(&registry, &format!("merge {} {}", files[0], files[0]), "/x".into());
    assert!(out.err.contains("shard 1/2 is given twice"), "{}", out.err);
    let out = cli_with_regressions(&registry, &format!("merge {}", dir.join("all.json").display()), "/x".into());
    assert!(out.err.contains("is not a shard"), "{}", out.err);
    let out = cli_with_regressions(&registry, &format!("merge {}", dir.join("seeds.txt").display()), "/x".into());
    assert_eq!(out.code, 2);
    assert!(out.err.contains("not a keel-sim summary"), "{}", out.err);
}

#[test]
fn shards_are_disjoint_and_complete_for_any_count_and_jobs() {
    let scenarios = || -> Vec<Arc<dyn Scenario>> { vec![Arc::new(ClockAndRng), Arc::new(Flaky { fail_every: 1 })] };
    let stored = || -> Vec<(Arc<dyn Scenario>, u64)> { vec![(Arc::new(Flaky { fail_every: 1 }), 99); 5] };
    let whole = quiet(Campaign::new(scenarios()).seeds(3, 17).replay_regressions_first(stored()));
    for n in [1, 3, 4, 40] {
        let parts: Vec<CampaignSummary> = (1..=n)
            .map(|k| {
                quiet(
                    Campaign::new(scenarios())
                        .seeds(3, 17)
                        .replay_regressions_first(stored())
                        .jobs(1 + (k as usize % 2))
                        .shard(k, n),
                )
            })
            .collect();
        // Every run index exactly once (every run of flaky fails, so failures list them).
        let mut indices: Vec<u64> = parts.iter().flat_map(|p| p.failures.iter().map(|f| f.index)).collect();
        indices.sort();
        let expected: Vec<u64> = whole.failures.iter().map(|f| f.index).collect();
        assert_eq!(indices, expected, "{n} shards");
        let parts: Vec<CampaignSummary> = parts
            .iter()
            .map(|p| decode_summary("p", encode_summary(p).as_bytes()).unwrap())
            .collect();
        let merged = merge(parts, &scenarios()).unwrap();
        assert_eq!(merged.render_results(), whole.render_results(), "{n} shards");
    }
    assert_eq!(merge(Vec::new(), &scenarios()), Err(MergeError::NoShards));
}

#[test]
fn a_summary_file_round_trips() {
    let s = quiet(Campaign::new(vec![Arc::new(Flaky { fail_every: 3 })]).seeds(0, 10).shard(1, 2));
    let back = decode_summary("s", encode_summary(&s).as_bytes()).unwrap();
    assert_eq!(back.render_results(), s.render_results());
    assert_eq!(back.failures, s.failures);
    assert_eq!(back.traces_digest, s.traces_digest);
}
