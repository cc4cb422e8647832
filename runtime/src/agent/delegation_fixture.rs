//! The delegation of the agent tests: a parent "boss" whose model hands its delegate "helper"
//! one task ("Find it."), then answers "Done.". Shared by `budget_tests`, `time_budget_tests`
//! and `outcome_tests`.

use super::{Agent, AgentBuilder, ScriptedModel};
use crate::interaction::model::ModelClient;

/// The parent's script: one call of "helper" with the task, then the answer "Done.".
pub(super) fn calls_helper() -> ScriptedModel {
    let task = r#"{"messages":[{"role":"user","parts":[{"type":"text","text":"Find it."}]}]}"#;
    ScriptedModel::new().call_tool("helper", task).then_text("Done.")
}

/// The parent "boss" answering with `model` (`calls_helper`, or a model wrapping it), with
/// `helper` as its delegate "helper".
pub(super) fn boss(model: impl ModelClient, helper: Agent) -> AgentBuilder {
    Agent::builder("boss").version("1").model(model).delegate("helper", "Ask the helper.", helper)
}
