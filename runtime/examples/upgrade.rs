//! Versions side by side and an upgrade: two runs park under version 1 of an agent, version 2
//! is deployed (a new process with both versions registered), one run finishes under version
//! 1, the other is upgraded to version 2 and finishes there. Then a long run continues as new
//! runs by itself (continue-as-new).
//!
//! Run: `cargo run -p keel-runtime --example upgrade` (runs both processes itself).

use keel::prelude::*;
use std::path::Path;

/// The concierge as it was deployed first: it asks for the city, then books.
fn version_1() -> Result<Agent, BuildError> {
    Agent::builder("concierge")
        .version("1")
        .model(
            ScriptedModel::new()
                .call_tool("ask_user", r#"{"question":"Which city?"}"#)
                .then_text("Booked (version 1)."),
        )
        .tool(AskHuman::new("ask_user", "Ask the user a question."))
        .build()
}

/// Version 2 changed the model script (in a real program: prompts, tools, the model).
fn version_2() -> Result<Agent, BuildError> {
    Agent::builder("concierge")
        .version("2")
        .instructions("Confirm bookings with the city name.")
        .model(ScriptedModel::new().then_text("Booked in the city you named (version 2)."))
        .tool(AskHuman::new("ask_user", "Ask the user a question."))
        .build()
}

/// Process 1 (version 1 deployed): two runs park on their question.
async fn park(dir: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let runtime = Runtime::on_disk(version_1()?, dir.join("store"))?;
    let mut ids = Vec::new();
    for task in ["Book a hotel.", "Book a table."] {
        let run = runtime.start(task).await?;
        let Idle::NeedsInput(questions) = run.idle().await? else { return Err("expected a question".into()) };
        println!("run {} (version {}) asks: {}", run.id(), run.version(), questions[0].prompt_text());
        ids.push(run.id().to_string());
    }
    std::fs::write(dir.join("run-ids"), ids.join("\n"))?;
    Ok(())
}

/// Process 2 (version 2 deployed, version 1 kept for the runs it started).
async fn deploy(dir: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let text = std::fs::read_to_string(dir.join("run-ids"))?;
    let ids: Vec<RunId> = text.lines().map(str::parse).collect::<Result<_, _>>()?;
    let (v1, v2) = (version_1()?, version_2()?);
    let runtime = Runtime::on_disk(v2.clone(), dir.join("store"))?;
    runtime.register(&v1)?;
    println!("versions: {:?} (new runs start under the first)", runtime.versions());

    // The first run finishes under the version it started with.
    let run = runtime.resume(&ids[0]).await?;
    assert_eq!(run.version(), "1");
    let question = run.pending_inputs().remove(0);
    run.answer_text(&question, "Lyon").await?;
    let answer = run.result().await?.text();
    println!("run {} finished under version {}: {answer}", run.id(), run.version());
    assert_eq!(answer, "Booked (version 1).");

    // The second moves to version 2 at its next model call, after the user's answer.
    let run = runtime.resume(&ids[1]).await?;
    match run.upgrade(&v2).await {
        Err(RunError::NotAtBoundary { waiting, .. }) => println!("upgrade requested; the run waits for {waiting}"),
        other => return Err(format!("expected the upgrade to wait for the answer, got {other:?}").into()),
    }
    let question = run.pending_inputs().remove(0);
    run.answer_text(&question, "Oslo").await?;
    let next = run.upgrade(&v2).await?; // the same call again returns the successor
    let answer = next.result().await?.text();
    println!("run {} continued as run {} under version {}: {answer}", run.id(), next.id(), next.version());
    assert_eq!(answer, "Booked in the city you named (version 2).");
    assert!(matches!(run.result().await, Err(RunError::ContinuedAs { .. })));
    assert_eq!(run.upgrade(&v2).await?.id(), next.id(), "an upgrade happens once");
    Ok(())
}

/// A model for the long run: it reads the last step done from the newest tool result it is
/// shown (a real model reads the carried conversation the same way) and asks for the next,
/// until step 5.
struct Stepper;

impl ModelClient for Stepper {
    fn call<'a>(&'a self, _: &'a ModelCallContext, request: keel::chat::Request) -> keel::env::BoxFuture<'a, Result<keel::chat::Response, ModelError>> {
        use keel::chat::{FinishReason, Part, Response, ToolCall, Usage};
        let done = request
            .messages
            .iter()
            .flat_map(|m| m.parts.iter())
            .filter_map(|p| match p {
                Part::ToolResult(r) => r.output.content.strip_prefix("done step ")?.parse::<u32>().ok(),
                _ => None,
            })
            .last()
            .unwrap_or(0);
        let response = if done < 5 {
            let call = ToolCall::new(format!("call_{}", done + 1), "work", format!(r#"{{"step":{}}}"#, done + 1));
            Response::new(Message::assistant_with_calls("", vec![call]), FinishReason::ToolCalls, Usage::new(10, 5))
        } else {
            Response::new(Message::assistant("All five steps are done."), FinishReason::Stop, Usage::new(10, 5))
        };
        Box::pin(async move { Ok(response) })
    }
}

/// Continue-as-new: a run may make 3 model calls, but hands over after 2, carrying the task
/// and the last exchange, so the work goes on across linked runs until it is done.
async fn long_run() -> Result<(), Box<dyn std::error::Error>> {
    let work = tool_fn("work", "Does one step.", r#"{"type":"object","properties":{"step":{"type":"integer"}}}"#, |args| async move {
        Ok(format!("done step {}", args.get("step").and_then(|s| s.as_u64()).unwrap_or(0)))
    });
    let agent = Agent::builder("worker")
        .version("1")
        .model(Stepper)
        .tool(work)
        .max_model_calls(3)
        .continue_as_new(ContinueAsNew::after_model_calls(2).keep_last_messages(2))
        .build()?;
    let runtime = Runtime::in_memory(agent)?;
    let mut run = runtime.start("Do the five steps.").await?;
    let mut runs = 1;
    loop {
        match run.result().await {
            Ok(result) => {
                println!("run {} answered: {}", run.id(), result.text());
                assert_eq!((runs, result.text().as_str()), (3, "All five steps are done."));
                return Ok(());
            }
            Err(RunError::ContinuedAs { successor, reason, .. }) => {
                println!("run {} continued as run {successor} ({reason})", run.id());
                run = run.successor().await?;
                runs += 1;
            }
            Err(other) => return Err(other.into()),
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("park") => park(Path::new(&args[2])).await,
        Some("deploy") => deploy(Path::new(&args[2])).await,
        _ => {
            let dir = std::env::temp_dir().join(format!("keel-upgrade-{}", std::process::id()));
            std::fs::create_dir_all(&dir)?;
            let me = std::env::current_exe()?;
            let ok = std::process::Command::new(&me).arg("park").arg(&dir).status()?.success()
                && std::process::Command::new(&me).arg("deploy").arg(&dir).status()?.success();
            std::fs::remove_dir_all(&dir)?;
            if !ok {
                return Err("a step failed".into());
            }
            long_run().await
        }
    }
}
