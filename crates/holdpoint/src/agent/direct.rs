//! Calling one tool of an agent directly — outside any session, as a
//! development tool runs a tool action — through the agent's approval
//! gate, so a direct call is held (or refused) wherever a turn's call of
//! the same tool with the same input would be.
//!
//! Invariants: the call runs through exactly the middleware a turn's tool
//! calls run through (the approval policy's rule gate first, then the
//! agent's middleware in order), as a fresh call — no resume data, no
//! history, no request context — so nothing can claim it was approved:
//! no principal, and no session for a standing grant to cover.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::Agent;
use crate::error::Result;
use crate::middleware::{Chain, HeldBy, RestartPlan, ToolHookCall};
use crate::tool::{ToolContext, ToolOutcome};

/// What a direct tool call ([`Agent::call_tool`]) came to.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct DirectCall {
    /// The outcome: the tool's output, a soft failure (a denial among
    /// them), or a hold ([`ToolOutcome::Interrupt`]) that nothing can
    /// answer: the call is over, and the tool did not run past the hold.
    pub outcome: ToolOutcome,
    /// Who held the call, when a middleware stage did: its label, as a
    /// turn records it in `interruptedBy` (the approval policy's rule
    /// gate, `genkit-middleware/toolApproval`, …). `None` when the call
    /// was not held, or the tool interrupted itself.
    pub held_by: Option<String>,
}

impl Agent {
    /// Calls the tool `name` of this prompt agent once with `input`,
    /// outside any session and with no principal, through the agent's
    /// approval policy and middleware as a turn calls it: a call a rule or
    /// a [`ToolApproval`](crate::middleware::ToolApproval) would hold comes
    /// back as a hold without the tool having run; a tool that asks for
    /// approval itself interrupts. `None` when the agent has no tool of
    /// that name (custom agents have none). `input` is not checked against
    /// the tool's schema here; an `Err` is the tool's (or a stage's) hard
    /// error.
    pub async fn call_tool(&self, name: &str, input: Value) -> Result<Option<DirectCall>> {
        let Some(tool) = self.def.runnable_tools.iter().find(|t| t.name() == name) else {
            return Ok(None);
        };
        let context = Arc::new(Map::new());
        let call = ToolHookCall {
            name: name.to_owned(),
            reference: None,
            input,
            resumed: None,
            original_input: None,
            released: false,
            context,
            interrupt: None,
            history: Arc::new(Vec::new()),
        };
        let chain = Chain::new(&self.def.tool_middleware);
        let (outcome, held_by) = chain
            .call_tool(tool.as_ref(), call, &RestartPlan::default(), &ToolContext::new(name))
            .await?;
        let held_by = match held_by {
            Some(HeldBy::Stage(label)) => Some(label),
            Some(HeldBy::Tool) | None => None,
        };
        Ok(Some(DirectCall { outcome, held_by }))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::atomic::{AtomicUsize, Ordering};

    use serde_json::json;

    use super::*;
    use crate::approval::{Policy, RuleSpec};
    use crate::middleware::ToolApproval;
    use crate::{ScriptedModel, ToolContext};

    #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
    struct Account {
        account: String,
    }

    /// An agent with `getBalance` (allowlisted), `closeAccount` (held by
    /// ToolApproval) and `wire` (held by a rule); `closeAccount` and `wire`
    /// count their runs.
    fn agent(runs: &Arc<AtomicUsize>) -> Agent {
        let (closes, wires) = (Arc::clone(runs), Arc::clone(runs));
        let close = crate::tool(
            "closeAccount",
            "Closes an account",
            move |_c: ToolContext, a: Account| {
                let closes = Arc::clone(&closes);
                async move {
                    closes.fetch_add(1, Ordering::SeqCst);
                    Ok(json!({"closed": a.account}))
                }
            },
        );
        let wire = crate::tool("wire", "Wires money", move |_c: ToolContext, _a: Account| {
            let wires = Arc::clone(&wires);
            async move {
                wires.fetch_add(1, Ordering::SeqCst);
                Ok(json!("sent"))
            }
        });
        let balance = crate::tool("getBalance", "A balance", |_c: ToolContext, a: Account| async move {
            Ok(format!("{}: $1", a.account))
        });
        let policy = Policy::new([RuleSpec {
            tool: Some("wire".into()),
            approvers: vec!["finance".into()],
            quorum: 1,
            self_approval: false,
            ..RuleSpec::default()
        }])
        .unwrap();
        Agent::builder("bank")
            .model(Arc::new(ScriptedModel::new("scripted")))
            .tool(close)
            .tool(wire)
            .tool(balance)
            .middleware(ToolApproval::allow(["getBalance", "wire"]).into_middleware())
            .approval_policy(policy)
            .build()
            .unwrap()
    }

    #[tokio::test]
    async fn a_direct_call_is_held_where_a_turn_would_be_and_the_tool_does_not_run() {
        let runs = Arc::new(AtomicUsize::new(0));
        let agent = agent(&runs);
        let input = json!({"account": "savings"});

        let free = agent.call_tool("getBalance", input.clone()).await.unwrap().unwrap();
        assert_eq!(free.outcome, ToolOutcome::output(json!("savings: $1")));
        assert_eq!(free.held_by, None);

        let held = agent.call_tool("closeAccount", input.clone()).await.unwrap().unwrap();
        assert!(matches!(held.outcome, ToolOutcome::Interrupt(_)), "{held:?}");
        assert_eq!(held.held_by.as_deref(), Some(crate::middleware::TOOL_APPROVAL));

        // Allowlisted by ToolApproval, but a rule covers it: the rule wins.
        let ruled = agent.call_tool("wire", input.clone()).await.unwrap().unwrap();
        assert!(matches!(ruled.outcome, ToolOutcome::Interrupt(_)), "{ruled:?}");
        assert_eq!(ruled.held_by.as_deref(), Some(crate::approval::RULE_GATE));

        assert_eq!(runs.load(Ordering::SeqCst), 0, "a held tool ran");
        assert!(agent.call_tool("nope", input).await.unwrap().is_none());
    }
}
