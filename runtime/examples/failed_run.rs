//! A failed run, handled: the model refuses every call, `result()` says so with a failure
//! code and message, and the program reports it and exits cleanly.
//!
//! Run: `cargo run -p keel-runtime --example failed_run`

use keel::chat::{Request, Response};
use keel::env::BoxFuture;
use keel::prelude::*;

/// A model client that fails definitively, as a provider does for a request it will never
/// accept (an invalid API key, say). Repeating it cannot help, so the agent does not.
struct RefusingModel;

impl ModelClient for RefusingModel {
    fn call<'a>(&'a self, _cx: &'a ModelCallContext, _request: Request) -> BoxFuture<'a, Result<Response, ModelError>> {
        Box::pin(async { Err(ModelError::Provider("HTTP 401: invalid API key".into())) })
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let agent = Agent::builder("assistant").version("1.0.0").model(RefusingModel).build()?;
    let run = Runtime::in_memory(agent)?.start("Hello?").await?;

    // `result()` is `Ok` only for a completed run: a failed, canceled or killed run is an
    // error that carries its status, failure code and message.
    match run.result().await {
        Ok(result) => println!("answer: {}", result.text()),
        Err(RunError::NotCompleted(failure)) => {
            println!("no answer: the run {} with {}", failure.status().as_str(), failure.code());
            println!("why: {}", failure.message());
            assert_eq!(failure.code(), "interaction.model.failed");
        }
        // Anything else (the store failed, another process took the run over) is an error
        // of this program.
        Err(other) => return Err(other.into()),
    }
    Ok(())
}
