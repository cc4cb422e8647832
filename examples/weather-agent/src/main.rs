//! A weather agent outside keel's workspace: a weather tool, a question to a human, an on-disk
//! store, a restart while the question is open, and a SIGKILL while the weather call runs.
//!
//! `cargo run` drives every step in child processes; `cargo run -- ask|answer|crash DIR` runs one.
use keel::prelude::*;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn agent(dir: &Path) -> Result<Agent, BuildError> {
    let log = dir.join("weather-calls.log");
    let weather = tool_fn(
        "get_weather",
        "The current weather of a city.",
        r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#,
        move |args| {
            let log = log.clone();
            async move {
                let city = args.get("city").and_then(|c| c.as_str()).unwrap_or("?").to_owned();
                let mut calls = std::fs::read_to_string(&log).unwrap_or_default();
                calls.push_str(&format!("{city}\n"));
                std::fs::write(&log, calls).map_err(|e| e.to_string())?;
                if std::env::var_os("SLOW_WEATHER").is_some() {
                    tokio::time::sleep(Duration::from_secs(30)).await; // long enough to be killed
                }
                Ok(format!("12 °C and rain in {city}"))
            }
        },
    );
    // Offline stand-in for an HTTP model client: any `ModelClient` plugs in the same way.
    let model = ScriptedModel::new()
        .call_tool("ask_user", r#"{"question":"Which city?"}"#)
        .call_tool("get_weather", r#"{"city":"Oslo"}"#)
        .then_text("It is 12 °C and raining in Oslo.");
    Agent::builder("weather")
        .version("1.0.0")
        .model(model)
        .tool(AskHuman::new("ask_user", "Ask the user a question."))
        .tool_with(weather, ToolOptions::new().idempotent()) // safe to repeat after a crash
        .build()
}

async fn step(mode: &str, dir: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let runtime = Runtime::on_disk(agent(dir)?, dir.join("store"))?;
    let id_file = dir.join("run-id");
    match mode {
        "ask" => {
            let run = runtime.start("What is the weather where I am?").await?;
            std::fs::write(&id_file, run.id().to_string())?;
            if let Idle::NeedsInput(inputs) = run.idle().await? {
                println!("asked: {} (exiting; the question stays open on disk)", inputs[0].prompt_text());
            }
        }
        "answer" => {
            let run = runtime.resume(&std::fs::read_to_string(&id_file)?.parse()?).await?;
            let input = run.pending_inputs().pop().ok_or("no open question")?;
            run.answer_text(&input, "Oslo").await?;
            run.result().await?; // killed before this returns
        }
        _ => {
            let run = runtime.resume(&std::fs::read_to_string(&id_file)?.parse()?).await?;
            let mut events = run.events();
            while let Some(event) = events.next().await {
                if let RunEvent::Unknown(u) = &event {
                    println!("in flight at the crash: {:?}, policy {:?}", u.kind, u.policy);
                }
            }
            println!("answer: {}", run.result().await?.text());
        }
    }
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if let (Some(mode), Some(dir)) = (args.get(1), args.get(2)) {
        return step(mode, Path::new(dir)).await;
    }
    let dir = std::env::temp_dir().join(format!("weather-agent-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let me = std::env::current_exe()?;
    assert!(Command::new(&me).args(["ask".as_ref(), dir.as_os_str()]).status()?.success());
    let mut child = Command::new(&me).args(["answer".as_ref(), dir.as_os_str()]).env("SLOW_WEATHER", "1").spawn()?;
    while !dir.join("weather-calls.log").exists() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child.kill()?; // SIGKILL while get_weather runs
    child.wait()?;
    println!("killed during the weather call");
    assert!(Command::new(&me).args(["resume".as_ref(), dir.as_os_str()]).status()?.success());
    let calls = std::fs::read_to_string(dir.join("weather-calls.log"))?;
    println!("weather calls: {}", calls.lines().count());
    assert_eq!(calls.lines().count(), 2, "one call cut off by the kill, one repeat by the Retry policy");
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
