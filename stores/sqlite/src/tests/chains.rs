//! Chains (several boundaries of one tree in one submission) are installed whole or not at all,
//! and the heads the committer keeps in memory never stand in for a row another writer moved.

use super::*;
use keel::kernel::commit::CommitRequest;

/// Start, then a chain of three progress checkpoints 2..=4 sent as deltas (as the kernel sends
/// them), on top of `a`.
fn chain_on(a: &TreeCut) -> (Vec<CommitRequest>, TreeCut) {
    let r = &a.root_id;
    let mut previous = a.clone();
    let mut chain = Vec::new();
    for (sequence, state) in [(2, "b"), (3, "c"), (4, "d")] {
        let whole = cut(r, state, 1);
        chain.push(CommitRequest::Checkpoint(progress(sequence, &previous, &whole.delta_from(&previous))));
        previous = whole;
    }
    (chain, previous)
}

#[test]
fn a_chain_whose_write_fails_part_way_installs_nothing_and_a_retry_installs_it_whole() {
    let db = TempDb::new();
    let store = SqliteCommitter::open(db.path()).unwrap();
    let (run, other) = (root("chain-run"), root("chain-other"));
    let a = cut(&run, "a", 1);
    block_on(store.commit_checkpoint(&start(&a))).unwrap();
    // The second commit row of the chain fails to insert, after the first was written in the
    // same transaction: a storage failure part way through the chain.
    db.raw()
        .execute_batch(
            "CREATE TRIGGER fail_sequence_3 BEFORE INSERT ON keel_commits WHEN NEW.sequence = 3 \
             AND NEW.root_id = 'process:chain-run' BEGIN SELECT RAISE(ABORT, 'injected write failure'); END;",
        )
        .unwrap();
    let (chain, last) = chain_on(&a);
    let failed = block_on(store.commit_chain(&chain));
    assert!(matches!(&failed, Err(CommitError::Storage { message }) if message.contains("injected write failure")), "{failed:?}");
    let head = store.head(&run).unwrap().unwrap();
    assert_eq!((head.sequence, head.cut.digest), (1, a.digest), "no prefix of the chain was installed");
    assert_eq!(store.history(&run).unwrap().len(), 1);
    // Another tree still commits (the failed chain rolled back to its own savepoint).
    block_on(store.commit_checkpoint(&start(&cut(&other, "a", 1)))).unwrap();
    drop(store);
    db.raw().execute_batch("DROP TRIGGER fail_sequence_3").unwrap();

    let store = SqliteCommitter::open(db.path()).unwrap();
    let head = store.head(&run).unwrap().unwrap();
    assert_eq!((head.sequence, head.cut.digest), (1, a.digest), "after reopen too");
    block_on(store.commit_chain(&chain)).unwrap();
    let head = store.head(&run).unwrap().unwrap();
    assert_eq!((head.sequence, head.cut.digest), (4, last.digest));
    let history = store.history(&run).unwrap();
    assert_eq!(history.iter().map(|c| c.sequence).collect::<Vec<_>>(), [1, 2, 3, 4]);
    audit_history(&history).unwrap();
    assert!(store.damaged_trees().unwrap().is_empty());
}

#[test]
fn a_chain_refused_by_the_rules_part_way_installs_nothing() {
    let db = TempDb::new();
    let store = SqliteCommitter::open(db.path()).unwrap();
    let run = root("chain-refused");
    let (a, b, c) = (cut(&run, "a", 1), cut(&run, "b", 1), cut(&run, "c", 1));
    block_on(store.commit_checkpoint(&start(&a))).unwrap();
    // The second commit keeps c's record, which the first commit's cut b does not hold: it is
    // refused (MissingRecord) after the first was written in the chain's savepoint.
    let chain = [
        CommitRequest::Checkpoint(progress(2, &a, &b.delta_from(&a))),
        CommitRequest::Checkpoint(progress(3, &b, &c.delta_from(&c))),
    ];
    let refused = block_on(store.commit_chain(&chain));
    assert!(matches!(refused, Err(CommitError::MissingRecord { .. })), "{refused:?}");
    let head = store.head(&run).unwrap().unwrap();
    assert_eq!((head.sequence, head.cut.digest), (1, a.digest), "nothing of the refused chain was installed");
    assert_eq!(store.history(&run).unwrap().len(), 1);
    drop(store);
    let store = SqliteCommitter::open(db.path()).unwrap();
    assert_eq!(store.head(&run).unwrap().unwrap().sequence, 1);
}

#[test]
fn a_head_moved_by_another_connection_is_read_again_not_served_from_memory() {
    let db = TempDb::new();
    let first = SqliteCommitter::open(db.path()).unwrap();
    let second = SqliteCommitter::open(db.path()).unwrap();
    let run = root("cache-run");
    let (a, b, c, d) = (cut(&run, "a", 1), cut(&run, "b", 1), cut(&run, "c", 1), cut(&run, "d", 1));
    block_on(first.commit_checkpoint(&start(&a))).unwrap();
    block_on(first.commit_checkpoint(&progress(2, &a, &b.delta_from(&a)))).unwrap(); // first now holds b
    // The same writer's next commit arrives through another connection (a second process).
    block_on(second.commit_checkpoint(&progress(3, &b, &c))).unwrap();
    // A delta from c: resolved against the row's cut c, never first's b in memory.
    block_on(first.commit_checkpoint(&progress(4, &c, &d.delta_from(&c)))).unwrap();
    let head = first.head(&run).unwrap().unwrap();
    assert_eq!((head.sequence, head.cut.digest), (4, d.digest));
    assert_eq!(head.cut.bytes().unwrap(), d.bytes().unwrap());
    // A delta from the stale b is refused by the rules (b is no longer the head).
    let stale = block_on(first.commit_checkpoint(&progress(3, &b, &cut(&run, "x", 1).delta_from(&b))));
    assert!(stale.is_err(), "{stale:?}");
    assert!(first.damaged_trees().unwrap().is_empty());
}
