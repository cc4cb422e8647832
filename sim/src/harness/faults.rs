//! Which faults a campaign injects, and how one seed turns them into probabilities.

use crate::swarm_rng::SwarmRng;
use std::collections::BTreeSet;

/// One kind of fault the harness injects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultKind {
    /// A tool call starts late (calls of one turn then finish in another order).
    Delay,
    /// A tool call's result is held back after the tool ran, so later calls finish first.
    Reorder,
    /// The dispatch boundary panics (before or after the tool's code ran).
    Panic,
    /// The dispatch boundary reports a host failure (before or after the tool's code ran).
    HostFailure,
    /// The call is cancelled (before or after the tool's code ran).
    Cancel,
    /// The call hits its deadline (before or after the tool's code ran).
    Deadline,
    /// A tool declared idempotent is run twice for one call, as an at-least-once transport
    /// would; both runs must have the same outcome.
    Repeat,
    /// A commit reaches the store, then the process crashes.
    CrashAfter,
    /// A commit reaches the store but its acknowledgement is lost (the writer stops).
    LoseAck,
    /// A commit fails before it reaches the store (the writer stops).
    FailBefore,
}

impl FaultKind {
    /// Every kind, in report order.
    pub const ALL: [FaultKind; 10] = [
        FaultKind::Delay,
        FaultKind::Reorder,
        FaultKind::Panic,
        FaultKind::HostFailure,
        FaultKind::Cancel,
        FaultKind::Deadline,
        FaultKind::Repeat,
        FaultKind::CrashAfter,
        FaultKind::LoseAck,
        FaultKind::FailBefore,
    ];

    /// The key this kind has in a report's fired-faults table.
    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::Delay => "tool.delay",
            FaultKind::Reorder => "tool.reorder",
            FaultKind::Panic => "tool.panic",
            FaultKind::HostFailure => "tool.host_failure",
            FaultKind::Cancel => "tool.cancel",
            FaultKind::Deadline => "tool.deadline",
            FaultKind::Repeat => "tool.repeat",
            FaultKind::CrashAfter => "commit.crash_after",
            FaultKind::LoseAck => "commit.lose_ack",
            FaultKind::FailBefore => "commit.fail_before",
        }
    }

    fn is_commit(self) -> bool {
        matches!(
            self,
            FaultKind::CrashAfter | FaultKind::LoseAck | FaultKind::FailBefore
        )
    }
}

/// The set of fault kinds a campaign injects. Each seed draws its own probability for each
/// enabled kind (swarm testing: some seeds lean on one fault, some see none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Faults {
    kinds: BTreeSet<FaultKind>,
}

impl Faults {
    /// Every fault kind.
    pub fn all() -> Faults {
        Faults {
            kinds: FaultKind::ALL.into_iter().collect(),
        }
    }

    /// No faults (the campaign still varies scheduling and latency by seed).
    pub fn none() -> Faults {
        Faults {
            kinds: BTreeSet::new(),
        }
    }

    /// These faults only.
    pub fn only(kinds: impl IntoIterator<Item = FaultKind>) -> Faults {
        Faults {
            kinds: kinds.into_iter().collect(),
        }
    }

    /// This set without `kind`.
    pub fn without(mut self, kind: FaultKind) -> Faults {
        self.kinds.remove(&kind);
        self
    }

    /// Whether `kind` is injected.
    pub fn contains(&self, kind: FaultKind) -> bool {
        self.kinds.contains(&kind)
    }

    /// The enabled kinds.
    pub fn kinds(&self) -> impl Iterator<Item = FaultKind> + '_ {
        self.kinds.iter().copied()
    }
}

/// Per-mille choices a seed draws from for each tool fault kind (0: the seed leaves it out).
const TOOL_PER_MILLE: [u64; 4] = [0, 40, 90, 160];
/// Per-mille choices for each commit fault kind.
const COMMIT_PER_MILLE: [u64; 4] = [0, 15, 40, 90];

/// What one seed expanded its campaign's faults into.
#[derive(Clone, Debug, Default)]
pub(crate) struct SeedPlan {
    /// (kind, per mille) of each tool fault, in kind order.
    pub tool: Vec<(FaultKind, u64)>,
    pub crash: u64,
    pub lose_ack: u64,
    pub fail_before: u64,
    /// Which scripted host actions (by index) this seed performs.
    pub actions: Vec<bool>,
}

impl SeedPlan {
    pub fn draw(seed: u64, faults: &Faults, actions: usize) -> SeedPlan {
        let mut rng = SwarmRng::new(seed, 0x4A55);
        let mut plan = SeedPlan::default();
        for kind in FaultKind::ALL {
            // One draw per kind whether enabled or not, so enabling one kind shifts no other.
            let choice = rng.below(4) as usize;
            if !faults.contains(kind) {
                continue;
            }
            if kind.is_commit() {
                let p = COMMIT_PER_MILLE[choice];
                match kind {
                    FaultKind::CrashAfter => plan.crash = p,
                    FaultKind::LoseAck => plan.lose_ack = p,
                    _ => plan.fail_before = p,
                }
            } else if TOOL_PER_MILLE[choice] > 0 {
                plan.tool.push((kind, TOOL_PER_MILLE[choice]));
            }
        }
        plan.actions = (0..actions).map(|_| rng.percent(50)).collect();
        plan
    }

    /// The fault one tool call meets (at most one), drawn from `rng`.
    pub fn tool_fault(&self, rng: &mut SwarmRng) -> Option<FaultKind> {
        let mut draw = rng.below(1000);
        for (kind, p) in &self.tool {
            if draw < *p {
                return Some(*kind);
            }
            draw -= p;
        }
        None
    }

    /// The lines a report prints for this plan.
    pub fn describe(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = self
            .tool
            .iter()
            .map(|(k, p)| (format!("p.{}", k.as_str()), format!("{p}/1000")))
            .collect();
        for (name, p) in [
            ("p.commit.crash_after", self.crash),
            ("p.commit.lose_ack", self.lose_ack),
            ("p.commit.fail_before", self.fail_before),
        ] {
            if p > 0 {
                out.push((name.to_owned(), format!("{p}/1000")));
            }
        }
        if !self.actions.is_empty() {
            let on: Vec<String> = self
                .actions
                .iter()
                .enumerate()
                .filter(|(_, on)| **on)
                .map(|(i, _)| i.to_string())
                .collect();
            out.push(("host.actions".into(), on.join(",")));
        }
        out
    }
}
