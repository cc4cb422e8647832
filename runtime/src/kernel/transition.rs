//! Transitions: the lifecycle intent a Step returns.

use super::effect::Effect;
use super::failure::Failure;
use super::ids::WaitId;
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ObjectWriter, Payload, ToJson, WriteJson};
use crate::text::BoundedText;

/// A candidate lifecycle intent. Every kind consumes a prefix of the delivered window; only
/// `Continue` may carry Effects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transition {
    /// Remain schedulable; the Effects run first, in declaration order.
    Continue { consumed: u32, effects: Vec<Effect> },
    /// Adopt the state, then the whole tree must be committed before this Process runs on.
    Checkpoint { consumed: u32 },
    /// Park on an Engine-minted wait the Execution already holds.
    Wait { consumed: u32, wait_id: WaitId },
    /// Strategy-requested pause. Decision: kept as a wire kind but rejected at preparation
    /// (`execution.transition.invalid`) until Pause/Resume are implemented.
    Pause { consumed: u32, reason: BoundedText },
    /// Terminal success; the output is validated against the output schema before adoption.
    Complete { consumed: u32, output: Payload },
    /// Terminal failure; the candidate state and consumption are adopted.
    Fail { consumed: u32, failure: Failure },
}

impl Transition {
    pub fn consumed(&self) -> u32 {
        match self {
            Transition::Continue { consumed, .. }
            | Transition::Checkpoint { consumed }
            | Transition::Wait { consumed, .. }
            | Transition::Pause { consumed, .. }
            | Transition::Complete { consumed, .. }
            | Transition::Fail { consumed, .. } => *consumed,
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Transition::Continue { .. } => "continue",
            Transition::Checkpoint { .. } => "checkpoint",
            Transition::Wait { .. } => "wait",
            Transition::Pause { .. } => "pause",
            Transition::Complete { .. } => "complete",
            Transition::Fail { .. } => "fail",
        }
    }

    /// The same intent without its Effects (what a prepared Step stores next to its batch).
    pub fn without_effects(&self) -> Transition {
        match self {
            Transition::Continue { consumed, .. } => {
                Transition::Continue { consumed: *consumed, effects: Vec::new() }
            }
            other => other.clone(),
        }
    }

    pub fn continue_with(consumed: u32, effects: Vec<Effect>) -> Transition {
        Transition::Continue { consumed, effects }
    }
}

impl ToJson for Transition {
    fn to_json(&self) -> Json {
        let b = ObjectBuilder::new().field("kind", self.kind()).field("consumed_signals", &self.consumed());
        match self {
            Transition::Continue { effects, .. } => b.field("effects", effects),
            Transition::Checkpoint { .. } => b,
            Transition::Wait { wait_id, .. } => b.field("wait_id", wait_id),
            Transition::Pause { reason, .. } => b.field("reason", reason),
            Transition::Complete { output, .. } => b.value("output", output.value().clone()),
            Transition::Fail { failure, .. } => b.field("failure", failure),
        }
        .build()
    }
}

impl WriteJson for Transition {
    fn write_json(&self, out: &mut String) {
        let mut w = ObjectWriter::new(out);
        w.u64("consumed_signals", u64::from(self.consumed()));
        match self {
            Transition::Continue { effects, .. } => {
                w.write("effects", effects);
            }
            Transition::Fail { failure, .. } => {
                w.field("failure", failure);
            }
            _ => {}
        }
        w.str("kind", self.kind());
        match self {
            Transition::Complete { output, .. } => {
                w.write("output", output);
            }
            Transition::Pause { reason, .. } => {
                w.field("reason", reason);
            }
            Transition::Wait { wait_id, .. } => {
                w.write("wait_id", wait_id);
            }
            _ => {}
        }
        w.finish();
    }
}

impl FromJson for Transition {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let kind: String = r.required("kind")?;
        let consumed: u32 = r.required("consumed_signals")?;
        let t = match kind.as_str() {
            "continue" => Transition::Continue { consumed, effects: r.required("effects")? },
            "checkpoint" => Transition::Checkpoint { consumed },
            "wait" => Transition::Wait { consumed, wait_id: r.required("wait_id")? },
            "pause" => Transition::Pause { consumed, reason: r.required("reason")? },
            "complete" => Transition::Complete {
                consumed,
                output: crate::kernel::signal::required_payload(&mut r, "output")?,
            },
            "fail" => Transition::Fail { consumed, failure: r.required("failure")? },
            other => return Err(DecodeError::invalid(format!("unknown transition kind `{other}`"))),
        };
        // Exactly-one-field rule: any member of another kind is unknown here.
        r.finish()?;
        Ok(t)
    }
}
