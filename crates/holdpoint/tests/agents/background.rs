//! Background sub-agents (docs/reference.md §16.7): started detached,
//! checked, awaited (bounded), aborted, and collected by a parent rebuilt
//! on the same store.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use holdpoint::agent::{Agent, AgentInit, AgentInput, AgentOutput};
use holdpoint::middleware::ToolApproval;
use holdpoint::session::{SessionStore, SnapshotQuery};
use holdpoint::tool::{DynamicTool, ToolContext};
use holdpoint::{FinishReason, Resume, Role, ScriptedModel, ScriptedTurn};
use serde_json::{Value, json};

/// The parent's model: `start X`, `check ID`, `wait ID`, `abort ID` call
/// the matching tool; a tool's output comes back as the reply text.
fn parent_model() -> ScriptedModel {
    ScriptedModel::from_fn("scripted/planner", |request, _| {
        let last = request.messages.last()?;
        if last.role == Role::Tool {
            let out = last.content[0].as_tool_response()?.output.clone()?;
            return Some(ScriptedTurn::text(out.to_string()));
        }
        let text = last.text();
        let (verb, arg) = text.split_once(' ')?;
        let input = match verb {
            "start" => json!({"input": arg}),
            "wait" => json!({"taskId": arg, "timeoutMs": 20_000}),
            _ => json!({"taskId": arg}),
        };
        Some(ScriptedTurn::tool_call(format!("researcher_{verb}"), input))
    })
}

struct Bg {
    parent: Agent,
    child: Agent,
    digs: Arc<AtomicUsize>,
}

/// A researcher whose `dig` takes `dig_time`; "hold" tasks ask for an
/// approved `publish` first.
fn bg_on(store: Arc<dyn SessionStore>, dig_time: Duration) -> Bg {
    let digs = Arc::new(AtomicUsize::new(0));
    let d = Arc::clone(&digs);
    let dig = DynamicTool::new(
        "dig",
        "digs",
        json!({"type": "object"}),
        move |_c: ToolContext, v: Value| {
            d.fetch_add(1, Ordering::SeqCst);
            async move {
                tokio::time::sleep(dig_time).await;
                Ok(json!(format!("found {}", v["topic"].as_str().unwrap_or("?"))))
            }
        },
    )
    .into_tool();
    let publish = DynamicTool::new("publish", "publishes", json!({"type": "object"}), |_c, _v| async move {
        Ok(json!("published"))
    })
    .into_tool();
    let model = ScriptedModel::from_fn("scripted/researcher", |request, _| {
        let last = request.messages.last()?;
        if last.role == Role::Tool {
            let out = last.content[0].as_tool_response()?.output.clone()?;
            return Some(ScriptedTurn::text(format!("report: {}", out.as_str().unwrap_or("?"))));
        }
        let text = last.text();
        if text == "hold" {
            return Some(ScriptedTurn::tool_call("publish", json!({})));
        }
        Some(ScriptedTurn::tool_call("dig", json!({"topic": text})))
    });
    let child = Agent::builder("researcher")
        .model(Arc::new(model))
        .tools(vec![dig, publish])
        .middleware(ToolApproval::allow(["dig"]).into_middleware())
        .store(Arc::clone(&store))
        .heartbeat(Duration::from_millis(100))
        .build()
        .unwrap();
    let parent = Agent::builder("planner")
        .model(Arc::new(parent_model()))
        .background_subagent(child.clone(), Duration::from_secs(20))
        .store(store)
        .build()
        .unwrap();
    Bg { parent, child, digs }
}

fn reply(out: &AgentOutput) -> Value {
    assert_eq!(out.finish_reason, FinishReason::Stop, "{out:?}");
    serde_json::from_str(&out.text()).unwrap()
}

async fn say(agent: &Agent, session: &str, text: String) -> Value {
    reply(
        &agent
            .run(AgentInput::text(text), AgentInit::session(session))
            .await
            .unwrap(),
    )
}

/// Started, checked while running, awaited, checked when done; an id
/// that is not this conversation's task reads as unknown.
pub async fn started_checked_and_awaited(store: Arc<dyn SessionStore>) {
    let bg = bg_on(store, Duration::from_millis(300));
    let first = bg.parent.run_text("start rust").await.unwrap();
    let session = first.session_id.clone();
    let started = reply(&first);
    let task = started["taskId"].as_str().unwrap().to_owned();
    let checked = say(&bg.parent, &session, format!("check {task}")).await;
    assert!(
        matches!(checked["status"].as_str(), Some("running" | "done")),
        "{checked}"
    );
    let waited = say(&bg.parent, &session, format!("wait {task}")).await;
    assert_eq!(waited["status"], "done", "{waited}");
    assert_eq!(waited["answer"], "report: found rust");
    let checked = say(&bg.parent, &session, format!("check {task}")).await;
    assert_eq!(checked["answer"], "report: found rust");
    assert_eq!(bg.digs.load(Ordering::SeqCst), 1);
    // Another conversation cannot read it.
    let other = bg.parent.run_text(format!("check {task}")).await.unwrap();
    assert!(other.text().contains("no background task"), "{}", other.text());
}

/// Aborting a running background child stops it.
pub async fn aborted_while_running(store: Arc<dyn SessionStore>) {
    let bg = bg_on(store, Duration::from_secs(3600));
    let first = bg.parent.run_text("start slow").await.unwrap();
    let session = first.session_id.clone();
    let task = reply(&first)["taskId"].as_str().unwrap().to_owned();
    let aborted = say(&bg.parent, &session, format!("abort {task}")).await;
    assert_eq!(aborted["aborted"], true, "{aborted}");
    assert_eq!(aborted["status"], "aborted", "{aborted}");
}

/// A background child's hold is listed on the child and answered there;
/// the parent then collects the answer.
pub async fn a_paused_background_child_is_answered_on_its_agent(store: Arc<dyn SessionStore>) {
    let bg = bg_on(store, Duration::ZERO);
    let first = bg.parent.run_text("start hold").await.unwrap();
    let session = first.session_id.clone();
    let task = reply(&first)["taskId"].as_str().unwrap().to_owned();
    let waited = say(&bg.parent, &session, format!("wait {task}")).await;
    assert_eq!(waited["status"], "paused", "{waited}");
    let listed = bg.child.pending(SnapshotQuery::default()).await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:#?}");
    let approve = ToolApproval::interrupted(&listed[0].part)
        .unwrap()
        .approve(None)
        .unwrap();
    let done = bg
        .child
        .run(
            AgentInput::resume(Resume::from_parts([approve])),
            AgentInit::snapshot(listed[0].snapshot_id.clone()),
        )
        .await
        .unwrap();
    assert_eq!(done.finish_reason, FinishReason::Stop);
    let checked = say(&bg.parent, &session, format!("check {task}")).await;
    assert_eq!(checked["answer"], "report: published", "{checked}");
}

/// A child that finishes while its parent is gone is collected by a
/// parent rebuilt on the same store (a new process).
pub async fn finished_after_the_parent_restarted(store: Arc<dyn SessionStore>) {
    let bg = bg_on(Arc::clone(&store), Duration::from_millis(200));
    let first = bg.parent.run_text("start topic").await.unwrap();
    let session = first.session_id.clone();
    let task = reply(&first)["taskId"].as_str().unwrap().to_owned();
    drop(bg.parent);
    // The child finishes with no parent around.
    let mut done = false;
    for _ in 0..100 {
        let latest = bg
            .child
            .latest_snapshot(&task, holdpoint::agent::Access::Full)
            .await
            .unwrap();
        if latest.is_some_and(|s| s.status == holdpoint::session::SnapshotStatus::Completed) {
            done = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(done, "the child finished");
    let again = bg_on(store, Duration::ZERO);
    let checked = say(&again.parent, &session, format!("check {task}")).await;
    assert_eq!(checked["status"], "done", "{checked}");
    assert_eq!(checked["answer"], "report: found topic");
}

macro_rules! on_every_store {
    ($($case:ident),* $(,)?) => {
        mod memory {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                super::$case(std::sync::Arc::new(holdpoint::session::InMemoryStore::new())).await;
            })*
        }
        mod sqlite {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let dir = tempfile::tempdir().unwrap();
                let url = format!("sqlite:{}", dir.path().join("background.db").display());
                let store = holdpoint_stores::open_store(&url).await.unwrap();
                super::$case(store).await;
            })*
        }
        mod postgres {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let Some(pg) = holdpoint_testkit::TempPostgres::start_or_skip(concat!("background ", stringify!($case))) else {
                    return;
                };
                let store = holdpoint_stores::open_store(pg.url()).await.unwrap();
                super::$case(store).await;
            })*
        }
    };
}

on_every_store!(
    started_checked_and_awaited,
    aborted_while_running,
    a_paused_background_child_is_answered_on_its_agent,
    finished_after_the_parent_restarted,
);
