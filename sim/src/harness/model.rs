//! The model a campaign runs: the user's script or a recorded run's responses, recorded
//! (every request the model receives goes into the ledger) and the point where scripted host
//! actions trigger.

use super::world::{ModelRequest, World};
use keel::agent::ScriptedModel;
use keel::chat::{Request, Response};
use keel::env::BoxFuture;
use keel::interaction::model::{ModelCallContext, ModelClient, ModelError};
use std::sync::Arc;

/// What answers the n-th model call.
#[derive(Clone)]
pub(crate) enum Script {
    Scripted(ScriptedModel),
    /// A recorded run's answers in call order (calls beyond them get the last one).
    Recorded(Arc<Vec<Result<Response, ModelError>>>),
}

impl Script {
    /// The answer to call `sequence` (1-based): a function of the sequence only, so a call
    /// issued again after a crash gets the same answer.
    pub fn answer(&self, sequence: u32) -> Result<Response, ModelError> {
        match self {
            Script::Scripted(s) => Ok(s.answer(sequence)),
            Script::Recorded(answers) => {
                let i = usize::try_from(sequence).unwrap_or(usize::MAX).saturating_sub(1);
                match answers.get(i).or(answers.last()) {
                    Some(a) => a.clone(),
                    None => Ok(ScriptedModel::new().answer(sequence)),
                }
            }
        }
    }
}

pub(crate) struct HarnessModel {
    pub script: Script,
    pub world: Arc<World>,
}

impl HarnessModel {
    async fn answer(
        &self,
        cx: &ModelCallContext,
        request: Request,
    ) -> Result<Response, ModelError> {
        let sequence = cx.invocation.model_call_sequence();
        let root = cx.invocation.relation().is_root();
        self.world.trace(format!(
            "model call {sequence} ({} messages, root {root})",
            request.messages.len()
        ));
        if root {
            self.world.record_model(ModelRequest {
                sequence,
                request: request.clone(),
            });
            self.world.hook(sequence).await;
        }
        self.script.answer(sequence)
    }
}

impl ModelClient for HarnessModel {
    fn call<'a>(
        &'a self,
        cx: &'a ModelCallContext,
        request: Request,
    ) -> BoxFuture<'a, Result<Response, ModelError>> {
        Box::pin(self.answer(cx, request))
    }

    /// The script's own identity: the harness is not another model.
    fn identity(&self) -> keel::interaction::model::ModelIdentity {
        match &self.script {
            Script::Scripted(s) => ModelClient::identity(s),
            // A replayed recording stands for one model throughout the campaign; restores in
            // a new runtime see the same identity.
            Script::Recorded(_) => keel::interaction::model::ModelIdentity::new("keel", "recorded"),
        }
    }
}
