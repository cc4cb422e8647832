//! Effects: the only way a Step asks for work outside itself. A `continue` Transition declares
//! them; the owner runs them one at a time in declaration order and hands each outcome to the
//! next Step as a Signal.

use super::child::{ChildSpec, ChildWaitSpec};
use super::failure::Failure;
use super::ids::{EffectId, WaitKey};
use super::signal::{optional_payload, required_payload, SettlementStatus};
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ObjectWriter, Payload, ToJson, WriteJson};

/// An Effect declared by a `continue` Transition.
#[allow(clippy::large_enum_variant)] // few per Step and short-lived: boxing buys nothing
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Interpreted by the kernel; the set is closed.
    Framework(FrameworkEffect),
    /// An opaque request handed whole to the Deployment's Dispatcher.
    Dispatcher(Payload),
}

/// The closed set of kernel-interpreted Effects this runtime supports.
///
/// Decision: `signal_child` / `cancel_child` are not implemented yet; their wire
/// operation names are rejected as unknown.
#[allow(clippy::large_enum_variant)] // few per Step and short-lived: boxing buys nothing
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameworkEffect {
    /// Open an external wait. `payload` (optional) is echoed back in the opening Signal so a
    /// strategy can check that the wait it parks on is the one it asked for.
    Wait { key: WaitKey, payload: Option<Payload> },
    /// Start one child Process.
    StartChild(ChildSpec),
    /// Wait for direct children to reach a boundary.
    WaitChildren(ChildWaitSpec),
}

impl Effect {
    pub fn is_dispatcher(&self) -> bool {
        matches!(self, Effect::Dispatcher(_))
    }
}

impl ToJson for Effect {
    fn to_json(&self) -> Json {
        match self {
            Effect::Dispatcher(p) => ObjectBuilder::new()
                .field("target", "dispatcher")
                .value("payload", p.value().clone())
                .build(),
            Effect::Framework(FrameworkEffect::Wait { key, payload }) => ObjectBuilder::new()
                .field("target", "framework")
                .field("operation", "wait")
                .field("key", key)
                .opt_field("payload", payload.as_ref().map(Payload::value))
                .build(),
            Effect::Framework(FrameworkEffect::StartChild(spec)) => ObjectBuilder::new()
                .field("target", "framework")
                .field("operation", "start_child")
                .field("spec", spec)
                .build(),
            Effect::Framework(FrameworkEffect::WaitChildren(spec)) => ObjectBuilder::new()
                .field("target", "framework")
                .field("operation", "wait_children")
                .field("spec", spec)
                .build(),
        }
    }
}


impl FromJson for Effect {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let target: String = r.required("target")?;
        let effect = match target.as_str() {
            "dispatcher" => Effect::Dispatcher(required_payload(&mut r, "payload")?),
            "framework" => {
                let op: String = r.required("operation")?;
                Effect::Framework(match op.as_str() {
                    "wait" => FrameworkEffect::Wait {
                        key: r.required("key")?,
                        payload: optional_payload(&mut r, "payload")?,
                    },
                    "start_child" => FrameworkEffect::StartChild(r.required("spec")?),
                    "wait_children" => FrameworkEffect::WaitChildren(r.required("spec")?),
                    other => {
                        return Err(DecodeError::invalid(format!(
                            "unknown framework operation `{other}`"
                        )))
                    }
                })
            }
            other => return Err(DecodeError::invalid(format!("unknown effect target `{other}`"))),
        };
        r.finish()?;
        Ok(effect)
    }
}

/// A definite outcome of an Effect: the status owns success, the payload carries the result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settlement {
    pub status: SettlementStatus,
    pub payload: Payload,
}

/// The dispatcher and wait forms (every Effect the hot path writes) are written directly,
/// their payloads copied from the stored canonical text; child specs go through their tree.
impl WriteJson for Effect {
    fn write_json(&self, out: &mut String) {
        let mut w = ObjectWriter::new(out);
        match self {
            Effect::Dispatcher(p) => {
                w.write("payload", p).str("target", "dispatcher");
            }
            Effect::Framework(FrameworkEffect::Wait { key, payload }) => {
                w.write("key", key).str("operation", "wait").opt_write("payload", payload.as_ref());
                w.str("target", "framework");
            }
            Effect::Framework(FrameworkEffect::StartChild(spec)) => {
                w.str("operation", "start_child").field("spec", spec).str("target", "framework");
            }
            Effect::Framework(FrameworkEffect::WaitChildren(spec)) => {
                w.str("operation", "wait_children").field("spec", spec).str("target", "framework");
            }
        }
        w.finish();
    }
}

impl ToJson for Settlement {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .field("status", &self.status)
            .value("payload", self.payload.value().clone())
            .build()
    }
}

impl WriteJson for Settlement {
    fn write_json(&self, out: &mut String) {
        let mut w = ObjectWriter::new(out);
        w.write("payload", &self.payload).write("status", &self.status);
        w.finish();
    }
}

impl FromJson for Settlement {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let s = Settlement { status: r.required("status")?, payload: required_payload(&mut r, "payload")? };
        r.finish()?;
        Ok(s)
    }
}

/// Where one Effect of a prepared batch stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EffectPhase {
    /// No dispatch permission yet.
    Planned,
    /// Permission granted and committed; work may have started; no result.
    Pending,
    /// Definitely settled.
    Settled(Settlement),
    /// The outcome cannot be proven. Occupies the frontier like `Pending` until a host
    /// resolves it; never converted or retried by the kernel on its own.
    Unknown,
}

impl EffectPhase {
    pub fn is_definite(&self) -> bool {
        matches!(self, EffectPhase::Settled(_))
    }
    pub fn name(&self) -> &'static str {
        match self {
            EffectPhase::Planned => "planned",
            EffectPhase::Pending => "pending",
            EffectPhase::Settled(_) => "settled",
            EffectPhase::Unknown => "unknown",
        }
    }
}

/// One Effect inside a prepared Step, with its derived identity and progress.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreparedEffect {
    pub id: EffectId,
    pub effect: Effect,
    pub phase: EffectPhase,
    /// Bounded diagnostic of an uncertain or failed outcome (only once settled or unknown).
    pub diagnostic: Option<Failure>,
}

/// Why a batch violates the frontier invariant.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("batch frontier violated at index {index}: {reason}")]
pub struct FrontierError {
    pub index: usize,
    pub reason: &'static str,
}

/// Checks the frontier invariant: a prefix of definitely settled Effects, then at
/// most one pending-or-unknown Effect, then only planned Effects.
pub fn check_frontier(effects: &[PreparedEffect]) -> Result<(), FrontierError> {
    let mut i = 0;
    while i < effects.len() && effects[i].phase.is_definite() {
        i += 1;
    }
    if i < effects.len() && matches!(effects[i].phase, EffectPhase::Pending | EffectPhase::Unknown) {
        i += 1;
    }
    for (index, e) in effects.iter().enumerate().skip(i) {
        if e.phase != EffectPhase::Planned {
            return Err(FrontierError { index, reason: "a non-planned effect follows the frontier" });
        }
    }
    for (index, e) in effects.iter().enumerate() {
        let settled = matches!(e.phase, EffectPhase::Settled(_) | EffectPhase::Unknown);
        if e.diagnostic.is_some() && !settled {
            return Err(FrontierError { index, reason: "diagnostic on an unsettled effect" });
        }
    }
    Ok(())
}

/// Index of the first effect that is not definitely settled (the frontier), if any.
pub fn frontier(effects: &[PreparedEffect]) -> Option<usize> {
    effects.iter().position(|e| !e.phase.is_definite())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eff(phase: EffectPhase) -> PreparedEffect {
        let pid = super::super::ids::ProcessId::parse("process:p").unwrap();
        PreparedEffect {
            id: EffectId::derive(&pid, 1, 0),
            effect: Effect::Framework(FrameworkEffect::Wait {
                key: WaitKey::parse("k").unwrap(),
                payload: None,
            }),
            phase,
            diagnostic: None,
        }
    }

    #[test]
    fn frontier_shapes() {
        use EffectPhase::*;
        let ok = |p: Vec<EffectPhase>| check_frontier(&p.into_iter().map(eff).collect::<Vec<_>>());
        assert!(ok(vec![]).is_ok());
        assert!(ok(vec![Planned, Planned]).is_ok());
        assert!(ok(vec![Pending, Planned]).is_ok());
        assert!(ok(vec![Unknown, Planned]).is_ok());
        assert!(ok(vec![Pending, Pending]).is_err());
        assert!(ok(vec![Unknown, Pending]).is_err());
        assert!(ok(vec![Planned, Pending]).is_err());
        let mut d = eff(Planned);
        d.diagnostic = Some(super::super::failure::Failure::new(super::super::failure::codes::DISPATCH_FAILED, "x"));
        assert!(check_frontier(&[d]).is_err(), "diagnostic only once settled");
    }
}
