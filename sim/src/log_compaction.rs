//! `log_compaction_same_head`: what file-log compaction promises, checked on a run's own
//! commits. After a run, the requests that reached its store are replayed, in order, into a
//! fresh `MemoryCommitter` and into a `FileCommitter` in a fresh temporary directory whose log
//! is compacted after 1–3 seeded requests (and, on half the seeds, automatically, with a small
//! `compact_ratio` and no minimum size); the file store is dropped and reopened after every
//! compaction and at the end. The invariant fails if an answer differs between the two stores
//! (the same error, or, for a store failure, the same kind), if the file store refuses to open
//! or to compact, or if after the last reopen any root's head or history differs. It also
//! fails if the replayed memory store does not end where the run's store ended: then the
//! replay is not the run's.
//!
//! On half the sampled seeds the replay also meets a **torn append** (the store fault
//! `store.torn_write`): from a seeded request on, the first request that installs a commit has
//! its append stop part way (a seeded share of its bytes reaches the disk), its `fdatasync`
//! fail and the cut back to the last acknowledged frame fail too, as when the process dies
//! there (`FileCommitter::tear_next_append`). The file store is dropped and reopened (its real
//! recovery), and `torn_write_loses_only_unacknowledged` fails if the refused commit is
//! visible after the reopen or if the reopened store lacks any commit acknowledged before it
//! (its head and history must be the memory store's before that request); the writer's retry
//! of the request then goes on as usual.
//!
//! The check runs after the run, outside the simulated runtime, and reads only the recorded
//! requests, so it changes no trace. Real file I/O `fsync`s every commit, so only the seeds
//! [`selected`] picks pay for it.

use crate::swarm_rng::SwarmRng;
use crate::world::{RunReport, Violation};
use keel::kernel::commit::{CommitError, Committer, FileCommitter, FileOptions, MemoryCommitter, LOG_FILE_NAME};
use keel::kernel::ids::ProcessId;
use keel::kernel::owner::CommitRequest;
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The invariant's name in reports.
pub const INVARIANT: &str = "log_compaction_same_head";
/// The torn-append invariant's name in reports.
pub const TORN_INVARIANT: &str = "torn_write_loses_only_unacknowledged";
/// The `faults_fired` key of a torn append.
pub const TORN_WRITE: &str = "store.torn_write";

/// Whether `seed`'s run is checked: every eighth seed, since each replayed commit costs a real
/// `fsync` (the cost stays a small share of a campaign's wall time).
pub fn selected(seed: u64) -> bool {
    seed % 8 == 0
}

/// Where and how the file side of a replay compacts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The requests (0-based, increasing, distinct) after which `compact_now` runs.
    pub compact_after: Vec<usize>,
    pub options: FileOptions,
    /// A torn append: the first request from index `.0` on that installs a commit has only
    /// `.1`‰ (below 1000) of its frame's bytes reach the disk.
    pub tear: Option<(usize, u16)>,
}

impl Plan {
    /// The plan of `seed` over `requests` requests, drawn from its own stream of the seed.
    pub fn of(seed: u64, requests: usize) -> Plan {
        let mut rng = SwarmRng::new(seed, 0x6C6F_675F_636D_7074);
        let count = rng.range_inclusive(1, 3);
        let n = requests as u64;
        let mut compact_after: Vec<usize> = (0..count).filter(|_| n > 0).map(|_| rng.below(n) as usize).collect();
        compact_after.sort_unstable();
        compact_after.dedup();
        // A log of a few hundred small commits never reaches the default 1 MiB minimum: half
        // the seeds compact automatically as soon as the log outgrows 1–2× the live state.
        let options = if rng.percent(50) {
            FileOptions { compact_ratio: rng.range_inclusive(1, 2), compact_min_bytes: 0, ..FileOptions::default() }
        } else {
            FileOptions::default()
        };
        // Drawn last, so the compaction plan of a seed is what it was before torn appends.
        let tear = (rng.percent(50) && n > 0).then(|| (rng.below(n) as usize, rng.below(1000) as u16));
        Plan { compact_after, options, tear }
    }
}

/// A deliberately broken file side, to prove the check fails when compaction loses something.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Sabotage {
    /// The faithful replay.
    #[default]
    None,
    /// Request `n` is sent to the memory store only (the file side answers as if it had
    /// stored it).
    SkipFileCommit(usize),
    /// Before every reopen that follows a compaction, the log's last byte is cut off (its last
    /// frame, a compacted tree, is then torn, and the reopen drops that tree).
    CorruptLastFrameAfterCompaction,
    /// The plan's torn append reaches the disk whole (the refused commit is then visible after
    /// the reopen).
    WholeTornAppend,
}

/// What a replay did (beside its violations), for tests and reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Replayed {
    pub requests: usize,
    /// Compactions on demand plus automatic ones.
    pub compactions: u64,
    pub reopens: u64,
    /// Torn appends (0 or 1).
    pub torn_writes: u64,
}

/// Checks `requests` (the run's requests that reached its store, in store order) against
/// `run_store` (the run's store at the end). Returns the violations (at most a few, each
/// naming the first divergence) and what the replay did.
pub fn check_run(seed: u64, requests: &[CommitRequest], run_store: &MemoryCommitter) -> (Vec<Violation>, Replayed) {
    check_with(seed, requests, Some(run_store), &Plan::of(seed, requests.len()), Sabotage::None)
}

/// [`check_run`] recorded in `report`: one more invariant checked, and its violations.
pub fn check_into(report: &mut RunReport, seed: u64, requests: &[CommitRequest], run_store: &MemoryCommitter) {
    let (violations, replayed) = check_run(seed, requests, run_store);
    report.invariants_checked += 1;
    report.violations.extend(violations);
    if replayed.torn_writes > 0 {
        *report.faults_fired.entry(TORN_WRITE.to_owned()).or_insert(0) += replayed.torn_writes;
    }
}

/// [`check_run`] with an explicit plan and sabotage; without `run_store` the replay's
/// faithfulness is not checked.
pub fn check_with(
    seed: u64,
    requests: &[CommitRequest],
    run_store: Option<&MemoryCommitter>,
    plan: &Plan,
    sabotage: Sabotage,
) -> (Vec<Violation>, Replayed) {
    let dir = TempDir::new(seed);
    let (details, replayed) = match &dir {
        // The directory's name differs per process and replay: reports name it generically,
        // so two runs of one seed report alike.
        Ok(dir) => {
            let (details, replayed) = replay(&dir.0, requests, run_store, plan, sabotage);
            let name = dir.0.display().to_string();
            (details.into_iter().map(|(invariant, d)| (invariant, d.replace(&name, "<replay dir>"))).collect(), replayed)
        }
        Err(e) => (vec![(INVARIANT, e.clone())], Replayed::default()),
    };
    drop(dir);
    (details.into_iter().map(|(invariant, d)| Violation::new(invariant, d)).collect(), replayed)
}

/// A store directory of its own, removed when dropped (also when the check fails or panics).
struct TempDir(PathBuf);

impl TempDir {
    fn new(seed: u64) -> Result<TempDir, String> {
        // Campaign workers replay side by side in one process, possibly the same seed of two
        // scenarios: a process-wide counter keeps their directories apart.
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = base_dir().join(format!("keel-sim-log-compaction-{seed}-{}-{n}", std::process::id()));
        // A directory left by a killed process with the same id holds nothing of ours.
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).map_err(|e| format!("cannot create the replay directory {}: {e}", path.display()))?;
        Ok(TempDir(path))
    }
}

/// Where replay directories go: `/dev/shm` where it exists (tmpfs: an `fsync` costs nothing
/// there, which keeps the check a small share of a campaign; on a disk each of a replay's
/// syncs took ~4 ms here, doubling a 200-seed campaign), else the system's temp directory.
/// Durability is not what the check is about: it compares what a compacted, reopened log
/// holds, and that is the same on either.
fn base_dir() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn send<C: Committer>(c: &C, r: &CommitRequest) -> Result<(), CommitError> {
    // Both stores do their work when first polled; nothing here waits on a runtime.
    futures::executor::block_on(async {
        match r {
            CommitRequest::Checkpoint(x) => c.commit_checkpoint(x).await,
            CommitRequest::Effect(x) => c.commit_effect(x).await,
            CommitRequest::Activation(x) => c.activate_tree(x).await,
        }
    })
}

/// Whether the two answers agree: equal, or both a store failure / damage (whose messages
/// name paths and reasons only the file store has).
fn same_answer(memory: &Result<(), CommitError>, file: &Result<(), CommitError>) -> bool {
    match (memory, file) {
        (Err(CommitError::Storage { .. }), Err(CommitError::Storage { .. })) => true,
        (Err(CommitError::Damaged { .. }), Err(CommitError::Damaged { .. })) => true,
        (m, f) => m == f,
    }
}

fn answer(r: &Result<(), CommitError>) -> String {
    match r {
        Ok(()) => "Ok".to_owned(),
        Err(e) => format!("Err({e})"),
    }
}

fn open(dir: &Path, options: FileOptions, when: &str) -> Result<FileCommitter, String> {
    // The directory is this replay's alone, and the store that held it is dropped. But a
    // process another thread spawns in that instant inherits the open log (which carries the
    // store's lock) until its exec closes it (see `keel::kernel::commit::file::lock`), and
    // would make this open fail now and then: a copy of the log renamed over it is a file no
    // child can hold. Copy and rename keep the bytes exactly.
    let log = dir.join(LOG_FILE_NAME);
    if log.exists() {
        let fresh = dir.join("commits.log.fresh");
        fs::copy(&log, &fresh)
            .and_then(|_| fs::rename(&fresh, &log))
            .map_err(|e| format!("the file store's log could not be copied {when}: {e}"))?;
    }
    FileCommitter::open_with_options(dir, options).map_err(|e| format!("the file store did not open {when}: {e}"))
}

fn replay(
    dir: &Path,
    requests: &[CommitRequest],
    run_store: Option<&MemoryCommitter>,
    plan: &Plan,
    sabotage: Sabotage,
) -> (Vec<(&'static str, String)>, Replayed) {
    let mut out = Replayed { requests: requests.len(), ..Replayed::default() };
    let memory = MemoryCommitter::new();
    let mut file = match open(dir, plan.options, "at first") {
        Ok(f) => f,
        Err(e) => return (vec![(INVARIANT, e)], out),
    };
    let mut details: Vec<(&'static str, String)> = Vec::new();
    let mut differing = 0u64;
    let mut first_difference = None;
    for (i, request) in requests.iter().enumerate() {
        let root = &request.cut().root_id;
        // The memory store before this request, when it may be the one torn.
        let tear = plan.tear.filter(|&(at, _)| out.torn_writes == 0 && i >= at && sabotage != Sabotage::SkipFileCommit(i));
        let before = tear.map(|_| (memory.head(root), memory.history(root)));
        let m = send(&memory, request);
        let f = match (tear, before) {
            (Some((_, keep)), Some((head, history))) if m.is_ok() && memory.history(root).len() > history.len() => {
                out.torn_writes += 1;
                out.reopens += 1;
                let keep = if sabotage == Sabotage::WholeTornAppend { 1000 } else { keep };
                match tear_and_reopen(dir, plan.options, file, request, i, keep, &head, &history) {
                    Ok((reopened, found)) => {
                        file = reopened;
                        details.extend(found.into_iter().map(|d| (TORN_INVARIANT, d)));
                        // The writer's retry after its restart.
                        send(&file, request)
                    }
                    Err(e) => {
                        details.push((INVARIANT, e));
                        return (details, out);
                    }
                }
            }
            _ if sabotage == Sabotage::SkipFileCommit(i) => m.clone(),
            _ => send(&file, request),
        };
        if !same_answer(&m, &f) {
            differing += 1;
            first_difference.get_or_insert_with(|| {
                format!("request {i} ({}): memory store {}, file store {}", request.boundary_name(), answer(&m), answer(&f))
            });
        }
        if plan.compact_after.contains(&i) {
            if let Err(e) = file.compact_now() {
                details.push((INVARIANT, format!("compaction after request {i} refused: {e}")));
                return (details, out);
            }
        }
        // Automatic compactions count too: the counter restarts with every open.
        let compacted = file.stats().compactions;
        if compacted > 0 {
            out.compactions += compacted;
            drop(file);
            if sabotage == Sabotage::CorruptLastFrameAfterCompaction {
                tear_last_byte(&dir.join(LOG_FILE_NAME));
            }
            file = match open(dir, plan.options, &format!("after the compaction after request {i}")) {
                Ok(f) => f,
                Err(e) => {
                    details.push((INVARIANT, e));
                    return (details, out);
                }
            };
            out.reopens += 1;
        }
    }
    if let Some(first) = first_difference {
        details.push((INVARIANT, format!("{differing} answers differ; first: {first}")));
    }
    drop(file);
    let file = match open(dir, plan.options, "at the end") {
        Ok(f) => f,
        Err(e) => {
            details.push((INVARIANT, e));
            return (details, out);
        }
    };
    out.reopens += 1;
    let mut roots: BTreeSet<ProcessId> = requests.iter().map(|r| r.cut().root_id.clone()).collect();
    roots.extend(memory.roots());
    roots.extend(file.roots());
    for root in &roots {
        let (mh, fh) = (memory.head(root), file.head(root));
        if mh != fh {
            details.push((INVARIANT, format!("after reopening, the file store's head of {root} is {}, the memory store's {}", head_text(&fh), head_text(&mh))));
        } else if memory.history(root) != file.history(root) {
            let (m, f) = (memory.history(root), file.history(root));
            details.push((INVARIANT, format!("after reopening, the file store's history of {root} has {} commits, the memory store's {} (first difference at {})", f.len(), m.len(), first_mismatch(&m, &f))));
        }
        if let Some(run) = run_store {
            if run.head(root) != mh || run.history(root) != memory.history(root) {
                details.push((INVARIANT, format!("the replay ends {root} at {}, the run's store at {}: the recorded requests are not the run's", head_text(&mh), head_text(&run.head(root)))));
            }
        }
    }
    if let Some(run) = run_store {
        // A root the run's store holds but no request started would also make the replay unfaithful.
        for root in run.roots().into_iter().filter(|r| !roots.contains(r)) {
            details.push((INVARIANT, format!("the run's store holds {root}, which no recorded request names")));
        }
    }
    (details, out)
}

/// Tears the append of `request` (request `i`, which installs a commit on the memory store)
/// keeping `keep`‰ of its bytes, then drops and reopens the file store. Returns the reopened
/// store and what the torn-append invariant found: the refused commit visible, or the store
/// not holding exactly `head` and `history` (the memory store's before the request).
#[allow(clippy::too_many_arguments)]
fn tear_and_reopen(
    dir: &Path,
    options: FileOptions,
    file: FileCommitter,
    request: &CommitRequest,
    i: usize,
    keep: u16,
    head: &Option<keel::kernel::commit::Head>,
    history: &[keel::kernel::commit::CommitRecord],
) -> Result<(FileCommitter, Vec<String>), String> {
    let mut found = Vec::new();
    let root = &request.cut().root_id;
    file.tear_next_append(keep);
    let torn = send(&file, request);
    if !matches!(torn, Err(CommitError::Storage { .. })) {
        found.push(format!("request {i} ({}): a torn append was answered {}, not a storage failure", request.boundary_name(), answer(&torn)));
    }
    drop(file);
    let file = open(dir, options, &format!("after the torn append of request {i}"))?;
    let (fh, fhist) = (file.head(root), file.history(root));
    if &fh != head {
        found.push(format!(
            "after the torn append of request {i} ({}, {keep}‰ written) and a reopen, the file store's head of {root} is {}, the last acknowledged {}",
            request.boundary_name(),
            head_text(&fh),
            head_text(head)
        ));
    } else if fhist != history {
        found.push(format!(
            "after the torn append of request {i} and a reopen, the file store's history of {root} has {} commits, {} were acknowledged (first difference at {})",
            fhist.len(),
            history.len(),
            first_mismatch(history, &fhist)
        ));
    }
    Ok((file, found))
}

fn head_text(head: &Option<keel::kernel::commit::Head>) -> String {
    match head {
        Some(h) => format!("sequence {} of {} (tree {})", h.sequence, h.cut.incarnation, h.cut.digest),
        None => "absent".to_owned(),
    }
}

fn first_mismatch<T: PartialEq>(a: &[T], b: &[T]) -> usize {
    a.iter().zip(b).position(|(x, y)| x != y).unwrap_or(a.len().min(b.len()))
}

// A torn write, not a flipped bit: a complete last frame failing its checksum is damage the
// open refuses, where a torn one is cut off and the reopened store silently lacks that tree.
fn tear_last_byte(path: &Path) {
    if let Ok(mut bytes) = fs::read(path) {
        if bytes.pop().is_some() {
            let _ = fs::write(path, bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction_world::generate::generate;
    use crate::interaction_world::run::run_outcome_unchecked;
    use crate::interaction_world::{run_outcome_on_madsim, Spec};
    use crate::world::RunOptions;
    use std::sync::Arc;

    /// A real run's requests (those that reached the store) and its store.
    fn run_of(spec: &Spec, seed: u64) -> (Vec<CommitRequest>, Arc<crate::interaction_world::store::Store>) {
        let out = run_outcome_unchecked(spec, &spec.name, seed, &RunOptions::default());
        let store = out.store.expect("the run started");
        let requests = store.records().into_iter().filter(|r| r.reached).map(|r| r.request).collect();
        (requests, store)
    }

    /// Compaction after every third request and automatically, so every sabotage below has a
    /// compacted log to act on.
    fn busy_plan(requests: usize) -> Plan {
        Plan {
            compact_after: (0..requests).step_by(3).collect(),
            options: FileOptions { compact_ratio: 1, compact_min_bytes: 0, ..FileOptions::default() },
            tear: None,
        }
    }

    #[test]
    fn faithful_replays_of_real_runs_pass_with_compactions_and_reopens() {
        let mut compacted = 0;
        for seed in [0u64, 8, 16, 24] {
            let (spec, _) = generate(seed);
            let (requests, store) = run_of(&spec, seed);
            assert!(requests.len() > 3, "seed {seed}: {} requests", requests.len());
            let (violations, replayed) = check_run(seed, &requests, store.memory());
            assert!(violations.is_empty(), "seed {seed}: {violations:?}");
            let (violations, busy) = check_with(seed, &requests, Some(store.memory()), &busy_plan(requests.len()), Sabotage::None);
            assert!(violations.is_empty(), "seed {seed}: {violations:?}");
            assert!(busy.compactions >= busy_plan(requests.len()).compact_after.len() as u64 && busy.reopens > busy.compactions.min(1), "{busy:?}");
            compacted += replayed.compactions;
        }
        assert!(compacted > 0, "the seeded plans compacted nothing");
    }

    #[test]
    fn a_commit_the_file_store_never_stored_is_caught() {
        let (spec, _) = generate(8);
        let (requests, store) = run_of(&spec, 8);
        // The requests that installed a commit (an identical retry installs nothing): one lost
        // on the file side leaves its head behind, so a later answer or the final head differs.
        let memory = MemoryCommitter::new();
        let root = requests[0].cut().root_id.clone();
        let installing: Vec<usize> = requests
            .iter()
            .enumerate()
            .filter(|(_, r)| {
                let before = memory.history(&root).len();
                send(&memory, r).is_ok() && memory.history(&root).len() > before
            })
            .map(|(i, _)| i)
            .collect();
        assert!(installing.len() > 2, "{installing:?}");
        for skip in [installing[installing.len() / 2], installing[installing.len() - 1]] {
            let (violations, _) = check_with(8, &requests, Some(store.memory()), &busy_plan(requests.len()), Sabotage::SkipFileCommit(skip));
            assert!(!violations.is_empty() && violations.iter().all(|v| v.invariant == INVARIANT), "skip {skip}: {violations:?}");
        }
    }

    #[test]
    fn a_torn_frame_after_compaction_is_caught() {
        let (requests, store) = run_of(&Spec::minimal("torn"), 3);
        let plan = Plan { compact_after: vec![requests.len() - 1], options: FileOptions::default(), tear: None };
        let (violations, _) = check_with(3, &requests, Some(store.memory()), &plan, Sabotage::CorruptLastFrameAfterCompaction);
        assert!(violations.iter().any(|v| v.invariant == INVARIANT && v.detail.contains("after reopening")), "{violations:?}");
        // Torn in the middle of the run: the later commits no longer find their head.
        let plan = Plan { compact_after: vec![requests.len() / 2], options: FileOptions::default(), tear: None };
        let (violations, _) = check_with(3, &requests, None, &plan, Sabotage::CorruptLastFrameAfterCompaction);
        assert!(violations.iter().any(|v| v.detail.contains("answers differ")), "{violations:?}");
    }

    #[test]
    fn a_replay_missing_a_request_is_not_the_run() {
        let (mut requests, store) = run_of(&Spec::minimal("short"), 5);
        requests.pop();
        let (violations, _) = check_run(5, &requests, store.memory());
        assert!(violations.iter().any(|v| v.detail.contains("not the run's")), "{violations:?}");
    }

    #[test]
    fn the_check_runs_on_sampled_seeds_after_the_run_and_leaves_the_trace_alone() {
        let spec = Spec::minimal("sampled");
        for seed in [39u64, 40] {
            let plain = run_outcome_unchecked(&spec, "sampled", seed, &RunOptions::default()).report;
            let checked = run_outcome_on_madsim(&spec, "sampled", seed, &RunOptions::default()).report;
            assert_eq!(plain.trace_hash, checked.trace_hash);
            assert_eq!(checked.invariants_checked, plain.invariants_checked + u64::from(selected(seed)), "seed {seed}");
            assert!(checked.passed(), "{checked}");
        }
        // No replay directory is left behind.
        let prefix = format!("keel-sim-log-compaction-40-{}-", std::process::id());
        let left = fs::read_dir(base_dir()).unwrap().flatten().filter(|e| e.file_name().to_string_lossy().starts_with(&prefix)).count();
        assert_eq!(left, 0);
    }

    #[test]
    fn plans_are_a_function_of_the_seed() {
        for seed in 0..64 {
            let plan = Plan::of(seed, 40);
            assert_eq!(plan, Plan::of(seed, 40));
            assert!((1..=3).contains(&plan.compact_after.len()) && plan.compact_after.iter().all(|&i| i < 40), "{plan:?}");
            assert!(plan.compact_after.windows(2).all(|w| w[0] < w[1]));
        }
        assert!((0..64).any(|s| Plan::of(s, 40).options.compact_ratio == 1));
        assert!((0..64).any(|s| Plan::of(s, 40).options == FileOptions::default()));
        assert!(Plan::of(3, 0).compact_after.is_empty());
        let tears: Vec<(usize, u16)> = (0..64).filter_map(|s| Plan::of(s, 40).tear).collect();
        assert!(tears.len() > 16 && tears.len() < 48, "{} of 64 seeds tear", tears.len());
        assert!(tears.iter().all(|&(at, keep)| at < 40 && keep < 1000), "{tears:?}");
        assert_eq!(Plan::of(3, 0).tear, None);
    }

    #[test]
    fn a_torn_append_loses_only_the_refused_commit_and_the_retry_goes_on() {
        for seed in [0u64, 8, 16] {
            let (spec, _) = generate(seed);
            let (requests, store) = run_of(&spec, seed);
            // Early, late, and with compactions around it; no bytes, a few, nearly all.
            for (at, keep) in [(0, 0u16), (requests.len() / 2, 500), (requests.len() - 1, 999)] {
                let plan = Plan { tear: Some((at, keep)), ..busy_plan(requests.len()) };
                let (violations, replayed) = check_with(seed, &requests, Some(store.memory()), &plan, Sabotage::None);
                assert!(violations.is_empty(), "seed {seed} tear at {at}: {violations:?}");
                // The last request may install nothing (an identical retry): then nothing tears.
                assert!(replayed.torn_writes == 1 || at == requests.len() - 1, "seed {seed} tear at {at}: {replayed:?}");
            }
        }
    }

    #[test]
    fn a_refused_commit_visible_after_the_reopen_is_caught() {
        let (spec, _) = generate(8);
        let (requests, store) = run_of(&spec, 8);
        let plan = Plan { tear: Some((requests.len() / 2, 500)), ..busy_plan(requests.len()) };
        let (violations, replayed) = check_with(8, &requests, Some(store.memory()), &plan, Sabotage::WholeTornAppend);
        assert_eq!(replayed.torn_writes, 1);
        assert!(
            violations.iter().any(|v| v.invariant == TORN_INVARIANT && v.detail.contains("the last acknowledged")),
            "{violations:?}"
        );
    }

    #[test]
    fn a_fired_torn_append_is_counted_in_the_report() {
        let seed = (0..400u64).step_by(8).find(|&s| Plan::of(s, 20).tear.is_some()).unwrap();
        let (spec, _) = generate(seed);
        let (requests, store) = run_of(&spec, seed);
        let mut report = RunReport::new("torn", seed);
        check_into(&mut report, seed, &requests, store.memory());
        let (_, replayed) = check_run(seed, &requests, store.memory());
        assert_eq!(report.faults_fired.get(TORN_WRITE).copied().unwrap_or(0), replayed.torn_writes);
        assert!(report.passed(), "{report}");
    }
}
