//! Seed search: instead of seeds in order, a campaign may pick each next seed among a few
//! candidates drawn from the campaign's own seed, favoring the candidate whose fault plan
//! (the probabilities and host actions a seed expands into) shares the most features with
//! runs that reached states no earlier run had reached. Seeds are picked in rounds of a fixed
//! size and the weights change only between rounds, so the seeds picked are a function of the
//! campaign seed and the results, never of the worker count or timing. Every picked seed is an
//! ordinary seed: `KEEL_SEED=N` replays it exactly.

use super::faults::{Faults, SeedPlan};
use crate::swarm_rng::SwarmRng;
use std::collections::{BTreeMap, BTreeSet};

/// Seeds run between two updates of the weights.
pub(crate) const ROUND: usize = 32;
/// Candidates drawn per picked seed.
const CANDIDATES: usize = 8;
/// Picked seeds stay below this, so they read well in reports and replay commands.
const SEED_SPACE: u64 = 1 << 40;

/// The search state of one campaign.
pub(crate) struct Search {
    rng: SwarmRng,
    faults: Faults,
    actions: usize,
    /// Plan feature → (runs with it, new states those runs reached).
    weights: BTreeMap<String, (u64, u64)>,
    /// States (and crash points) some run reached.
    pub seen: BTreeSet<String>,
    picked: BTreeSet<u64>,
}

impl Search {
    pub fn new(campaign_seed: u64, faults: Faults, actions: usize) -> Search {
        Search {
            rng: SwarmRng::new(campaign_seed, 0x5EA2C4),
            faults,
            actions,
            weights: BTreeMap::new(),
            seen: BTreeSet::new(),
            picked: BTreeSet::new(),
        }
    }

    fn features(&self, seed: u64) -> Vec<String> {
        SeedPlan::draw(seed, &self.faults, self.actions)
            .describe()
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect()
    }

    /// How promising a seed's plan is: for each of its features, the new states per run that
    /// runs with it reached (an unseen feature counts as promising as the best one seen, so
    /// the search keeps trying new plans).
    fn score(&self, seed: u64) -> f64 {
        let best = self
            .weights
            .values()
            .map(|(runs, new)| (1 + new) as f64 / (1 + runs) as f64)
            .fold(1.0_f64, f64::max);
        self.features(seed)
            .iter()
            .map(|f| match self.weights.get(f) {
                Some((runs, new)) => (1 + new) as f64 / (1 + runs) as f64,
                None => best,
            })
            .sum()
    }

    /// The next round's seeds (`n` of them at most).
    pub fn round(&mut self, n: usize) -> Vec<u64> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            let mut best: Option<(f64, u64)> = None;
            for _ in 0..CANDIDATES {
                let seed = self.rng.next_u64() % SEED_SPACE;
                if self.picked.contains(&seed) || out.contains(&seed) {
                    continue;
                }
                let score = self.score(seed);
                if best.is_none_or(|(b, _)| score > b) {
                    best = Some((score, seed));
                }
            }
            if let Some((_, seed)) = best {
                out.push(seed);
            }
        }
        self.picked.extend(out.iter().copied());
        out
    }

    /// Learns from one run of a round (in round order): the states it reached.
    pub fn learn(&mut self, seed: u64, reached: impl IntoIterator<Item = String>) {
        let mut new = 0u64;
        for state in reached {
            if self.seen.insert(state) {
                new += 1;
            }
        }
        for f in self.features(seed) {
            let w = self.weights.entry(f).or_insert((0, 0));
            w.0 += 1;
            w.1 += new;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_are_a_function_of_the_campaign_seed_and_what_was_learned() {
        let run = |learn: bool| {
            let mut s = Search::new(7, Faults::all(), 2);
            let first = s.round(ROUND);
            if learn {
                s.learn(first[3], ["crash.parked".to_owned()]);
            }
            for seed in &first {
                s.learn(*seed, []);
            }
            (first, s.round(ROUND))
        };
        assert_eq!(run(true), run(true), "same campaign seed, same results: same seeds");
        let (a, b) = (run(true), run(false));
        assert_eq!(a.0, b.0, "the first round depends on the campaign seed only");
        assert_ne!(a.1, b.1, "what the first round reached steers the second");
        assert_ne!(run(true).0, Search::new(8, Faults::all(), 2).round(ROUND), "another campaign seed");
    }

    #[test]
    fn a_productive_plan_feature_is_favored() {
        let mut s = Search::new(1, Faults::all(), 0);
        let first = s.round(ROUND);
        // Only the runs of one seed reached anything new: its features gain weight.
        let lucky = first[0];
        for (i, seed) in first.iter().enumerate() {
            let states: Vec<String> = if i == 0 { (0..5).map(|k| format!("s{k}")).collect() } else { Vec::new() };
            s.learn(*seed, states);
        }
        let lucky_features: BTreeSet<String> = s.features(lucky).into_iter().collect();
        let next = s.round(ROUND);
        let shared = |seed: &u64| s.features(*seed).iter().filter(|f| lucky_features.contains(*f)).count();
        let picked: usize = next.iter().map(shared).sum();
        // Unguided: the same number of seeds straight from the candidate stream.
        let mut plain = Search::new(99, Faults::all(), 0);
        let baseline: usize = plain.round(ROUND).iter().map(shared).sum();
        assert!(picked > baseline, "picked seeds share {picked} features with the productive plan, unguided ones {baseline}");
    }
}
