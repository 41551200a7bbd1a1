//! The routes about the server itself: `GET /healthz`, `GET /metrics`,
//! `GET /openapi.json`, and the approval page (`/`, `/app.js`, `/app.css`, `/web/{file}`),
//! whose files are built into the binary.

use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::error::ApiError;
use crate::state::AppState;

/// The OpenAPI 3.1 document of every route.
pub const OPENAPI: &str = include_str!("../openapi.json");
const INDEX_HTML: &str = include_str!("../../web/index.html");
const APP_JS: &str = include_str!("../../web/app.js");
const APP_CSS: &str = include_str!("../../web/app.css");

/// The page's JavaScript modules, served under `/web/{file}`: a fixed
/// table, so no path reaches the file system.
const MODULES: &[(&str, &str)] = &[
    ("api.js", include_str!("../../web/api.js")),
    ("dom.js", include_str!("../../web/dom.js")),
    ("forms.js", include_str!("../../web/forms.js")),
    ("queue.js", include_str!("../../web/queue.js")),
    ("detail.js", include_str!("../../web/detail.js")),
    ("audit.js", include_str!("../../web/audit.js")),
    ("login.js", include_str!("../../web/login.js")),
    ("grants.js", include_str!("../../web/grants.js")),
];

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; \
                   base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

fn asset(content_type: &'static str, body: &'static str) -> Response {
    asset_with(content_type, body, HeaderValue::from_static(CSP))
}

fn asset_with(content_type: &'static str, body: &'static str, csp: HeaderValue) -> Response {
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CONTENT_SECURITY_POLICY, csp);
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// The page; with a sign-in issuer configured, its origin may also be
/// fetched (discovery and the token endpoint), and nothing else is added.
pub(crate) async fn index(State(state): State<AppState>) -> Response {
    let csp = state
        .page_login()
        .map(|login| {
            CSP.replacen(
                "connect-src 'self'",
                &format!("connect-src 'self' {}", login.origin()),
                1,
            )
        })
        .and_then(|csp| HeaderValue::from_str(&csp).ok())
        .unwrap_or(HeaderValue::from_static(CSP));
    asset_with("text/html; charset=utf-8", INDEX_HTML, csp)
}

pub(crate) async fn app_js() -> Response {
    asset("text/javascript; charset=utf-8", APP_JS)
}

pub(crate) async fn app_css() -> Response {
    asset("text/css; charset=utf-8", APP_CSS)
}

/// `GET /web/{file}`: one of the page's modules; 404 for any other name.
pub(crate) async fn module(axum::extract::Path(file): axum::extract::Path<String>) -> Response {
    match MODULES.iter().find(|(name, _)| *name == file) {
        Some((_, body)) => asset("text/javascript; charset=utf-8", body),
        None => ApiError::not_found(format!("no page module {file}")).into_response(),
    }
}

/// 200 while serving; 503 once shutdown has begun, so balancers stop
/// sending work.
pub(crate) async fn healthz(State(state): State<AppState>) -> Response {
    if state.turns().is_closing() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(json!({"status": "closing", "running": state.turns().running()})),
        )
            .into_response();
    }
    axum::Json(json!({"status": "ok", "agents": state.agents().len(), "running": state.turns().running()}))
        .into_response()
}

/// The public keys approval receipts verify against (a JWKS,
/// docs/reference.md §20): public, like any JWKS; 404 when the server was
/// given none ([`ServerBuilder::receipt_keys`](crate::ServerBuilder::receipt_keys)).
pub(crate) async fn receipt_keys(State(state): State<AppState>) -> Response {
    match state.receipt_keys() {
        Some(jwks) => {
            let mut response = axum::Json(jwks.clone()).into_response();
            response
                .headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=300"));
            response
        }
        None => crate::error::ApiError::not_found(
            "this server publishes no receipt keys: it was built without ServerBuilder::receipt_keys",
        )
        .into_response(),
    }
}

pub(crate) async fn openapi() -> Response {
    let mut response = (StatusCode::OK, OPENAPI).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
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
        let Some(store) = agent.capabilities().listing.as_ref() else {
            continue;
        };
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
    if let Some(store) = state.outbox() {
        match (store.outbox_stats(now).await, store.stopped_endpoints().await) {
            (Ok(stats), Ok(stopped)) => metrics.outbox(&stats, stopped.len(), now),
            (Err(e), _) | (_, Err(e)) => tracing::warn!(error = %e, "metrics: could not count the outbox"),
        }
    }
    let mut response = (StatusCode::OK, metrics.render()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(prometheus_client::encoding::prometheus_text::CONTENT_TYPE),
    );
    response
}
