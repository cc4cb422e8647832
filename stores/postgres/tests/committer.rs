//! The PostgreSQL committer against a real server: the committer conformance suite, start
//! races between many separately connected stores (as separate worker processes would be),
//! migrations, and the audit of the stored history. A stale writer fenced by a takeover is in
//! the store fault suite (store_faults.rs).

mod support;

use keel::kernel::commit::conformance::check_committer;
use keel::kernel::commit::{
    audit_history, Activation, Checkpoint, CheckpointKind, CommitError, CommitRequest, Committer, TreeCut,
};
use keel::kernel::ids::{IncarnationId, ProcessId};
use keel_store_postgres::{PostgresCommitter, SCHEMA_VERSION};

use std::sync::Mutex;

fn inc(n: u8) -> IncarnationId {
    IncarnationId::from_hex(&format!("{n:032x}")).unwrap()
}

fn cut(root: &ProcessId, incarnation: u8, state: &str) -> TreeCut {
    let state = format!("{root} {incarnation} {state}");
    keel::kernel::commit::conformance::sample_cut(root, &inc(incarnation), &[(root.as_str(), &state)])
}

fn start(cut: &TreeCut) -> Checkpoint {
    Checkpoint {
        sequence: 1,
        kind: CheckpointKind::Start,
        previous_digest: None,
        cut: cut.clone(),
    }
}

#[test]
fn postgres_committer_passes_conformance() {
    support::runtime().block_on(async {
        let Some(url) = support::server().await else {
            return;
        };
        // The suite asks for a fresh store per scenario, synchronously: open them up front.
        let schemas: Vec<String> = (0..16).map(|_| support::fresh_schema("conf")).collect();
        let mut stores = Vec::new();
        for schema in &schemas {
            stores.push(support::open(&url, schema).await);
        }
        let stores = Mutex::new(stores);
        let make = || {
            stores
                .lock()
                .unwrap()
                .pop()
                .expect("more conformance scenarios than stores")
        };
        let result = check_committer(make).await;
        for schema in &schemas {
            support::drop_schema(&url, schema).await;
        }
        result.unwrap();
    });
}

#[test]
fn concurrent_starts_and_activations_from_many_connections_have_one_winner() {
    support::runtime().block_on(async {
        let Some(url) = support::server().await else {
            return;
        };
        let schema = support::fresh_schema("race");
        let mut stores = Vec::new();
        for _ in 0..4 {
            stores.push(support::open(&url, &schema).await);
        }
        let root = ProcessId::parse("process:raced").unwrap();
        // Four writers start the same root with different incarnations at once.
        let starts: Vec<Checkpoint> = (1..=4).map(|i| start(&cut(&root, i, "start"))).collect();
        let results = futures::future::join_all(
            stores
                .iter()
                .zip(&starts)
                .map(|(s, c)| s.commit_checkpoint(c)),
        )
        .await;
        let winners: Vec<usize> = results
            .iter()
            .enumerate()
            .filter(|(_, r)| r.is_ok())
            .map(|(i, _)| i)
            .collect();
        assert_eq!(winners.len(), 1, "{results:?}");
        for r in results.iter().filter(|r| r.is_err()) {
            assert!(
                matches!(r, Err(CommitError::TreeIncarnationConflict { .. })),
                "{r:?}"
            );
        }
        let winner = &starts[winners[0]].cut;

        // Then four activations from the winner's head: one installs, the rest are fenced.
        let activations: Vec<Activation> = (5..=8)
            .map(|i| Activation {
                previous_incarnation: winner.incarnation.clone(),
                previous_digest: winner.digest,
                new_incarnation: inc(i),
                cut: cut(&root, i, "restored"),
            })
            .collect();
        let results = futures::future::join_all(
            stores
                .iter()
                .zip(&activations)
                .map(|(s, a)| s.activate_tree(a)),
        )
        .await;
        assert_eq!(
            results.iter().filter(|r| r.is_ok()).count(),
            1,
            "{results:?}"
        );
        let history = stores[0].history(&root).await.unwrap();
        assert_eq!(history.len(), 2);
        audit_history(&history).unwrap();
        support::drop_schema(&url, &schema).await;
    });
}

#[test]
fn migrations_apply_once_even_when_workers_open_the_store_together() {
    support::runtime().block_on(async {
        let Some(url) = support::server().await else {
            return;
        };
        let schema = support::fresh_schema("migrate");
        let opens = futures::future::join_all((0..4).map(|_| support::open(&url, &schema))).await;
        assert_eq!(opens.len(), 4);
        let again: PostgresCommitter = support::open(&url, &schema).await;
        assert_eq!(again.schema(), schema);
        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .unwrap();
        let task = tokio::spawn(connection);
        let rows = client
            .query(
                &format!("SELECT version FROM \"{schema}\".schema_version ORDER BY version"),
                &[],
            )
            .await
            .unwrap();
        let versions: Vec<i32> = rows.iter().map(|r| r.get(0)).collect();
        assert_eq!(versions, (1..=SCHEMA_VERSION).collect::<Vec<_>>());

        // A store written by a newer build is refused, not misread.
        client
            .execute(
                &format!("INSERT INTO \"{schema}\".schema_version (version) VALUES ($1)"),
                &[&(SCHEMA_VERSION + 1)],
            )
            .await
            .unwrap();
        let options = keel_store_postgres::PostgresOptions {
            schema: schema.clone(),
            ..Default::default()
        };
        let refused = PostgresCommitter::connect_with(&url, options).await;
        assert!(
            matches!(
                refused,
                Err(keel_store_postgres::PostgresError::SchemaTooNew { .. })
            ),
            "{refused:?}"
        );
        drop(client);
        let _ = task.await;
        support::drop_schema(&url, &schema).await;
    });
}

#[test]
fn bad_options_get_typed_errors() {
    support::runtime().block_on(async {
        use keel_store_postgres::{PostgresError, PostgresOptions};
        let options = PostgresOptions {
            schema: "Robert'); DROP TABLE".into(),
            ..Default::default()
        };
        let r = PostgresCommitter::connect_with("host=127.0.0.1", options).await;
        assert!(
            matches!(r, Err(PostgresError::InvalidSchema { .. })),
            "{r:?}"
        );
        let r = PostgresCommitter::connect("host=127.0.0.1 port=notaport").await;
        assert!(
            matches!(r, Err(PostgresError::InvalidConfig { .. })),
            "{r:?}"
        );
        // Nothing listens on port 1.
        let r = PostgresCommitter::connect("host=127.0.0.1 port=1 connect_timeout=2").await;
        assert!(matches!(r, Err(PostgresError::Connect { .. })), "{r:?}");
    });
}

#[test]
fn concurrent_commits_of_different_trees_share_a_transaction_and_are_acknowledged_after_it() {
    support::runtime().block_on(async {
        let Some(url) = support::server().await else {
            return;
        };
        let schema = support::fresh_schema("group");
        let store = support::open(&url, &schema).await;
        // Another store (its own connections): it sees only what was committed.
        let observer = support::open(&url, &schema).await;
        let roots: Vec<ProcessId> = (0..20)
            .map(|i| ProcessId::parse(&format!("process:group-{i}")).unwrap())
            .collect();
        let taken = ProcessId::parse("process:group-taken").unwrap();
        store.commit_checkpoint(&start(&cut(&taken, 1, "first"))).await.unwrap();
        let (batches_before, _) = store.group_stats();
        let commits = roots.iter().map(|root| {
            let (store, observer) = (&store, &observer);
            async move {
                store.commit_checkpoint(&start(&cut(root, 1, "start"))).await?;
                // Acknowledged: committed, so visible to every other connection.
                let head = observer.load_tree(root).await?;
                assert!(head.is_some(), "{root} acknowledged before its transaction committed");
                Ok::<(), CommitError>(())
            }
        });
        // A refused commit in the middle of the batch leaves the others.
        let rival = store.commit_checkpoint(&start(&cut(&taken, 2, "rival")));
        let (outcomes, rival) = futures::future::join(futures::future::join_all(commits), rival).await;
        for outcome in outcomes {
            outcome.unwrap();
        }
        assert!(matches!(rival, Err(CommitError::TreeIncarnationConflict { .. })), "{rival:?}");
        let (batches, requests) = store.group_stats();
        let batches = batches - batches_before;
        assert!(requests >= 22, "{requests}");
        assert!(batches <= 3, "21 concurrent commits took {batches} transactions");
        support::drop_schema(&url, &schema).await;
    });
}

fn progress(sequence: u64, previous: &TreeCut, cut: &TreeCut) -> Checkpoint {
    Checkpoint {
        sequence,
        kind: CheckpointKind::Progress,
        previous_digest: Some(previous.digest),
        cut: cut.clone(),
    }
}

/// Progress checkpoints 2..=4 on top of `a`, as deltas (as the kernel sends them), and the
/// last cut.
fn chain_on(a: &TreeCut) -> (Vec<CommitRequest>, TreeCut) {
    let root = a.root_id.clone();
    let mut previous = a.clone();
    let mut chain = Vec::new();
    for (sequence, state) in [(2, "b"), (3, "c"), (4, "d")] {
        let whole = cut(&root, 1, state);
        chain.push(CommitRequest::Checkpoint(progress(sequence, &previous, &whole.delta_from(&previous))));
        previous = whole;
    }
    (chain, previous)
}

#[test]
fn a_chain_is_one_transaction_installed_whole_or_not_at_all() {
    support::runtime().block_on(async {
        let Some(url) = support::server().await else {
            return;
        };
        let schema = support::fresh_schema("chain");
        let store = support::open(&url, &schema).await;
        let run = ProcessId::parse("process:chain-run").unwrap();
        let a = cut(&run, 1, "a");
        store.commit_checkpoint(&start(&a)).await.unwrap();
        // The chain's second commit row fails to insert, after the first head write and
        // commit row of the chain went to the server.
        support::sql(
            &url,
            &format!(
                "CREATE FUNCTION \"{schema}\".fail_sequence_3() RETURNS trigger LANGUAGE plpgsql AS $$ \
                 BEGIN IF NEW.sequence = 3 THEN RAISE EXCEPTION 'injected write failure'; END IF; RETURN NEW; END $$; \
                 CREATE TRIGGER fail_sequence_3 BEFORE INSERT ON \"{schema}\".commits \
                 FOR EACH ROW EXECUTE FUNCTION \"{schema}\".fail_sequence_3();"
            ),
        )
        .await;
        let (chain, last) = chain_on(&a);
        let failed = store.commit_chain(&chain).await;
        assert!(
            matches!(&failed, Err(CommitError::Storage { message }) if message.contains("injected write failure")),
            "{failed:?}"
        );
        let head = store.load_tree(&run).await.unwrap().unwrap();
        assert_eq!((head.sequence, head.cut.digest), (1, a.digest), "no prefix of the chain was installed");
        assert_eq!(store.history(&run).await.unwrap().len(), 1);
        support::sql(&url, &format!("DROP TRIGGER fail_sequence_3 ON \"{schema}\".commits")).await;

        // Refused by the rules at its second commit (a kept record the first cut lacks):
        // decided before anything is written, nothing installed.
        let (b, c) = (cut(&run, 1, "b"), cut(&run, 1, "c"));
        let refused = [
            CommitRequest::Checkpoint(progress(2, &a, &b.delta_from(&a))),
            CommitRequest::Checkpoint(progress(3, &b, &c.delta_from(&c))),
        ];
        let outcome = store.commit_chain(&refused).await;
        assert!(matches!(outcome, Err(CommitError::MissingRecord { .. })), "{outcome:?}");
        assert_eq!(store.load_tree(&run).await.unwrap().unwrap().sequence, 1);

        // The whole chain, one submission: every commit in order, one transaction.
        let (batches_before, _) = store.group_stats();
        store.commit_chain(&chain).await.unwrap();
        let (batches, requests) = store.group_stats();
        assert_eq!(batches - batches_before, 1, "one transaction for the chain");
        let head = store.load_tree(&run).await.unwrap().unwrap();
        assert_eq!((head.sequence, head.cut.digest), (4, last.digest));
        assert_eq!(head.cut.bytes().unwrap(), last.bytes().unwrap());
        let history = store.history(&run).await.unwrap();
        assert_eq!(history.iter().map(|c| c.sequence).collect::<Vec<_>>(), [1, 2, 3, 4]);
        audit_history(&history).unwrap();
        // An identical retry of the whole chain is acknowledged with nothing written.
        store.commit_chain(&chain).await.unwrap();
        assert_eq!(store.history(&run).await.unwrap().len(), 4);
        let _ = requests;
        support::drop_schema(&url, &schema).await;
    });
}

#[test]
fn a_batch_of_chains_starts_and_refusals_answers_each_by_its_own_outcome() {
    support::runtime().block_on(async {
        let Some(url) = support::server().await else {
            return;
        };
        let schema = support::fresh_schema("mixed");
        let store = support::open(&url, &schema).await;
        let observer = support::open(&url, &schema).await;
        let chained: Vec<ProcessId> =
            (0..12).map(|i| ProcessId::parse(&format!("process:mixed-{i}")).unwrap()).collect();
        let mut chains = Vec::new();
        for root in &chained {
            let a = cut(root, 1, "a");
            store.commit_checkpoint(&start(&a)).await.unwrap();
            chains.push(chain_on(&a));
        }
        let fresh: Vec<ProcessId> =
            (0..12).map(|i| ProcessId::parse(&format!("process:mixed-new-{i}")).unwrap()).collect();
        let stale = ProcessId::parse("process:mixed-stale").unwrap();
        let stale_a = cut(&stale, 1, "a");
        store.commit_checkpoint(&start(&stale_a)).await.unwrap();
        let (batches_before, _) = store.group_stats();
        let chain_commits = chains.iter().map(|(chain, last)| {
            let (store, observer) = (&store, &observer);
            async move {
                store.commit_chain(chain).await?;
                let head = observer.load_tree(&last.root_id).await?.expect("a head");
                assert_eq!((head.sequence, head.cut.digest), (4, last.digest), "acknowledged before committed");
                Ok::<(), CommitError>(())
            }
        });
        let starts = fresh.iter().map(|root| store.commit_checkpoint(&start(&cut(root, 1, "a"))));
        // A commit from a head the tree does not have (sequence 3 after 1): refused alone.
        let refused = store.commit_checkpoint(&progress(3, &stale_a, &cut(&stale, 1, "x")));
        let (chained_outcomes, start_outcomes, refused) = futures::future::join3(
            futures::future::join_all(chain_commits),
            futures::future::join_all(starts),
            refused,
        )
        .await;
        for outcome in chained_outcomes.into_iter().chain(start_outcomes) {
            outcome.unwrap();
        }
        assert!(refused.is_err(), "{refused:?}");
        let (batches, _) = store.group_stats();
        assert!(batches - batches_before <= 3, "25 concurrent submissions took {} transactions", batches - batches_before);
        for root in chained.iter().chain(&fresh).chain([&stale]) {
            audit_history(&store.history(root).await.unwrap()).unwrap();
        }
        assert_eq!(store.load_tree(&stale).await.unwrap().unwrap().sequence, 1);
        for root in &chained {
            assert_eq!(store.history(root).await.unwrap().len(), 4);
        }
        support::drop_schema(&url, &schema).await;
    });
}
