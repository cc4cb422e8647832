//! Running one Step inline: `step → snapshot → restore`, then preparation.

use super::{Action, Live, Owner, Publication};
use crate::kernel::effect::{Effect, FrameworkEffect};
use crate::kernel::failure::Failure;
use crate::kernel::prepared::PreparedStep;
use crate::kernel::transition::Transition;
use crate::kernel::waist::{Definition, Execution, ExecutionState, Stage, StepContext, StepError};
use crate::kernel::ids::ProcessId;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Runs strategy code at one seam, converting panics into `panic` Failures.
pub(super) fn guarded<T>(stage: Stage, f: impl FnOnce() -> Result<T, StepError>) -> Result<T, Failure> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(e.into_failure(stage)),
        Err(panic) => Err(Failure::new(stage.panic_code(), &panic_message(&panic))),
    }
}

pub fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        format!("panicked: {s}")
    } else if let Some(s) = panic.downcast_ref::<String>() {
        format!("panicked: {s}")
    } else {
        "panicked".to_owned()
    }
}

/// `definition.restore(state)` under the panic guard.
pub(super) fn restore_execution(
    definition: &dyn Definition,
    state: &ExecutionState,
) -> Result<Box<dyn Execution>, Failure> {
    let cx = StepContext::default();
    guarded(Stage::Restore, || definition.restore(&cx, state))
}

/// `start → snapshot → restore`: the restored instance is what runs.
pub(super) fn initialize(
    definition: &dyn Definition,
    input: &crate::json::Payload,
) -> Result<(ExecutionState, Box<dyn Execution>), Failure> {
    let started = guarded(Stage::Start, || definition.start(input))?;
    let state = guarded(Stage::Snapshot, || started.snapshot())?;
    let restored = restore_execution(definition, &state)?;
    Ok((state, restored))
}

fn contract(code: crate::kernel::failure::FailureCode, message: &str) -> Failure {
    Failure::new(code, message)
}
fn execution(code: crate::kernel::failure::FailureCode, message: &str) -> Failure {
    Failure::new(code, message)
}

impl Owner {
    /// Runs one Step of `pid` over its pending window and prepares the result.
    pub(super) fn run_step(&mut self, pid: &ProcessId) {
        let Some(p) = self.processes.get(pid) else { return };
        // Steps quota: committed + allocated + 1 must fit.
        let steps_used = p.committed_steps.saturating_add(p.allocated.steps);
        if !p.budget.steps.admits(steps_used, 1) {
            let f = execution(crate::kernel::failure::codes::LIMIT_STEPS, "the steps quota is exhausted");
            return self.fail_now(pid, f);
        }
        let Some(sequence) = p.committed_steps.checked_add(1) else {
            return self.fail_now(pid, execution(crate::kernel::failure::codes::COUNTER_EXHAUSTED, "step counter exhausted"));
        };
        let window = p.mailbox.pending_window();
        let Some(live) = self.live.get_mut(pid) else {
            return self.stop(format!("running process {pid} has no live execution"), None);
        };
        let definition = live.deployment.definition().clone();
        // The live instance is consumed by the attempt: whatever happens, only a restored
        // instance can become live again (restore-before-adopt).
        let Some(mut execution_instance) = live.execution.take() else {
            return self.stop(format!("process {pid} has no adopted execution"), None);
        };
        self.attempt_event(pid, super::super::event::names::STEP_STARTED, Some(sequence), None);
        let started_at = self.now;
        let cx = StepContext::default();
        let outcome = guarded(Stage::Step, || execution_instance.step(&cx, &window))
            .and_then(|t| guarded(Stage::Snapshot, || execution_instance.snapshot()).map(|s| (t, s)))
            .and_then(|(t, s)| restore_execution(definition.as_ref(), &s).map(|c| (t, s, c)));
        drop(execution_instance);
        let (transition, candidate_state, candidate) = match outcome {
            Ok(v) => v,
            Err(failure) => {
                self.step_finished(pid, sequence, "failed", started_at);
                return self.fail_after_discard(pid, failure);
            }
        };
        if let Err(failure) = self.prepare(pid, sequence, window.len(), &transition) {
            self.step_finished(pid, sequence, "failed", started_at);
            return self.fail_after_discard(pid, failure);
        }
        self.attempt_event(pid, super::super::event::names::STEP_PREPARED, Some(sequence), None);
        let Some(p) = self.processes.get_mut(pid) else { return };
        let prepared = PreparedStep::new(pid, sequence, candidate_state, &transition);
        let before = p.prepared_effects;
        p.prepared_effects = p.prepared_effects.saturating_add(prepared.effects.len() as u64);
        p.prepared = Some(prepared);
        // 8. Snapshot byte admission: the cut holding the candidate must fit the tree limits.
        // A size count over the cached record encodings (nothing when the limits are
        // unlimited); the changed record's encoding is reused by the commit that follows.
        let sizes = self.processes.check_byte_limits(&self.root_id, &self.incarnation, self.limits);
        if let Err(crate::kernel::snapshot::SnapshotError::TooLarge { what, bytes, limit }) = sizes {
            if let Some(p) = self.processes.get_mut(pid) {
                p.prepared = None;
                p.prepared_effects = before;
            }
            let message = format!("{what} would be {bytes} bytes, over {limit}");
            self.step_finished(pid, sequence, "failed", started_at);
            return self.fail_after_discard(pid, execution(crate::kernel::failure::codes::LIMIT_SNAPSHOT, &message));
        }
        if let Some(live) = self.live.get_mut(pid) {
            live.candidate = Some(candidate);
        }
        self.step_finished(pid, sequence, "prepared", started_at);
        // A batch with no Effects finalizes on the next turn (advance sees it fully settled).
    }

    /// `agent.step.finished` (attempt phase): closes every attempt that emitted
    /// `step.started`, with how it ended (`prepared` or `failed`) and its duration on the
    /// owner's clock. Whether the prepared step commits is `step.committed`'s business.
    fn step_finished(&mut self, pid: &ProcessId, sequence: u64, status: &str, started_at: crate::env::Timestamp) {
        let duration = self.now.saturating_duration_since(started_at);
        if let Some(mut e) = self.event(pid, super::super::event::names::STEP_FINISHED, Some(sequence), None) {
            e.payload = crate::json::ObjectBuilder::new()
                .field("status", status)
                .field("duration_ms", &u64::try_from(duration.as_millis()).unwrap_or(u64::MAX))
                .build();
            self.actions.push_back(Action::Publish(Publication::Event(e)));
        }
    }

    /// Preparation checks in a fixed order; the first failure wins.
    fn prepare(&self, pid: &ProcessId, _sequence: u64, window: usize, t: &Transition) -> Result<(), Failure> {
        let p = &self.processes[pid];
        // 1. Transition shape and consumption.
        if t.consumed() as usize > window {
            return Err(contract(crate::kernel::failure::codes::TRANSITION_INVALID, "consumed more signals than delivered"));
        }
        if let Transition::Pause { .. } = t {
            return Err(contract(crate::kernel::failure::codes::TRANSITION_INVALID, "pause transitions are not supported"));
        }
        let effects: &[Effect] = match t {
            Transition::Continue { effects, .. } => effects,
            _ => &[],
        };
        let live = &self.live[pid];
        // 2. Admissible for the Deployment; 3. capabilities.
        for e in effects {
            if let Effect::Dispatcher(payload) = e {
                let Some(dispatcher) = live.deployment.dispatcher() else {
                    return Err(execution(crate::kernel::failure::codes::EFFECT_INVALID, "dispatcher effect without a dispatcher"));
                };
                let policy = std::panic::catch_unwind(AssertUnwindSafe(|| dispatcher.policy(payload)))
                    .map_err(|_| execution(crate::kernel::failure::codes::EFFECT_INVALID, "dispatcher policy panicked"))?;
                if !policy.required_capabilities.is_subset_of(&p.capabilities) {
                    return Err(contract(crate::kernel::failure::codes::CAPABILITY_DENIED, "effect requires capabilities the process lacks"));
                }
            }
        }
        let n = effects.len() as u64;
        // 4. Effects quota.
        if !p.budget.effects.admits(p.prepared_effects.saturating_add(p.allocated.effects), n) {
            return Err(execution(crate::kernel::failure::codes::LIMIT_EFFECTS, "the effects quota is exhausted"));
        }
        // 5. One settlement Signal reserved per Effect.
        let pending_after = p.mailbox.pending_count().saturating_sub(u64::from(t.consumed())) + n;
        if pending_after > u64::from(self.limits.max_pending_signals()) {
            return Err(execution(crate::kernel::failure::codes::LIMIT_SIGNALS, "pending signal capacity exhausted"));
        }
        let accepted = p.mailbox.len().saturating_add(p.allocated.signals);
        if !p.budget.signals.admits(accepted, n) {
            return Err(execution(crate::kernel::failure::codes::LIMIT_SIGNALS, "the signals quota is exhausted"));
        }
        // 6. Output schema for complete.
        if let Transition::Complete { output, .. } = t {
            let descriptor = live.deployment.definition().descriptor();
            if let Err(v) = descriptor.output_schema().validate(output.value()) {
                return Err(contract(crate::kernel::failure::codes::OUTPUT_INVALID, v.diagnostic()));
            }
        }
        // 7. Framework waits rehearsed: no duplicate or already-open wait keys; child waits
        // name direct children.
        let mut keys = Vec::new();
        for e in effects {
            match e {
                Effect::Framework(FrameworkEffect::Wait { key, .. }) => keys.push(key.clone()),
                Effect::Framework(FrameworkEffect::WaitChildren(spec)) => {
                    keys.push(spec.key.clone());
                    if spec.validate().is_err() {
                        return Err(execution(crate::kernel::failure::codes::EFFECT_INVALID, "invalid child wait spec"));
                    }
                    for c in &spec.children {
                        let direct = self.processes.get(c).is_some_and(|cp| cp.relation.parent_id.as_ref() == Some(pid));
                        if !direct && self.processes.residue(c).is_some_and(|r| &r.parent_id == pid) {
                            return Err(execution(crate::kernel::failure::codes::EFFECT_INVALID, "child wait names a retired child (its Result was already delivered and consumed)"));
                        }
                        if !direct {
                            return Err(execution(crate::kernel::failure::codes::EFFECT_INVALID, "child wait names a process that is not a direct child"));
                        }
                    }
                }
                _ => {}
            }
        }
        for (i, k) in keys.iter().enumerate() {
            if keys[..i].contains(k) || p.mailbox.open_wait_with_key(k).is_some() {
                return Err(execution(crate::kernel::failure::codes::EFFECT_INVALID, "wait key already open"));
            }
        }
        Ok(())
    }

    /// A failed or rejected attempt: nothing is adopted, the cursor does not move, the live
    /// instance is rebuilt from the committed state, and the Process fails.
    fn fail_after_discard(&mut self, pid: &ProcessId, failure: Failure) {
        self.rebuild_live(pid);
        self.fail_now(pid, failure);
    }

    /// Rebuilds the live instance from the committed state (after a discarded attempt).
    pub(super) fn rebuild_live(&mut self, pid: &ProcessId) {
        let Some(p) = self.processes.get(pid) else { return };
        let state = p.committed_state.clone();
        if let Some(live) = self.live.get_mut(pid) {
            let definition = live.deployment.definition().clone();
            live.execution = restore_execution(definition.as_ref(), &state).ok();
            live.candidate = None;
        }
    }

    /// Records the failure and terminates at once when no work of the Process is in flight.
    pub(super) fn fail_now(&mut self, pid: &ProcessId, failure: Failure) {
        self.record_failure(pid, failure);
        if !self.has_job(pid) {
            self.terminate(pid, None);
        }
    }

    pub(super) fn new_live(deployment: crate::kernel::binding::Deployment, execution: Box<dyn Execution>) -> Live {
        Live { deployment, execution: Some(execution), candidate: None }
    }
}
