//! Kills a real process with SIGKILL at every commit point and recovers from its directory.
//!
//! The child (`keel-crash-child`) runs the durable world's script on a `FileCommitter` (or, in
//! the `sqlite_` tests, a `SqliteCommitter`) and
//! prints `ACK <sequence> <digest>` after each acknowledged commit. For every k, the test kills
//! it at the k-th ACK, reopens the directory in this process and checks: nothing acknowledged
//! is lost (the head is at or past the last ACK, every ACK is in the history), the history
//! obeys the commit rules, the head decodes as a TreeSnapshot, and restoring it runs the tree
//! to completion with at most one physical dispatch per EffectId over both processes.
//!
//! `step` mode kills exactly between acknowledgement and its use (the child waits for a `go`
//! line after each ACK); `free` mode kills a running child, wherever it has got to.

use keel::kernel::commit::{
    audit_history, Checkpoint, CheckpointKind, CommitRecord, CommitRecordKind, Committer,
    EffectBoundaryKind, FileCommitter, Head, MemoryCommitter, TreeCut,
};
use keel::kernel::ids::ProcessId;
use keel_store_sqlite::SqliteCommitter;
use keel::kernel::direct::DirectRunner;
use keel::kernel::owner::Owner;
use keel::kernel::snapshot::TreeSnapshot;
use keel::kernel::status::Status;
use keel_tests::durable_world::{self, World};
use keel_tests::store_fixtures::{retry_while_a_spawning_child_holds, TempDir};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

const CHILD: &str = env!("CARGO_BIN_EXE_keel-crash-child");

/// Kill points run on parallel threads while children are spawned: see
/// [`retry_while_a_spawning_child_holds`].
fn open_store(dir: &Path) -> Result<FileCommitter, keel::kernel::commit::OpenError> {
    retry_while_a_spawning_child_holds(|| FileCommitter::open(dir))
}

fn spawn_child(command: &mut Command) -> std::process::Child {
    command.spawn().expect("spawn keel-crash-child")
}

/// Which durable store the child and the recovery use.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    File,
    /// The file store, compacted after every acknowledged commit (kills land before, inside
    /// and after compactions).
    FileCompacting,
    Sqlite,
}

impl Kind {
    fn arg(self) -> &'static str {
        match self {
            Kind::File => "file",
            Kind::FileCompacting => "file-compact",
            Kind::Sqlite => "sqlite",
        }
    }
}

/// One opened store of either kind, with what the recovery reads from it.
enum Store {
    File(FileCommitter),
    Sqlite(SqliteCommitter),
}

impl Store {
    fn open(kind: Kind, dir: &Path) -> Store {
        match kind {
            Kind::File | Kind::FileCompacting => {
                Store::File(open_store(dir).unwrap_or_else(|e| panic!("reopen: {e}")))
            }
            Kind::Sqlite => Store::Sqlite(
                SqliteCommitter::open(dir.join(durable_world::SQLITE_FILE))
                    .unwrap_or_else(|e| panic!("reopen: {e}")),
            ),
        }
    }
    fn head(&self, root: &ProcessId) -> Option<Head> {
        match self {
            Store::File(f) => f.head(root),
            Store::Sqlite(s) => s.head(root).unwrap(),
        }
    }
    fn history(&self, root: &ProcessId) -> Vec<CommitRecord> {
        match self {
            Store::File(f) => f.history(root),
            Store::Sqlite(s) => s.history(root).unwrap(),
        }
    }
    fn into_committer(self) -> Arc<dyn Committer> {
        match self {
            Store::File(f) => Arc::new(f),
            Store::Sqlite(s) => Arc::new(s),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Step,
    Free,
}

struct ChildRun {
    acks: Vec<(u64, String)>,
    done: Option<String>,
}

/// Runs the child in `dir`; SIGKILLs it on reading the `kill_at`-th ACK (1-based).
fn run_child(kind: Kind, dir: &Path, mode: Mode, kill_at: Option<usize>) -> ChildRun {
    let mode_arg = match mode {
        Mode::Step => "step",
        Mode::Free => "free",
    };
    let mut child = spawn_child(
        Command::new(CHILD)
            .arg(dir)
            .arg(mode_arg)
            .arg(kind.arg())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit()),
    );
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let mut stdin = child.stdin.take().unwrap();
    let mut run = ChildRun { acks: Vec::new(), done: None };
    for line in stdout.lines() {
        let line = line.unwrap();
        if let Some(rest) = line.strip_prefix("ACK ") {
            let (sequence, digest) = rest.split_once(' ').expect("ACK <sequence> <digest>");
            run.acks.push((sequence.parse().unwrap(), digest.to_owned()));
            if Some(run.acks.len()) == kill_at {
                child.kill().unwrap(); // SIGKILL on unix
                break;
            }
            if mode == Mode::Step {
                writeln!(stdin, "go").unwrap();
            }
        } else if let Some(status) = line.strip_prefix("DONE ") {
            run.done = Some(status.to_owned());
        } else {
            panic!("unexpected child output: {line}");
        }
    }
    drop(stdin);
    let status = child.wait().unwrap();
    if kill_at.is_none() {
        assert!(status.success(), "child failed: {status}");
    }
    run
}

fn dispatch_counts(world: &World) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for effect in world.dispatches() {
        *counts.entry(effect).or_insert(0) += 1;
    }
    counts
}

fn assert_at_most_one_dispatch(world: &World, context: &str) {
    let counts = dispatch_counts(world);
    let repeated: Vec<_> = counts.iter().filter(|(_, &n)| n > 1).collect();
    assert!(repeated.is_empty(), "{context}: redispatched {repeated:?}");
}

/// Reopens a killed child's directory, checks that nothing acknowledged was lost, restores the
/// head and runs it to completion.
fn recover(kind: Kind, dir: &Path, run: &ChildRun, mode: Mode, context: &str) {
    let store = Store::open(kind, dir);
    let root = durable_world::root_id();
    let head = store.head(&root).unwrap_or_else(|| panic!("{context}: no head"));
    let history = store.history(&root);
    audit_history(&history).unwrap_or_else(|e| panic!("{context}: {e}"));
    let (last_sequence, last_digest) = run.acks.last().expect("killed after an ACK");
    if mode == Mode::Step {
        assert_eq!(head.sequence, *last_sequence, "{context}: head is the last ACK");
        assert_eq!(&head.cut.digest.to_string(), last_digest, "{context}");
    } else {
        assert!(head.sequence >= *last_sequence, "{context}: head behind the last ACK");
    }
    let recorded: BTreeSet<(u64, String)> =
        history.iter().map(|r| (r.sequence, r.cut_digest.to_string())).collect();
    for ack in &run.acks {
        assert!(recorded.contains(ack), "{context}: acknowledged {ack:?} lost");
    }
    let snapshot = TreeSnapshot::from_cut(&head.cut)
        .unwrap_or_else(|e| panic!("{context}: head does not decode: {e}"));
    assert_eq!(snapshot.digest(), head.cut.digest, "{context}");

    let world = World::new(dir);
    let owner = Owner::restore(
        world.resolver.clone(),
        world.root.clone(),
        &snapshot,
        durable_world::incarnation(200),
        durable_world::now(),
    )
    .unwrap_or_else(|e| panic!("{context}: restore: {e:?}"));
    let store = store.into_committer();
    let mut runner = DirectRunner::new(owner, store, durable_world::now());
    let result = durable_world::drive_to_completion(&mut runner)
        .unwrap_or_else(|e| panic!("{context}: {e}"));
    assert_eq!(result.status(), Status::Completed, "{context}");
    assert_at_most_one_dispatch(&world, context);
    drop(runner);

    // The recovered run is durable too: a third open sees a terminal, restorable head.
    let store = Store::open(kind, dir);
    audit_history(&store.history(&root)).unwrap();
    let head = store.head(&root).unwrap();
    let snapshot = TreeSnapshot::from_cut(&head.cut).unwrap();
    assert!(snapshot.processes().iter().all(|p| p.is_terminal()), "{context}");
}

fn uncrashed_ack_count(kind: Kind) -> usize {
    let dir = TempDir::new("durable-count");
    let run = run_child(kind, &dir.0, Mode::Step, None);
    assert_eq!(run.done.as_deref(), Some("completed"));
    run.acks.len()
}

#[test]
fn the_uncrashed_child_reaches_every_commit_kind_once_per_effect() {
    uncrashed_child_reaches_every_commit_kind(Kind::File);
}

#[test]
fn sqlite_uncrashed_child_reaches_every_commit_kind_once_per_effect() {
    uncrashed_child_reaches_every_commit_kind(Kind::Sqlite);
}

fn uncrashed_child_reaches_every_commit_kind(kind: Kind) {
    let dir = TempDir::new("durable-full");
    let run = run_child(kind, &dir.0, Mode::Free, None);
    assert_eq!(run.done.as_deref(), Some("completed"));
    let sequences: Vec<u64> = run.acks.iter().map(|(s, _)| *s).collect();
    assert_eq!(sequences, (1..=sequences.len() as u64).collect::<Vec<_>>());
    let store = Store::open(kind, &dir.0);
    let history = store.history(&durable_world::root_id());
    audit_history(&history).unwrap();
    assert_eq!(history.len(), run.acks.len(), "one record per acknowledged commit");
    let kinds: BTreeSet<String> = history
        .iter()
        .map(|r| match &r.kind {
            CommitRecordKind::Checkpoint(k) => k.as_str().to_owned(),
            CommitRecordKind::Effect { kind, .. } => kind.as_str().to_owned(),
            CommitRecordKind::Activation { .. } => "activation".to_owned(),
        })
        .collect();
    for kind in CheckpointKind::ALL.map(CheckpointKind::as_str) {
        assert!(kinds.contains(kind), "no {kind} commit in {kinds:?}");
    }
    for kind in EffectBoundaryKind::ALL.map(EffectBoundaryKind::as_str) {
        assert!(kinds.contains(kind), "no {kind} commit in {kinds:?}");
    }
    let world = World::new(&dir.0);
    let counts = dispatch_counts(&world);
    assert_eq!(counts.len(), 4, "a, uncertain, c, b");
    assert!(counts.values().all(|&n| n == 1));
}

/// Runs `case(k)` for every k in 1..=n on a few threads: the runs are independent and wait on
/// `fsync`, not on the CPU.
fn for_each_kill_point(n: usize, case: impl Fn(usize) + Sync) {
    const THREADS: usize = 4;
    std::thread::scope(|scope| {
        for lane in 0..THREADS {
            let case = &case;
            scope.spawn(move || {
                for k in (1..=n).filter(|k| k % THREADS == lane) {
                    case(k);
                }
            });
        }
    });
}

#[test]
fn sigkill_right_after_each_acknowledgement_loses_nothing() {
    sigkill_after_each_acknowledgement(Kind::File);
}

#[test]
fn sqlite_sigkill_right_after_each_acknowledgement_loses_nothing() {
    sigkill_after_each_acknowledgement(Kind::Sqlite);
}

fn sigkill_after_each_acknowledgement(kind: Kind) {
    let n = uncrashed_ack_count(kind);
    assert!(n >= 10, "the script commits {n} times");
    for_each_kill_point(n, |k| {
        let dir = TempDir::new("durable-step");
        let run = run_child(kind, &dir.0, Mode::Step, Some(k));
        assert_eq!(run.acks.len(), k);
        assert!(run.done.is_none());
        recover(kind, &dir.0, &run, Mode::Step, &format!("{kind:?} step kill at ACK {k}"));
    });
}

#[test]
fn compacting_sigkill_right_after_each_acknowledgement_loses_nothing() {
    sigkill_after_each_acknowledgement(Kind::FileCompacting);
}

#[test]
fn compacting_sigkill_of_a_running_child_loses_nothing() {
    sigkill_of_a_running_child(Kind::FileCompacting);
}

#[test]
fn sigkill_of_a_running_child_loses_nothing() {
    sigkill_of_a_running_child(Kind::File);
}

#[test]
fn sqlite_sigkill_of_a_running_child_loses_nothing() {
    sigkill_of_a_running_child(Kind::Sqlite);
}

fn sigkill_of_a_running_child(kind: Kind) {
    let n = uncrashed_ack_count(kind);
    let crashed = AtomicU64::new(0);
    for_each_kill_point(n, |k| {
        let dir = TempDir::new("durable-free");
        let run = run_child(kind, &dir.0, Mode::Free, Some(k));
        if run.done.is_some() {
            return; // the child finished before the kill: nothing crashed
        }
        crashed.fetch_add(1, Ordering::Relaxed);
        recover(kind, &dir.0, &run, Mode::Free, &format!("{kind:?} free kill at ACK {k}"));
    });
    let crashed = crashed.into_inner();
    println!("free mode: {crashed} of {n} kills landed before completion");
    assert!(crashed > 0, "no kill landed before the child finished");
}

/// Prints the cost of one acknowledged commit (one `sync_data`) on this machine, against the
/// in-memory store; asserts only that the numbers exist.
#[test]
fn commit_cost_per_fsync() {
    let dir = TempDir::new("durable-cost");
    let file = open_store(&dir.0).unwrap();
    let memory = MemoryCommitter::new();
    for (label, size) in [("4 KiB", 4 << 10), ("1 MiB", 1 << 20)] {
        let root = keel::kernel::ids::ProcessId::parse(&format!("process:cost-{size}")).unwrap();
        let commits = if size > 4096 { 8 } else { 64 };
        let cuts: Vec<TreeCut> = (0..=commits)
            .map(|i: u64| {
                let state = format!("{i:08}{}", "x".repeat(size - 8));
                keel::kernel::commit::conformance::sample_cut(&root, &durable_world::incarnation(1), &[(root.as_str(), &state)])
            })
            .collect();
        let checkpoints: Vec<Checkpoint> = cuts
            .iter()
            .enumerate()
            .map(|(i, cut)| Checkpoint {
                sequence: i as u64 + 1,
                kind: if i == 0 { CheckpointKind::Start } else { CheckpointKind::Progress },
                previous_digest: (i > 0).then(|| cuts[i - 1].digest),
                cut: cut.clone(),
            })
            .collect();
        let time = |c: &dyn Committer| {
            let began = Instant::now();
            for checkpoint in &checkpoints {
                futures::executor::block_on(c.commit_checkpoint(checkpoint)).unwrap();
            }
            began.elapsed() / checkpoints.len() as u32
        };
        let per_file = time(&file);
        let per_memory = time(&memory);
        // The same bytes appended and synced with no framing or checksum: the bare fsync floor.
        let raw_path = dir.0.join(format!("raw-{size}"));
        let mut raw = std::fs::File::create(&raw_path).unwrap();
        let began = Instant::now();
        for cut in &cuts {
            raw.write_all(&cut.bytes().unwrap()).unwrap();
            raw.sync_data().unwrap();
        }
        let per_raw = began.elapsed() / cuts.len() as u32;
        // The frame checksum alone (SHA-256 over the cut; slow in a debug build).
        let began = Instant::now();
        for cut in &cuts {
            std::hint::black_box(keel::json::Digest::of(&cut.bytes().unwrap()));
        }
        let per_sum = began.elapsed() / cuts.len() as u32;
        println!(
            "commit of a {label} cut: FileCommitter {per_file:?} = bare write+sync_data \
             {per_raw:?} + SHA-256 {per_sum:?} + encoding; MemoryCommitter {per_memory:?}"
        );
    }
}

/// Two processes on one store directory: while a live child holds it, this process is refused
/// with `Locked` naming the child's pid and the log is untouched; once the child is killed the
/// directory opens and holds everything the child acknowledged.
#[test]
fn a_second_process_on_the_same_directory_gets_locked() {
    let dir = TempDir::new("durable-locked");
    let mut child = spawn_child(
        Command::new(CHILD)
            .arg(&dir.0)
            .arg("step")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit()),
    );
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert!(line.starts_with("ACK "), "first line: {line}");
    // The child now waits on stdin, holding the store with one acknowledged commit.
    let log = dir.0.join(keel::kernel::commit::LOG_FILE_NAME);
    let before = std::fs::read(&log).unwrap();
    match open_store(&dir.0) {
        Err(keel::kernel::commit::OpenError::Locked { pid, .. }) => {
            assert_eq!(pid, Some(child.id()), "the error names the holder");
        }
        Err(e) => panic!("expected Locked, got {e}"),
        Ok(_) => panic!("a second process opened a store another process holds"),
    }
    assert_eq!(std::fs::read(&log).unwrap(), before, "the refused opener wrote nothing");
    child.kill().unwrap();
    child.wait().unwrap();
    let store = open_store(&dir.0).expect("the OS released the dead holder's lock");
    assert_eq!(store.head(&durable_world::root_id()).unwrap().sequence, 1);
}
