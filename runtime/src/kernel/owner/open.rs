//! Opening an owner: Start (a fresh root) and Restore (a captured cut under a new writer).

use super::step::{initialize, restore_execution};
use super::{AfterCommit, CommitRequest, Live, Owner, RootConfig, Action, InFlight};
use crate::env::Timestamp;
use crate::kernel::binding::{Deployment, DeploymentResolver};
use crate::kernel::commit::{Activation, Checkpoint, CheckpointKind};
use crate::kernel::failure::Failure;
use crate::kernel::ids::{IncarnationId, ProcessId};
use crate::kernel::mailbox::Mailbox;
use crate::kernel::process::Process;
use crate::kernel::relation::Relation;
use crate::kernel::resource::Allocation;
use crate::kernel::snapshot::{SnapshotError, TreeSnapshot};
use crate::kernel::status::{PendingControl, Status};
use crate::json::Payload;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// Why a Start was refused before anything was committed or published.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StartError {
    #[error("deployment binding drifted: {0}")]
    Binding(#[from] crate::kernel::binding::BindingError),
    #[error("input rejected by the input schema: {0}")]
    InvalidInput(String),
    #[error("initialization failed: {0}")]
    Initialization(Failure),
    #[error("the initial tree does not fit its limits: {0}")]
    Snapshot(#[from] SnapshotError),
}

/// Why a Restore was refused; the Engine is left unchanged.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RestoreError {
    #[error("the root deployment ref differs from the snapshot's")]
    RootMismatch,
    #[error("deployment {0} is not resolvable")]
    Unresolvable(String),
    #[error("process {process}: {failure}")]
    Unrestorable { process: ProcessId, failure: Failure },
    #[error("snapshot invalid: {0}")]
    Snapshot(#[from] SnapshotError),
}

impl Owner {
    fn empty(resolver: Arc<dyn DeploymentResolver>, root_id: ProcessId, incarnation: IncarnationId, limits: crate::kernel::tree_limits::TreeLimits, now: Timestamp) -> Owner {
        Owner {
            root_id,
            incarnation,
            limits,
            processes: super::table::ProcessTable::default(),
            live: BTreeMap::new(),
            resolver,
            head: None,
            in_flight: None,
            jobs: BTreeMap::new(),
            deferred: VecDeque::new(),
            actions: VecDeque::new(),
            staged: Vec::new(),
            stopped: None,
            last_advanced: None,
            now,
            compaction: Default::default(),
            child_start_due: false,
            chain: Default::default(),
            passed_heads: Vec::new(),
        }
    }

    /// Validates and initializes a root, and queues its `start` checkpoint. Nothing is
    /// published before that commit is acknowledged.
    pub fn start(
        resolver: Arc<dyn DeploymentResolver>,
        deployment: Deployment,
        input: Payload,
        root_id: ProcessId,
        incarnation: IncarnationId,
        config: RootConfig,
        now: Timestamp,
    ) -> Result<Owner, StartError> {
        deployment.check_binding()?;
        let descriptor = deployment.definition().descriptor();
        descriptor
            .input_schema()
            .validate(input.value())
            .map_err(|v| StartError::InvalidInput(v.diagnostic().to_owned()))?;
        let (state, execution) =
            initialize(deployment.definition().as_ref(), &input).map_err(StartError::Initialization)?;
        let root = Process {
            id: root_id.clone(),
            relation: Relation::root(root_id.clone()),
            child_request_digest: None,
            deployment_ref: deployment.reference().clone(),
            started_at: now,
            status: Status::Running,
            committed_steps: 0,
            budget: config.budget,
            allocated: Allocation::default(),
            capabilities: config.capabilities,
            prepared_effects: 0,
            dropped_deltas: 0,
            committed_state: state,
            mailbox: Mailbox::default(),
            prepared: None,
            current_wait_id: None,
            pending_control: PendingControl::default(),
            finish: None,
            retired: Default::default(),
        };
        let mut owner = Owner::empty(resolver, root_id.clone(), incarnation, config.limits, now);
        owner.processes.insert(root_id.clone(), root);
        owner.live.insert(root_id.clone(), Live { deployment, execution: Some(execution), candidate: None });
        let cut = Arc::new(owner.snapshot()?);
        owner.stage_event(&root_id, crate::kernel::event::names::PROCESS_STARTED, None, None);
        let checkpoint = Checkpoint { sequence: 1, kind: CheckpointKind::Start, previous_digest: None, cut: cut.tree_cut().clone() };
        owner.in_flight = Some(InFlight { after: AfterCommit::PublishStart { restored: false }, prospective: cut, sequence: 1, effects: Vec::new(), passed: Vec::new() });
        owner.actions.push_back(Action::Commit(CommitRequest::Checkpoint(checkpoint)));
        Ok(owner)
    }

    /// Restores a captured cut under a new writer. Every deployment is resolved exactly and
    /// every non-terminal committed state and prepared candidate is restored through its
    /// Definition before anything is published; then the activation commit fences the
    /// previous writer. `head_sequence` is the store's sequence for `snapshot`.
    pub fn restore(
        resolver: Arc<dyn DeploymentResolver>,
        root_deployment: Deployment,
        snapshot: &TreeSnapshot,
        incarnation: IncarnationId,
        now: Timestamp,
    ) -> Result<Owner, RestoreError> {
        if root_deployment.reference() != &snapshot.root().deployment_ref {
            return Err(RestoreError::RootMismatch);
        }
        let mut owner = Owner::empty(resolver.clone(), snapshot.root_id.clone(), incarnation.clone(), snapshot.limits, now);
        for p in snapshot.processes() {
            let deployment = if p.deployment_ref == *root_deployment.reference() {
                root_deployment.clone()
            } else {
                resolver
                    .resolve(&p.deployment_ref)
                    .filter(|d| d.reference() == &p.deployment_ref && d.check_binding().is_ok())
                    .ok_or_else(|| RestoreError::Unresolvable(p.deployment_ref.to_string()))?
            };
            if !p.is_terminal() {
                let definition = deployment.definition().clone();
                let unrestorable = |failure| RestoreError::Unrestorable { process: p.id.clone(), failure };
                let execution = restore_execution(definition.as_ref(), &p.committed_state).map_err(unrestorable)?;
                let candidate = match &p.prepared {
                    Some(s) => Some(restore_execution(definition.as_ref(), &s.candidate_state).map_err(unrestorable)?),
                    None => None,
                };
                owner.live.insert(p.id.clone(), Live { deployment, execution: Some(execution), candidate });
            }
        }
        // The records arrive with their canonical bytes: nothing is re-encoded.
        for (p, encoded) in snapshot.processes().iter().zip(snapshot.encoded()) {
            owner.processes.insert_encoded(p.clone(), encoded.clone());
        }
        for (r, encoded) in snapshot.residues().iter().zip(snapshot.residues_encoded()) {
            owner.processes.insert_residue_encoded(r.clone(), encoded.clone());
        }
        let previous_incarnation = snapshot.incarnation.clone();
        let previous_digest = snapshot.digest();
        let cut = Arc::new(owner.snapshot()?);
        for p in snapshot.processes().iter().filter(|p| !p.is_terminal()) {
            owner.stage_event(&p.id, crate::kernel::event::names::PROCESS_RESTORED, None, None);
        }
        let activation = Activation { previous_incarnation, previous_digest, new_incarnation: incarnation, cut: cut.tree_cut().clone() };
        owner.in_flight = Some(InFlight { after: AfterCommit::PublishStart { restored: true }, prospective: cut, sequence: 0, effects: Vec::new(), passed: Vec::new() });
        owner.actions.push_back(Action::Commit(CommitRequest::Activation(activation)));
        Ok(owner)
    }
}
