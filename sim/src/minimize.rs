//! Shrinking a failing run to the fewest faults that still break the same invariant.
//!
//! [`ddmin`] is Zeller's delta debugging over anything [`Shrinkable`]; [`minimize`] applies it
//! to a seed's [`FaultSchedule`] through the scenario's [`Schedulable`] capability. The
//! failure kept is "the same invariant breaks", so shrinking cannot wander off to another bug.

use std::collections::BTreeMap;
use crate::limits::MAX_MINIMIZE_RUNS;
use crate::schedule::{FaultEvent, FaultSchedule, ScheduleError};
use crate::world::{run_guarded, run_guarded_result, RunOptions, RunReport, Scenario, Schedulable};

/// A value made of parts, any subsequence of which is again a value.
pub trait Shrinkable: Sized {
    type Part: Clone;
    fn parts(&self) -> Vec<Self::Part>;
    /// The value made of `parts` (a subsequence of `self.parts()`, order kept).
    fn with_parts(&self, parts: Vec<Self::Part>) -> Self;
}

impl<T: Clone> Shrinkable for Vec<T> {
    type Part = T;
    fn parts(&self) -> Vec<T> {
        self.clone()
    }
    fn with_parts(&self, parts: Vec<T>) -> Self {
        parts
    }
}

impl Shrinkable for FaultSchedule {
    type Part = FaultEvent;
    fn parts(&self) -> Vec<FaultEvent> {
        self.events.clone()
    }
    fn with_parts(&self, parts: Vec<FaultEvent>) -> Self {
        FaultSchedule::new(parts)
    }
}

/// Result of [`ddmin`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shrunk<S> {
    /// The smallest failing value found; 1-minimal (removing any one part makes it pass)
    /// unless `budget_exhausted`.
    pub minimal: S,
    /// Predicate evaluations spent.
    pub tests: u64,
    pub budget_exhausted: bool,
}

/// Delta debugging: shrinks `input` (which must fail) while `fails` keeps returning true,
/// spending at most `max_tests` evaluations. Subsets already tried are not tried again.
pub fn ddmin<S: Shrinkable>(input: &S, max_tests: u64, fails: impl FnMut(&S) -> bool) -> Shrunk<S> {
    let parts = input.parts();
    let mut tester = Tester {
        input,
        parts: &parts,
        fails,
        max_tests,
        tests: 0,
        seen: BTreeMap::new(),
    };
    let mut current: Vec<usize> = (0..parts.len()).collect();
    let exhausted = shrink(&mut current, &mut tester).is_none();
    Shrunk {
        minimal: tester.build(&current),
        tests: tester.tests,
        budget_exhausted: exhausted,
    }
}

struct Tester<'a, S: Shrinkable, F> {
    input: &'a S,
    parts: &'a [S::Part],
    fails: F,
    max_tests: u64,
    tests: u64,
    seen: BTreeMap<Vec<usize>, bool>,
}

impl<S: Shrinkable, F: FnMut(&S) -> bool> Tester<'_, S, F> {
    fn build(&self, indices: &[usize]) -> S {
        let parts = indices
            .iter()
            .filter_map(|&i| self.parts.get(i).cloned())
            .collect();
        self.input.with_parts(parts)
    }

    /// Does the subset fail? `None` once the budget is spent.
    fn fails(&mut self, indices: &[usize]) -> Option<bool> {
        if let Some(&known) = self.seen.get(indices) {
            return Some(known);
        }
        if self.tests >= self.max_tests {
            return None;
        }
        self.tests += 1;
        let candidate = self.build(indices);
        let result = (self.fails)(&candidate);
        self.seen.insert(indices.to_vec(), result);
        Some(result)
    }
}

/// The ddmin loop over index sets; `None` when the budget ran out.
fn shrink<S: Shrinkable, F: FnMut(&S) -> bool>(
    current: &mut Vec<usize>,
    tester: &mut Tester<'_, S, F>,
) -> Option<()> {
    if current.is_empty() {
        return Some(());
    }
    // A failure that needs no parts at all is the smallest answer; check it first.
    if tester.fails(&[])? {
        current.clear();
        return Some(());
    }
    let mut n = 2usize;
    while current.len() >= 2 {
        let chunks = split(current, n);
        let mut reduced = false;
        for chunk in &chunks {
            if tester.fails(chunk)? {
                *current = chunk.clone();
                n = 2;
                reduced = true;
                break;
            }
        }
        // With two chunks each complement is the other chunk, already tried.
        if !reduced && chunks.len() > 2 {
            for skip in 0..chunks.len() {
                let complement: Vec<usize> = chunks
                    .iter()
                    .enumerate()
                    .filter(|&(i, _)| i != skip)
                    .flat_map(|(_, c)| c.iter().copied())
                    .collect();
                if tester.fails(&complement)? {
                    *current = complement;
                    n = (n - 1).max(2);
                    reduced = true;
                    break;
                }
            }
        }
        if !reduced {
            if n >= current.len() {
                break;
            }
            n = (n * 2).min(current.len());
        }
    }
    Some(())
}

/// `items` cut into `n` contiguous chunks whose sizes differ by at most one.
fn split(items: &[usize], n: usize) -> Vec<Vec<usize>> {
    let n = n.clamp(1, items.len().max(1));
    let (base, extra) = (items.len() / n, items.len() % n);
    let mut chunks = Vec::with_capacity(n);
    let mut start = 0;
    for i in 0..n {
        let len = base + usize::from(i < extra);
        chunks.push(items[start..start + len].to_vec());
        start += len;
    }
    chunks
}

/// Why a seed could not be minimized.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MinimizeError {
    #[error("scenario `{scenario}` has no fault schedule to shrink")]
    NotSchedulable { scenario: String },
    #[error("seed {seed} of `{scenario}` passes: nothing to minimize")]
    Passes { scenario: String, seed: u64 },
    #[error("the seed's own schedule was refused: {0}")]
    Schedule(#[from] ScheduleError),
    #[error(
        "seed {seed} of `{scenario}` broke `{invariant}`, but not when re-run from its schedule"
    )]
    NotReproducible {
        scenario: String,
        seed: u64,
        invariant: String,
    },
}

/// A failing seed and the fewest faults that still break its first broken invariant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Minimized {
    pub scenario: String,
    pub seed: u64,
    /// The invariant kept broken while shrinking.
    pub invariant: String,
    pub original: FaultSchedule,
    pub minimal: FaultSchedule,
    /// The run with the minimal schedule (trace kept).
    pub report: RunReport,
    /// Scenario runs spent, all told.
    pub runs: u64,
    pub budget_exhausted: bool,
}

/// Shrinks the fault schedule of a failing `seed`.
pub fn minimize(scenario: &dyn Scenario, seed: u64) -> Result<Minimized, MinimizeError> {
    let name = scenario.name().to_string();
    let schedulable = scenario
        .schedulable()
        .ok_or_else(|| MinimizeError::NotSchedulable {
            scenario: name.clone(),
        })?;
    let quiet = RunOptions::default();
    let first = run_guarded(&name, seed, || scenario.run(seed, &quiet));
    let Some(broken) = first.violations.first() else {
        return Err(MinimizeError::Passes {
            scenario: name,
            seed,
        });
    };
    let invariant = broken.invariant.clone();
    let original = schedulable.schedule_of(seed);
    let breaks = |report: &RunReport| report.violations.iter().any(|v| v.invariant == invariant);

    let replay = run_schedule_guarded(schedulable, &name, seed, &original, &quiet)?;
    if !breaks(&replay) {
        return Err(MinimizeError::NotReproducible {
            scenario: name,
            seed,
            invariant,
        });
    }
    let shrunk = ddmin(&original, MAX_MINIMIZE_RUNS, |candidate| {
        // A subset the world refuses is not a reproduction.
        run_schedule_guarded(schedulable, &name, seed, candidate, &quiet).is_ok_and(|r| breaks(&r))
    });
    let keep = RunOptions { keep_trace: true };
    let report = run_schedule_guarded(schedulable, &name, seed, &shrunk.minimal, &keep)?;
    Ok(Minimized {
        scenario: name,
        seed,
        invariant,
        original,
        minimal: shrunk.minimal,
        report,
        runs: shrunk.tests + 3,
        budget_exhausted: shrunk.budget_exhausted,
    })
}

/// `run_with_schedule` with a panic turned into a failing report (like [`run_guarded`]).
fn run_schedule_guarded(
    schedulable: &dyn Schedulable,
    name: &str,
    seed: u64,
    schedule: &FaultSchedule,
    options: &RunOptions,
) -> Result<RunReport, ScheduleError> {
    run_guarded_result(name, seed, || {
        schedulable.run_with_schedule(seed, schedule, options)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_is_even_and_complete() {
        let items: Vec<usize> = (0..7).collect();
        let chunks = split(&items, 3);
        assert_eq!(chunks, vec![vec![0, 1, 2], vec![3, 4], vec![5, 6]]);
        assert_eq!(split(&items, 100).len(), 7);
    }

    #[test]
    fn ddmin_finds_a_single_culprit() {
        let input: Vec<u32> = (0..64).collect();
        let out = ddmin(&input, 1000, |v| v.contains(&37));
        assert_eq!(out.minimal, vec![37]);
        assert!(!out.budget_exhausted);
    }

    #[test]
    fn ddmin_returns_empty_when_nothing_is_needed() {
        let out = ddmin(&vec![1, 2, 3], 1000, |_| true);
        assert_eq!(out.minimal, Vec::<i32>::new());
        assert_eq!(out.tests, 1);
    }

    #[test]
    fn ddmin_respects_its_budget() {
        let input: Vec<u32> = (0..64).collect();
        let out = ddmin(&input, 3, |v| v.contains(&1) && v.contains(&60));
        assert!(out.budget_exhausted);
        assert_eq!(out.tests, 3);
        assert!(out.minimal.contains(&1) && out.minimal.contains(&60));
    }
}
