//! Driving a prepared batch one Effect at a time.

use super::step::initialize;
use super::{Action, AfterCommit, Job, Owner};
use crate::env::CancelToken;
use crate::kernel::commit::EffectBoundaryKind;
use crate::kernel::child::ChildSpec;
use crate::kernel::dispatcher::{normalize_outcome, DispatchContext, DispatchError, EffectRequest, ReplayPolicy};
use crate::kernel::effect::{Effect, EffectPhase, FrameworkEffect, Settlement};
use crate::kernel::engine_signal::ChildStartResult;
use crate::kernel::failure::Failure;
use crate::kernel::ids::{EffectId, ProcessId};
use crate::kernel::mailbox::Mailbox;
use crate::kernel::process::Process;
use crate::kernel::relation::Relation;
use crate::kernel::resource::Allocation;
use crate::kernel::signal::SettlementStatus;
use crate::kernel::status::{PendingControl, Status};
use crate::json::{Json, ObjectBuilder, Payload, ToJson};

fn succeeded(payload: Json) -> EffectPhase {
    // Framework settlement payloads are small, kernel-built JSON: they always fit.
    let payload = Payload::from_json(payload).unwrap_or_else(|_| empty_payload());
    EffectPhase::Settled(Settlement { status: SettlementStatus::Succeeded, payload })
}

fn empty_payload() -> Payload {
    Payload::from_json(Json::object()).expect("the empty object is a valid payload")
}

fn child_failure(code: crate::kernel::failure::FailureCode, message: &str) -> Failure {
    Failure::new(code, message)
}

impl Owner {
    /// Moves the frontier Effect (planned) forward.
    pub(super) fn begin_effect(&mut self, pid: &ProcessId, index: usize) {
        let Some(e) = self.processes[pid].prepared.as_ref().map(|s| s.effects[index].clone()) else { return };
        match &e.effect {
            Effect::Dispatcher(_) => {
                self.set_phase(pid, index, EffectPhase::Pending, None);
                self.commit_effect(
                    EffectBoundaryKind::Pending,
                    pid,
                    &e.id,
                    AfterCommit::Dispatch { process: pid.clone(), effect: e.id.clone() },
                );
            }
            // Waits are settled locally; their real work happens at finalization.
            Effect::Framework(FrameworkEffect::Wait { .. }) => {
                self.set_phase(pid, index, succeeded(ObjectBuilder::new().field("operation", "wait").build()), None);
            }
            Effect::Framework(FrameworkEffect::WaitChildren(_)) => {
                self.set_phase(
                    pid,
                    index,
                    succeeded(ObjectBuilder::new().field("operation", "wait_children").build()),
                    None,
                );
            }
            Effect::Framework(FrameworkEffect::StartChild(spec)) => {
                let spec = spec.clone();
                let outcome = self.start_child(pid, &e.id, &spec);
                let result = ChildStartResult {
                    key: spec.key.clone(),
                    deployment_ref: spec.deployment_ref.clone(),
                    outcome: outcome.clone(),
                };
                let phase = match &outcome {
                    Ok(_) => succeeded(result.to_json()),
                    Err(_) => EffectPhase::Settled(Settlement {
                        status: SettlementStatus::Failed,
                        payload: Payload::from_json(result.to_json()).unwrap_or_else(|_| empty_payload()),
                    }),
                };
                self.set_phase(pid, index, phase, None);
                // The child is published after the `child_start` checkpoint that holds it is
                // acknowledged. That checkpoint is not committed here: the driver first lets
                // this batch run on as far as it can without a commit (more child starts,
                // waits, finalization), so one checkpoint holds all of it (`drive`).
                if let Ok(child) = outcome {
                    if let Some(p) = self.processes.get(&child) {
                        let info = super::ProcessInfo::of(p);
                        self.staged.push(super::Publication::Started { process: info, restored: false });
                    }
                }
                self.child_start_due = true;
            }
        }
    }

    pub(super) fn set_phase(&mut self, pid: &ProcessId, index: usize, phase: EffectPhase, diagnostic: Option<Failure>) {
        if let Some(e) = self.processes.get_mut(pid).and_then(|p| p.prepared.as_mut()).and_then(|s| s.effects.get_mut(index)) {
            e.phase = phase;
            if diagnostic.is_some() {
                e.diagnostic = diagnostic;
            }
        }
    }

    /// Starts a child inline (resolution, admission checks, initialization). Every failure is
    /// a definite failed start that leaves no debit behind.
    fn start_child(&mut self, parent_id: &ProcessId, effect: &EffectId, spec: &ChildSpec) -> Result<ProcessId, Failure> {
        let child_id = ProcessId::child(effect);
        let request_digest = spec.request_digest();
        let parent = &self.processes[parent_id];
        if self.processes.residue(&child_id).is_some() {
            return Err(child_failure(crate::kernel::failure::codes::CHILD_IDENTITY_CONFLICT, "the derived child id belongs to a retired child"));
        }
        if let Some(existing) = self.processes.get(&child_id) {
            // Idempotent only for the very same request.
            if existing.relation.parent_id.as_ref() == Some(parent_id)
                && existing.deployment_ref == spec.deployment_ref
                && existing.child_request_digest == Some(request_digest)
            {
                return Ok(child_id);
            }
            return Err(child_failure(crate::kernel::failure::codes::CHILD_IDENTITY_CONFLICT, "the derived child id already exists"));
        }
        let siblings: Vec<&Process> =
            self.processes.values().filter(|p| p.relation.parent_id.as_ref() == Some(parent_id)).collect();
        // Retired children keep their keys and count as lifetime children.
        if siblings.iter().any(|s| s.relation.child_key.as_ref() == Some(&spec.key)) || self.processes.retired_key(parent_id, &spec.key) {
            return Err(child_failure(crate::kernel::failure::codes::CHILD_IDENTITY_CONFLICT, "the child key is already used under this parent"));
        }
        if !spec.capabilities.is_subset_of(&parent.capabilities) {
            return Err(Failure::new(crate::kernel::failure::codes::CHILD_CAPABILITY_ESCALATION, "child capabilities exceed the parent's"));
        }
        let depth = parent.relation.depth + 1;
        let active = siblings.iter().filter(|s| !s.is_terminal()).count();
        if depth > self.limits.max_depth()
            || !self.limits.max_children().admits((siblings.len() as u64).saturating_add(parent.retired.count), 1)
            || active >= self.limits.max_active_children() as usize
            || !self.limits.max_tree_processes().admits(self.processes.len() as u64, 1)
        {
            return Err(child_failure(crate::kernel::failure::codes::CHILD_TREE_LIMIT, "tree limits do not admit another child"));
        }
        // The parent's own prepared Step reserves one Step and its batch's settlement Signals.
        let batch = parent.prepared.as_ref().map(|s| s.effects.len() as u64).unwrap_or(0);
        let reserved = Allocation { steps: 1, effects: 0, signals: batch };
        let debit = parent
            .budget
            .grant_child(&parent.usage(), &parent.allocated, &reserved, &spec.budget)
            .map_err(|e| child_failure(crate::kernel::failure::codes::CHILD_BUDGET_EXHAUSTED, &e.to_string()))?;
        let parent_deployment = self.live.get(parent_id).map(|l| l.deployment.clone());
        let deployment = match parent_deployment {
            Some(d) if d.reference() == &spec.deployment_ref => d,
            _ => self
                .resolver
                .resolve(&spec.deployment_ref)
                .filter(|d| d.reference() == &spec.deployment_ref && d.check_binding().is_ok())
                .ok_or_else(|| {
                    child_failure(crate::kernel::failure::codes::CHILD_DEPLOYMENT_UNAVAILABLE, "the child deployment is not resolvable")
                })?,
        };
        let descriptor = deployment.definition().descriptor();
        if let Err(v) = descriptor.input_schema().validate(spec.input.value()) {
            return Err(Failure::new(crate::kernel::failure::codes::CHILD_INPUT_INVALID, v.diagnostic()));
        }
        let (state, execution) = initialize(deployment.definition().as_ref(), &spec.input)
            .map_err(|f| Failure::new(crate::kernel::failure::codes::CHILD_INITIALIZATION_FAILED, f.message.as_str()))?;
        // A child that joins while its parent holds terminal intent starts under that intent.
        let mut pending_control = PendingControl::default();
        if parent.pending_control.has_terminal_intent() {
            pending_control.cancellation = Some((
                crate::kernel::status::IntentOwner::Parent,
                "parent is terminating".to_owned(),
            ));
        }
        let child = Process {
            id: child_id.clone(),
            relation: Relation {
                parent_id: Some(parent_id.clone()),
                root_id: self.root_id.clone(),
                child_key: Some(spec.key.clone()),
                depth,
            },
            child_request_digest: Some(request_digest),
            deployment_ref: spec.deployment_ref.clone(),
            started_at: self.now,
            status: Status::Running,
            committed_steps: 0,
            budget: spec.budget,
            allocated: Allocation::default(),
            capabilities: spec.capabilities.clone(),
            prepared_effects: 0,
            dropped_deltas: 0,
            committed_state: state,
            mailbox: Mailbox::default(),
            prepared: None,
            current_wait_id: None,
            pending_control,
            finish: None,
            retired: Default::default(),
        };
        if let Some(p) = self.processes.get_mut(parent_id) {
            p.allocated = p.allocated.checked_add(&debit).unwrap_or(p.allocated);
        }
        self.processes.insert(child_id.clone(), child);
        self.live.insert(child_id.clone(), Self::new_live(deployment, execution));
        self.stage_event(&child_id, crate::kernel::event::names::PROCESS_STARTED, None, None);
        Ok(child_id)
    }

    /// Emits the Dispatch action for a pending Effect whose boundary was acknowledged.
    pub(super) fn start_dispatch(&mut self, pid: &ProcessId, effect: &EffectId) {
        let Some(p) = self.processes.get(pid) else { return };
        let Some(prepared) = &p.prepared else { return };
        let Some(index) = prepared.effect_index(effect) else { return };
        let Effect::Dispatcher(payload) = &prepared.effects[index].effect else { return };
        let Some(live) = self.live.get(pid) else { return };
        let request = EffectRequest {
            incarnation: self.incarnation.clone(),
            deployment_ref: p.deployment_ref.clone(),
            process_id: pid.clone(),
            relation: p.relation.clone(),
            step_sequence: prepared.sequence,
            batch_index: index as u32,
            effect_id: effect.clone(),
            attempt_id: None,
            payload: payload.clone(),
            segments: prepared.candidate_state.segments.clone(),
        };
        let cancel = CancelToken::new();
        if p.pending_control.has_terminal_intent() {
            cancel.cancel();
        }
        let deployment = live.deployment.clone();
        self.jobs.insert(effect.clone(), Job { process: pid.clone(), cancel: cancel.clone() });
        self.attempt_event(pid, crate::kernel::event::names::EFFECT_STARTED, Some(prepared.sequence), Some(effect));
        self.actions.push_back(Action::Dispatch { deployment, request, cx: DispatchContext { cancel, deltas: None } });
    }

    /// A dispatch attempt finished: record the settlement, then commit the settled boundary.
    pub(super) fn on_dispatch_done(&mut self, effect: EffectId, outcome: Result<Settlement, DispatchError>) {
        let Some(job) = self.jobs.remove(&effect) else { return };
        let pid = job.process;
        let Some(index) = self.processes.get(&pid).and_then(|p| p.prepared.as_ref()).and_then(|s| s.effect_index(&effect))
        else {
            return;
        };
        let step = self.processes[&pid].prepared.as_ref().map(|s| s.sequence);
        self.attempt_event(&pid, crate::kernel::event::names::EFFECT_FINISHED, step, Some(&effect));
        #[cfg(feature = "mutations")]
        if self.processes[&pid].prepared.as_ref().is_some_and(|s| s.effects[index].phase == EffectPhase::Unknown) {
            // MUTATION RedispatchUnknown: the re-run's settlement takes the host's slot.
            let (phase, _) = normalize_outcome(outcome);
            if phase != EffectPhase::Unknown {
                self.set_phase(&pid, index, phase, None);
                self.commit_effect(EffectBoundaryKind::Resolved, &pid, &effect, AfterCommit::Nothing);
            }
            return;
        }
        let (phase, diagnostic) = normalize_outcome(outcome);
        self.set_phase(&pid, index, phase, diagnostic);
        // Staged when chains are on: the settlement is acted on in memory only, and the
        // boundary is sent, before anything that follows it, in the next commit (`chain.rs`).
        if self.chain.may_stage() {
            self.stage_effect(EffectBoundaryKind::Settled, &pid, &effect);
        } else {
            self.commit_effect(EffectBoundaryKind::Settled, &pid, &effect, AfterCommit::Nothing);
        }
    }

    /// MUTATION RedispatchUnknown: dispatches every restored Unknown dispatcher Effect again
    /// instead of waiting for the host's resolution.
    #[cfg(feature = "mutations")]
    pub(super) fn redispatch_unknowns(&mut self) {
        let unknown: Vec<(ProcessId, EffectId)> = self
            .processes
            .values()
            .filter(|p| !p.is_terminal())
            .filter_map(|p| {
                let prepared = p.prepared.as_ref()?;
                let e = &prepared.effects[prepared.frontier()?];
                (e.phase == EffectPhase::Unknown && matches!(e.effect, Effect::Dispatcher(_)))
                    .then(|| (p.id.clone(), e.id.clone()))
            })
            .collect();
        for (pid, effect) in unknown {
            self.start_dispatch(&pid, &effect);
        }
    }

    /// A pending Effect found in a restored cut (no job of this incarnation runs it).
    pub(super) fn recover_pending(&mut self, pid: &ProcessId) {
        let Some(prepared) = self.processes[pid].prepared.as_ref() else { return };
        let Some(index) = prepared.effects.iter().position(|e| e.phase == EffectPhase::Pending) else { return };
        let e = prepared.effects[index].clone();
        let terminal_intent = self.processes[pid].pending_control.has_terminal_intent();
        let policy = match (&e.effect, self.live.get(pid).and_then(|l| l.deployment.dispatcher().cloned())) {
            (Effect::Dispatcher(payload), Some(d)) => {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| d.policy(payload))).ok().map(|p| p.replay)
            }
            _ => None,
        };
        match policy {
            Some(ReplayPolicy::SameIdentity) if !terminal_intent => {
                // Provably the same logical operation: re-dispatch under the same EffectId.
                self.start_dispatch(pid, &e.id);
            }
            Some(_) => {
                let diagnostic = Failure::new(crate::kernel::failure::codes::DISPATCH_FAILED,
                    "the outcome of a pending attempt from an earlier writer cannot be proven",
                );
                self.set_phase(pid, index, EffectPhase::Unknown, Some(diagnostic));
                self.commit_effect(EffectBoundaryKind::Settled, pid, &e.id, AfterCommit::Nothing);
            }
            None => {
                self.set_phase(pid, index, EffectPhase::Unknown, None);
                let f = Failure::new(crate::kernel::failure::codes::EFFECT_RECOVERY_INVALID, "pending effect cannot be recovered");
                self.record_failure(pid, f);
                self.commit_effect(EffectBoundaryKind::Settled, pid, &e.id, AfterCommit::Nothing);
            }
        }
    }
}
