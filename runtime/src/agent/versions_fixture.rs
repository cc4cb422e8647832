//! The concierge of the version tests, in two versions: version 1 asks the user which city,
//! then answers "Booked by v1."; version 2 answers "Booked by v2." at once (so a run continued
//! under it by mistake answers its text). Shared by `agent::versions_tests` and the simulator's
//! `sim/tests/version_pinning.rs`, which include this file by path: the names come from the
//! including module's prelude.

use super::{Agent, AskHuman, ScriptedModel};

/// The concierge under `version`, answering with `model`.
pub fn concierge(version: &str, model: ScriptedModel) -> Agent {
    Agent::builder("concierge")
        .version(version)
        .model(model)
        .tool(AskHuman::new("ask_user", "Asks the user a question."))
        .build()
        .unwrap()
}

pub fn v1() -> Agent {
    concierge("1", ScriptedModel::new().call_tool("ask_user", r#"{"question":"Which city?"}"#).then_text("Booked by v1."))
}

pub fn v2() -> Agent {
    concierge("2", ScriptedModel::new().then_text("Booked by v2."))
}
