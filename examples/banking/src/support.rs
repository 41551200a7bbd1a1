//! `supportAgent`: a root agent that hands account operations to
//! `bankingAgent` as a sub-agent (docs/reference.md §16). A transfer's
//! approval, raised inside `bankingAgent`, surfaces on the support turn
//! and is answered there.

use std::sync::Arc;

use holdpoint::agent::Agent;
use holdpoint::message::{PartKind, Role};
use holdpoint::session::SessionStore;
use holdpoint::{GenerateRequest, Model, ScriptedModel, ScriptedTurn};
use serde_json::{Value, json};

use crate::{AGENT_NAME, streamed};

/// The root agent's name, as served over HTTP.
pub const SUPPORT_AGENT_NAME: &str = "supportAgent";

/// The support agent's system prompt.
pub const SUPPORT_PROMPT: &str = "You are the bank's front desk. Hand every question about accounts, \
balances and transfers to bankingAgent, and pass its answer on.";

/// The support agent on `model`, delegating to `banking` (which must keep
/// its sessions in `store` too).
pub fn support_agent(model: Arc<dyn Model>, banking: Agent, store: Arc<dyn SessionStore>) -> holdpoint::Result<Agent> {
    Agent::builder(SUPPORT_AGENT_NAME)
        .description("The bank's front desk; hands account operations to bankingAgent")
        .model(model)
        .system(SUPPORT_PROMPT)
        .subagent(banking)
        .store(store)
        .build()
}

/// The model for the support agent when `banking_model` is the scripted
/// demo: the demo's front desk; otherwise the same model.
pub fn support_model_for(banking_model: &Arc<dyn Model>) -> Arc<dyn Model> {
    if banking_model.name() == "scripted/banking-demo" {
        Arc::new(support_demo_model())
    } else {
        Arc::clone(banking_model)
    }
}

fn support_turn(request: &GenerateRequest) -> ScriptedTurn {
    let Some(last) = request.messages.last() else {
        return streamed("How can I help?".into());
    };
    if last.role == Role::Tool {
        let answers: Vec<String> = last
            .content
            .iter()
            .filter_map(|p| match &p.kind {
                PartKind::ToolResponse(r) => r.output.clone(),
                _ => None,
            })
            .map(|o| match o {
                Value::String(s) => s,
                other => other.to_string(),
            })
            .collect();
        return streamed(answers.join(" "));
    }
    ScriptedTurn::tool_call(AGENT_NAME, json!({ "input": last.text() }))
}

/// An offline model that plays the front desk: it hands every message to
/// `bankingAgent` and passes the answer on.
pub fn support_demo_model() -> ScriptedModel {
    ScriptedModel::from_fn("scripted/support-demo", |request, _| Some(support_turn(request))).without_recording()
}
