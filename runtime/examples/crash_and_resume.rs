//! Crash and resume: a child process is killed with SIGKILL while a payment call is in flight;
//! the parent resumes the run from disk, sees the call as Unknown before `resume` returns,
//! settles it from the payment ledger, and shows the payment ran exactly once.
//!
//! Run: `cargo run -p keel-runtime --example crash_and_resume`

use keel::prelude::*;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The payment tool: appends one line per physical charge to a ledger file (fsync'd), then
/// takes its time (long enough to be killed mid-call).
fn charge(ledger: PathBuf) -> FnTool {
    tool_fn("charge", "Charge the customer's card.", r#"{"type":"object"}"#, move |_| {
        let ledger = ledger.clone();
        async move {
            let mut file = std::fs::OpenOptions::new().create(true).append(true).open(&ledger).map_err(|e| e.to_string())?;
            writeln!(file, "charged 10 EUR").map_err(|e| e.to_string())?;
            file.sync_all().map_err(|e| e.to_string())?;
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok("charged 10 EUR".to_owned())
        }
    })
}

fn agent(dir: &Path) -> Result<Agent, BuildError> {
    Agent::builder("shop")
        .version("1.0.0")
        .model(ScriptedModel::new().call_tool("charge", "{}").then_text("Your order is paid."))
        // Not idempotent: an Unknown charge is held for the host, never repeated blindly.
        .tool_with(charge(dir.join("ledger.txt")), ToolOptions::new().on_unknown(UnknownPolicy::Hold))
        .build()
}

/// The child: starts the run and charges (it is killed during the charge).
async fn child(dir: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let runtime = Runtime::on_disk(agent(dir)?, dir.join("store"))?;
    let run = runtime.start("Pay my order.").await?;
    // Written whole, then renamed: the parent never reads half an id.
    std::fs::write(dir.join("run-id.tmp"), run.id().to_string())?;
    std::fs::rename(dir.join("run-id.tmp"), dir.join("run-id"))?;
    run.result().await?;
    Err("the child should have been killed".into())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("child") {
        return child(Path::new(&args[2])).await;
    }
    let dir = std::env::temp_dir().join(format!("keel-crash-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let ledger = dir.join("ledger.txt");

    // 1. Run the child until the charge is physically made, then SIGKILL it.
    let mut child = std::process::Command::new(std::env::current_exe()?).arg("child").arg(&dir).spawn()?;
    // The tool may charge before the child has written the run id: wait for both.
    while !(ledger.exists() && dir.join("run-id").exists()) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child.kill()?; // SIGKILL on Unix
    child.wait()?;
    println!("child killed while the charge was in flight");

    // 2. Resume from disk. The in-flight charge is Unknown, and visible now.
    let id: RunId = std::fs::read_to_string(dir.join("run-id"))?.parse()?;
    let runtime = Runtime::on_disk(agent(&dir)?, dir.join("store"))?;
    let run = runtime.resume(&id).await?;
    let unknowns = run.unknowns();
    println!("after resume: {} unknown call(s): {:?}", unknowns.len(), unknowns.iter().map(|u| &u.kind).collect::<Vec<_>>());
    assert_eq!(unknowns.len(), 1);

    // 3. Settle it from the truth (the ledger), never by charging again.
    let charges = std::fs::read_to_string(&ledger)?.lines().count();
    let resolution = if charges == 1 { Resolution::Succeeded("charged 10 EUR".into()) } else { Resolution::Failed("not charged".into()) };
    run.resolve(&unknowns[0], resolution).await?;
    let result = run.result().await?;
    println!("answer: {}", result.text());

    let charges = std::fs::read_to_string(&ledger)?.lines().count();
    println!("physical charges: {charges}");
    assert_eq!(charges, 1, "the payment never ran twice");
    assert_eq!(result.text(), "Your order is paid.");
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
