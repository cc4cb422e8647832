//! A PostgreSQL-backed worker: submits three runs by key, then works until every run is closed.
//! Start more copies of it (same database) and kill some: the survivors take their runs over.
//!
//! Run: `bash .ci/postgres.sh start`, then
//! `cargo run -p keel-store-postgres --example worker -- "$(bash .ci/postgres.sh url)"`

use keel::prelude::*;
use keel_store_postgres::{LeaseState, Leases, PostgresCommitter, Worker, WorkerConfig};

fn agent() -> Result<Agent, BuildError> {
    let weather = tool_fn(
        "get_weather",
        "The weather of a city.",
        r#"{"type":"object"}"#,
        |_| async { Ok("sunny, 21 °C".to_owned()) },
    );
    let model = ScriptedModel::new()
        .call_tool("get_weather", r#"{"city":"Paris"}"#)
        .then_text("It is sunny.");
    Agent::builder("weather")
        .version("1.0.0")
        .model(model)
        .tool_with(weather, ToolOptions::new().idempotent())
        .build()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args()
        .nth(1)
        .ok_or("usage: worker <postgres connection string>")?;
    let store = PostgresCommitter::connect(&url).await?; // creates or migrates schema `keel`
    let leases = Leases::new(store.clone());
    for key in ["ticket-1", "ticket-2", "ticket-3"] {
        leases
            .submit(&RunId::from_key(key), "What is the weather in Paris?")
            .await?; // idempotent
    }
    let worker = Worker::new(
        store,
        agent()?,
        WorkerConfig::new(format!("worker-{}", std::process::id())),
    )?;
    // Works until every run is closed (a server's worker would run until it is told to stop).
    worker.run(all_closed(leases.clone())).await?;
    for row in leases.list().await? {
        println!(
            "{} {} by {}: {}",
            row.run,
            row.state.as_str(),
            row.owner.unwrap_or_default(),
            row.detail.unwrap_or_default()
        );
    }
    Ok(())
}

async fn all_closed(leases: Leases) {
    loop {
        match leases.list().await {
            Ok(rows) if rows.iter().all(|r| r.state != LeaseState::Open) => return,
            Ok(_) => {}
            Err(e) => eprintln!("listing leases: {e}"),
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}
