//! A run's spans printed to stdout by `tracing-subscriber`'s formatter: the agent span, each
//! model call and tool call with their GenAI attributes, and the commits in between.
//!
//! ```text
//! cargo run -p keel-otel --example tracing_stdout
//! ```

use keel::prelude::*;
use tracing_subscriber::fmt::format::FmtSpan;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

#[path = "support/mod.rs"]
mod support;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // keel's spans and events (target `keel`): info shows runs, model and tool calls, waits and
    // Unknowns; `tracing::Level::DEBUG` adds every commit. A closed span prints with its fields.
    tracing_subscriber::registry()
        .with(tracing_subscriber::fmt::layer().with_span_events(FmtSpan::CLOSE).with_ansi(false))
        .with(tracing_subscriber::filter::Targets::new().with_target(keel::agent::TRACE_TARGET, tracing::Level::INFO))
        .init();

    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
    rt.block_on(async {
        let agent = support::weather_agent(true)?;
        let run = Runtime::in_memory(agent)?.start("What is the weather in Paris?").await?;
        println!("answer: {}", run.result().await?.text());
        Ok(())
    })
}
