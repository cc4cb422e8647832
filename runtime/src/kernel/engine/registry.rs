//! What the Engine knows about its trees, shared between the owner tasks (writers) and the
//! handles (readers): published members, their Result slots, the acknowledged head, and the
//! stop error. Waiters re-check their condition whenever the tree publishes something.

use super::driver::Msg;
use crate::kernel::commit::CommitError;
use crate::kernel::ids::{IncarnationId, ProcessId};
use crate::kernel::owner::{Command, CommandError, ProcessInfo, Reply, RuntimeError};
use crate::kernel::result::ProcessResult;
use crate::kernel::snapshot::TreeSnapshot;
use futures::channel::mpsc::UnboundedSender;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Poll, Waker};

/// One published Process of a tree.
pub(super) struct Member {
    pub info: Arc<ProcessInfo>,
    pub result: Option<ProcessResult>,
    pub error: Option<RuntimeError>,
}

impl Member {
    fn is_settled(&self) -> bool {
        self.result.is_some() || self.error.is_some()
    }
}

/// The mutable facts of one tree activation.
pub(super) struct TreeState {
    /// Command intake of the owner task; `None` once it exited.
    pub sender: Option<UnboundedSender<Msg>>,
    pub incarnation: IncarnationId,
    /// The last head acknowledged to this activation.
    pub head: Option<Arc<TreeSnapshot>>,
    pub stopped: Option<RuntimeError>,
    /// The first commit failure (kept typed for Start/Restore callers).
    pub commit_error: Option<CommitError>,
    pub members: BTreeMap<ProcessId, Member>,
    /// The owner task is gone (finished, stopped, or dropped by its executor).
    pub exited: bool,
    wakers: Vec<Waker>,
}

/// One activation of one root tree (a Start or a Restore).
pub(super) struct Tree {
    pub root: ProcessId,
    state: Mutex<TreeState>,
}

/// The command a host sent, reduced to what a local answer needs.
#[derive(Clone, Debug)]
pub(super) enum Target {
    Process(ProcessId),
    Capture,
}

impl Target {
    pub fn of(command: &Command) -> Target {
        match command {
            Command::Deliver { process, .. }
            | Command::Cancel { process, .. }
            | Command::Kill { process, .. }
            | Command::Resolve { process, .. } => Target::Process(process.clone()),
            Command::Capture => Target::Capture,
        }
    }
}

impl Tree {
    pub fn new(root: ProcessId, incarnation: IncarnationId, sender: UnboundedSender<Msg>) -> Arc<Tree> {
        Arc::new(Tree {
            root,
            state: Mutex::new(TreeState {
                sender: Some(sender),
                incarnation,
                head: None,
                stopped: None,
                commit_error: None,
                members: BTreeMap::new(),
                exited: false,
                wakers: Vec::new(),
            }),
        })
    }

    // A poisoned lock only means a panic elsewhere while holding it; every mutation here is a
    // single assignment or insertion, so the state stays meaningful.
    pub fn lock(&self) -> MutexGuard<'_, TreeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Applies `change` and wakes every waiter (after the lock is released).
    pub fn update<T>(&self, change: impl FnOnce(&mut TreeState) -> T) -> T {
        let (out, wakers) = {
            let mut state = self.lock();
            let out = change(&mut state);
            (out, std::mem::take(&mut state.wakers))
        };
        for w in wakers {
            w.wake();
        }
        out
    }

    /// Resolves with the first `Some` that `check` returns; re-checked after every update.
    pub fn wait<T>(
        self: &Arc<Self>,
        mut check: impl FnMut(&TreeState) -> Option<T>,
    ) -> impl Future<Output = T> {
        let tree = self.clone();
        futures::future::poll_fn(move |cx| {
            let mut state = tree.lock();
            if let Some(out) = check(&state) {
                return Poll::Ready(out);
            }
            if !state.wakers.iter().any(|w| w.will_wake(cx.waker())) {
                state.wakers.push(cx.waker().clone());
            }
            Poll::Pending
        })
    }

    pub fn sender(&self) -> Option<UnboundedSender<Msg>> {
        self.lock().sender.clone()
    }

    pub fn head(&self) -> Option<Arc<TreeSnapshot>> {
        self.lock().head.clone()
    }

    pub fn is_exited(&self) -> bool {
        self.lock().exited
    }

    /// The answer to a command the owner can no longer take (its task exited, or it dropped
    /// the reply). Mirrors what the owner itself would say about a stopped or finished tree.
    pub fn answer_locally(&self, target: &Target) -> Result<Reply, CommandError> {
        let state = self.lock();
        if let Some(e) = &state.stopped {
            return Err(CommandError::Stopped(Some(Box::new(e.clone()))));
        }
        match target {
            Target::Capture => state
                .head
                .clone()
                .map(Reply::Captured)
                .ok_or(CommandError::Stopped(None)),
            Target::Process(p) if state.members.contains_key(p) => {
                Err(CommandError::ProcessFinished(p.clone()))
            }
            Target::Process(p) => Err(CommandError::NotFound(p.clone())),
        }
    }
}

impl TreeState {
    /// Published (root present) with every member settled, or stopped.
    pub fn is_settled(&self) -> bool {
        self.stopped.is_some()
            || (self.members.values().any(|m| m.info.relation.is_root())
                && self.members.values().all(Member::is_settled))
    }

    /// Whether `id` is `ancestor` or one of its published descendants.
    fn descends_from(&self, id: &ProcessId, ancestor: &ProcessId) -> bool {
        let mut current = Some(id);
        // Bounded by the member count: a relation chain cannot be longer than the tree.
        for _ in 0..=self.members.len() {
            match current {
                Some(c) if c == ancestor => return true,
                Some(c) => {
                    current = self
                        .members
                        .get(c)
                        .and_then(|m| m.info.relation.parent_id.as_ref())
                }
                None => return false,
            }
        }
        false
    }

    /// Join's answer for `id`: `None` while any member of its published subtree is unsettled.
    pub fn join_outcome(&self, id: &ProcessId) -> Option<Result<(), RuntimeError>> {
        let mut error = None;
        for (pid, m) in &self.members {
            if !self.descends_from(pid, id) {
                continue;
            }
            if !m.is_settled() {
                return None;
            }
            if error.is_none() {
                error = m.error.clone();
            }
        }
        Some(error.map_or(Ok(()), Err))
    }

    /// Await's answer for `id`.
    pub fn await_outcome(&self, id: &ProcessId) -> Option<Result<ProcessResult, RuntimeError>> {
        let m = self.members.get(id)?;
        match (&m.result, &m.error) {
            (Some(r), _) => Some(Ok(r.clone())),
            (None, Some(e)) => Some(Err(e.clone())),
            (None, None) => None,
        }
    }

    /// Gives `error` to every member without a Result; returns those members.
    pub fn stop(&mut self, error: RuntimeError) -> Vec<Arc<ProcessInfo>> {
        let mut hit = Vec::new();
        for m in self.members.values_mut() {
            if m.result.is_none() && m.error.is_none() {
                m.error = Some(error.clone());
                hit.push(m.info.clone());
            }
        }
        if self.stopped.is_none() {
            self.stopped = Some(error);
        }
        hit
    }

    pub fn add_member(&mut self, info: ProcessInfo) -> Arc<ProcessInfo> {
        let info = Arc::new(info);
        self.members.insert(
            info.id.clone(),
            Member {
                info: info.clone(),
                result: None,
                error: None,
            },
        );
        info
    }

    pub fn set_result(&mut self, result: ProcessResult) {
        if let Some(m) = self.members.get_mut(&result.process_id) {
            m.result = Some(result);
        }
    }
}

/// Engine-wide lookup: every published Process and every root, to its latest activation.
#[derive(Default)]
pub(super) struct Index {
    pub processes: BTreeMap<ProcessId, Arc<Tree>>,
    pub roots: BTreeMap<ProcessId, Arc<Tree>>,
}

/// Stops the tree with `cause` if its owner task ends (normally or because its executor
/// dropped it) while any published member is unsettled, then marks the task exited.
pub(super) struct ExitGuard {
    pub tree: Arc<Tree>,
}

impl Drop for ExitGuard {
    fn drop(&mut self) {
        let root = self.tree.root.clone();
        self.tree.update(|state| {
            state.sender = None;
            state.exited = true;
            if !state.is_settled() {
                let error = RuntimeError {
                    root_id: root,
                    incarnation: state.incarnation.clone(),
                    head_digest: state.head.as_ref().map(|h| h.digest()),
                    unresolved_effect_ids: Vec::new(),
                    cause: "the owner task ended before the tree settled (executor shut down)".into(),
                    commit: None,
                };
                state.stop(error);
            }
        });
    }
}
