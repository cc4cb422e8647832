//! The Engine: the thin async driver around [`Owner`]s.
//!
//! Each Start or Restore builds an owner and spawns one owner task on the environment's
//! executor; the task performs the owner's actions (commit, dispatch, publish, reply) and
//! feeds every completion back through one channel. The driver is runtime-agnostic: it
//! uses only `keel::env` (clock, executor, rng) and `futures` channels, so the same code runs
//! under tokio, under madsim, and under a test's hand-rolled executor.
//!
//! ```ignore
//! let engine = Engine::new(EngineConfig { env, committer, resolver, root, listeners: vec![] });
//! let result = engine.run(deployment, input).await?;
//! ```

mod driver;
mod handle;
mod registry;
#[cfg(test)]
mod tests;

pub use handle::ProcessHandle;

use crate::env::{random_hex, Env};
use crate::json::Payload;
use crate::kernel::binding::{Deployment, DeploymentResolver};
use crate::kernel::commit::{CommitError, Committer};
use crate::kernel::event::{EventFanout, EventListener, ObservationFailures};
use crate::kernel::ids::{IdError, IncarnationId, ProcessId};
use crate::kernel::owner::{
    Command, CommandError, Owner, Reply, RestoreError, RootConfig, RuntimeError, StartError,
};
use crate::kernel::result::ProcessResult;
use crate::kernel::snapshot::{SnapshotError, TreeSnapshot};
use driver::Driver;
use futures::channel::mpsc;
use registry::{Index, Tree};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// What an Engine is built from. Configuration applies to new roots only.
pub struct EngineConfig {
    pub env: Env,
    pub committer: Arc<dyn Committer>,
    pub resolver: Arc<dyn DeploymentResolver>,
    /// Budget, capabilities and limits of every new root.
    pub root: RootConfig,
    pub listeners: Vec<Arc<dyn EventListener>>,
}

/// Why an Engine call failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    /// Start was refused before anything was committed or published.
    #[error("start refused: {0}")]
    Start(#[from] StartError),
    /// Restore was refused; the Engine is unchanged.
    #[error("restore refused: {0}")]
    Restore(#[from] RestoreError),
    /// The owner refused a command (it changed nothing).
    #[error("command refused: {0}")]
    Command(#[from] CommandError),
    /// The tree's writer stopped (a start or restore that never published gets this when no
    /// commit error explains it).
    #[error("{0}")]
    Stopped(Box<RuntimeError>),
    /// The start checkpoint, the activation, or a head load failed; nothing was published.
    #[error("commit failed: {0}")]
    Commit(CommitError),
    /// No published Process (or root) with this id in this Engine.
    #[error("process {0} is not known to this engine")]
    NotFound(ProcessId),
    /// The root is already owned by a live activation in this Engine.
    #[error("tree {0} is already active in this engine")]
    TreeActive(ProcessId),
    /// The committer's head does not decode or does not match its own digest or root.
    #[error("stored head is unusable: {0}")]
    CorruptHead(String),
    /// A stored head does not decode as a tree snapshot.
    #[error("stored head does not decode: {0}")]
    Snapshot(#[from] SnapshotError),
    /// The environment's randomness produced an unusable id (an Rng bug).
    #[error("minted id rejected: {0}")]
    Identity(#[from] IdError),
    /// The owner answered with a reply of another command (a kernel bug).
    #[error("unexpected reply to a {0} command")]
    UnexpectedReply(&'static str),
}

impl EngineError {
    fn stopped(error: RuntimeError) -> EngineError {
        EngineError::Stopped(Box::new(error))
    }
}

/// State shared by the Engine, its handles and its owner tasks.
pub(crate) struct Shared {
    env: Env,
    committer: Arc<dyn Committer>,
    resolver: Arc<dyn DeploymentResolver>,
    root: RootConfig,
    observers: EventFanout,
    index: Mutex<Index>,
    /// Whether new activations retire consumed finished children (on by default).
    compaction: std::sync::atomic::AtomicBool,
}

impl Shared {
    // Index mutations are single insertions/removals; a poisoned lock leaves it consistent.
    fn lock_index(&self) -> MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A durable process-tree engine. Cheap to clone (all clones share trees and listeners).
#[derive(Clone)]
pub struct Engine {
    shared: Arc<Shared>,
}

impl Engine {
    pub fn new(config: EngineConfig) -> Engine {
        Engine {
            shared: Arc::new(Shared {
                env: config.env,
                committer: config.committer,
                resolver: config.resolver,
                root: config.root,
                observers: EventFanout::new(config.listeners),
                index: Mutex::new(Index::default()),
                compaction: std::sync::atomic::AtomicBool::new(true),
            }),
        }
    }

    /// Switches compaction for activations started after this call (on by default). Off
    /// keeps every finished child in the cut; only simulations comparing a run with its
    /// uncompacted twin turn it off.
    pub fn set_compaction(&self, on: bool) {
        self.shared.compaction.store(on, std::sync::atomic::Ordering::Relaxed);
    }

    fn compaction(&self) -> bool {
        self.shared.compaction.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Starts a new root tree. Returns once the `start` checkpoint is acknowledged and the
    /// root is published; a start whose commit fails publishes nothing and returns the error.
    /// Equal inputs are not deduplicated: every call is a new root.
    pub async fn start(&self, deployment: Deployment, input: Payload) -> Result<ProcessHandle, EngineError> {
        let root = ProcessId::root_from_hex(&random_hex(self.shared.env.rng.as_ref(), 16))?;
        self.start_root(root, deployment, input).await
    }

    /// Starts a new root tree under a root id the caller chose (a work queue that names its
    /// runs before they exist, so that a second start of the same run cannot make a second
    /// tree). The store refuses a start over an existing head with
    /// `TreeIncarnationConflict`: load or restore the tree instead.
    pub async fn start_root(
        &self,
        root: ProcessId,
        deployment: Deployment,
        input: Payload,
    ) -> Result<ProcessHandle, EngineError> {
        let incarnation = self.mint_incarnation()?;
        let now = self.shared.env.clock.now();
        let mut owner = Owner::start(
            self.shared.resolver.clone(),
            deployment,
            input,
            root.clone(),
            incarnation.clone(),
            self.shared.root.clone(),
            now,
        )?;
        owner.set_compaction(self.compaction());
        self.activate(owner, root, incarnation).await
    }

    /// Restores a captured cut under a new incarnation. Returns once the activation commit is
    /// acknowledged (which fences the previous writer) and the tree is published. Restored
    /// terminal Processes publish their Results immediately.
    pub async fn restore(
        &self,
        root_deployment: Deployment,
        snapshot: TreeSnapshot,
    ) -> Result<ProcessHandle, EngineError> {
        let root = snapshot.root_id.clone();
        if self
            .shared
            .lock_index()
            .roots
            .get(&root)
            .is_some_and(|t| !t.is_exited())
        {
            return Err(EngineError::TreeActive(root));
        }
        let incarnation = self.mint_incarnation()?;
        let now = self.shared.env.clock.now();
        let mut owner = Owner::restore(
            self.shared.resolver.clone(),
            root_deployment,
            &snapshot,
            incarnation.clone(),
            now,
        )?;
        owner.set_compaction(self.compaction());
        self.activate(owner, root, incarnation).await
    }

    /// Loads the committer's head for `root` and restores it.
    pub async fn load_and_restore(
        &self,
        root_deployment: Deployment,
        root: &ProcessId,
    ) -> Result<ProcessHandle, EngineError> {
        self.load_and_restore_reusing(root_deployment, root, None).await
    }

    /// [`Engine::load_and_restore`] for a host that still holds a head of the same tree (the
    /// last one a stopped writer had acknowledged, `Engine::inspect_head`): the stored records
    /// byte-identical to `known`'s are taken from it instead of being parsed again, so a
    /// restore after a crash parses only what the store holds beyond that head. Only a cache:
    /// every record is still the strict decoding of the stored bytes (`known`'s records encode
    /// to exactly those bytes, and canonical encoding is one-to-one), and the head is checked
    /// against the store's digest, root and writer as before.
    pub async fn load_and_restore_reusing(
        &self,
        root_deployment: Deployment,
        root: &ProcessId,
        known: Option<&TreeSnapshot>,
    ) -> Result<ProcessHandle, EngineError> {
        let head = self
            .shared
            .committer
            .load_tree(root)
            .await
            .map_err(EngineError::Commit)?
            .ok_or_else(|| EngineError::NotFound(root.clone()))?;
        let known = known.filter(|k| &k.root_id == root);
        let snapshot = match known {
            None => TreeSnapshot::from_cut(&head.cut)?,
            Some(k) => TreeSnapshot::decode_reusing(&head.cut, Some(k))?,
        };
        // Pair check: what we read must be exactly what the store says it holds.
        if snapshot.digest() != head.cut.digest {
            return Err(EngineError::CorruptHead(
                "snapshot digest differs from the head digest".into(),
            ));
        }
        if &snapshot.root_id != root || snapshot.incarnation != head.cut.incarnation {
            return Err(EngineError::CorruptHead(
                "snapshot root or incarnation differs from the head".into(),
            ));
        }
        self.restore(root_deployment, snapshot).await
    }

    /// Start + Join + Await: returns once the whole tree settled.
    pub async fn run(&self, deployment: Deployment, input: Payload) -> Result<ProcessResult, EngineError> {
        let handle = self.start(deployment, input).await?;
        handle.join().await.map_err(EngineError::stopped)?;
        handle.await_result().await.map_err(EngineError::stopped)
    }

    /// The handle of a published Process.
    pub fn lookup(&self, id: &ProcessId) -> Option<ProcessHandle> {
        let tree = self.shared.lock_index().processes.get(id)?.clone();
        let info = tree.lock().members.get(id)?.info.clone();
        Some(ProcessHandle::new(info, tree))
    }

    /// Commits the current cut if it differs from the head and returns the acknowledged head.
    /// On a stopped tree: the stop error.
    pub async fn capture_tree(&self, root: &ProcessId) -> Result<Arc<TreeSnapshot>, EngineError> {
        let tree = self.tree_of(root)?;
        match handle::send_command(&tree, Command::Capture).await? {
            Reply::Captured(snapshot) => Ok(snapshot),
            _ => Err(EngineError::UnexpectedReply("capture")),
        }
    }

    /// The head last acknowledged to this Engine for `root` (never unacknowledged state).
    /// Available during commits and after the writer stopped.
    pub fn inspect_head(&self, root: &ProcessId) -> Option<Arc<TreeSnapshot>> {
        self.tree_of(root).ok()?.head()
    }

    /// The RuntimeError of the tree's writer, if it stopped.
    pub fn runtime_error(&self, root: &ProcessId) -> Option<RuntimeError> {
        self.tree_of(root).ok()?.lock().stopped.clone()
    }

    /// Waits for the tree to settle, then drops it from lookup. Existing handles keep
    /// reading their results.
    pub async fn release_tree(&self, root: &ProcessId) -> Result<(), EngineError> {
        let tree = self.tree_of(root)?;
        tree.wait(|s| s.exited.then_some(())).await;
        let mut index = self.shared.lock_index();
        index.processes.retain(|_, t| !Arc::ptr_eq(t, &tree));
        index.roots.retain(|_, t| !Arc::ptr_eq(t, &tree));
        Ok(())
    }

    /// Listener failures contained so far.
    pub fn observation_failures(&self) -> ObservationFailures {
        self.shared.observers.failures()
    }

    fn tree_of(&self, root: &ProcessId) -> Result<Arc<Tree>, EngineError> {
        self.shared
            .lock_index()
            .roots
            .get(root)
            .cloned()
            .ok_or_else(|| EngineError::NotFound(root.clone()))
    }

    fn mint_incarnation(&self) -> Result<IncarnationId, EngineError> {
        Ok(IncarnationId::from_hex(&random_hex(
            self.shared.env.rng.as_ref(),
            16,
        ))?)
    }

    /// Spawns the owner task and waits until the root is published or the writer stops.
    async fn activate(
        &self,
        owner: Owner,
        root: ProcessId,
        incarnation: IncarnationId,
    ) -> Result<ProcessHandle, EngineError> {
        let (tx, rx) = mpsc::unbounded();
        let tree = Tree::new(root.clone(), incarnation, tx.clone());
        let driver = Driver::new(owner, tree.clone(), self.shared.clone(), tx, rx);
        // Dropping the TaskHandle detaches the task; it ends by itself once the tree settles.
        drop(self.shared.env.executor.spawn(Box::pin(driver.run())));
        let published = tree
            .wait(|s| {
                if let Some(m) = s.members.get(&root) {
                    return Some(Ok(m.info.clone()));
                }
                let stopped = s.stopped.clone()?;
                Some(Err(match &s.commit_error {
                    Some(e) => EngineError::Commit(e.clone()),
                    None => EngineError::Stopped(Box::new(stopped)),
                }))
            })
            .await?;
        Ok(ProcessHandle::new(published, tree))
    }
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").finish_non_exhaustive()
    }
}
