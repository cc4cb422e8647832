//! Anthropic Messages stream events as keel deltas.
//!
//! `message_start` carries the input usage; `content_block_start` opens a text, `tool_use`,
//! `thinking` or `redacted_thinking` block at a content index; `content_block_delta` carries
//! `text_delta`, `input_json_delta`, `thinking_delta` or `signature_delta` fragments (thinking
//! becomes a reasoning part, in the order of the thinking blocks, never answer text); `content_block_stop` closes a block; `message_delta`
//! carries the `stop_reason` and cumulative output usage; `message_stop` ends the stream (a
//! body that ends without it, once the stop reason arrived and every block was closed, carried
//! a whole answer too); `ping` is ignored and `error` fails the call. keel's tool call index is the ordinal of the
//! `tool_use` block among the message's tool calls, not the content index.

use super::response::{stop_reason, usage};
use super::PROVIDER;
use crate::error::{bounded, ProviderError};
use crate::sse::SseEvent;
use crate::stream::EventParser;
use crate::wire::{object, opt_str, opt_u64, parse_body, req_str};
use keel::chat::{ReasoningDelta, ResponseDelta, ToolCallDelta, Usage};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// What a content index holds.
#[derive(Debug)]
enum Block {
    Text,
    /// A tool call: its ordinal, and whether any argument fragment arrived.
    Tool { ordinal: u32, arguments: bool },
    /// A `thinking` or `redacted_thinking` block: its ordinal among the reasoning parts.
    Thinking { ordinal: u32 },
    /// A block keel's message cannot hold (server tools): its deltas are skipped.
    Skipped,
}

#[derive(Debug, Default)]
pub(crate) struct AnthropicEvents {
    blocks: BTreeMap<u64, Block>,
    tools: u32,
    thinking: u32,
    usage: Option<Usage>,
    finished: bool,
    /// Content blocks started and not yet stopped.
    open: BTreeSet<u64>,
}

impl AnthropicEvents {
    /// The end of the message: usage from `message_start` alone (no `message_delta` usage)
    /// still counts.
    fn stop(&self, out: &mut Vec<ResponseDelta>) {
        if let Some(u) = self.usage {
            out.push(ResponseDelta { usage: Some(u), ..ResponseDelta::default() });
        }
    }

    fn index(&self, data: &Map<String, Value>, what: &str) -> Result<u64, ProviderError> {
        opt_u64(PROVIDER, data, "index", what)?
            .ok_or_else(|| ProviderError::malformed(PROVIDER, format!("{what}.index is missing")))
    }
}

impl EventParser for AnthropicEvents {
    const PROVIDER: &'static str = PROVIDER;

    fn event(&mut self, event: SseEvent, out: &mut Vec<ResponseDelta>) -> Result<bool, ProviderError> {
        let value = parse_body(PROVIDER, event.data.as_bytes(), "a stream event")?;
        let data = object(PROVIDER, &value, "a stream event")?;
        let kind = req_str(PROVIDER, data, "type", "event")?;
        match kind {
            "message_start" => {
                let message = data.get("message").unwrap_or(&Value::Null);
                if let Some(u) = message.get("usage").filter(|u| !u.is_null()) {
                    self.usage = Some(usage(object(PROVIDER, u, "message_start.message.usage")?, None)?);
                }
            }
            "content_block_start" => {
                let index = self.index(data, kind)?;
                let block = data
                    .get("content_block")
                    .ok_or_else(|| ProviderError::malformed(PROVIDER, "content_block_start.content_block is missing"))?;
                let block = object(PROVIDER, block, "content_block_start.content_block")?;
                let what = "content_block_start.content_block";
                let opened = match req_str(PROVIDER, block, "type", what)? {
                    "text" => {
                        if let Some(text) = opt_str(PROVIDER, block, "text", what)?.filter(|t| !t.is_empty()) {
                            out.push(ResponseDelta::text(text));
                        }
                        Block::Text
                    }
                    "tool_use" => {
                        let ordinal = self.tools;
                        self.tools = self.tools.saturating_add(1);
                        out.push(ResponseDelta {
                            tool_calls: vec![ToolCallDelta {
                                index: ordinal,
                                id: Some(req_str(PROVIDER, block, "id", what)?.to_owned()),
                                name: Some(req_str(PROVIDER, block, "name", what)?.to_owned()),
                                arguments: None,
                            }],
                            ..ResponseDelta::default()
                        });
                        Block::Tool { ordinal, arguments: false }
                    }
                    kind @ ("thinking" | "redacted_thinking") => {
                        let ordinal = self.thinking;
                        self.thinking = self.thinking.saturating_add(1);
                        let mut fragment = ReasoningDelta { index: ordinal, ..ReasoningDelta::default() };
                        if kind == "thinking" {
                            fragment.text = opt_str(PROVIDER, block, "thinking", what)?.filter(|t| !t.is_empty()).map(str::to_owned);
                            fragment.signature = opt_str(PROVIDER, block, "signature", what)?.filter(|s| !s.is_empty()).map(str::to_owned);
                        } else {
                            fragment.redacted = Some(req_str(PROVIDER, block, "data", what)?.to_owned()).filter(|d| !d.is_empty());
                        }
                        // An empty start still opens the part, so later ordinals stay dense.
                        if fragment.text.is_none() && fragment.signature.is_none() && fragment.redacted.is_none() {
                            fragment.text = Some(String::new());
                        }
                        out.push(ResponseDelta { reasoning: vec![fragment], ..ResponseDelta::default() });
                        Block::Thinking { ordinal }
                    }
                    _ => Block::Skipped,
                };
                if self.blocks.insert(index, opened).is_some() {
                    return Err(ProviderError::malformed(PROVIDER, format!("content block {index} started twice")));
                }
                self.open.insert(index);
            }
            "content_block_delta" => {
                let index = self.index(data, kind)?;
                let delta = data
                    .get("delta")
                    .ok_or_else(|| ProviderError::malformed(PROVIDER, "content_block_delta.delta is missing"))?;
                let delta = object(PROVIDER, delta, "content_block_delta.delta")?;
                let what = "content_block_delta.delta";
                let delta_type = req_str(PROVIDER, delta, "type", what)?;
                match (self.blocks.get_mut(&index), delta_type) {
                    (None, _) => {
                        return Err(ProviderError::malformed(PROVIDER, format!("delta for content block {index}, which never started")))
                    }
                    (Some(Block::Text), "text_delta") => {
                        if let Some(text) = opt_str(PROVIDER, delta, "text", what)?.filter(|t| !t.is_empty()) {
                            out.push(ResponseDelta::text(text));
                        }
                    }
                    (Some(Block::Tool { ordinal, arguments }), "input_json_delta") => {
                        if let Some(json) = opt_str(PROVIDER, delta, "partial_json", what)?.filter(|t| !t.is_empty()) {
                            *arguments = true;
                            out.push(ResponseDelta {
                                tool_calls: vec![ToolCallDelta {
                                    index: *ordinal,
                                    arguments: Some(json.to_owned()),
                                    ..ToolCallDelta::default()
                                }],
                                ..ResponseDelta::default()
                            });
                        }
                    }
                    (Some(Block::Thinking { ordinal }), kind @ ("thinking_delta" | "signature_delta")) => {
                        let (member, text) = if kind == "thinking_delta" { ("thinking", true) } else { ("signature", false) };
                        if let Some(value) = opt_str(PROVIDER, delta, member, what)?.filter(|t| !t.is_empty()) {
                            let mut fragment = ReasoningDelta { index: *ordinal, ..ReasoningDelta::default() };
                            if text {
                                fragment.text = Some(value.to_owned());
                            } else {
                                fragment.signature = Some(value.to_owned());
                            }
                            out.push(ResponseDelta { reasoning: vec![fragment], ..ResponseDelta::default() });
                        }
                    }
                    // Other deltas of a thinking block (added after this client) carry nothing
                    // keel sends back.
                    (Some(Block::Thinking { .. }), _) | (Some(Block::Skipped), _) => {}
                    (Some(block), other) => {
                        return Err(ProviderError::malformed(
                            PROVIDER,
                            format!("a `{other}` delta for content block {index}, which is {block:?}"),
                        ))
                    }
                }
            }
            "content_block_stop" => {
                let index = self.index(data, kind)?;
                self.open.remove(&index);
                match self.blocks.get(&index) {
                    None => {
                        return Err(ProviderError::malformed(PROVIDER, format!("content block {index} stopped but never started")))
                    }
                    // A tool with no input streams no fragment; its complete form is `{}`.
                    Some(Block::Tool { ordinal, arguments: false }) => out.push(ResponseDelta {
                        tool_calls: vec![ToolCallDelta {
                            index: *ordinal,
                            arguments: Some("{}".into()),
                            ..ToolCallDelta::default()
                        }],
                        ..ResponseDelta::default()
                    }),
                    Some(_) => {}
                }
            }
            "message_delta" => {
                let mut delta = ResponseDelta::default();
                if let Some(d) = data.get("delta").filter(|d| !d.is_null()) {
                    let d = object(PROVIDER, d, "message_delta.delta")?;
                    if let Some(reason) = opt_str(PROVIDER, d, "stop_reason", "message_delta.delta")? {
                        if !self.finished {
                            self.finished = true;
                            delta.finish_reason = Some(stop_reason(reason));
                        }
                    }
                }
                if let Some(u) = data.get("usage").filter(|u| !u.is_null()) {
                    let u = usage(object(PROVIDER, u, "message_delta.usage")?, self.usage)?;
                    self.usage = Some(u);
                    delta.usage = Some(u);
                }
                out.push(delta);
            }
            "message_stop" => {
                self.stop(out);
                return Ok(true);
            }
            "error" => {
                let error = data.get("error").and_then(Value::as_object);
                let field = |key: &str| error.and_then(|e| e.get(key)).and_then(Value::as_str).unwrap_or("");
                return Err(ProviderError::Stream {
                    provider: PROVIDER,
                    kind: bounded(field("type").to_owned()),
                    message: bounded(field("message").to_owned()),
                });
            }
            // `ping`, and event types added after this client was written, carry nothing.
            _ => {}
        }
        Ok(false)
    }

    fn end_without_terminal(&mut self, out: &mut Vec<ResponseDelta>) -> bool {
        // `message_stop` carries nothing: once the stop reason arrived and every content block
        // was closed, the answer is whole. Its usage is added as `message_stop` would.
        let whole = self.finished && self.open.is_empty();
        if whole {
            self.stop(out);
        }
        whole
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(events: &[&str]) -> Result<Vec<ResponseDelta>, ProviderError> {
        let mut parser = AnthropicEvents::default();
        let mut out = Vec::new();
        for data in events {
            parser.event(SseEvent { event: None, data: (*data).to_owned() }, &mut out)?;
        }
        Ok(out)
    }

    #[test]
    fn a_tool_without_input_fragments_gets_empty_object_arguments() {
        let out = run(&[
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"now","input":{}}}"#,
            r#"{"type":"content_block_stop","index":0}"#,
        ])
        .unwrap();
        assert_eq!(out[1].tool_calls[0].arguments.as_deref(), Some("{}"));
    }

    #[test]
    fn thinking_blocks_are_reasoning_and_protocol_errors_are_typed() {
        let out = run(&[
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig"}}"#,
            r#"{"type":"content_block_stop","index":0}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"opaque"}}"#,
            r#"{"type":"content_block_stop","index":1}"#,
            r#"{"type":"content_block_start","index":2,"content_block":{"type":"server_tool_use","id":"s","name":"web_search","input":{}}}"#,
            r#"{"type":"content_block_stop","index":2}"#,
            r#"{"type":"some_future_event"}"#,
        ])
        .unwrap();
        assert!(out.iter().all(|d| d.text.is_none()), "reasoning is never answer text");
        let mut acc = keel::chat::Accumulator::new();
        for d in &out {
            acc.push(d).unwrap();
        }
        let message = acc.finish().unwrap().message.unwrap();
        assert_eq!(
            message.parts,
            [
                keel::chat::Part::Reasoning(keel::chat::Reasoning::signed("hmm", "sig")),
                keel::chat::Part::Reasoning(keel::chat::Reasoning::redacted("opaque")),
            ]
        );
        for events in [
            &[r#"{"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"x"}}"#][..],
            &[r#"{"type":"content_block_stop","index":0}"#],
            &[
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            ],
            &[
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{"}}"#,
            ],
            &[r#"{"no_type":1}"#],
            &[r#"{"type":"message_delta","usage":{"output_tokens":"many"}}"#],
        ] {
            let e = run(events).unwrap_err();
            assert!(matches!(e, ProviderError::Malformed { .. }), "{events:?}: {e}");
        }
    }
}
