//! Optional OpenTelemetry export of Holdpoint's `tracing` spans (agent,
//! turn, generate, model call, tool call, resume decision, store).
//!
//! [`Otel`] owns an OpenTelemetry tracer provider fed by a span exporter —
//! OTLP over HTTP configured by the standard `OTEL_EXPORTER_OTLP_ENDPOINT`
//! variables ([`Otel::from_env`]), or any [`SpanExporter`]
//! ([`Otel::with_exporter`]) — and hands out a `tracing-subscriber` layer
//! that turns spans into OpenTelemetry spans:
//!
//! ```no_run
//! use tracing_subscriber::layer::SubscriberExt;
//! # fn main() -> Result<(), holdpoint_otel::OtelError> {
//! let otel = holdpoint_otel::Otel::from_env("my-agents")?;
//! let subscriber = tracing_subscriber::registry().with(otel.layer());
//! tracing::subscriber::set_global_default(subscriber).ok();
//! // … run agents; at exit:
//! otel.shutdown()?;
//! # Ok(())
//! # }
//! ```
//!
//! Spans keep their `tracing` names and fields as attributes: an agent run
//! is one trace whose root `agent` span carries `session_id`, with `turn`,
//! `resume_decision`, `tool_call` (`tool`, `ref`, `outcome`, `held_by`) and
//! `store` (`op`, `snapshot_id`) spans below it.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkError;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use tracing::Subscriber;
use tracing_opentelemetry::OpenTelemetryLayer;
use tracing_subscriber::registry::LookupSpan;

pub use opentelemetry_sdk::trace::SpanExporter;

/// The instrumentation scope name of the spans Holdpoint exports.
pub const TRACER_NAME: &str = "holdpoint";

/// What can go wrong setting up or flushing the export.
#[derive(Debug, thiserror::Error)]
pub enum OtelError {
    /// The OTLP exporter could not be built (for example an invalid
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`).
    #[error("could not build the OTLP span exporter: {0}")]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
    /// Flushing buffered spans to the exporter failed.
    #[error("could not flush spans: {0}")]
    Flush(#[source] OTelSdkError),
    /// Shutting the tracer provider down failed.
    #[error("could not shut the span export down: {0}")]
    Shutdown(#[source] OTelSdkError),
}

/// An OpenTelemetry tracer provider and the layer that feeds it.
///
/// Spans are exported in batches from a background thread; call
/// [`force_flush`](Self::force_flush) or [`shutdown`](Self::shutdown)
/// before the process exits so the last batch is not lost.
#[derive(Debug, Clone)]
pub struct Otel {
    provider: SdkTracerProvider,
}

impl Otel {
    /// Exports over OTLP/HTTP (protobuf). The endpoint comes from
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, else `OTEL_EXPORTER_OTLP_ENDPOINT`
    /// (with `/v1/traces` appended), else `http://localhost:4318`; headers
    /// from `OTEL_EXPORTER_OTLP_HEADERS`. `OTEL_SERVICE_NAME`, when set, wins
    /// over `service_name`.
    pub fn from_env(service_name: &str) -> Result<Self, OtelError> {
        let exporter = opentelemetry_otlp::SpanExporter::builder().with_http().build()?;
        Ok(Self::with_exporter(service_name, exporter))
    }

    /// Exports through `exporter` (batched), for example an OTLP exporter
    /// configured in code, or `opentelemetry_sdk`'s in-memory exporter in tests.
    pub fn with_exporter<E: SpanExporter + 'static>(service_name: &str, exporter: E) -> Self {
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource(service_name))
            .build();
        Self { provider }
    }

    /// A `tracing-subscriber` layer that records spans through this provider.
    pub fn layer<S>(&self) -> OpenTelemetryLayer<S, SdkTracer>
    where
        S: Subscriber + for<'span> LookupSpan<'span>,
    {
        tracing_opentelemetry::layer().with_tracer(self.provider.tracer(TRACER_NAME))
    }

    /// The tracer provider, for installing it globally or building more tracers.
    pub fn provider(&self) -> &SdkTracerProvider {
        &self.provider
    }

    /// Exports every finished span now.
    pub fn force_flush(&self) -> Result<(), OtelError> {
        self.provider.force_flush().map_err(OtelError::Flush)
    }

    /// Flushes and stops the export; spans ended afterwards are dropped.
    pub fn shutdown(&self) -> Result<(), OtelError> {
        self.provider.shutdown().map_err(OtelError::Shutdown)
    }
}

fn resource(service_name: &str) -> Resource {
    let builder = Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_some_and(|v| !v.is_empty()) {
        builder.build()
    } else {
        builder.with_service_name(service_name.to_owned()).build()
    }
}
