//! Which model a run calls, recorded in its state with every switch, so that a run resumed by
//! another model is either refused or a deliberate switch the run keeps.
//!
//! Wire form (member `model` of the parent state): `{"current":ModelIdentity,
//! "switches"?:[{"from":ModelIdentity,"model_calls":u32,"to":ModelIdentity}]}`, the list
//! omitted when empty.

use super::parent::ParentState;
use crate::interaction::error::InteractionError;
use crate::interaction::model::ModelIdentity;
use crate::interaction::wire::read_nonempty_list;
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ToJson};

/// The model a Definition calls and whether its runs may change model when restored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunModel {
    /// The model client's identity.
    pub identity: ModelIdentity,
    /// Whether a run recorded with another model may continue with this one (the change is
    /// then recorded as a [`ModelSwitch`]); otherwise such a state does not restore.
    pub allow_switch: bool,
}

/// The model a run calls now, and every change of model so far, oldest first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelRecord {
    /// The model the run calls.
    pub current: ModelIdentity,
    /// Every switch, oldest first: each `from` is the previous `to`, the last `to` is `current`.
    pub switches: Vec<ModelSwitch>,
}

/// One change of model, recorded by the first Step the run took under the new model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelSwitch {
    /// The model the run called before.
    pub from: ModelIdentity,
    /// The model it calls from then on.
    pub to: ModelIdentity,
    /// Model calls the run had declared when the switch was recorded. A call that was in
    /// flight when the previous writer stopped is counted here, though the new model answers
    /// it when it is issued again.
    pub model_calls: u32,
}

impl ParentState {
    /// Brings the record up to `model` (the Definition's): records it when the state has none
    /// (a run's first Step), and appends a switch when it changed. State validation has
    /// already refused a change the Definition does not allow.
    pub(crate) fn adopt_model(&mut self, model: Option<&RunModel>) {
        let Some(model) = model else { return };
        match &mut self.model {
            None => self.model = Some(ModelRecord { current: model.identity.clone(), switches: Vec::new() }),
            Some(record) if record.current != model.identity => {
                let from = std::mem::replace(&mut record.current, model.identity.clone());
                record.switches.push(ModelSwitch { from, to: model.identity.clone(), model_calls: self.model_call_count });
            }
            Some(_) => {}
        }
    }

    /// The record's own rules: a chain of real changes ending at `current`, in call order,
    /// none after the calls made so far.
    pub(crate) fn check_model_record(&self) -> Result<(), InteractionError> {
        let Some(record) = &self.model else { return Ok(()) };
        let invalid = |d: String| InteractionError::invalid_state(format!("model: {d}"));
        let mut calls = 0;
        for (i, switch) in record.switches.iter().enumerate() {
            if switch.from == switch.to {
                return Err(invalid(format!("switches[{i}] does not change the model")));
            }
            if switch.model_calls < calls || switch.model_calls > self.model_call_count {
                return Err(invalid(format!("switches[{i}].model_calls is out of order")));
            }
            calls = switch.model_calls;
            let next = record.switches.get(i + 1).map_or(&record.current, |s| &s.from);
            if &switch.to != next {
                return Err(invalid(format!("switches[{i}].to is not the model that follows it")));
            }
        }
        Ok(())
    }

    /// Refuses a recorded model other than `model` unless the Definition allows a switch.
    pub(crate) fn check_model_against(&self, model: Option<&RunModel>) -> Result<(), InteractionError> {
        match (&self.model, model) {
            (Some(record), Some(model)) if record.current != model.identity && !model.allow_switch => {
                Err(InteractionError::invalid_state(format!(
                    "this run calls the model {}, the definition calls {} and does not allow a model switch",
                    record.current, model.identity
                )))
            }
            _ => Ok(()),
        }
    }
}

impl ToJson for ModelSwitch {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .field("from", &self.from)
            .field("model_calls", &self.model_calls)
            .field("to", &self.to)
            .build()
    }
}

impl FromJson for ModelSwitch {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let switch = ModelSwitch { from: r.required("from")?, model_calls: r.required("model_calls")?, to: r.required("to")? };
        r.finish()?;
        Ok(switch)
    }
}

impl ToJson for ModelRecord {
    fn to_json(&self) -> Json {
        ObjectBuilder::new().field("current", &self.current).nonempty_field("switches", &self.switches).build()
    }
}

impl FromJson for ModelRecord {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let record = ModelRecord { current: r.required("current")?, switches: read_nonempty_list(&mut r, "switches")? };
        r.finish()?;
        Ok(record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::Message;
    use crate::interaction::protocol::InteractionInput;

    fn state() -> ParentState {
        ParentState::start(&InteractionInput { messages: vec![Message::user("Hi")], options: Default::default(), lineage: None, budget: None, started_ms: None, deadline_ms: None })
    }

    fn run_model(model: &str, allow_switch: bool) -> RunModel {
        RunModel { identity: ModelIdentity::new("p", model), allow_switch }
    }

    #[test]
    fn a_switch_is_appended_once_and_round_trips() {
        let mut s = state();
        s.adopt_model(Some(&run_model("a", false)));
        assert_eq!(s.model.as_ref().map(|m| m.switches.len()), Some(0));
        s.model_call_count = 2;
        let b = run_model("b", true);
        s.adopt_model(Some(&b));
        s.adopt_model(Some(&b)); // a second Step under the same model adds nothing
        let record = s.model.clone().unwrap();
        assert_eq!(record.current, b.identity);
        assert_eq!(record.switches, vec![ModelSwitch { from: ModelIdentity::new("p", "a"), to: b.identity.clone(), model_calls: 2 }]);
        s.validate_structure().unwrap();
        let json = s.to_json();
        assert_eq!(ParentState::from_json(&json).unwrap(), s);
        // A Definition without a model leaves the record alone.
        s.adopt_model(None);
        assert_eq!(s.model, Some(record));
    }

    #[test]
    fn another_model_restores_only_when_a_switch_is_allowed() {
        let mut s = state();
        s.adopt_model(Some(&run_model("a", false)));
        assert!(s.check_model_against(Some(&run_model("a", false))).is_ok());
        let refused = s.check_model_against(Some(&run_model("b", false))).unwrap_err().to_string();
        assert!(refused.contains("p/a") && refused.contains("p/b"), "{refused}");
        assert!(s.check_model_against(Some(&run_model("b", true))).is_ok());
        assert!(s.check_model_against(None).is_ok());
    }

    #[test]
    fn a_broken_switch_chain_does_not_decode() {
        let mut s = state();
        s.adopt_model(Some(&run_model("a", false)));
        s.adopt_model(Some(&run_model("b", true)));
        let mut broken = s.clone();
        broken.model.as_mut().unwrap().current = ModelIdentity::new("p", "c");
        assert!(ParentState::from_json(&broken.to_json()).is_err(), "the last switch must lead to current");
        let mut ahead = s.clone();
        ahead.model.as_mut().unwrap().switches[0].model_calls = 1;
        assert!(ParentState::from_json(&ahead.to_json()).is_err(), "a switch after calls not yet made");
        let mut same = s.clone();
        let record = same.model.as_mut().unwrap();
        record.switches[0].to = record.switches[0].from.clone();
        record.current = record.switches[0].from.clone();
        assert!(ParentState::from_json(&same.to_json()).is_err(), "a switch to the same model");
    }
}
