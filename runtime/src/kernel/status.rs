//! Process statuses, termination causes and terminal precedence. The first terminal state
//! wins: a later intent never overwrites a recorded Result.

use super::failure::{Failure, FailureKind};
use super::ids::EffectId;
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ToJson};

/// A Process's lifecycle status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Status {
    Running,
    Waiting,
    Paused,
    Completed,
    Failed,
    Canceled,
    TimedOut,
    Killed,
}

impl Status {
    pub fn is_terminal(self) -> bool {
        !matches!(self, Status::Running | Status::Waiting | Status::Paused)
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Waiting => "waiting",
            Status::Paused => "paused",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Canceled => "canceled",
            Status::TimedOut => "timed_out",
            Status::Killed => "killed",
        }
    }
    pub fn parse(text: &str) -> Option<Status> {
        Some(match text {
            "running" => Status::Running,
            "waiting" => Status::Waiting,
            "paused" => Status::Paused,
            "completed" => Status::Completed,
            "failed" => Status::Failed,
            "canceled" => Status::Canceled,
            "timed_out" => Status::TimedOut,
            "killed" => Status::Killed,
            _ => return None,
        })
    }
}

impl ToJson for Status {
    fn to_json(&self) -> Json {
        Json::str(self.as_str())
    }
}
impl crate::json::WriteJson for Status {
    fn write_json(&self, out: &mut String) {
        crate::json::WriteJson::write_json(self.as_str(), out);
    }
}
impl FromJson for Status {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let s = crate::json::decode_str(value)?;
        Status::parse(s).ok_or_else(|| DecodeError::invalid(format!("unknown status `{s}`")))
    }
}

/// Why a Process ended. The status is derived from the cause, never stored separately.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Cause {
    Completion,
    EngineKill,
    HostDeadline,
    ParentDeadline,
    HostCancellation,
    ParentCancellation,
    ContractFailure,
    ExternalFailure,
    Panic,
    ExecutionFailure,
}

impl Cause {
    pub fn status(self) -> Status {
        match self {
            Cause::Completion => Status::Completed,
            Cause::EngineKill => Status::Killed,
            Cause::HostDeadline | Cause::ParentDeadline => Status::TimedOut,
            Cause::HostCancellation | Cause::ParentCancellation => Status::Canceled,
            Cause::ContractFailure | Cause::ExternalFailure | Cause::Panic | Cause::ExecutionFailure => {
                Status::Failed
            }
        }
    }
    pub fn of_failure(kind: FailureKind) -> Cause {
        match kind {
            FailureKind::Contract => Cause::ContractFailure,
            FailureKind::External => Cause::ExternalFailure,
            FailureKind::Panic => Cause::Panic,
            FailureKind::Execution => Cause::ExecutionFailure,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::Completion => "completion",
            Cause::EngineKill => "engine_kill",
            Cause::HostDeadline => "host_deadline",
            Cause::ParentDeadline => "parent_deadline",
            Cause::HostCancellation => "host_cancellation",
            Cause::ParentCancellation => "parent_cancellation",
            Cause::ContractFailure => "contract_failure",
            Cause::ExternalFailure => "external_failure",
            Cause::Panic => "panic",
            Cause::ExecutionFailure => "execution_failure",
        }
    }
    fn parse(text: &str) -> Option<Cause> {
        [
            Cause::Completion,
            Cause::EngineKill,
            Cause::HostDeadline,
            Cause::ParentDeadline,
            Cause::HostCancellation,
            Cause::ParentCancellation,
            Cause::ContractFailure,
            Cause::ExternalFailure,
            Cause::Panic,
            Cause::ExecutionFailure,
        ]
        .into_iter()
        .find(|c| c.as_str() == text)
    }
}

impl ToJson for Cause {
    fn to_json(&self) -> Json {
        Json::str(self.as_str())
    }
}
impl FromJson for Cause {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let s = crate::json::decode_str(value)?;
        Cause::parse(s).ok_or_else(|| DecodeError::invalid(format!("unknown cause `{s}`")))
    }
}

/// How a Process ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Termination {
    pub cause: Cause,
    /// Empty for completion; the failure message for failures; the intent reason otherwise.
    pub reason: String,
    pub failure: Option<Failure>,
    /// Sorted, distinct Unknown Effects retained in the Process's batch.
    pub unresolved_effect_ids: Vec<EffectId>,
}

impl Termination {
    pub fn status(&self) -> Status {
        self.cause.status()
    }
    pub fn validate(&self) -> Result<(), DecodeError> {
        let failed = self.cause.status() == Status::Failed;
        if failed != self.failure.is_some() {
            return Err(DecodeError::invalid("a failure is present iff the termination is failed"));
        }
        if let Some(f) = &self.failure {
            if Cause::of_failure(f.kind) != self.cause || self.reason != f.message.as_str() {
                return Err(DecodeError::invalid("termination cause/reason disagree with its failure"));
            }
        }
        if self.cause == Cause::Completion && (!self.reason.is_empty() || !self.unresolved_effect_ids.is_empty()) {
            return Err(DecodeError::invalid("a completed termination has no reason and no unresolved effects"));
        }
        if self.unresolved_effect_ids.windows(2).any(|w| w[0] >= w[1]) {
            return Err(DecodeError::invalid("unresolved effect ids must be sorted and distinct"));
        }
        Ok(())
    }
}

impl ToJson for Termination {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .field("status", &self.status())
            .field("cause", &self.cause)
            .field("reason", &self.reason)
            .opt_field("failure", self.failure.as_ref())
            .field("unresolved_effect_ids", &self.unresolved_effect_ids)
            .build()
    }
}

/// The same text as encoding [`ToJson::to_json`] (members in canonical order), without
/// building the tree: every finished Process's record writes it on every cut.
impl crate::json::WriteJson for Termination {
    fn write_json(&self, out: &mut String) {
        let mut w = crate::json::ObjectWriter::new(out);
        w.str("cause", self.cause.as_str());
        w.opt_field("failure", self.failure.as_ref());
        w.str("reason", &self.reason).str("status", self.status().as_str());
        let ids = w.key("unresolved_effect_ids");
        ids.push('[');
        for (i, id) in self.unresolved_effect_ids.iter().enumerate() {
            if i > 0 {
                ids.push(',');
            }
            crate::json::WriteJson::write_json(id, ids);
        }
        ids.push(']');
        w.finish();
    }
}

impl FromJson for Termination {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let status: Status = r.required("status")?;
        let t = Termination {
            cause: r.required("cause")?,
            reason: r.required("reason")?,
            failure: r.optional("failure")?,
            unresolved_effect_ids: r.required("unresolved_effect_ids")?,
        };
        r.finish()?;
        if status != t.status() {
            return Err(DecodeError::invalid("termination status disagrees with its cause"));
        }
        t.validate()?;
        Ok(t)
    }
}

/// Who recorded a cancellation or deadline intent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntentOwner {
    Host,
    Parent,
}

impl ToJson for IntentOwner {
    fn to_json(&self) -> Json {
        Json::str(match self {
            IntentOwner::Host => "host",
            IntentOwner::Parent => "parent",
        })
    }
}
impl FromJson for IntentOwner {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        match crate::json::decode_str(value)? {
            "host" => Ok(IntentOwner::Host),
            "parent" => Ok(IntentOwner::Parent),
            other => Err(DecodeError::invalid(format!("unknown intent owner `{other}`"))),
        }
    }
}

/// Recorded control intents not yet applied. At most one of each kind; the first recorded is
/// authoritative (later ones are ignored).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PendingControl {
    pub kill: Option<String>,
    pub deadline: Option<(IntentOwner, String)>,
    pub cancellation: Option<(IntentOwner, String)>,
    pub failure: Option<Failure>,
}

impl PendingControl {
    pub fn is_empty(&self) -> bool {
        self.kill.is_none() && self.deadline.is_none() && self.cancellation.is_none() && self.failure.is_none()
    }

    /// Whether any terminal intent is recorded.
    pub fn has_terminal_intent(&self) -> bool {
        !self.is_empty()
    }

    /// Terminal precedence: kill > deadline > cancel > recorded failure > the
    /// Step's own outcome (`step_outcome`: a `fail` Failure or `None` for completion).
    pub fn resolve(&self, step_outcome: Option<Option<&Failure>>) -> Option<(Cause, String, Option<Failure>)> {
        if let Some(reason) = &self.kill {
            return Some((Cause::EngineKill, reason.clone(), None));
        }
        if let Some((owner, reason)) = &self.deadline {
            let cause = if *owner == IntentOwner::Host { Cause::HostDeadline } else { Cause::ParentDeadline };
            return Some((cause, reason.clone(), None));
        }
        if let Some((owner, reason)) = &self.cancellation {
            let cause =
                if *owner == IntentOwner::Host { Cause::HostCancellation } else { Cause::ParentCancellation };
            return Some((cause, reason.clone(), None));
        }
        let failure = self.failure.as_ref().or(step_outcome.flatten());
        if let Some(f) = failure {
            return Some((Cause::of_failure(f.kind), f.message.as_str().to_owned(), Some(f.clone())));
        }
        step_outcome.map(|_| (Cause::Completion, String::new(), None))
    }
}

fn intent_json(intent: &(IntentOwner, String)) -> Json {
    ObjectBuilder::new().field("owner", &intent.0).field("reason", &intent.1).build()
}

fn intent_from(value: &Json) -> Result<(IntentOwner, String), DecodeError> {
    let mut r = ObjectReader::new(value)?;
    let i = (r.required("owner")?, r.required("reason")?);
    r.finish()?;
    Ok(i)
}

impl ToJson for PendingControl {
    fn to_json(&self) -> Json {
        let mut b = ObjectBuilder::new().opt_field("kill_reason", self.kill.as_ref());
        if let Some(d) = &self.deadline {
            b = b.value("deadline", intent_json(d));
        }
        if let Some(c) = &self.cancellation {
            b = b.value("cancellation", intent_json(c));
        }
        b.opt_field("failure", self.failure.as_ref()).build()
    }
}

/// An empty record (the common case) is written directly; any other through its tree.
impl crate::json::WriteJson for PendingControl {
    fn write_json(&self, out: &mut String) {
        if self.is_empty() {
            out.push_str("{}");
        } else {
            self.to_json().write_canonical(out);
        }
    }
}

impl FromJson for PendingControl {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let pc = PendingControl {
            kill: r.optional("kill_reason")?,
            deadline: match r.optional_value("deadline")? {
                Some(v) => Some(intent_from(v).map_err(|e| e.in_member("deadline"))?),
                None => None,
            },
            cancellation: match r.optional_value("cancellation")? {
                Some(v) => Some(intent_from(v).map_err(|e| e.in_member("cancellation"))?),
                None => None,
            },
            failure: r.optional("failure")?,
        };
        r.finish()?;
        Ok(pc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_termination_writer_is_the_canonical_encoding() {
        let p = crate::kernel::ids::ProcessId::parse("process:writer").unwrap();
        let ids = vec![EffectId::derive(&p, 1, 0), EffectId::derive(&p, 2, 1)];
        let f = Failure::new(crate::kernel::failure::codes::DISPATCH_FAILED, "boom \"quoted\"");
        let cases = [
            Termination { cause: Cause::Completion, reason: String::new(), failure: None, unresolved_effect_ids: vec![] },
            Termination { cause: Cause::ExternalFailure, reason: "boom".into(), failure: Some(f), unresolved_effect_ids: ids.clone() },
            Termination { cause: Cause::EngineKill, reason: "killed\n".into(), failure: None, unresolved_effect_ids: ids[..1].to_vec() },
        ];
        for t in cases {
            let mut out = String::new();
            crate::json::WriteJson::write_json(&t, &mut out);
            assert_eq!(out, t.to_json().to_canonical_string());
        }
    }

    #[test]
    fn precedence_kill_deadline_cancel_failure_completion() {
        let f = Failure::new(crate::kernel::failure::codes::DISPATCH_FAILED, "boom");
        let mut pc = PendingControl::default();
        assert_eq!(pc.resolve(Some(None)).map(|r| r.0), Some(Cause::Completion));
        assert_eq!(pc.resolve(None), None, "no intent and no step outcome → not terminal");
        pc.failure = Some(f.clone());
        assert_eq!(pc.resolve(Some(None)).map(|r| r.0), Some(Cause::ExternalFailure));
        pc.cancellation = Some((IntentOwner::Parent, "parent canceled".into()));
        assert_eq!(pc.resolve(Some(Some(&f))).map(|r| r.0), Some(Cause::ParentCancellation));
        pc.deadline = Some((IntentOwner::Host, "late".into()));
        assert_eq!(pc.resolve(None).map(|r| r.0), Some(Cause::HostDeadline));
        pc.kill = Some("stop".into());
        assert_eq!(pc.resolve(None).map(|r| r.0), Some(Cause::EngineKill));
    }
}
