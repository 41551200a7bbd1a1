//! The banking agent the agent tests share: a resumable transfer tool
//! that counts the money it really moved, a scripted model, an in-memory
//! store. Also compiled into the `spans` test binary.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use holdpoint::agent::{Agent, AgentOutput};
use holdpoint::session::{InMemoryStore, SessionStore};
use holdpoint::tool::{ResumableTool, ToolContext};
use holdpoint::{ScriptedModel, ScriptedTurn};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Transfer {
    pub amount: f64,
    pub to_account: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct Approval {
    pub approved: bool,
}

pub type TransferTool = ResumableTool<Transfer, serde_json::Value, Approval>;

/// A transfer tool that pauses for approval and counts how often it
/// really moved money.
pub fn transfer_tool(runs: Arc<AtomicUsize>) -> TransferTool {
    ResumableTool::define(
        "transferMoney",
        "Moves money after approval",
        move |ctx: ToolContext, t: Transfer, approval: Option<Approval>| {
            let runs = Arc::clone(&runs);
            async move {
                match approval {
                    None => {
                        Err(ctx.interrupt(json!({"details": format!("Transfer ${:.2} to {}", t.amount, t.to_account)})))
                    }
                    Some(a) if a.approved => {
                        runs.fetch_add(1, Ordering::SeqCst);
                        Ok(json!({"success": true, "transactionId": "txn-123", "to": t.to_account}))
                    }
                    Some(_) => Err(ctx.fail("declined")),
                }
            }
        },
    )
    .unwrap()
}

pub struct Bank {
    pub agent: Agent,
    pub model: ScriptedModel,
    pub tool: TransferTool,
    pub store: Arc<InMemoryStore>,
    pub runs: Arc<AtomicUsize>,
}

/// A server-managed banking agent whose model first asks for a transfer.
pub fn bank() -> Bank {
    let runs = Arc::new(AtomicUsize::new(0));
    let tool = transfer_tool(Arc::clone(&runs));
    let model = ScriptedModel::new("scripted");
    model.push(ScriptedTurn::tool_call(
        "transferMoney",
        json!({"amount": 500, "toAccount": "savings"}),
    ));
    let store = Arc::new(InMemoryStore::new());
    let agent = Agent::builder("bank")
        .model(Arc::new(model.clone()))
        .tool(tool.clone())
        .store(Arc::clone(&store) as Arc<dyn SessionStore>)
        .build()
        .unwrap();
    Bank {
        agent,
        model,
        tool,
        store,
        runs,
    }
}

pub fn approve(tool: &TransferTool, out: &AgentOutput) -> holdpoint::Part {
    let paused = out.interrupts();
    assert_eq!(paused.len(), 1, "expected one paused call in {out:?}");
    tool.interrupted(&paused[0])
        .expect("claim")
        .restart(Some(Approval { approved: true }))
        .unwrap()
}
