use super::*;
use futures::executor::block_on;
use keel::json::Digest;
use keel::kernel::commit::conformance::check_committer;
use keel::kernel::commit::{
    audit_history, Checkpoint, CheckpointKind, CommitError, Committer, EffectBoundary,
    EffectBoundaryKind, Head, MemoryCommitter, TreeCut,
};
use keel::kernel::ids::{EffectId, IncarnationId, ProcessId};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

/// A fresh database path in its own temp directory, removed on drop.
struct TempDb(PathBuf);

impl TempDb {
    fn new() -> TempDb {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("keel-sqlite-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDb(dir)
    }
    fn path(&self) -> PathBuf {
        self.0.join("store.sqlite")
    }
    fn raw(&self) -> rusqlite::Connection {
        rusqlite::Connection::open(self.path()).unwrap()
    }
}

impl Drop for TempDb {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A committer that owns its file (fields drop in order: the connection closes first).
struct TempStore {
    committer: SqliteCommitter,
    _db: TempDb,
}

impl TempStore {
    fn new() -> TempStore {
        let db = TempDb::new();
        TempStore { committer: SqliteCommitter::open(db.path()).unwrap(), _db: db }
    }
}

impl Committer for TempStore {
    fn commit_checkpoint(&self, c: &Checkpoint) -> keel::env::BoxFuture<'_, Result<(), CommitError>> {
        self.committer.commit_checkpoint(c)
    }
    fn commit_effect(&self, b: &EffectBoundary) -> keel::env::BoxFuture<'_, Result<(), CommitError>> {
        self.committer.commit_effect(b)
    }
    fn activate_tree(
        &self,
        a: &keel::kernel::commit::Activation,
    ) -> keel::env::BoxFuture<'_, Result<(), CommitError>> {
        self.committer.activate_tree(a)
    }
    fn load_tree(&self, root: &ProcessId) -> keel::env::BoxFuture<'_, Result<Option<Head>, CommitError>> {
        self.committer.load_tree(root)
    }
}

fn root(name: &str) -> ProcessId {
    ProcessId::parse(&format!("process:{name}")).unwrap()
}
fn inc(n: u8) -> IncarnationId {
    IncarnationId::from_hex(&format!("{n:032x}")).unwrap()
}
fn cut(root: &ProcessId, state: &str, incarnation: u8) -> TreeCut {
    let state = format!("{root} {state} {incarnation}");
    keel::kernel::commit::conformance::sample_cut(root, &inc(incarnation), &[(root.as_str(), &state)])
}
fn start(c: &TreeCut) -> Checkpoint {
    Checkpoint { sequence: 1, kind: CheckpointKind::Start, previous_digest: None, cut: c.clone() }
}
fn progress(sequence: u64, previous: &TreeCut, c: &TreeCut) -> Checkpoint {
    Checkpoint {
        sequence,
        kind: CheckpointKind::Progress,
        previous_digest: Some(previous.digest),
        cut: c.clone(),
    }
}
fn pending(sequence: u64, previous: &TreeCut, c: &TreeCut) -> EffectBoundary {
    let process = c.root_id.clone();
    EffectBoundary {
        sequence,
        kind: EffectBoundaryKind::Pending,
        effect_id: EffectId::derive(&process, 1, 0),
        process_id: process,
        step_sequence: 1,
        batch_index: 0,
        effect_digest: Digest::of(b"effect"),
        settlement_digest: None,
        previous_digest: previous.digest,
        cut: c.clone(),
    }
}

/// Three commits on each of `roots`; returns each root's last cut.
fn populate(store: &SqliteCommitter, roots: &[ProcessId]) -> Vec<TreeCut> {
    roots
        .iter()
        .map(|r| {
            let (a, b, c) = (cut(r, "a", 1), cut(r, "b", 1), cut(r, "c", 1));
            block_on(store.commit_checkpoint(&start(&a))).unwrap();
            block_on(store.commit_effect(&pending(2, &a, &b))).unwrap();
            block_on(store.commit_checkpoint(&progress(3, &b, &c))).unwrap();
            c
        })
        .collect()
}

#[test]
fn sqlite_committer_passes_conformance() {
    block_on(check_committer(TempStore::new)).unwrap();
}

#[test]
fn reopen_serves_the_same_heads_and_history_as_the_reference() {
    let db = TempDb::new();
    let memory = MemoryCommitter::new();
    let roots = [root("one"), root("two")];
    {
        let store = SqliteCommitter::open(db.path()).unwrap();
        populate(&store, &roots);
    }
    for r in &roots {
        let (a, b, c) = (cut(r, "a", 1), cut(r, "b", 1), cut(r, "c", 1));
        block_on(memory.commit_checkpoint(&start(&a))).unwrap();
        block_on(memory.commit_effect(&pending(2, &a, &b))).unwrap();
        block_on(memory.commit_checkpoint(&progress(3, &b, &c))).unwrap();
    }
    let store = SqliteCommitter::open(db.path()).unwrap();
    for r in &roots {
        assert_eq!(store.head(r).unwrap(), memory.head(r), "head of {r}");
        assert_eq!(store.history(r).unwrap(), memory.history(r), "history of {r}");
        audit_history(&store.history(r).unwrap()).unwrap();
    }
    let listed: Vec<ProcessId> =
        store.trees().unwrap().into_iter().map(|t| t.unwrap().root).collect();
    assert_eq!(listed, memory.roots());
    assert!(store.damaged_trees().unwrap().is_empty());
}

#[test]
fn the_database_is_in_wal_mode_with_full_sync_and_schema_version_1() {
    let db = TempDb::new();
    let store = SqliteCommitter::open(db.path()).unwrap();
    let conn = store.lock();
    let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, "wal");
    let sync: i64 = conn.query_row("PRAGMA synchronous", [], |r| r.get(0)).unwrap();
    assert_eq!(sync, 2, "FULL");
    let version: i64 = conn.query_row("SELECT version FROM keel_schema", [], |r| r.get(0)).unwrap();
    assert_eq!(version, schema::SCHEMA_VERSION);
}

#[test]
fn two_committers_on_one_file_are_fenced_by_the_database() {
    let db = TempDb::new();
    let first = SqliteCommitter::open(db.path()).unwrap();
    let second = SqliteCommitter::open(db.path()).unwrap();
    let r = root("shared");
    let (a, b) = (cut(&r, "a", 1), cut(&r, "b", 1));
    block_on(first.commit_checkpoint(&start(&a))).unwrap();
    // The second connection sees the first's head and its own stale start is refused.
    let rival = cut(&r, "a", 2);
    assert!(matches!(
        block_on(second.commit_checkpoint(&start(&rival))),
        Err(CommitError::TreeIncarnationConflict { .. })
    ));
    block_on(second.commit_checkpoint(&progress(2, &a, &b))).unwrap();
    // The first advances from a head that moved under it: fenced, nothing written.
    let c = cut(&r, "c", 1);
    assert!(matches!(
        block_on(first.commit_checkpoint(&progress(2, &a, &c))),
        Err(CommitError::CommitConflict { .. })
    ));
    assert_eq!(first.head(&r).unwrap().unwrap().cut, b);
    audit_history(&first.history(&r).unwrap()).unwrap();
}

fn corrupt(db: &TempDb, sql: &str) {
    db.raw().execute_batch(sql).unwrap();
}

#[test]
fn a_damaged_row_of_one_tree_leaves_the_others_served() {
    let cases = [
        ("cut bytes", "UPDATE keel_heads SET cut = X'00' WHERE root_id = 'process:bad'"),
        ("head digest", "UPDATE keel_heads SET cut_digest = 'sha256:zz' WHERE root_id = 'process:bad'"),
        ("head writer", "UPDATE keel_heads SET incarnation_id = 'nobody' WHERE root_id = 'process:bad'"),
        ("negative sequence", "UPDATE keel_heads SET sequence = -1 WHERE root_id = 'process:bad'"),
        (
            "fact digest",
            "UPDATE keel_commits SET content_digest = 'oops' WHERE root_id = 'process:bad'",
        ),
        (
            "commit kind",
            "UPDATE keel_commits SET commit_kind = 'snapshot' WHERE root_id = 'process:bad' AND position = 1",
        ),
        ("missing commit", "DELETE FROM keel_commits WHERE root_id = 'process:bad' AND position = 1"),
    ];
    for (what, sql) in cases {
        let db = TempDb::new();
        let (good, bad, other) = (root("good"), root("bad"), root("other"));
        let last = {
            let store = SqliteCommitter::open(db.path()).unwrap();
            populate(&store, &[good.clone(), bad.clone(), other.clone()])
        };
        corrupt(&db, sql);
        let store = SqliteCommitter::open(db.path()).unwrap();
        let damage = store.damaged_trees().unwrap();
        assert_eq!(damage.len(), 1, "{what}: {damage:?}");
        assert_eq!(damage[0].root, "process:bad", "{what}");
        // The other trees load and commit normally.
        for (r, last) in [(&good, &last[0]), (&other, &last[2])] {
            assert_eq!(&store.head(r).unwrap().unwrap().cut, last, "{what}");
            let next = cut(r, "d", 1);
            block_on(store.commit_checkpoint(&progress(4, last, &next))).unwrap();
        }
        assert!(store.damaged_trees().unwrap().len() == 1, "{what}");
    }
}

#[test]
fn loading_or_committing_a_tree_with_a_damaged_head_row_is_a_typed_error() {
    let db = TempDb::new();
    let bad = root("bad");
    let last = {
        let store = SqliteCommitter::open(db.path()).unwrap();
        populate(&store, std::slice::from_ref(&bad))
    };
    corrupt(&db, "UPDATE keel_heads SET incarnation_id = 'x' WHERE root_id = 'process:bad'");
    let store = SqliteCommitter::open(db.path()).unwrap();
    let got = block_on(store.load_tree(&bad));
    assert!(matches!(&got, Err(CommitError::Damaged { root, .. }) if *root == bad), "{got:?}");
    let next = cut(&bad, "d", 1);
    let got = block_on(store.commit_checkpoint(&progress(4, &last[0], &next)));
    assert!(matches!(got, Err(CommitError::Damaged { .. })), "{got:?}");
    corrupt(&db, "UPDATE keel_heads SET cut = X'01' WHERE root_id = 'process:bad'");
    let got = block_on(store.load_tree(&bad));
    assert!(matches!(got, Err(CommitError::Damaged { .. })), "{got:?}");
}

#[test]
fn files_that_are_not_keel_stores_are_refused_with_typed_errors() {
    let db = TempDb::new();
    std::fs::write(db.path(), b"this is not a database, just some text that is long enough to fill a header page .................................................").unwrap();
    assert!(matches!(SqliteCommitter::open(db.path()), Err(OpenError::NotADatabase { .. })));

    let db = TempDb::new();
    db.raw().execute_batch("CREATE TABLE customers (name TEXT)").unwrap();
    assert!(matches!(SqliteCommitter::open(db.path()), Err(OpenError::NotAKeelStore { .. })));

    let db = TempDb::new();
    drop(SqliteCommitter::open(db.path()).unwrap());
    corrupt(&db, "UPDATE keel_schema SET version = 9");
    match SqliteCommitter::open(db.path()) {
        Err(OpenError::NewerSchema { found: 9, known: 1, .. }) => {}
        other => panic!("{:?}", other.err()),
    }
    corrupt(&db, "INSERT INTO keel_schema (version) VALUES (1)");
    assert!(matches!(SqliteCommitter::open(db.path()), Err(OpenError::DamagedSchema { .. })));
}

#[test]
fn cuts_above_the_bound_are_refused_and_nothing_is_written() {
    let db = TempDb::new();
    let store = SqliteCommitter::open_with_limit(db.path(), 400).unwrap();
    let r = root("big");
    let a = cut(&r, "a", 1);
    block_on(store.commit_checkpoint(&start(&a))).unwrap();
    let big = cut(&r, &"x".repeat(400), 1);
    let got = block_on(store.commit_checkpoint(&progress(2, &a, &big)));
    assert!(matches!(got, Err(CommitError::RecordTooLarge { max: 400, .. })), "{got:?}");
    assert_eq!(store.history(&r).unwrap().len(), 1);
    block_on(store.commit_checkpoint(&progress(2, &a, &cut(&r, "b", 1)))).unwrap();
}

mod group;
