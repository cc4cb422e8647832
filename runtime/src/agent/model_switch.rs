//! The model is part of a run: each run records the model it calls (in its Interaction state,
//! from its first Step). A run resumed by an agent calling another model is refused with
//! [`ModelChanged`], unless the agent was built with
//! [`allow_model_switch`](AgentBuilder::allow_model_switch): then the run's next Step records
//! the switch, which the run keeps ([`RunResult::model_switches`](super::RunResult::model_switches))
//! and reports ([`RunEvent::ModelSwitched`](super::RunEvent::ModelSwitched)).

use super::builder::AgentBuilder;
use super::run_error::debug_as_display;
use crate::interaction::model::ModelIdentity;
use crate::interaction::state::{ModelRecord, ParentState, RunModel};
use crate::json::FromJson;
use crate::kernel::process::Process;
use crate::kernel::snapshot::TreeSnapshot;
use std::collections::BTreeMap;

impl AgentBuilder {
    /// Lets a stored run continue with this agent's model although it was started (or last
    /// continued) with another one: to move a run to another provider while one is down, or
    /// to another model. Without it, [`Runtime::resume`](super::Runtime::resume) refuses such a
    /// run with [`RunError::ModelChanged`](super::RunError::ModelChanged).
    ///
    /// The switch is a deliberate, recorded choice: the run's next Step records it (the model
    /// before, the model after, and how many model calls the run had made), the run's events
    /// report a [`RunEvent::ModelSwitched`](super::RunEvent::ModelSwitched), and its result
    /// lists every switch ([`RunResult::model_switches`](super::RunResult::model_switches)).
    /// A model call that was in flight when the previous writer stopped is issued again by
    /// the new model. Part of the configuration digest: runs must be started by an agent that
    /// allows switching for a later agent (with another model) to continue them.
    ///
    /// ```
    /// use keel::prelude::*;
    /// let agent = Agent::builder("support")
    ///     .version("1")
    ///     .model(ScriptedModel::new().then_text("Hello!"))
    ///     .allow_model_switch()
    ///     .build()?;
    /// # let _ = agent;
    /// # Ok::<(), BuildError>(())
    /// ```
    pub fn allow_model_switch(mut self) -> AgentBuilder {
        self.allow_model_switch = true;
        self
    }
}

/// A stored run refused because it calls another model than this agent, and the agent does
/// not allow a model switch. Its message is one line naming both models.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "run {run} calls the model {recorded}, this agent calls {current}: resume it with an agent calling {recorded}, \
     or start runs with `.allow_model_switch()` to let a later agent switch models (the switch is recorded in the run)"
)]
pub struct ModelChanged {
    /// The run (or, for a delegate's model, the delegate's Process in it).
    pub run: String,
    /// The model the run records.
    pub recorded: ModelIdentity,
    /// The model this agent calls.
    pub current: ModelIdentity,
}
debug_as_display!(ModelChanged);

/// The model record of one Process: the state its pending Step will adopt when it has one (a
/// Step that declared Effects), else its committed state. `None` for a Process that is not an
/// Interaction parent or has no record yet.
pub(crate) fn recorded_model(process: &Process) -> Option<ModelRecord> {
    let state = process.prepared.as_ref().map_or(&process.committed_state, |p| &p.candidate_state);
    if state.kind.as_str() != ParentState::KIND {
        return None;
    }
    ModelRecord::from_json(state.payload.value().get("model")?).ok()
}

/// Refuses a stored tree in which a Process of one of `models`' deployments records another
/// model than that deployment calls, where it does not allow a switch.
pub(crate) fn check_models(run: &str, snapshot: &TreeSnapshot, models: &BTreeMap<String, RunModel>) -> Result<(), ModelChanged> {
    for process in snapshot.processes() {
        let Some(model) = models.get(&process.deployment_ref.to_string()) else { continue };
        let Some(record) = recorded_model(process) else { continue };
        if record.current != model.identity && !model.allow_switch {
            let run = if process.relation.is_root() { run.to_owned() } else { format!("{run} (delegate {})", process.id) };
            return Err(ModelChanged { run, recorded: record.current, current: model.identity.clone() });
        }
    }
    Ok(())
}
