//! An approver's listing of pending holds (docs/reference.md §10.7): the
//! role filter applies before the limit, so a page is filled with holds
//! the approver may answer even when newer holds it may not see exist.

use std::sync::Arc;

use holdpoint::agent::{Access, Agent, AgentInit, AgentInput, RunOptions};
use holdpoint::approval::{Policy, RuleSpec};
use holdpoint::session::{InMemoryStore, SnapshotQuery};
use holdpoint::tool::{DynamicTool, ToolContext};
use holdpoint::{FinishReason, ScriptedModel, ScriptedTurn};
use serde_json::{Value, json};

/// `payBill` under 10 is held for legal, the rest for finance.
fn agent() -> Agent {
    let pay = DynamicTool::new(
        "payBill",
        "pays a bill",
        json!({"type": "object"}),
        |_ctx: ToolContext, input: Value| async move { Ok(json!({"paid": input["amount"]})) },
    )
    .into_tool();
    let model = ScriptedModel::from_fn("scripted/page", |request, _| {
        let last = request.messages.last()?;
        let amount: u64 = last.text().trim().parse().ok()?;
        Some(ScriptedTurn::tool_call("payBill", json!({"amount": amount})))
    });
    let rule = |name: &str, when: &str, role: &str| RuleSpec {
        name: Some(name.into()),
        tool: Some("payBill".into()),
        when: Some(when.into()),
        approvers: vec![role.into()],
        quorum: 1,
        self_approval: false,
        ..RuleSpec::default()
    };
    let policy = Policy::new([
        rule("small", "input.amount < 10", "legal"),
        rule("bills", "input.amount >= 10", "finance"),
    ])
    .unwrap();
    Agent::builder("pager")
        .model(Arc::new(model))
        .tools([pay])
        .approval_policy(policy)
        .store(Arc::new(InMemoryStore::new()))
        .build()
        .unwrap()
}

#[tokio::test]
async fn an_approvers_page_is_filled_with_holds_it_may_answer_past_newer_ones_it_may_not() {
    let agent = agent();
    for amount in [50, 60, 5, 6, 7, 8, 9] {
        let options = RunOptions::new(AgentInit::new()).principal("alice");
        let out = agent
            .run_with(AgentInput::text(amount.to_string()), options)
            .await
            .unwrap();
        assert_eq!(out.finish_reason, FinishReason::Interrupted);
    }
    let finance = vec!["finance".to_owned()];
    let olga = Access::Caller {
        principal: Some("olga"),
        roles: &finance,
    };
    let page = agent
        .decisions()
        .pending_for(
            SnapshotQuery {
                limit: Some(2),
                ..SnapshotQuery::default()
            },
            olga,
        )
        .await
        .unwrap();
    let amounts: Vec<&Value> = page.iter().map(|c| &c.input["amount"]).collect();
    assert_eq!(
        amounts,
        [&json!(60), &json!(50)],
        "the page holds finance's two, newest first"
    );
    let one = agent
        .decisions()
        .pending_for(
            SnapshotQuery {
                limit: Some(1),
                ..SnapshotQuery::default()
            },
            olga,
        )
        .await
        .unwrap();
    assert_eq!(one.len(), 1, "the limit still holds");
}
