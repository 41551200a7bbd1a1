//! What nearly every program using Holdpoint needs, in one `use`:
//!
//! ```
//! use holdpoint::prelude::*;
//! # fn _in_scope(_: Option<Agent>) {}
//! ```
//!
//! - the traits whose methods you call: [`Model`], [`Tool`] and
//!   [`IntoTool`], [`SessionStore`] (with [`SessionStoreExt`] and the store's
//!   capability traits), [`Middleware`], and
//!   [`StreamExt`] from `futures` — a connection's
//!   [`receive`](crate::agent::Connection::receive) is a `Stream`, and
//!   `.next()` on it comes from this trait;
//! - agents: [`Agent`], [`AgentInit`], [`AgentInput`], [`AgentOutput`],
//!   [`AgentStreamChunk`], [`Connection`], [`PendingApproval`],
//!   [`Caller`] (who calls: principal, roles, actor) with [`AsCaller`],
//!   [`RunOptions`] and [`Access`] for the caller's context, the typed
//!   [`FailureReason`] of a failed turn, and [`Resume`] to answer paused
//!   calls;
//! - tools: [`tool()`], [`ResumableTool`], [`TypedTool`], [`DynamicTool`],
//!   [`ToolContext`], [`ToolError`], [`Interrupted`] (a claimed paused call);
//! - messages: [`Message`], [`Part`], [`Role`], [`FinishReason`],
//!   [`InterruptAsError`];
//! - people in the loop: [`Policy`] and [`RuleSpec`] (approval rules),
//!   [`Answer`] / [`Answered`] (one person's answer), [`GrantRequest`] and
//!   [`GrantScope`] (standing grants), [`ApprovalReply`], the
//!   [`ToolApproval`] and [`Budget`] middleware, [`SnapshotQuery`] for
//!   listings;
//! - [`Result`] and [`Error`] (with its wire [`Status`]);
//! - for tests and demos: [`InMemoryStore`], [`ScriptedModel`],
//!   [`ScriptedTurn`].
//!
//! Everything here is also at its own path (`holdpoint::agent::Agent`, …);
//! the prelude only re-exports. Note that [`Result`] is Holdpoint's
//! (`Result<T, holdpoint::Error>`): write `std::result::Result` for others.
//!
//! Reading a connection's stream, with nothing but the prelude in scope:
//!
//! ```
//! use holdpoint::prelude::*;
//!
//! #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
//! #[serde(rename_all = "camelCase")]
//! struct Transfer { amount: f64, to_account: String }
//! #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema, Default)]
//! struct Approval { approved: bool }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let transfer = ResumableTool::<Transfer, String, Approval>::define(
//!     "transferMoney",
//!     "Transfers money; needs approval",
//!     |ctx: ToolContext, t: Transfer, approval: Option<Approval>| async move {
//!         match approval {
//!             None => Err(ctx.interrupt(serde_json::json!({"details": format!("Transfer ${:.2}", t.amount)}))),
//!             Some(a) if a.approved => Ok("txn-123".to_string()),
//!             Some(_) => Err(ctx.fail("declined")),
//!         }
//!     },
//! )?;
//! let model = ScriptedModel::new("scripted");
//! model.push(ScriptedTurn::tool_call("transferMoney", serde_json::json!({"amount": 500, "toAccount": "savings"})));
//! model.push(ScriptedTurn::streamed_text(["Done: ", "txn-", "123"]));
//! let agent = Agent::builder("bankingAgent")
//!     .model(std::sync::Arc::new(model))
//!     .tools([transfer.clone()])
//!     .store(std::sync::Arc::new(InMemoryStore::new()))
//!     .build()?;
//!
//! let conn = agent.connect(AgentInit::new()).await?;
//! conn.send_text("Transfer $500 to savings")?;
//! loop {
//!     let mut paused: Vec<Part> = Vec::new();
//!     let mut finish = FinishReason::Stop;
//!     let mut stream = conn.receive(); // a Stream: `.next()` is StreamExt's
//!     while let Some(chunk) = stream.next().await {
//!         if let Some(mc) = &chunk.model_chunk {
//!             if mc.role == Some(Role::Tool) {
//!                 paused.extend(mc.content.iter().filter(|p| p.is_interrupt()).cloned());
//!             } else {
//!                 print!("{}", mc.text()); // each piece as it arrives
//!             }
//!         }
//!         if let Some(end) = &chunk.turn_end {
//!             finish = end.finish_reason;
//!         }
//!     }
//!     if finish != FinishReason::Interrupted {
//!         break;
//!     }
//!     let mut answers = Vec::new();
//!     for part in &paused {
//!         let call: Interrupted<Transfer, String, Approval> =
//!             transfer.interrupted(part).ok_or_else(|| Error::Internal("not a transfer".into()))?;
//!         answers.push(call.restart(Some(Approval { approved: true }))?);
//!     }
//!     conn.send_resume(answers)?;
//! }
//! let out: AgentOutput = conn.output().await?;
//! assert_eq!(out.text(), "Done: txn-123");
//! # Ok::<(), Error>(())
//! # }).unwrap();
//! ```

pub use futures::StreamExt;

pub use crate::agent::{
    Access, Agent, AgentInit, AgentInput, AgentOutput, AgentStreamChunk, Answer, Answered, AsCaller, Caller,
    Connection, FailureReason, PendingApproval, RunOptions,
};
pub use crate::approval::{ApprovalReply, GrantRequest, GrantScope, Policy, RuleSpec};
pub use crate::error::{Error, Result, Status};
pub use crate::generate::Resume;
pub use crate::message::{InterruptAsError, Message, Part, Role};
pub use crate::middleware::{Budget, Middleware, ToolApproval};
pub use crate::model::{FinishReason, Model, ScriptedModel, ScriptedTurn};
pub use crate::session::{
    AuditStore, GrantStore, InMemoryStore, OutboxStore, PruneStore, SessionStore, SessionStoreExt, SnapshotListing,
    SnapshotQuery,
};
pub use crate::tool::{
    DynamicTool, Interrupted, IntoTool, ResumableTool, Tool, ToolContext, ToolError, TypedTool, tool,
};
