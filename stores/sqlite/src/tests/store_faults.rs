//! The SQLite store under the store fault suite (`keel::kernel::commit::conformance::faults`):
//! any number of connections write one file, each commit decided inside a write transaction
//! against the tree's head.

use super::*;
use keel::kernel::commit::conformance::faults::{
    check_faults, Exclusion, Fault, OpenFailure, StoreFixture, Support,
};

struct SqliteFixture {
    db: TempDb,
    foreign: TempDb,
}

fn classify(e: OpenError) -> OpenFailure {
    match e {
        OpenError::NotADatabase { .. } | OpenError::NotAKeelStore { .. } | OpenError::ForeignApplication { .. } => {
            OpenFailure::Foreign(e.to_string())
        }
        OpenError::Busy { .. } => OpenFailure::InUse(e.to_string()),
        e => OpenFailure::Other(e.to_string()),
    }
}

impl StoreFixture for SqliteFixture {
    type Store = SqliteCommitter;

    fn name(&self) -> &'static str {
        "sqlite"
    }

    fn supports(&self, fault: Fault) -> Support {
        match fault {
            Fault::LockDeleted => Support::NotApplicable(
                "no lock file of keel's: SQLite locks the database file itself, and a second writer \
                 is fenced per tree inside its write transaction (SecondWriter)",
            ),
            Fault::TornTail => Support::NotApplicable(
                "SQLite commits a transaction whole: its write-ahead log's frames are checksummed and \
                 an unfinished transaction is ignored by SQLite's own recovery",
            ),
            Fault::DiskFull | Fault::FailedSync => Support::NotApplicable(
                "SQLite does the writes and syncs itself and rolls back a transaction whose write or \
                 sync fails; keel has no seam below it (a failed COMMIT fails its whole batch: tests/group.rs)",
            ),
            _ => Support::Applies,
        }
    }

    fn exclusion(&self) -> Exclusion {
        Exclusion::Fenced
    }

    async fn open(&self) -> Result<SqliteCommitter, OpenFailure> {
        SqliteCommitter::open(self.db.path()).map_err(classify)
    }

    async fn damage_last_commit(&self, root: &ProcessId) {
        let sql = format!("UPDATE keel_heads SET cut = X'01' WHERE root_id = '{root}'");
        corrupt(&self.db, &sql);
    }

    async fn open_foreign(&self) -> (Result<SqliteCommitter, OpenFailure>, bool) {
        self.foreign.raw().execute_batch("CREATE TABLE customers (name TEXT); INSERT INTO customers VALUES ('ada')").unwrap();
        let before = on_disk(&self.foreign.path());
        let opened = SqliteCommitter::open(self.foreign.path()).map_err(classify);
        (opened, on_disk(&self.foreign.path()) == before)
    }
}

#[test]
fn the_sqlite_store_passes_the_store_fault_suite() {
    let fixture = SqliteFixture { db: TempDb::new(), foreign: TempDb::new() };
    let report = block_on(check_faults(&fixture)).unwrap();
    assert_eq!(report.not_applicable_faults(), [Fault::LockDeleted, Fault::TornTail, Fault::DiskFull, Fault::FailedSync]);
}
