//! Swarm testing (TigerBeetle VOPR style): every seed draws its own fault probabilities, host
//! behavior and tree shape, so different seeds stress different corners instead of all seeds
//! sharing one average mix. The drawn options are printed with the result (`Swarm::describe`).

use super::bounds::{MAX_CRASHES, MAX_TREE_DEPTH};
use keel::env::{Rng, SeededRng};
use std::collections::BTreeMap;

/// Commit boundaries by the names crash points use (`CommitRequest::boundary_name`).
pub const BOUNDARIES: [&str; 10] =
    ["start", "pending", "settled", "resolved", "child_start", "signals", "progress", "parked", "terminal", "activation"];

/// A commit fault the world injects (the FaultyCommitter's crash-like faults).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum CommitFault {
    /// Nothing stored; the writer gets an error and stops.
    FailBefore,
    /// Stored; the acknowledgement is lost and the writer stops.
    LoseAck,
    /// Stored; the machine dies right after (the writer sees an error and is dropped).
    CrashAfter,
}

impl CommitFault {
    pub const ALL: [CommitFault; 3] = [CommitFault::FailBefore, CommitFault::LoseAck, CommitFault::CrashAfter];
    pub fn name(self) -> &'static str {
        match self {
            CommitFault::FailBefore => "fail_before",
            CommitFault::LoseAck => "lose_ack",
            CommitFault::CrashAfter => "crash_after",
        }
    }

    /// The fault called `name` (a fault schedule's kind).
    pub fn from_name(name: &str) -> Option<CommitFault> {
        CommitFault::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// Host actions injected between owner turns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum HostAction {
    Kill,
    Cancel,
    /// Answer an open external wait (early if the Process is not Waiting yet).
    AnswerWait,
    /// Answer a wait that is not open yet (must be rejected).
    PrematureAnswer,
    /// Answer an already answered wait again under a new SignalId (must not be accepted).
    LateAnswer,
    /// Re-deliver an admitted Signal byte-identically (a no-op).
    Duplicate,
    /// Re-deliver an admitted SignalId with other content (a conflict).
    Conflict,
    /// Deliver unaddressed input the Definition's signal schema refuses.
    Unaddressed,
    /// Restore a second owner from the head while the first is alive.
    StaleWriter,
    /// The host machine dies: the owner is dropped without notice.
    HostCrash,
    /// Capture the tree.
    Capture,
    /// Adjudicate an Unknown per the seed's policy.
    Adjudicate,
    /// Resolve an Effect that is not an Unknown frontier (must be refused).
    BogusResolve,
}

impl HostAction {
    pub const ALL: [HostAction; 13] = [
        HostAction::Kill,
        HostAction::Cancel,
        HostAction::AnswerWait,
        HostAction::PrematureAnswer,
        HostAction::LateAnswer,
        HostAction::Duplicate,
        HostAction::Conflict,
        HostAction::Unaddressed,
        HostAction::StaleWriter,
        HostAction::HostCrash,
        HostAction::Capture,
        HostAction::Adjudicate,
        HostAction::BogusResolve,
    ];
    pub fn name(self) -> &'static str {
        match self {
            HostAction::Kill => "kill",
            HostAction::Cancel => "cancel",
            HostAction::AnswerWait => "answer_wait",
            HostAction::PrematureAnswer => "premature_answer",
            HostAction::LateAnswer => "late_answer",
            HostAction::Duplicate => "duplicate",
            HostAction::Conflict => "conflict",
            HostAction::Unaddressed => "unaddressed",
            HostAction::StaleWriter => "stale_writer",
            HostAction::HostCrash => "host_crash",
            HostAction::Capture => "capture",
            HostAction::Adjudicate => "adjudicate",
            HostAction::BogusResolve => "bogus_resolve",
        }
    }
}

/// What the host does with an Unknown (drawn once per EffectId with these weights).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnknownPolicy {
    /// Resolve with the ledger's truth: the world's real answer if it ran, else a failure.
    Truth,
    /// Kill the Process holding it.
    Kill,
    /// Never adjudicate: the run may end parked.
    Leave,
}

/// Shape of the generated script tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShapeParams {
    /// Deepest child depth (root = 0), at most [`MAX_TREE_DEPTH`].
    pub max_depth: u32,
    /// Chance (‰) a node uses the fan-out strategy rather than the testkit script.
    pub fanout: u32,
    /// Op weights: dispatch, batch, wait, child, checkpoint, fail.
    pub op_weights: [u32; 6],
    /// Chance (‰) a dispatcher Effect declares `same_identity`.
    pub same_identity: u32,
    /// Chance (‰) a child budget is cut below its estimate in one dimension.
    pub tight_budget: u32,
    /// Whether the root budget is finite (else unlimited).
    pub finite_root: bool,
    /// TreeLimits: active children per parent (low values make spawns fail).
    pub max_active_children: u32,
    /// TreeLimits: max depth (below `max_depth` makes deep starts fail).
    pub limit_depth: u32,
}

/// Everything one seed decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Swarm {
    /// Reported dispatch outcomes (‰): error, panic, deadline, invalid settlement.
    pub dispatch_error: u32,
    pub dispatch_panic: u32,
    pub dispatch_deadline: u32,
    pub dispatch_invalid: u32,
    /// Chance (‰) the world's real answer is a definite failure.
    pub definite_failure: u32,
    /// Chance (‰) a cancelled dispatch answers `Canceled`.
    pub honor_cancel: u32,
    /// Per boundary: ‰ chance of each [`CommitFault`] (FailBefore, LoseAck, CrashAfter).
    pub commit_faults: BTreeMap<&'static str, [u32; 3]>,
    /// Chance (‰) a commit is held (applied at the store only when acknowledged).
    pub commit_hold: u32,
    /// Crash budget of the run.
    pub max_crashes: u32,
    /// Chance (‰) per turn of a host action.
    pub host_rate: u32,
    pub host_weights: BTreeMap<HostAction, u32>,
    /// Chance (‰) the host answers a wait it sees open in a just-stored cut before the writer
    /// hears the acknowledgement (an early answer).
    pub early_answer: u32,
    /// Chance (‰) the host answers a lazy wait as soon as the checkpoint that opened it is
    /// acknowledged, while its Process still runs (an answer ahead of the park).
    pub ahead_answer: u32,
    /// Unknown policy weights: truth, kill, leave.
    pub unknown_weights: [u32; 3],
    /// Relative weight of delivering a commit acknowledgement vs other events.
    pub ack_weight: u32,
    pub shape: ShapeParams,
}

pub fn below(rng: &SeededRng, n: u64) -> u64 {
    if n == 0 {
        0
    } else {
        rng.next_u64() % n
    }
}

pub fn chance(rng: &SeededRng, permille: u32) -> bool {
    below(rng, 1000) < u64::from(permille)
}

pub fn between(rng: &SeededRng, lo: u32, hi: u32) -> u32 {
    lo + below(rng, u64::from(hi - lo) + 1) as u32
}

/// A feature that is on for about half the seeds, at a rate drawn from `lo..=hi` (‰).
fn feature(rng: &SeededRng, lo: u32, hi: u32) -> u32 {
    if chance(rng, 500) {
        between(rng, lo, hi)
    } else {
        0
    }
}

/// Picks an index with the given weights (`None` if all are zero).
pub fn weighted(rng: &SeededRng, weights: &[u32]) -> Option<usize> {
    let total: u64 = weights.iter().map(|w| u64::from(*w)).sum();
    if total == 0 {
        return None;
    }
    let mut x = below(rng, total);
    for (i, w) in weights.iter().enumerate() {
        let w = u64::from(*w);
        if x < w {
            return Some(i);
        }
        x -= w;
    }
    None
}

impl Swarm {
    /// A world with no faults and no spontaneous host actions (fixed-shape scenarios start
    /// here and switch on what they need).
    pub fn quiet(shape: ShapeParams) -> Swarm {
        Swarm {
            dispatch_error: 0,
            dispatch_panic: 0,
            dispatch_deadline: 0,
            dispatch_invalid: 0,
            definite_failure: 0,
            honor_cancel: 1000,
            commit_faults: BTreeMap::new(),
            commit_hold: 0,
            max_crashes: 0,
            host_rate: 0,
            host_weights: BTreeMap::new(),
            early_answer: 0,
            ahead_answer: 0,
            unknown_weights: [1, 0, 0],
            ack_weight: 4,
            shape,
        }
    }

    /// Draws a seed's options.
    pub fn draw(rng: &SeededRng) -> Swarm {
        let mut commit_faults = BTreeMap::new();
        for b in BOUNDARIES {
            if chance(rng, 350) {
                let rate = between(rng, 60, 450);
                let mix = [between(rng, 0, 4), between(rng, 0, 4), between(rng, 0, 4)];
                let total: u32 = mix.iter().sum::<u32>().max(1);
                commit_faults.insert(b, mix.map(|m| rate * m / total));
            }
        }
        let mut host_weights = BTreeMap::new();
        for a in HostAction::ALL {
            let always = matches!(a, HostAction::AnswerWait | HostAction::Adjudicate);
            if always || chance(rng, 500) {
                host_weights.insert(a, between(rng, 1, 10));
            }
        }
        // Most trees are shallow (cheap); a fifth reach the deepest level.
        let max_depth = match below(rng, 20) {
            0..=4 => 0,
            5..=11 => 1,
            12..=15 => 2,
            _ => MAX_TREE_DEPTH,
        };
        let shape = ShapeParams {
            max_depth,
            fanout: between(rng, 0, 1000),
            op_weights: [
                between(rng, 2, 8),
                between(rng, 0, 4),
                between(rng, 0, 5),
                if max_depth > 0 { between(rng, 1, 6) } else { 0 },
                between(rng, 0, 3),
                between(rng, 0, 1),
            ],
            same_identity: feature(rng, 100, 700),
            tight_budget: feature(rng, 50, 400),
            finite_root: chance(rng, 500),
            max_active_children: if chance(rng, 200) { 1 } else { 16 },
            limit_depth: if chance(rng, 150) { between(rng, 1, MAX_TREE_DEPTH) } else { 16 },
        };
        let mut swarm = Swarm {
            dispatch_error: feature(rng, 20, 300),
            dispatch_panic: feature(rng, 10, 150),
            dispatch_deadline: feature(rng, 10, 150),
            dispatch_invalid: feature(rng, 10, 100),
            definite_failure: feature(rng, 50, 400),
            honor_cancel: between(rng, 0, 1000),
            commit_faults,
            commit_hold: feature(rng, 50, 300),
            max_crashes: between(rng, 0, MAX_CRASHES),
            host_rate: between(rng, 5, 120),
            host_weights,
            early_answer: feature(rng, 300, 1000),
            ahead_answer: feature(rng, 300, 1000),
            unknown_weights: [between(rng, 4, 10), between(rng, 0, 3), between(rng, 0, 2)],
            ack_weight: between(rng, 1, 8),
            shape,
        };
        // Focus: some seeds lean hard on one host action, so rare ones (kills, host crashes,
        // re-deliveries) fire in a small campaign too. Re-deliveries need admitted Signals,
        // which come from answered waits.
        if chance(rng, 350) {
            let focus = HostAction::ALL[below(rng, HostAction::ALL.len() as u64) as usize];
            *swarm.host_weights.entry(focus).or_insert(0) += 40;
            swarm.host_rate = swarm.host_rate.max(80);
            if matches!(focus, HostAction::HostCrash | HostAction::StaleWriter) {
                swarm.max_crashes = swarm.max_crashes.max(2);
            }
            if matches!(focus, HostAction::Duplicate | HostAction::Conflict | HostAction::LateAnswer) {
                swarm.shape.op_weights[2] = swarm.shape.op_weights[2].max(4);
                swarm.host_weights.entry(HostAction::AnswerWait).and_modify(|w| *w += 10);
            }

        }
        swarm
    }

    /// The options as printable key/value pairs.
    pub fn describe(&self) -> BTreeMap<String, String> {
        let mut m = BTreeMap::new();
        let mut put = |k: &str, v: String| {
            m.insert(k.to_owned(), v);
        };
        put("dispatch.error", self.dispatch_error.to_string());
        put("dispatch.panic", self.dispatch_panic.to_string());
        put("dispatch.deadline", self.dispatch_deadline.to_string());
        put("dispatch.invalid", self.dispatch_invalid.to_string());
        put("dispatch.definite_failure", self.definite_failure.to_string());
        put("dispatch.honor_cancel", self.honor_cancel.to_string());
        for (b, f) in &self.commit_faults {
            put(&format!("commit.{b}"), format!("{}/{}/{}", f[0], f[1], f[2]));
        }
        put("commit.hold", self.commit_hold.to_string());
        put("crashes.max", self.max_crashes.to_string());
        put("host.rate", self.host_rate.to_string());
        for (a, w) in &self.host_weights {
            put(&format!("host.{}", a.name()), w.to_string());
        }
        put("host.early_answer", self.early_answer.to_string());
        put("host.ahead_answer", self.ahead_answer.to_string());
        put(
            "unknown.policy",
            format!("truth {} / kill {} / leave {}", self.unknown_weights[0], self.unknown_weights[1], self.unknown_weights[2]),
        );
        put("ack.weight", self.ack_weight.to_string());
        let s = &self.shape;
        put("shape.max_depth", s.max_depth.to_string());
        put("shape.fanout", s.fanout.to_string());
        put("shape.op_weights", format!("{:?}", s.op_weights));
        put("shape.same_identity", s.same_identity.to_string());
        put("shape.tight_budget", s.tight_budget.to_string());
        put("shape.finite_root", s.finite_root.to_string());
        put("limits.max_active_children", s.max_active_children.to_string());
        put("limits.max_depth", s.limit_depth.to_string());
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_draw_is_a_function_of_the_seed() {
        assert_eq!(Swarm::draw(&SeededRng::new(7)), Swarm::draw(&SeededRng::new(7)));
        let differ = (0..16).any(|s| Swarm::draw(&SeededRng::new(s)) != Swarm::draw(&SeededRng::new(s + 100)));
        assert!(differ);
    }

    #[test]
    fn weighted_never_picks_a_zero_weight() {
        let rng = SeededRng::new(1);
        for _ in 0..200 {
            assert_ne!(weighted(&rng, &[3, 0, 2]), Some(1));
        }
        assert_eq!(weighted(&rng, &[0, 0]), None);
    }
}
