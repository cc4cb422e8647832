//! A run's outcome cannot be mistaken, no default waits forever, errors read well, and
//! conflicts between writers are named: the facade's answers to the ways a new user got a
//! blank answer, a silent hang, a struct dump or "check disk space".

use super::delegation_fixture::{boss, calls_helper};
use crate::agent::MAX_MODEL_ATTEMPTS;
use crate::chat::{Request, Response, ResponseDelta};
use crate::env::BoxFuture;
use crate::interaction::model::ModelDeltaStream;
use crate::kernel::commit::{Committer, MemoryCommitter};
use crate::kernel::ids::ProcessId;
use crate::kernel::status::Status;
use crate::prelude::*;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use super::test_runtime::{block_on, env};

async fn collect(run: &Run) -> Vec<RunEvent> {
    let mut events = run.events();
    let mut out = Vec::new();
    while let Some(e) = events.next().await {
        out.push(e);
    }
    out
}

/// A model whose first `failures` calls fail with `error`, then answers from a script.
struct Failing {
    failures: u32,
    error: fn(u32) -> ModelError,
    calls: Arc<AtomicU32>,
    inner: ScriptedModel,
}

impl Failing {
    fn new(failures: u32, error: fn(u32) -> ModelError) -> Failing {
        Failing { failures, error, calls: Arc::new(AtomicU32::new(0)), inner: ScriptedModel::new().then_text("Hello.") }
    }

    /// The number of this call (1-based), or the error it fails with.
    fn next(&self) -> Result<u32, ModelError> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if n <= self.failures {
            Err((self.error)(n))
        } else {
            Ok(n)
        }
    }
}

impl ModelClient for Failing {
    fn call<'a>(&'a self, cx: &'a ModelCallContext, request: Request) -> BoxFuture<'a, Result<Response, ModelError>> {
        let next = self.next();
        Box::pin(async move {
            next?;
            self.inner.call(cx, request).await
        })
    }
}

/// Streams part of an answer, then fails inside the stream while it should.
impl ModelStreamer for Failing {
    fn stream<'a>(&'a self, cx: &'a ModelCallContext, _request: Request) -> BoxFuture<'a, Result<ModelDeltaStream<'a>, ModelError>> {
        let response = self.inner.answer(cx.invocation.model_call_sequence());
        let mut items: Vec<Result<ResponseDelta, ModelError>> = ResponseDelta::split(&response, 2).into_iter().map(Ok).collect();
        if let Err(e) = self.next() {
            items.truncate(2);
            items.push(Err(e));
        }
        Box::pin(async move { Ok(Box::pin(futures::stream::iter(items)) as ModelDeltaStream<'a>) })
    }
}

fn fast_retries() -> ModelErrorPolicy {
    ModelErrorPolicy::attempts(3).backoff(Duration::from_millis(1), Duration::from_millis(4))
}

// 1. A run's outcome cannot be mistaken.

#[test]
fn a_failed_run_is_an_error_with_its_code_and_message_never_an_empty_answer() {
    block_on(async {
        let model = Failing::new(u32::MAX, |_| ModelError::Provider("HTTP 400: the request is invalid".into()));
        let agent = Agent::builder("a").version("1").model(model).build().unwrap();
        let run = Runtime::with_store(agent, Arc::new(MemoryCommitter::new()), env()).start("Hi.").await.unwrap();
        let error = run.result().await.unwrap_err();
        let RunError::NotCompleted(failure) = &error else { panic!("expected NotCompleted, got {error}") };
        assert_eq!(failure.status(), Status::Failed);
        assert_eq!(failure.code(), "interaction.model.failed");
        assert!(failure.message().contains("HTTP 400"), "{failure}");
        assert!(error.to_string().contains("failed (interaction.model.failed)"), "{error}");
        // Idle still reports the ending itself, for hosts that drive the run step by step.
        assert!(matches!(run.idle().await.unwrap(), Idle::Finished(r) if r.status() == Status::Failed));
        // And a killed run is not an answer either.
        let agent = Agent::builder("b")
            .version("1")
            .model(ScriptedModel::new().call_tool("ask", r#"{"question":"?"}"#).then_text("Hi."))
            .tool(AskHuman::new("ask", "Asks."))
            .build()
            .unwrap();
        let run = Runtime::with_store(agent, Arc::new(MemoryCommitter::new()), env()).start("Hi.").await.unwrap();
        assert!(matches!(run.idle().await.unwrap(), Idle::NeedsInput(_)));
        run.kill("the operator stopped it").await.unwrap();
        let killed = run.result().await.unwrap_err();
        let failure = killed.failure().expect("a killed run is NotCompleted");
        assert_eq!((failure.status(), failure.code().as_str()), (Status::Killed, "killed"));
        assert_eq!(failure.message(), "the operator stopped it");
    });
}

// 2. No default waits forever.

#[test]
fn a_model_call_with_an_unknown_outcome_is_issued_again_by_default() {
    block_on(async {
        // The stream is cut after the request was sent: the outcome is unknown.
        let model = Failing::new(1, |_| ModelError::Unknown("connection lost after the request was sent".into()));
        let calls = model.calls.clone();
        let agent = Agent::builder("a").version("1").streaming_model(model).build().unwrap();
        assert_eq!(UnknownPolicy::default(), UnknownPolicy::Hold, "tools still hold by default");
        let run = Runtime::with_store(agent, Arc::new(MemoryCommitter::new()), env()).start("Hi.").await.unwrap();
        assert_eq!(run.result().await.unwrap().text(), "Hello.", "recovered with no host code");
        assert_eq!(calls.load(Ordering::SeqCst), 2, "issued once more");
        let events = collect(&run).await;
        assert!(events.iter().any(|e| matches!(e, RunEvent::Unknown(u) if u.policy == UnknownPolicy::Retry)));
        assert!(!events.iter().any(|e| matches!(e, RunEvent::ResolutionNeeded { .. })), "{events:?}");
    });
}

#[test]
fn a_reissue_counts_against_max_model_calls_and_a_held_call_says_so() {
    block_on(async {
        // One model call allowed: the repeat would be a second, so the call is held.
        let model = Failing::new(1, |_| ModelError::Unknown("timed out after the request was sent".into()));
        let calls = model.calls.clone();
        let agent = Agent::builder("a").version("1").model(model).max_model_calls(1).build().unwrap();
        let run = Runtime::with_store(agent, Arc::new(MemoryCommitter::new()), env()).start("Hi.").await.unwrap();
        let idle = run.idle().await.unwrap();
        let Idle::NeedsResolution(held) = idle else { panic!("expected the held call, got {idle:?}") };
        assert_eq!((held.len(), calls.load(Ordering::SeqCst)), (1, 1), "not issued again");
        let mut events = run.events();
        let reason = loop {
            match events.next().await {
                Some(RunEvent::ResolutionNeeded { reason, .. }) => break reason,
                Some(_) => {}
                None => panic!("no ResolutionNeeded event"),
            }
        };
        assert!(reason.contains("max_model_calls (1)") && reason.contains("Run::resolve"), "{reason}");
        run.resolve(&held[0], Resolution::Succeeded("Hi there.".into())).await.unwrap();
        assert_eq!(run.result().await.unwrap().text(), "Hi there.");
    });
}

#[test]
fn an_overloaded_provider_is_retried_with_backoff_and_each_retry_is_reported() {
    block_on(async {
        let overloaded = |n| ModelError::Transient(format!("HTTP 529 overloaded (attempt {n})"));
        let model = Failing::new(2, overloaded);
        let calls = model.calls.clone();
        let agent = Agent::builder("a").version("1").model(model).on_model_error(fast_retries()).build().unwrap();
        let run = Runtime::with_store(agent, Arc::new(MemoryCommitter::new()), env()).start("Hi.").await.unwrap();
        let events = collect(&run).await;
        assert_eq!(run.result().await.unwrap().text(), "Hello.");
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        let retries: Vec<(u32, u32)> = events
            .iter()
            .filter_map(|e| match e {
                RunEvent::ModelRetrying { attempt, attempts, error, .. } if error.contains("529") => Some((*attempt, *attempts)),
                _ => None,
            })
            .collect();
        assert_eq!(retries, [(1, 3), (2, 3)]);
        // Bounded: a provider that stays overloaded fails the run after the attempts.
        let model = Failing::new(u32::MAX, overloaded);
        let calls = model.calls.clone();
        let agent = Agent::builder("a").version("1").model(model).on_model_error(fast_retries()).build().unwrap();
        let run = Runtime::with_store(agent, Arc::new(MemoryCommitter::new()), env()).start("Hi.").await.unwrap();
        let failed = run.result().await.unwrap_err();
        assert_eq!(failed.failure().map(|f| f.code()), Some("interaction.model.failed".to_owned()), "{failed}");
        assert_eq!(calls.load(Ordering::SeqCst), 3, "never more than the policy's attempts");
        // A definite refusal is never repeated.
        let model = Failing::new(u32::MAX, |_| ModelError::Provider("HTTP 401".into()));
        let calls = model.calls.clone();
        let agent = Agent::builder("a").version("1").model(model).build().unwrap();
        let run = Runtime::with_store(agent, Arc::new(MemoryCommitter::new()), env()).start("Hi.").await.unwrap();
        assert!(run.result().await.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    });
}

#[test]
fn an_error_inside_a_started_stream_is_retried_and_the_answer_is_the_last_attempts_alone() {
    block_on(async {
        let model = Failing::new(1, |_| ModelError::Transient("stream error `overloaded_error`".into()));
        let agent = Agent::builder("a").version("1").streaming_model(model).on_model_error(fast_retries()).build().unwrap();
        let run = Runtime::with_store(agent, Arc::new(MemoryCommitter::new()), env()).start("Hi.").await.unwrap();
        assert_eq!(run.result().await.unwrap().text(), "Hello.", "the failed attempt's deltas are not in the answer");
        let events = collect(&run).await;
        assert!(events.iter().any(|e| matches!(e, RunEvent::ModelRetrying { attempt: 1, .. })), "{events:?}");
    });
}

#[test]
fn a_delegates_model_retries_are_reported_in_the_parent_run() {
    block_on(async {
        let overloaded = |n| ModelError::Transient(format!("HTTP 529 overloaded (attempt {n})"));
        let helper = Agent::builder("helper")
            .version("1")
            .description("Helps.")
            .model(Failing::new(1, overloaded))
            .on_model_error(fast_retries())
            .build()
            .unwrap();
        let parent = boss(calls_helper(), helper).build().unwrap();
        let run = Runtime::with_store(parent, Arc::new(MemoryCommitter::new()), env()).start("Go.").await.unwrap();
        assert_eq!(run.result().await.unwrap().text(), "Done.");
        let events = collect(&run).await;
        let helper_calls: Vec<&ProcessId> = events
            .iter()
            .filter_map(|e| match e {
                RunEvent::ModelResponse { process, text, .. } if text == "Hello." => Some(process),
                _ => None,
            })
            .collect();
        let retried: Vec<&ProcessId> = events
            .iter()
            .filter_map(|e| match e {
                RunEvent::ModelRetrying { process, attempt: 1, error, .. } if error.contains("529") => Some(process),
                _ => None,
            })
            .collect();
        assert_eq!(helper_calls.len(), 1, "{events:#?}");
        assert_eq!(retried, helper_calls, "the helper's retry, named by its Process: {events:#?}");
        assert_ne!(retried[0], run.id().process_id());
    });
}

#[test]
fn a_model_error_policy_out_of_bounds_is_refused_and_the_policy_is_in_the_identity() {
    for attempts in [0, MAX_MODEL_ATTEMPTS + 1] {
        let refused = Agent::builder("a").version("1").model(ScriptedModel::new()).on_model_error(ModelErrorPolicy::attempts(attempts)).build();
        assert!(matches!(refused, Err(BuildError::ModelAttempts { .. })), "{refused:?}");
    }
    let base = Agent::builder("a").version("1").model(ScriptedModel::new()).build().unwrap();
    let never = Agent::builder("a").version("1").model(ScriptedModel::new()).on_model_error(ModelErrorPolicy::never()).build().unwrap();
    assert_ne!(base.deployment_ref(), never.deployment_ref());
}

// 3. Errors read well.

#[test]
fn public_errors_print_their_message_for_debug_too() {
    let build = Agent::builder("a").model(ScriptedModel::new()).build().unwrap_err();
    assert_eq!(format!("{build:?}"), build.to_string());
    assert!(!format!("{build:?}").contains("NoVersion {"), "no struct dump");
    let run: RunError = "not a run id".parse::<RunId>().unwrap_err();
    assert_eq!(format!("{run:?}"), run.to_string());
    // What `main() -> Result<(), Box<dyn Error>>` prints on exit.
    let boxed: Box<dyn std::error::Error> = Box::new(RunError::AlreadyExists("process:x".into()));
    assert_eq!(format!("{boxed:?}"), boxed.to_string());
}

// 4. Conflicts between writers are named.

/// A model that waits until `gate` opens.
struct Gated {
    gate: Arc<AtomicBool>,
    inner: ScriptedModel,
}

impl ModelClient for Gated {
    fn call<'a>(&'a self, cx: &'a ModelCallContext, request: Request) -> BoxFuture<'a, Result<Response, ModelError>> {
        Box::pin(async move {
            while !self.gate.load(Ordering::SeqCst) {
                crate::agent::upgrade::yield_now().await;
            }
            self.inner.call(cx, request).await
        })
    }
}

#[test]
fn a_writer_whose_run_was_resumed_elsewhere_is_told_so_not_to_check_the_disk() {
    block_on(async {
        let gate = Arc::new(AtomicBool::new(false));
        let agent = |gate: Arc<AtomicBool>| {
            Agent::builder("a")
                .version("1")
                .model(Gated { gate, inner: ScriptedModel::new().then_text("Hello.") })
                .build()
                .unwrap()
        };
        let store: Arc<dyn Committer> = Arc::new(MemoryCommitter::new());
        let first = Runtime::with_store(agent(gate.clone()), store.clone(), env());
        let run = first.start("Hi.").await.unwrap();
        crate::agent::run::wait_until(&run.shared_for_tests(), |s| !s.pending.is_empty()).await;
        // A second process resumes the same run while the first still runs it, and finishes it.
        let second = Runtime::with_store(agent(Arc::new(AtomicBool::new(true))), store.clone(), env());
        let resumed = second.resume(&run.id()).await.unwrap();
        assert_eq!(resumed.result().await.unwrap().text(), "Hello.", "the newer writer finishes the run");
        // The first writer's call returns now; its commit is refused.
        gate.store(true, Ordering::SeqCst);
        let fenced = run.result().await.unwrap_err();
        assert!(matches!(fenced, RunError::Conflict(_)), "{fenced}");
        let text = fenced.to_string();
        assert!(text.contains("resumed elsewhere") && text.contains("another writer"), "{text}");
        assert!(!text.contains("disk space") && !text.contains("permissions"), "{text}");
    });
}

#[test]
fn a_store_directory_open_in_another_writer_is_a_conflict() {
    block_on(async {
        let dir = std::env::temp_dir().join(format!("keel-conflict-{}", std::process::id()));
        let agent = || Agent::builder("a").version("1").model(ScriptedModel::new()).build().unwrap();
        let first = Runtime::on_disk(agent(), &dir).unwrap();
        let second = Runtime::on_disk(agent(), &dir).unwrap_err();
        assert!(matches!(second, RunError::Conflict(_)), "{second}");
        assert!(second.to_string().contains("in use"), "{second}");
        drop(first);
        let _ = std::fs::remove_dir_all(&dir);
    });
}
