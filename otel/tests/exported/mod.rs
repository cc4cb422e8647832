//! One traced run of the examples' weather agent, exported through a given tracer provider:
//! what `otlp.rs` and `phoenix.rs` send to their receivers.

#[path = "../../examples/support/mod.rs"]
mod support;

use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::layer::SubscriberExt as _;

/// Runs the weather agent (one tool call, two model calls) with its spans going to
/// `provider`, flushes and shuts the provider down, and returns the run's id.
pub fn run_weather_exported(provider: SdkTracerProvider) -> String {
    let subscriber = tracing_subscriber::registry().with(keel_otel::layer(&provider));
    let id = tracing::subscriber::with_default(subscriber, || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        rt.block_on(async {
            let agent = support::weather_agent(false).unwrap();
            let run = keel::agent::Runtime::in_memory(agent).unwrap().start("Weather in Paris?").await.unwrap();
            assert_eq!(run.result().await.unwrap().text(), "It is sunny in Paris.");
            run.id().to_string()
        })
    });
    provider.force_flush().expect("the receiver accepted the export");
    provider.shutdown().unwrap();
    id
}
