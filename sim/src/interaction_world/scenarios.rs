//! The Interaction-world scenarios: `interaction-swarm` (a generated spec per seed),
//! `interaction-crash-matrix` (built-in scenario files × a crash or lost ack at each commit of
//! their fault-free run), and scenario files loaded through the registry's file loader.

use super::generate::generate;
use super::run::{compares_output, run_outcome_on_madsim, run_outcome_unchecked, RunOutcome};
use super::spec::{CommitFaultKind, Spec};
use super::spec_json::{decode_bytes, load_file};
use super::declared::expected_of;
use super::transcript::{spec_of_transcript, TranscriptScenario};
use crate::coverage::{Coverage, Expected};
use crate::limits::MAX_INTERACTION_COMMIT_DECISIONS;
use crate::schedule::{FaultSchedule, ScheduleError};
use crate::world::{run_guarded, RunOptions, RunReport, Scenario, Schedulable, Violation};
use std::error::Error as StdError;
use std::path::Path;
use std::sync::Arc;

/// `interaction-swarm`: every seed generates its own spec and fault mix.
pub struct InteractionSwarm;

/// One swarm seed.
pub fn swarm_run(seed: u64, options: &RunOptions) -> RunReport {
    swarm_run_with(seed, None, options).report
}

/// One swarm seed, with its own commit faults or (`Some`) exactly these.
fn swarm_run_with(seed: u64, replay: Option<&FaultSchedule>, options: &RunOptions) -> RunOutcome {
    let (mut spec, drawn) = generate(seed);
    spec.faults.replay = replay.map(replay_of);
    let mut out = guarded_outcome("interaction-swarm", &spec, seed, options);
    out.report.swarm.extend(drawn);
    out
}

/// [`run_outcome_on_madsim`] with a panic turned into a failing report.
pub(super) fn guarded_outcome(scenario: &str, spec: &Spec, seed: u64, options: &RunOptions) -> RunOutcome {
    let mut outcome = None;
    let report = run_guarded(scenario, seed, || {
        let mut out = run_outcome_on_madsim(spec, scenario, seed, options);
        // The report moves through the guard (which may add panic violations) and back.
        let report = std::mem::replace(&mut out.report, RunReport::new(scenario, seed));
        outcome = Some(out);
        report
    });
    match outcome {
        Some(mut out) => {
            out.report = report;
            out
        }
        None => RunOutcome { report, summary: Default::default(), commits: 0, schedule: FaultSchedule::default(), store: None },
    }
}

/// The kinds an Interaction fault schedule names: the commit faults.
const SCHEDULE_KINDS: [&str; 3] = ["crash_after", "lose_ack", "fail_before"];

/// A printed schedule as the store's replay list (kinds already validated).
fn replay_of(schedule: &FaultSchedule) -> Vec<(u64, CommitFaultKind)> {
    schedule.events.iter().filter_map(|e| CommitFaultKind::from_name(&e.kind).map(|k| (e.at, k))).collect()
}

/// Checks a schedule a caller hands in: commit-fault kinds, increasing commit indices.
fn validate(schedule: &FaultSchedule) -> Result<(), ScheduleError> {
    schedule.validate(&SCHEDULE_KINDS, MAX_INTERACTION_COMMIT_DECISIONS)
}

impl Schedulable for InteractionSwarm {
    /// The commit faults the seed fires (known by running it once: they depend on the run).
    fn schedule_of(&self, seed: u64) -> FaultSchedule {
        swarm_run_with(seed, None, &RunOptions::default()).schedule
    }

    fn run_with_schedule(&self, seed: u64, schedule: &FaultSchedule, options: &RunOptions) -> Result<RunReport, ScheduleError> {
        validate(schedule)?;
        Ok(swarm_run_with(seed, Some(schedule), options).report)
    }
}

impl Scenario for InteractionSwarm {
    fn name(&self) -> &str {
        "interaction-swarm"
    }
    fn coverage(&self) -> Option<&'static Coverage> {
        Some(&super::COVERAGE)
    }
    fn description(&self) -> &str {
        "Interaction strategy on the async Engine under madsim: generated scripts, tools, host actions and commit faults"
    }
    fn run(&self, seed: u64, options: &RunOptions) -> RunReport {
        swarm_run(seed, options)
    }
    fn schedulable(&self) -> Option<&dyn Schedulable> {
        Some(self)
    }
}

/// The scenario files the crash matrix crashes (embedded so the built-in needs no files).
pub const MATRIX_FILES: &[(&str, &str)] = &[
    ("tool-loop", include_str!("../../scenarios/tool-loop.json")),
    ("parallel-keys", include_str!("../../scenarios/parallel-keys.json")),
    ("input-wait", include_str!("../../scenarios/input-wait.json")),
    ("steer-during-model-call", include_str!("../../scenarios/steer-during-model-call.json")),
    ("tool-panic-unknown", include_str!("../../scenarios/tool-panic-unknown.json")),
];

/// The commit faults a crash point is tried with.
pub const MATRIX_FAULTS: [CommitFaultKind; 2] = [CommitFaultKind::CrashAfter, CommitFaultKind::LoseAck];

/// Runs `spec` once without faults and without compaction, and once (compacted) with `fault`
/// at commit `commit` (if the clean run has that commit), checking the faulted run ends like
/// the clean one: a crash and a restore from a compacted cut change nothing a host sees.
/// Compaction changes cut contents, never the number of commits, so the clean run's commits
/// index the faulted run's. Returns the faulted report (or the clean one when the commit does
/// not exist).
pub fn crash_at(spec: &Spec, scenario: &str, seed: u64, commit: u64, fault: CommitFaultKind, options: &RunOptions) -> RunReport {
    let mut clean_spec = spec.clone();
    clean_spec.faults = Default::default();
    clean_spec.compaction = false;
    let clean = run_outcome_unchecked(&clean_spec, scenario, seed, &RunOptions::default());
    clean_spec.compaction = spec.compaction;
    crash_after_clean(&clean_spec, &clean, scenario, seed, commit, fault, options)
}

/// [`crash_at`] with the fault-free run already made (`clean` is `spec`'s run without faults).
pub fn crash_after_clean(
    spec: &Spec,
    clean: &RunOutcome,
    scenario: &str,
    seed: u64,
    commit: u64,
    fault: CommitFaultKind,
    options: &RunOptions,
) -> RunReport {
    let mut clean_spec = spec.clone();
    clean_spec.faults = Default::default();
    if commit >= clean.commits {
        let mut r = clean.report.clone();
        r.outcome = format!("no commit {commit} (clean run made {}): {}", clean.commits, r.outcome);
        return r;
    }
    let mut faulted = clean_spec.clone();
    faulted.faults.at = vec![(commit, fault)];
    let out = run_outcome_on_madsim(&faulted, scenario, seed, options);
    compare(out, clean, &faulted)
}

fn compare(mut out: RunOutcome, clean: &RunOutcome, spec: &Spec) -> RunReport {
    out.report.invariants_checked += 1;
    if compares_output(spec) && out.summary != clean.summary {
        out.report.violations.push(Violation::new(
            "same_output",
            format!("crashed run ended {:?}, the fault-free run {:?}", out.summary, clean.summary),
        ));
    }
    out.report
}

/// Every (file, commit, fault) case of the crash matrix for `seed`: the file is chosen by
/// `seed % files`, the commit and the fault by the rest.
pub fn matrix_case(seed: u64) -> (usize, u64, CommitFaultKind) {
    let files = MATRIX_FILES.len() as u64;
    let file = (seed % files) as usize;
    let rest = seed / files;
    let fault = MATRIX_FAULTS[(rest % MATRIX_FAULTS.len() as u64) as usize];
    (file, rest / MATRIX_FAULTS.len() as u64, fault)
}

/// `interaction-crash-matrix`.
pub struct InteractionCrashMatrix;

impl Scenario for InteractionCrashMatrix {
    fn name(&self) -> &str {
        "interaction-crash-matrix"
    }
    fn coverage(&self) -> Option<&'static Coverage> {
        Some(&super::COVERAGE)
    }
    fn description(&self) -> &str {
        "built-in scenario files crashed (or with a lost ack) after each commit of their fault-free run, restored and settled from truth"
    }
    fn run(&self, seed: u64, options: &RunOptions) -> RunReport {
        run_guarded("interaction-crash-matrix", seed, || {
            let (file, commit, fault) = matrix_case(seed);
            let (name, text) = MATRIX_FILES[file];
            let spec = match decode_bytes(name, text.as_bytes()) {
                Ok(s) => s,
                Err(e) => {
                    let mut r = RunReport::new("interaction-crash-matrix", seed);
                    r.violations.push(Violation::new("scenario_valid", e.to_string()));
                    return r;
                }
            };
            let mut r = crash_at(&spec, "interaction-crash-matrix", seed, commit, fault, options);
            r.swarm.insert("matrix.case".into(), format!("{name}@{commit}.{}", fault.as_str()));
            r
        })
    }
}

/// A scenario file: runs its spec (and its own faults) on madsim.
pub struct FileScenario {
    pub spec: Spec,
    /// What `--scenario` takes to load it again: the path as given, or the name of a bundled
    /// file.
    pub replay_name: String,
    /// What the file sets out to exercise (derived from its content once, at load).
    pub expected: Expected,
}

impl FileScenario {
    /// A scenario file's spec, found again by `replay_name`.
    pub fn new(spec: Spec, replay_name: String) -> FileScenario {
        let expected = expected_of(&spec);
        FileScenario { spec, replay_name, expected }
    }
}

impl Scenario for FileScenario {
    fn name(&self) -> &str {
        &self.spec.name
    }
    fn replay_name(&self) -> &str {
        &self.replay_name
    }
    fn coverage(&self) -> Option<&'static Coverage> {
        Some(&super::COVERAGE)
    }
    fn expected_coverage(&self) -> Expected {
        self.expected.clone()
    }
    fn description(&self) -> &str {
        &self.spec.description
    }
    fn run(&self, seed: u64, options: &RunOptions) -> RunReport {
        guarded_outcome(&self.spec.name, &self.spec, seed, options).report
    }
    fn schedulable(&self) -> Option<&dyn Schedulable> {
        Some(self)
    }
}

impl Schedulable for FileScenario {
    fn schedule_of(&self, seed: u64) -> FaultSchedule {
        guarded_outcome(&self.spec.name, &self.spec, seed, &RunOptions::default()).schedule
    }

    fn run_with_schedule(&self, seed: u64, schedule: &FaultSchedule, options: &RunOptions) -> Result<RunReport, ScheduleError> {
        validate(schedule)?;
        let mut spec = self.spec.clone();
        spec.faults.replay = Some(replay_of(schedule));
        Ok(guarded_outcome(&self.spec.name, &spec, seed, options).report)
    }
}

/// The registry's file loader: `keel-sim run --scenario sim/scenarios/x.json`. A transcript
/// (`keel::transcript`, `"format": "keel.transcript.v1"`) becomes a [`TranscriptScenario`]
/// named after the file's stem.
pub fn load_scenario(path: &Path) -> Result<Arc<dyn Scenario>, Box<dyn StdError + Send + Sync>> {
    if let Some(transcript) = read_transcript(path)? {
        let name = path.file_stem().map_or_else(|| "transcript".to_owned(), |s| s.to_string_lossy().into_owned());
        let name: String = name.chars().map(|c| if c.is_whitespace() { '-' } else { c }).collect();
        let spec = spec_of_transcript(&name, &transcript)?;
        return Ok(Arc::new(TranscriptScenario::new(spec, path.display().to_string())));
    }
    let spec = load_file(path)?;
    Ok(Arc::new(FileScenario::new(spec, path.display().to_string())))
}

/// The transcript in `path`, if it is one (`None` for any other file, which the scenario
/// file loader then reads and judges).
fn read_transcript(path: &Path) -> Result<Option<keel::transcript::Transcript>, Box<dyn StdError + Send + Sync>> {
    let Ok(meta) = std::fs::metadata(path) else { return Ok(None) };
    if meta.len() > keel::transcript::MAX_TRANSCRIPT_BYTES as u64 {
        return Ok(None);
    }
    let Ok(bytes) = std::fs::read(path) else { return Ok(None) };
    if !keel::transcript::is_transcript(&bytes) {
        return Ok(None);
    }
    Ok(Some(keel::transcript::Transcript::decode(&bytes).map_err(|e| format!("{}: {e}", path.display()))?))
}

/// The package's `sim/scenarios/*.json` (name, text), compiled in so `list` and
/// `--scenario NAME` find them from any directory. `sim/tests/interaction_scenarios.rs` checks
/// this list against the directory.
pub const BUNDLED_FILES: &[(&str, &str)] = &[
    ("budget-ask-decline", include_str!("../../scenarios/budget-ask-decline.json")),
    ("budget-ask-extend", include_str!("../../scenarios/budget-ask-extend.json")),
    ("budget-shared", include_str!("../../scenarios/budget-shared.json")),
    ("budget-time", include_str!("../../scenarios/budget-time.json")),
    ("cancel-during-model-call", include_str!("../../scenarios/cancel-during-model-call.json")),
    ("cancel-during-tool-batch", include_str!("../../scenarios/cancel-during-tool-batch.json")),
    ("deferred-tools", include_str!("../../scenarios/deferred-tools.json")),
    ("delegate-failure", include_str!("../../scenarios/delegate-failure.json")),
    ("delegates", include_str!("../../scenarios/delegates.json")),
    ("direct-results", include_str!("../../scenarios/direct-results.json")),
    ("input-wait", include_str!("../../scenarios/input-wait.json")),
    ("invalid-arguments", include_str!("../../scenarios/invalid-arguments.json")),
    ("kill-with-unknowns", include_str!("../../scenarios/kill-with-unknowns.json")),
    ("max-model-calls", include_str!("../../scenarios/max-model-calls.json")),
    ("model-error", include_str!("../../scenarios/model-error.json")),
    ("model-host-failure", include_str!("../../scenarios/model-host-failure.json")),
    ("out-of-order-completion", include_str!("../../scenarios/out-of-order-completion.json")),
    ("parallel-keys", include_str!("../../scenarios/parallel-keys.json")),
    ("reducer", include_str!("../../scenarios/reducer.json")),
    ("refusal-with-calls", include_str!("../../scenarios/refusal-with-calls.json")),
    ("steer-during-input-wait", include_str!("../../scenarios/steer-during-input-wait.json")),
    ("steer-during-model-call", include_str!("../../scenarios/steer-during-model-call.json")),
    ("steer-during-tool-batch", include_str!("../../scenarios/steer-during-tool-batch.json")),
    ("streaming", include_str!("../../scenarios/streaming.json")),
    ("tool-error", include_str!("../../scenarios/tool-error.json")),
    ("tool-host-failure-unknown", include_str!("../../scenarios/tool-host-failure-unknown.json")),
    ("tool-loop", include_str!("../../scenarios/tool-loop.json")),
    ("tool-panic-unknown", include_str!("../../scenarios/tool-panic-unknown.json")),
    ("truncation-length", include_str!("../../scenarios/truncation-length.json")),
    ("two-siblings-input-answered-in-reverse", include_str!("../../scenarios/two-siblings-input-answered-in-reverse.json")),
    ("unknown-left-retained", include_str!("../../scenarios/unknown-left-retained.json")),
    ("unknown-tool", include_str!("../../scenarios/unknown-tool.json")),
    ("validator-rejection", include_str!("../../scenarios/validator-rejection.json")),
];

/// The bundled scenario files, decoded (each is tested to decode; one that does not is left
/// out rather than stopping the binary).
pub fn bundled_scenarios() -> Vec<Arc<dyn Scenario>> {
    BUNDLED_FILES
        .iter()
        .filter_map(|(name, text)| decode_bytes(name, text.as_bytes()).ok())
        .map(|spec| {
            let name = spec.name.clone();
            Arc::new(FileScenario::new(spec, name)) as Arc<dyn Scenario>
        })
        .collect()
}

/// The built-in Interaction-world scenarios.
pub fn scenarios() -> Vec<Box<dyn Scenario>> {
    vec![Box::new(InteractionSwarm), Box::new(InteractionCrashMatrix)]
}
