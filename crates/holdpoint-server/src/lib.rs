//! The HTTP face of Holdpoint agents: an axum [`Router`](axum::Router) that
//! serves any set of agents as docs/reference.md §12 describes, with the approval page a
//! person uses to answer paused calls.
//!
//! # The map
//!
//! | item | what it does |
//! |---|---|
//! | [`Server`], [`ServerBuilder`] | agents + auth + signing keys + limits → [`Server::router`] |
//! | [`serve`], [`serve_app`], [`shutdown_signal`] | serving with a graceful, bounded shutdown |
//! | [`auth`] | context providers: [`ApiKeys`](auth::ApiKeys), [`JwtVerifier`](auth::JwtVerifier), your own [`ContextProvider`](auth::ContextProvider) |
//! | [`signing`] | signed client-held state: [`KeyRing`](signing::KeyRing), [`SigningCodec`](signing::SigningCodec) |
//! | [`envelope`] | the `{"data","init"}` / `{"result"}` / `{"error"}` wire structs and JSON extractors |
//! | [`error`] | [`ApiError`] and [`http_status`](error::http_status), the one status → HTTP table |
//! | [`Limits`] | body and message size limits (default 1 MiB) |
//! | [`metrics`], [`Metrics`] | Prometheus metrics at `GET /metrics`; a counting middleware and a timed store for the agents |
//! | `otel` (feature `otel`) | OpenTelemetry export of the tracing spans: the `holdpoint-otel` crate, re-exported |
//!
//! # Routes
//!
//! Every route the server serves ([`routes::ROUTES`]; a unit test keeps this
//! table, docs/reference.md §12.2 and `GET /openapi.json` listing exactly
//! those). Query parameters and bodies: §12.2 and the OpenAPI document.
//!
//! | route | what |
//! |---|---|
//! | `POST /agents/{name}` | one turn: `{"data": AgentInput, "init"?: AgentInit}` → `{"result": AgentOutput}`; SSE with `?stream=true` or `Accept: text/event-stream` |
//! | `POST /agents/{name}/getSnapshot` | `{"data": {"snapshotId"} \| {"sessionId"}}` → `{"result": Snapshot}` |
//! | `POST /agents/{name}/waitForSnapshot` | `{"data": {"snapshotId", "timeoutMs"?}}` → the snapshot once it leaves `pending`/`aborting` (bounded wait) |
//! | `POST /agents/{name}/abort` | `{"data": {"snapshotId"}}` → `{"result": {"snapshotId", "status", "previousStatus"}}` |
//! | `GET /agents/{name}/pending` | paused calls waiting for an answer: the caller's, and those its roles may answer |
//! | `POST /agents/{name}/answer` | an approver's approve or deny of one paused call (quorum, standing grant) |
//! | `GET /agents/{name}/audit` | decisions about paused calls |
//! | `GET /agents/{name}/inDoubt` | calls whose resume died mid-run (docs/reference.md §8) |
//! | `POST /agents/{name}/settle` | settle a call in doubt with its real outcome, or run it again |
//! | `GET /agents/{name}/connect` | a multi-turn connection over a WebSocket ([`routes`] has the protocol) |
//! | `POST /agents/{name}/agui` | the agent over AG-UI: a `RunAgentInput` in, a stream of AG-UI events out; holds end the run with the interrupt outcome, `resume` answers them |
//! | `GET /agents/{name}/.well-known/agent-card.json` | the agent's A2A 1.0 agent card (one JSON-RPC interface at `/agents/{name}/a2a`) |
//! | `POST /agents/{name}/a2a` | the agent over A2A 1.0 JSON-RPC: `SendMessage`, `SendStreamingMessage`, `GetTask`, `CancelTask`, `SubscribeToTask`; a hold is `TASK_STATE_INPUT_REQUIRED`, answered on the same task |
//! | `GET /agents` | the agents the caller may use |
//! | `GET /inbox` | the approver's queue across agents: one page, filtered and sorted, with the true total |
//! | `GET /audit` | the audit trail across agents, newest first |
//! | `GET /grants` | the standing grants the caller may manage |
//! | `DELETE /grants/{id}` | revoke a standing grant |
//! | `GET /notifications` | the notification outbox (callers with the [`OPERATOR_ROLE`]) |
//! | `POST /notifications/{id}/retry` | a notification's second chance |
//! | `POST /notifications/endpoints/{channel}/enable` | re-enable an endpoint stopped by a 410 |
//! | `GET /healthz` | liveness: 200 while serving, 503 once shutdown began |
//! | `GET /openapi.json` | the OpenAPI document of all of these |
//! | `GET /.well-known/holdpoint-receipts.json` | the JWKS approval receipts verify against (404 when none is published) |
//! | `GET /metrics` | Prometheus metrics: pending approvals, approval wait, turns, tool calls, errors by status, store latency ([`metrics`]) |
//! | `GET /` | the approval page |
//! | `GET /app.js` | the approval page's script |
//! | `GET /app.css` | the approval page's style sheet |
//! | `GET /web/{file}` | one of the page's JavaScript modules |
//! | `GET /auth/login` | how the page signs people in (OpenID Connect), 404 when not configured |
//! | `POST /auth/session` | trades a verified API key or token for an `HttpOnly`, `SameSite=Strict` session cookie |
//! | `POST /auth/signout` | clears the session cookie |
//!
//! A request body must arrive within the request timeout
//! ([`ServerBuilder::request_timeout`], default 30 s) or is answered 408.
//!
//! # As a network service
//!
//! - [`serve`] and [`serve_app`] speak HTTP/1.1 through hyper with a
//!   header read timeout ([`ServerBuilder::header_read_timeout`], default
//!   10 s), an idle keep-alive timeout ([`ServerBuilder::idle_timeout`],
//!   60 s) and a bound on open connections
//!   ([`ServerBuilder::max_connections`], 1024): a client that sends half a
//!   request head, or nothing, holds its connection for seconds, not for
//!   ever.
//! - A server that serves anonymous callers answers only requests for its
//!   loopback names (`Host` of `localhost`, `*.localhost`, `127.0.0.0/8`,
//!   `[::1]`), from loopback origins; others get 421 or 403, so a web page
//!   that rebinds its DNS name to `127.0.0.1` cannot drive it
//!   ([`ServerBuilder::allowed_hosts`] adds names, for a proxy).
//! - `GET /metrics` needs a principal's credentials or the metrics token
//!   unless opened ([`ServerBuilder::metrics_open`]); every label value comes
//!   from a small fixed set ([`metrics`]).
//! - Every response carries `X-Content-Type-Options: nosniff`.
//!
//! Errors are `{"error": {"status": NAME, "message": "…"}}` with the HTTP
//! code of [`http_status`](error::http_status). A turn that fails is still a
//! 200 with `finishReason: failed`; a resume that lost the exactly-once claim
//! ("already resumed", perhaps on another replica) is a 409.
//!
//! # Serving agents
//!
//! ```no_run
//! use std::sync::Arc;
//! use holdpoint::agent::Agent;
//! use holdpoint::middleware::ToolApproval;
//! use holdpoint::session::InMemoryStore;
//! use holdpoint_server::Server;
//! use holdpoint_server::auth::ApiKeys;
//!
//! # async fn demo(model: Arc<dyn holdpoint::Model>) -> Result<(), Box<dyn std::error::Error>> {
//! let agent = Agent::builder("opsAgent")
//!     .model(model)
//!     .middleware(ToolApproval::allow(["getBalance"]).into_middleware())
//!     .store(Arc::new(InMemoryStore::new()))
//!     .build()?;
//! let server = Server::builder()
//!     .agent(agent)
//!     .api_keys(ApiKeys::new().key(std::env::var("OPS_API_KEY")?, "ops-team"))
//!     .data_dir("/var/lib/holdpoint")
//!     .build()?;
//! let listener = tokio::net::TcpListener::bind("0.0.0.0:3400").await?;
//! holdpoint_server::serve(listener, &server, holdpoint_server::shutdown_signal()).await?;
//! # Ok(())
//! # }
//! # let _ = demo;
//! ```
//!
//! # Who may do what
//!
//! Each request runs the configured context providers; the principal they
//! establish owns the sessions it starts. Another principal gets 404 for
//! them — reading, resuming, aborting and listing alike — so ids cannot be
//! probed. The principal is written into the audit trail of every decision.
//! Client-held state (agents without a store) is signed with the server's
//! key and refused (403) when altered, unsigned or signed with an unknown key.
#![deny(missing_docs)]
#![doc(test(attr(deny(warnings))))]

pub mod auth;
pub mod envelope;
pub mod error;
pub mod hosts;
mod inflight;
mod limits;
mod listen;
pub mod metrics;
pub mod routes;
mod server;
mod shutdown;
pub mod signing;
mod state;

pub use auth::{LoginError, PageLogin};
pub use error::ApiError;
pub use inflight::Turns;
pub use limits::{DEFAULT_BODY_LIMIT, Limits};
pub use metrics::Metrics;
pub use routes::OPERATOR_ROLE;
pub use server::{BuildError, Server, ServerBuilder};
pub use shutdown::{serve, serve_app, shutdown_signal};
pub use state::AppState;

/// OpenTelemetry export of Holdpoint's tracing spans (the `holdpoint-otel` crate).
#[cfg(feature = "otel")]
pub use holdpoint_otel as otel;
