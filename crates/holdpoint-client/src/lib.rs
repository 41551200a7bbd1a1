//! A typed client for agents served over HTTP by `holdpoint-server`: the
//! same verbs as in process, across a network.
//!
//! # The map
//!
//! | item | what it does |
//! |---|---|
//! | [`Client`] | one server: its base URL and credentials; [`Client::agent`] names an agent |
//! | [`RemoteAgent`] | `run`, `run_text`, `stream` (SSE), `connect` (WebSocket), `snapshot`, `latest_snapshot`, `abort`, `wait_for_snapshot`, `pending` |
//! | [`TurnStream`] | a streamed turn: chunks, then the output |
//! | [`RemoteConnection`] | a multi-turn WebSocket connection: `send`, `next_chunk`, `close` |
//! | [`ClientError`] | transport, server (`{"error": {status, message}}`), protocol, failed turn |
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
mod stream;

pub use agent::{Aborted, RemoteAgent};
pub use approver::{
    AnswerOutcome, AuditFilter, AuditPage, InboxCaller, InboxCounts, InboxItem, InboxOrder, InboxPage, InboxQuery,
    InboxTool, ListQuery,
};
pub use client::{Client, Layout};
pub use connection::RemoteConnection;
pub use error::{ClientError, Result};
pub use stream::TurnStream;
