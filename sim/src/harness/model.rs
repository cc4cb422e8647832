//! The model a campaign runs: the user's script, recorded (every request the model receives
//! goes into the ledger) and the point where scripted host actions trigger.

use super::world::{ModelRequest, World};
use keel::agent::ScriptedModel;
use keel::chat::{Request, Response};
use keel::env::BoxFuture;
use keel::interaction::model::{ModelCallContext, ModelClient, ModelError};
use std::sync::Arc;

pub(crate) struct HarnessModel {
    pub script: ScriptedModel,
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
        self.script.call(cx, request).await
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
        ModelClient::identity(&self.script)
    }
}
