//! Group commit: concurrent commits of different trees share one transaction (one WAL sync),
//! each decided in its own savepoint, and none is acknowledged before that transaction commits.

use super::*;
use std::sync::Arc;

/// Submits every checkpoint from its own task on a current-thread runtime; each task checks,
/// when its commit is acknowledged, that a batch transaction committed after the submission.
fn concurrently(store: &Arc<SqliteCommitter>, checkpoints: Vec<Checkpoint>) -> Vec<Result<(), CommitError>> {
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    rt.block_on(async {
        let tasks: Vec<_> = checkpoints
            .into_iter()
            .map(|c| {
                let store = store.clone();
                tokio::spawn(async move {
                    let before = store.syncs();
                    let outcome = store.commit_checkpoint(&c).await;
                    if outcome.is_ok() {
                        assert!(store.syncs() > before, "acknowledged before its transaction committed");
                    }
                    outcome
                })
            })
            .collect();
        let mut outcomes = Vec::new();
        for t in tasks {
            outcomes.push(t.await.unwrap());
        }
        outcomes
    })
}

fn trees(n: usize) -> Vec<ProcessId> {
    (0..n).map(|i| root(&format!("tree-{i}"))).collect()
}

#[test]
fn concurrent_commits_of_different_trees_share_one_transaction() {
    let db = TempDb::new();
    let store = Arc::new(SqliteCommitter::open(db.path()).unwrap());
    let roots = trees(20);
    let firsts: Vec<TreeCut> = roots.iter().map(|r| cut(r, "a", 1)).collect();
    let outcomes = concurrently(&store, firsts.iter().map(start).collect());
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    assert_eq!(store.syncs(), 1, "twenty commits, one COMMIT");
    let seconds: Vec<TreeCut> = roots.iter().map(|r| cut(r, "b", 1)).collect();
    let outcomes =
        concurrently(&store, firsts.iter().zip(&seconds).map(|(a, b)| progress(2, a, b)).collect());
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    assert_eq!(store.syncs(), 2);
    drop(store);
    let store = SqliteCommitter::open(db.path()).unwrap();
    for (r, b) in roots.iter().zip(&seconds) {
        let head = store.head(r).unwrap().unwrap();
        assert_eq!((head.sequence, head.cut.digest), (2, b.digest));
        assert_eq!(store.history(r).unwrap().len(), 2);
    }
    assert!(store.damaged_trees().unwrap().is_empty());
}

#[test]
fn a_refused_commit_rolls_back_to_its_savepoint_and_the_batch_commits_the_others() {
    let db = TempDb::new();
    let store = Arc::new(SqliteCommitter::open(db.path()).unwrap());
    let roots = trees(4);
    let firsts: Vec<TreeCut> = roots.iter().map(|r| cut(r, "a", 1)).collect();
    concurrently(&store, firsts.iter().map(start).collect());
    let seconds: Vec<TreeCut> = roots.iter().map(|r| cut(r, "b", 1)).collect();
    let mut batch: Vec<Checkpoint> = firsts.iter().zip(&seconds).map(|(a, b)| progress(2, a, b)).collect();
    batch[1].sequence = 3; // skips a sequence: refused by the rules
    batch[3] = start(&firsts[3]); // an identical retry of the head: acknowledged, nothing written
    let outcomes = concurrently(&store, batch);
    assert!(outcomes[0].is_ok() && outcomes[2].is_ok() && outcomes[3].is_ok(), "{outcomes:?}");
    assert!(outcomes[1].is_err(), "{outcomes:?}");
    assert_eq!(store.syncs(), 2);
    assert_eq!(store.head(&roots[1]).unwrap().unwrap().sequence, 1, "the refused commit wrote nothing");
    assert_eq!(store.history(&roots[1]).unwrap().len(), 1);
    assert_eq!(store.head(&roots[0]).unwrap().unwrap().sequence, 2);
    assert_eq!(store.history(&roots[3]).unwrap().len(), 1);
    assert!(store.damaged_trees().unwrap().is_empty());
}
