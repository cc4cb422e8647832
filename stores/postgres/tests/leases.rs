//! The lease protocol against a real server: claims are exclusive while live, lapse by the
//! database clock, a lapsed owner can neither renew nor close, and a closed run is never
//! claimed again.

mod support;

use keel::agent::RunId;
use keel_store_postgres::{LeaseState, Leases};
use std::time::Duration;

#[test]
fn leases_are_exclusive_until_they_lapse_by_the_database_clock() {
    support::runtime().block_on(async {
        let Some(url) = support::server().await else {
            return;
        };
        let schema = support::fresh_schema("leases");
        let leases = Leases::new(support::open(&url, &schema).await);
        let runs: Vec<RunId> = (0..3)
            .map(|i| RunId::from_key(&format!("{schema}/{i}")))
            .collect();
        for run in &runs {
            assert!(leases.submit(run, "hello").await.unwrap());
        }
        assert!(
            !leases.submit(&runs[0], "again").await.unwrap(),
            "a submission is idempotent"
        );

        let ttl = Duration::from_millis(800);
        let a = leases.claim("a", ttl, 2, &[]).await.unwrap();
        assert_eq!(a.len(), 2);
        assert!(a.iter().all(|c| c.claims == 1 && c.message == "hello"));
        let b = leases.claim("b", ttl, 10, &[]).await.unwrap();
        assert_eq!(b.len(), 1, "only the unclaimed run is free");
        assert!(leases.claim("c", ttl, 10, &[]).await.unwrap().is_empty());

        // "a" renews one of its runs; its other lease lapses.
        let (kept, lapsing) = (a[0].run.clone(), a[1].run.clone());
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(
            leases.renew("a", ttl, &[kept.clone()]).await.unwrap(),
            vec![kept.clone()]
        );
        tokio::time::sleep(Duration::from_millis(600)).await;
        // Past the first claim's 800 ms: only the un-renewed lease lapsed (b's too).
        let c = leases.claim("c", ttl, 10, &[]).await.unwrap();
        let mut taken: Vec<RunId> = c.iter().map(|c| c.run.clone()).collect();
        taken.sort();
        let mut expected = vec![lapsing.clone(), b[0].run.clone()];
        expected.sort();
        assert_eq!(taken, expected);
        assert!(c.iter().all(|c| c.claims == 2));

        // The lapsed owner cannot renew, close or release what it lost.
        assert!(leases
            .renew("a", ttl, &[lapsing.clone()])
            .await
            .unwrap()
            .is_empty());
        assert!(!leases
            .close("a", &lapsing, LeaseState::Finished, "x")
            .await
            .unwrap());
        assert!(!leases.release("a", &lapsing).await.unwrap());

        // A worker never claims runs it excludes (the ones it still drives).
        assert!(leases.release("c", &lapsing).await.unwrap());
        assert!(leases
            .claim("c", ttl, 10, &[lapsing.clone()])
            .await
            .unwrap()
            .is_empty());

        // A closed run keeps its last owner and is never claimed again.
        assert!(leases
            .close("a", &kept, LeaseState::Finished, "completed: done")
            .await
            .unwrap());
        let rows = leases.list().await.unwrap();
        let row = rows.iter().find(|r| r.run == kept).unwrap();
        assert_eq!(
            (row.state, row.owner.as_deref(), row.live),
            (LeaseState::Finished, Some("a"), false)
        );
        assert_eq!(row.detail.as_deref(), Some("completed: done"));
        tokio::time::sleep(Duration::from_millis(900)).await;
        let later = leases.claim("d", ttl, 10, &[]).await.unwrap();
        assert!(later.iter().all(|c| c.run != kept));
        support::drop_schema(&url, &schema).await;
    });
}
