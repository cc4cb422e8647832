//! The store fault suite: the faults a durable store meets in operation, written once and run
//! against every store through a [`StoreFixture`] (memory, file, SQLite, PostgreSQL each have
//! one beside their tests). A fault that cannot happen to a store is not skipped silently: the
//! fixture answers [`Support::NotApplicable`] with the reason, and [`check_faults`] returns
//! the list, which each store's test compares with the list it expects.
//!
//! Every case ends with the rule the fault threatens: nothing acknowledged is lost, nothing
//! unacknowledged is served, and no second writer silently takes a tree over.

use super::{activation, progress, sample_cut, start};
use crate::kernel::commit::port::{CommitError, Committer, TreeCut};
use crate::kernel::ids::{IncarnationId, ProcessId};

/// The faults of the suite, in the order [`check_faults`] runs them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fault {
    /// The store is closed and opened again: every acknowledged commit is there.
    Reopen,
    /// A second writer opens the store while the first runs: it is refused at open (an
    /// exclusive store), or admitted and fenced per tree by the database (a shared store):
    /// its start over an existing run and its commits from a head it does not own are refused,
    /// a takeover (activation) fences the first writer, and no refusal mentions disk space.
    SecondWriter,
    /// The store's lock artifacts are deleted, renamed or recreated while a writer runs; a
    /// second writer is still refused.
    LockDeleted,
    /// Two writers race to take one run over from the same head: exactly one wins, the other
    /// is fenced, and so is the writer they took it from.
    TakeoverRace,
    /// The last frame was cut short by a crash (never acknowledged): a writer's open drops it
    /// and serves every acknowledged commit.
    TornTail,
    /// The last acknowledged commit is complete but its bytes were changed: that tree is
    /// reported damaged (never served older), the store's other trees are served.
    DamagedTail,
    /// The disk is full: a commit fails without an acknowledgment and without changing the
    /// head, and the first commit after space returns succeeds.
    DiskFull,
    /// The write of a commit reaches the disk in part and its sync fails: nothing is
    /// acknowledged, the store goes on, and a reopen serves the previous head.
    FailedSync,
    /// A writer's open of something that is not a keel store is refused and changes nothing.
    ForeignFile,
}

impl Fault {
    pub const ALL: [Fault; 9] = [
        Fault::Reopen,
        Fault::SecondWriter,
        Fault::LockDeleted,
        Fault::TakeoverRace,
        Fault::TornTail,
        Fault::DamagedTail,
        Fault::DiskFull,
        Fault::FailedSync,
        Fault::ForeignFile,
    ];
}

/// Whether a fault can happen to a store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Support {
    Applies,
    /// Why it cannot (said in the test's output and compared by the store's test).
    NotApplicable(&'static str),
}

/// How a store keeps two writers apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exclusion {
    /// One writer per store: a second writer's open is refused while one runs.
    Exclusive,
    /// Any number of writers: each commit is decided inside the database against the tree's
    /// head, which fences a writer that does not own the tree.
    Fenced,
}

/// Why a writer's open failed, as the fixture classifies its store's error.
#[derive(Debug)]
pub enum OpenFailure {
    /// Another writer holds the store.
    InUse(String),
    /// The location holds something that is not a keel store.
    Foreign(String),
    Other(String),
}

/// One store under test. Every `open` opens a writer on the same store; the fault methods
/// are called only for faults the store supports (see [`StoreFixture::supports`]).
#[allow(async_fn_in_trait)] // used generically by the suite only
pub trait StoreFixture {
    type Store: Committer;
    /// The store's name in messages.
    fn name(&self) -> &'static str;
    fn supports(&self, fault: Fault) -> Support;
    /// How writers are kept apart (asked only when [`Fault::SecondWriter`] applies).
    fn exclusion(&self) -> Exclusion;
    async fn open(&self) -> Result<Self::Store, OpenFailure>;
    /// Closes a writer (and waits until the store is released).
    async fn close(&self, store: Self::Store) {
        drop(store);
    }
    /// Deletes, renames or recreates the store's lock artifacts while `holder` writes.
    async fn tamper_with_lock(&self, _holder: &Self::Store) {}
    /// With no writer open: appends the first part of a frame, as a crash mid-append leaves it.
    async fn tear_tail(&self) {}
    /// With no writer open: changes bytes of the last commit, which advanced `root`.
    async fn damage_last_commit(&self, _root: &ProcessId) {}
    /// Makes the disk under `store` full (or gives the space back).
    async fn set_disk_full(&self, _store: &Self::Store, _full: bool) {}
    /// Lets the next commit's write reach the disk in part, then fails its sync.
    async fn fail_next_sync(&self, _store: &Self::Store) {}
    /// Puts something that is not a keel store where a new store would be, opens a writer
    /// there, and says whether that thing is byte for byte what it was.
    async fn open_foreign(&self) -> (Result<Self::Store, OpenFailure>, bool) {
        (Err(OpenFailure::Other("not applicable".into())), true)
    }
}

/// What [`check_faults`] did: the faults it ran and the ones that do not apply, with why.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct FaultReport {
    pub ran: Vec<Fault>,
    pub not_applicable: Vec<(Fault, &'static str)>,
}

impl FaultReport {
    pub fn not_applicable_faults(&self) -> Vec<Fault> {
        self.not_applicable.iter().map(|(f, _)| *f).collect()
    }
}

/// Runs every applicable fault against `fixture` (each on its own trees of the same store);
/// the error names the fault and the failed check.
pub async fn check_faults<F: StoreFixture>(fixture: &F) -> Result<FaultReport, String> {
    let mut report = FaultReport::default();
    for fault in Fault::ALL {
        if let Support::NotApplicable(why) = fixture.supports(fault) {
            println!("{}: {fault:?} does not apply: {why}", fixture.name());
            report.not_applicable.push((fault, why));
            continue;
        }
        let outcome = match fault {
            Fault::Reopen => reopen(fixture).await,
            Fault::SecondWriter => second_writer(fixture, false).await,
            Fault::LockDeleted => second_writer(fixture, true).await,
            Fault::TakeoverRace => takeover_race(fixture).await,
            Fault::TornTail => torn_tail(fixture).await,
            Fault::DamagedTail => damaged_tail(fixture).await,
            Fault::DiskFull => disk_full(fixture).await,
            Fault::FailedSync => failed_sync(fixture).await,
            Fault::ForeignFile => foreign_file(fixture).await,
        };
        outcome.map_err(|e| format!("{}: {fault:?}: {e}", fixture.name()))?;
        report.ran.push(fault);
    }
    Ok(report)
}

fn root(fault: Fault, name: &str) -> ProcessId {
    let text = format!("process:fault-{}-{name}", format!("{fault:?}").to_lowercase());
    ProcessId::parse(&text).expect("a valid process id")
}

fn inc(n: u8) -> IncarnationId {
    IncarnationId::from_hex(&format!("{n:032x}")).expect("32 hex digits")
}

fn cut(root: &ProcessId, writer: u8, state: &str) -> TreeCut {
    sample_cut(root, &inc(writer), &[(root.as_str(), state)])
}

async fn open<F: StoreFixture>(f: &F, what: &str) -> Result<F::Store, String> {
    f.open().await.map_err(|e| format!("{what}: open failed: {e:?}"))
}

/// Commits a start and `n - 1` progress checkpoints of `root` by writer 1; returns the head.
async fn history<C: Committer>(c: &C, root: &ProcessId, n: u64) -> Result<TreeCut, String> {
    let mut head = cut(root, 1, "1");
    c.commit_checkpoint(&start(&head)).await.map_err(|e| format!("start of {root}: {e:?}"))?;
    for sequence in 2..=n {
        let next = cut(root, 1, &sequence.to_string());
        c.commit_checkpoint(&progress(sequence, &head, &next))
            .await
            .map_err(|e| format!("commit {sequence} of {root}: {e:?}"))?;
        head = next;
    }
    Ok(head)
}

async fn head_is<C: Committer>(c: &C, cut: &TreeCut, sequence: u64, what: &str) -> Result<(), String> {
    match c.load_tree(&cut.root_id).await {
        Ok(Some(head)) if head.cut.same_cut(cut) && head.sequence == sequence => Ok(()),
        Ok(Some(head)) => Err(format!("{what}: head at sequence {} holds another cut", head.sequence)),
        Ok(None) => Err(format!("{what}: no head")),
        Err(e) => Err(format!("{what}: load failed: {e:?}")),
    }
}

fn fenced(got: &Result<(), CommitError>, what: &str) -> Result<(), String> {
    match got {
        Err(e @ (CommitError::TreeIncarnationConflict { .. } | CommitError::CommitConflict { .. })) => {
            // A conflict names the conflict; it never sends the user to check the disk.
            let text = e.to_string();
            if text.contains("disk") || text.contains("permission") {
                Err(format!("{what}: the refusal talks about storage: {text}"))
            } else {
                Ok(())
            }
        }
        other => Err(format!("{what}: expected a writer conflict, got {other:?}")),
    }
}

fn storage_failure(got: &Result<(), CommitError>, what: &str) -> Result<(), String> {
    match got {
        Err(CommitError::Storage { .. }) => Ok(()),
        other => Err(format!("{what}: expected an unacknowledged storage failure, got {other:?}")),
    }
}

async fn reopen<F: StoreFixture>(f: &F) -> Result<(), String> {
    let (a, b) = (root(Fault::Reopen, "a"), root(Fault::Reopen, "b"));
    let store = open(f, "first open").await?;
    let head_a = history(&store, &a, 3).await?;
    let head_b = history(&store, &b, 1).await?;
    f.close(store).await;
    let store = open(f, "reopen").await?;
    head_is(&store, &head_a, 3, "after reopen").await?;
    head_is(&store, &head_b, 1, "after reopen").await?;
    // The reopened writer continues where the acknowledged history ends.
    let next = cut(&a, 1, "4");
    store.commit_checkpoint(&progress(4, &head_a, &next)).await.map_err(|e| format!("after reopen: {e:?}"))?;
    f.close(store).await;
    Ok(())
}

async fn second_writer<F: StoreFixture>(f: &F, tamper: bool) -> Result<(), String> {
    let fault = if tamper { Fault::LockDeleted } else { Fault::SecondWriter };
    let run = root(fault, "run");
    let first = open(f, "first writer").await?;
    let head = history(&first, &run, 2).await?;
    if tamper {
        f.tamper_with_lock(&first).await;
    }
    match (f.exclusion(), f.open().await) {
        (Exclusion::Exclusive, Err(OpenFailure::InUse(_))) => {
            // The holder never noticed.
            let next = cut(&run, 1, "3");
            first.commit_checkpoint(&progress(3, &head, &next)).await.map_err(|e| format!("holder after a refused open: {e:?}"))?;
            f.close(first).await;
            let store = open(f, "reopen").await?;
            head_is(&store, &next, 3, "after the holder closed").await?;
            f.close(store).await;
            Ok(())
        }
        (Exclusion::Exclusive, Err(e)) => Err(format!("second writer: expected the store in use, got {e:?}")),
        (Exclusion::Exclusive, Ok(_)) => Err("a second writer opened a store whose writer runs".into()),
        (Exclusion::Fenced, Err(e)) => Err(format!("second writer: open failed: {e:?}")),
        (Exclusion::Fenced, Ok(second)) => {
            // Starting a run that exists, under another writer: refused, the run unchanged.
            let rival = cut(&run, 2, "1");
            fenced(&second.commit_checkpoint(&start(&rival)).await, "start over an existing run")?;
            let stale = cut(&run, 2, "stale");
            fenced(&second.commit_checkpoint(&progress(3, &head, &stale)).await, "commit as a writer it is not")?;
            head_is(&second, &head, 2, "after refused commits").await?;
            // The second writer takes the run over (as a resume elsewhere does).
            let taken = cut(&run, 2, "taken over");
            second.activate_tree(&activation(&head, &taken)).await.map_err(|e| format!("takeover: {e:?}"))?;
            let late = cut(&run, 1, "3");
            fenced(&first.commit_checkpoint(&progress(3, &head, &late)).await, "the first writer after a takeover")?;
            head_is(&first, &taken, 0, "the first writer sees the new head").await?;
            f.close(second).await;
            f.close(first).await;
            Ok(())
        }
    }
}

async fn takeover_race<F: StoreFixture>(f: &F) -> Result<(), String> {
    let run = root(Fault::TakeoverRace, "run");
    let first = open(f, "first writer").await?;
    let head = history(&first, &run, 2).await?;
    let (b, c) = (open(f, "second writer").await?, open(f, "third writer").await?);
    let (cut_b, cut_c) = (cut(&run, 2, "b"), cut(&run, 3, "c"));
    let (got_b, got_c) = futures::future::join(
        b.activate_tree(&activation(&head, &cut_b)),
        c.activate_tree(&activation(&head, &cut_c)),
    )
    .await;
    let (winner, loser, won) = match (&got_b, &got_c) {
        (Ok(()), Err(_)) => (&b, &got_c, &cut_b),
        (Err(_), Ok(())) => (&c, &got_b, &cut_c),
        _ => return Err(format!("expected one winner, got {got_b:?} and {got_c:?}")),
    };
    fenced(loser, "the losing takeover")?;
    let late = cut(&run, 1, "3");
    fenced(&first.commit_checkpoint(&progress(3, &head, &late)).await, "the writer taken over")?;
    let next = sample_cut(&run, &won.incarnation, &[(run.as_str(), "winner goes on")]);
    winner.commit_checkpoint(&progress(1, won, &next)).await.map_err(|e| format!("winner: {e:?}"))?;
    head_is(&first, &next, 1, "end").await?;
    f.close(b).await;
    f.close(c).await;
    f.close(first).await;
    Ok(())
}

async fn torn_tail<F: StoreFixture>(f: &F) -> Result<(), String> {
    let run = root(Fault::TornTail, "run");
    let store = open(f, "first open").await?;
    let head = history(&store, &run, 3).await?;
    f.close(store).await;
    f.tear_tail().await;
    let store = open(f, "open over a torn tail").await?;
    head_is(&store, &head, 3, "after the torn tail").await?;
    let next = cut(&run, 1, "4");
    store.commit_checkpoint(&progress(4, &head, &next)).await.map_err(|e| format!("after the torn tail: {e:?}"))?;
    f.close(store).await;
    let store = open(f, "reopen").await?;
    head_is(&store, &next, 4, "reopen after a commit over the torn tail").await?;
    f.close(store).await;
    Ok(())
}

async fn damaged_tail<F: StoreFixture>(f: &F) -> Result<(), String> {
    let (bystander, run) = (root(Fault::DamagedTail, "bystander"), root(Fault::DamagedTail, "run"));
    let store = open(f, "first open").await?;
    let other = history(&store, &bystander, 2).await?;
    // The damaged commit advances a tree earlier commits vouch for.
    history(&store, &run, 3).await?;
    f.close(store).await;
    f.damage_last_commit(&run).await;
    let store = open(f, "open over a damaged last commit").await?;
    match store.load_tree(&run).await {
        Err(CommitError::Damaged { root, .. }) if root == run => {}
        got => return Err(format!("the damaged tree: expected Damaged, got {got:?}")),
    }
    head_is(&store, &other, 2, "the other tree").await?;
    let next = cut(&bystander, 1, "3");
    store.commit_checkpoint(&progress(3, &other, &next)).await.map_err(|e| format!("the other tree commits: {e:?}"))?;
    f.close(store).await;
    Ok(())
}

async fn disk_full<F: StoreFixture>(f: &F) -> Result<(), String> {
    let run = root(Fault::DiskFull, "run");
    let store = open(f, "first open").await?;
    let head = history(&store, &run, 2).await?;
    f.set_disk_full(&store, true).await;
    let next = cut(&run, 1, "3");
    storage_failure(&store.commit_checkpoint(&progress(3, &head, &next)).await, "a commit on a full disk")?;
    head_is(&store, &head, 2, "after the refused commit").await?;
    f.set_disk_full(&store, false).await;
    store.commit_checkpoint(&progress(3, &head, &next)).await.map_err(|e| format!("after space returned: {e:?}"))?;
    f.close(store).await;
    let store = open(f, "reopen").await?;
    head_is(&store, &next, 3, "reopen").await?;
    f.close(store).await;
    Ok(())
}

async fn failed_sync<F: StoreFixture>(f: &F) -> Result<(), String> {
    let run = root(Fault::FailedSync, "run");
    let store = open(f, "first open").await?;
    let head = history(&store, &run, 2).await?;
    f.fail_next_sync(&store).await;
    let lost = cut(&run, 1, "never acknowledged");
    storage_failure(&store.commit_checkpoint(&progress(3, &head, &lost)).await, "a commit whose sync failed")?;
    head_is(&store, &head, 2, "after the failed sync").await?;
    f.close(store).await;
    let store = open(f, "reopen").await?;
    head_is(&store, &head, 2, "reopen after the failed sync").await?;
    let next = cut(&run, 1, "3");
    store.commit_checkpoint(&progress(3, &head, &next)).await.map_err(|e| format!("after reopen: {e:?}"))?;
    f.close(store).await;
    Ok(())
}

async fn foreign_file<F: StoreFixture>(f: &F) -> Result<(), String> {
    match f.open_foreign().await {
        (Err(OpenFailure::Foreign(_)), true) => Ok(()),
        (Err(OpenFailure::Foreign(_)), false) => Err("refused, but the foreign file changed".into()),
        (Err(e), _) => Err(format!("expected a refusal naming a foreign file, got {e:?}")),
        (Ok(_), _) => Err("a writer opened something that is not a keel store".into()),
    }
}
