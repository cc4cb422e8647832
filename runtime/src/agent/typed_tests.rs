//! Instructions, typed tools and typed output through the real Engine on tokio: what the model
//! receives, what the tool receives, what the run returns, and the configuration digest.

use crate::chat::{Request, Response, Role};
use crate::env::BoxFuture;
use crate::json::Json;
use crate::prelude::*;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};
use super::test_runtime::block_on;

/// What one model call received: its request and the output schema in its context.
type Seen = Arc<Mutex<Vec<(Request, Option<Json>)>>>;

/// A scripted model that records every request it receives.
struct Recording {
    seen: Seen,
    inner: ScriptedModel,
}

impl ModelClient for Recording {
    fn call<'a>(&'a self, cx: &'a ModelCallContext, request: Request) -> BoxFuture<'a, Result<Response, ModelError>> {
        self.seen.lock().unwrap().push((request.clone(), cx.output_schema.clone()));
        self.inner.call(cx, request)
    }
}

fn recording(inner: ScriptedModel) -> (Recording, Seen) {
    let seen = Seen::default();
    (Recording { seen: seen.clone(), inner }, seen)
}

#[derive(Deserialize, schemars::JsonSchema)]
struct WeatherArgs {
    /// The city, for example "Paris".
    city: String,
    /// The address of the weather station to ask.
    #[allow(dead_code)] // decoded (or refused) only
    station: Option<std::net::IpAddr>,
}

#[derive(Serialize)]
struct Weather {
    city: String,
    celsius: i32,
}

fn typed_weather(calls: Arc<Mutex<Vec<String>>>) -> FnTool {
    tool("get_weather", "The current weather of a city.", move |args: WeatherArgs| {
        let calls = calls.clone();
        async move {
            calls.lock().unwrap().push(args.city.clone());
            if args.city == "Atlantis" {
                return Err(format!("no weather station in {}", args.city));
            }
            Ok(Weather { city: args.city, celsius: 21 })
        }
    })
}

#[derive(Debug, Deserialize, Serialize, schemars::JsonSchema, PartialEq)]
struct Forecast {
    city: String,
    celsius: i32,
}

#[test]
fn instructions_are_the_leading_system_message_of_every_model_call() {
    block_on(async {
        let (model, seen) = recording(ScriptedModel::new().call_tool("get_weather", r#"{"city":"Paris"}"#).then_text("Sunny."));
        let agent = Agent::builder("weather")
            .version("1")
            .instructions("You are a terse weather assistant.")
            .model(model)
            .tool(typed_weather(Default::default()))
            .build()
            .unwrap();
        let run = Runtime::in_memory(agent).unwrap().start("Weather in Paris?").await.unwrap();
        assert_eq!(run.result().await.unwrap().text(), "Sunny.");
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 2);
        for (request, schema) in seen.iter() {
            let system: Vec<_> = request.messages.iter().filter(|m| m.role == Role::System).collect();
            assert_eq!(system.len(), 1, "{request:?}");
            assert_eq!(request.messages[0].role, Role::System);
            assert_eq!(request.messages[0].text(), "You are a terse weather assistant.");
            assert_eq!(request.messages[1].text(), "Weather in Paris?");
            assert!(schema.is_none(), "no typed output, no schema");
        }
    });
}

#[test]
fn instructions_tool_schemas_and_output_types_are_part_of_the_configuration_digest() {
    #[derive(Deserialize, schemars::JsonSchema)]
    struct OtherArgs {
        town: String,
    }
    #[derive(Deserialize, schemars::JsonSchema)]
    struct OtherOutput {
        #[allow(dead_code)] // its schema is what counts
        verdict: bool,
    }
    let base = || Agent::builder("a").version("1").model(ScriptedModel::new());
    let ref_of = |b: AgentBuilder| b.build().unwrap().deployment_ref().clone();
    let plain = ref_of(base().tool(typed_weather(Default::default())));
    let instructed = ref_of(base().instructions("Be brief.").tool(typed_weather(Default::default())));
    assert_eq!(instructed, ref_of(base().instructions("Be brief.").tool(typed_weather(Default::default()))), "same text, same ref");
    let refs = [
        instructed.clone(),
        ref_of(base().instructions("Be verbose.").tool(typed_weather(Default::default()))),
        ref_of(base().tool(tool("get_weather", "The current weather of a city.", |a: OtherArgs| async move {
            Ok::<_, String>(a.town)
        }))),
        ref_of(base().tool(typed_weather(Default::default())).output::<Forecast>()),
        ref_of(base().tool(typed_weather(Default::default())).output::<OtherOutput>()),
    ];
    for (i, r) in refs.iter().enumerate() {
        assert_ne!(r, &plain, "setting {i} must change the ref");
        for (j, other) in refs.iter().enumerate().skip(i + 1) {
            assert_ne!(r, other, "settings {i} and {j} must differ");
        }
    }
}

#[test]
fn a_changed_instruction_refuses_a_resume() {
    block_on(async {
        use crate::env::TokioEnv;
        use crate::kernel::commit::{Committer, MemoryCommitter};
        let store: Arc<dyn Committer> = Arc::new(MemoryCommitter::new());
        let agent = |text: &str| {
            Agent::builder("asker")
                .version("1")
                .instructions(text)
                .model(ScriptedModel::new().call_tool("ask", r#"{"question":"Which city?"}"#).then_text("ok"))
                .tool(AskHuman::new("ask", "Asks the user."))
                .build()
                .unwrap()
        };
        let env = TokioEnv::current().unwrap().env();
        let first = Runtime::with_store(agent("Be brief."), store.clone(), env.clone());
        let run = first.start("Weather?").await.unwrap();
        assert!(matches!(run.idle().await.unwrap(), Idle::NeedsInput(_)));
        let id = run.id();
        drop(run);
        drop(first);
        let refused = Runtime::with_store(agent("Be verbose."), store.clone(), env.clone()).resume(&id).await.unwrap_err();
        assert!(matches!(refused, RunError::Refused(_)), "{refused}");
        let resumed = Runtime::with_store(agent("Be brief."), store, env).resume(&id).await.unwrap();
        assert_eq!(resumed.pending_inputs().len(), 1);
    });
}

#[test]
fn a_typed_tool_derives_its_schema_decodes_its_arguments_and_returns_json() {
    let tool = typed_weather(Default::default());
    let schema = tool.input_schema().unwrap();
    assert_eq!(schema.get("type"), Some(&Json::str("object")));
    let city = schema.get("properties").and_then(|p| p.get("city")).unwrap();
    assert_eq!(city.get("type"), Some(&Json::str("string")));
    assert_eq!(city.get("description"), Some(&Json::str("The city, for example \"Paris\".")), "doc comments describe fields");
    assert_eq!(schema.get("required"), Some(&Json::Array(vec![Json::str("city")])));
    assert!(schema.get("$schema").is_none(), "{}", schema.to_canonical_string());

    block_on(async {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let (model, seen) = recording(
            ScriptedModel::new()
                .call_tool("get_weather", r#"{"city":"Paris"}"#)
                .call_tool("get_weather", r#"{"city":"Atlantis"}"#)
                // Valid for the schema (`format` only annotates), refused by serde.
                .call_tool("get_weather", r#"{"city":"Rome","station":"not an address"}"#)
                .then_text("Done."),
        );
        let agent = Agent::builder("weather").version("1").model(model).tool(typed_weather(calls.clone())).build().unwrap();
        let run = Runtime::in_memory(agent).unwrap().start("Weather?").await.unwrap();
        let mut settled = Vec::new();
        let mut events = run.events();
        while let Some(event) = events.next().await {
            if let RunEvent::ToolSettled { is_error, text, .. } = event {
                settled.push((is_error, text));
            }
        }
        assert_eq!(run.result().await.unwrap().text(), "Done.");
        assert_eq!(*calls.lock().unwrap(), ["Paris", "Atlantis"], "undecodable arguments never reach the function");
        assert_eq!(settled[0], (false, r#"{"celsius":21,"city":"Paris"}"#.to_owned()));
        assert!(settled[1].0 && settled[1].1.contains("no weather station in Atlantis"), "{settled:?}");
        assert!(settled[2].0, "{settled:?}");
        assert!(settled[2].1.contains("the arguments of `get_weather` do not fit its schema"), "{}", settled[2].1);
        assert!(settled[2].1.contains("invalid IP address syntax"), "serde's message: {}", settled[2].1);
        // The model saw each answer, the error included.
        let seen = seen.lock().unwrap();
        let last = seen.last().unwrap().0.messages.iter().map(|m| format!("{m:?}")).collect::<Vec<_>>().join("\n");
        assert!(last.contains("invalid IP address syntax"), "{last}");
        // The tool definition the model receives carries the derived schema.
        assert_eq!(&seen[0].0.tools[0].input_schema, schema_of_weather().as_ref().unwrap());
    });
}

fn schema_of_weather() -> Option<Json> {
    typed_weather(Default::default()).input_schema().cloned()
}

#[test]
fn a_typed_tool_keeps_its_declared_options() {
    let agent = Agent::builder("w")
        .version("1")
        .model(ScriptedModel::new())
        .tool_with(typed_weather(Default::default()), ToolOptions::new().keyed_by("city").idempotent())
        .max_concurrent_tool_calls(2)
        .build()
        .unwrap();
    let options = &agent.tool_options()["get_weather"];
    assert_eq!(options.concurrency(), &ToolConcurrency::KeyedBy("city".into()));
    assert_eq!(options.unknown_policy(), UnknownPolicy::Retry);
}

#[test]
fn a_typed_output_is_checked_fed_back_until_it_matches_and_read_back() {
    block_on(async {
        let (model, seen) = recording(
            ScriptedModel::new()
                .then_text("It is sunny in Paris.")
                .then_text(r#"{"city":"Paris"}"#)
                .then_text("```json\n{\"city\":\"Paris\",\"celsius\":21}\n```"),
        );
        let agent = Agent::builder("forecaster")
            .version("1")
            .instructions("You forecast weather.")
            .model(model)
            .output::<Forecast>()
            .max_model_calls(4)
            .build()
            .unwrap();
        let run = Runtime::in_memory(agent).unwrap().start("Weather in Paris?").await.unwrap();
        let result = run.result().await.unwrap();
        assert_eq!(result.output::<Forecast>().unwrap(), Forecast { city: "Paris".into(), celsius: 21 });
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 3, "two rejected answers, one accepted");
        let (first, schema) = &seen[0];
        let schema = schema.as_ref().expect("the output schema reaches the client");
        assert!(schema.get("properties").and_then(|p| p.get("celsius")).is_some());
        let system = first.messages[0].text();
        assert!(system.starts_with("You forecast weather.\n\nGive your final answer as one JSON value"), "{system}");
        assert!(system.contains(&schema.to_canonical_string()), "{system}");
        let feedback = |i: usize| seen[i].0.messages.last().unwrap().text();
        assert!(feedback(1).contains("not JSON"), "{}", feedback(1));
        assert!(feedback(2).contains("does not match the required JSON Schema") && feedback(2).contains("celsius"), "{}", feedback(2));
    });
}

#[test]
fn reading_an_answer_as_the_wrong_type_is_a_typed_error() {
    block_on(async {
        #[derive(Debug, Deserialize)]
        struct Verdict {
            #[allow(dead_code)]
            approved: bool,
        }
        let plain = Agent::builder("p").version("1").model(ScriptedModel::new().then_text("Sunny.")).build().unwrap();
        let result = Runtime::in_memory(plain).unwrap().start("?").await.unwrap().result().await.unwrap();
        let error = result.output::<Forecast>().unwrap_err();
        assert!(matches!(error, OutputError::NotJson { .. }), "{error}");
        assert!(error.to_string().contains("output::<T>()"), "{error}");

        let typed = Agent::builder("t")
            .version("1")
            .model(ScriptedModel::new().then_text(r#"{"city":"Paris","celsius":21}"#))
            .output::<Forecast>()
            .build()
            .unwrap();
        let result = Runtime::in_memory(typed).unwrap().start("?").await.unwrap().result().await.unwrap();
        let error = result.output::<Verdict>().unwrap_err();
        assert!(matches!(error, OutputError::Mismatch { .. }), "{error}");
        assert!(error.to_string().contains("missing field `approved`"), "{error}");
    });
}

#[test]
fn a_typed_output_that_never_matches_fails_the_run_at_the_model_call_limit() {
    block_on(async {
        let agent = Agent::builder("f")
            .version("1")
            .model(ScriptedModel::new().then_text("no").then_text("still no"))
            .output::<Forecast>()
            .max_model_calls(2)
            .build()
            .unwrap();
        let run = Runtime::in_memory(agent).unwrap().start("?").await.unwrap();
        let RunError::NotCompleted(failure) = run.result().await.unwrap_err() else { panic!("expected a failed run") };
        assert_eq!(failure.code(), "interaction.limit.model_calls", "{failure}");
    });
}
