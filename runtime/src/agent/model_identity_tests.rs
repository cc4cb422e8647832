//! The model is part of a run: a run started with one model is not resumed by another (the
//! scripted model swapped for a provider client, or another model name) unless the agent
//! allows a model switch, and then the run records the switch once.

use crate::chat::{Request, Response};
use crate::env::{BoxFuture, Env, TokioEnv};
use crate::interaction::model::{ModelCallContext, ModelClient, ModelError, ModelIdentity};
use crate::kernel::commit::MemoryCommitter;
use crate::prelude::*;
use futures::StreamExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use super::test_runtime::block_on;

/// A provider client as keel sees it: what it answers does not matter here, who it is does.
struct Provider(&'static str, ScriptedModel);

impl ModelClient for Provider {
    fn call<'a>(&'a self, cx: &'a ModelCallContext, request: Request) -> BoxFuture<'a, Result<Response, ModelError>> {
        self.1.call(cx, request)
    }

    fn identity(&self) -> ModelIdentity {
        ModelIdentity::new("openai", self.0).setting("temperature", "0")
    }
}

/// A store and environment holding one run of `agent` ("Weather?") parked at its first
/// question, its writer gone (as after an exit or a crash).
async fn parked(agent: Agent) -> (Arc<MemoryCommitter>, Env, RunId) {
    let store = Arc::new(MemoryCommitter::new());
    let env = TokioEnv::current().unwrap().env();
    let first = Runtime::with_store(agent, store.clone(), env.clone());
    let run = first.start("Weather?").await.unwrap();
    let Idle::NeedsInput(_) = run.idle().await.unwrap() else { panic!("expected an input request") };
    (store, env, run.id())
}

/// Waits for `run`'s question and answers it.
async fn answer(run: &Run, text: &str) {
    let Idle::NeedsInput(inputs) = run.idle().await.unwrap() else { panic!("expected the input request") };
    run.answer_text(&inputs[0], text).await.unwrap();
}

fn asker(model: impl ModelClient) -> Agent {
    Agent::builder("asker")
        .version("1")
        .model(model)
        .tool(AskHuman::new("ask_user", "Asks the user."))
        .build()
        .unwrap()
}

#[test]
fn a_run_is_not_resumed_by_another_model() {
    block_on(async {
        let scripted = asker(ScriptedModel::new().call_tool("ask_user", r#"{"question":"City?"}"#).then_text("Done."));
        assert_eq!(scripted.model_identity().to_string(), "keel/scripted");
        let (store, env, id) = parked(scripted.clone()).await;

        let openai = asker(Provider("gpt-4o-mini", ScriptedModel::new()));
        // The model is not in the configuration: the run's own record refuses it.
        assert_eq!(openai.deployment_ref(), scripted.deployment_ref());
        let refused = Runtime::with_store(openai, store.clone(), env.clone()).resume(&id).await.unwrap_err();
        let text = refused.to_string();
        let RunError::ModelChanged(changed) = &refused else { panic!("expected ModelChanged: {text}") };
        assert_eq!(changed.recorded.to_string(), "keel/scripted");
        assert_eq!(changed.current.to_string(), "openai/gpt-4o-mini (temperature=0)");
        assert!(text.contains("keel/scripted") && text.contains("openai/gpt-4o-mini (temperature=0)"), "the message names both models: {text}");
        assert!(text.contains("allow_model_switch"), "the message says how to switch: {text}");
        assert!(!text.contains('\n') && text.len() < 400, "one line: {text}");
        assert_eq!(format!("{refused:?}"), text);

        // Another model name of the same provider is another model too.
        let other = Runtime::with_store(asker(Provider("gpt-4o", ScriptedModel::new())), store.clone(), env.clone());
        assert!(matches!(other.resume(&id).await, Err(RunError::ModelChanged(_))));
        // The same model resumes.
        let same = Runtime::with_store(scripted, store, env).resume(&id).await.unwrap();
        answer(&same, "Oslo").await;
        assert_eq!(same.result().await.unwrap().text(), "Done.");
    });
}

fn switcher(model: impl ModelClient) -> Agent {
    Agent::builder("asker")
        .version("1")
        .model(model)
        .tool(AskHuman::new("ask_user", "Asks the user."))
        .allow_model_switch()
        .build()
        .unwrap()
}

fn switches_in(events: &[RunEvent]) -> Vec<(String, String, u32)> {
    events
        .iter()
        .filter_map(|e| match e {
            RunEvent::ModelSwitched { from, to, model_calls, .. } => Some((from.to_string(), to.to_string(), *model_calls)),
            _ => None,
        })
        .collect()
}

#[test]
fn allowing_a_switch_is_part_of_the_configuration() {
    let plain = asker(ScriptedModel::new());
    let switching = switcher(ScriptedModel::new());
    assert_ne!(plain.deployment_ref(), switching.deployment_ref());
    // Under an agent that allows switching, the model still does not change the deployment.
    assert_eq!(switching.deployment_ref(), switcher(Provider("gpt-4o", ScriptedModel::new())).deployment_ref());
}

#[test]
fn an_allowed_switch_is_recorded_in_the_run_and_reported() {
    block_on(async {
        let (store, env, id) = parked(switcher(ScriptedModel::new().call_tool("ask_user", r#"{"question":"City?"}"#))).await;

        // The provider is down: the run continues on another one, deliberately.
        let second = Runtime::with_store(switcher(Provider("gpt-4o-mini", ScriptedModel::new().then_text("Oslo: sunny."))), store.clone(), env.clone());
        let run = second.resume(&id).await.unwrap();
        let events = run.events();
        answer(&run, "Oslo").await;
        let result = run.result().await.unwrap();
        assert_eq!(result.text(), "Oslo: sunny.");
        assert_eq!(result.model().map(ToString::to_string).as_deref(), Some("openai/gpt-4o-mini (temperature=0)"));
        let switches = result.model_switches();
        assert_eq!(switches.len(), 1, "{switches:?}");
        assert_eq!(switches[0].from.to_string(), "keel/scripted");
        assert_eq!(switches[0].to.to_string(), "openai/gpt-4o-mini (temperature=0)");
        assert_eq!(switches[0].model_calls, 1, "one call was made by the first model");
        let events: Vec<RunEvent> = events.collect().await;
        assert_eq!(
            switches_in(&events),
            vec![("keel/scripted".to_owned(), "openai/gpt-4o-mini (temperature=0)".to_owned(), 1)],
            "{events:?}"
        );
        // The switch is reported before the response of the call the new model answered.
        let at = |f: &dyn Fn(&RunEvent) -> bool| events.iter().position(f).unwrap();
        assert!(at(&|e| matches!(e, RunEvent::ModelSwitched { .. })) < at(&|e| matches!(e, RunEvent::ModelResponse { .. })));

        // A run without a switch lists none.
        let plain = Runtime::with_store(switcher(ScriptedModel::new().then_text("Hi.")), store, env).start("Hello").await.unwrap();
        let result = plain.result().await.unwrap();
        assert!(result.model_switches().is_empty());
        assert_eq!(result.model().map(ToString::to_string).as_deref(), Some("keel/scripted"));
    });
}

/// A provider client whose calls wait until `gate` opens.
struct GatedProvider {
    gate: Arc<AtomicBool>,
    inner: Provider,
}

impl ModelClient for GatedProvider {
    fn call<'a>(&'a self, cx: &'a ModelCallContext, request: Request) -> BoxFuture<'a, Result<Response, ModelError>> {
        Box::pin(async move {
            while !self.gate.load(Ordering::SeqCst) {
                crate::agent::upgrade::yield_now().await;
            }
            self.inner.call(cx, request).await
        })
    }

    fn identity(&self) -> ModelIdentity {
        self.inner.identity()
    }
}

#[test]
fn a_crash_right_after_the_switch_keeps_one_switch() {
    block_on(async {
        let (store, env, id) = parked(switcher(ScriptedModel::new().call_tool("ask_user", r#"{"question":"City?"}"#))).await;

        // The new model's writer records the switch, then its model call hangs and it crashes.
        let gate = Arc::new(AtomicBool::new(false));
        let gated = GatedProvider { gate: gate.clone(), inner: Provider("gpt-4o-mini", ScriptedModel::new().then_text("never")) };
        let second = Runtime::with_store(switcher(gated), store.clone(), env.clone());
        let run = second.resume(&id).await.unwrap();
        let mut events = run.events();
        answer(&run, "Oslo").await;
        loop {
            if let RunEvent::ModelSwitched { .. } = events.next().await.unwrap() {
                break;
            }
        }
        crate::agent::run::wait_until(&run.shared_for_tests(), |s| !s.pending.is_empty()).await;
        drop((run, second)); // the crash: the switch and the pending call are in the store

        // Restored under the same new model: the switch is not recorded (nor reported) again,
        // and the call in flight is issued again.
        let third = Runtime::with_store(switcher(Provider("gpt-4o-mini", ScriptedModel::new().then_text("Oslo: sunny."))), store.clone(), env.clone());
        let run = third.resume(&id).await.unwrap();
        let events = run.events();
        let result = run.result().await.unwrap();
        assert_eq!(result.text(), "Oslo: sunny.");
        assert_eq!(result.model_switches().len(), 1, "{:?}", result.model_switches());
        assert_eq!(result.model_switches()[0].model_calls, 1);
        let events: Vec<RunEvent> = events.collect().await;
        assert!(switches_in(&events).is_empty(), "reported by the writer that recorded it: {events:?}");
        gate.store(true, Ordering::SeqCst); // let the crashed writer's call end (its commit is fenced)
    });
}

#[test]
fn a_switch_back_is_a_second_switch_and_a_refusing_agent_names_the_current_model() {
    block_on(async {
        let script = || ScriptedModel::new().call_tool("ask_user", r#"{"question":"City?"}"#).call_tool("ask_user", r#"{"question":"Day?"}"#).then_text("Done.");
        let (store, env, id) = parked(switcher(script())).await;
        let second = Runtime::with_store(switcher(Provider("gpt-4o", script())), store.clone(), env.clone());
        let run = second.resume(&id).await.unwrap();
        let mut events = run.events();
        answer(&run, "Oslo").await;
        loop {
            if let RunEvent::InputRequested(input) = events.next().await.unwrap() {
                if input.prompt.to_canonical_string().contains("Day?") {
                    break;
                }
            }
        }
        drop((run, second));
        let third = Runtime::with_store(switcher(script()), store.clone(), env.clone());
        let run = third.resume(&id).await.unwrap();
        answer(&run, "Monday").await;
        let result = run.result().await.unwrap();
        let path: Vec<(String, String, u32)> =
            result.model_switches().iter().map(|s| (s.from.to_string(), s.to.to_string(), s.model_calls)).collect();
        assert_eq!(
            path,
            vec![("keel/scripted".into(), "openai/gpt-4o (temperature=0)".into(), 1), ("openai/gpt-4o (temperature=0)".into(), "keel/scripted".into(), 2)]
        );
    });
}

fn researcher(model: impl ModelClient) -> Agent {
    Agent::builder("researcher").version("1").description("Finds facts.").model(model).build().unwrap()
}

#[test]
fn two_delegates_under_one_deployment_with_different_models_are_refused() {
    let scripted = researcher(ScriptedModel::new());
    let openai = researcher(Provider("gpt-4o", ScriptedModel::new()));
    assert_eq!(scripted.deployment_ref(), openai.deployment_ref(), "the model is not in the deployment");
    let refused = Agent::builder("coordinator")
        .version("1")
        .model(ScriptedModel::new())
        .delegate("cheap", "Cheap research.", scripted.clone())
        .delegate("smart", "Careful research.", openai.clone())
        .build()
        .unwrap_err();
    let text = refused.to_string();
    let BuildError::AmbiguousDelegates { first, second, delegate_agent, first_model, second_model, .. } = &refused else {
        panic!("expected AmbiguousDelegates: {text}")
    };
    assert_eq!((first.as_str(), second.as_str(), delegate_agent.as_str()), ("cheap", "smart", "researcher"));
    assert_eq!((first_model.as_str(), second_model.as_str()), ("keel/scripted", "openai/gpt-4o (temperature=0)"));
    assert!(text.contains("`cheap`") && text.contains("`smart`") && text.contains("version"), "names both and what to do: {text}");

    // Deeper in the tree too: a delegate's own delegate against another delegate.
    let team = Agent::builder("team").version("1").description("A team.").model(ScriptedModel::new()).delegate("dig", "Digs.", openai).build().unwrap();
    let nested = Agent::builder("coordinator")
        .version("1")
        .model(ScriptedModel::new())
        .delegate("cheap", "Cheap research.", scripted.clone())
        .delegate("team", "A team.", team)
        .build();
    assert!(matches!(nested, Err(BuildError::AmbiguousDelegates { ref second, .. }) if second == "team"), "{nested:?}");

    // One agent twice, or two agents told apart by their version, is fine.
    let renamed = Agent::builder("researcher").version("2").model(Provider("gpt-4o", ScriptedModel::new())).build().unwrap();
    for other in [scripted.clone(), renamed] {
        Agent::builder("coordinator")
            .version("1")
            .model(ScriptedModel::new())
            .delegate("cheap", "Cheap research.", scripted.clone())
            .delegate("other", "Other research.", other)
            .build()
            .unwrap();
    }
}
