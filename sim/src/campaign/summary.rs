//! The campaign summary printed on stdout: counts, fault and crash tallies, and one
//! `FAIL ...` line plus a replay command per failing run.
//!
//! Everything but the two timing lines is a function of the runs' results alone, so the
//! summary is identical for any `--jobs`.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::time::Duration;

use crate::coverage::{Mark, Row, WorldTally};
use crate::limits::MAX_PRINTED_FAILURES;
use crate::mutation::{self, Mutation};
use crate::world::{RunReport, DETERMINISM_INVARIANT};

fn sum_over(worlds: &[WorldTally], part: impl Fn(&WorldTally) -> &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    let mut total = BTreeMap::new();
    for w in worlds {
        for (key, n) in part(w) {
            *total.entry(key.clone()).or_default() += n;
        }
    }
    total
}

/// Where a run came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// A seed stored in a regression file, replayed before the range.
    Regression,
    /// A seed of the campaign's range.
    Range,
}

/// A failing run kept for the summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The run's index in the (unsharded) campaign.
    pub index: u64,
    pub origin: Origin,
    /// What `--scenario` takes to replay it (see [`crate::world::Scenario::replay_name`]).
    pub replay_name: String,
    pub report: RunReport,
}

/// What a campaign found.
#[derive(Debug, Clone, PartialEq)]
pub struct CampaignSummary {
    pub scenarios: Vec<String>,
    /// The scenarios as `--scenario` finds them again (a file scenario: its path).
    pub replay_names: Vec<String>,
    /// The stored regression seeds the campaign (all its shards) replays first, by replay
    /// name.
    pub stored_seeds: Vec<(String, u64)>,
    /// `(K, N)`: this summary covers shard K of N only.
    pub shard: Option<(u64, u64)>,
    pub from: u64,
    pub seeds: u64,
    pub determinism_checked: bool,
    /// The deliberately broken rule every run ran under, if any.
    pub mutation: Option<Mutation>,
    /// `--fail-fast` stopped the campaign at its first failing run.
    pub stopped_at_first_failure: bool,
    pub runs: u64,
    pub regression_runs: u64,
    pub regression_failed: u64,
    pub passed: u64,
    pub failed: u64,
    /// Faults fired and crash points hit, per world, judged against what each world declares
    /// (campaign-wide totals: [`CampaignSummary::faults_fired`], [`CampaignSummary::crash_points_hit`]).
    pub worlds: Vec<WorldTally>,
    pub invariants_checked: u64,
    /// Invariant → failing runs that broke it (a run counts once per invariant).
    pub broken_invariants: BTreeMap<String, u64>,
    /// Every run's trace hash folded into one (see [`super::TraceDigest`]): two builds that
    /// behave the same print the same digest.
    pub traces_digest: String,
    /// The lowest-numbered failing runs (at most `limits::MAX_KEPT_FAILURES`), in run order:
    /// regressions first, then by seed, then by scenario order.
    pub failures: Vec<Failure>,
    pub wall_time: Duration,
}

impl CampaignSummary {
    /// Every fault kind fired, summed over the worlds.
    pub fn faults_fired(&self) -> BTreeMap<String, u64> {
        sum_over(&self.worlds, |w| &w.faults_fired)
    }

    /// Every crash point hit, summed over the worlds.
    pub fn crash_points_hit(&self) -> BTreeMap<String, u64> {
        sum_over(&self.worlds, |w| &w.crash_points_hit)
    }

    pub fn all_passed(&self) -> bool {
        self.failed == 0
    }

    /// Runs per second of wall time.
    pub fn runs_per_second(&self) -> f64 {
        let secs = self.wall_time.as_secs_f64();
        if secs > 0.0 {
            self.runs as f64 / secs
        } else {
            0.0
        }
    }

    /// The summary without the wall-time lines: identical for any number of jobs.
    pub fn render_results(&self) -> String {
        let mut s = String::new();
        // Writing to a String cannot fail.
        let _ = self.write_results(&mut s);
        s
    }

    fn write_results(&self, s: &mut String) -> fmt::Result {
        writeln!(s, "keel-sim campaign")?;
        writeln!(s, "scenarios      {}", self.scenarios.join(" "))?;
        writeln!(
            s,
            "seeds          {}..{} ({} per scenario)",
            self.from,
            self.from.saturating_add(self.seeds),
            self.seeds
        )?;
        let check = if self.determinism_checked {
            "checked (every run twice)"
        } else {
            "not checked"
        };
        if let Some((k, n)) = self.shard {
            let first = self.from.saturating_add(k - 1);
            writeln!(
                s,
                "shard          {k}/{n} (seeds {first}, {}, ... of the range; `merge` all {n} shards' --summary-out files for the whole campaign)",
                first.saturating_add(n)
            )?;
        }
        writeln!(s, "determinism    {check}")?;
        if let Some(m) = self.mutation {
            writeln!(
                s,
                "mutation       {} (keel deliberately broken: failures expected)",
                mutation::name(m)
            )?;
        }
        writeln!(
            s,
            "regressions    {} replayed first, {} failed",
            self.regression_runs, self.regression_failed
        )?;
        writeln!(s, "runs           {}", self.runs)?;
        writeln!(s, "passed         {}", self.passed)?;
        writeln!(s, "failed         {}", self.failed)?;
        if self.stopped_at_first_failure {
            writeln!(s, "stopped        at the first failing run (--fail-fast)")?;
        }
        writeln!(s, "invariants     {} checked", self.invariants_checked)?;
        writeln!(s, "traces         {}", self.traces_digest)?;
        if !self.broken_invariants.is_empty() {
            writeln!(s, "broken invariants (failing runs)")?;
            let width = self.broken_invariants.keys().map(String::len).max().unwrap_or(0);
            for (invariant, runs) in &self.broken_invariants {
                writeln!(s, "  {invariant:<width$}  {runs}")?;
            }
        }
        write_tally(s, "faults fired", &self.worlds, WorldTally::fault_rows)?;
        write_tally(s, "crash boundaries hit", &self.worlds, WorldTally::crash_rows)?;
        for failure in self.failures.iter().take(MAX_PRINTED_FAILURES) {
            let r = &failure.report;
            for (i, v) in r.violations.iter().enumerate() {
                let origin = match (failure.origin, i) {
                    (Origin::Regression, 0) => " (regression)",
                    _ => "",
                };
                writeln!(
                    s,
                    "FAIL seed={} scenario={} invariant={}: {}{origin}",
                    r.seed, r.scenario, v.invariant, v.detail
                )?;
            }
            let check = r
                .violations
                .iter()
                .any(|v| v.invariant == DETERMINISM_INVARIANT);
            writeln!(
                s,
                "  {}",
                replay_command(&failure.replay_name, r.seed, check, self.mutation)
            )?;
            if !r.swarm.is_empty() {
                writeln!(s, "  swarm: {}", r.swarm_line())?;
            }
        }
        let printed = self.failures.len().min(MAX_PRINTED_FAILURES);
        let unprinted = self.failed.saturating_sub(printed as u64);
        if unprinted > 0 {
            writeln!(
                s,
                "... and {unprinted} more failing runs (the first {printed} are printed)"
            )?;
        }
        Ok(())
    }
}

impl fmt::Display for CampaignSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render_results())?;
        writeln!(f, "wall time      {:.3}s", self.wall_time.as_secs_f64())?;
        write!(f, "runs/s         {:.1}", self.runs_per_second())
    }
}

/// One table per world: `  world` then `    key  count[  never fired|  undeclared]`.
fn write_tally(
    s: &mut String,
    title: &str,
    worlds: &[WorldTally],
    rows: fn(&WorldTally) -> Vec<Row>,
) -> fmt::Result {
    writeln!(s, "{title}")?;
    let tables: Vec<(&str, Vec<Row>)> = worlds
        .iter()
        .map(|w| (w.world.as_str(), rows(w)))
        .filter(|(_, r)| !r.is_empty())
        .collect();
    if tables.is_empty() {
        return writeln!(s, "  (none)");
    }
    for (world, rows) in tables {
        writeln!(s, "  {world}")?;
        let width = rows.iter().map(|r| r.key.len()).max().unwrap_or(0);
        let digits = rows
            .iter()
            .map(|r| r.count.to_string().len())
            .max()
            .unwrap_or(1);
        for r in rows {
            let mark = match r.mark {
                Mark::Fired => "",
                Mark::NeverFired => "  never fired",
                Mark::Undeclared => "  undeclared",
            };
            writeln!(s, "    {:<width$}  {:>digits$}{mark}", r.key, r.count)?;
        }
    }
    Ok(())
}

/// The one-line command that replays `seed` of `scenario` (with `--check` for determinism
/// failures, which a single replay cannot show, and the mutation the run was made under).
pub fn replay_command(scenario: &str, seed: u64, check: bool, mutation: Option<Mutation>) -> String {
    let features = if mutation.is_some() {
        " --features mutations"
    } else {
        ""
    };
    let mut cmd = format!(
        "cargo run -p keel-sim{features} -- replay --seed {seed} --scenario {}",
        shell_quote(scenario)
    );
    if check {
        cmd.push_str(" --check");
    }
    if let Some(m) = mutation {
        cmd.push_str(" --mutation ");
        cmd.push_str(mutation::name(m));
    }
    cmd
}

/// Quotes `s` for a POSIX shell when it has anything beyond a safe set of characters.
fn shell_quote(s: &str) -> String {
    let safe = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:=+@%".contains(&b));
    if safe {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::Violation;

    #[test]
    fn replay_command_quotes_odd_names() {
        assert_eq!(
            replay_command("clock-and-rng", 5, false, None),
            "cargo run -p keel-sim -- replay --seed 5 --scenario clock-and-rng"
        );
        assert_eq!(
            replay_command("my file's.scn", 1, true, None),
            r"cargo run -p keel-sim -- replay --seed 1 --scenario 'my file'\''s.scn' --check"
        );
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn failures_print_fail_line_then_replay_command() {
        let mut report = RunReport::new("x", 9);
        report.violations.push(Violation::new("inv", "went wrong"));
        report.swarm.insert("p".into(), "3".into());
        let summary = CampaignSummary {
            scenarios: vec!["x".into()],
            replay_names: vec!["x".into()],
            stored_seeds: Vec::new(),
            shard: None,
            from: 0,
            seeds: 10,
            determinism_checked: false,
            mutation: None,
            stopped_at_first_failure: false,
            runs: 10,
            regression_runs: 0,
            regression_failed: 0,
            passed: 9,
            failed: 1,
            worlds: vec![WorldTally {
                world: "x".into(),
                declared: None,
                expected: crate::coverage::Expected::All,
                faults_fired: BTreeMap::from([("a".to_string(), 2)]),
                crash_points_hit: BTreeMap::new(),
            }],
            invariants_checked: 4,
            broken_invariants: BTreeMap::from([("inv".to_string(), 1)]),
            traces_digest: "ab".into(),
            failures: vec![Failure {
                index: 9,
                origin: Origin::Range,
                replay_name: "x".into(),
                report,
            }],
            wall_time: Duration::from_millis(500),
        };
        let text = summary.to_string();
        let lines: Vec<&str> = text.lines().collect();
        let at = lines.iter().position(|l| l.starts_with("FAIL ")).unwrap();
        assert_eq!(
            lines[at],
            "FAIL seed=9 scenario=x invariant=inv: went wrong"
        );
        assert_eq!(
            lines[at + 1],
            "  cargo run -p keel-sim -- replay --seed 9 --scenario x"
        );
        assert_eq!(lines[at + 2], "  swarm: p=3");
        assert!(text.contains("faults fired\n  x\n    a  2\n"), "{text}");
        assert!(text.contains("crash boundaries hit\n  (none)\n"));
        assert!(text.contains("broken invariants (failing runs)\n  inv  1\n"), "{text}");
        assert!(text.ends_with("runs/s         20.0"));
        assert!(!summary.render_results().contains("wall time"));
    }

    #[test]
    fn declared_kinds_that_never_fired_are_flagged() {
        static DECLARED: crate::coverage::Coverage = crate::coverage::Coverage {
            world: "w",
            fault_kinds: &["seen", "unseen"],
            boundaries: &["start"],
            boundary_faults: &["crash"],
        };
        let mut w = WorldTally::new("w".into(), Some(&DECLARED));
        w.faults_fired.insert("seen".into(), 12);
        w.faults_fired.insert("stray".into(), 1);
        let mut s = String::new();
        write_tally(&mut s, "faults fired", &[w.clone()], WorldTally::fault_rows).unwrap();
        assert_eq!(
            s,
            "faults fired\n  w\n    seen    12\n    unseen   0  never fired\n    stray    1  undeclared\n"
        );
        let mut s = String::new();
        write_tally(&mut s, "crash boundaries hit", &[w], WorldTally::crash_rows).unwrap();
        assert_eq!(s, "crash boundaries hit\n  w\n    start.crash  0  never fired\n");
    }
}
