//! What a world declares it can inject, so a campaign can show what it never exercised.
//!
//! A [`Coverage`] is the complete vocabulary of one world's reports: every key its runs may
//! put in `RunReport::faults_fired` and every crash point (`<boundary>.<commit fault>`) of
//! `RunReport::crash_points_hit`. The campaign tallies each world separately
//! ([`WorldTally`]) and the summary prints declared kinds that never fired as `0  never fired`
//! and keys nobody declared as `undeclared`, so a generator that stops reaching a fault, or a
//! world that starts reporting a new one, shows up in the table rather than going unnoticed.

use std::collections::BTreeMap;

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

/// One world's share of a campaign's tallies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorldTally {
    /// The world's name (a scenario's own name when it declares no coverage).
    pub world: String,
    pub declared: Option<&'static Coverage>,
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
    pub fn new(world: String, declared: Option<&'static Coverage>) -> Self {
        WorldTally {
            world,
            declared,
            faults_fired: BTreeMap::new(),
            crash_points_hit: BTreeMap::new(),
        }
    }

    /// The fault rows: declared kinds in declaration order (0 when never fired), then any
    /// undeclared key in key order. Without a declaration every fired key is a plain row.
    pub fn fault_rows(&self) -> Vec<Row> {
        let declared: Option<Vec<String>> = self
            .declared
            .map(|c| c.fault_kinds.iter().map(|k| (*k).to_string()).collect());
        rows(declared, &self.faults_fired)
    }

    /// The crash point rows, like [`WorldTally::fault_rows`].
    pub fn crash_rows(&self) -> Vec<Row> {
        rows(self.declared.map(Coverage::crash_points), &self.crash_points_hit)
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

fn rows(declared: Option<Vec<String>>, fired: &BTreeMap<String, u64>) -> Vec<Row> {
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
        .map(|k| {
            let count = fired.get(k).copied().unwrap_or(0);
            let mark = if count == 0 {
                Mark::NeverFired
            } else {
                Mark::Fired
            };
            Row {
                key: k.clone(),
                count,
                mark,
            }
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
    fn without_a_declaration_nothing_is_flagged() {
        let mut t = WorldTally::new("x".into(), None);
        t.faults_fired.insert("a".into(), 1);
        assert_eq!(t.fault_rows()[0].mark, Mark::Fired);
        assert!(t.never_fired().is_empty() && t.undeclared().is_empty());
    }
}
