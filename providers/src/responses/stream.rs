//! Responses API stream events as keel deltas.
//!
//! Each event is one JSON object whose `type` names it. Text arrives as
//! `response.output_text.delta` (and `response.refusal.delta`), a function call as
//! `response.output_item.added` (its call id and name) then `response.function_call_arguments.delta`
//! fragments (or, from servers that send none, the whole arguments in `.done` or in
//! `response.output_item.done`). The stream ends with `response.completed` or
//! `response.incomplete`, which carry the response object (status and usage), or fails with
//! `response.failed` or an `error` event. Events keel does not use (content parts, summary
//! text deltas, hosted tools' progress, events added later) are skipped.

use super::response::{error_fields, failed, finish, output_item, usage_of, Item};
use super::PROVIDER;
use crate::error::{bounded, ProviderError};
use crate::sse::SseEvent;
use crate::stream::EventParser;
use crate::wire::{object, opt_str, opt_u64, parse_body, req_str};
use keel::chat::{ReasoningDelta, ResponseDelta, SummaryDelta, ToolCallDelta};
use serde_json::{Map, Value};
use std::collections::BTreeSet;

/// A function call of this response, by its position among the response's calls.
#[derive(Debug)]
struct Call {
    output_index: u64,
    item_id: Option<String>,
    /// Some argument text arrived (then a `.done` repeating it is not added again).
    has_arguments: bool,
}

/// A reasoning item of this response.
#[derive(Debug)]
struct Thought {
    output_index: u64,
    /// Its position among the response's reasoning parts, given when its first fragment is
    /// emitted (an item that carries nothing never takes a position, so positions stay dense).
    position: Option<u32>,
    summary_streamed: bool,
    text_streamed: bool,
}

#[derive(Debug, Default)]
pub(crate) struct ResponsesEvents {
    thoughts: Vec<Thought>,
    /// Reasoning positions given so far.
    reasoning_parts: u32,
    created: bool,
    /// Output indices announced by `response.output_item.added`.
    added: BTreeSet<u64>,
    /// Output indices whose text arrived as deltas.
    streamed_text: BTreeSet<u64>,
    calls: Vec<Call>,
    refused: bool,
}

impl EventParser for ResponsesEvents {
    const PROVIDER: &'static str = PROVIDER;

    fn event(&mut self, event: SseEvent, out: &mut Vec<ResponseDelta>) -> Result<bool, ProviderError> {
        if event.data.trim() == "[DONE]" {
            // Not sent by OpenAI's Responses API; a server that sends it before the response
            // object gave no finish reason or usage.
            return Err(ProviderError::malformed(PROVIDER, "the stream sent [DONE] before response.completed"));
        }
        let value = parse_body(PROVIDER, event.data.as_bytes(), "a stream event")?;
        let data = object(PROVIDER, &value, "a stream event")?;
        let kind = match opt_str(PROVIDER, data, "type", "event")? {
            Some(kind) => kind.to_owned(),
            None => event.event.clone().ok_or_else(|| ProviderError::malformed(PROVIDER, "a stream event has no type"))?,
        };
        let what = kind.as_str();
        match what {
            "response.created" => {
                // One stream carries one response; a second would be a second answer.
                if self.created {
                    return Err(ProviderError::malformed(PROVIDER, "the stream carries a second response; one call has one answer"));
                }
                self.created = true;
            }
            "response.output_item.added" => {
                let index = req_u64(data, "output_index", what)?;
                if !self.added.insert(index) {
                    return Err(ProviderError::malformed(PROVIDER, format!("output item {index} was added twice")));
                }
                let item = object(PROVIDER, member(data, "item", what)?, &format!("{what}.item"))?;
                match output_item(item, &format!("{what}.item"))? {
                    Item::Call(call) => {
                        let position = self.new_call(index, item)?;
                        let arguments = (!call.arguments.is_empty()).then_some(call.arguments);
                        self.calls[position as usize].has_arguments = arguments.is_some();
                        out.push(call_delta(position, Some(call.id), Some(call.name), arguments));
                    }
                    Item::Reasoning(reasoning) => {
                        self.thoughts.push(Thought { output_index: index, position: None, summary_streamed: false, text_streamed: false });
                        // Its encrypted content is taken from `output_item.done` only: the
                        // value announced here is not the final one.
                        if let Some(id) = reasoning.id {
                            self.reason(index, ReasoningDelta { id: Some(id), ..ReasoningDelta::default() }, out)?;
                        }
                    }
                    Item::Message { .. } | Item::Other => {}
                }
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                let index = req_u64(data, "output_index", what)?;
                let text = req_str(PROVIDER, data, "delta", what)?;
                self.streamed_text.insert(index);
                if what == "response.refusal.delta" {
                    self.refused = true;
                }
                if !text.is_empty() {
                    out.push(ResponseDelta { text: Some(text.to_owned()), ..ResponseDelta::default() });
                }
            }
            "response.reasoning_summary_text.delta" => {
                let index = req_u64(data, "output_index", what)?;
                let summary = u32::try_from(req_u64(data, "summary_index", what)?)
                    .map_err(|_| ProviderError::malformed(PROVIDER, format!("{what}.summary_index is too large")))?;
                let text = req_str(PROVIDER, data, "delta", what)?;
                self.thought(index, what)?.summary_streamed = true;
                if !text.is_empty() {
                    let fragment = SummaryDelta { index: summary, text: text.to_owned() };
                    self.reason(index, ReasoningDelta { summary: Some(fragment), ..ReasoningDelta::default() }, out)?;
                }
            }
            "response.reasoning_text.delta" => {
                let index = req_u64(data, "output_index", what)?;
                let text = req_str(PROVIDER, data, "delta", what)?;
                self.thought(index, what)?.text_streamed = true;
                if !text.is_empty() {
                    self.reason(index, ReasoningDelta { text: Some(text.to_owned()), ..ReasoningDelta::default() }, out)?;
                }
            }
            "response.function_call_arguments.delta" | "response.function_call_arguments.done" => {
                let position = self.call_of(data, what)?;
                let key = if what.ends_with("delta") { "delta" } else { "arguments" };
                let text = req_str(PROVIDER, data, key, what)?;
                let call = &mut self.calls[position as usize];
                // `.done` repeats the whole arguments: added only when no fragment came.
                if !text.is_empty() && (key == "delta" || !call.has_arguments) {
                    call.has_arguments = true;
                    out.push(call_delta(position, None, None, Some(text.to_owned())));
                }
            }
            "response.output_item.done" => {
                let index = req_u64(data, "output_index", what)?;
                let item = object(PROVIDER, member(data, "item", what)?, &format!("{what}.item"))?;
                match output_item(item, &format!("{what}.item"))? {
                    Item::Call(call) => {
                        let known = self.calls.iter().position(|c| c.output_index == index);
                        let position = match known {
                            Some(p) => u32::try_from(p).unwrap_or(u32::MAX),
                            None => {
                                // Announced only now: the whole call at once.
                                self.added.insert(index);
                                let p = self.new_call(index, item)?;
                                out.push(call_delta(p, Some(call.id), Some(call.name), None));
                                p
                            }
                        };
                        let entry = &mut self.calls[position as usize];
                        if !entry.has_arguments && !call.arguments.is_empty() {
                            entry.has_arguments = true;
                            out.push(call_delta(position, None, None, Some(call.arguments)));
                        }
                    }
                    Item::Message { text, refused } => {
                        // A server that streamed no text deltas for this item.
                        if !self.streamed_text.contains(&index) {
                            self.refused |= refused;
                            if !text.is_empty() {
                                out.push(ResponseDelta { text: Some(text), ..ResponseDelta::default() });
                            }
                        }
                    }
                    Item::Reasoning(reasoning) => {
                        if !self.thoughts.iter().any(|t| t.output_index == index) {
                            // Announced only now: the whole item at once.
                            self.added.insert(index);
                            self.thoughts.push(Thought { output_index: index, position: None, summary_streamed: false, text_streamed: false });
                            if let Some(id) = reasoning.id {
                                self.reason(index, ReasoningDelta { id: Some(id), ..ReasoningDelta::default() }, out)?;
                            }
                        }
                        let thought = self.thought(index, what)?;
                        let (summary_streamed, text_streamed) = (thought.summary_streamed, thought.text_streamed);
                        if !summary_streamed {
                            for (i, text) in reasoning.summary.into_iter().enumerate() {
                                let fragment = SummaryDelta { index: u32::try_from(i).unwrap_or(u32::MAX), text };
                                self.reason(index, ReasoningDelta { summary: Some(fragment), ..ReasoningDelta::default() }, out)?;
                            }
                        }
                        if !text_streamed && !reasoning.text.is_empty() {
                            self.reason(index, ReasoningDelta { text: Some(reasoning.text), ..ReasoningDelta::default() }, out)?;
                        }
                        if let Some(encrypted) = reasoning.encrypted {
                            self.reason(index, ReasoningDelta { encrypted: Some(encrypted), ..ReasoningDelta::default() }, out)?;
                        }
                    }
                    Item::Other => {}
                }
            }
            "response.completed" | "response.incomplete" => {
                let response = object(PROVIDER, member(data, "response", what)?, &format!("{what}.response"))?;
                let reason = finish(response, !self.calls.is_empty(), self.refused)?;
                let usage = usage_of(response)?;
                out.push(ResponseDelta { finish_reason: Some(reason), usage: Some(usage), ..ResponseDelta::default() });
                return Ok(true);
            }
            "response.failed" => {
                let response = object(PROVIDER, member(data, "response", what)?, &format!("{what}.response"))?;
                return Err(failed(response));
            }
            "error" => {
                // OpenAI sends the fields at the top level; some servers nest them in `error`.
                let (kind, message) = match data.get("error") {
                    Some(Value::Object(error)) => error_fields(error),
                    _ => error_fields(data),
                };
                return Err(ProviderError::Stream { provider: PROVIDER, kind, message: bounded(message) });
            }
            _ => {}
        }
        Ok(false)
    }

    fn end_without_terminal(&mut self, _out: &mut Vec<ResponseDelta>) -> bool {
        // Only the response object says how the answer ended and what it used: a body that
        // ends before it was cut.
        false
    }
}

impl ResponsesEvents {
    /// The reasoning item at output index `index`, announced before.
    fn thought(&mut self, index: u64, what: &str) -> Result<&mut Thought, ProviderError> {
        self.thoughts.iter_mut().find(|t| t.output_index == index).ok_or_else(|| {
            ProviderError::malformed(PROVIDER, format!("{what} names an output item that is not a reasoning item announced before"))
        })
    }

    /// Emits `fragment` for the reasoning item at output index `index`, giving the item its
    /// position among the reasoning parts at its first fragment.
    fn reason(&mut self, index: u64, mut fragment: ReasoningDelta, out: &mut Vec<ResponseDelta>) -> Result<(), ProviderError> {
        let next = self.reasoning_parts;
        let thought = self.thought(index, "a reasoning event")?;
        let position = match thought.position {
            Some(p) => p,
            None => {
                thought.position = Some(next);
                self.reasoning_parts += 1;
                next
            }
        };
        fragment.index = position;
        out.push(ResponseDelta { reasoning: vec![fragment], ..ResponseDelta::default() });
        Ok(())
    }

    /// Registers a function call at output index `index`; its position among the calls.
    fn new_call(&mut self, index: u64, item: &Map<String, Value>) -> Result<u32, ProviderError> {
        let position = u32::try_from(self.calls.len())
            .map_err(|_| ProviderError::malformed(PROVIDER, "too many function calls"))?;
        let item_id = opt_str(PROVIDER, item, "id", "item")?.map(str::to_owned);
        self.calls.push(Call { output_index: index, item_id, has_arguments: false });
        Ok(position)
    }

    /// The position of the call an arguments event names (by output index, else item id).
    fn call_of(&self, data: &Map<String, Value>, what: &str) -> Result<u32, ProviderError> {
        let index = opt_u64(PROVIDER, data, "output_index", what)?;
        let item_id = opt_str(PROVIDER, data, "item_id", what)?;
        let found = self.calls.iter().position(|c| match index {
            Some(i) => c.output_index == i,
            None => item_id.is_some() && c.item_id.as_deref() == item_id,
        });
        match found {
            Some(p) => Ok(u32::try_from(p).unwrap_or(u32::MAX)),
            None => Err(ProviderError::malformed(
                PROVIDER,
                format!("{what} names an output item that is not a function call announced before"),
            )),
        }
    }
}

fn call_delta(index: u32, id: Option<String>, name: Option<String>, arguments: Option<String>) -> ResponseDelta {
    ResponseDelta { tool_calls: vec![ToolCallDelta { index, id, name, arguments }], ..ResponseDelta::default() }
}

fn member<'a>(data: &'a Map<String, Value>, key: &str, what: &str) -> Result<&'a Value, ProviderError> {
    data.get(key).ok_or_else(|| ProviderError::malformed(PROVIDER, format!("{what}.{key} is missing")))
}

fn req_u64(data: &Map<String, Value>, key: &str, what: &str) -> Result<u64, ProviderError> {
    opt_u64(PROVIDER, data, key, what)?.ok_or_else(|| ProviderError::malformed(PROVIDER, format!("{what}.{key} is missing")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel::chat::{Accumulator, FinishReason, Usage};

    fn run(events: &[&str]) -> Result<(Vec<ResponseDelta>, bool), ProviderError> {
        let mut parser = ResponsesEvents::default();
        let mut out = Vec::new();
        let mut ended = false;
        for data in events {
            ended = parser.event(SseEvent { event: None, data: (*data).to_owned() }, &mut out)?;
        }
        Ok((out, ended))
    }

    const CREATED: &str = r#"{"type":"response.created","response":{"id":"r","status":"in_progress","output":[]}}"#;
    const DONE: &str = r#"{"type":"response.completed","response":{"status":"completed","usage":{"input_tokens":3,"output_tokens":2}}}"#;

    #[test]
    fn a_call_announced_only_when_done_is_whole() {
        let (out, ended) = run(&[
            CREATED,
            r#"{"type":"response.output_item.done","output_index":0,"item":{"type":"function_call","id":"fc_1","call_id":"c1","name":"weather","arguments":"{\"city\":\"Paris\"}"}}"#,
            DONE,
        ])
        .unwrap();
        assert!(ended);
        let mut acc = Accumulator::new();
        for d in &out {
            acc.push(d).unwrap();
        }
        let response = acc.finish().unwrap();
        let call = response.message.unwrap().tool_calls().next().unwrap().clone();
        assert_eq!((call.id.as_str(), call.name.as_str(), call.arguments.as_str()), ("c1", "weather", r#"{"city":"Paris"}"#));
        assert_eq!(response.finish_reason, Some(FinishReason::ToolCalls));
        assert_eq!(response.usage, Usage::new(3, 2));
    }

    #[test]
    fn a_reasoning_item_streams_its_summary_and_ends_with_its_final_encrypted_content() {
        let (out, _) = run(&[
            CREATED,
            r#"{"type":"response.output_item.added","output_index":0,"item":{"id":"rs_1","type":"reasoning","encrypted_content":"early","summary":[]}}"#,
            r#"{"type":"response.reasoning_summary_text.delta","output_index":0,"summary_index":0,"delta":"**Plan**"}"#,
            r#"{"type":"response.reasoning_summary_text.delta","output_index":0,"summary_index":0,"delta":" add first."}"#,
            r#"{"type":"response.output_item.done","output_index":0,"item":{"id":"rs_1","type":"reasoning","encrypted_content":"final","summary":[{"type":"summary_text","text":"**Plan** add first."}]}}"#,
            // An item carrying nothing takes no position.
            r#"{"type":"response.output_item.done","output_index":1,"item":{"type":"reasoning","summary":[]}}"#,
            r#"{"type":"response.output_item.done","output_index":2,"item":{"id":"rs_2","type":"reasoning","summary":[{"type":"summary_text","text":"Then answer."}],"content":[{"type":"reasoning_text","text":"2+2"}]}}"#,
            r#"{"type":"response.output_text.delta","output_index":3,"delta":"4"}"#,
            DONE,
        ])
        .unwrap();
        let response = Accumulator::accumulate(&out).unwrap();
        let message = response.message.unwrap();
        assert_eq!(message.text(), "4", "reasoning is never answer text");
        let reasoning: Vec<_> = message.parts.iter().filter_map(|p| match p { keel::chat::Part::Reasoning(r) => Some(r.clone()), _ => None }).collect();
        assert_eq!(reasoning.len(), 2);
        assert_eq!(reasoning[0].id.as_deref(), Some("rs_1"));
        assert_eq!(reasoning[0].summary, ["**Plan** add first."], "streamed once, not repeated by the done item");
        assert_eq!(reasoning[0].encrypted.as_deref(), Some("final"));
        assert_eq!((reasoning[1].id.as_deref(), reasoning[1].text.as_str()), (Some("rs_2"), "2+2"));
        assert_eq!(reasoning[1].summary, ["Then answer."]);
        let e = run(&[CREATED, r#"{"type":"response.reasoning_summary_text.delta","output_index":5,"summary_index":0,"delta":"x"}"#]).unwrap_err();
        assert!(matches!(e, ProviderError::Malformed { .. }), "{e}");
    }

    #[test]
    fn done_arguments_after_deltas_are_not_added_twice() {
        let (out, _) = run(&[
            CREATED,
            r#"{"type":"response.output_item.added","output_index":0,"item":{"type":"function_call","id":"fc_1","call_id":"c1","name":"weather","arguments":""}}"#,
            r#"{"type":"response.function_call_arguments.delta","output_index":0,"item_id":"fc_1","delta":"{\"city\":"}"#,
            r#"{"type":"response.function_call_arguments.delta","output_index":0,"item_id":"fc_1","delta":"\"Paris\"}"}"#,
            r#"{"type":"response.function_call_arguments.done","output_index":0,"item_id":"fc_1","arguments":"{\"city\":\"Paris\"}"}"#,
            r#"{"type":"response.output_item.done","output_index":0,"item":{"type":"function_call","id":"fc_1","call_id":"c1","name":"weather","arguments":"{\"city\":\"Paris\"}"}}"#,
            DONE,
        ])
        .unwrap();
        let arguments: String = out.iter().flat_map(|d| &d.tool_calls).filter_map(|c| c.arguments.clone()).collect();
        assert_eq!(arguments, r#"{"city":"Paris"}"#);
    }

    #[test]
    fn a_second_response_or_item_is_refused() {
        let e = run(&[CREATED, CREATED]).unwrap_err();
        assert!(matches!(e, ProviderError::Malformed { .. }) && e.to_string().contains("second response"), "{e}");
        let added = r#"{"type":"response.output_item.added","output_index":0,"item":{"type":"message","content":[]}}"#;
        let e = run(&[CREATED, added, added]).unwrap_err();
        assert!(matches!(e, ProviderError::Malformed { .. }) && e.to_string().contains("added twice"), "{e}");
    }

    #[test]
    fn error_events_and_failed_responses_fail_the_call() {
        // OpenAI's documented shape (fields at the top level) and the nested one.
        let top = r#"{"type":"error","code":"rate_limit_exceeded","message":"slow down","param":null,"sequence_number":2}"#;
        let e = run(&[CREATED, top]).unwrap_err();
        assert!(matches!(&e, ProviderError::Stream { kind, message, .. } if kind == "rate_limit_exceeded" && message == "slow down"), "{e}");
        assert!(e.may_succeed_if_repeated());
        let nested = r#"{"type":"error","error":{"type":"invalid_request_error","code":null,"message":"bad"}}"#;
        let e = run(&[CREATED, nested]).unwrap_err();
        assert!(matches!(&e, ProviderError::Stream { kind, .. } if kind == "invalid_request_error"), "{e}");
        assert!(!e.may_succeed_if_repeated());
        let failed = r#"{"type":"response.failed","response":{"status":"failed","error":{"code":"server_error","message":"boom"}}}"#;
        let e = run(&[CREATED, failed]).unwrap_err();
        assert!(matches!(&e, ProviderError::Stream { kind, .. } if kind == "server_error"), "{e}");
    }

    #[test]
    fn hostile_events_are_typed_errors() {
        for data in [
            "not json",
            "[]",
            r#"{"no_type":1}"#,
            r#"{"type":"response.output_text.delta","output_index":0,"delta":7}"#,
            r#"{"type":"response.output_text.delta","delta":"x"}"#,
            r#"{"type":"response.function_call_arguments.delta","output_index":4,"delta":"{}"}"#,
            r#"{"type":"response.output_item.added","output_index":-1,"item":{"type":"message"}}"#,
            r#"{"type":"response.output_item.added","output_index":0}"#,
            r#"{"type":"response.completed"}"#,
            r#"{"type":"response.completed","response":{"status":"completed","usage":{"input_tokens":"many"}}}"#,
            "[DONE]",
        ] {
            let e = run(&[data]).unwrap_err();
            assert!(matches!(e, ProviderError::Malformed { .. }), "{data}: {e}");
        }
    }
}
