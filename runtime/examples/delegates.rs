//! Delegates: a coordinator agent hands a task to a researcher agent (a child run with its own
//! model and limits), then answers with its result.
//!
//! Run: `cargo run -p keel-runtime --example delegates`

use keel::prelude::*;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let researcher = Agent::builder("researcher")
        .version("1.0.0")
        .description("Finds facts.")
        .model(ScriptedModel::new().then_text("Paris has about 2.1 million inhabitants."))
        .max_model_calls(2)
        .build()?;
    // A delegate takes the child's input: the messages it starts with.
    let task = r#"{"messages":[{"role":"user","parts":[{"type":"text","text":"How many people live in Paris?"}]}]}"#;
    let coordinator = Agent::builder("coordinator")
        .version("1.0.0")
        .model(ScriptedModel::new().call_tool("research", task).then_text("The researcher says: about 2.1 million."))
        .delegate("research", "Ask the researcher to find a fact.", researcher)
        .build()?;
    let runtime = Runtime::in_memory(coordinator)?;
    let run = runtime.start("How big is Paris?").await?;
    let mut events = run.events();
    while let Some(event) = events.next().await {
        match event {
            RunEvent::ModelResponse { process, text, tool_calls, .. } => {
                println!("[{process}] model: {text:?} calls {tool_calls:?}");
            }
            RunEvent::Finished(result) => println!("answer: {}", result.text()),
            _ => {}
        }
    }
    let result = run.result().await?;
    assert_eq!(result.text(), "The researcher says: about 2.1 million.");
    // The tokens of the whole tree: the coordinator's two calls and the researcher's one.
    println!("usage: {:?}", result.usage());
    assert_eq!(result.usage(), keel::chat::Usage::new(3, 3));
    Ok(())
}
