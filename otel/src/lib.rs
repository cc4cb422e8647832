//! OpenTelemetry export of keel's tracing spans.
//!
//! keel's runtime emits `tracing` spans named after OpenTelemetry's GenAI semantic conventions
//! (`invoke_agent {agent}`, `chat {model}`, `execute_tool {tool}`, with `gen_ai.*`
//! attributes; target [`keel::agent::TRACE_TARGET`](https://docs.rs/keel-runtime)). This crate
//! turns them into OpenTelemetry spans with `tracing-opentelemetry` and sends them over
//! OTLP/HTTP (protobuf) with `opentelemetry-otlp`, from the SDK's own batch thread.
//!
//! ```no_run
//! # fn main() -> Result<(), keel_otel::OtelError> {
//! // Reads OTEL_EXPORTER_OTLP_ENDPOINT (default http://localhost:4318); flushes on drop.
//! let _otel = keel_otel::install_otlp("my-agent-service", None)?;
//! // ... build the agent and run it: its spans are exported ...
//! # Ok(())
//! # }
//! ```
//!
//! To compose your own subscriber (with a log formatter, your own filters), build a provider
//! with [`otlp_provider`] and add [`layer`] to it.
#![warn(missing_docs)]

#[cfg(feature = "testing")]
pub mod testing;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use opentelemetry_sdk::Resource;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::registry::LookupSpan;

/// Why the exporter could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum OtelError {
    /// The OTLP exporter could not be built (an endpoint that is not a URL, for example).
    #[error("cannot build the OTLP exporter: {0}; check OTEL_EXPORTER_OTLP_ENDPOINT or the endpoint given")]
    Exporter(String),
    /// A global tracing subscriber is already installed: add [`layer`] to it instead.
    #[error("a global tracing subscriber is already installed ({0}); add `keel_otel::layer` to it instead")]
    AlreadyInstalled(String),
}

/// A tracer provider that batches spans and sends them to an OTLP/HTTP endpoint.
///
/// `endpoint` is the full traces URL (`http://collector:4318/v1/traces`); `None` reads
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, else `OTEL_EXPORTER_OTLP_ENDPOINT` (a base URL, to
/// which `/v1/traces` is appended), else `http://localhost:4318/v1/traces`. Call
/// [`SdkTracerProvider::shutdown`] before exiting so the last batch is sent.
pub fn otlp_provider(service_name: &str, endpoint: Option<&str>) -> Result<SdkTracerProvider, OtelError> {
    let mut builder = opentelemetry_otlp::SpanExporter::builder().with_http().with_protocol(Protocol::HttpBinary);
    if let Some(endpoint) = endpoint {
        builder = builder.with_endpoint(endpoint);
    }
    let exporter = builder.build().map_err(|e| OtelError::Exporter(e.to_string()))?;
    let resource = Resource::builder().with_service_name(service_name.to_owned()).build();
    Ok(SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource).build())
}

/// The `tracing` layer that records spans into `provider`'s tracer.
pub fn layer<S>(provider: &SdkTracerProvider) -> tracing_opentelemetry::OpenTelemetryLayer<S, SdkTracer>
where
    S: tracing::Subscriber + for<'span> LookupSpan<'span>,
{
    tracing_opentelemetry::layer().with_tracer(provider.tracer("keel"))
}

/// Keeps the exporter of [`install_otlp`] alive; dropping it sends the spans still queued.
#[must_use = "dropping the guard shuts the exporter down"]
pub struct OtelGuard {
    provider: SdkTracerProvider,
}

impl OtelGuard {
    /// The provider (to add more layers, or flush by hand).
    pub fn provider(&self) -> &SdkTracerProvider {
        &self.provider
    }
}

impl Drop for OtelGuard {
    fn drop(&mut self) {
        // Sends the last batch; an unreachable collector is not the program's failure.
        let _ = self.provider.force_flush();
        let _ = self.provider.shutdown();
    }
}

/// Installs a global subscriber that exports keel's spans (target `keel`, debug level and up:
/// runs, model and tool calls, input waits, Unknowns, commits) and other spans at info level
/// and up, over OTLP/HTTP (see [`otlp_provider`] for the endpoint).
pub fn install_otlp(service_name: &str, endpoint: Option<&str>) -> Result<OtelGuard, OtelError> {
    let provider = otlp_provider(service_name, endpoint)?;
    let filter = tracing_subscriber::filter::Targets::new()
        .with_target("keel", tracing::Level::DEBUG)
        .with_default(tracing::Level::INFO);
    let subscriber = tracing_subscriber::registry().with(layer(&provider)).with(filter);
    tracing::subscriber::set_global_default(subscriber).map_err(|e| OtelError::AlreadyInstalled(e.to_string()))?;
    Ok(OtelGuard { provider })
}
