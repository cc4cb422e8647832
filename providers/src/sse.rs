//! A bounded decoder of server-sent events (the `text/event-stream` format both providers
//! stream in).
//!
//! Bytes arrive in arbitrary chunks (a chunk may end in the middle of a line, of a JSON value
//! or of a UTF-8 character); the decoder buffers until a line ends and emits an event at each
//! blank line. Only `event` and `data` fields matter here; comments (`:` lines), `id` and
//! `retry` are skipped. Lines end in LF, CRLF or CR.
//!
//! When the body ends, [`SseDecoder::finish`] hands over the last event even if its closing
//! blank line (or its last line end) never came: servers differ in how they frame the end of
//! a stream, and whether the stream was whole is for its content to say, not its framing.

/// Largest event (its data lines plus the line being read) the decoder buffers. A provider
/// event is one JSON delta, far below this.
pub const MAX_SSE_EVENT_BYTES: usize = 4 << 20;

/// One dispatched event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, if any.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// Why the event stream is unusable.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    #[error("an event is larger than {limit} bytes")]
    TooLarge { limit: usize },
    #[error("event stream is not valid UTF-8")]
    InvalidUtf8,
}

/// The decoder state between chunks.
#[derive(Debug, Default)]
pub struct SseDecoder {
    line: Vec<u8>,
    /// The previous chunk ended in CR: a leading LF of the next chunk belongs to that line end.
    after_cr: bool,
    event: Option<String>,
    data: Option<String>,
    buffered: usize,
}

impl SseDecoder {
    pub fn new() -> SseDecoder {
        SseDecoder::default()
    }

    /// Feeds one chunk; returns the events it completed, in order.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<SseEvent>, SseError> {
        let mut events = Vec::new();
        for &byte in chunk {
            if self.after_cr {
                self.after_cr = false;
                if byte == b'\n' {
                    continue;
                }
            }
            match byte {
                b'\n' | b'\r' => {
                    self.after_cr = byte == b'\r';
                    if let Some(event) = self.end_line()? {
                        events.push(event);
                    }
                }
                _ => {
                    self.buffered += 1;
                    if self.buffered > MAX_SSE_EVENT_BYTES {
                        return Err(SseError::TooLarge { limit: MAX_SSE_EVENT_BYTES });
                    }
                    self.line.push(byte);
                }
            }
        }
        Ok(events)
    }

    /// Whether bytes of an unfinished event are buffered ([`SseDecoder::finish`] hands them over
    /// when the body ends there).
    pub fn is_mid_event(&self) -> bool {
        !self.line.is_empty() || self.data.is_some() || self.event.is_some()
    }

    /// The body ended: the event still being read, as if its line and its blank line had
    /// come. `None` when nothing but comments, empty lines or fields without data remain.
    /// The caller judges whether that event is whole (its data may be cut anywhere).
    pub fn finish(&mut self) -> Result<Option<SseEvent>, SseError> {
        self.after_cr = false;
        if !self.line.is_empty() {
            // Cannot be an event: only a blank line dispatches one.
            let _ = self.end_line()?;
        }
        self.buffered = 0;
        let event = self.event.take();
        Ok(self.data.take().map(|data| SseEvent { event, data }))
    }

    fn end_line(&mut self) -> Result<Option<SseEvent>, SseError> {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            self.buffered = 0;
            let event = self.event.take();
            return Ok(self.data.take().map(|data| SseEvent { event, data }));
        }
        let line = String::from_utf8(line).map_err(|_| SseError::InvalidUtf8)?;
        if line.starts_with(':') {
            return Ok(None);
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_str(), ""),
        };
        match field {
            "event" => self.event = Some(value.to_owned()),
            "data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            },
            _ => {}
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(text: &str) -> SseEvent {
        SseEvent { event: None, data: text.into() }
    }

    #[test]
    fn events_survive_any_chunking() {
        let stream = "event: a\ndata: {\"x\":\"é\"}\n\n: keep-alive\n\ndata: 1\r\ndata: 2\r\n\r\nid: 7\ndata:[DONE]\r\r";
        let expected = vec![
            SseEvent { event: Some("a".into()), data: "{\"x\":\"é\"}".into() },
            data("1\n2"),
            data("[DONE]"),
        ];
        for size in 1..stream.len() {
            let mut decoder = SseDecoder::new();
            let mut events = Vec::new();
            for chunk in stream.as_bytes().chunks(size) {
                events.extend(decoder.push(chunk).unwrap());
            }
            assert_eq!(events, expected, "chunk size {size}");
            assert!(!decoder.is_mid_event());
        }
    }

    #[test]
    fn a_cut_event_is_visible_and_limits_hold() {
        let mut decoder = SseDecoder::new();
        assert_eq!(decoder.push(b"data: {\"partial\""), Ok(vec![]));
        assert!(decoder.is_mid_event());
        let mut decoder = SseDecoder::new();
        let big = vec![b'a'; MAX_SSE_EVENT_BYTES + 1];
        assert_eq!(decoder.push(&big), Err(SseError::TooLarge { limit: MAX_SSE_EVENT_BYTES }));
        let mut decoder = SseDecoder::new();
        assert_eq!(decoder.push(b"data: \xff\n\n"), Err(SseError::InvalidUtf8));
    }

    #[test]
    fn finish_hands_over_the_last_event_whatever_its_framing() {
        for tail in ["data: [DONE]", "data: [DONE]\n", "data: [DONE]\r\n", "data: [DONE]\r", "data: [DONE]\n: keep-alive"] {
            for size in 1..=tail.len() {
                let mut decoder = SseDecoder::new();
                let mut events = Vec::new();
                for chunk in tail.as_bytes().chunks(size) {
                    events.extend(decoder.push(chunk).unwrap());
                }
                assert!(events.is_empty(), "{tail:?}: no blank line, no event yet");
                assert_eq!(decoder.finish(), Ok(Some(data("[DONE]"))), "{tail:?} in chunks of {size}");
                assert_eq!(decoder.finish(), Ok(None), "handed over once");
            }
        }
        // Nothing but a comment, a blank line or a field without data: no event.
        for tail in ["", ": keep-alive", ": keep-alive\n", "data: 1\n\n: ping", "event: message_stop\n", "id: 3"] {
            let mut decoder = SseDecoder::new();
            let done = decoder.push(tail.as_bytes()).unwrap();
            assert_eq!(decoder.finish(), Ok(None), "{tail:?} (pushed {done:?})");
        }
        // A cut event comes out cut: judging it is the caller's part.
        let mut decoder = SseDecoder::new();
        decoder.push(b"event: x\ndata: {\"a\":").unwrap();
        assert_eq!(decoder.finish(), Ok(Some(SseEvent { event: Some("x".into()), data: "{\"a\":".into() })));
        let mut decoder = SseDecoder::new();
        decoder.push(b"data: \xc3").unwrap();
        assert_eq!(decoder.finish(), Err(SseError::InvalidUtf8), "a character cut in half");
    }
}
