//! The HTTP side of the metrics: the layer that counts every request (the
//! `GET /metrics` scrape is a route, in `routes/meta.rs`).

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;

use super::Metrics;
use crate::error::ErrorStatus;

/// The `route` label of a request that matched no route.
const UNMATCHED: &str = "unmatched";

/// The `method` label of `method`: a standard method's name, else `other`
/// (a client may send any token as its method).
pub(super) fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::OPTIONS => "OPTIONS",
        Method::CONNECT => "CONNECT",
        Method::TRACE => "TRACE",
        _ => "other",
    }
}

/// Records every request: count, latency, errors. The route is the matched
/// route's template, never the path the client sent.
pub(crate) async fn layer(State(metrics): State<Metrics>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = method_label(request.method());
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| UNMATCHED.to_owned(), |p| p.as_str().to_owned());
    let response = next.run(request).await;
    let status = response.extensions().get::<ErrorStatus>().map(|s| s.0);
    metrics.request(method, &route, response.status(), status, started.elapsed());
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_outside_the_standard_ones_are_other() {
        assert_eq!(method_label(&Method::GET), "GET");
        assert_eq!(method_label(&Method::TRACE), "TRACE");
        let invented = Method::from_bytes(b"BREW").unwrap();
        assert_eq!(method_label(&invented), "other");
    }
}
