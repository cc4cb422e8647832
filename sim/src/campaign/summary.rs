//! The campaign summary printed on stdout: counts, fault and crash tallies, and one
//! `FAIL ...` line plus a replay command per failing run.
//!
//! Everything but the two timing lines is a function of the runs' results alone, so the
//! summary is identical for any `--jobs`.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::time::Duration;

use crate::world::{RunReport, DETERMINISM_INVARIANT};

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
    pub origin: Origin,
    pub report: RunReport,
}

/// What a campaign found.
#[derive(Debug, Clone, PartialEq)]
pub struct CampaignSummary {
    pub scenarios: Vec<String>,
    pub from: u64,
    pub seeds: u64,
    pub determinism_checked: bool,
    pub runs: u64,
    pub regression_runs: u64,
    pub regression_failed: u64,
    pub passed: u64,
    pub failed: u64,
    pub faults_fired: BTreeMap<String, u64>,
    pub crash_points_hit: BTreeMap<String, u64>,
    pub invariants_checked: u64,
    /// The lowest-numbered failing runs (at most `limits::MAX_KEPT_FAILURES`), in run order:
    /// regressions first, then by seed, then by scenario order.
    pub failures: Vec<Failure>,
    pub wall_time: Duration,
}

impl CampaignSummary {
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
        writeln!(s, "determinism    {check}")?;
        writeln!(
            s,
            "regressions    {} replayed first, {} failed",
            self.regression_runs, self.regression_failed
        )?;
        writeln!(s, "runs           {}", self.runs)?;
        writeln!(s, "passed         {}", self.passed)?;
        writeln!(s, "failed         {}", self.failed)?;
        writeln!(s, "invariants     {} checked", self.invariants_checked)?;
        write_tally(s, "faults fired", &self.faults_fired)?;
        write_tally(s, "crash boundaries hit", &self.crash_points_hit)?;
        for failure in &self.failures {
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
            writeln!(s, "  {}", replay_command(&r.scenario, r.seed, check))?;
            if !r.swarm.is_empty() {
                writeln!(s, "  swarm: {}", r.swarm_line())?;
            }
        }
        let unkept = self.failed.saturating_sub(self.failures.len() as u64);
        if unkept > 0 {
            writeln!(
                s,
                "... and {unkept} more failing runs (only the first {} are kept)",
                self.failures.len()
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

fn write_tally(s: &mut String, title: &str, tally: &BTreeMap<String, u64>) -> fmt::Result {
    writeln!(s, "{title}")?;
    if tally.is_empty() {
        return writeln!(s, "  (none)");
    }
    let width = tally.keys().map(String::len).max().unwrap_or(0);
    for (name, count) in tally {
        writeln!(s, "  {name:<width$}  {count}")?;
    }
    Ok(())
}

/// The one-line command that replays `seed` of `scenario` (with `--check` for determinism
/// failures, which a single replay cannot show).
pub fn replay_command(scenario: &str, seed: u64, check: bool) -> String {
    let mut cmd = format!(
        "cargo run -p keel-sim -- replay --seed {seed} --scenario {}",
        shell_quote(scenario)
    );
    if check {
        cmd.push_str(" --check");
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
            replay_command("clock-and-rng", 5, false),
            "cargo run -p keel-sim -- replay --seed 5 --scenario clock-and-rng"
        );
        assert_eq!(
            replay_command("my file's.scn", 1, true),
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
            from: 0,
            seeds: 10,
            determinism_checked: false,
            runs: 10,
            regression_runs: 0,
            regression_failed: 0,
            passed: 9,
            failed: 1,
            faults_fired: BTreeMap::from([("a".to_string(), 2)]),
            crash_points_hit: BTreeMap::new(),
            invariants_checked: 4,
            failures: vec![Failure {
                origin: Origin::Range,
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
        assert!(text.contains("faults fired\n  a  2\n"));
        assert!(text.contains("crash boundaries hit\n  (none)\n"));
        assert!(text.ends_with("runs/s         20.0"));
        assert!(!summary.render_results().contains("wall time"));
    }
}
