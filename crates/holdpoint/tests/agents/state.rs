use std::sync::Arc;

use crate::TurnResultExt;
use futures::StreamExt;
use holdpoint::agent::{Access, Agent, AgentInit, AgentInput, RunOptions, Turn};
use holdpoint::session::{Artifact, InMemoryStore, SessionState, StateCodec};
use holdpoint::{Error, FinishReason, Status};
use serde_json::{Value, json};

fn counter() -> Agent {
    Agent::custom("counter", |turn: Turn| async move {
        let n = turn.custom()["counter"].as_i64().unwrap_or(0) + 1;
        if turn.input().message.as_ref().is_some_and(|m| m.text() == "fail") {
            turn.update_custom(|_| json!({"counter": 999}));
            return Err(Error::Internal("asked to fail".into()));
        }
        turn.update_custom(|_| json!({ "counter": n }));
        turn.reply_text(format!("count {n}"));
        Ok(())
    })
    .build()
    .unwrap()
}

#[tokio::test]
async fn client_state_round_trips_and_failure_returns_the_last_good_state() {
    let agent = counter();
    let first = agent.run_text("go").await.unwrap();
    let state = first.state.clone().unwrap();
    assert_eq!(state["custom"]["counter"], 1);
    assert_eq!(state["sessionId"], json!(first.session_id));
    let second = agent
        .run(AgentInput::text("again"), AgentInit::state(state.clone()))
        .await
        .unwrap();
    assert_eq!(second.text(), "count 2");
    assert_eq!(
        second.session_id, first.session_id,
        "the session id travels in the state"
    );
    let failed = agent
        .run(
            AgentInput::text("fail"),
            AgentInit::state(second.state.clone().unwrap()),
        )
        .await
        .failed();
    assert_eq!(failed.finish_reason, FinishReason::Failed);
    assert_eq!(
        failed.state, second.state,
        "a failed turn hands back the last good state"
    );
}

#[tokio::test]
async fn init_errors_are_typed() {
    let client = counter();
    let err = client.connect(AgentInit::session("s1")).await.unwrap_err();
    assert_eq!(err.status(), Status::FailedPrecondition);
    assert!(err.to_string().contains("Cannot use 'sessionId'"));
    let err = client
        .connect(AgentInit::state(json!({"messages": 5})))
        .await
        .unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);

    let server = Agent::custom("s", |_t: Turn| async move { Ok(()) })
        .store(Arc::new(InMemoryStore::new()))
        .build()
        .unwrap();
    let err = server.connect(AgentInit::state(json!({}))).await.unwrap_err();
    assert_eq!(err.status(), Status::FailedPrecondition);
    assert!(err.to_string().contains("Cannot send 'state'"));
    let err = server.connect(AgentInit::snapshot("missing")).await.unwrap_err();
    assert_eq!(err.status(), Status::NotFound);
    let err = server.connect(AgentInit::session("")).await.unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
}

#[tokio::test]
async fn session_ids_come_from_the_snapshot_then_the_caller_then_a_fresh_uuid() {
    let store = Arc::new(InMemoryStore::new());
    let agent = Agent::custom("s", |t: Turn| async move {
        t.reply_text("ok");
        Ok(())
    })
    .store(store)
    .build()
    .unwrap();
    let fresh = agent.run_text("a").await.unwrap();
    assert!(uuid_like(&fresh.session_id), "{}", fresh.session_id);
    let named = agent
        .run(AgentInput::text("a"), AgentInit::session("my-app-1"))
        .await
        .unwrap();
    assert_eq!(named.session_id, "my-app-1");
    let from_snapshot = agent
        .run(
            AgentInput::text("b"),
            AgentInit::snapshot(named.snapshot_id.clone().unwrap()),
        )
        .await
        .unwrap();
    assert_eq!(from_snapshot.session_id, "my-app-1");
    let snap = agent
        .snapshot(from_snapshot.snapshot_id.as_deref().unwrap(), Access::Full)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(snap.parent_id, named.snapshot_id, "snapshots chain to their parent");
    // a snapshot named with another session's id does not belong to it
    let err = agent
        .connect(AgentInit {
            session_id: Some(fresh.session_id.clone()),
            snapshot_id: named.snapshot_id.clone(),
            state: None,
        })
        .await
        .unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(err.to_string().contains("does not belong to session"), "{err}");
}

fn uuid_like(s: &str) -> bool {
    s.len() == 36 && s.chars().filter(|c| *c == '-').count() == 4
}

#[tokio::test]
async fn custom_patches_start_with_a_replace_then_diff() {
    let agent = Agent::custom("multi", |turn: Turn| async move {
        turn.update_custom(|_| json!({"counter": 1, "status": "working"}));
        turn.update_custom(|p| {
            let mut n = p.clone();
            n["counter"] = json!(2);
            n
        });
        turn.add_artifact(Artifact::text("doc", "v1"));
        turn.add_artifact(Artifact::text("doc", "v2"));
        turn.reply_text("done");
        Ok(())
    })
    .build()
    .unwrap();
    let conn = agent.connect(AgentInit::new()).await.unwrap();
    conn.send_text("go").unwrap();
    let chunks: Vec<_> = conn.receive().collect().await;
    let patches: Vec<Value> = chunks.iter().filter_map(|c| c.custom_patch.clone()).collect();
    assert_eq!(
        patches,
        vec![
            json!([{"op": "replace", "path": "", "value": {"counter": 1, "status": "working"}}]),
            json!([{"op": "replace", "path": "/counter", "value": 2}]),
        ]
    );
    let artifacts: Vec<_> = chunks.iter().filter_map(|c| c.artifact.clone()).collect();
    assert_eq!(artifacts.len(), 2);
    let out = conn.output().await.unwrap();
    assert_eq!(
        out.artifacts,
        vec![Artifact::text("doc", "v2")],
        "artifacts replace by name"
    );
}

/// A codec that refuses state it did not produce, as a signing codec would.
struct Tagged;

impl StateCodec for Tagged {
    fn encode(&self, state: &SessionState) -> holdpoint::Result<Value> {
        Ok(json!({"tag": "ok", "state": state}))
    }
    fn decode(&self, value: Value) -> holdpoint::Result<SessionState> {
        if value["tag"] != "ok" {
            return Err(Error::PermissionDenied("state was not issued by this server".into()));
        }
        serde_json::from_value(value["state"].clone()).map_err(|e| Error::InvalidArgument(e.to_string()))
    }
}

#[tokio::test]
async fn the_state_codec_encodes_and_checks_client_state() {
    let agent = Agent::custom("c", |t: Turn| async move {
        t.reply_text("hi");
        Ok(())
    })
    .state_codec(Arc::new(Tagged))
    .build()
    .unwrap();
    let out = agent.run_text("a").await.unwrap();
    let state = out.state.unwrap();
    assert_eq!(state["tag"], "ok");
    assert!(
        agent
            .run(AgentInput::text("b"), AgentInit::state(state.clone()))
            .await
            .is_ok()
    );
    let mut forged = state;
    forged["tag"] = json!("forged");
    let err = agent.connect(AgentInit::state(forged)).await.unwrap_err();
    assert_eq!(err.status(), Status::PermissionDenied);
}

fn as_principal(p: &str) -> serde_json::Map<String, Value> {
    let mut m = serde_json::Map::new();
    m.insert(holdpoint::agent::PRINCIPAL.into(), json!(p));
    m
}

#[tokio::test]
async fn another_principal_cannot_read_resume_or_abort_a_session() {
    let agent = Agent::custom("owned", |t: Turn| async move {
        t.reply_text("ok");
        Ok(())
    })
    .store(Arc::new(InMemoryStore::new()))
    .build()
    .unwrap();
    let conn = agent
        .connect_with(RunOptions::new(AgentInit::new()).context(as_principal("alice")))
        .await
        .unwrap();
    conn.send_text("mine").unwrap();
    let out = conn.output().await.unwrap();
    let snap = out.snapshot_id.clone().unwrap();
    let stored = agent.snapshot(&snap, Access::Full).await.unwrap().unwrap();
    assert_eq!(stored.owner.as_deref(), Some("alice"));

    for init in [
        AgentInit::snapshot(snap.clone()),
        AgentInit::session(out.session_id.clone()),
    ] {
        let err = agent
            .connect_with(RunOptions::new(init).context(as_principal("mallory")))
            .await
            .unwrap_err();
        assert_eq!(err.status(), Status::NotFound, "{err}");
    }
    assert!(
        agent
            .snapshot(&snap, Access::As(Some("mallory")))
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        agent
            .latest_snapshot(&out.session_id, Access::As(Some("mallory")))
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        agent.snapshot(&snap, Access::As(None)).await.unwrap().is_none(),
        "anonymous callers see no owned session"
    );
    assert_eq!(agent.abort(&snap, Access::As(Some("mallory"))).await.unwrap(), None);
    // the owner continues, and the next snapshot keeps the owner
    let again = agent
        .connect_with(RunOptions::new(AgentInit::snapshot(snap)).context(as_principal("alice")))
        .await
        .unwrap();
    again.send_text("still mine").unwrap();
    let next = again.output().await.unwrap();
    let row = agent
        .snapshot(next.snapshot_id.as_deref().unwrap(), Access::Full)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.owner.as_deref(), Some("alice"));
}

/// Plain JSON state whose claim key is a hash of the state, standing in
/// for the server's signing codec.
struct Claimable;

impl StateCodec for Claimable {
    fn encode(&self, state: &SessionState) -> holdpoint::Result<Value> {
        holdpoint::session::JsonStateCodec.encode(state)
    }
    fn decode(&self, value: Value) -> holdpoint::Result<SessionState> {
        holdpoint::session::JsonStateCodec.decode(value)
    }
    fn claim_key(&self, value: &Value) -> Option<String> {
        Some(holdpoint::session::hash_json(value))
    }
}

async fn rows(store: &dyn holdpoint::session::SessionStore) -> usize {
    let query = holdpoint::session::SnapshotQuery {
        limit: Some(1000),
        ..Default::default()
    };
    store
        .capabilities()
        .listing()
        .unwrap()
        .list_snapshots(&query)
        .await
        .unwrap()
        .len()
}

#[tokio::test]
async fn client_held_state_answers_its_interrupts_once_with_state_claims() {
    state_claims_in(Arc::new(InMemoryStore::new())).await;
}

#[tokio::test]
async fn state_claims_work_in_a_sqlite_store() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("claims.db").display());
    state_claims_in(holdpoint_stores::open_store(&url).await.unwrap()).await;
}

async fn state_claims_in(claims: Arc<dyn holdpoint::session::SessionStore>) {
    use holdpoint::{Resume, ScriptedModel, ScriptedTurn};
    use std::sync::atomic::{AtomicUsize, Ordering};

    let runs = Arc::new(AtomicUsize::new(0));
    let tool = crate::transfer_tool(Arc::clone(&runs));
    let model = ScriptedModel::new("m");
    let agent = Agent::builder("bank")
        .model(Arc::new(model.clone()))
        .tool(tool.clone())
        .state_codec(Arc::new(Claimable))
        .build()
        .unwrap()
        .with_state_claims(Arc::clone(&claims));
    let call = || ScriptedTurn::tool_call("transferMoney", json!({"amount": 500, "toAccount": "savings"}));
    model.push(call());
    let paused = agent.run_text("Transfer $500").await.unwrap();
    assert_eq!(paused.finish_reason, FinishReason::Interrupted);
    let state = paused.state.clone().unwrap();
    let approve = || AgentInput::resume(Resume::from_parts([crate::approve(&tool, &paused)]));

    // A resume that fails validation claims nothing.
    let mut wrong = crate::approve(&tool, &paused);
    wrong.as_tool_request_mut().unwrap().reference = Some("no-such-ref".into());
    let invalid = agent
        .run(
            AgentInput::resume(Resume::from_parts([wrong])),
            AgentInit::state(state.clone()),
        )
        .await
        .failed();
    assert_eq!(invalid.error.unwrap().status, Status::InvalidArgument);
    assert_eq!(rows(claims.as_ref()).await, 0);

    // Nor does one that asks to detach (client-held state cannot).
    let mut detached = approve();
    detached.detach = Some(true);
    let refused = agent.run(detached, AgentInit::state(state.clone())).await.failed();
    assert_eq!(refused.error.unwrap().status, Status::FailedPrecondition);
    assert_eq!(rows(claims.as_ref()).await, 0);

    model.push(ScriptedTurn::text("Done"));
    let done = agent.run(approve(), AgentInit::state(state.clone())).await.unwrap();
    assert_eq!(done.finish_reason, FinishReason::Stop, "{done:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(rows(claims.as_ref()).await, 1);
    let marker_id = format!("state-claim:{}", holdpoint::session::hash_json(&state));
    let marker = claims
        .get_snapshot(&marker_id)
        .await
        .unwrap()
        .expect("the claim marker");
    assert_eq!(marker.session_id, marker_id, "a session of its own");
    assert_eq!(marker.metadata.as_ref().unwrap()["sessionId"], json!(paused.session_id));
    assert_eq!(marker.agent.as_deref(), Some("bank"));
    assert!(marker.state.is_none(), "the marker holds no conversation");

    // The same state with the same approval again: refused, nothing runs or is written.
    model.push(ScriptedTurn::text("Done again"));
    let replay = agent.run(approve(), AgentInit::state(state.clone())).await.failed();
    assert_eq!(replay.finish_reason, FinishReason::Failed);
    let err = replay.error.unwrap();
    assert_eq!(err.status, Status::Aborted);
    assert!(err.message.contains("already resumed"), "{}", err.message);
    // Issue 33, item 8: it names the state's session, not the marker.
    assert!(
        err.message.contains(&format!(
            "client-held state of session {} was already resumed",
            paused.session_id
        )),
        "{}",
        err.message
    );
    assert!(!err.message.contains("state-claim:"), "{}", err.message);
    assert_eq!(replay.failure, Some(holdpoint::agent::FailureReason::AlreadyResumed));
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the approved transfer ran once");
    assert_eq!(rows(claims.as_ref()).await, 1);

    // A new message from the same state is not a resume: nothing to claim.
    let chat = agent
        .run(AgentInput::text("hello?"), AgentInit::state(state))
        .await
        .unwrap();
    assert_eq!(chat.finish_reason, FinishReason::Stop, "{chat:?}");
    assert_eq!(rows(claims.as_ref()).await, 1);
}

/// `value` with the keys of every object in reverse order and every
/// integer written as a float: the same state as a client that parses and
/// re-serialises it might send back.
fn reserialised(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(map.iter().rev().map(|(k, v)| (k.clone(), reserialised(v))).collect()),
        Value::Array(items) => Value::Array(items.iter().map(reserialised).collect()),
        Value::Number(n) if n.is_i64() || n.is_u64() => json!(n.as_f64().unwrap()),
        other => other.clone(),
    }
}

/// With the default codec (`JsonStateCodec`, unsigned), state claims hold
/// in process as over HTTP: the claim key is the hash of the state's
/// canonical JSON, so resuming the same state twice, re-serialised or not,
/// runs the approved call once.
#[tokio::test]
async fn the_default_codec_claims_client_held_state_so_a_replay_runs_nothing() {
    use holdpoint::{Resume, ScriptedModel, ScriptedTurn};
    use std::sync::atomic::{AtomicUsize, Ordering};

    let claims: Arc<dyn holdpoint::session::SessionStore> = Arc::new(InMemoryStore::new());
    let runs = Arc::new(AtomicUsize::new(0));
    let tool = crate::transfer_tool(Arc::clone(&runs));
    let model = ScriptedModel::new("m");
    let agent = Agent::builder("bank")
        .model(Arc::new(model.clone()))
        .tool(tool.clone())
        .build()
        .unwrap()
        .with_state_claims(Arc::clone(&claims));
    model.push(ScriptedTurn::tool_call(
        "transferMoney",
        json!({"amount": 500, "toAccount": "savings"}),
    ));
    let paused = agent.run_text("Transfer $500").await.unwrap();
    assert_eq!(paused.finish_reason, FinishReason::Interrupted);
    let state = paused.state.clone().unwrap();
    let approve = || AgentInput::resume(Resume::from_parts([crate::approve(&tool, &paused)]));

    model.push(ScriptedTurn::text("Done"));
    let done = agent.run(approve(), AgentInit::state(state.clone())).await.unwrap();
    assert_eq!(done.finish_reason, FinishReason::Stop, "{done:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(rows(claims.as_ref()).await, 1, "the resume left its claim marker");

    for (what, replayed) in [("as sent", state.clone()), ("re-serialised", reserialised(&state))] {
        assert_eq!(
            replayed == state,
            what == "as sent",
            "the re-serialised state differs as JSON ({what})"
        );
        model.push(ScriptedTurn::text("Done again"));
        let replay = agent.run(approve(), AgentInit::state(replayed)).await.failed();
        assert_eq!(replay.finish_reason, FinishReason::Failed, "{what}: {replay:?}");
        let err = replay.error.unwrap();
        assert_eq!(err.status, Status::Aborted, "{what}");
        assert!(err.message.contains("already resumed"), "{what}: {}", err.message);
        assert_eq!(runs.load(Ordering::SeqCst), 1, "{what}: the approved transfer ran once");
        assert_eq!(rows(claims.as_ref()).await, 1, "{what}: nothing more was written");
    }
}

/// Issue 32, finding 11: replaying client-held state runs nothing twice by
/// default (claims in memory); `without_state_claims` is the explicit
/// opt-out, and then a replay does run again.
#[tokio::test]
async fn a_replay_of_client_held_state_is_refused_by_default() {
    use holdpoint::{Resume, ScriptedModel, ScriptedTurn};
    use std::sync::atomic::{AtomicUsize, Ordering};

    let runs = Arc::new(AtomicUsize::new(0));
    let tool = crate::transfer_tool(Arc::clone(&runs));
    let model = ScriptedModel::new("m");
    let agent = Agent::builder("bank")
        .model(Arc::new(model.clone()))
        .tool(tool.clone())
        .build()
        .unwrap();
    model.push(ScriptedTurn::tool_call(
        "transferMoney",
        json!({"amount": 500, "toAccount": "savings"}),
    ));
    let paused = agent.run_text("Transfer $500").await.unwrap();
    let state = paused.state.clone().unwrap();
    let approve = || AgentInput::resume(Resume::from_parts([crate::approve(&tool, &paused)]));

    model.push(ScriptedTurn::text("done"));
    let first = agent.run(approve(), AgentInit::state(state.clone())).await.unwrap();
    assert_eq!(first.finish_reason, FinishReason::Stop);
    let replay = agent.run(approve(), AgentInit::state(state.clone())).await.failed();
    assert_eq!(replay.error.unwrap().status, Status::Aborted);
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the replay ran nothing");

    // Opted out: the caller guards replays itself.
    let unguarded = agent.without_state_claims();
    model.push(ScriptedTurn::text("done again"));
    let again = unguarded.run(approve(), AgentInit::state(state)).await.unwrap();
    assert_eq!(again.finish_reason, FinishReason::Stop);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}
