//! What a world declares it can inject, so a campaign can show what it never exercised.
//!
//! A [`Coverage`] is the complete vocabulary of one world's reports: every key its runs may
//! put in `RunReport::faults_fired` and every crash point (`<boundary>.<commit fault>`) of
//! `RunReport::crash_points_hit`. The campaign tallies each world separately
//! ([`WorldTally`]) and the summary prints declared kinds that never fired as `0  never fired`
//! and keys nobody declared as `undeclared`, so a generator that stops reaching a fault, or a
//! world that starts reporting a new one, shows up in the table rather than going unnoticed.
//!
//! A scenario may set out to exercise only part of its world's vocabulary ([`Expected`]): a
//! scenario file that uses no delegate is not expected to fire delegate faults. A world's
//! table then requires the union of what its scenarios in the campaign expect; a declared key
//! outside it is listed only when it fired, and a key outside the world's vocabulary is still
//! `undeclared`.

use std::collections::{BTreeMap, BTreeSet};

/// The declared fault kinds and crash points of one world.
#[derive(Debug, PartialEq, Eq)]
pub struct Coverage {
    /// The world's name in the summary; scenarios of one world share it.
    pub world: &'static str,
    /// Every `faults_fired` key the world reports (faults, host actions, and the consequences
    /// it counts).
    pub fault_kinds: &'static [&'static str],
    /// Commit boundaries a crash can hit.
    pub boundaries: &'static [&'static str],
    /// The commit faults each boundary is hit with; crash points are `boundary.fault`.
    pub boundary_faults: &'static [&'static str],
}

impl Coverage {
    /// Every declared crash point, `boundary.fault`, boundaries in declaration order.
    pub fn crash_points(&self) -> Vec<String> {
        let mut points = Vec::with_capacity(self.boundaries.len() * self.boundary_faults.len());
        for b in self.boundaries {
            for f in self.boundary_faults {
                points.push(format!("{b}.{f}"));
            }
        }
        points
    }
}

/// What part of its world's [`Coverage`] a scenario sets out to exercise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expected {
    /// Every declared fault kind and crash point.
    All,
    /// Only these fault kinds and crash points (keys of the world's vocabulary).
    Only {
        fault_kinds: BTreeSet<String>,
        crash_points: BTreeSet<String>,
    },
}

impl Expected {
    /// Nothing in particular.
    pub fn nothing() -> Expected {
        Expected::Only {
            fault_kinds: BTreeSet::new(),
            crash_points: BTreeSet::new(),
        }
    }

    /// What either expects.
    pub fn union(self, other: Expected) -> Expected {
        match (self, other) {
            (Expected::All, _) | (_, Expected::All) => Expected::All,
            (
                Expected::Only { mut fault_kinds, mut crash_points },
                Expected::Only { fault_kinds: f, crash_points: c },
            ) => {
                fault_kinds.extend(f);
                crash_points.extend(c);
                Expected::Only { fault_kinds, crash_points }
            }
        }
    }

    fn fault(&self, key: &str) -> bool {
        match self {
            Expected::All => true,
            Expected::Only { fault_kinds, .. } => fault_kinds.contains(key),
        }
    }

    fn point(&self, key: &str) -> bool {
        match self {
            Expected::All => true,
            Expected::Only { crash_points, .. } => crash_points.contains(key),
        }
    }
}

/// One world's share of a campaign's tallies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorldTally {
    /// The world's name (a scenario's own name when it declares no coverage).
    pub world: String,
    pub declared: Option<&'static Coverage>,
    /// The union of what the campaign's scenarios of this world set out to exercise.
    pub expected: Expected,
    pub faults_fired: BTreeMap<String, u64>,
    pub crash_points_hit: BTreeMap<String, u64>,
}

/// One row of a coverage table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub key: String,
    pub count: u64,
    pub mark: Mark,
}

/// How a row relates to the declaration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    Fired,
    /// Declared, never fired in this campaign.
    NeverFired,
    /// Fired, but the world does not declare it.
    Undeclared,
}

impl WorldTally {
    /// A world expecting all it declares (widen or narrow with [`WorldTally::expected`]).
    pub fn new(world: String, declared: Option<&'static Coverage>) -> Self {
        WorldTally {
            world,
            declared,
            expected: Expected::All,
            faults_fired: BTreeMap::new(),
            crash_points_hit: BTreeMap::new(),
        }
    }

    /// The fault rows: declared kinds in declaration order (0 when expected but never fired;
    /// left out when neither expected nor fired), then any undeclared key in key order.
    /// Without a declaration every fired key is a plain row.
    pub fn fault_rows(&self) -> Vec<Row> {
        let declared: Option<Vec<String>> = self
            .declared
            .map(|c| c.fault_kinds.iter().map(|k| (*k).to_string()).collect());
        rows(declared, &self.faults_fired, |k| self.expected.fault(k))
    }

    /// The crash point rows, like [`WorldTally::fault_rows`].
    pub fn crash_rows(&self) -> Vec<Row> {
        rows(
            self.declared.map(Coverage::crash_points),
            &self.crash_points_hit,
            |k| self.expected.point(k),
        )
    }

    /// Declared fault kinds and crash points that never fired.
    pub fn never_fired(&self) -> Vec<String> {
        self.keys_marked(Mark::NeverFired)
    }

    /// Fired keys the world does not declare.
    pub fn undeclared(&self) -> Vec<String> {
        self.keys_marked(Mark::Undeclared)
    }

    /// The fault and crash-point keys whose row carries `mark`.
    fn keys_marked(&self, mark: Mark) -> Vec<String> {
        self.fault_rows()
            .into_iter()
            .chain(self.crash_rows())
            .filter(|r| r.mark == mark)
            .map(|r| r.key)
            .collect()
    }
}

fn rows(
    declared: Option<Vec<String>>,
    fired: &BTreeMap<String, u64>,
    expected: impl Fn(&str) -> bool,
) -> Vec<Row> {
    let Some(declared) = declared else {
        return fired
            .iter()
            .map(|(k, n)| Row {
                key: k.clone(),
                count: *n,
                mark: Mark::Fired,
            })
            .collect();
    };
    let mut out: Vec<Row> = declared
        .iter()
        .filter_map(|k| {
            let count = fired.get(k).copied().unwrap_or(0);
            let mark = match (count, expected(k)) {
                (0, false) => return None,
                (0, true) => Mark::NeverFired,
                _ => Mark::Fired,
            };
            Some(Row {
                key: k.clone(),
                count,
                mark,
            })
        })
        .collect();
    for (k, n) in fired {
        if !declared.contains(k) {
            out.push(Row {
                key: k.clone(),
                count: *n,
                mark: Mark::Undeclared,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    static DECLARED: Coverage = Coverage {
        world: "w",
        fault_kinds: &["b", "a"],
        boundaries: &["start", "pending"],
        boundary_faults: &["crash"],
    };

    #[test]
    fn rows_follow_the_declaration_and_flag_gaps_and_strangers() {
        let mut t = WorldTally::new("w".into(), Some(&DECLARED));
        t.faults_fired.insert("a".into(), 3);
        t.faults_fired.insert("zz".into(), 1);
        t.crash_points_hit.insert("pending.crash".into(), 2);
        let faults: Vec<(String, u64, Mark)> =
            t.fault_rows().into_iter().map(|r| (r.key, r.count, r.mark)).collect();
        assert_eq!(
            faults,
            [
                ("b".to_string(), 0, Mark::NeverFired),
                ("a".to_string(), 3, Mark::Fired),
                ("zz".to_string(), 1, Mark::Undeclared),
            ]
        );
        assert_eq!(DECLARED.crash_points(), ["start.crash", "pending.crash"]);
        assert_eq!(t.never_fired(), ["b", "start.crash"]);
        assert_eq!(t.undeclared(), ["zz"]);
    }

    #[test]
    fn only_what_the_scenarios_expect_is_required() {
        let mut t = WorldTally::new("w".into(), Some(&DECLARED));
        t.expected = Expected::Only {
            fault_kinds: BTreeSet::from(["a".to_string()]),
            crash_points: BTreeSet::new(),
        };
        t.crash_points_hit.insert("pending.crash".into(), 2);
        t.faults_fired.insert("zz".into(), 1);
        // `b` is neither expected nor fired: no row. `a` is expected: a gap.
        let faults: Vec<(String, u64, Mark)> =
            t.fault_rows().into_iter().map(|r| (r.key, r.count, r.mark)).collect();
        assert_eq!(
            faults,
            [("a".to_string(), 0, Mark::NeverFired), ("zz".to_string(), 1, Mark::Undeclared)]
        );
        assert_eq!(t.crash_rows().len(), 1);
        assert_eq!(t.never_fired(), ["a"]);
        // Another scenario of the world expecting everything widens the requirement.
        t.expected = t.expected.clone().union(Expected::All);
        assert_eq!(t.never_fired(), ["b", "a", "start.crash"]);
        assert_eq!(
            Expected::nothing().union(Expected::Only {
                fault_kinds: BTreeSet::from(["x".to_string()]),
                crash_points: BTreeSet::new()
            }),
            Expected::Only {
                fault_kinds: BTreeSet::from(["x".to_string()]),
                crash_points: BTreeSet::new()
            }
        );
    }

    #[test]
    fn without_a_declaration_nothing_is_flagged() {
        let mut t = WorldTally::new("x".into(), None);
        t.faults_fired.insert("a".into(), 1);
        assert_eq!(t.fault_rows()[0].mark, Mark::Fired);
        assert!(t.never_fired().is_empty() && t.undeclared().is_empty());
    }
}
