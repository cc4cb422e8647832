//! Model stream deltas to the host: the model dispatcher wrapped with a delta sink.
//!
//! The kernel hands a dispatcher a delta sink only when one is configured; the agent's model
//! dispatcher is wrapped so every streamed delta of a run reaches that run's bounded queue
//! (see `tracker::MAX_RUN_DELTAS`). A delegate's model calls are its agent's dispatcher's: they
//! find the run through the delegating agent's hub and are tagged with the delegate's name. Deltas are attempt facts: a crash may lose or repeat them,
//! and the committed response is complete whatever happened to them.

use super::events::RunEvent;
use super::tracker::Hub;
use crate::env::BoxFuture;
use crate::interaction::protocol::ModelResponseDelta;
use crate::interaction::wire::Wire;
use crate::json::Payload;
use crate::kernel::dispatcher::{DeltaSink, DispatchContext, DispatchError, DispatchPolicy, Dispatcher, EffectRequest};
use crate::kernel::effect::Settlement;
use std::sync::Arc;

/// A dispatcher that routes its deltas to the run of the request's tree.
pub(crate) struct DeltaTap {
    pub(crate) inner: Arc<dyn Dispatcher>,
    pub(crate) hub: Arc<Hub>,
}

impl Dispatcher for DeltaTap {
    fn policy(&self, effect: &Payload) -> DispatchPolicy {
        self.inner.policy(effect)
    }

    fn dispatch<'a>(&'a self, request: EffectRequest, mut cx: DispatchContext) -> BoxFuture<'a, Result<Settlement, DispatchError>> {
        if let Some(run) = self.hub.tree_run(&request.relation.root_id) {
            // Only a delegate's run is a Process other than its tree's root.
            let delegate = (request.process_id != request.relation.root_id).then(|| self.hub.trace_config().agent.clone());
            let process = request.process_id.clone();
            let call = request.effect_id.clone();
            let outer = cx.deltas.take();
            let sink: DeltaSink = Arc::new(move |payload: Payload| {
                if let Some(outer) = &outer {
                    outer(payload.clone());
                }
                let text = ModelResponseDelta::from_payload(&payload).ok().and_then(|d| d.response_delta.text);
                // Increments with only tool-call or finish data carry nothing to show.
                if let Some(text) = text.filter(|t| !t.is_empty()) {
                    run.push_delta(RunEvent::ModelDelta { process: process.clone(), delegate: delegate.clone(), call: call.clone(), text });
                }
                true
            });
            cx.deltas = Some(sink);
        }
        self.inner.dispatch(request, cx)
    }
}
