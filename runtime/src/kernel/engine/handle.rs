//! A host's handle on one published Process: immutable facts, commands, Await and
//! Join. Handles keep their tree activation alive for reading: after a later Restore replaces
//! the tree in the Engine's lookup, an old handle still reports what its own activation did.

use super::driver::Msg;
use super::registry::{Target, Tree};
use super::EngineError;
use crate::env::Timestamp;
use crate::kernel::capability::CapabilitySet;
use crate::kernel::deployment::DeploymentRef;
use crate::kernel::effect::Settlement;
use crate::kernel::ids::{EffectId, ProcessId};
use crate::kernel::owner::{Command, CommandError, ProcessInfo, Reply, RuntimeError};
use crate::kernel::relation::Relation;
use crate::kernel::resource::Budget;
use crate::kernel::result::ProcessResult;
use crate::kernel::signal::SignalRequest;
use futures::channel::oneshot;
use std::sync::Arc;

#[derive(Clone)]
pub struct ProcessHandle {
    info: Arc<ProcessInfo>,
    tree: Arc<Tree>,
}

impl ProcessHandle {
    pub(super) fn new(info: Arc<ProcessInfo>, tree: Arc<Tree>) -> ProcessHandle {
        ProcessHandle { info, tree }
    }

    pub fn id(&self) -> &ProcessId {
        &self.info.id
    }
    pub fn relation(&self) -> &Relation {
        &self.info.relation
    }
    pub fn deployment_ref(&self) -> &DeploymentRef {
        &self.info.deployment_ref
    }
    pub fn started_at(&self) -> Timestamp {
        self.info.started_at
    }
    pub fn budget(&self) -> &Budget {
        &self.info.budget
    }
    pub fn capabilities(&self) -> &CapabilitySet {
        &self.info.capabilities
    }

    /// Admits external Signals atomically. `Ok(true)` once at least one new Signal is
    /// committed; `Ok(false)` when every request was an identical redelivery.
    pub async fn deliver_signals(&self, requests: Vec<SignalRequest>) -> Result<bool, EngineError> {
        match self
            .command(Command::Deliver {
                process: self.id().clone(),
                requests,
            })
            .await?
        {
            Reply::Delivered { accepted } => Ok(accepted),
            _ => Err(EngineError::UnexpectedReply("deliver")),
        }
    }

    /// Records a host cancellation intent (returns once recorded, not once applied).
    pub async fn request_cancellation(&self, reason: impl Into<String>) -> Result<(), EngineError> {
        self.intent(Command::Cancel {
            process: self.id().clone(),
            reason: reason.into(),
        })
        .await
    }

    /// Records a kill intent (highest precedence).
    pub async fn kill(&self, reason: impl Into<String>) -> Result<(), EngineError> {
        self.intent(Command::Kill {
            process: self.id().clone(),
            reason: reason.into(),
        })
        .await
    }

    /// Replaces the current Unknown `effect` with a definite settlement; returns once the
    /// `resolved` boundary is acknowledged.
    pub async fn resolve_unknown_effect(
        &self,
        effect: EffectId,
        settlement: Settlement,
    ) -> Result<(), EngineError> {
        let command = Command::Resolve {
            process: self.id().clone(),
            effect,
            settlement,
        };
        match self.command(command).await? {
            Reply::Resolved => Ok(()),
            _ => Err(EngineError::UnexpectedReply("resolve")),
        }
    }

    /// The immutable terminal Result (a logical failure is a Result too), or the RuntimeError
    /// of a stopped writer. Descendants may still be settling.
    pub async fn await_result(&self) -> Result<ProcessResult, RuntimeError> {
        let id = self.id().clone();
        self.tree.wait(move |s| s.await_outcome(&id)).await
    }

    /// Waits until this Process and every published descendant have a Result or an error.
    /// Any RuntimeError in the subtree is returned even if this Process has a Result.
    pub async fn join(&self) -> Result<(), RuntimeError> {
        let id = self.id().clone();
        self.tree.wait(move |s| s.join_outcome(&id)).await
    }

    async fn intent(&self, command: Command) -> Result<(), EngineError> {
        match self.command(command).await? {
            Reply::IntentRecorded => Ok(()),
            _ => Err(EngineError::UnexpectedReply("intent")),
        }
    }

    async fn command(&self, command: Command) -> Result<Reply, EngineError> {
        send_command(&self.tree, command)
            .await
            .map_err(EngineError::Command)
    }
}

/// Sends one command to a tree's owner task and waits for the reply. A task that is gone
/// (or drops the reply) is answered from the registry.
pub(super) async fn send_command(tree: &Tree, command: Command) -> Result<Reply, CommandError> {
    let target = Target::of(&command);
    let Some(sender) = tree.sender() else {
        return tree.answer_locally(&target);
    };
    let (reply, answer) = oneshot::channel();
    if sender.unbounded_send(Msg::Command { command, reply }).is_err() {
        return tree.answer_locally(&target);
    }
    match answer.await {
        Ok(result) => result,
        Err(oneshot::Canceled) => tree.answer_locally(&target),
    }
}

impl std::fmt::Debug for ProcessHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessHandle")
            .field("id", &self.info.id)
            .finish_non_exhaustive()
    }
}
