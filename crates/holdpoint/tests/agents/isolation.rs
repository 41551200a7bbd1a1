//! Agents sharing one store: every load of a snapshot or session checks
//! that the row is a snapshot the agent itself wrote. Another agent's row,
//! a row without `agent` and a claim marker of client-held state all read
//! as unknown (`NOT_FOUND`, the message of an unknown id), and nothing runs
//! or is written.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use holdpoint::agent::{Access, Agent, AgentInit, AgentInput, AgentOutput};
use holdpoint::session::{AuditQuery, InMemoryStore, SessionStore, Snapshot, SnapshotQuery, hash_json};
use holdpoint::tool::{DynamicTool, ToolContext};
use holdpoint::{Error, FinishReason, Resume, ScriptedModel, ScriptedTurn, Status};
use serde_json::{Map, json};

use crate::{approve, transfer_tool};

/// Agent `bank` (A), whose transfer pauses for approval, and agent
/// `teller` (B) on the same store, whose tool of the same name moves money
/// at once.
struct Pair {
    store: Arc<dyn SessionStore>,
    a: Agent,
    a_tool: crate::TransferTool,
    a_model: ScriptedModel,
    a_runs: Arc<AtomicUsize>,
    b: Agent,
    b_runs: Arc<AtomicUsize>,
}

fn pair(store: Arc<dyn SessionStore>) -> Pair {
    let a_runs = Arc::new(AtomicUsize::new(0));
    let a_tool = transfer_tool(Arc::clone(&a_runs));
    let a_model = ScriptedModel::new("a");
    let a = Agent::builder("bank")
        .model(Arc::new(a_model.clone()))
        .tool(a_tool.clone())
        .store(Arc::clone(&store))
        .build()
        .unwrap();
    let b_runs = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&b_runs);
    let ungated = DynamicTool::new(
        "transferMoney",
        "moves money at once",
        json!({"type": "object"}),
        move |_ctx: ToolContext, _input| {
            let runs = Arc::clone(&counted);
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok(json!({"success": true}))
            }
        },
    )
    .into_tool();
    let b_model = ScriptedModel::new("b");
    for _ in 0..8 {
        b_model.push(ScriptedTurn::text("done by the teller"));
    }
    let b = Agent::builder("teller")
        .model(Arc::new(b_model))
        .tools([ungated])
        .store(Arc::clone(&store))
        .build()
        .unwrap();
    Pair {
        store,
        a,
        a_tool,
        a_model,
        a_runs,
        b,
        b_runs,
    }
}

async fn everything(store: &dyn SessionStore) -> (Vec<Snapshot>, usize) {
    let rows = store
        .capabilities()
        .listing()
        .unwrap()
        .list_snapshots(&SnapshotQuery {
            limit: Some(1000),
            ..SnapshotQuery::default()
        })
        .await
        .unwrap();
    let audit = store
        .capabilities()
        .audit()
        .unwrap()
        .list_audit(&AuditQuery {
            limit: Some(1000),
            ..AuditQuery::default()
        })
        .await
        .unwrap();
    (rows, audit.len())
}

fn assert_unknown(result: holdpoint::Result<impl std::fmt::Debug>, message: &str) {
    let err = result.expect_err("refused as unknown");
    assert_eq!(err.status(), Status::NotFound, "{err}");
    assert_eq!(err.to_string(), message);
}

fn unknown_snapshot(id: &str) -> String {
    format!("snapshot {id} not found")
}

/// A's paused transfer: its output and the approval that answers it.
async fn paused_transfer(p: &Pair) -> (AgentOutput, AgentInput) {
    p.a_model.push(ScriptedTurn::tool_call(
        "transferMoney",
        json!({"amount": 500, "toAccount": "mallory"}),
    ));
    let paused = p.a.run_text("Transfer $500").await.unwrap();
    assert_eq!(paused.finish_reason, FinishReason::Interrupted);
    let approval = AgentInput::resume(Resume::from_parts([approve(&p.a_tool, &paused)]));
    (paused, approval)
}

async fn another_agents_rows_read_as_unknown(store: Arc<dyn SessionStore>) {
    let p = pair(store);
    let (paused, approval) = paused_transfer(&p).await;
    let snap = paused.snapshot_id.clone().unwrap();
    let session = paused.session_id.clone();
    let row = p.store.get_snapshot(&snap).await.unwrap().unwrap();
    assert_eq!(row.agent.as_deref(), Some("bank"));

    // A claim marker on the same store, stamped with B's own name by a
    // client-managed agent called `teller` too.
    let c_runs = Arc::new(AtomicUsize::new(0));
    let c_tool = transfer_tool(Arc::clone(&c_runs));
    let c_model = ScriptedModel::new("c");
    let c = Agent::builder("teller")
        .model(Arc::new(c_model.clone()))
        .tool(c_tool.clone())
        .build()
        .unwrap()
        .with_state_claims(Arc::clone(&p.store));
    c_model.push(ScriptedTurn::tool_call(
        "transferMoney",
        json!({"amount": 1, "toAccount": "x"}),
    ));
    let held = c.run_text("Transfer $1").await.unwrap();
    let state = held.state.clone().unwrap();
    c_model.push(ScriptedTurn::text("ok"));
    let resumed = c
        .run(
            AgentInput::resume(Resume::from_parts([approve(&c_tool, &held)])),
            AgentInit::state(state.clone()),
        )
        .await
        .unwrap();
    assert_eq!(resumed.finish_reason, FinishReason::Stop, "{resumed:?}");
    let marker = format!("state-claim:{}", hash_json(&state));
    assert_eq!(
        p.store.get_snapshot(&marker).await.unwrap().unwrap().agent.as_deref(),
        Some("teller")
    );

    // A row without `agent` (written by hand): it belongs to no agent.
    let mut unstamped = row.clone();
    unstamped.agent = None;
    unstamped.snapshot_id = String::new();
    unstamped.session_id = "written-by-hand".into();
    let unstamped = p
        .store
        .save_snapshot(None, Box::new(move |_| Ok(Some(unstamped))))
        .await
        .unwrap()
        .unwrap()
        .snapshot_id;

    let before = everything(p.store.as_ref()).await;
    let b = &p.b;
    // Resumes and new messages through B, by snapshot id and session id.
    for id in [snap.as_str(), marker.as_str(), unstamped.as_str()] {
        assert_unknown(
            b.run(approval.clone(), AgentInit::snapshot(id)).await,
            &unknown_snapshot(id),
        );
        assert_unknown(
            b.run(AgentInput::text("hi"), AgentInit::snapshot(id)).await,
            &unknown_snapshot(id),
        );
        assert_unknown(b.connect(AgentInit::snapshot(id)).await, &unknown_snapshot(id));
        assert!(b.snapshot(id, Access::Full).await.unwrap().is_none(), "{id}");
        assert!(b.snapshot(id, Access::As(None)).await.unwrap().is_none(), "{id}");
        assert_eq!(b.abort(id, Access::Full).await.unwrap(), None, "{id}");
        assert_eq!(b.abort(id, Access::As(None)).await.unwrap(), None, "{id}");
        let settled = b
            .decisions()
            .settle(id, approval.resume.clone().unwrap(), Map::new())
            .await;
        assert_unknown(settled, &unknown_snapshot(id));
    }
    // The same answer as for an id that does not exist.
    assert_unknown(
        b.run(approval.clone(), AgentInit::snapshot("no-such-id")).await,
        &unknown_snapshot("no-such-id"),
    );
    let unknown_session = format!("session {session} not found");
    assert_unknown(
        b.run(approval.clone(), AgentInit::session(&session)).await,
        &unknown_session,
    );
    assert_unknown(
        b.run(AgentInput::text("hi"), AgentInit::session(&session)).await,
        &unknown_session,
    );
    assert_unknown(b.connect(AgentInit::session(&session)).await, &unknown_session);
    let conn = b.connect(AgentInit::new()).await.unwrap();
    drop(conn);
    assert!(b.latest_snapshot(&session, Access::Full).await.unwrap().is_none());
    assert!(b.latest_snapshot(&session, Access::As(None)).await.unwrap().is_none());
    // The marker is the only row of a session of its own, not B's either;
    // it joins no session the client names.
    let marker_session = format!("session {marker} not found");
    assert_unknown(
        b.run(AgentInput::text("hi"), AgentInit::session(&marker)).await,
        &marker_session,
    );
    assert!(p.store.get_latest_snapshot(&held.session_id).await.unwrap().is_none());
    assert!(
        b.decisions()
            .pending(SnapshotQuery::default())
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        b.decisions()
            .in_doubt(SnapshotQuery::default())
            .await
            .unwrap()
            .is_empty()
    );
    assert!(b.decisions().audit(AuditQuery::default()).await.unwrap().is_empty());

    // A does not load the unstamped row or the marker either.
    for id in [marker.as_str(), unstamped.as_str()] {
        assert_unknown(
            p.a.run(approval.clone(), AgentInit::snapshot(id)).await,
            &unknown_snapshot(id),
        );
    }

    assert_eq!(p.a_runs.load(Ordering::SeqCst), 0, "A's tool never ran");
    assert_eq!(p.b_runs.load(Ordering::SeqCst), 0, "B's tool never ran");
    assert_eq!(everything(p.store.as_ref()).await, before, "nothing was written");

    // A itself still resumes its call, once.
    p.a_model.push(ScriptedTurn::text("sent"));
    let done = p.a.run(approval, AgentInit::snapshot(&snap)).await.unwrap();
    assert_eq!(done.finish_reason, FinishReason::Stop, "{done:?}");
    assert_eq!(p.a_runs.load(Ordering::SeqCst), 1);
    assert_eq!(p.b_runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn another_agents_snapshots_read_as_unknown_in_memory() {
    another_agents_rows_read_as_unknown(Arc::new(InMemoryStore::new())).await;
}

#[tokio::test]
async fn another_agents_snapshots_read_as_unknown_in_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("shared.db").display());
    another_agents_rows_read_as_unknown(holdpoint_stores::open_store(&url).await.unwrap()).await;
}

/// A new message on A's session through B's connection is refused too:
/// the session cannot be continued by an agent that did not write it.
#[tokio::test]
async fn another_agents_session_cannot_be_continued() {
    let p = pair(Arc::new(InMemoryStore::new()));
    let (paused, _) = paused_transfer(&p).await;
    let before = everything(p.store.as_ref()).await;
    let err: Error =
        p.b.run(
            AgentInput::text("send it anyway"),
            AgentInit::session(&paused.session_id),
        )
        .await
        .unwrap_err();
    assert_eq!(err.status(), Status::NotFound);
    assert_eq!(everything(p.store.as_ref()).await, before);
    // A's call still waits, for A.
    let waiting = p.a.decisions().pending(SnapshotQuery::default()).await.unwrap();
    assert_eq!(waiting.len(), 1);
    assert_eq!(waiting[0].snapshot_id, paused.snapshot_id.unwrap());
}
