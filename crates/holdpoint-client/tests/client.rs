//! The client against a real `holdpoint-server` on a loopback port: the
//! seed's pause → approve → resume flow over each path, typed interrupts,
//! streaming, WebSocket, snapshots, abort, and the errors a caller sees.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use holdpoint::agent::{Agent, AgentInit, AgentInput, PendingApproval};
use holdpoint::session::InMemoryStore;
use holdpoint::{FinishReason, ResumableTool, Resume, ScriptedModel, ScriptedTurn, Status, ToolContext};
use holdpoint_client::{Client, ClientError};
use holdpoint_server::Server;
use holdpoint_server::auth::ApiKeys;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

const ALICE: &str = "k-alice-client-0123456789";
const BOB: &str = "k-bob-client-0123456789";

#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct Transfer {
    amount: f64,
    to_account: String,
}

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Approval {
    approved: bool,
}

type TransferTool = ResumableTool<Transfer, String, Approval>;

fn transfer(runs: Arc<AtomicUsize>) -> TransferTool {
    ResumableTool::define(
        "transferMoney",
        "Transfers money; needs approval",
        move |ctx: ToolContext, t: Transfer, approval: Option<Approval>| {
            let runs = Arc::clone(&runs);
            async move {
                match approval {
                    None => {
                        Err(ctx.interrupt(json!({"details": format!("Transfer ${:.2} to {}", t.amount, t.to_account)})))
                    }
                    Some(a) if a.approved => {
                        runs.fetch_add(1, Ordering::SeqCst);
                        Ok("txn-123".to_string())
                    }
                    Some(_) => Err(ctx.fail("declined")),
                }
            }
        },
    )
    .unwrap()
}

struct Bank {
    client: Client,
    tool: TransferTool,
    model: ScriptedModel,
    runs: Arc<AtomicUsize>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

async fn bank() -> Bank {
    let runs = Arc::new(AtomicUsize::new(0));
    let tool = transfer(Arc::clone(&runs));
    let model = ScriptedModel::new("scripted");
    let agent = Agent::builder("bankingAgent")
        .model(Arc::new(model.clone()))
        .tool(tool.clone())
        .store(Arc::new(InMemoryStore::new()))
        .build()
        .unwrap();
    let server = Server::builder()
        .agent(agent)
        .api_keys(ApiKeys::new().key(ALICE, "alice").key(BOB, "bob"))
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        holdpoint_server::serve(listener, &server, async move {
            let _ = stopped.await;
        })
        .await
    });
    Bank {
        client: Client::new(base).api_key(ALICE),
        tool,
        model,
        runs,
        _stop: stop,
    }
}

impl Bank {
    fn script_transfer(&self) {
        self.model.push(ScriptedTurn::tool_call(
            "transferMoney",
            json!({"amount": 500, "toAccount": "savings"}),
        ));
        self.model.push(ScriptedTurn::streamed_text(["Done: ", "txn-123"]));
    }
}

#[tokio::test]
async fn pause_claim_and_resume_by_session_id() {
    let b = bank().await;
    b.script_transfer();
    let agent = b.client.agent("bankingAgent");
    let paused = agent.run_text("Transfer $500 to savings").await.unwrap();
    assert_eq!(paused.finish_reason, FinishReason::Interrupted);
    // The tool's own typed claim works on the part that crossed the wire.
    let call = b.tool.interrupted(&paused.interrupts()[0]).expect("our pause");
    assert_eq!(call.input.amount, 500.0);
    let approve = call.restart(Some(Approval { approved: true })).unwrap();
    let done = agent
        .run(
            AgentInput::resume(Resume::from_parts([approve.clone()])),
            AgentInit::session(paused.session_id.clone()),
        )
        .await
        .unwrap();
    assert_eq!(done.text(), "Done: txn-123");
    assert_eq!(b.runs.load(Ordering::SeqCst), 1);

    // The same answer again lost the exactly-once claim, or is from an
    // earlier turn: an error either way, and the tool did not run again.
    let again = agent
        .run(
            AgentInput::resume(Resume::from_parts([approve])),
            AgentInit::session(paused.session_id.clone()),
        )
        .await
        .unwrap_err();
    assert!(again.status().is_some(), "{again}");
    assert_eq!(b.runs.load(Ordering::SeqCst), 1);

    // Snapshots read back by id and by session.
    let latest = agent.latest_snapshot(&paused.session_id).await.unwrap();
    assert_eq!(Some(latest.snapshot_id.clone()), done.snapshot_id);
    let by_id = agent.snapshot(paused.snapshot_id.as_deref().unwrap()).await.unwrap();
    assert_eq!(by_id.session_id, paused.session_id);
}

#[tokio::test]
async fn another_principal_gets_not_found_and_a_wrong_key_is_unauthenticated() {
    let b = bank().await;
    b.script_transfer();
    let paused = b.client.agent("bankingAgent").run_text("Transfer").await.unwrap();
    let bob = b.client.clone().api_key(BOB).agent("bankingAgent");
    let err = bob.latest_snapshot(&paused.session_id).await.unwrap_err();
    assert_eq!(err.status(), Some(Status::NotFound), "{err}");
    let stranger = b.client.clone().api_key("k-nobody-0000000000").agent("bankingAgent");
    let err = stranger.run_text("hi").await.unwrap_err();
    assert!(matches!(err, ClientError::Server { http: 401, .. }), "{err}");
    let err = b.client.agent("noSuchAgent").run_text("hi").await.unwrap_err();
    assert_eq!(err.status(), Some(Status::NotFound), "{err}");
}

#[tokio::test]
async fn a_streamed_turn_yields_chunks_then_the_output() {
    let b = bank().await;
    b.script_transfer();
    let agent = b.client.agent("bankingAgent");
    let paused = agent.run_text("Transfer").await.unwrap();
    let approve = b
        .tool
        .interrupted(&paused.interrupts()[0])
        .unwrap()
        .restart(Some(Approval { approved: true }))
        .unwrap();
    let mut stream = agent
        .stream(
            AgentInput::resume(Resume::from_parts([approve])),
            AgentInit::session(paused.session_id.clone()),
        )
        .await
        .unwrap();
    let mut text = String::new();
    let mut ended = false;
    while let Some(chunk) = stream.next_chunk().await {
        let chunk = chunk.unwrap();
        if let Some(c) = &chunk.model_chunk {
            text.push_str(&c.text());
        }
        ended |= chunk.turn_end.is_some();
    }
    assert!(ended, "no turnEnd chunk");
    assert_eq!(text, "Done: txn-123");
    let out = stream.output().await.unwrap();
    assert_eq!(out.text(), "Done: txn-123");
}

#[tokio::test]
async fn a_websocket_connection_pauses_and_resumes_in_place() {
    let b = bank().await;
    b.script_transfer();
    let agent = b.client.agent("bankingAgent");
    let mut conn = agent.connect(AgentInit::new()).await.unwrap();
    conn.send(AgentInput::text("Transfer $500 to savings")).await.unwrap();
    let first = conn.receive_turn().await.unwrap();
    let end = first.last().and_then(|c| c.turn_end.clone()).expect("turnEnd");
    assert_eq!(end.finish_reason, FinishReason::Interrupted);
    let snapshot = agent.snapshot(end.snapshot_id.as_deref().unwrap()).await.unwrap();
    let paused_part = PendingApproval::of(&snapshot)
        .into_iter()
        .next()
        .expect("the turn ended paused")
        .part;
    let approve = b
        .tool
        .interrupted(&paused_part)
        .unwrap()
        .restart(Some(Approval { approved: true }))
        .unwrap();
    conn.send(AgentInput::resume(Resume::from_parts([approve])))
        .await
        .unwrap();
    conn.receive_turn().await.unwrap();
    let out = conn.close().await.unwrap();
    assert_eq!(out.text(), "Done: txn-123");
    assert_eq!(b.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_failed_turn_is_an_error_carrying_its_output() {
    let b = bank().await;
    b.script_transfer();
    let agent = b.client.agent("bankingAgent");
    let paused = agent.run_text("Transfer").await.unwrap();
    // A resume naming a call that is not paused fails the turn.
    let mut forged = paused.interrupts()[0].clone();
    if let Some(req) = forged.as_tool_request_mut() {
        req.reference = Some("not-a-ref".into());
    }
    let forged = forged.restart(Some(json!({"approved": true}))).unwrap();
    let err = agent
        .run(
            AgentInput::resume(Resume::from_parts([forged])),
            AgentInit::session(paused.session_id.clone()),
        )
        .await
        .unwrap_err();
    match err {
        ClientError::TurnFailed(out) => {
            assert_eq!(out.finish_reason, FinishReason::Failed);
            assert!(out.error.is_some());
        }
        ClientError::Server { status, .. } => assert_eq!(status, Status::InvalidArgument),
        other => panic!("unexpected error: {other}"),
    }
    assert_eq!(b.runs.load(Ordering::SeqCst), 0);
}
