//! An approver's listing (`SnapshotQuery::viewer`, docs/reference.md
//! §10.7) through a real agent on the store under test: the store narrows
//! the waiting rows to those the caller may see before the limit, exactly
//! as the reference listing does.

use std::sync::Arc;

use holdpoint::agent::{Access, Agent, AgentInit, AgentInput, RunOptions};
use holdpoint::approval::{Policy, RuleSpec};
use holdpoint::session::{SessionStore, SnapshotQuery, Viewer};
use holdpoint::tool::{DynamicTool, ToolContext};
use holdpoint::{FinishReason, ScriptedModel, ScriptedTurn};
use serde_json::{Value, json};

use super::capable::listing;
use super::fresh_id;

/// An agent whose `payBill` under 10 is held for `legal`, from 10 to 99
/// for `finance`, and from 100 for the odd role `fin"an\u{1f}ce`; on `store`.
fn agent(name: &str, store: Arc<dyn SessionStore>) -> Agent {
    let pay = DynamicTool::new(
        "payBill",
        "pays a bill",
        json!({"type": "object"}),
        |_ctx: ToolContext, input: Value| async move { Ok(json!({"paid": input["amount"]})) },
    )
    .into_tool();
    let model = ScriptedModel::from_fn("scripted/viewer", |request, _| {
        let last = request.messages.last()?;
        let amount: u64 = last.text().trim().parse().ok()?;
        Some(ScriptedTurn::tool_call("payBill", json!({"amount": amount})))
    })
    .without_recording();
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
        rule("bills", "input.amount >= 10 && input.amount < 100", "finance"),
        rule("big", "input.amount >= 100", "fin\"an\u{1f}ce"),
    ])
    .expect("the policy parses");
    Agent::builder(name)
        .model(Arc::new(model))
        .tools([pay])
        .approval_policy(policy)
        .store(store)
        .build()
        .expect("the agent builds")
}

async fn hold(agent: &Agent, owner: &str, amount: u64) {
    let options = RunOptions::new(AgentInit::new()).principal(owner);
    let out = agent
        .run_with(AgentInput::text(amount.to_string()), options)
        .await
        .expect("the run pauses");
    assert_eq!(out.finish_reason, FinishReason::Interrupted);
}

async fn amounts(agent: &Agent, limit: usize, principal: &str, roles: &[&str]) -> Vec<u64> {
    let roles: Vec<String> = roles.iter().map(|r| (*r).to_owned()).collect();
    agent
        .decisions()
        .pending_for(
            SnapshotQuery {
                limit: Some(limit),
                ..SnapshotQuery::default()
            },
            Access::Caller {
                principal: Some(principal),
                roles: &roles,
            },
        )
        .await
        .expect("pending_for failed")
        .iter()
        .filter_map(|c| c.input["amount"].as_u64())
        .collect()
}

/// An approver's page holds the holds its roles may answer and its own,
/// newest first, past newer holds it may not see, and honours the limit;
/// a role matches exactly (not a prefix, not a part of another role).
pub async fn an_approvers_page_lists_what_the_viewer_may_see(store: Arc<dyn SessionStore>) {
    let agent = agent(&fresh_id("viewer-agent"), Arc::clone(&store));
    let (alice, olga) = (fresh_id("alice"), fresh_id("olga"));
    for amount in [50, 60, 500, 5, 6, 7, 8, 9] {
        hold(&agent, &alice, amount).await;
    }
    hold(&agent, &olga, 1).await;

    assert_eq!(amounts(&agent, 2, &olga, &["finance"]).await, [1, 60]);
    assert_eq!(amounts(&agent, 3, &olga, &["finance"]).await, [1, 60, 50]);
    assert_eq!(amounts(&agent, 1, &olga, &["finance"]).await, [1], "the limit holds");
    assert_eq!(
        amounts(&agent, 10, &olga, &["legal", "audit"]).await,
        [1, 9, 8, 7, 6, 5]
    );
    assert_eq!(amounts(&agent, 10, &olga, &["fin\"an\u{1f}ce"]).await, [1, 500]);
    // More roles than the stores bind one by one.
    let many = ["audit", "ops", "hr", "it", "finance", "sales"];
    assert_eq!(amounts(&agent, 10, &olga, &many).await, [1, 60, 50]);
    for near in [
        "financ",
        "fin",
        "inance",
        "finance\u{1f}",
        "\"finance\"",
        "fin\"an",
        "legal\u{1f}finance",
    ] {
        assert_eq!(
            amounts(&agent, 10, &olga, &[near]).await,
            [1],
            "{near:?} is no role of the rules"
        );
    }
    assert_eq!(
        amounts(&agent, 10, &alice, &["audit"]).await,
        [9, 8, 7, 6, 5, 500, 60, 50],
        "the owner's own"
    );

    // The store's listing with a viewer matches the reference filter.
    let listed = listing(&*store)
        .list_snapshots(&SnapshotQuery {
            agent: Some(agent.name().to_owned()),
            waiting_only: true,
            viewer: Some(Viewer {
                principal: Some(fresh_id("nobody")),
                roles: vec!["legal".into()],
            }),
            ..SnapshotQuery::default()
        })
        .await
        .expect("list_snapshots failed");
    let ids: Vec<&str> = listed.iter().map(|s| s.snapshot_id.as_str()).collect();
    assert_eq!(ids.len(), 6, "the six legal holds (olga's too): {ids:?}");
    assert!(listed.iter().all(|s| s.hold_approvers() == ["legal"]));
}

/// A waiting row whose `approvers` is not recorded (written before
/// migration 0009, or by an older build since) is still listed for its
/// approvers, and is filled in when the store opens again: `forget` clears
/// the column of every row (raw SQL), `reopen` opens a fresh handle on the
/// same database.
pub async fn rows_without_approvers_are_listed_and_filled_in_on_opening<Forget, Reopen>(
    store: Arc<dyn SessionStore>,
    forget: Forget,
    reopen: Reopen,
) where
    Forget: std::future::Future<Output = ()>,
    Reopen: std::future::Future<Output = Arc<dyn SessionStore>>,
{
    let name = fresh_id("backfill-agent");
    let before = agent(&name, store);
    let (alice, olga) = (fresh_id("alice"), fresh_id("olga"));
    hold(&before, &alice, 50).await;
    hold(&before, &alice, 5).await;
    forget.await;
    assert_eq!(
        amounts(&before, 10, &olga, &["finance"]).await,
        [50],
        "read and filtered after decoding"
    );
    let after = agent(&name, reopen.await);
    assert_eq!(amounts(&after, 10, &olga, &["finance"]).await, [50]);
    assert_eq!(amounts(&after, 10, &olga, &["legal"]).await, [5]);
    assert!(amounts(&after, 10, &olga, &["audit"]).await.is_empty());
}
