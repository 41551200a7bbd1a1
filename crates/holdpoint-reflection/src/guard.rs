//! The reflection API's defences against the web pages of the developer's
//! browser (docs/reference.md §18): the reflection server runs every
//! action with no principal and no approval of its own, so it must answer
//! the Genkit CLI on this machine and nothing a web page can make a
//! browser send.
//!
//! - `Host` and `Origin`: the main server's loopback check
//!   ([`crate::hosts`]), with no extra names: a request for any other host
//!   (a rebound DNS name) is answered 421, one from a page of another
//!   origin 403.
//! - Bodies: a `POST` must say `Content-Type: application/json` (else
//!   415), which no HTML form and no "simple" cross-origin `fetch` can
//!   send without a CORS preflight, which this server never grants.
//! - Trace targets: `/api/notify` (and v2's `configure`) may point traces
//!   only at an `http://` server on a loopback host
//!   ([`check_telemetry_url`]), since traces carry every tool's input and
//!   output.

use axum::Json;
use axum::extract::Request;
use axum::http::{Method, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use holdpoint::Status;

use holdpoint_server::hosts::is_loopback_authority;
use serde_json::json;

/// Whether `value` (a `Content-Type`) is JSON: `application/json`, any
/// case, with or without parameters (`; charset=utf-8`).
fn is_json(value: &str) -> bool {
    let essence = value.split(';').next().unwrap_or_default().trim();
    essence.eq_ignore_ascii_case("application/json")
}

/// Refuses a `POST` whose body is not declared JSON with 415 and a JSON
/// error body; other methods pass.
pub(crate) async fn require_json(request: Request, next: Next) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let declared = request
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap_or("(not text)"));
    match declared {
        Some(value) if is_json(value) => next.run(request).await,
        Some(value) => error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Status::InvalidArgument,
            format!("the reflection API takes JSON bodies only: send Content-Type: application/json, not {value:?}"),
        ),
        None => error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Status::InvalidArgument,
            "the reflection API takes JSON bodies only: send Content-Type: application/json (none was sent)",
        ),
    }
}

/// `Ok` when `url` may receive traces: an `http://` URL (the trace client
/// speaks plain HTTP) with no user info whose host is a loopback name or
/// address, as [`is_loopback_authority`] reads them. The error says why not.
pub(crate) fn check_telemetry_url(url: &str) -> Result<(), String> {
    let uri: Uri = url
        .parse()
        .map_err(|e| format!("the telemetry server URL {url:?} is not a URL: {e}"))?;
    if uri.scheme_str() != Some("http") {
        return Err(format!("the telemetry server URL {url:?} is not an http:// URL"));
    }
    let Some(authority) = uri.authority() else {
        return Err(format!("the telemetry server URL {url:?} names no host"));
    };
    if !is_loopback_authority(authority.as_str()) {
        return Err(format!(
            "the telemetry server URL {url:?} is not on a loopback host; traces (every tool's input and output) stay on this machine"
        ));
    }
    Ok(())
}

/// A refusal with the reflection API's JSON error body,
/// `{"error": {"status", "message"}}`.
pub(crate) fn error(http: StatusCode, status: Status, message: impl Into<String>) -> Response {
    let body = json!({"error": {"status": status, "message": message.into()}});
    (http, Json(body)).into_response()
}
