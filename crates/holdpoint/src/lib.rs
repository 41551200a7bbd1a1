//! Holdpoint: an agent runtime whose turns stop at a *hold point* — a tool
//! call that pauses the turn, hands control to code or a person, and later
//! resumes from exactly where it stopped.
//!
//! # The map
//!
//! | module | what lives there |
//! |---|---|
//! | [`message`] | [`Message`], [`Part`] (decoded by field presence), the interrupt metadata keys |
//! | [`model`] | the [`Model`] trait, request/response/chunk types, [`ScriptedModel`] for tests and demos |
//! | [`mod@tool`] | the [`Tool`] trait, typed tools ([`tool()`]), [`ResumableTool`], [`ToolContext`] (`interrupt`, `fail`) |
//! | [`mod@generate`] | the generate loop ([`generate()`]), [`Resume`] directives and their validation |
//! | [`middleware`] | hooks around model and tool calls that may hold a call |
//! | [`approval`] | approval rules: CEL conditions, the roles that may answer, quorum |
//! | [`review`] | what an approver sees of a hold: redaction, the tool's preview, "not approvable as is" |
//! | [`agent`] | [`Agent`](agent::Agent), connections, detach/abort, the agent wire types, [`Caller`](agent::Caller) (who calls: principal, roles, actor) |
//! | [`session`] | [`Snapshot`](session::Snapshot), the required [`SessionStore`](session::SessionStore) trait and its capability traits ([`AuditStore`](session::AuditStore), [`GrantStore`](session::GrantStore), [`OutboxStore`](session::OutboxStore), [`SnapshotListing`](session::SnapshotListing), [`PruneStore`](session::PruneStore)), [`observe`](session::observe), [`InMemoryStore`](session::InMemoryStore) |
//! | [`error`] | one [`Error`] enum with a wire [`Status`] |
//! | [`prelude`] | `use holdpoint::prelude::*;`: the traits (with `futures`' [`StreamExt`](prelude::StreamExt) for a connection's stream), agents, tools, messages, `Result`/`Error` |
//!
//! Durable stores (`holdpoint-store-sqlite`, `holdpoint-store-postgres`),
//! model providers (`holdpoint-models`) and the HTTP server live in their
//! own crates; this one does no I/O of its own.
//!
//! # A transfer that waits for approval
//!
//! ```
//! use std::sync::Arc;
//! use holdpoint::agent::{Agent, AgentInit, AgentInput};
//! use holdpoint::session::InMemoryStore;
//! use holdpoint::{FinishReason, Resume, ResumableTool, ScriptedModel, ScriptedTurn, ToolContext};
//! use schemars::JsonSchema;
//! use serde::{Deserialize, Serialize};
//! use serde_json::json;
//!
//! #[derive(Serialize, Deserialize, JsonSchema)]
//! #[serde(rename_all = "camelCase")]
//! struct Transfer { amount: f64, to_account: String }
//! #[derive(Serialize, Deserialize, JsonSchema, Default)]
//! struct Approval { approved: bool }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let transfer = ResumableTool::<Transfer, String, Approval>::define(
//!     "transferMoney",
//!     "Transfers money; needs approval",
//!     |ctx: ToolContext, t: Transfer, approval: Option<Approval>| async move {
//!         match approval {
//!             None => Err(ctx.interrupt(json!({"details": format!("Transfer ${:.2} to {}", t.amount, t.to_account)}))),
//!             Some(a) if a.approved => Ok("txn-123".to_string()),
//!             Some(_) => Err(ctx.fail("declined by the account holder")),
//!         }
//!     },
//! )?;
//!
//! let model = ScriptedModel::new("scripted");
//! model.push(ScriptedTurn::tool_call("transferMoney", json!({"amount": 500, "toAccount": "savings"})));
//! model.push(ScriptedTurn::text("Done: txn-123"));
//!
//! let agent = Agent::builder("bankingAgent")
//!     .model(Arc::new(model))
//!     .tool(transfer.clone())
//!     .store(Arc::new(InMemoryStore::new()))
//!     .build()?;
//!
//! // The turn pauses at the transfer.
//! let paused = agent.run_text("Transfer $500 to savings").await?;
//! assert_eq!(paused.finish_reason, FinishReason::Interrupted);
//!
//! // Later (another request, another replica): claim the interrupt, approve it.
//! let call = transfer.interrupted(&paused.interrupts()[0]).expect("our interrupt");
//! assert_eq!(call.input.amount, 500.0);
//! let approve = call.restart(Some(Approval { approved: true }))?;
//! let done = agent
//!     .run(AgentInput::resume(Resume::from_parts([approve])), AgentInit::session(paused.session_id))
//!     .await?;
//! assert_eq!(done.text(), "Done: txn-123");
//! # Ok::<(), holdpoint::Error>(())
//! # }).unwrap();
//! ```
#![deny(missing_docs)]
#![doc(test(attr(deny(warnings))))]

pub mod agent;
pub mod approval;
pub mod error;
pub mod generate;
mod hold;
pub mod message;
pub mod middleware;
pub mod model;
pub mod prelude;
pub mod receipt;
pub mod review;
pub mod session;
pub mod tool;

pub use error::{Error, ErrorBody, Result, Status};
pub use generate::{GenerateOptions, Generation, Resume, generate};
pub use message::{Message, Part, PartKind, Role, ToolRequest, ToolResponse};
pub use model::{
    FinishReason, GenerateChunk, GenerateRequest, GenerateResponse, Model, ScriptedModel, ScriptedTurn, ToolDefinition,
    Usage,
};
pub use tool::{IntoTool, ResumableTool, Tool, ToolContext, ToolError, TypedTool, tool};
