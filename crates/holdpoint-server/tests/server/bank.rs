//! A small banking agent for the tests (the shape of the seed's example):
//! `transferMoney` pauses for the account holder's approval, `getBalance`
//! runs freely, and an offline model plays the assistant.

use std::sync::Arc;

use holdpoint::agent::{Agent, AgentBuilder};
use holdpoint::message::{PartKind, Role};
use holdpoint::tool::{ResumableTool, TypedTool, tool};
use holdpoint::{GenerateRequest, ScriptedModel, ScriptedTurn, ToolContext};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub const SYSTEM_PROMPT: &str = "You are a banking assistant. Every transfer needs the account holder's approval.";

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Transfer {
    pub amount: f64,
    pub to_account: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct Approval {
    pub approved: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct BalanceQuery {
    pub account: String,
}

pub fn transfer_money() -> ResumableTool<Transfer, Value, Approval> {
    ResumableTool::define(
        "transferMoney",
        "Transfers money; needs the account holder's approval",
        |ctx: ToolContext, t: Transfer, approval: Option<Approval>| async move {
            match approval {
                None => {
                    Err(ctx.interrupt(json!({"details": format!("Transfer ${:.2} to {}", t.amount, t.to_account)})))
                }
                Some(a) if a.approved => Ok(json!({"success": true, "transactionId": "txn-123"})),
                Some(_) => Ok(json!({"success": false})),
            }
        },
    )
    .unwrap()
}

pub fn get_balance() -> TypedTool<BalanceQuery, Value> {
    tool(
        "getBalance",
        "Returns a balance",
        |_ctx: ToolContext, q: BalanceQuery| async move { Ok(json!({"account": q.account, "balance": 1250.0})) },
    )
}

fn parse_transfer(text: &str) -> Option<(f64, String)> {
    let lower = text.to_lowercase();
    let rest = lower.strip_prefix("transfer $")?;
    let (amount, to) = rest.split_once(" to ")?;
    Some((amount.replace(',', "").parse().ok()?, to.trim().to_owned()))
}

fn turn_for(request: &GenerateRequest) -> ScriptedTurn {
    let Some(last) = request.messages.last() else {
        return ScriptedTurn::text("How can I help?");
    };
    if last.role == Role::Tool {
        let mut lines = Vec::new();
        for p in &last.content {
            let PartKind::ToolResponse(r) = &p.kind else { continue };
            let out = r.output.clone().unwrap_or(Value::Null);
            match (r.name.as_str(), out.get("transactionId").and_then(Value::as_str)) {
                ("transferMoney", Some(txn)) => lines.push(format!("Done: {txn}")),
                ("transferMoney", None) => lines.push(format!("The transfer was not made ({out}).")),
                _ => lines.push(format!("Your balance is ${}.", out["balance"])),
            }
        }
        return ScriptedTurn::text(lines.join(" "));
    }
    let text = last.text();
    if let Some((amount, to)) = parse_transfer(&text) {
        return ScriptedTurn::tool_call("transferMoney", json!({"amount": amount, "toAccount": to}));
    }
    if text.to_lowercase().contains("balance") {
        return ScriptedTurn::tool_call("getBalance", json!({"account": "checking"}));
    }
    ScriptedTurn::text("I can transfer money or check a balance.")
}

pub fn model() -> ScriptedModel {
    ScriptedModel::from_fn("scripted/bank", |request, _| Some(turn_for(request)))
}

pub fn builder(name: &str) -> AgentBuilder {
    Agent::builder(name)
        .description("Moves money after the account holder approves")
        .model(Arc::new(model()))
        .system(SYSTEM_PROMPT)
        .tool(transfer_money())
        .tool(get_balance())
}
