//! The owner task: one per tree activation. It performs the owner's actions and feeds it
//! every completion, one at a time, through one channel.
//!
//! Commits and dispatches run as their own tasks so command intake never blocks on storage
//! or on external work; the owner itself guarantees at most one commit in flight. The task
//! ends once the tree is finished (every Process terminal in an acknowledged head, nothing in
//! flight) or its writer stopped; later commands are answered from the registry.

use super::registry::{ExitGuard, Target, Tree};
use super::Shared;
use crate::env::random_hex;
use crate::json::ObjectBuilder;
use crate::kernel::binding::Deployment;
use crate::kernel::commit::{CommitError, Committer};
use crate::kernel::direct::commit;
use crate::kernel::dispatcher::{DispatchContext, DispatchError, EffectRequest};
use crate::kernel::effect::Settlement;
use crate::kernel::event::{names, phase_of, Event};
use crate::kernel::ids::{AttemptId, EffectId, ProcessId};
use crate::kernel::owner::{
    panic_text, Action, Command, CommandError, CommandId, CommitRequest, Input, Owner, ProcessInfo,
    Publication, Reply, RuntimeError,
};
use crate::limits::MAX_DIAGNOSTIC_BYTES;
use crate::text::normalize_diagnostic;
use futures::channel::{mpsc, oneshot};
use futures::{FutureExt, StreamExt};
use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

pub(super) type ReplySender = oneshot::Sender<Result<Reply, CommandError>>;

/// Everything that reaches an owner task.
pub(super) enum Msg {
    /// A host command and where to send its reply.
    Command { command: Command, reply: ReplySender },
    /// The outstanding commit finished.
    CommitDone(Result<(), CommitError>),
    /// A dispatch attempt finished (panics already normalized).
    DispatchDone {
        effect: EffectId,
        outcome: Result<Settlement, DispatchError>,
    },
}

pub(super) struct Driver {
    owner: Owner,
    tree: Arc<Tree>,
    shared: Arc<Shared>,
    tx: mpsc::UnboundedSender<Msg>,
    rx: mpsc::UnboundedReceiver<Msg>,
    replies: BTreeMap<CommandId, (ReplySender, Target)>,
    next_command: CommandId,
    /// `process_sequence` counters of this activation.
    sequences: BTreeMap<ProcessId, u64>,
    /// Mutation `DispatchBeforePending`: fires once the last early-acknowledged commit ran,
    /// so later commits still reach the committer in the owner's order.
    #[cfg(feature = "mutations")]
    early_commit: Option<oneshot::Receiver<()>>,
}

impl Driver {
    pub fn new(
        owner: Owner,
        tree: Arc<Tree>,
        shared: Arc<Shared>,
        tx: mpsc::UnboundedSender<Msg>,
        rx: mpsc::UnboundedReceiver<Msg>,
    ) -> Driver {
        let mut owner = owner;
        // This driver sends chains (`Action::CommitChain`) with `Committer::commit_chain`.
        owner.enable_chained_commits();
        Driver {
            owner,
            tree,
            shared,
            tx,
            rx,
            replies: BTreeMap::new(),
            next_command: 1,
            sequences: BTreeMap::new(),
            #[cfg(feature = "mutations")]
            early_commit: None,
        }
    }

    /// The task body.
    pub async fn run(mut self) {
        // Marks the tree exited however this future ends (completion or being dropped).
        let _guard = ExitGuard {
            tree: self.tree.clone(),
        };
        loop {
            self.perform_actions();
            if self.owner.stopped().is_some() || (self.owner.is_finished() && self.owner.is_quiescent()) {
                break;
            }
            // Every sender clone lives in a job of ours or in the registry, which outlives us:
            // the stream cannot end while the tree is live. Treat an end like a stop anyway.
            let Some(msg) = self.rx.next().await else {
                break;
            };
            let now = self.shared.env.clock.now();
            let input = match msg {
                Msg::Command { command, reply } => {
                    let id = self.next_command;
                    self.next_command = self.next_command.saturating_add(1);
                    self.replies.insert(id, (reply, Target::of(&command)));
                    Input::Command { id, command }
                }
                Msg::CommitDone(result) => {
                    if let Err(e) = &result {
                        self.tree.update(|s| {
                            s.commit_error.get_or_insert_with(|| e.clone());
                        });
                    }
                    Input::CommitDone(result)
                }
                Msg::DispatchDone { effect, outcome } => Input::DispatchDone { effect, outcome },
            };
            self.owner.handle(input, now);
        }
        self.shutdown();
    }

    fn perform_actions(&mut self) {
        let head = self.owner.head().cloned();
        let moved = !matches!((&head, &self.tree.head()), (Some(a), Some(b)) if Arc::ptr_eq(a, b));
        if moved {
            self.tree.update(|s| s.head = head.clone());
            // A chain's earlier cuts first: listeners see every acknowledged cut in order.
            for passed in self.owner.take_passed_heads() {
                self.shared.observers.publish_head(&passed);
            }
            if let Some(head) = &head {
                self.shared.observers.publish_head(head);
            }
        }
        while let Some(action) = self.owner.poll_action() {
            match action {
                Action::Commit(request) => self.commit(vec![request]),
                Action::CommitChain(chain) => self.commit(chain),
                Action::Dispatch {
                    deployment,
                    request,
                    cx,
                } => self.spawn_dispatch(deployment, request, cx),
                Action::Publish(p) => self.publish(p),
                Action::Reply { id, result } => {
                    if let Some((reply, _)) = self.replies.remove(&id) {
                        // The caller may have stopped waiting; the command still took effect.
                        let _ = reply.send(result);
                    }
                }
            }
        }
    }

    /// Sends one commit (a single request, or a chain of them) to the committer.
    fn commit(&mut self, request: Vec<CommitRequest>) {
        #[cfg(feature = "mutations")]
        if crate::mutation::active(crate::mutation::Mutation::DispatchBeforePending)
            && request.last().is_some_and(is_pending_boundary)
        {
            // MUTATION: tell the owner the pending boundary is durable before the
            // committer saw it; the owner dispatches in this very loop.
            self.spawn_early_commit(request);
            self.owner.handle(Input::CommitDone(Ok(())), self.shared.env.clock.now());
            return;
        }
        self.spawn_commit(request)
    }

    fn spawn_commit(&mut self, request: Vec<CommitRequest>) {
        let committer = self.shared.committer.clone();
        let tx = self.tx.clone();
        #[cfg(feature = "mutations")]
        let before = self.early_commit.take();
        self.shared.env.executor.spawn(Box::pin(async move {
            #[cfg(feature = "mutations")]
            if let Some(before) = before {
                let _ = before.await;
            }
            let outcome = guarded_commit(committer.as_ref(), &request).await;
            // A closed channel means the tree already stopped; the answer is moot.
            let _ = tx.unbounded_send(Msg::CommitDone(outcome));
        }));
    }

    /// Mutation `DispatchBeforePending`: performs a commit the owner already believes
    /// acknowledged. Its outcome is only recorded (a failure surfaces when the next commit,
    /// which follows a head the store never got, is fenced).
    #[cfg(feature = "mutations")]
    fn spawn_early_commit(&mut self, request: Vec<CommitRequest>) {
        let committer = self.shared.committer.clone();
        let tree = self.tree.clone();
        let before = self.early_commit.take();
        let (done, after) = oneshot::channel();
        self.early_commit = Some(after);
        self.shared.env.executor.spawn(Box::pin(async move {
            if let Some(before) = before {
                let _ = before.await;
            }
            let outcome = guarded_commit(committer.as_ref(), &request).await;
            if let Err(e) = outcome {
                tree.update(|s| {
                    s.commit_error.get_or_insert(e);
                });
            }
            let _ = done.send(());
        }));
    }

    fn spawn_dispatch(&self, deployment: Deployment, mut request: EffectRequest, cx: DispatchContext) {
        request.attempt_id = AttemptId::from_hex(&random_hex(self.shared.env.rng.as_ref(), 16)).ok();
        let effect = request.effect_id.clone();
        let dispatcher = deployment.dispatcher().cloned();
        let tx = self.tx.clone();
        self.shared.env.executor.spawn(Box::pin(async move {
            let outcome = match dispatcher {
                None => Err(DispatchError::Failed("the deployment has no dispatcher".into())),
                // The call itself is inside the guarded future: a panic while building the
                // future is caught like one while polling it.
                Some(d) => AssertUnwindSafe(async move { d.dispatch(request, cx).await })
                    .catch_unwind()
                    .await
                    .unwrap_or_else(|p| Err(DispatchError::Panicked(bounded(&panic_text(&p), "panicked")))),
            };
            let _ = tx.unbounded_send(Msg::DispatchDone { effect, outcome });
        }));
    }

    fn publish(&mut self, publication: Publication) {
        match publication {
            Publication::Started { process, restored: _ } => {
                let pid = process.id.clone();
                let is_root = process.relation.is_root();
                self.tree.update(|s| s.add_member(process));
                let mut index = self.shared.lock_index();
                index.processes.insert(pid.clone(), self.tree.clone());
                if is_root {
                    index.roots.insert(pid, self.tree.clone());
                }
            }
            Publication::Finished { result } => self.tree.update(|s| s.set_result(result)),
            Publication::Stopped { error } => {
                let hit = self.tree.update(|s| s.stop(error.clone()));
                for info in hit {
                    let event = self.stopped_event(&info, &error);
                    self.emit(event);
                }
            }
            Publication::Event(event) => self.emit(event),
        }
    }

    /// `agent.runtime.stopped` for one member that got the RuntimeError.
    fn stopped_event(&self, info: &ProcessInfo, error: &RuntimeError) -> Event {
        Event {
            process_sequence: 0,
            process_id: info.id.clone(),
            deployment_ref: info.deployment_ref.clone(),
            relation: info.relation.clone(),
            tree_incarnation_id: Some(error.incarnation.clone()),
            step_sequence: None,
            effect_id: None,
            name: names::RUNTIME_STOPPED,
            phase: phase_of(names::RUNTIME_STOPPED),
            occurred_at: self.shared.env.clock.now(),
            payload: ObjectBuilder::new()
                .field("cause", bounded(&error.cause, "runtime stopped").as_str())
                .build(),
        }
    }

    fn emit(&mut self, mut event: Event) {
        let counter = self.sequences.entry(event.process_id.clone()).or_insert(0);
        *counter = counter.saturating_add(1);
        event.process_sequence = *counter;
        self.shared.observers.publish(&event);
    }

    /// Closes intake and answers everything still waiting from the registry.
    fn shutdown(&mut self) {
        self.rx.close();
        let mut late = Vec::new();
        while let Ok(msg) = self.rx.try_recv() {
            if let Msg::Command { command, reply } = msg {
                late.push((reply, Target::of(&command)));
            }
        }
        self.tree.update(|s| s.sender = None);
        let pending = std::mem::take(&mut self.replies).into_values();
        for (reply, target) in pending.chain(late) {
            let _ = reply.send(self.tree.answer_locally(&target));
        }
    }
}

#[cfg(feature = "mutations")]
fn is_pending_boundary(request: &CommitRequest) -> bool {
    matches!(request, CommitRequest::Effect(b) if b.kind == crate::kernel::commit::EffectBoundaryKind::Pending)
}

/// One commit with the committer's panics contained: a panic becomes a storage failure.
/// AssertUnwindSafe: after a panic the request and committer handle are dropped unobserved,
/// and a storage failure proves nothing about what the store kept.
async fn guarded_commit(committer: &dyn Committer, request: &[CommitRequest]) -> Result<(), CommitError> {
    let sent = async {
        match request {
            [one] => commit(committer, one).await,
            chain => committer.commit_chain(chain).await,
        }
    };
    AssertUnwindSafe(sent).catch_unwind().await.unwrap_or_else(|p| {
        Err(CommitError::Storage {
            message: bounded(&panic_text(&p), "committer panicked"),
        })
    })
}

fn bounded(text: &str, default: &str) -> String {
    normalize_diagnostic(text.as_bytes(), MAX_DIAGNOSTIC_BYTES, default)
}
