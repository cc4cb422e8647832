//! The durable record of one Process: everything a snapshot carries.
//! Live-only facts (the Execution instance, in-flight jobs) live in the owner, not here.

use super::capability::CapabilitySet;
use super::deployment::DeploymentRef;
use super::ids::{ProcessId, WaitId};
use super::mailbox::Mailbox;
use super::prepared::PreparedStep;
use super::relation::Relation;
use super::resource::{Allocation, Budget, Usage};
use super::retired::RetiredChildren;
use super::status::{PendingControl, Status, Termination};
use super::segment_record::RecordSink;
use super::waist::ExecutionState;
use crate::env::Timestamp;
use crate::json::{
    DecodeError, Digest, FromJson, Json, ObjectBuilder, ObjectReader, ObjectWriter, Payload, ToJson, WriteJson,
};

/// Facts recorded when a Process terminates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finish {
    pub finished_at: Timestamp,
    /// Present exactly for Completed.
    pub output: Option<Payload>,
    pub termination: Termination,
}

/// One Process's durable state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Process {
    pub id: ProcessId,
    pub relation: Relation,
    /// SHA-256 of the ChildSpec that started this child; present iff the Process is a child.
    pub child_request_digest: Option<Digest>,
    pub deployment_ref: DeploymentRef,
    pub started_at: Timestamp,
    pub status: Status,
    pub committed_steps: u64,
    pub budget: Budget,
    /// Permanent debits granted to children (finite dimensions only).
    pub allocated: Allocation,
    pub capabilities: CapabilitySet,
    pub prepared_effects: u64,
    pub dropped_deltas: u64,
    pub committed_state: ExecutionState,
    pub mailbox: Mailbox,
    pub prepared: Option<PreparedStep>,
    pub current_wait_id: Option<WaitId>,
    pub pending_control: PendingControl,
    pub finish: Option<Finish>,
    /// The residue of finished children whose Results this Process consumed (compaction);
    /// empty unless a child was retired.
    pub retired: RetiredChildren,
}

impl Process {
    pub fn is_terminal(&self) -> bool {
        self.status.is_terminal()
    }

    /// Usage is derived from the durable counters, never stored twice.
    pub fn usage(&self) -> Usage {
        Usage {
            committed_steps: self.committed_steps,
            prepared_effects: self.prepared_effects,
            accepted_signals: self.mailbox.len(),
            dropped_deltas: self.dropped_deltas,
        }
    }

    /// A copy of every member except the prepared step (`None`): finalization builds its
    /// candidate from this instead of cloning the whole batch and dropping it again.
    /// Destructured so a new member cannot be forgotten.
    pub fn clone_without_prepared(&self) -> Process {
        let Process {
            id,
            relation,
            child_request_digest,
            deployment_ref,
            started_at,
            status,
            committed_steps,
            budget,
            allocated,
            capabilities,
            prepared_effects,
            dropped_deltas,
            committed_state,
            mailbox,
            prepared: _,
            current_wait_id,
            pending_control,
            finish,
            retired,
        } = self;
        Process {
            id: id.clone(),
            relation: relation.clone(),
            child_request_digest: *child_request_digest,
            deployment_ref: deployment_ref.clone(),
            started_at: *started_at,
            status: *status,
            committed_steps: *committed_steps,
            budget: *budget,
            allocated: *allocated,
            capabilities: capabilities.clone(),
            prepared_effects: *prepared_effects,
            dropped_deltas: *dropped_deltas,
            committed_state: committed_state.clone(),
            mailbox: mailbox.clone(),
            prepared: None,
            current_wait_id: current_wait_id.clone(),
            pending_control: pending_control.clone(),
            finish: finish.clone(),
            retired: *retired,
        }
    }

    /// Parked: waiting or paused, or running while holding an Unknown (checkpoint class).
    pub fn is_parked(&self) -> bool {
        match self.status {
            Status::Waiting | Status::Paused => true,
            Status::Running => self.prepared.as_ref().is_some_and(|p| !p.unknown_ids().is_empty()),
            _ => false,
        }
    }
}

impl ToJson for Finish {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .field("finished_at", &self.finished_at)
            .opt_field("output", self.output.as_ref().map(Payload::value))
            .field("termination", &self.termination)
            .build()
    }
}

impl WriteJson for Finish {
    fn write_json(&self, out: &mut String) {
        let mut w = ObjectWriter::new(out);
        w.write("finished_at", &self.finished_at).opt_write("output", self.output.as_ref());
        w.write("termination", &self.termination);
        w.finish();
    }
}

impl FromJson for Finish {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let f = Finish {
            finished_at: r.required("finished_at")?,
            output: crate::kernel::signal::optional_payload(&mut r, "output")?,
            termination: r.required("termination")?,
        };
        r.finish()?;
        Ok(f)
    }
}

impl Process {
    /// Appends the canonical record of this Process as a cut holds it: its states in record
    /// form (segments named by reference; `sink` collects the segment records, committed
    /// state first, then the prepared candidate's). The states' payloads are copied from their
    /// stored canonical text instead of being cloned and re-encoded, and no segment bytes are
    /// touched; the bytes are identical to encoding [`Process::to_record_json`] (a unit test
    /// and every snapshot decode check this).
    ///
    /// Every member is written straight into `out` in canonical key order (no intermediate
    /// tree: this runs for each changed record of every cut); only rare members (a
    /// termination, non-empty pending control, retired children) go through their trees.
    pub fn write_record(&self, out: &mut String, sink: &mut RecordSink) {
        let mut w = ObjectWriter::new(out);
        w.write("allocated_resources", &self.allocated)
            .write("budget", &self.budget)
            .write("capabilities", &self.capabilities)
            .opt_write("child_request_digest", self.child_request_digest.as_ref());
        self.committed_state.write_record(w.key("committed_execution_state"), sink);
        w.u64("committed_steps", self.committed_steps);
        let mut counters = ObjectWriter::new(w.key("counters"));
        counters.u64("dropped_deltas", self.dropped_deltas).u64("prepared_effects", self.prepared_effects);
        counters.finish();
        w.opt_write("current_wait_id", self.current_wait_id.as_ref())
            .write("deployment_ref", &self.deployment_ref)
            .opt_write("finish", self.finish.as_ref())
            .write("mailbox", &self.mailbox)
            .write("pending_control", &self.pending_control);
        if let Some(p) = &self.prepared {
            p.write_record(w.key("prepared"), sink);
        }
        w.write("process_id", &self.id).write("relation", &self.relation);
        if !self.retired.is_empty() {
            w.field("retired_children", &self.retired);
        }
        w.write("started_at", &self.started_at).write("status", &self.status);
        w.finish();
    }

    /// A size to reserve for [`Process::write_record`]: the stored payloads it copies plus
    /// room for the fixed members (a hint only; the buffer grows if it is short).
    pub fn record_len_hint(&self) -> usize {
        let prepared = self.prepared.as_ref().map_or(0, |p| p.candidate_state.payload.len().saturating_add(512));
        let records = self.mailbox.records().iter().map(|r| match r.body() {
            super::mailbox::RecordBody::Pending(p) => p.len().saturating_add(160),
            super::mailbox::RecordBody::Consumed(_) => 160,
        });
        let mailbox = records.fold(0usize, usize::saturating_add);
        self.committed_state.payload.len().saturating_add(prepared).saturating_add(mailbox).saturating_add(1024)
    }

    /// The record form as a JSON value.
    pub fn to_record_json(&self) -> Json {
        let b = self.members_without_states().value("committed_execution_state", self.committed_state.to_record_json());
        match &self.prepared {
            Some(p) => b.value("prepared", p.to_record_json()).build(),
            None => b.build(),
        }
    }

    /// Decodes the record form, resolving its states' segment references through `segments`.
    pub fn decode_record(
        value: &Json,
        segments: &mut dyn FnMut(&Json) -> Result<Vec<std::sync::Arc<super::segment::Segment>>, DecodeError>,
    ) -> Result<Process, DecodeError> {
        Process::decode_with(value, &mut |v| ExecutionState::decode_record(v, segments))
    }
}

/// The value form: the states' segments inline (the record form differs only there).
impl ToJson for Process {
    fn to_json(&self) -> Json {
        self.members_without_states()
            .field("committed_execution_state", &self.committed_state)
            .opt_field("prepared", self.prepared.as_ref())
            .build()
    }
}

impl Process {
    /// Every member except the committed execution state and the prepared step.
    fn members_without_states(&self) -> ObjectBuilder {
        ObjectBuilder::new()
            .field("process_id", &self.id)
            .field("relation", &self.relation)
            .opt_field("child_request_digest", self.child_request_digest.as_ref())
            .field("deployment_ref", &self.deployment_ref)
            .field("started_at", &self.started_at)
            .field("status", &self.status)
            .field("committed_steps", &self.committed_steps)
            .field("budget", &self.budget)
            .field("allocated_resources", &self.allocated)
            .field("capabilities", &self.capabilities)
            .value(
                "counters",
                ObjectBuilder::new()
                    .field("prepared_effects", &self.prepared_effects)
                    .field("dropped_deltas", &self.dropped_deltas)
                    .build(),
            )
            .field("mailbox", &self.mailbox)
            .opt_field("current_wait_id", self.current_wait_id.as_ref())
            .field("pending_control", &self.pending_control)
            .opt_field("finish", self.finish.as_ref())
            .opt_field("retired_children", (!self.retired.is_empty()).then_some(&self.retired))
    }
}

impl FromJson for Process {
    /// Structural decode of the value form only; cross-field validation is
    /// `snapshot::validate_process`.
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        Process::decode_with(value, &mut |v| ExecutionState::from_json(v))
    }
}

/// Members of a record already decoded elsewhere (the oracle's record decoder takes them from
/// an earlier decoding of the same text); `None`: read from the record. A taken member must be
/// absent from the record tree, so the record's unknown-member check still covers the rest.
#[derive(Default)]
pub(crate) struct TakenMembers {
    pub(crate) relation: Option<Relation>,
    pub(crate) deployment_ref: Option<DeploymentRef>,
    pub(crate) budget: Option<Budget>,
    pub(crate) capabilities: Option<CapabilitySet>,
    pub(crate) mailbox: Option<Mailbox>,
    pub(crate) pending_control: Option<PendingControl>,
    pub(crate) finish: Option<Finish>,
    pub(crate) retired: Option<RetiredChildren>,
}

impl Process {
    fn decode_with(
        value: &Json,
        state: &mut dyn FnMut(&Json) -> Result<ExecutionState, DecodeError>,
    ) -> Result<Process, DecodeError> {
        Process::decode_taking(value, TakenMembers::default(), state)
    }

    /// The record decoding, with the members in `taken` given instead of read: the one place
    /// that says which members a record requires, allows and refuses.
    pub(crate) fn decode_taking(
        value: &Json,
        taken: TakenMembers,
        state: &mut dyn FnMut(&Json) -> Result<ExecutionState, DecodeError>,
    ) -> Result<Process, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let id: ProcessId = r.required("process_id")?;
        let relation = match taken.relation {
            Some(v) => v,
            None => r.required("relation")?,
        };
        let child_request_digest = r.optional("child_request_digest")?;
        let deployment_ref = match taken.deployment_ref {
            Some(v) => v,
            None => r.required("deployment_ref")?,
        };
        let started_at = r.required("started_at")?;
        let status = r.required("status")?;
        let committed_steps = r.required("committed_steps")?;
        let budget = match taken.budget {
            Some(v) => v,
            None => r.required("budget")?,
        };
        let allocated = r.required("allocated_resources")?;
        let capabilities = match taken.capabilities {
            Some(v) => v,
            None => r.required("capabilities")?,
        };
        let (prepared_effects, dropped_deltas) = r.required_with("counters", |v| {
            let mut c = ObjectReader::new(v)?;
            let out = (c.required("prepared_effects")?, c.required("dropped_deltas")?);
            c.finish()?;
            Ok(out)
        })?;
        let committed_state = r.required_with("committed_execution_state", |v| state(v))?;
        let mailbox = match taken.mailbox {
            Some(v) => v,
            None => r.required("mailbox")?,
        };
        let prepared = match r.optional_value("prepared")? {
            Some(v) => Some(PreparedStep::decode_with(&id, v, state).map_err(|e| e.in_member("prepared"))?),
            None => None,
        };
        let current_wait_id = r.optional("current_wait_id")?;
        let pending_control = match taken.pending_control {
            Some(v) => v,
            None => r.required("pending_control")?,
        };
        let finish = match taken.finish {
            Some(v) => Some(v),
            None => r.optional("finish")?,
        };
        let retired = match taken.retired {
            Some(v) => v,
            None => r.optional("retired_children")?.unwrap_or_default(),
        };
        r.finish()?;
        Ok(Process {
            id,
            relation,
            child_request_digest,
            deployment_ref,
            started_at,
            status,
            committed_steps,
            budget,
            allocated,
            capabilities,
            prepared_effects,
            dropped_deltas,
            committed_state,
            mailbox,
            prepared,
            current_wait_id,
            pending_control,
            finish,
            retired,
        })
    }
}

/// Diagnostic surfaces of the durable record.
impl Process {
    /// The Unknown Effects retained in the prepared batch, sorted.
    pub fn unknown_effect_ids(&self) -> Vec<super::ids::EffectId> {
        self.prepared.as_ref().map(|s| s.unknown_ids()).unwrap_or_default()
    }

    /// Every definite settlement recorded in the prepared batch, in declaration order.
    pub fn settlements(&self) -> Vec<(super::ids::EffectId, super::effect::Settlement)> {
        self.prepared
            .iter()
            .flat_map(|s| s.effects.iter())
            .filter_map(|e| match &e.phase {
                super::effect::EffectPhase::Settled(s) => Some((e.id.clone(), s.clone())),
                _ => None,
            })
            .collect()
    }

    /// The bounded diagnostic recorded for an Effect, if any.
    pub fn effect_diagnostic(&self, effect: &super::ids::EffectId) -> Option<&super::failure::Failure> {
        let prepared = self.prepared.as_ref()?;
        prepared.effects.iter().find(|e| &e.id == effect)?.diagnostic.as_ref()
    }

    /// Every admitted Signal in arrival order, with its committed consumption state.
    pub fn signal_receipts(&self) -> Vec<super::mailbox::SignalReceipt> {
        self.mailbox.receipts()
    }
}
