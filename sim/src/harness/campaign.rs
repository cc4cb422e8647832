//! The user-facing campaign: an agent, a model script, answers, host actions and faults in;
//! a report out, with a one-line replay command per failing seed and the failing seeds kept
//! in a regressions file of the user's crate.

use super::faults::{FaultKind, Faults};
use super::regressions::RegressionFile;
use super::run::run_seed;
use crate::world::{RunOptions, RunReport};
use keel::agent::{AgentBuilder, ScriptedModel, UnknownPolicy};
use keel::json::Json;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

/// The environment variable that replays one seed: `KEEL_SEED=17 cargo test ...` runs only
/// seed 17 of every campaign the command reaches, with its trace printed.
pub const SEED_VARIABLE: &str = "KEEL_SEED";

/// The regressions file when none is named, relative to the user's crate.
pub const DEFAULT_REGRESSIONS: &str = "tests/regressions.txt";

/// Failing runs a report prints in full.
const PRINTED_FAILURES: usize = 5;

/// Something the host does when the model is called for the n-th time (if the seed picks it:
/// each seed performs each action or not, so campaigns cover both).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostAction {
    /// Adds a user message to the conversation (`Run::steer`).
    Steer(String),
    /// Cancels the run (`Run::cancel`).
    Cancel,
}

type MakeAgent = dyn Fn() -> AgentBuilder + Send + Sync;

/// Everything one seed needs.
pub(crate) struct Setup {
    pub name: String,
    pub agent: Box<MakeAgent>,
    pub script: ScriptedModel,
    pub message: String,
    pub answers: Vec<Json>,
    /// `(model call sequence, action)`.
    pub actions: Vec<(u32, HostAction)>,
    pub faults: Faults,
}

/// A fault campaign over a user's own agent.
///
/// ```no_run
/// use keel::prelude::*;
/// use keel_sim::harness::{Campaign, Faults};
///
/// fn my_agent() -> AgentBuilder {
///     Agent::builder("weather").version("1").tool(AskHuman::new("ask_user", "Ask the user."))
/// }
/// let script = ScriptedModel::new().call_tool("ask_user", r#"{"question":"Which city?"}"#).then_text("Done.");
/// let report = Campaign::new(my_agent, script).name("weather").seeds(0..1000).faults(Faults::all()).answers(["Paris"]).run();
/// report.assert_ok(); // on failure: the failing seed's one-line replay command
/// ```
///
/// Each seed builds the agent once (`agent` is called per seed, so the tools' state is fresh
/// for every seed and shared by every restart within it, like an external system), replaces
/// its model with `script`, wraps every tool in the fault-injecting dispatch boundary, and runs
/// it on the facade's `Runtime` under madsim over a store that crashes, loses
/// acknowledgements and fails commits. The whole run is a function of the seed.
pub struct Campaign {
    setup: Setup,
    seeds: Range<u64>,
    jobs: Option<usize>,
    regressions: Option<PathBuf>,
    setup_errors: Vec<String>,
}

impl Campaign {
    /// A campaign over the agent `agent` builds (its model is replaced by `script`).
    pub fn new(
        agent: impl Fn() -> AgentBuilder + Send + Sync + 'static,
        script: ScriptedModel,
    ) -> Campaign {
        Campaign {
            setup: Setup {
                name: "campaign".into(),
                agent: Box::new(agent),
                script,
                message: "Hello.".into(),
                answers: Vec::new(),
                actions: Vec::new(),
                faults: Faults::all(),
            },
            seeds: 0..crate::limits::TEST_CAMPAIGN_SEEDS,
            jobs: None,
            regressions: Some(PathBuf::from(DEFAULT_REGRESSIONS)),
            setup_errors: Vec::new(),
        }
    }

    /// The campaign's name in reports and in the regressions file (default `campaign`; no
    /// whitespace).
    pub fn name(mut self, name: impl Into<String>) -> Campaign {
        let name: String = name.into();
        if name.is_empty() || name.chars().any(|c| c.is_whitespace() || c == '#') {
            self.setup_errors.push(format!(
                "campaign name {name:?} must be non-empty, without whitespace or `#`"
            ));
        }
        self.setup.name = name;
        self
    }

    /// The user message every run starts with.
    pub fn user_message(mut self, text: impl Into<String>) -> Campaign {
        self.setup.message = text.into();
        self
    }

    /// The seeds to run (default `0..1000`).
    pub fn seeds(mut self, seeds: Range<u64>) -> Campaign {
        self.seeds = seeds;
        self
    }

    /// The fault kinds to inject (default: all).
    pub fn faults(mut self, faults: Faults) -> Campaign {
        self.setup.faults = faults;
        self
    }

    /// Text answers for input requests, in order (the last one repeats). Each is checked
    /// against the request's real response schema; one that does not match fails the run.
    pub fn answers<I, S>(mut self, answers: I) -> Campaign
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.setup
            .answers
            .extend(answers.into_iter().map(|a| Json::str(a.into())));
        self
    }

    /// One answer given as JSON text (for response schemas that are not strings).
    pub fn answer_json(mut self, json: &str) -> Campaign {
        match keel::json::parse(json.as_bytes()) {
            Ok(v) => self.setup.answers.push(v),
            Err(e) => self
                .setup_errors
                .push(format!("answer {json:?} is not JSON: {e}")),
        }
        self
    }

    /// Steers the run with `text` when the model is called for the `model_call`-th time
    /// (1-based), in the seeds that pick this action.
    pub fn steer_at(mut self, model_call: u32, text: impl Into<String>) -> Campaign {
        self.setup
            .actions
            .push((model_call, HostAction::Steer(text.into())));
        self
    }

    /// Cancels the run when the model is called for the `model_call`-th time, in the seeds
    /// that pick this action.
    pub fn cancel_at(mut self, model_call: u32) -> Campaign {
        self.setup.actions.push((model_call, HostAction::Cancel));
        self
    }

    /// Worker threads (default: up to 2). Reports do not depend on it.
    pub fn jobs(mut self, jobs: usize) -> Campaign {
        self.jobs = Some(jobs.max(1));
        self
    }

    /// Where failing seeds are kept and replayed from first (default `tests/regressions.txt`,
    /// relative to the crate under test).
    pub fn regressions(mut self, path: impl Into<PathBuf>) -> Campaign {
        self.regressions = Some(path.into());
        self
    }

    /// Neither replays nor records regression seeds (for campaigns expected to fail).
    pub fn no_regressions(mut self) -> Campaign {
        self.regressions = None;
        self
    }

    /// Runs one seed with its trace kept (what `KEEL_SEED` does).
    pub fn run_one(self, seed: u64) -> RunReport {
        crate::panics::install_hook();
        run_seed(
            &Arc::new(self.setup),
            seed,
            &RunOptions { keep_trace: true },
        )
    }

    /// Runs the campaign: stored regression seeds first, then the seeds. With `KEEL_SEED=N`
    /// set, runs only seed `N` (trace kept) and records nothing.
    pub fn run(self) -> CampaignReport {
        crate::panics::install_hook();
        let replay = ReplayCommand::of_this_test();
        let expected = expected_coverage(&self.setup);
        let mut report = CampaignReport {
            name: self.setup.name.clone(),
            runs: 0,
            regressions_replayed: 0,
            failures: Vec::new(),
            fired: BTreeMap::new(),
            crash_points: BTreeMap::new(),
            expected,
            replay,
            recorded: Vec::new(),
            setup_errors: self.setup_errors.clone(),
            notes: Vec::new(),
            single: false,
        };
        if !report.setup_errors.is_empty() {
            return report;
        }
        let single = std::env::var(SEED_VARIABLE)
            .ok()
            .map(|s| (s.trim().parse::<u64>(), s));
        let file = self.regressions.as_ref().map(|p| RegressionFile::new(p));
        let mut seeds: Vec<u64> = Vec::new();
        let keep_trace = single.is_some();
        report.single = keep_trace;
        match single {
            Some((Ok(seed), _)) => seeds.push(seed),
            Some((Err(_), text)) => {
                report
                    .setup_errors
                    .push(format!("{SEED_VARIABLE}={text:?} is not a decimal seed"));
                return report;
            }
            None => {
                if let Some(file) = &file {
                    match file.seeds(&self.setup.name) {
                        Ok(stored) => {
                            report.regressions_replayed = stored.len();
                            seeds.extend(stored);
                        }
                        Err(e) => {
                            report.setup_errors.push(e);
                            return report;
                        }
                    }
                }
                for s in self.seeds.clone() {
                    if !seeds.contains(&s) {
                        seeds.push(s);
                    }
                }
            }
        }
        let setup = Arc::new(self.setup);
        let options = RunOptions { keep_trace };
        let jobs = self
            .jobs
            .unwrap_or_else(crate::campaign::parallel::default_jobs);
        let mut reports: Vec<Option<RunReport>> = vec![None; seeds.len()];
        crate::campaign::parallel::run_indexed(
            seeds.len() as u64,
            jobs,
            |i| run_seed(&setup, seeds[i as usize], &options),
            |i, r, _| {
                reports[i as usize] = Some(r);
                None
            },
        );
        for r in reports.into_iter().flatten() {
            report.runs += 1;
            for (k, v) in &r.faults_fired {
                *report.fired.entry(k.clone()).or_insert(0) += v;
            }
            for (k, v) in &r.crash_points_hit {
                *report.crash_points.entry(k.clone()).or_insert(0) += v;
            }
            if keep_trace {
                println!("{r}");
                for line in r.trace.iter().flatten() {
                    println!("  | {line}");
                }
            }
            if !r.passed() {
                report.failures.push(r);
            }
        }
        if let (Some(file), false) = (&file, keep_trace) {
            match file.record(&setup.name, &report.failures) {
                Ok(recorded) => report.recorded = recorded,
                Err(e) => report.notes.push(e),
            }
        }
        report
    }
}

/// What a campaign must fire, from what the agent declares and what the campaign sets up.
fn expected_coverage(setup: &Setup) -> (Vec<String>, Vec<String>) {
    let probe = (setup.agent)().model(ScriptedModel::new()).build();
    let options = probe.map(|a| a.tool_options().clone()).unwrap_or_default();
    let policies: BTreeSet<UnknownPolicy> = options.values().map(|o| o.unknown_policy()).collect();
    let f = &setup.faults;
    let mut kinds = Vec::new();
    for kind in f.kinds() {
        let tool_fault = !matches!(
            kind,
            FaultKind::CrashAfter | FaultKind::LoseAck | FaultKind::FailBefore
        );
        if (tool_fault && options.is_empty())
            || (kind == FaultKind::Repeat && !policies.contains(&UnknownPolicy::Retry))
        {
            continue;
        }
        kinds.push(kind.as_str().to_owned());
    }
    let commit: Vec<&str> = [
        FaultKind::CrashAfter,
        FaultKind::LoseAck,
        FaultKind::FailBefore,
    ]
    .into_iter()
    .filter(|k| f.contains(*k))
    .map(|k| k.as_str().trim_start_matches("commit."))
    .collect();
    if !commit.is_empty() {
        kinds.push("host.crash".into());
    }
    let unknowns = !commit.is_empty()
        || f.kinds().any(|k| {
            matches!(
                k,
                FaultKind::Panic | FaultKind::HostFailure | FaultKind::Cancel | FaultKind::Deadline
            )
        });
    if unknowns && !options.is_empty() {
        for p in &policies {
            kinds.push(format!("unknown.{}", p.as_str()));
        }
    }
    if !setup.answers.is_empty() {
        kinds.push("host.input.answer".into());
    }
    for (_, a) in &setup.actions {
        let k = match a {
            HostAction::Steer(_) => "host.steer",
            HostAction::Cancel => "host.cancel",
        };
        if !kinds.iter().any(|x| x == k) {
            kinds.push(k.into());
        }
    }
    let mut boundaries = vec![
        "start",
        "progress",
        "pending",
        "settled",
        "terminal",
        "activation",
    ];
    if !options.is_empty() {
        boundaries.push("child_start");
    }
    if !setup.answers.is_empty() {
        boundaries.extend(["parked", "signals"]);
    }
    if unknowns && !options.is_empty() {
        boundaries.push("resolved");
    }
    let mut points = Vec::new();
    for b in boundaries {
        for c in &commit {
            points.push(format!("{b}.{c}"));
        }
    }
    (kinds, points)
}

/// The one-line command that replays a seed from the user's crate.
#[derive(Clone, Debug)]
struct ReplayCommand {
    test_binary: Option<String>,
    test_name: Option<String>,
}

impl ReplayCommand {
    fn of_this_test() -> ReplayCommand {
        // A test binary is `target/<profile>/deps/<name>-<hash>`.
        let test_binary = std::env::current_exe()
            .ok()
            .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
            .map(|stem| match stem.rsplit_once('-') {
                Some((name, hash))
                    if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) =>
                {
                    name.to_owned()
                }
                _ => stem,
            });
        ReplayCommand {
            test_binary,
            test_name: crate::campaign::parallel::current_test_name(),
        }
    }

    fn line(&self, seed: u64) -> String {
        let mut line = format!("{SEED_VARIABLE}={seed} cargo test");
        if let Some(bin) = &self.test_binary {
            line.push_str(&format!(" --test {bin}"));
        }
        if let Some(test) = &self.test_name {
            line.push_str(&format!(" -- {test} --exact --nocapture"));
        } else {
            line.push_str(" -- --nocapture");
        }
        line
    }
}

/// What a campaign found.
#[derive(Debug)]
pub struct CampaignReport {
    name: String,
    runs: u64,
    regressions_replayed: usize,
    failures: Vec<RunReport>,
    fired: BTreeMap<String, u64>,
    crash_points: BTreeMap<String, u64>,
    /// (fault kinds, crash points) the campaign must fire.
    expected: (Vec<String>, Vec<String>),
    replay: ReplayCommand,
    recorded: Vec<u64>,
    setup_errors: Vec<String>,
    notes: Vec<String>,
    /// Only one seed ran (`KEEL_SEED`): coverage is not judged.
    single: bool,
}

impl CampaignReport {
    /// Whether every run kept every invariant (and the campaign's setup was usable).
    pub fn passed(&self) -> bool {
        self.failures.is_empty() && self.setup_errors.is_empty() && self.runs > 0
    }

    /// Runs made (regression seeds included).
    pub fn runs(&self) -> u64 {
        self.runs
    }

    /// The failing runs, in seed order of the campaign.
    pub fn failures(&self) -> &[RunReport] {
        &self.failures
    }

    /// Every invariant some run broke.
    pub fn broken_invariants(&self) -> BTreeSet<String> {
        self.failures
            .iter()
            .flat_map(|r| r.violations.iter().map(|v| v.invariant.clone()))
            .collect()
    }

    /// Fault kind (and host action) → times fired over the campaign.
    pub fn faults_fired(&self) -> &BTreeMap<String, u64> {
        &self.fired
    }

    /// Crash point (`boundary.fault`) → times hit over the campaign.
    pub fn crash_points_hit(&self) -> &BTreeMap<String, u64> {
        &self.crash_points
    }

    /// What the campaign was expected to fire (from the agent's tools and policies and the
    /// campaign's answers, actions and faults) but never did.
    pub fn never_fired(&self) -> Vec<String> {
        let kinds = self
            .expected
            .0
            .iter()
            .filter(|k| !self.fired.contains_key(*k));
        let points = self
            .expected
            .1
            .iter()
            .filter(|p| !self.crash_points.contains_key(*p));
        kinds.chain(points).cloned().collect()
    }

    /// The one-line command that replays `seed` from the user's crate.
    pub fn replay_command(&self, seed: u64) -> String {
        self.replay.line(seed)
    }

    /// Stored regression seeds replayed before the campaign's own seeds.
    pub fn regressions_replayed(&self) -> usize {
        self.regressions_replayed
    }

    /// Seeds this run newly wrote to the regressions file.
    pub fn recorded(&self) -> &[u64] {
        &self.recorded
    }

    /// Panics unless every run passed, printing the failures with their replay commands.
    #[track_caller]
    pub fn assert_ok(&self) {
        if !self.passed() {
            panic!("{self}");
        }
    }

    /// Panics unless every expected fault kind and crash point fired (skipped when
    /// `KEEL_SEED` replays one seed).
    #[track_caller]
    pub fn assert_every_fault_fired(&self) {
        let missing = self.never_fired();
        // One replayed seed (`KEEL_SEED`) is not a campaign: nothing to judge.
        if !missing.is_empty() && !self.single {
            panic!(
                "campaign {}: never fired: {}\n{self}",
                self.name,
                missing.join(", ")
            );
        }
    }
}

impl fmt::Display for CampaignReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for e in &self.setup_errors {
            writeln!(f, "campaign {}: setup error: {e}", self.name)?;
        }
        writeln!(
            f,
            "campaign {}: {} runs ({} regression seeds first), {} failed",
            self.name,
            self.runs,
            self.regressions_replayed,
            self.failures.len()
        )?;
        let fired: Vec<String> = self.fired.iter().map(|(k, v)| format!("{k} {v}")).collect();
        writeln!(f, "  fired: {}", fired.join(", "))?;
        let points: Vec<String> = self
            .crash_points
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        writeln!(f, "  crash points: {}", points.join(", "))?;
        let missing = self.never_fired();
        if !missing.is_empty() && !self.single {
            writeln!(f, "  never fired: {}", missing.join(", "))?;
        }
        let broken: Vec<String> = self.broken_invariants().into_iter().collect();
        if !broken.is_empty() {
            writeln!(f, "  broken invariants: {}", broken.join(", "))?;
        }
        for r in self.failures.iter().take(PRINTED_FAILURES) {
            writeln!(f, "FAIL {r}")?;
            writeln!(f, "  replay: {}", self.replay_command(r.seed))?;
        }
        if self.failures.len() > PRINTED_FAILURES {
            writeln!(
                f,
                "... and {} more failing seeds",
                self.failures.len() - PRINTED_FAILURES
            )?;
        }
        if !self.recorded.is_empty() {
            let seeds: Vec<String> = self.recorded.iter().map(u64::to_string).collect();
            writeln!(
                f,
                "  recorded in the regressions file: {}",
                seeds.join(", ")
            )?;
        }
        for n in &self.notes {
            writeln!(f, "  note: {n}")?;
        }
        Ok(())
    }
}
