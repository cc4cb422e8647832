//! Host commands applied serially by the owner.

use super::{Action, AfterCommit, Command, CommandId, Owner, RuntimeError};
use crate::kernel::commit::{CheckpointKind, EffectBoundaryKind};
use crate::kernel::effect::EffectPhase;
use crate::kernel::ids::{EffectId, ProcessId};
use crate::kernel::mailbox::{AdmissionContext, AdmissionError, SignalsQuota};
use crate::kernel::snapshot::TreeSnapshot;
use crate::kernel::status::{IntentOwner, Status};
use std::sync::Arc;

/// A successful command reply.
#[derive(Clone, Debug)]
pub enum Reply {
    /// `true` when at least one new Signal was admitted (and committed).
    Delivered { accepted: bool },
    /// The intent is recorded.
    IntentRecorded,
    /// The resolved boundary is acknowledged.
    Resolved,
    /// The acknowledged head after the capture.
    Captured(Arc<TreeSnapshot>),
}

/// Why a command was refused. A refused command changed nothing.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    /// No Process of this tree has that id (nor does a retired child's residue).
    #[error("process {0} is not in this tree")]
    NotFound(ProcessId),
    /// The Process finished (or is terminating): too late for this command. Also the answer
    /// for a retired child, whose residue keeps its id after its record left the cut.
    #[error("process {0} is finished or terminating")]
    ProcessFinished(ProcessId),
    #[error("signal rejected: {0}")]
    Signal(#[from] AdmissionError),
    #[error("effect {0} is not the current unknown frontier of an idle process")]
    EffectNotPending(EffectId),
    #[error("the settlement must be definite and fit the limits: {0}")]
    InvalidSettlement(String),
    #[error("the tree's writer stopped")]
    Stopped(Option<Box<RuntimeError>>),
}

impl Owner {
    pub(super) fn on_command(&mut self, id: CommandId, command: Command) {
        let result = match command {
            Command::Deliver { process, requests } => self.deliver(id, &process, &requests),
            Command::Cancel { process, reason } => self.intent(&process, false, &reason),
            Command::Kill { process, reason } => self.intent(&process, true, &reason),
            Command::Resolve { process, effect, settlement } => self.resolve(id, &process, &effect, settlement),
            Command::Capture => {
                if self.cut_differs_from_tip() {
                    let kind = self.cut_class();
                    self.commit_checkpoint(kind, AfterCommit::ReplyCaptured { id });
                    Ok(None)
                } else if !self.chain.is_empty() {
                    self.send_chain(AfterCommit::ReplyCaptured { id });
                    Ok(None)
                } else {
                    match self.head() {
                        Some(h) => Ok(Some(Reply::Captured(h.clone()))),
                        None => Err(CommandError::Stopped(None)),
                    }
                }
            }
        };
        match result {
            Ok(Some(reply)) => self.actions.push_back(Action::Reply { id, result: Ok(reply) }),
            Ok(None) => {} // replied after the commit is acknowledged
            Err(e) => self.actions.push_back(Action::Reply { id, result: Err(e) }),
        }
    }

    fn deliver(
        &mut self,
        _id: CommandId,
        pid: &ProcessId,
        requests: &[crate::kernel::signal::SignalRequest],
    ) -> Result<Option<Reply>, CommandError> {
        let Some(p) = self.processes.get(pid) else { return Err(self.absent(pid)) };
        if p.is_terminal() {
            return Err(CommandError::ProcessFinished(pid.clone()));
        }
        let live = self.live.get(pid).ok_or_else(|| CommandError::ProcessFinished(pid.clone()))?;
        let schema = live.deployment.definition().descriptor().signal_schema().clone();
        let (consumption, reserved) = match &p.prepared {
            Some(s) => (s.intent.consumed(), s.effects.len() as u32),
            None => (0, 0),
        };
        let is_valid = |v: &crate::json::Json| schema.is_valid(v);
        let ctx = AdmissionContext {
            terminal: false,
            current_wait_id: p.current_wait_id.as_ref(),
            signal_schema: &is_valid,
            max_pending_signals: self.limits.max_pending_signals(),
            prepared_consumption: consumption,
            prepared_reserved_settlements: reserved,
            signals_quota: SignalsQuota {
                accepted: p.mailbox.len(),
                allocated: p.allocated.signals,
                maximum: p.budget.signals.maximum(),
            },
        };
        let mut mailbox = p.mailbox.clone();
        let outcome = mailbox.admit_external(requests, &ctx)?;
        if outcome.appended.is_empty() {
            return Ok(Some(Reply::Delivered { accepted: false }));
        }
        let p = self.processes.get_mut(pid).expect("checked above");
        p.mailbox = mailbox;
        if outcome.released_current_wait {
            p.current_wait_id = None;
            if p.status == Status::Waiting {
                p.status = Status::Running;
            }
        }
        self.stage_event(pid, crate::kernel::event::names::SIGNAL_ACCEPTED, None, None);
        self.commit_checkpoint(CheckpointKind::Signals, AfterCommit::Reply { id: _id, reply: Reply::Delivered { accepted: true } });
        Ok(None)
    }

    fn intent(&mut self, pid: &ProcessId, kill: bool, reason: &str) -> Result<Option<Reply>, CommandError> {
        let Some(p) = self.processes.get(pid) else { return Err(self.absent(pid)) };
        if p.is_terminal() {
            return Err(CommandError::ProcessFinished(pid.clone()));
        }
        let reason = crate::text::normalize_diagnostic(reason.as_bytes(), crate::limits::MAX_TEXT_BYTES, if kill { "killed" } else { "canceled" });
        self.record_intent(pid, kill, IntentOwner::Host, &reason);
        Ok(Some(Reply::IntentRecorded))
    }

    fn resolve(
        &mut self,
        id: CommandId,
        pid: &ProcessId,
        effect: &EffectId,
        settlement: crate::kernel::effect::Settlement,
    ) -> Result<Option<Reply>, CommandError> {
        let Some(p) = self.processes.get(pid) else { return Err(self.absent(pid)) };
        if p.is_terminal() || p.pending_control.has_terminal_intent() {
            return Err(CommandError::ProcessFinished(pid.clone()));
        }
        if self.has_job(pid) {
            return Err(CommandError::EffectNotPending(effect.clone()));
        }
        let Some(prepared) = &p.prepared else { return Err(CommandError::EffectNotPending(effect.clone())) };
        let Some(index) = prepared.frontier() else { return Err(CommandError::EffectNotPending(effect.clone())) };
        if &prepared.effects[index].id != effect || prepared.effects[index].phase != EffectPhase::Unknown {
            return Err(CommandError::EffectNotPending(effect.clone()));
        }
        // The earlier diagnostic is retained.
        self.set_phase(pid, index, EffectPhase::Settled(settlement), None);
        if let Err(e) = self.snapshot() {
            self.set_phase(pid, index, EffectPhase::Unknown, None);
            return Err(CommandError::InvalidSettlement(e.to_string()));
        }
        self.stage_event(pid, crate::kernel::event::names::EFFECT_RESOLVED, Some(prepared_seq(self, pid)), Some(effect));
        self.commit_effect(EffectBoundaryKind::Resolved, pid, effect, AfterCommit::Reply { id, reply: Reply::Resolved });
        Ok(None)
    }
}

impl Owner {
    /// The refusal of a command addressed to `pid` when no Process record has that id: a
    /// retired child finished (its residue keeps its id, also across restores), any other id
    /// was never in this tree. A retired child's own retired children left the cut with it,
    /// so nothing tells their ids from unknown ones any more: those are `NotFound`.
    fn absent(&self, pid: &ProcessId) -> CommandError {
        #[cfg(feature = "mutations")]
        if crate::mutation::active(crate::mutation::Mutation::RetiredChildNotFound) {
            return CommandError::NotFound(pid.clone());
        }
        if self.processes.residue(pid).is_some() {
            CommandError::ProcessFinished(pid.clone())
        } else {
            CommandError::NotFound(pid.clone())
        }
    }
}

fn prepared_seq(owner: &Owner, pid: &ProcessId) -> u64 {
    owner.processes.get(pid).and_then(|p| p.prepared.as_ref()).map(|s| s.sequence).unwrap_or(0)
}
