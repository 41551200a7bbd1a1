//! Calls in doubt go to the people who could have answered them (issue 32,
//! finding 7; docs/reference.md §10.10): the rule's approvers and the
//! `operator` role list and settle them; an owner the rule excluded
//! neither sees them nor settles them, and the refusal changes nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use holdpoint::agent::{Access, Agent, OPERATOR_ROLE, PRINCIPAL};
use holdpoint::approval::{Policy, ROLES, RuleSpec};
use holdpoint::session::{InMemoryStore, ResumeClaim, SessionStore, SnapshotQuery};
use holdpoint::tool::{DynamicTool, ToolContext};
use holdpoint::{FinishReason, Resume, ScriptedModel, ScriptedTurn, Status};
use serde_json::{Map, Value, json};

fn caller(principal: &str, role: &str) -> Map<String, Value> {
    let mut context = Map::new();
    context.insert(PRINCIPAL.into(), json!(principal));
    context.insert(ROLES.into(), json!([role]));
    context
}

#[tokio::test]
async fn in_doubt_calls_are_listed_for_and_settled_by_approvers_and_operators_only() {
    let store: Arc<dyn SessionStore> = Arc::new(InMemoryStore::new());
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&runs);
    let close = DynamicTool::new(
        "closeAccount",
        "closes an account",
        json!({"type": "object"}),
        move |_ctx: ToolContext, _input: Value| {
            let counted = Arc::clone(&counted);
            async move {
                counted.fetch_add(1, Ordering::SeqCst);
                Ok(json!({"closed": true}))
            }
        },
    );
    let model = ScriptedModel::new("m");
    model.push(ScriptedTurn::tool_call("closeAccount", json!({"account": "savings"})));
    model.push(ScriptedTurn::text("settled"));
    let policy = Policy::new([RuleSpec {
        name: Some("close".into()),
        tool: Some("closeAccount".into()),
        approvers: vec!["finance".into()],
        quorum: 1,
        self_approval: false,
        ..Default::default()
    }])
    .unwrap();
    let agent = Agent::builder("bank")
        .model(Arc::new(model))
        .tool(close)
        .approval_policy(policy)
        .store(Arc::clone(&store))
        .build()
        .unwrap();
    let options =
        holdpoint::agent::RunOptions::new(holdpoint::agent::AgentInit::new()).context(caller("alice", "customer"));
    let held = agent
        .run_with(holdpoint::agent::AgentInput::text("close my savings"), options)
        .await
        .unwrap();
    assert_eq!(held.finish_reason, FinishReason::Interrupted);
    let snapshot = held.snapshot_id.clone().unwrap();
    // A resume claimed it and its process died: the claim lapsed.
    store
        .claim_resume(
            ResumeClaim {
                snapshot_id: snapshot.clone(),
                lease_until: chrono::Utc::now() - chrono::Duration::seconds(1),
                takeover: false,
            },
            Vec::new(),
        )
        .await
        .unwrap();

    let listed = |who: &'static str, role: &'static str| {
        let agent = agent.clone();
        async move {
            let roles = vec![role.to_owned()];
            agent
                .decisions()
                .in_doubt_for(
                    SnapshotQuery {
                        owner: Some(who.to_owned()),
                        ..SnapshotQuery::default()
                    },
                    Access::Caller {
                        principal: Some(who),
                        roles: &roles,
                    },
                )
                .await
                .unwrap()
                .len()
        }
    };
    assert_eq!(listed("alice", "customer").await, 0, "the rule excluded her");
    assert_eq!(listed("bob", "customer").await, 0);
    assert_eq!(listed("fiona", "finance").await, 1);
    assert_eq!(listed("opal", OPERATOR_ROLE).await, 1);

    let part = held.interrupts()[0].clone();
    let answer = || Resume::from_parts([part.respond(json!({"closed": "by hand"})).unwrap()]);
    let rows = |store: Arc<dyn SessionStore>| async move {
        store
            .capabilities()
            .listing()
            .unwrap()
            .list_snapshots(&SnapshotQuery {
                limit: Some(100),
                ..SnapshotQuery::default()
            })
            .await
            .unwrap()
    };
    let before = rows(Arc::clone(&store)).await;
    let refused = agent
        .decisions()
        .settle(&snapshot, answer(), caller("alice", "customer"))
        .await
        .expect_err("the owner may not settle what the rule kept from her");
    assert_eq!(refused.status(), Status::PermissionDenied, "{refused}");
    assert!(refused.to_string().contains("close"), "names the rule: {refused}");
    let refused = agent
        .decisions()
        .settle(&snapshot, answer(), caller("bob", "customer"))
        .await
        .expect_err("a stranger may not settle");
    assert_eq!(refused.status(), Status::NotFound, "{refused}");
    assert_eq!(rows(Arc::clone(&store)).await, before, "refusals change nothing");

    let settled = agent
        .decisions()
        .settle(&snapshot, answer(), caller("fiona", "finance"))
        .await
        .unwrap();
    assert_eq!(settled.finish_reason, FinishReason::Stop, "{settled:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 0, "responded, never re-run");
    let row = store
        .get_snapshot(settled.snapshot_id.as_deref().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.owner.as_deref(), Some("alice"), "still her session");
}
