//! The process the kill test (`tests/durable_kill.rs`) SIGKILLs: runs the durable world's
//! script on a durable store in the given directory and prints `ACK <sequence> <digest>`
//! after every acknowledged commit, i.e. once the inner commit returned Ok (so the record is
//! already fsync'd), before the kernel learns of it.
//!
//! Usage: `keel-crash-child <dir> step|free [file|file-compact|sqlite]`. The store is a
//! `FileCommitter` on `<dir>` (the default; `file-compact` compacts its log after every
//! acknowledged commit) or a `SqliteCommitter` on `<dir>/store.sqlite` (`sqlite`, built
//! with the default `sqlite` feature). In `step` mode the child then waits for one
//! line on stdin before going on, so a kill lands exactly between acknowledgement and use; in
//! `free` mode it runs on and the kill lands wherever it lands. Prints `DONE <status>` at the
//! end.

use keel::env::BoxFuture;
use keel::json::Digest;
use keel::kernel::commit::{
    Activation, Checkpoint, CommitError, Committer, EffectBoundary, FileCommitter, Head,
};
use keel::kernel::direct::DirectRunner;
use keel::kernel::ids::ProcessId;
use keel::kernel::owner::Owner;
use keel::kernel::testkit::script_input;
use keel_tests::durable_world::{self, World};
use std::future::Future;
use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::sync::Arc;

/// Announces every acknowledged commit of the inner committer.
struct Announcing {
    inner: Box<dyn Committer>,
    step: bool,
}

impl Announcing {
    fn announce<'a>(
        &'a self,
        commit: impl Future<Output = Result<(), CommitError>> + Send + 'a,
        sequence: u64,
        digest: Digest,
    ) -> BoxFuture<'a, Result<(), CommitError>> {
        Box::pin(async move {
            let result = commit.await;
            if result.is_ok() {
                let mut out = std::io::stdout().lock();
                // A closed stdout means the test is gone; the kill follows.
                let _ = writeln!(out, "ACK {sequence} {digest}");
                let _ = out.flush();
                drop(out);
                if self.step {
                    let mut line = String::new();
                    let _ = std::io::stdin().lock().read_line(&mut line);
                }
            }
            result
        })
    }
}

impl Committer for Announcing {
    fn commit_checkpoint(&self, c: &Checkpoint) -> BoxFuture<'_, Result<(), CommitError>> {
        self.announce(self.inner.commit_checkpoint(c), c.sequence, c.cut.digest)
    }
    fn commit_effect(&self, b: &EffectBoundary) -> BoxFuture<'_, Result<(), CommitError>> {
        self.announce(self.inner.commit_effect(b), b.sequence, b.cut.digest)
    }
    fn activate_tree(&self, a: &Activation) -> BoxFuture<'_, Result<(), CommitError>> {
        self.announce(self.inner.activate_tree(a), 0, a.cut.digest)
    }
    fn load_tree(&self, root: &ProcessId) -> BoxFuture<'_, Result<Option<Head>, CommitError>> {
        self.inner.load_tree(root)
    }
}

/// A file store compacted after every acknowledged commit.
struct Compacting(FileCommitter);

impl Compacting {
    fn then_compact<'a>(
        &'a self,
        commit: impl Future<Output = Result<(), CommitError>> + Send + 'a,
    ) -> BoxFuture<'a, Result<(), CommitError>> {
        Box::pin(async move {
            commit.await?;
            self.0.compact_now().map_err(|e| CommitError::Storage { message: e.to_string() })?;
            Ok(())
        })
    }
}

impl Committer for Compacting {
    fn commit_checkpoint(&self, c: &Checkpoint) -> BoxFuture<'_, Result<(), CommitError>> {
        self.then_compact(self.0.commit_checkpoint(c))
    }
    fn commit_effect(&self, b: &EffectBoundary) -> BoxFuture<'_, Result<(), CommitError>> {
        self.then_compact(self.0.commit_effect(b))
    }
    fn activate_tree(&self, a: &Activation) -> BoxFuture<'_, Result<(), CommitError>> {
        self.then_compact(self.0.activate_tree(a))
    }
    fn load_tree(&self, root: &ProcessId) -> BoxFuture<'_, Result<Option<Head>, CommitError>> {
        self.0.load_tree(root)
    }
}

fn run() -> Result<String, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (dir, mode, store) = match args.as_slice() {
        [dir, mode] => (dir, mode, "file"),
        [dir, mode, store] => (dir, mode, store.as_str()),
        _ => return Err("usage: keel-crash-child <dir> step|free [file|file-compact|sqlite]".into()),
    };
    let step = match mode.as_str() {
        "step" => true,
        "free" => false,
        other => return Err(format!("unknown mode `{other}`")),
    };
    let dir = std::path::Path::new(dir);
    let world = World::new(dir);
    let inner: Box<dyn Committer> = match store {
        "file" => Box::new(FileCommitter::open(dir).map_err(|e| e.to_string())?),
        "file-compact" => Box::new(Compacting(FileCommitter::open(dir).map_err(|e| e.to_string())?)),
        #[cfg(feature = "sqlite")]
        "sqlite" => Box::new(
            keel_store_sqlite::SqliteCommitter::open(dir.join(durable_world::SQLITE_FILE))
                .map_err(|e| e.to_string())?,
        ),
        other => return Err(format!("unknown store `{other}` (file, file-compact or sqlite)")),
    };
    let committer: Arc<dyn Committer> = Arc::new(Announcing { inner, step });
    let owner = Owner::start(
        world.resolver.clone(),
        world.root.clone(),
        script_input(&world.script()),
        durable_world::root_id(),
        durable_world::incarnation(100),
        durable_world::root_config(),
        durable_world::now(),
    )
    .map_err(|e| format!("start: {e:?}"))?;
    let mut runner = DirectRunner::new(owner, committer, durable_world::now());
    let result = durable_world::drive_to_completion(&mut runner)?;
    Ok(result.status().as_str().to_owned())
}

fn main() -> ExitCode {
    match run() {
        Ok(status) => {
            println!("DONE {status}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("keel-crash-child: {e}");
            ExitCode::FAILURE
        }
    }
}
