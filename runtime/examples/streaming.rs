//! Streaming: model deltas printed to stdout as they arrive, then the durable answer.
//!
//! Run: `cargo run -p keel-runtime --example streaming`

use keel::prelude::*;
use std::io::Write;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let model = ScriptedModel::new()
        .then_text("Durable agents survive crashes: every step is committed before it is reported.")
        .chunk_bytes(6);
    let agent = Agent::builder("streamer").version("1.0.0").streaming_model(model).build()?;
    let runtime = Runtime::in_memory(agent)?;
    let run = runtime.start("Explain durable agents in one sentence.").await?;
    let mut events = run.events();
    let mut streamed = String::new();
    while let Some(event) = events.next().await {
        match event {
            // Attempt facts: shown as they arrive, never relied upon.
            RunEvent::ModelDelta { text, .. } => {
                print!("{text}");
                std::io::stdout().flush()?;
                streamed.push_str(&text);
            }
            RunEvent::DeltasDropped { dropped } => eprintln!("\n({dropped} deltas dropped: the consumer was slow)"),
            // The durable answer, complete whatever happened to the deltas.
            RunEvent::Finished(result) => {
                println!();
                assert_eq!(result.text(), streamed, "every delta arrived, in order");
                println!("final: {}", result.text());
            }
            _ => {}
        }
    }
    Ok(())
}
