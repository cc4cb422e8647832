//! A run's spans exported over OTLP/HTTP to an OpenTelemetry collector (Jaeger, Grafana Tempo,
//! Honeycomb, an OpenTelemetry Collector, ...).
//!
//! ```text
//! OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 cargo run -p keel-otel --example tracing_otlp
//! cargo run -p keel-otel --example tracing_otlp -- --fixture   # a local receiver (CI)
//! ```
//!
//! `--fixture` starts `keel_otel::testing::OtlpReceiver` on 127.0.0.1, exports there, and
//! checks that the run's spans arrived.

use keel::prelude::*;
use keel_otel::testing::OtlpReceiver;
use std::time::Duration;

#[path = "support/mod.rs"]
mod support;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let fixture = std::env::args().any(|a| a == "--fixture");
    let receiver = if fixture { Some(OtlpReceiver::start()?) } else { None };
    let endpoint = receiver.as_ref().map(OtlpReceiver::endpoint);
    // Without an endpoint: OTEL_EXPORTER_OTLP_ENDPOINT, else http://localhost:4318.
    let otel = keel_otel::install_otlp("keel-weather-example", endpoint.as_deref())?;

    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
    let id = rt.block_on(async {
        let agent = support::weather_agent(false)?;
        let run = Runtime::in_memory(agent)?.start("What is the weather in Paris?").await?;
        println!("answer: {}", run.result().await?.text());
        Ok::<_, Box<dyn std::error::Error>>(run.id().to_string())
    })?;
    drop(rt);
    drop(otel); // sends the last batch

    if let Some(receiver) = receiver {
        let spans = receiver.wait_for(Duration::from_secs(10), |s| s.iter().any(|s| s.span.name == "invoke_agent weather"));
        for s in &spans {
            println!("received span {:<28} conversation {}", s.span.name, s.attribute("gen_ai.conversation.id").unwrap_or_default());
        }
        let of_run = spans.iter().filter(|s| s.attribute("gen_ai.conversation.id").as_deref() == Some(id.as_str())).count();
        if of_run < 4 || !receiver.refused().is_empty() {
            return Err(format!("expected the run's 4 spans at the receiver, got {of_run} (refused: {:?})", receiver.refused()).into());
        }
        println!("{of_run} spans of run {id} arrived over OTLP/HTTP");
    }
    Ok(())
}
