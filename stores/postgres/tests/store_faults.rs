//! The PostgreSQL store under the store fault suite (`keel::kernel::commit::conformance::faults`)
//! against the real server of `support` (CI starts it and sets `KEEL_REQUIRE_POSTGRES=1`, so a
//! missing server fails this test instead of skipping it). Every open is a store of its own
//! (its own connection pool), as separate worker processes would be.

mod support;

use keel::kernel::commit::conformance::faults::{
    check_faults, Exclusion, Fault, OpenFailure, StoreFixture, Support,
};
use keel::kernel::ids::ProcessId;
use keel_store_postgres::{PostgresCommitter, PostgresError, PostgresOptions};

struct PostgresFixture {
    url: String,
    schema: String,
    foreign: String,
}

async fn connect(url: &str, schema: &str) -> Result<PostgresCommitter, OpenFailure> {
    let options = PostgresOptions { schema: schema.to_owned(), ..PostgresOptions::default() };
    PostgresCommitter::connect_with(url, options).await.map_err(|e| match e {
        PostgresError::ForeignSchema { .. } => OpenFailure::Foreign(e.to_string()),
        e => OpenFailure::Other(e.to_string()),
    })
}

/// The tables of `schema`, by name.
async fn tables(url: &str, schema: &str) -> Vec<String> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
    let task = tokio::spawn(connection);
    let rows = client
        .query(
            "SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1",
            &[&schema],
        )
        .await
        .unwrap();
    drop(client);
    let _ = task.await;
    rows.iter().map(|r| r.get(0)).collect()
}

impl StoreFixture for PostgresFixture {
    type Store = PostgresCommitter;

    fn name(&self) -> &'static str {
        "postgres"
    }

    fn supports(&self, fault: Fault) -> Support {
        match fault {
            Fault::Reopen | Fault::SecondWriter | Fault::TakeoverRace | Fault::DamagedTail | Fault::ForeignFile => {
                Support::Applies
            }
            Fault::LockDeleted => Support::NotApplicable(
                "no lock to delete: any number of workers share the store, each commit decided under \
                 the tree's row lock inside the server (SecondWriter, TakeoverRace)",
            ),
            Fault::TornTail => Support::NotApplicable(
                "the server commits a transaction whole; there is no tail of keel's to tear",
            ),
            Fault::DiskFull | Fault::FailedSync => Support::NotApplicable(
                "the server's disk: a failed write or sync fails the transaction inside the server, \
                 which rolls it back and reports the error; a client cannot inject it",
            ),
        }
    }

    fn exclusion(&self) -> Exclusion {
        Exclusion::Fenced
    }

    async fn open(&self) -> Result<PostgresCommitter, OpenFailure> {
        connect(&self.url, &self.schema).await
    }

    async fn damage_last_commit(&self, root: &ProcessId) {
        let sql = format!("UPDATE \"{}\".heads SET cut = '\\x01'::bytea WHERE root_id = '{root}'", self.schema);
        support::sql(&self.url, &sql).await;
    }

    async fn open_foreign(&self) -> (Result<PostgresCommitter, OpenFailure>, bool) {
        let schema = &self.foreign;
        support::sql(
            &self.url,
            &format!("CREATE SCHEMA \"{schema}\"; CREATE TABLE \"{schema}\".customers (name text); INSERT INTO \"{schema}\".customers VALUES ('ada')"),
        )
        .await;
        let opened = connect(&self.url, schema).await;
        (opened, tables(&self.url, schema).await == ["customers"])
    }
}

#[test]
fn the_postgres_store_passes_the_store_fault_suite() {
    support::runtime().block_on(async {
        let Some(url) = support::server().await else {
            return;
        };
        let fixture = PostgresFixture {
            url: url.clone(),
            schema: support::fresh_schema("faults"),
            foreign: support::fresh_schema("foreign"),
        };
        let report = check_faults(&fixture).await;
        support::drop_schema(&url, &fixture.schema).await;
        support::drop_schema(&url, &fixture.foreign).await;
        let report = report.unwrap();
        assert_eq!(
            report.not_applicable_faults(),
            [Fault::LockDeleted, Fault::TornTail, Fault::DiskFull, Fault::FailedSync]
        );
    });
}
