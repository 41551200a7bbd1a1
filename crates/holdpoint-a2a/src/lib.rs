//! A remote [A2A](https://a2a-protocol.org) 1.0 agent as a Holdpoint tool
//! (docs/reference.md §21.6).
//!
//! [`A2aAgentTool`] takes `{"input": "text"}`, sends it to the remote
//! agent's JSON-RPC endpoint (`SendMessage`) and returns the task's final
//! text. A task that stops at `TASK_STATE_INPUT_REQUIRED` becomes a hold
//! of the calling turn: the interrupt data names the remote task
//! (`taskId`, `contextId`, `agentUrl`) and carries its question, and since
//! the store keeps interrupt data, nothing of this process is needed to
//! answer it — a restart of Holdpoint between the question and the answer
//! loses nothing. The answer is sent on the same task (`SendMessage` with
//! `taskId`); a denial cancels the remote task (`CancelTask`) and fails
//! the call with the reason.
//!
//! ```
//! use holdpoint_a2a::A2aAgentTool;
//! use holdpoint::Tool;
//! let bank = A2aAgentTool::new("bank", "The bank's agent", "http://127.0.0.1:8080/agents/bankingAgent/a2a")?
//!     .api_key("k-0123456789")?;
//! assert_eq!(bank.name(), "bank");
//! # Ok::<(), holdpoint_a2a::A2aError>(())
//! ```

mod answer;
mod error;
mod tool;
mod wire;

pub use answer::{Reply, reply_shape};
pub use error::A2aError;
pub use tool::{A2aAgentTool, INTERRUPT_KIND};
