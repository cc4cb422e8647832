//! Human in the loop: the run parks on a question, the process exits, and a new process
//! resumes the run from disk and answers it.
//!
//! Run: `cargo run -p keel-runtime --example human_in_the_loop` (runs both processes itself), or by
//! hand: `... -- ask DIR` then `... -- answer DIR "Oslo"`.

use keel::prelude::*;
use std::path::Path;

fn agent() -> Result<Agent, BuildError> {
    Agent::builder("concierge")
        .version("1.0.0")
        .model(
            ScriptedModel::new()
                .call_tool("ask_user", r#"{"question":"Which city are you in?"}"#)
                .then_text("Thanks, I noted your city."),
        )
        .tool(AskHuman::new("ask_user", "Ask the user a question."))
        .build()
}

/// Process 1: start, wait until the run needs an answer, print the question, exit.
async fn ask(dir: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let runtime = Runtime::on_disk(agent()?, dir.join("store"))?;
    let run = runtime.start("Remember my city.").await?;
    let Idle::NeedsInput(inputs) = run.idle().await? else { return Err("expected a question".into()) };
    println!("run {} asks: {}", run.id(), inputs[0].prompt_text());
    std::fs::write(dir.join("run-id"), run.id().to_string())?;
    Ok(())
}

/// Process 2: resume the parked run from disk, answer, print the result.
async fn answer(dir: &Path, text: &str) -> Result<(), Box<dyn std::error::Error>> {
    let id: RunId = std::fs::read_to_string(dir.join("run-id"))?.parse()?;
    let runtime = Runtime::on_disk(agent()?, dir.join("store"))?;
    let run = runtime.resume(&id).await?;
    let inputs = run.pending_inputs();
    println!("resumed {id}: still waiting for {:?}", inputs[0].prompt_text());
    run.answer_text(&inputs[0], text).await?;
    let result = run.result().await?;
    println!("answer: {}", result.text());
    assert_eq!(result.text(), "Thanks, I noted your city.");
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("ask") => ask(Path::new(&args[2])).await,
        Some("answer") => answer(Path::new(&args[2]), &args[3]).await,
        _ => {
            // Both steps, each in its own process.
            let dir = std::env::temp_dir().join(format!("keel-hitl-{}", std::process::id()));
            std::fs::create_dir_all(&dir)?;
            let me = std::env::current_exe()?;
            let ok = std::process::Command::new(&me).arg("ask").arg(&dir).status()?.success()
                && std::process::Command::new(&me).arg("answer").arg(&dir).arg("Oslo").status()?.success();
            std::fs::remove_dir_all(&dir)?;
            if ok { Ok(()) } else { Err("a step failed".into()) }
        }
    }
}
