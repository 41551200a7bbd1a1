//! The routes (docs/reference.md §12), one module per concern; [`ROUTES`], the list the
//! OpenAPI document ([`OPENAPI`]) is checked against.
//!
//! # The WebSocket protocol of `GET /agents/{name}/connect`
//!
//! JSON text messages:
//!
//! 1. The client sends `{"init": AgentInit}` (or `{}` for a new
//!    conversation). An init error is answered `{"error": {…}}` and the
//!    socket is closed with code 4000 + the HTTP status (4404, 4400, 4403).
//! 2. The client sends inputs, each an `AgentInput` (or `{"data":
//!    AgentInput}`). They are processed one at a time; each turn streams
//!    `{"message": AgentStreamChunk}` frames ending with its `turnEnd` chunk.
//!    A malformed input is answered `{"error": {…}}`; the connection stays.
//! 3. The client sends `{"close": true}`: the server finishes queued inputs,
//!    sends `{"result": AgentOutput}` (or `{"error": {…}}`, e.g. `ABORTED`
//!    for a resume that lost the exactly-once claim) and closes with 1000.
//!    The same happens when the agent ends by itself (a failed turn, a
//!    detach) or the server shuts down.
//!
//! A client that disconnects mid-turn cancels nothing: the turn finishes
//! and is persisted. Requests carrying an `Origin` header must come from
//! the server's own origin.

mod a2a;
pub(crate) mod agents;
mod agui;
mod answer;
mod connect;
mod grants;
mod inbox;
pub(crate) mod login;
mod meta;
mod notifications;
mod pending;
mod session;
mod settle;
mod snapshots;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::trace::TraceLayer;

pub use meta::OPENAPI;
pub use notifications::OPERATOR_ROLE;
pub use snapshots::{WAIT_DEFAULT, WAIT_MAX};

use crate::error::ApiError;
use crate::state::AppState;

/// The axum method router of `GET`, `POST` or `DELETE`.
macro_rules! verb {
    (GET) => {
        axum::routing::get
    };
    (POST) => {
        axum::routing::post
    };
    (DELETE) => {
        axum::routing::delete
    };
}

/// Declares the route table once: [`ROUTES`] (what the docs and the
/// OpenAPI document are checked against) and `add_routes` (what the router
/// serves) both come from the one list, so they cannot differ.
macro_rules! route_table {
    ($($method:ident $path:literal => $handler:path),* $(,)?) => {
        /// Every route the server serves: method and path (axum syntax), in
        /// the order the router adds them. Generated with the router from
        /// one list, so it is exactly what [`Server::router`](crate::Server::router) serves.
        pub const ROUTES: &[(&str, &str)] = &[$((stringify!($method), $path)),*];

        /// `router` with every route of [`ROUTES`].
        fn add_routes(router: Router<AppState>) -> Router<AppState> {
            router$(.route($path, verb!($method)($handler)))*
        }
    };
}

route_table! {
    GET "/" => meta::index,
    GET "/app.js" => meta::app_js,
    GET "/app.css" => meta::app_css,
    GET "/web/{file}" => meta::module,
    GET "/inbox" => inbox::inbox,
    GET "/audit" => inbox::audit,
    GET "/grants" => grants::list,
    DELETE "/grants/{id}" => grants::revoke,
    GET "/auth/login" => login::login,
    POST "/auth/session" => session::create,
    POST "/auth/signout" => session::sign_out,
    GET "/healthz" => meta::healthz,
    GET "/openapi.json" => meta::openapi,
    GET "/.well-known/holdpoint-receipts.json" => meta::receipt_keys,
    GET "/metrics" => meta::scrape,
    GET "/agents" => pending::list_agents,
    POST "/agents/{name}" => agents::run,
    POST "/agents/{name}/getSnapshot" => snapshots::get_snapshot,
    POST "/agents/{name}/waitForSnapshot" => snapshots::wait_for_snapshot,
    POST "/agents/{name}/abort" => snapshots::abort,
    GET "/agents/{name}/pending" => pending::pending,
    GET "/agents/{name}/audit" => pending::audit,
    GET "/agents/{name}/inDoubt" => settle::in_doubt,
    POST "/agents/{name}/settle" => settle::settle,
    POST "/agents/{name}/answer" => answer::answer,
    GET "/agents/{name}/connect" => connect::connect,
    POST "/agents/{name}/agui" => agui::run,
    GET "/agents/{name}/.well-known/agent-card.json" => a2a::card,
    POST "/agents/{name}/a2a" => a2a::rpc,
    GET "/notifications" => notifications::list,
    POST "/notifications/{id}/retry" => notifications::retry,
    POST "/notifications/endpoints/{channel}/enable" => notifications::enable,
}

async fn not_found(method: Method, uri: Uri) -> ApiError {
    ApiError::not_found(format!("no route for {method} {}", uri.path()))
}

async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::invalid(format!("{method} is not allowed on {}", uri.path())).with_http(StatusCode::METHOD_NOT_ALLOWED)
}

fn panicked(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    tracing::error!("a request handler panicked");
    ApiError::new(holdpoint::Status::Internal, "internal error").into_response()
}

/// The router of a server with this state.
pub(crate) fn router(state: AppState) -> Router {
    let limits = state.limits();
    add_routes(Router::new())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(limits.body))
        .layer(CatchPanicLayer::custom(panicked))
        .layer(TraceLayer::new_for_http())
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(state.hosts()),
            crate::hosts::guard,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.metrics().clone(),
            crate::metrics::layer,
        ))
        // Every response, refusals included, is taken for what its
        // Content-Type says.
        .layer(SetResponseHeaderLayer::overriding(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .with_state(state)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::ROUTES;

    type Listed = BTreeSet<(String, String)>;

    /// The `METHOD /path` routes in the first column of the Markdown table
    /// under `heading` (up to the next heading): one or more backticked
    /// routes per row.
    fn listed<'a>(lines: impl Iterator<Item = &'a str>, heading: &str) -> Listed {
        let mut out = BTreeSet::new();
        let section = lines
            .skip_while(|l| *l != heading)
            .skip(1)
            .take_while(|l| !l.starts_with('#'));
        for row in section.filter(|l| l.starts_with("| `")) {
            let first = row.split(" | ").next().unwrap_or_default();
            for route in first.split('`').skip(1).step_by(2) {
                let (method, path) = route.split_once(' ').expect("METHOD /path");
                out.insert((method.to_owned(), path.to_owned()));
            }
        }
        out
    }

    fn served() -> Listed {
        ROUTES.iter().map(|(m, p)| ((*m).to_owned(), (*p).to_owned())).collect()
    }

    #[test]
    fn the_crate_docs_list_every_route() {
        let docs = include_str!("../lib.rs");
        let lines = docs.lines().filter_map(|l| l.strip_prefix("//!")).map(str::trim);
        assert_eq!(
            listed(lines, "# Routes"),
            served(),
            "the route table in crates/holdpoint-server/src/lib.rs must list exactly ROUTES"
        );
    }

    #[test]
    fn the_reference_lists_every_route() {
        let reference = include_str!("../../../../docs/reference.md");
        assert_eq!(
            listed(reference.lines(), "### 12.2 Routes"),
            served(),
            "docs/reference.md §12.2 must list exactly ROUTES"
        );
    }

    /// The section numbers of docs/reference.md (`## 10.`, `### 10.4`, …).
    fn sections(reference: &str) -> Vec<Vec<u32>> {
        reference
            .lines()
            .filter(|l| l.starts_with("##"))
            .filter_map(|l| l.trim_start_matches('#').trim_start().split(' ').next())
            .map(|n| n.trim_end_matches('.').split('.').map(str::parse).collect())
            .filter_map(Result::ok)
            .collect()
    }

    /// The reference this module cites: its sections are numbered 1, 2, …
    /// at every level with none left out, and every `§N.M` it cites exists.
    #[test]
    fn the_reference_numbers_its_sections_without_gaps() {
        let reference = include_str!("../../../../docs/reference.md");
        let numbers = sections(reference);
        let mut last: std::collections::BTreeMap<Vec<u32>, u32> = Default::default();
        for n in &numbers {
            let (own, parent) = n.split_last().expect("a number");
            let expected = last.get(parent).map_or(1, |l| l + 1);
            assert_eq!(
                *own,
                expected,
                "docs/reference.md: section {n:?} follows {}",
                expected - 1
            );
            last.insert(parent.to_vec(), *own);
        }
        for cited in reference.split('§').skip(1) {
            let number: String = cited.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
            let number: Vec<u32> = number
                .trim_end_matches('.')
                .split('.')
                .filter_map(|n| n.parse().ok())
                .collect();
            if number.is_empty() {
                continue; // "§N", the convention's placeholder
            }
            assert!(
                numbers.contains(&number),
                "docs/reference.md cites §{number:?}, which it does not have"
            );
        }
    }
}
