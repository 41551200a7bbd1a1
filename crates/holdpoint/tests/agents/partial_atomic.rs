//! A partial approval and its audit row are one store step
//! (docs/reference.md §10.7): a store whose separate audit appends fail
//! still records both together, never an approval without its row.

use std::sync::Arc;

use async_trait::async_trait;
use futures::stream::BoxStream;
use holdpoint::agent::{Agent, AgentInit, AgentInput, Answer, Answered, RunOptions};
use holdpoint::approval::{Policy, RuleSpec};
use holdpoint::session::{
    AuditQuery, AuditRecord, AuditStore, Capabilities, InMemoryStore, ResumeClaim, SessionStore, Snapshot,
    SnapshotStatus, SnapshotUpdate,
};
use holdpoint::tool::{DynamicTool, ToolContext};
use holdpoint::{Error, FinishReason, Result, ScriptedModel, ScriptedTurn};
use serde_json::{Map, Value, json};

/// The in-memory store, except that appending audit records on their own
/// fails (what a write that dies between two store calls leaves).
#[derive(Clone)]
struct LoseSeparateAudit(InMemoryStore);

#[async_trait]
impl SessionStore for LoseSeparateAudit {
    async fn get_snapshot(&self, id: &str) -> Result<Option<Snapshot>> {
        self.0.get_snapshot(id).await
    }
    async fn get_latest_snapshot(&self, session_id: &str) -> Result<Option<Snapshot>> {
        self.0.get_latest_snapshot(session_id).await
    }
    async fn save_snapshot(&self, id: Option<&str>, update: SnapshotUpdate) -> Result<Option<Snapshot>> {
        self.0.save_snapshot(id, update).await
    }
    async fn watch_status(&self, id: &str) -> Result<BoxStream<'static, SnapshotStatus>> {
        self.0.watch_status(id).await
    }
    async fn insert_snapshot(&self, id: &str, row: Snapshot) -> Result<Snapshot> {
        self.0.insert_snapshot(id, row).await
    }
    async fn insert_snapshots(&self, rows: Vec<(String, Snapshot)>) -> Result<Vec<Snapshot>> {
        self.0.insert_snapshots(rows).await
    }
    async fn claim_resume(&self, claim: ResumeClaim, audit: Vec<AuditRecord>) -> Result<()> {
        self.0.claim_resume(claim, audit).await
    }
    /// The in-memory store's capabilities, its audit trail this one.
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            audit: Some(Arc::new(self.clone())),
            ..self.0.capabilities()
        }
    }
}

#[async_trait]
impl AuditStore for LoseSeparateAudit {
    async fn append_audit(&self, _records: Vec<AuditRecord>) -> Result<()> {
        Err(Error::Unavailable("the audit append was lost".into()))
    }
    async fn list_audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>> {
        self.0.list_audit(query).await
    }
    async fn save_snapshot_audited(
        &self,
        id: &str,
        update: SnapshotUpdate,
        audit: Vec<AuditRecord>,
    ) -> Result<Option<Snapshot>> {
        self.0.save_snapshot_audited(id, update, audit).await
    }
}

#[tokio::test]
async fn a_partial_approval_is_written_with_its_audit_row_or_not_at_all() {
    let pay = DynamicTool::new(
        "payBill",
        "pays a bill",
        json!({"type": "object"}),
        |_ctx: ToolContext, input: Value| async move { Ok(json!({"paid": input["amount"]})) },
    )
    .into_tool();
    let model = ScriptedModel::from_fn("scripted/atomic", |request, _| {
        let last = request.messages.last()?;
        let amount: u64 = last.text().trim().parse().ok()?;
        Some(ScriptedTurn::tool_call("payBill", json!({"amount": amount})))
    });
    let policy = Policy::new([RuleSpec {
        name: Some("two of finance".into()),
        tool: Some("payBill".into()),
        approvers: vec!["finance".into()],
        quorum: 2,
        self_approval: false,
        ..RuleSpec::default()
    }])
    .unwrap();
    let store = Arc::new(LoseSeparateAudit(InMemoryStore::new()));
    let agent = Agent::builder("atomic")
        .model(Arc::new(model))
        .tools([pay])
        .approval_policy(policy)
        .store(store.clone())
        .build()
        .unwrap();
    let options = RunOptions::new(AgentInit::new()).principal("alice");
    let out = agent.run_with(AgentInput::text("50"), options).await.unwrap();
    assert_eq!(out.finish_reason, FinishReason::Interrupted);
    let id = out.snapshot_id.clone().unwrap();
    let mut olga = Map::new();
    olga.insert("principal".into(), json!("olga"));
    olga.insert("roles".into(), json!(["finance"]));
    let answered = agent.decisions().answer(Answer::approve(&id), olga).await;
    let row = store.get_snapshot(&id).await.unwrap().unwrap();
    let trail = store.list_audit(&AuditQuery::default()).await.unwrap();
    let rows = trail.iter().filter(|r| r.actor.as_deref() == Some("olga")).count();
    assert_eq!(
        (row.approvals.len(), rows),
        (1, 1),
        "the approval and its row together ({answered:?})"
    );
    assert!(matches!(answered, Ok(Answered::Recorded { counted: true, .. })));
}
