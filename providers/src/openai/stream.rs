//! OpenAI Chat Completions stream chunks as keel deltas.
//!
//! Each `data:` event is a `chat.completion.chunk`: `choices[0].delta` carries `content`,
//! `refusal`, `tool_calls` fragments and, from some compatible servers, `reasoning_content`
//! (or `reasoning`) text kept as a reasoning part (assembled by keel's accumulator by their `index`),
//! `choices[0].finish_reason` arrives once, and with `stream_options.include_usage` a last
//! chunk with empty `choices` carries `usage`. `data: [DONE]` ends the stream; a body that
//! ends without it after the finish reason carried a whole answer too.

use super::response::{finish_reason, usage};
use super::PROVIDER;
use crate::error::ProviderError;
use crate::sse::SseEvent;
use crate::stream::EventParser;
use crate::wire::{object, opt_array, opt_str, opt_u64, parse_body};
use keel::chat::{FinishReason, ReasoningDelta, ResponseDelta, ToolCallDelta};
use serde_json::Value;

/// Why several choices fail a call, and what to do.
pub(crate) const ONE_ANSWER: &str =
    "a keel response holds one answer, so the request must ask for one (`n` absent or 1; set `n: 1` in options.extra if the server defaults to more)";

/// The error of a chunk or response carrying `count` choices.
pub(crate) fn several_choices(count: usize) -> ProviderError {
    ProviderError::malformed(PROVIDER, format!("{count} choices in one response; {ONE_ANSWER}"))
}

#[derive(Debug, Default)]
pub(crate) struct OpenAiEvents {
    refusal: bool,
    finished: bool,
}

impl EventParser for OpenAiEvents {
    const PROVIDER: &'static str = PROVIDER;

    fn event(&mut self, event: SseEvent, out: &mut Vec<ResponseDelta>) -> Result<bool, ProviderError> {
        if event.data.trim() == "[DONE]" {
            return Ok(true);
        }
        let value = parse_body(PROVIDER, event.data.as_bytes(), "a stream chunk")?;
        let chunk = object(PROVIDER, &value, "a stream chunk")?;
        if let Some(error) = chunk.get("error") {
            // Compatible servers report a failure after the stream started this way.
            let (kind, message) = match error {
                Value::Object(e) => (
                    opt_str(PROVIDER, e, "type", "error")?.unwrap_or("error").to_owned(),
                    opt_str(PROVIDER, e, "message", "error")?.unwrap_or("").to_owned(),
                ),
                other => ("error".to_owned(), other.to_string()),
            };
            return Err(ProviderError::Stream { provider: PROVIDER, kind, message: crate::error::bounded(message) });
        }
        let mut delta = ResponseDelta::default();
        let choices = opt_array(PROVIDER, chunk, "choices", "chunk")?;
        if choices.len() > 1 {
            return Err(several_choices(choices.len()));
        }
        if let Some(choice) = choices.first() {
            let choice = object(PROVIDER, choice, "chunk.choices[0]")?;
            // A stream's choices arrive interleaved, told apart only by `index`: a second one
            // merged into the first would garble the answer, so the call fails instead.
            if let Some(index) = opt_u64(PROVIDER, choice, "index", "chunk.choices[0]")?.filter(|i| *i != 0) {
                return Err(ProviderError::malformed(
                    PROVIDER,
                    format!("the stream carries choice {index}, a second answer; {ONE_ANSWER}"),
                ));
            }
            if let Some(d) = choice.get("delta").filter(|d| !d.is_null()) {
                let d = object(PROVIDER, d, "chunk.choices[0].delta")?;
                let what = "chunk.choices[0].delta";
                let mut text = String::new();
                if let Some(content) = opt_str(PROVIDER, d, "content", what)? {
                    text.push_str(content);
                }
                if let Some(refusal) = opt_str(PROVIDER, d, "refusal", what)?.filter(|r| !r.is_empty()) {
                    self.refusal = true;
                    text.push_str(refusal);
                }
                if !text.is_empty() {
                    delta.text = Some(text);
                }
                // Reasoning some compatible servers stream beside the answer (DeepSeek, vLLM:
                // `reasoning_content`; others: `reasoning`): kept as one reasoning part, never
                // answer text; sent back only with `OpenAiConfig::send_reasoning`.
                for key in ["reasoning_content", "reasoning"] {
                    // `reasoning` is an object on some servers: only its text form is taken.
        let text = if key == "reasoning" { d.get(key).and_then(Value::as_str) } else { opt_str(PROVIDER, d, key, what)? };
        if let Some(reasoning) = text.filter(|r| !r.is_empty()) {
                        delta.reasoning.push(ReasoningDelta { index: 0, text: Some(reasoning.to_owned()), ..ReasoningDelta::default() });
                        break;
                    }
                }
                for (position, call) in opt_array(PROVIDER, d, "tool_calls", what)?.iter().enumerate() {
                    let what = format!("{what}.tool_calls[{position}]");
                    let call = object(PROVIDER, call, &what)?;
                    let index = match opt_u64(PROVIDER, call, "index", &what)? {
                        Some(i) => u32::try_from(i)
                            .map_err(|_| ProviderError::malformed(PROVIDER, format!("{what}.index is too large")))?,
                        // Some compatible servers omit the index of one-piece calls.
                        None => u32::try_from(position).unwrap_or(u32::MAX),
                    };
                    let function = match call.get("function") {
                        None | Some(Value::Null) => None,
                        Some(f) => Some(object(PROVIDER, f, &format!("{what}.function"))?),
                    };
                    let name = match function {
                        Some(f) => opt_str(PROVIDER, f, "name", &what)?,
                        None => None,
                    };
                    let arguments = match function {
                        Some(f) => opt_str(PROVIDER, f, "arguments", &what)?,
                        None => None,
                    };
                    let fragment = ToolCallDelta {
                        index,
                        id: opt_str(PROVIDER, call, "id", &what)?.filter(|s| !s.is_empty()).map(str::to_owned),
                        name: name.filter(|s| !s.is_empty()).map(str::to_owned),
                        arguments: arguments.filter(|s| !s.is_empty()).map(str::to_owned),
                    };
                    if fragment.id.is_some() || fragment.name.is_some() || fragment.arguments.is_some() {
                        delta.tool_calls.push(fragment);
                    }
                }
            }
            if let Some(reason) = opt_str(PROVIDER, choice, "finish_reason", "chunk.choices[0]")? {
                if !self.finished {
                    self.finished = true;
                    delta.finish_reason = Some(if self.refusal { FinishReason::Refusal } else { finish_reason(reason) });
                }
            }
        }
        match chunk.get("usage") {
            None | Some(Value::Null) => {}
            Some(u) => delta.usage = Some(usage(object(PROVIDER, u, "chunk.usage")?)?),
        }
        out.push(delta);
        Ok(false)
    }

    fn end_without_terminal(&mut self, _out: &mut Vec<ResponseDelta>) -> bool {
        // A server that closes after the finish reason without `[DONE]` still sent a whole
        // answer (only a trailing usage chunk could be missing).
        self.finished
    }

    fn is_whole(&self, data: &str) -> bool {
        data.trim() == "[DONE]" || serde_json::from_str::<Value>(data).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(events: &[&str]) -> Result<Vec<ResponseDelta>, ProviderError> {
        let mut parser = OpenAiEvents::default();
        let mut out = Vec::new();
        for data in events {
            parser.event(SseEvent { event: None, data: (*data).to_owned() }, &mut out)?;
        }
        Ok(out)
    }

    #[test]
    fn a_refusal_turns_the_finish_reason_into_refusal() {
        let out = run(&[
            r#"{"choices":[{"index":0,"delta":{"refusal":"No."},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        ])
        .unwrap();
        assert_eq!(out[0].text.as_deref(), Some("No."));
        assert_eq!(out[1].finish_reason, Some(FinishReason::Refusal));
    }

    #[test]
    fn a_second_choice_fails_the_stream_instead_of_merging() {
        let first = r#"{"choices":[{"index":0,"delta":{"content":"Mild."},"finish_reason":null}]}"#;
        for second in [
            r#"{"choices":[{"index":1,"delta":{"content":"Warm."},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"a"}},{"index":1,"delta":{"content":"b"}}]}"#,
        ] {
            let e = run(&[first, second]).unwrap_err();
            assert!(matches!(e, ProviderError::Malformed { .. }) && e.to_string().contains("`n` absent or 1"), "{second}: {e}");
        }
        // Servers that omit the index of the one choice are fine.
        let out = run(&[r#"{"choices":[{"delta":{"content":"x"}}]}"#]).unwrap();
        assert_eq!(out[0].text.as_deref(), Some("x"));
    }

    #[test]
    fn hostile_chunks_are_typed_errors() {
        for data in [
            "not json",
            "[]",
            r#"{"choices":[{"delta":{"tool_calls":[{"index":99999999999,"id":"a"}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":-1,"id":"a"}]}}]}"#,
            r#"{"choices":[{"delta":{"content":7}}]}"#,
            r#"{"choices":{}}"#,
            r#"{"usage":{"prompt_tokens":-3}}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":"x"}]}}]}"#,
        ] {
            let e = run(&[data]).unwrap_err();
            assert!(matches!(e, ProviderError::Malformed { .. }), "{data}: {e}");
        }
        let e = run(&[r#"{"error":{"type":"server_error","message":"boom"}}"#]).unwrap_err();
        assert!(matches!(e, ProviderError::Stream { ref kind, .. } if kind == "server_error"), "{e}");
    }
}
