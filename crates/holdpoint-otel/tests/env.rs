//! `Otel::from_env` reads the standard OTLP endpoint variable. One test in
//! its own binary: it changes the process environment.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use holdpoint_otel::{Otel, OtelError};

#[test]
fn from_env_builds_an_otlp_exporter_from_the_endpoint_variable() {
    // SAFETY: the only test of this binary; no other thread reads the environment.
    unsafe {
        std::env::remove_var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
        std::env::set_var("OTEL_EXPORTER_OTLP_ENDPOINT", "http://bad host:4318");
    }
    let err = Otel::from_env("test").unwrap_err();
    assert!(matches!(err, OtelError::Exporter(_)), "{err}");
    assert!(err.to_string().contains("OTEL_EXPORTER_OTLP_ENDPOINT"), "{err}");

    // SAFETY: as above.
    unsafe { std::env::set_var("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318") };
    let otel = Otel::from_env("test").unwrap();
    otel.force_flush().unwrap();
    otel.shutdown().unwrap();
}
