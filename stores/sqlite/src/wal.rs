//! The bound on the write-ahead log: every writer connection checkpoints after its commits so
//! that the `-wal` file stays within [`WAL_BOUND_FRAMES`] frames plus one transaction.
//!
//! Why SQLite's own automatic checkpoint is not enough: it is `PASSIVE`. It copies only the
//! frames older than every open reader's snapshot, and the log restarts from its beginning only
//! when a writer finds it fully copied and no reader on it. With other connections reading the
//! file (another process loading trees, `keel-store`, a dashboard) whose read transactions
//! overlap, that moment never comes: the log grows with every commit until the disk is full
//! (measured: one writer and four polling readers, 69 MB after 15 s and growing). And without a
//! size limit the file never shrinks after a burst.
//!
//! So the writer's hook after each commit:
//! * at [`WAL_CHECKPOINT_FRAMES`] frames runs a `PASSIVE` checkpoint (SQLite's default; never
//!   waits);
//! * at [`WAL_BOUND_FRAMES`] runs a `TRUNCATE` checkpoint, which waits (up to the busy
//!   timeout) for the readers still on old frames to finish their current statement (new
//!   readers read the database file once it is fully copied), then empties the log. If the
//!   readers are not off the old frames within that time (a reader holding one transaction
//!   open that long; also seen, rarely, under heavy parallel I/O), SQLite cannot reuse the log
//!   yet; the writer tries again after another quarter of the bound. So each failed attempt
//!   lets the log grow by a quarter bound, and a stuck reader costs one wait per quarter
//!   bound, not one per commit.
//!
//! `journal_size_limit` ([`WAL_SIZE_LIMIT_BYTES`]) cuts the file back after each restart, so a
//! burst (one large cut) does not keep its size on disk. A checkpoint failure never fails the
//! commit that triggered it (that commit is already durable in the log); the next commit tries
//! again.

use rusqlite::hooks::Wal;
use rusqlite::wal::CheckpointMode;
use rusqlite::Connection;

/// Frames in the log after which a commit runs a `PASSIVE` checkpoint (SQLite's default).
pub const WAL_CHECKPOINT_FRAMES: i32 = 1000;

/// Frames in the log after which a commit empties it (`TRUNCATE` checkpoint). With SQLite's
/// 4096-byte pages (a frame is a page plus 24 bytes) this is about 16 MiB.
pub const WAL_BOUND_FRAMES: i32 = 4096;

/// The size the log file is cut back to after it restarted.
pub const WAL_SIZE_LIMIT_BYTES: i64 = 4 << 20;

/// Installs the checkpoint policy on a writer connection.
pub(crate) fn bound(conn: &mut Connection) -> rusqlite::Result<()> {
    conn.pragma_update(None, "journal_size_limit", WAL_SIZE_LIMIT_BYTES)?;
    let mut truncate_at = WAL_BOUND_FRAMES;
    conn.wal_hook(Some(move |wal: &mut Wal, frames: i32| {
        if frames < WAL_BOUND_FRAMES {
            truncate_at = WAL_BOUND_FRAMES; // the log restarted: the next crossing waits again
        }
        if frames >= truncate_at {
            match wal.checkpoint_v2(CheckpointMode::TRUNCATE) {
                Ok(_) => return Ok(()),
                // A reader kept its snapshot past the busy timeout.
                Err(_) => truncate_at = frames.saturating_add(WAL_BOUND_FRAMES / 4),
            }
        }
        if frames >= WAL_CHECKPOINT_FRAMES {
            // PASSIVE never waits; what it cannot copy now the next checkpoint copies.
            let _ = wal.checkpoint_v2(CheckpointMode::PASSIVE);
        }
        Ok(())
    }))
}
