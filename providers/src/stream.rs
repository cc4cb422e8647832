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

    /// The body ended without the terminal event. Appends what that event would have added
    /// and returns whether what arrived is a whole answer (then the missing terminal event is
    /// mere framing); `false` means the stream was cut.
    fn end_without_terminal(&mut self, out: &mut Vec<ResponseDelta>) -> bool;

    /// Whether the data of an event the body ended in, without its blank line, is whole.
    /// Provider events are one JSON value each, so an event cut anywhere does not parse.
    fn is_whole(&self, data: &str) -> bool {
        serde_json::from_str::<serde_json::Value>(data).is_ok()
    }
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
            None => return self.end(),
        };
        let events = self
            .decoder
            .push(&chunk)
            .map_err(|e| ProviderError::malformed(P::PROVIDER, format!("event stream: {e}")))?;
        let mut out = Vec::new();
        for event in events {
            if self.parse(event, &mut out)? {
                break;
            }
        }
        self.queue(out);
        Ok(())
    }

    /// The body ended. Whether the stream was whole is judged by what arrived, not by its
    /// framing: the last event may lack its blank line or its line end (LF or CRLF), a
    /// keep-alive comment may follow it, and a server may close without the terminal event
    /// once the answer is complete. A stream cut inside an event, or before the answer was
    /// complete, is a lost connection: the model may have answered.
    fn end(&mut self) -> Result<(), ProviderError> {
        let lost = |detail: &str| ProviderError::ConnectionLost { provider: P::PROVIDER, detail: detail.into() };
        let mut out = Vec::new();
        // Invalid UTF-8 here is a character cut in half: a cut stream.
        let tail = self.decoder.finish().map_err(|_| lost("the stream ended in the middle of an event"))?;
        if let Some(event) = tail {
            if !self.parser.is_whole(&event.data) {
                return Err(lost("the stream ended in the middle of an event"));
            }
            if self.parse(event, &mut out)? {
                self.queue(out);
                return Ok(());
            }
        }
        if !self.parser.end_without_terminal(&mut out) {
            return Err(lost("the stream ended before its final event"));
        }
        self.ended = true;
        self.queue(out);
        Ok(())
    }

    /// Parses one event; `true` (and the stream ended) at the terminal event.
    fn parse(&mut self, event: SseEvent, out: &mut Vec<ResponseDelta>) -> Result<bool, ProviderError> {
        self.events += 1;
        if self.events > MAX_STREAM_EVENTS {
            return Err(ProviderError::malformed(P::PROVIDER, format!("more than {MAX_STREAM_EVENTS} stream events")));
        }
        let terminal = self.parser.event(event, out)?;
        self.ended |= terminal;
        Ok(terminal)
    }

    fn queue(&mut self, out: Vec<ResponseDelta>) {
        // Parsers never build empty deltas on purpose; dropping them keeps the accumulator's
        // "empty delta" rule for real protocol errors.
        self.pending.extend(out.into_iter().filter(|d| !is_empty(d)));
    }
}

fn is_empty(delta: &ResponseDelta) -> bool {
    delta.text.is_none()
        && delta.tool_calls.is_empty()
        && delta.reasoning.is_empty()
        && delta.finish_reason.is_none()
        && delta.usage.is_none()
}
