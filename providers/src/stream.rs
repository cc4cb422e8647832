//! A streamed HTTP body as keel's delta stream: SSE decoding, then a provider's event parser.

use crate::error::ProviderError;
use crate::http::Chunks;
use crate::sse::{SseDecoder, SseEvent};
use futures::StreamExt;
use keel::chat::ResponseDelta;
use keel::interaction::model::{ModelDeltaStream, ModelError};
use std::collections::VecDeque;

/// Most events one streamed response may carry.
pub const MAX_STREAM_EVENTS: u64 = 1 << 20;

/// Maps one provider's server-sent events to deltas.
pub(crate) trait EventParser: Send + 'static {
    const PROVIDER: &'static str;

    /// Maps one event, appending its deltas (possibly none). Returns `true` at the provider's
    /// terminal event.
    fn event(&mut self, event: SseEvent, out: &mut Vec<ResponseDelta>) -> Result<bool, ProviderError>;

    /// Whether a body that ends without the terminal event still carried a whole answer.
    fn complete_without_end(&self) -> bool;
}

struct State<P> {
    chunks: Chunks,
    decoder: SseDecoder,
    parser: P,
    pending: VecDeque<ResponseDelta>,
    events: u64,
    ended: bool,
}

/// The deltas of `chunks` parsed by `parser`. The stream ends after the terminal event (the
/// rest of the body is not read), or with one error item.
pub(crate) fn deltas<P: EventParser>(chunks: Chunks, parser: P) -> ModelDeltaStream<'static> {
    let state = State { chunks, decoder: SseDecoder::new(), parser, pending: VecDeque::new(), events: 0, ended: false };
    futures::stream::unfold(Some(state), |state| async move {
        let mut state = state?;
        loop {
            if let Some(delta) = state.pending.pop_front() {
                return Some((Ok(delta), Some(state)));
            }
            if state.ended {
                return None;
            }
            match state.next().await {
                Ok(()) => continue,
                Err(e) => return Some((Err(ModelError::from(e)), None)),
            }
        }
    })
    .boxed()
}

impl<P: EventParser> State<P> {
    /// Reads one chunk and parses the events it completes; marks the end.
    async fn next(&mut self) -> Result<(), ProviderError> {
        let chunk = match self.chunks.next().await {
            Some(chunk) => chunk?,
            None => {
                if self.decoder.is_mid_event() || !self.parser.complete_without_end() {
                    return Err(ProviderError::ConnectionLost {
                        provider: P::PROVIDER,
                        detail: "the stream ended before its final event".into(),
                    });
                }
                self.ended = true;
                return Ok(());
            }
        };
        let events = self
            .decoder
            .push(&chunk)
            .map_err(|e| ProviderError::malformed(P::PROVIDER, format!("event stream: {e}")))?;
        let mut out = Vec::new();
        for event in events {
            self.events += 1;
            if self.events > MAX_STREAM_EVENTS {
                return Err(ProviderError::malformed(P::PROVIDER, format!("more than {MAX_STREAM_EVENTS} stream events")));
            }
            if self.parser.event(event, &mut out)? {
                self.ended = true;
                break;
            }
        }
        // Parsers never build empty deltas on purpose; dropping them keeps the accumulator's
        // "empty delta" rule for real protocol errors.
        self.pending.extend(out.into_iter().filter(|d| !is_empty(d)));
        Ok(())
    }
}

fn is_empty(delta: &ResponseDelta) -> bool {
    delta.text.is_none() && delta.tool_calls.is_empty() && delta.finish_reason.is_none() && delta.usage.is_none()
}
