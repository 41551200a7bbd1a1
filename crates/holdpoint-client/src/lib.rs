//! A typed client for agents served over HTTP by `holdpoint-server`: the
//! same verbs as in process, across a network.
//!
//! # The map
//!
//! | item | what it does |
//! |---|---|
//! | [`Client`] | one server: its base URL and credentials; [`Client::agent`] names an agent |
//! | [`RemoteAgent`] | `run`, `run_text`, `stream` (SSE), `connect` (WebSocket), `snapshot`, `snapshot_metadata`, `latest_snapshot`, `abort`, `wait_for_snapshot` |
//! | [`TurnStream`] | a streamed turn: chunks, then the output |
//! | [`RemoteConnection`] | a multi-turn WebSocket connection: `send`, `next_chunk`, `close` |
//! | [`ClientError`] | transport, server (`{"error": {status, message}}`), protocol, failed turn, a core error (`From<holdpoint::Error>`, so `?` mixes core and client calls) |
//!
//! # Approvers and operators
//!
//! Every route of `holdpoint-server` an approver or an operator uses
//! (docs/reference.md §12.2), typed with the core's types. Who may do what
//! is the server's to decide from the credentials (an API key or token
//! naming a principal and its roles).
//!
//! | method | route | what it does |
//! |---|---|---|
//! | [`RemoteAgent::pending`]`(limit)` | `GET /agents/{name}/pending` | the caller's paused calls and those its roles may answer, newest first |
//! | [`RemoteAgent::pending_where`]`(`[`ListQuery`]`)` | same, `?sessionId=&limit=` | the same, of one session |
//! | [`RemoteAgent::answer`]`(`[`Answer`](holdpoint::agent::Answer)`)` | `POST /agents/{name}/answer` | approve or deny one paused call: [`AnswerOutcome`] `Recorded` short of the quorum, `Resumed` or `Granted` once decided |
//! | [`RemoteAgent::approve`] / [`RemoteAgent::deny`]`(&call, reason)` | same | the answer to a listed [`PendingApproval`](holdpoint::agent::PendingApproval) |
//! | [`Answer::grant`](holdpoint::agent::Answer::grant)`(`[`GrantRequest`](holdpoint::approval::GrantRequest)`)` | same | "and don't ask again": the approval creates a [`Grant`](holdpoint::approval::Grant) ([`AnswerOutcome::grant`]) |
//! | [`Client::grants`] / [`RemoteAgent::grants`]`(`[`GrantQuery`](holdpoint::approval::GrantQuery)`)` | `GET /grants` | the grants the caller may manage, newest first |
//! | [`Client::revoke_grant`]`(id)` | `DELETE /grants/{id}` | revoke one at once |
//! | [`RemoteAgent::in_doubt`]`(`[`ListQuery`]`)` | `GET /agents/{name}/inDoubt` | calls a dead resume left in doubt, with their decisions |
//! | [`RemoteAgent::settle`]`(id, `[`Resume`](holdpoint::Resume)`)` | `POST /agents/{name}/settle` | settle them: `respond` with what happened, or `restart` |
//! | [`Client::inbox`] / [`RemoteAgent::inbox`]`(`[`InboxQuery`]`)` | `GET /inbox` | the approver's queue: filters, order, cursor pages, true total ([`InboxPage`]) |
//! | [`Client::audit`]`(`[`AuditFilter`]`)` | `GET /audit` | the audit trail across agents: filters, cursor pages ([`AuditPage`]) |
//! | [`RemoteAgent::audit`]`(`[`ListQuery`]`)` | `GET /agents/{name}/audit` | one agent's decisions: of a session, or the caller's own |
//! | [`RemoteAgent::snapshot`] | `POST /agents/{name}/getSnapshot` | also a held snapshot of someone else's session whose rule names the caller's role |
//! | [`Client::notifications`]`(`[`NotificationQuery`]`)` | `GET /notifications` | the notification outbox and the stopped endpoints (`operator` role) |
//! | [`Client::retry_notification`]`(id)` | `POST /notifications/{id}/retry` | make a row due again |
//! | [`Client::enable_endpoint`]`(channel)` | `POST /notifications/endpoints/{channel}/enable` | re-enable an endpoint a 410 stopped |
//!
//! An approver answers a hold listed in someone else's session with
//! `answer` (or `approve` / `deny`), never by resuming the owner's session
//! with `run`: that session is `NOT_FOUND` to anyone else, and the error
//! says to answer instead.
//!
//! ```no_run
//! use holdpoint_client::{AnswerOutcome, Client, ClientError};
//!
//! # async fn demo() -> Result<(), ClientError> {
//! let olga = Client::new("http://127.0.0.1:8080").api_key("k-olga-…").agent("bankingAgent");
//! for call in olga.pending(20).await? {
//!     println!("{call}");
//!     match olga.approve(&call).await? {
//!         AnswerOutcome::Recorded { approvals, quorum, .. } => {
//!             println!("{} of {} approvals", approvals.len(), quorum.unwrap_or(1));
//!         }
//!         decided => println!("resumed: {}", decided.output().map(|o| o.text()).unwrap_or_default()),
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! Inputs, inits, outputs, chunks and parts are the core's own types
//! ([`holdpoint::agent`]), so a paused call comes back as a [`Part`](holdpoint::Part) that
//! the tool's typed `interrupted(&part)` claims, exactly as in process. As in
//! process, a failed turn is an `Err` ([`ClientError::TurnFailed`]) carrying
//! the failed output; the wire stays Genkit's (200 with `finishReason: failed`).
//!
//! ```no_run
//! use holdpoint::agent::{AgentInit, AgentInput};
//! use holdpoint::Resume;
//! use holdpoint_client::Client;
//!
//! # async fn demo() -> Result<(), holdpoint_client::ClientError> {
//! let client = Client::new("http://127.0.0.1:8080").api_key("k-alice-…");
//! let bank = client.agent("bankingAgent");
//! let paused = bank.run_text("Transfer $500 to savings").await?;
//! let hold = &paused.interrupts()[0];
//! let approve = hold.restart(Some(serde_json::json!({"approved": true}))).expect("a paused call");
//! let done = bank
//!     .run(AgentInput::resume(Resume::from_parts([approve])), AgentInit::session(paused.session_id.clone()))
//!     .await?;
//! println!("{}", done.text());
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

mod agent;
mod approver;
mod client;
mod connection;
mod error;
mod inbox;
mod operator;
mod stream;

pub use agent::{Aborted, RemoteAgent};
pub use approver::{AnswerOutcome, ListQuery};
pub use client::{Client, Layout};
pub use connection::RemoteConnection;
pub use error::{ClientError, Result};
pub use inbox::{
    AuditFilter, AuditPage, InboxCaller, InboxCounts, InboxItem, InboxOrder, InboxPage, InboxQuery, InboxTool,
};
pub use operator::{Notification, NotificationQuery, NotificationsPage, StoppedEndpoint};
pub use stream::TurnStream;
