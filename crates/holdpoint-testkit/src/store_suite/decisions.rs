//! The one decision path through a store (docs/reference.md §10.10): an
//! answer refused because it does not fit or because the caller may not
//! give it leaves every row as it was — snapshots, audit, grants, outbox —
//! and the hold stays answerable.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use holdpoint::agent::{Agent, AgentInit, AgentInput, Answer, Answered, PRINCIPAL, RunOptions};
use holdpoint::approval::{GrantQuery, GrantRequest, GrantScope, Policy, ROLES, RuleSpec};
use holdpoint::session::{AuditQuery, AuditRecord, OutboxEvent, OutboxQuery, SessionStore, Snapshot, SnapshotQuery};
use holdpoint::tool::{DynamicTool, ToolContext};
use holdpoint::{Error, FinishReason, Part, Resume, Role, ScriptedModel, ScriptedTurn, Status};
use serde_json::{Map, Value, json};

use super::capable::{audit, grants, listing, outbox};
use super::fresh_id;

fn caller(principal: &str, role: &str) -> Map<String, Value> {
    let mut context = Map::new();
    context.insert(PRINCIPAL.into(), json!(principal));
    context.insert(ROLES.into(), json!([role]));
    context
}

/// `payBill` held for finance (no self-approval), `closeAccount` for
/// managers (the owner may answer); both outputs have a schema.
fn desk(name: &str, store: Arc<dyn SessionStore>, runs: &Arc<AtomicUsize>) -> Agent {
    let tool = |tool: &str, runs: &Arc<AtomicUsize>| {
        let runs = Arc::clone(runs);
        DynamicTool::new(
            tool,
            "does it",
            json!({"type": "object"}),
            move |_ctx: ToolContext, _input: Value| {
                let runs = Arc::clone(&runs);
                async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    Ok(json!({"done": true}))
                }
            },
        )
        .with_output_schema(
            json!({"type": "object", "properties": {"done": {"type": "boolean"}}, "required": ["done"]}),
        )
        .into_tool()
    };
    let model = ScriptedModel::from_fn("scripted/decisions", |request, _| {
        let last = request.messages.last()?;
        if last.role == Role::Tool {
            return Some(ScriptedTurn::text("noted"));
        }
        Some(ScriptedTurn::tool_call(last.text().trim(), json!({"amount": 40})))
    });
    let rule = |name: &str, tool: &str, role: &str, self_approval: bool| RuleSpec {
        name: Some(name.into()),
        tool: Some(tool.into()),
        approvers: vec![role.into()],
        quorum: 1,
        self_approval,
        ..RuleSpec::default()
    };
    let policy = Policy::new([
        rule("bills", "payBill", "finance", false),
        rule("close", "closeAccount", "manager", true),
    ])
    .expect("the rules compile");
    Agent::builder(name)
        .model(Arc::new(model))
        .tools([tool("payBill", runs), tool("closeAccount", runs)])
        .approval_policy(policy)
        .store(store)
        .build()
        .expect("the agent builds")
}

/// Every row of `session` (and of `agent`'s grants) a refusal could touch.
#[derive(Debug, PartialEq)]
struct Rows {
    snapshots: Vec<Snapshot>,
    audit: Vec<AuditRecord>,
    grants: usize,
    outbox: Vec<OutboxEvent>,
}

async fn rows(store: &dyn SessionStore, agent: &str, session: &str) -> Rows {
    let mut snapshots = listing(store)
        .list_snapshots(&SnapshotQuery {
            session_id: Some(session.to_owned()),
            limit: Some(1000),
            ..SnapshotQuery::default()
        })
        .await
        .expect("list snapshots");
    snapshots.sort_by(|a, b| a.snapshot_id.cmp(&b.snapshot_id));
    let audit = audit(store)
        .list_audit(&AuditQuery {
            session_id: Some(session.to_owned()),
            limit: Some(1000),
            ..AuditQuery::default()
        })
        .await
        .expect("list audit");
    let grants = grants(store)
        .list_grants(&GrantQuery {
            agent: Some(agent.to_owned()),
            limit: Some(1000),
            ..GrantQuery::default()
        })
        .await
        .map_or(0, |g| g.len());
    let ids: Vec<&str> = snapshots.iter().map(|s| s.snapshot_id.as_str()).collect();
    let mut outbox: Vec<OutboxEvent> = outbox(store)
        .list_outbox(&OutboxQuery {
            limit: Some(10_000),
            ..OutboxQuery::default()
        })
        .await
        .unwrap_or_default()
        .into_iter()
        .filter(|e| ids.contains(&e.snapshot_id.as_str()))
        .collect();
    outbox.sort_by(|a, b| a.id.cmp(&b.id));
    Rows {
        snapshots,
        audit,
        grants,
        outbox,
    }
}

fn status(result: &holdpoint::Result<impl std::fmt::Debug>) -> Status {
    match result {
        Ok(v) => panic!("expected a refusal, got {v:?}"),
        Err(Error::TurnFailed(out)) => out.error.as_ref().map_or(Status::Internal, |e| e.status),
        Err(e) => e.status(),
    }
}

/// Refused answers — the owner a rule excluded, another principal, an
/// owner's tool-wide grant, an output the schema refuses, an approval that
/// is not a boolean, a call left unanswered — change no row; the
/// approver's correct answer then runs the call once.
pub async fn refused_answers_leave_every_row_as_it_was(store: Arc<dyn SessionStore>) {
    let runs = Arc::new(AtomicUsize::new(0));
    let name = fresh_id("desk");
    let agent = desk(&name, Arc::clone(&store), &runs);
    let hold = |tool: &'static str| {
        let agent = agent.clone();
        async move {
            let options = RunOptions::new(AgentInit::new()).context(caller("alice", "customer"));
            let out = agent
                .run_with(AgentInput::text(tool), options)
                .await
                .expect("the call is held");
            assert_eq!(out.finish_reason, FinishReason::Interrupted, "{out:?}");
            out
        }
    };
    let bill = hold("payBill").await;
    let bill_id = bill.snapshot_id.clone().expect("stored");
    let part: Part = bill.interrupts()[0].clone();
    let before = rows(store.as_ref(), &name, &bill.session_id).await;
    let unchanged = |why: &'static str| {
        let store = Arc::clone(&store);
        let (name, session) = (name.clone(), bill.session_id.clone());
        let before = &before;
        async move {
            assert_eq!(
                &rows(store.as_ref(), &name, &session).await,
                before,
                "{why} changed a row"
            );
        }
    };

    let got = agent
        .decisions()
        .answer(Answer::approve(&bill_id), caller("alice", "customer"))
        .await;
    assert_eq!(status(&got), Status::PermissionDenied, "the owner is excluded");
    unchanged("the owner's refused approval").await;
    let got = agent
        .decisions()
        .answer(Answer::approve(&bill_id), caller("bob", "customer"))
        .await;
    assert_eq!(status(&got), Status::NotFound, "another principal does not see it");
    unchanged("a stranger's approval").await;

    let resume = |directive: Part, who: &str| {
        let agent = agent.clone();
        let options = RunOptions::new(AgentInit::snapshot(bill_id.clone())).context(caller(who, "finance"));
        async move {
            agent
                .run_with(AgentInput::resume(Resume::from_parts([directive])), options)
                .await
        }
    };
    let bad_output = part.respond(json!({"done": "yes"})).expect("a respond part");
    let got = resume(bad_output, "fiona").await;
    assert_eq!(status(&got), Status::InvalidArgument, "the output schema refuses it");
    unchanged("a respond output the schema refuses").await;
    let not_boolean = part
        .restart(Some(json!({"toolApproved": "yes"})))
        .expect("a restart part");
    let got = resume(not_boolean, "fiona").await;
    assert_eq!(status(&got), Status::InvalidArgument, "toolApproved is true or false");
    unchanged("a non-boolean approval").await;
    assert_eq!(runs.load(Ordering::SeqCst), 0);

    // The owner of a self-approved hold may not grant for everyone.
    let close = hold("closeAccount").await;
    let close_id = close.snapshot_id.clone().expect("stored");
    let grants_before = rows(store.as_ref(), &name, &close.session_id).await;
    let tool_wide = GrantRequest {
        scope: GrantScope::Tool,
        when: None,
        ttl: None,
        uses: None,
    };
    let got = agent
        .decisions()
        .answer(Answer::approve(&close_id).grant(tool_wide), caller("alice", "customer"))
        .await;
    assert_eq!(status(&got), Status::PermissionDenied, "tool scope needs a manager");
    assert_eq!(rows(store.as_ref(), &name, &close.session_id).await, grants_before);

    // The approver's answer is taken.
    let got = agent
        .decisions()
        .answer(Answer::approve(&bill_id), caller("fiona", "finance"))
        .await
        .expect("finance answers");
    assert!(matches!(got, Answered::Resumed(_)), "{got:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}
