//! Merging the summaries of a sharded campaign (`run --shard K/N`, one shard per machine) into
//! the summary of the whole campaign: counts and tallies add up, the traces digests add lane
//! by lane, and the kept failures are the lowest-numbered of all shards. Every run kept its
//! unsharded run index, so the merge of all N shards equals the unsharded campaign's summary
//! (its `traces` line included); only the timing lines differ (the slowest shard's wall time).

use std::collections::BTreeSet;
use std::sync::Arc;

use super::summary::CampaignSummary;
use super::trace_digest::TraceDigest;
use super::declare_world;
use crate::limits::{MAX_KEPT_FAILURES, MAX_MERGED_SHARDS};
use crate::world::Scenario;

/// Why shard summaries do not make one campaign.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MergeError {
    #[error("nothing to merge")]
    NoShards,
    #[error("{count} summaries are more than the {max} one merge reads")]
    TooMany { count: usize, max: usize },
    #[error("summary {position} is not a shard (it was written without `--shard K/N`)")]
    NotSharded { position: usize },
    #[error("the shards are not of one campaign: their {what} differ (run every shard with the same arguments but `--shard`)")]
    Different { what: &'static str },
    #[error("shard {index}/{count} is given twice")]
    Duplicate { index: u64, count: u64 },
    #[error("shard {index}/{count} is missing: the merged summary would not cover the campaign")]
    Missing { index: u64, count: u64 },
    #[error("a shard reports world `{0}`, which none of the campaign's scenarios belongs to")]
    UnknownWorld(String),
    #[error("a shard's traces digest `{0}` is not 64 lowercase hex digits")]
    BadDigest(String),
}

/// Merges every shard of one campaign. `scenarios` are the campaign's scenarios and the
/// scenarios of its stored seeds, resolved again (they supply the worlds' declared coverage,
/// as in a campaign).
pub fn merge(
    shards: Vec<CampaignSummary>,
    scenarios: &[Arc<dyn Scenario>],
) -> Result<CampaignSummary, MergeError> {
    if shards.len() > MAX_MERGED_SHARDS {
        return Err(MergeError::TooMany { count: shards.len(), max: MAX_MERGED_SHARDS });
    }
    let Some(first) = shards.first() else {
        return Err(MergeError::NoShards);
    };
    let mut seen = BTreeSet::new();
    let mut count = 0;
    for (position, s) in shards.iter().enumerate() {
        let Some((index, n)) = s.shard else {
            return Err(MergeError::NotSharded { position: position + 1 });
        };
        same_campaign(first, s)?;
        count = n;
        if !seen.insert(index) {
            return Err(MergeError::Duplicate { index, count: n });
        }
    }
    if let Some(index) = (1..=count).find(|k| !seen.contains(k)) {
        return Err(MergeError::Missing { index, count });
    }

    let mut worlds = Vec::new();
    for s in scenarios {
        declare_world(&mut worlds, s.as_ref());
    }
    let mut traces = TraceDigest::default();
    let mut merged = CampaignSummary {
        shard: None,
        stopped_at_first_failure: false,
        runs: 0,
        regression_runs: 0,
        regression_failed: 0,
        passed: 0,
        failed: 0,
        worlds: Vec::new(),
        invariants_checked: 0,
        broken_invariants: Default::default(),
        traces_digest: String::new(),
        failures: Vec::new(),
        wall_time: Default::default(),
        ..first.clone()
    };
    for s in shards {
        merged.stopped_at_first_failure |= s.stopped_at_first_failure;
        merged.runs += s.runs;
        merged.regression_runs += s.regression_runs;
        merged.regression_failed += s.regression_failed;
        merged.passed += s.passed;
        merged.failed += s.failed;
        merged.invariants_checked = merged.invariants_checked.saturating_add(s.invariants_checked);
        for (invariant, n) in s.broken_invariants {
            *merged.broken_invariants.entry(invariant).or_default() += n;
        }
        for w in s.worlds {
            let into = worlds
                .iter_mut()
                .find(|m| m.world == w.world)
                .ok_or_else(|| MergeError::UnknownWorld(w.world.clone()))?;
            for (k, n) in w.faults_fired {
                *into.faults_fired.entry(k).or_default() += n;
            }
            for (k, n) in w.crash_points_hit {
                *into.crash_points_hit.entry(k).or_default() += n;
            }
        }
        let digest = TraceDigest::from_hex(&s.traces_digest)
            .ok_or_else(|| MergeError::BadDigest(s.traces_digest.clone()))?;
        traces.merge(&digest);
        merged.failures.extend(s.failures);
        merged.wall_time = merged.wall_time.max(s.wall_time);
    }
    merged.worlds = worlds;
    merged.traces_digest = traces.hex();
    merged.failures.sort_by_key(|f| f.index);
    merged.failures.truncate(MAX_KEPT_FAILURES);
    Ok(merged)
}

/// Everything but the shard index and the results must agree.
fn same_campaign(a: &CampaignSummary, b: &CampaignSummary) -> Result<(), MergeError> {
    let checks: [(&'static str, bool); 6] = [
        ("scenarios", a.replay_names == b.replay_names && a.scenarios == b.scenarios),
        ("stored regression seeds", a.stored_seeds == b.stored_seeds),
        ("seed ranges", (a.from, a.seeds) == (b.from, b.seeds)),
        ("`--check`", a.determinism_checked == b.determinism_checked),
        ("mutations", a.mutation == b.mutation),
        ("shard counts", a.shard.map(|s| s.1) == b.shard.map(|s| s.1)),
    ];
    match checks.iter().find(|(_, same)| !same) {
        Some((what, _)) => Err(MergeError::Different { what }),
        None => Ok(()),
    }
}
