//! The user-facing campaign: an agent, a model script, answers, host actions and faults in;
//! a report out, with a one-line replay command per failing seed and the failing seeds kept
//! in a regressions file of the user's crate.

use super::double::{doubles_of_transcript, Double};
use super::faults::Faults;
use super::model::Script;
use super::reach::Shape;
use super::regressions::RegressionFile;
use super::run::{run_seed, run_seed_states};
use super::search::{self, Search};
use super::states;
use super::tool::TOOL_NEEDS_DOUBLE;
use crate::world::{RunOptions, RunReport};
use keel::agent::{AgentBuilder, ScriptedModel};
use keel::interaction::model::ModelError;
use keel::transcript::{ModelOutcome, Transcript};
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
    pub script: Script,
    pub message: String,
    pub answers: Vec<Json>,
    /// `(model call sequence, action)`.
    pub actions: Vec<(u32, HostAction)>,
    /// `(tool name, action)`: performed while that tool's code runs.
    pub tool_actions: Vec<(String, HostAction)>,
    pub faults: Faults,
    /// Tool name → what runs instead of its code under the simulator.
    pub doubles: Arc<BTreeMap<String, Double>>,
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
    /// `(campaign seed, runs)` of a seed search.
    search: Option<(u64, u64)>,
    /// Tools named by [`Campaign::double`] (each must be a tool of the agent).
    explicit_doubles: Vec<String>,
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
                script: Script::Scripted(script),
                message: "Hello.".into(),
                answers: Vec::new(),
                actions: Vec::new(),
                faults: Faults::all(),
                doubles: Arc::new(BTreeMap::new()),
                tool_actions: Vec::new(),
            },
            seeds: 0..crate::limits::TEST_CAMPAIGN_SEEDS,
            jobs: None,
            regressions: Some(PathBuf::from(DEFAULT_REGRESSIONS)),
            setup_errors: Vec::new(),
            search: None,
            explicit_doubles: Vec::new(),
        }
    }

    /// A campaign that replays a recorded run of this agent (a [`Transcript`] written by
    /// `keel::transcript::TranscriptRecorder` around the real model and tools): the model
    /// answers with the recorded responses in call order, tools served from the recorded
    /// results (matched by name and arguments; a tool that asked for input runs as itself),
    /// the recorded human answers are given again, and the first request's user message starts
    /// the run. Faults apply as in any campaign. A recorded model call whose outcome was
    /// unknown has no answer to replay: the campaign reports it as a setup error.
    pub fn replay(agent: impl Fn() -> AgentBuilder + Send + Sync + 'static, transcript: &Transcript) -> Campaign {
        let mut campaign = Campaign::new(agent, ScriptedModel::new()).name("replay");
        let mut responses = Vec::new();
        for call in &transcript.model_calls {
            responses.push(match &call.outcome {
                ModelOutcome::Response(r) => Ok(r.clone()),
                ModelOutcome::Error { class, message } => match class.as_str() {
                    "provider" => Err(ModelError::Provider(message.clone())),
                    "transient" => Err(ModelError::Transient(message.clone())),
                    "host" => Err(ModelError::Host(message.clone())),
                    _ => {
                        campaign.setup_errors.push(format!(
                            "model call {} of the transcript ended with an unknown outcome ({message}): a replay has no answer to give for it; record a run whose model calls all answered",
                            call.sequence
                        ));
                        continue;
                    }
                },
            });
        }
        match transcript.model_calls.first() {
            Some(first) => {
                if let Some(m) = first.request.messages.iter().rev().find(|m| m.role == keel::chat::Role::User) {
                    campaign.setup.message = m.text();
                }
            }
            None => campaign.setup_errors.push("the transcript has no model calls: record a run of the agent".into()),
        }
        campaign.setup.script = Script::Recorded(Arc::new(responses));
        for call in &transcript.tool_calls {
            if let Some(answer) = &call.answer {
                campaign = campaign.answer_json(answer);
            }
        }
        campaign.recorded_tools(transcript)
    }

    /// [`Campaign::replay`] of the transcript file at `path` (an unreadable or malformed file
    /// is a setup error of the campaign, naming the file).
    pub fn replay_file(agent: impl Fn() -> AgentBuilder + Send + Sync + 'static, path: impl AsRef<std::path::Path>) -> Campaign {
        let path = path.as_ref();
        let read = std::fs::read(path)
            .map_err(|e| e.to_string())
            .and_then(|bytes| Transcript::decode(&bytes).map_err(|e| e.to_string()));
        match read {
            Ok(t) => Campaign::replay(agent, &t),
            Err(e) => {
                let mut c = Campaign::new(agent, ScriptedModel::new()).name("replay");
                c.setup_errors.push(format!("transcript {}: {e}", path.display()));
                c
            }
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

    /// Steers the run with `text` while the code of the tool named `tool` runs (its first
    /// call), in the seeds that pick this action: a steer arriving during a batch of tool calls.
    pub fn steer_during(mut self, tool: impl Into<String>, text: impl Into<String>) -> Campaign {
        self.setup
            .tool_actions
            .push((tool.into(), HostAction::Steer(text.into())));
        self
    }

    /// Seed search instead of seeds in order: runs `runs` seeds picked, round by round, among
    /// candidates drawn from `campaign_seed`, favoring seeds whose fault plan resembles those
    /// of runs that reached agent states (and crash points) not reached before. The seeds
    /// picked depend only on `campaign_seed` and the runs' results (not on workers or timing),
    /// and each replays with `KEEL_SEED` like any other. Regression seeds still run first.
    pub fn search(mut self, campaign_seed: u64, runs: u64) -> Campaign {
        self.search = Some((campaign_seed, runs));
        self
    }

    /// Cancels the run when the model is called for the `model_call`-th time, in the seeds
    /// that pick this action.
    pub fn cancel_at(mut self, model_call: u32) -> Campaign {
        self.setup.actions.push((model_call, HostAction::Cancel));
        self
    }

    /// Runs `double` instead of the code of the tool named `tool` (for a tool that does real
    /// I/O: an HTTP call, a socket, a database). Everything the agent declares about the tool
    /// (schema, options, concurrency, Unknown policy) stays as it is, and the tool is faulted
    /// like any other; `double` gets the call's arguments and returns the result text, or `Err`
    /// for a failure the model sees.
    ///
    /// ```no_run
    /// # use keel::prelude::*;
    /// # use keel_sim::harness::Campaign;
    /// # fn my_agent() -> AgentBuilder { Agent::builder("a").version("1") }
    /// # let script = ScriptedModel::new();
    /// Campaign::new(my_agent, script).double("get_weather", |args| {
    ///     Ok(format!("sunny in {}", args.get("city").and_then(|c| c.as_str()).unwrap_or("?")))
    /// });
    /// ```
    pub fn double(
        mut self,
        tool: impl Into<String>,
        double: impl Fn(Json) -> Result<String, String> + Send + Sync + 'static,
    ) -> Campaign {
        let tool = tool.into();
        self.explicit_doubles.push(tool.clone());
        Arc::make_mut(&mut self.setup.doubles).insert(tool, Double::Function(Arc::new(double)));
        self
    }

    /// Serves the tools a recorded run called from that run's results (matched by tool name
    /// and arguments), instead of running their code: a real run recorded once with
    /// [`keel::transcript::TranscriptRecorder`] gives the campaign tools that did real I/O.
    /// A call whose arguments the transcript does not hold fails the run as a setup error
    /// naming the call. Doubles given with [`Campaign::double`] win over recorded ones.
    pub fn recorded_tools(mut self, transcript: &keel::transcript::Transcript) -> Campaign {
        let doubles = Arc::make_mut(&mut self.setup.doubles);
        for (name, double) in doubles_of_transcript(transcript) {
            doubles.entry(name).or_insert(double);
        }
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

    /// Runs the campaign: stored regression seeds first, then the seeds (or, with
    /// [`Campaign::search`], the seeds the search picks). With `KEEL_SEED=N` set, runs only seed
    /// `N` (trace kept) and records nothing.
    pub fn run(self) -> CampaignReport {
        crate::panics::install_hook();
        let replay = ReplayCommand::of_this_test();
        let shape = Shape::of(&self.setup);
        let mut report = CampaignReport {
            name: self.setup.name.clone(),
            runs: 0,
            regressions_replayed: 0,
            failures: Vec::new(),
            fired: BTreeMap::new(),
            crash_points: BTreeMap::new(),
            states: BTreeMap::new(),
            expected: (shape.fault_kinds(&self.setup), shape.crash_points(&self.setup)),
            reachable_states: states::reachable(&shape),
            replay,
            recorded: Vec::new(),
            setup_errors: self.setup_errors.clone(),
            notes: Vec::new(),
            single: false,
            searched: self.search.map(|(seed, _)| seed),
        };
        report.setup_errors.extend(self.unknown_tools());
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
                if self.search.is_none() {
                    for s in self.seeds.clone() {
                        if !seeds.contains(&s) {
                            seeds.push(s);
                        }
                    }
                }
            }
        }
        let actions = self.setup.actions.len() + self.setup.tool_actions.len();
        let faults = self.setup.faults.clone();
        let setup = Arc::new(self.setup);
        let options = RunOptions { keep_trace };
        let jobs = self
            .jobs
            .unwrap_or_else(crate::campaign::parallel::default_jobs);
        let batch = |seeds: &[u64]| {
            let mut out: Vec<Option<(RunReport, BTreeMap<String, u64>)>> = vec![None; seeds.len()];
            crate::campaign::parallel::run_indexed(
                seeds.len() as u64,
                jobs,
                |i| run_seed_states(&setup, seeds[i as usize], &options),
                |i, r, _| {
                    out[i as usize] = Some(r);
                    None
                },
            );
            out.into_iter().flatten().collect::<Vec<_>>()
        };
        for (r, reached) in batch(&seeds) {
            report.absorb(r, reached, keep_trace);
        }
        if let (Some((campaign_seed, runs)), false) = (self.search, keep_trace) {
            let mut search = Search::new(campaign_seed, faults, actions);
            search.seen.extend(report.states.keys().cloned());
            let mut left = runs;
            while left > 0 {
                let n = usize::try_from(left).unwrap_or(usize::MAX).min(search::ROUND);
                let round = search.round(n);
                for (r, reached) in batch(&round) {
                    let seen = reached.keys().cloned().chain(r.crash_points_hit.keys().map(|p| format!("point.{p}")));
                    search.learn(r.seed, seen.collect::<Vec<_>>());
                    report.absorb(r, reached, false);
                }
                left -= n as u64;
            }
        }
        report.lift_configuration_errors();
        if let (Some(file), false) = (&file, keep_trace) {
            match file.record(&setup.name, &report.failures) {
                Ok(recorded) => report.recorded = recorded,
                Err(e) => report.notes.push(e),
            }
        }
        report
    }

    /// Doubles and tool actions that name no tool of the agent.
    fn unknown_tools(&self) -> Vec<String> {
        let Ok(agent) = (self.setup.agent)().model(ScriptedModel::new()).build() else {
            return Vec::new();
        };
        let tools: Vec<&String> = agent.tool_options().keys().collect();
        let names = |v: &[&String]| v.iter().map(|t| format!("`{t}`")).collect::<Vec<_>>().join(", ");
        let mut errors = Vec::new();
        for name in &self.explicit_doubles {
            if !tools.contains(&name) {
                errors.push(format!("Campaign::double(\"{name}\"): the agent has no tool named `{name}` (its tools: {})", names(&tools)));
            }
        }
        for (name, _) in &self.setup.tool_actions {
            if !tools.contains(&name) {
                errors.push(format!("steer_during(\"{name}\"): the agent has no tool named `{name}` (its tools: {})", names(&tools)));
            }
        }
        errors
    }
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
    /// Agent state → runs that reached it.
    states: BTreeMap<String, u64>,
    /// (fault kinds, crash points) the agent's shape can reach under the campaign, each with
    /// what makes it fire.
    expected: (Vec<(String, String)>, Vec<(String, String)>),
    /// Agent states the shape can reach, each with what reaches it.
    reachable_states: Vec<(String, String)>,
    replay: ReplayCommand,
    recorded: Vec<u64>,
    setup_errors: Vec<String>,
    notes: Vec<String>,
    /// Only one seed ran (`KEEL_SEED`): coverage is not judged.
    single: bool,
    /// The campaign seed of a seed search.
    searched: Option<u64>,
}

/// Prefix of a setup error that is a harness configuration error.
const CONFIGURATION: &str = "harness configuration error (not a bug of the agent): ";

impl CampaignReport {
    fn absorb(&mut self, r: RunReport, reached: BTreeMap<String, u64>, print: bool) {
        self.runs += 1;
        for (k, v) in &r.faults_fired {
            *self.fired.entry(k.clone()).or_insert(0) += v;
        }
        for (k, v) in &r.crash_points_hit {
            *self.crash_points.entry(k.clone()).or_insert(0) += v;
        }
        for k in reached.keys() {
            *self.states.entry(k.clone()).or_insert(0) += 1;
        }
        if print {
            println!("{r}");
            for line in r.trace.iter().flatten() {
                println!("  | {line}");
            }
        }
        if !r.passed() {
            self.failures.push(r);
        }
    }

    /// A run that failed because the harness lacks a double for a tool doing real I/O is a
    /// configuration error of the campaign: reported once as such, never kept as a regression.
    fn lift_configuration_errors(&mut self) {
        let mut kept = Vec::new();
        for r in std::mem::take(&mut self.failures) {
            let config: Vec<&crate::world::Violation> =
                r.violations.iter().filter(|v| v.invariant == TOOL_NEEDS_DOUBLE).collect();
            if config.is_empty() {
                kept.push(r);
                continue;
            }
            for v in config {
                let line = format!("{CONFIGURATION}{}", v.detail);
                if !self.setup_errors.contains(&line) {
                    self.setup_errors.push(line);
                }
            }
        }
        self.failures = kept;
    }

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

    /// What made the campaign unusable: a bad setup, or a harness configuration error (a tool
    /// doing real I/O without a double), each saying what to change.
    pub fn setup_errors(&self) -> &[String] {
        &self.setup_errors
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

    /// Agent state → runs that reached it (`crash.parked`, `unknown.while_input_waits`,
    /// `steer.during_batch`, `restore.unknown.hold`, ...).
    pub fn states_reached(&self) -> &BTreeMap<String, u64> {
        &self.states
    }

    /// Agent states the agent's shape can reach under this campaign that no run reached, each
    /// with what would reach it.
    pub fn states_not_reached(&self) -> Vec<(String, String)> {
        self.reachable_states
            .iter()
            .filter(|(s, _)| !self.states.contains_key(s))
            .cloned()
            .collect()
    }

    /// What the campaign can fire (from the agent's tools, policies, script and the
    /// campaign's answers, actions and faults) but never did.
    pub fn never_fired(&self) -> Vec<String> {
        self.never_fired_with_reasons().into_iter().map(|(k, _)| k).collect()
    }

    /// [`CampaignReport::never_fired`], each with what would make it fire.
    pub fn never_fired_with_reasons(&self) -> Vec<(String, String)> {
        let kinds = self.expected.0.iter().filter(|(k, _)| !self.fired.contains_key(k));
        let points = self.expected.1.iter().filter(|(p, _)| !self.crash_points.contains_key(p));
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

    /// Panics unless every fault kind and crash point the agent's shape can reach under this
    /// campaign fired, naming for each one that did not what would make it fire (skipped
    /// when `KEEL_SEED` replays one seed).
    #[track_caller]
    pub fn assert_every_fault_fired(&self) {
        let missing = self.never_fired_with_reasons();
        // One replayed seed (`KEEL_SEED`) is not a campaign: nothing to judge.
        if !missing.is_empty() && !self.single {
            let lines: Vec<String> = missing.iter().map(|(k, how)| format!("  {k}: needs {how}")).collect();
            panic!("campaign {}: never fired:\n{}\n{self}", self.name, lines.join("\n"));
        }
    }

    /// Writes the campaign's coverage and failures as one self-contained HTML page (the
    /// index of a campaign: every state reached or not, with what would reach it, every
    /// fault and crash point, and each failing seed with its replay command).
    pub fn write_html(&self, path: impl AsRef<std::path::Path>) -> std::io::Result<()> {
        std::fs::write(path, super::html::render(self))
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn reachable_states(&self) -> &[(String, String)] {
        &self.reachable_states
    }

    pub(crate) fn expected(&self) -> &(Vec<(String, String)>, Vec<(String, String)>) {
        &self.expected
    }
}

impl fmt::Display for CampaignReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for e in &self.setup_errors {
            match e.strip_prefix(CONFIGURATION) {
                Some(rest) => writeln!(f, "campaign {}: {CONFIGURATION}{rest}", self.name)?,
                None => writeln!(f, "campaign {}: setup error: {e}", self.name)?,
            }
        }
        writeln!(
            f,
            "campaign {}: {} runs ({} regression seeds first{}), {} failed",
            self.name,
            self.runs,
            self.regressions_replayed,
            self.searched.map(|s| format!(", seeds searched from campaign seed {s}")).unwrap_or_default(),
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
        let reached: Vec<String> = self.states.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let total = self.reachable_states.len();
        let hit = self.reachable_states.iter().filter(|(s, _)| self.states.contains_key(s)).count();
        writeln!(f, "  states reached ({hit} of {total} reachable; runs each): {}", reached.join(", "))?;
        if !self.single {
            for (s, how) in self.states_not_reached() {
                writeln!(f, "  state not reached: {s} (needs {how})")?;
            }
            for (k, how) in self.never_fired_with_reasons() {
                writeln!(f, "  never fired: {k} (needs {how})")?;
            }
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
