//! Streaming mode: accumulate every delta, emit each one. Deltas are observational; the
//! settled response is the accumulation alone.

use super::client::ModelStreamer;
use super::context::ModelCallContext;
use super::error::ModelError;
use crate::chat::{Accumulator, ChatError, Request, Response, ResponseDelta};
use crate::interaction::protocol::ModelResponseDelta;
use crate::interaction::wire::Wire;
use crate::kernel::dispatcher::DeltaSink;
use futures::StreamExt;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Runs one streamed call to its end. The response is the accumulator's result alone, so
/// listeners (present, absent, dropping or panicking) never change it.
pub(crate) async fn stream_response(
    streamer: &dyn ModelStreamer,
    cx: &ModelCallContext,
    request: Request,
    deltas: Option<&DeltaSink>,
) -> Result<Response, ModelError> {
    let mut stream = streamer.stream(cx, request).await?;
    let mut accumulator = Accumulator::new();
    while let Some(item) = stream.next().await {
        let delta = item?;
        accumulator
            .push(&delta)
            .map_err(|e| ModelError::Provider(format!("model stream yielded an invalid delta: {e}")))?;
        // Only accumulated (so valid) deltas are emitted: a listener never sees a delta the
        // response does not contain.
        if let Some(sink) = deltas {
            emit(sink, delta);
        }
    }
    accumulator.finish().map_err(|e| match e {
        ChatError::NoDeltas => ModelError::Provider("model stream yielded no deltas".into()),
        e => ModelError::Provider(format!("model stream produced an invalid response: {e}")),
    })
}

/// Best effort: a delta that does not fit a payload, a rejected emit and a panicking sink are
/// all just dropped (the kernel accounts for dropped deltas itself).
fn emit(sink: &DeltaSink, delta: ResponseDelta) {
    let Ok(payload) = (ModelResponseDelta { response_delta: delta }).to_payload() else {
        return;
    };
    let _accepted = catch_unwind(AssertUnwindSafe(|| sink(payload)));
}
