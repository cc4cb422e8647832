//! The file store under the store fault suite (`conformance::faults`): one writer per
//! directory (the lock is on the log), torn and damaged tails told apart, a full disk and a
//! failed sync through the append path's fault seam.

use super::*;
use crate::kernel::commit::conformance::faults::{
    check_faults, Exclusion, Fault, OpenFailure, StoreFixture, Support,
};

struct FileFixture {
    dir: TempDir,
    foreign: TempDir,
}

fn classify(e: OpenError) -> OpenFailure {
    match e {
        OpenError::Locked { .. } => OpenFailure::InUse(e.to_string()),
        OpenError::NotALog { .. } => OpenFailure::Foreign(e.to_string()),
        e => OpenFailure::Other(e.to_string()),
    }
}

/// Where the log's last frame starts (frames begin with their magic).
fn last_frame_start(bytes: &[u8]) -> usize {
    bytes.windows(FRAME_MAGIC.len()).rposition(|w| w == FRAME_MAGIC).expect("the log holds a frame")
}

impl StoreFixture for FileFixture {
    type Store = FileCommitter;

    fn name(&self) -> &'static str {
        "file"
    }

    fn supports(&self, fault: Fault) -> Support {
        match fault {
            Fault::TakeoverRace => Support::NotApplicable(
                "one writer per directory: a second writer is refused at open (SecondWriter, LockDeleted)",
            ),
            _ => Support::Applies,
        }
    }

    fn exclusion(&self) -> Exclusion {
        Exclusion::Exclusive
    }

    async fn open(&self) -> Result<FileCommitter, OpenFailure> {
        FileCommitter::open(&self.dir.0).map_err(classify)
    }

    async fn tamper_with_lock(&self, _holder: &FileCommitter) {
        // Earlier releases' lock file, deleted, recreated with a stranger's pid and renamed
        // away: none of it is what excludes a second writer.
        let lock_file = self.dir.0.join(lock::LEGACY_LOCK_FILE_NAME);
        let _ = fs::remove_file(&lock_file);
        fs::write(&lock_file, b"12345\n").unwrap();
        fs::rename(&lock_file, self.dir.0.join("store.lock.aside")).unwrap();
    }

    async fn tear_tail(&self) {
        // A crash mid-append: the first half of a frame after the last complete one.
        let bytes = fs::read(self.dir.log()).unwrap();
        let frame = &bytes[last_frame_start(&bytes)..];
        let mut log = OpenOptions::new().append(true).open(self.dir.log()).unwrap();
        log.write_all(&frame[..frame.len() / 2]).unwrap();
    }

    async fn damage_last_commit(&self, _root: &ProcessId) {
        // A closed store's log ends with its last frame: flip that frame's last byte.
        flip(&self.dir.log(), file_len(&self.dir.log()) - 1);
    }

    async fn set_disk_full(&self, store: &FileCommitter, full: bool) {
        store.lock().faults.disk_full = full;
    }

    async fn fail_next_sync(&self, store: &FileCommitter) {
        store.lock().faults.failing_syncs = 1;
    }

    async fn open_foreign(&self) -> (Result<FileCommitter, OpenFailure>, bool) {
        fs::create_dir_all(&self.foreign.0).unwrap();
        let content = b"2026-12-07 04:00 another program's log\n".repeat(8);
        fs::write(self.foreign.log(), &content).unwrap();
        let opened = FileCommitter::open(&self.foreign.0).map_err(classify);
        let entries = fs::read_dir(&self.foreign.0).unwrap().count();
        let unchanged = entries == 1 && fs::read(self.foreign.log()).unwrap() == content;
        (opened, unchanged)
    }
}

#[test]
fn the_file_store_passes_the_store_fault_suite() {
    let fixture = FileFixture { dir: TempDir::new(), foreign: TempDir::new() };
    let report = block_on(check_faults(&fixture)).unwrap();
    assert_eq!(report.not_applicable_faults(), [Fault::TakeoverRace]);
    assert_eq!(report.ran.len(), Fault::ALL.len() - 1);
}
