//! The HTTP side of the metrics: the layer that counts every request, and
//! the `GET /metrics` scrape.

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use crate::error::{ApiError, ErrorStatus};
use crate::state::AppState;

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
pub(crate) async fn layer(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = method_label(request.method());
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| UNMATCHED.to_owned(), |p| p.as_str().to_owned());
    let response = next.run(request).await;
    let status = response.extensions().get::<ErrorStatus>().map(|s| s.0);
    state
        .metrics()
        .request(method, &route, response.status(), status, started.elapsed());
    response
}

/// Whether `parts` may read the metrics: always when they are open; with
/// the metrics token as a bearer token; or as any principal the server's
/// providers authenticate. The anonymous caller of a server that serves
/// anonymously (on loopback, see
/// [`ServerBuilder::allowed_hosts`](crate::ServerBuilder::allowed_hosts))
/// may read them unless a metrics token is set.
async fn may_scrape(state: &AppState, parts: &Parts) -> Result<(), ApiError> {
    if state.metrics_open() {
        return Ok(());
    }
    let token = state.metrics_token();
    if let Some(token) = token {
        let given = crate::auth::bearer(parts);
        if given.is_some_and(|g| Sha256::digest(g.as_bytes()) == Sha256::digest(token.as_bytes())) {
            return Ok(());
        }
    }
    let refused = || {
        ApiError::unauthenticated(if token.is_some() {
            "the metrics need their bearer token or a principal's credentials"
        } else {
            "the metrics need a principal's credentials (or a metrics token)"
        })
    };
    match state.authenticator().authenticate(parts).await {
        Ok(identity) if identity.principal().is_some() => Ok(()),
        Ok(_) if token.is_none() => Ok(()),
        _ => Err(refused()),
    }
}

/// `GET /metrics`.
pub(crate) async fn scrape(State(state): State<AppState>, request: Request) -> Response {
    let (parts, _) = request.into_parts();
    if let Err(e) = may_scrape(&state, &parts).await {
        return e.into_response();
    }
    let metrics = state.metrics();
    metrics.running(state.turns().running());
    let now = chrono::Utc::now();
    for agent in state.agents().values().filter(|a| a.is_server_managed()) {
        let Some(store) = agent.store() else { continue };
        match store.count_waiting(Some(agent.name())).await {
            Ok(waiting) => {
                let age = waiting
                    .oldest
                    .map_or(0.0, |t| (now - t).num_milliseconds().max(0) as f64 / 1000.0);
                metrics.waiting(agent.name(), waiting.count, age);
            }
            Err(e) => tracing::warn!(agent = agent.name(), error = %e, "metrics: could not count waiting sessions"),
        }
    }
    let mut response = (StatusCode::OK, metrics.render()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(prometheus_client::encoding::prometheus_text::CONTENT_TYPE),
    );
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
