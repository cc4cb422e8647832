//! The model is part of an agent's identity: a run started with one model is not resumed by
//! another (the scripted model swapped for a provider client, or another model name).

use crate::chat::{Request, Response};
use crate::env::{BoxFuture, TokioEnv};
use crate::interaction::model::{ModelCallContext, ModelClient, ModelError, ModelIdentity};
use crate::kernel::commit::MemoryCommitter;
use crate::prelude::*;
use std::sync::Arc;

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(f)
}

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
        let store = Arc::new(MemoryCommitter::new());
        let env = TokioEnv::current().unwrap().env();
        let scripted = asker(ScriptedModel::new().call_tool("ask_user", r#"{"question":"City?"}"#).then_text("Done."));
        assert_eq!(scripted.model_identity().to_string(), "keel/scripted");
        let first = Runtime::with_store(scripted.clone(), store.clone(), env.clone());
        let run = first.start("Weather?").await.unwrap();
        let Idle::NeedsInput(_) = run.idle().await.unwrap() else { panic!("expected an input request") };
        let id = run.id();
        drop(run);
        drop(first);

        let openai = asker(Provider("gpt-4o-mini", ScriptedModel::new()));
        assert_ne!(openai.deployment_ref(), scripted.deployment_ref());
        let refused = Runtime::with_store(openai, store.clone(), env.clone()).resume(&id).await.unwrap_err();
        let text = refused.to_string();
        assert!(matches!(refused, RunError::Refused(_)), "{text}");
        assert!(text.contains("openai/gpt-4o-mini (temperature=0)"), "the message names the model: {text}");
        assert!(!text.contains('\n'), "one line: {text}");

        // Another model name of the same provider is another model too.
        assert_ne!(asker(Provider("gpt-4o", ScriptedModel::new())).deployment_ref(), asker(Provider("gpt-4o-mini", ScriptedModel::new())).deployment_ref());
        // The same model resumes.
        let same = Runtime::with_store(scripted, store, env).resume(&id).await.unwrap();
        let Idle::NeedsInput(inputs) = same.idle().await.unwrap() else { panic!("expected the input request") };
        same.answer_text(&inputs[0], "Oslo").await.unwrap();
        assert_eq!(same.result().await.unwrap().text(), "Done.");
    });
}
