//! The PostgreSQL committer against a real server: the committer conformance suite, start
//! races between many separately connected stores (as separate worker processes would be),
//! migrations, and the audit of the stored history. A stale writer fenced by a takeover is in
//! the store fault suite (store_faults.rs).

mod support;

use keel::kernel::commit::conformance::check_committer;
use keel::kernel::commit::{
    audit_history, Activation, Checkpoint, CheckpointKind, CommitError, Committer, TreeCut,
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
