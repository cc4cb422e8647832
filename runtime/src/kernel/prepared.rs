//! A prepared Step: an adopted-in-waiting candidate whose Effects are being driven through
//! their phases (planned → pending → settled, in declaration order) until the whole batch is
//! settled and the candidate is adopted.

use super::effect::{check_frontier, frontier, Effect, EffectPhase, FrontierError, PreparedEffect, Settlement};
use super::failure::Failure;
use super::ids::{EffectId, ProcessId};
use super::transition::Transition;
use super::segment_record::RecordSink;
use super::waist::ExecutionState;
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ObjectWriter, ToJson};

/// A Step whose candidate waits for its batch to settle before it is adopted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreparedStep {
    /// The 1-based Step sequence that declared the batch (= committed_steps + 1).
    pub sequence: u64,
    pub candidate_state: ExecutionState,
    /// The Transition without its Effects.
    pub intent: Transition,
    pub effects: Vec<PreparedEffect>,
}

impl PreparedStep {
    /// Builds a prepared Step, deriving each EffectId from (process, sequence, index).
    pub fn new(
        process: &ProcessId,
        sequence: u64,
        candidate_state: ExecutionState,
        transition: &Transition,
    ) -> PreparedStep {
        let effects = match transition {
            Transition::Continue { effects, .. } => effects.as_slice(),
            _ => &[],
        };
        PreparedStep {
            sequence,
            candidate_state,
            intent: transition.without_effects(),
            effects: effects
                .iter()
                .enumerate()
                .map(|(i, e)| PreparedEffect {
                    id: EffectId::derive(process, sequence, i as u32),
                    effect: e.clone(),
                    phase: EffectPhase::Planned,
                    diagnostic: None,
                })
                .collect(),
        }
    }

    /// Index of the frontier Effect (first not definitely settled).
    pub fn frontier(&self) -> Option<usize> {
        frontier(&self.effects)
    }
    pub fn is_fully_settled(&self) -> bool {
        self.frontier().is_none()
    }
    /// The Unknown Effect ids, sorted.
    pub fn unknown_ids(&self) -> Vec<EffectId> {
        let mut ids: Vec<EffectId> =
            self.effects.iter().filter(|e| e.phase == EffectPhase::Unknown).map(|e| e.id.clone()).collect();
        ids.sort();
        ids
    }
    pub fn has_pending(&self) -> bool {
        self.effects.iter().any(|e| e.phase == EffectPhase::Pending)
    }
    pub fn effect_index(&self, id: &EffectId) -> Option<usize> {
        self.effects.iter().position(|e| &e.id == id)
    }
    pub fn check_frontier(&self) -> Result<(), FrontierError> {
        check_frontier(&self.effects)
    }
}

fn phase_json(e: &PreparedEffect) -> Json {
    let b = ObjectBuilder::new().field("phase", e.phase.name());
    let b = match &e.phase {
        EffectPhase::Settled(s) => b.field("settlement", s),
        _ => b,
    };
    b.opt_field("diagnostic", e.diagnostic.as_ref()).build()
}

impl PreparedStep {
    /// Every member except `candidate_state` (which [`PreparedStep::write_record`] splices).
    fn members_without_state(&self) -> ObjectBuilder {
        let effects: Vec<Json> = self
            .effects
            .iter()
            .map(|e| ObjectBuilder::new().field("effect", &e.effect).value("progress", phase_json(e)).build())
            .collect();
        ObjectBuilder::new()
            .field("sequence", &self.sequence)
            .field("intent", &self.intent)
            .value("effects", Json::Array(effects))
    }
    /// Appends the record form (the candidate state's segments as a reference whose records
    /// `sink` collects, its payload copied verbatim); byte-identical to
    /// [`PreparedStep::to_record_json`].
    ///
    /// The members are written directly, in canonical order (no tree is built; payloads are
    /// copied from their stored canonical text).
    pub fn write_record(&self, out: &mut String, sink: &mut RecordSink) {
        let mut w = ObjectWriter::new(out);
        self.candidate_state.write_record(w.key("candidate_state"), sink);
        let effects = w.key("effects");
        effects.push('[');
        for (i, e) in self.effects.iter().enumerate() {
            if i > 0 {
                effects.push(',');
            }
            let mut item = ObjectWriter::new(effects);
            item.write("effect", &e.effect);
            let mut progress = ObjectWriter::new(item.key("progress"));
            progress.opt_field("diagnostic", e.diagnostic.as_ref()).str("phase", e.phase.name());
            if let EffectPhase::Settled(s) = &e.phase {
                progress.write("settlement", s);
            }
            progress.finish();
            item.finish();
        }
        effects.push(']');
        w.write("intent", &self.intent).u64("sequence", self.sequence);
        w.finish();
    }

    /// The record form as a JSON value.
    pub fn to_record_json(&self) -> Json {
        self.members_without_state().value("candidate_state", self.candidate_state.to_record_json()).build()
    }
}

/// The value form (the candidate state's segments inline).
impl ToJson for PreparedStep {
    fn to_json(&self) -> Json {
        self.members_without_state().field("candidate_state", &self.candidate_state).build()
    }
}

fn decode_progress(value: &Json) -> Result<(EffectPhase, Option<Failure>), DecodeError> {
    let mut r = ObjectReader::new(value)?;
    let phase: String = r.required("phase")?;
    let phase = match phase.as_str() {
        "planned" => EffectPhase::Planned,
        "pending" => EffectPhase::Pending,
        "unknown" => EffectPhase::Unknown,
        "settled" => EffectPhase::Settled(r.required::<Settlement>("settlement")?),
        other => return Err(DecodeError::invalid(format!("unknown effect phase `{other}`"))),
    };
    let diagnostic = r.optional("diagnostic")?;
    r.finish()?;
    Ok((phase, diagnostic))
}

impl PreparedStep {
    /// Decodes the value form of a prepared Step of `process` (EffectIds are derived, never
    /// stored).
    pub fn decode(process: &ProcessId, value: &Json) -> Result<PreparedStep, DecodeError> {
        PreparedStep::decode_with(process, value, &mut |v| ExecutionState::from_json(v))
    }

    /// Decodes a prepared Step whose candidate state `state` decodes (value or record form).
    pub fn decode_with(
        process: &ProcessId,
        value: &Json,
        state: &mut dyn FnMut(&Json) -> Result<ExecutionState, DecodeError>,
    ) -> Result<PreparedStep, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let sequence: u64 = r.required("sequence")?;
        if sequence == 0 {
            return Err(DecodeError::invalid("a prepared step sequence is 1-based"));
        }
        let candidate_state = r.required_with("candidate_state", |v| state(v))?;
        let intent: Transition = r.required("intent")?;
        if let Transition::Continue { effects, .. } = &intent {
            if !effects.is_empty() {
                return Err(DecodeError::invalid("a prepared intent stores no effects"));
            }
        }
        let raw = r.required_value("effects")?.as_array().ok_or_else(|| DecodeError::invalid("effects must be an array"))?;
        if !raw.is_empty() && !matches!(intent, Transition::Continue { .. }) {
            return Err(DecodeError::invalid("only a continue intent carries effects"));
        }
        let mut effects = Vec::with_capacity(raw.len());
        for (i, item) in raw.iter().enumerate() {
            let decoded = (|| {
                let mut er = ObjectReader::new(item)?;
                let effect: Effect = er.required("effect")?;
                let (phase, diagnostic) = er.required_with("progress", decode_progress)?;
                er.finish()?;
                let index = u32::try_from(i).map_err(|_| DecodeError::invalid("batch too large"))?;
                Ok(PreparedEffect { id: EffectId::derive(process, sequence, index), effect, phase, diagnostic })
            })()
            .map_err(|e: DecodeError| e.in_index(i).in_member("effects"))?;
            effects.push(decoded);
        }
        r.finish()?;
        let step = PreparedStep { sequence, candidate_state, intent, effects };
        step.check_frontier().map_err(|e| DecodeError::invalid(e.to_string()))?;
        Ok(step)
    }
}
