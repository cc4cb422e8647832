//! The model Dispatcher's streaming mode and a ModelContextReducer through the whole parent
//! loop: streaming changes nothing durable, and reduced contexts are adopted.

use super::*;
use crate::chat::ResponseDelta;
use crate::interaction::model::{ModelContextReducer, ModelDeltaStream, ModelStreamer};
use crate::kernel::status::Status;
use futures::StreamExt;

/// Streams the scripted model's answers in 4-byte chunks.
pub(super) struct Chunked(pub(super) Arc<ScriptedModel>);

impl ModelStreamer for Chunked {
    fn stream<'a>(&'a self, cx: &'a ModelCallContext, request: Request) -> BoxFuture<'a, Result<ModelDeltaStream<'a>, ModelError>> {
        Box::pin(async move {
            let response = self.0.call(cx, request).await?;
            let deltas = ResponseDelta::split(&response, 4);
            Ok(futures::stream::iter(deltas.into_iter().map(Ok)).boxed())
        })
    }
}

fn script() -> Vec<Response> {
    vec![
        calls_response(vec![call("c1", "secret", "{}"), call("c2", "weather", r#"{"city":"Oslo"}"#)]),
        calls_response(vec![call("c3", "hidden", "{}")]),
        answer("all done"),
    ]
}

fn run(streaming: bool) -> (Harness, ProcessResult) {
    let h = harness_full(tool_set(), script(), |_| {}, |_| {}, move |m| {
        if streaming {
            DispatcherConfig::stream(Arc::new(Chunked(m)))
        } else {
            DispatcherConfig::complete(m)
        }
    });
    let (_r, result) = h.run("go");
    (h, result)
}

#[test]
fn a_streamed_loop_commits_exactly_what_the_complete_loop_commits() {
    let (complete, whole) = run(false);
    let (streamed, result) = run(true);
    assert_eq!(result.status(), Status::Completed);
    assert_eq!(output_of(&result).model_calls, 3);
    assert_eq!(result.output, whole.output);
    assert_eq!(streamed.model.calls(), 3);
    for n in 0..3 {
        assert_eq!(streamed.model.request(n), complete.model.request(n), "request {n}");
    }
    assert_eq!(streamed.head().bytes(), complete.head().bytes(), "byte-identical terminal cuts");
    let names: Vec<String> = streamed.model.request(1).tools.iter().map(|t| t.name.clone()).collect();
    assert_eq!(names.last().unwrap(), "hidden", "advertisements work in streaming mode too");
}

/// Replaces everything but the last two messages by one "summary of N" user message, and
/// records the prepared requests it saw.
#[derive(Default)]
struct Summarizer(Mutex<Vec<Vec<String>>>);

impl ModelContextReducer for Summarizer {
    fn reduce<'a>(&'a self, _: &'a ModelCallContext, request: &'a Request) -> BoxFuture<'a, Result<Vec<Message>, String>> {
        self.0.lock().unwrap().push(request.messages.iter().map(Message::text).collect());
        let messages = &request.messages;
        let out = if messages.len() <= 2 {
            messages.clone()
        } else {
            let cut = messages.len() - 2;
            let mut out = vec![Message::user(format!("summary of {cut}"))];
            out.extend(messages[cut..].iter().cloned());
            out
        };
        Box::pin(async move { Ok(out) })
    }
}

#[test]
fn reduced_contexts_replace_the_working_context_through_the_loop() {
    for streaming in [false, true] {
        let reducer = Arc::new(Summarizer::default());
        let r2 = reducer.clone();
        let h = harness_full(tool_set(), script(), |_| {}, |_| {}, move |m| {
            let config = if streaming { DispatcherConfig::stream(Arc::new(Chunked(m))) } else { DispatcherConfig::complete(m) };
            config.with_reducer(r2)
        });
        let (_r, result) = h.run("go");
        assert_eq!(result.status(), Status::Completed, "streaming {streaming}");
        let seen = reducer.0.lock().unwrap().clone();
        assert_eq!(seen.len(), 3);
        assert_eq!(seen[0], ["go"]);
        assert_eq!(seen[1].len(), 3, "[go, assistant, tool]");
        // The third request is built from the *adopted* replacement of the second call.
        assert_eq!(seen[2][0], "summary of 1", "{:?}", seen[2]);
        assert_eq!(seen[2].len(), 5);
        let third: Vec<String> = h.model.request(2).messages.iter().map(Message::text).collect();
        assert_eq!(third[0], "summary of 3", "the model sees the reduced request");
        assert_eq!(third.len(), 3);
        assert_eq!(output_of(&result).model_calls, 3);
    }
}

/// The parent's committed state bytes after `rounds` model calls that each grow the context by
/// two messages, then an answer. Truncated calls do it in one Step per round and no child
/// Process (tool rounds would re-encode an ever larger tree at every commit); the replacement
/// rule is the same for every round kind.
fn state_bytes_after(rounds: u32, reduce: bool) -> usize {
    let mut script: Vec<Response> = (0..rounds)
        .map(|n| with_finish(vec![call(&format!("c{n:03}"), "weather", r#"{"city":"Os"#)], FinishReason::Length))
        .collect();
    script.push(answer("done"));
    let h = harness_full(tool_set(), script, |c| c.max_model_calls = 100, |_| {}, move |m| {
        let config = DispatcherConfig::complete(m);
        if reduce {
            config.with_reducer(Arc::new(Summarizer::default()))
        } else {
            config
        }
    });
    // No oracle re-check here: it decodes every cut again, which dominates at 64 rounds.
    let mut r = h.start("go");
    r.run_to_idle();
    let result = root_result(&r).expect("finished");
    assert_eq!(result.status(), Status::Completed);
    assert_eq!(output_of(&result).model_calls, rounds + 1);
    // The payload and the segments holding the messages.
    h.head().root().committed_state.byte_len()
}

#[test]
fn a_reduced_history_never_grows_back() {
    let (short, long) = (state_bytes_after(16, true), state_bytes_after(64, true));
    // The pinned bound: 64 rounds stay below 5× the size of 16.
    assert!(long < 5 * short, "{long} vs {short}");
    // Linear growth would stay below 5× too, so also pin what replacement really gives: the
    // state is bounded (a few more digits), while without a reducer it grows with the rounds.
    assert!(long * 10 < short * 11, "reduced: {long} vs {short}");
    let (plain_short, plain_long) = (state_bytes_after(16, false), state_bytes_after(64, false));
    assert!(plain_long > 3 * plain_short, "unreduced: {plain_long} vs {plain_short}");
}
