//! Background sub-agents (docs/reference.md §16.7): started detached,
//! checked, awaited (bounded), aborted, and collected by a parent rebuilt
//! on the same store; a settled task's result told to the parent's next
//! turn unasked, once.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use holdpoint::agent::subagent::BACKGROUND_TASK;
use holdpoint::agent::{Access, Agent, AgentInit, AgentInput, AgentOutput};
use holdpoint::middleware::ToolApproval;
use holdpoint::session::{SessionState, SessionStore, Snapshot, SnapshotQuery, SnapshotStatus};
use holdpoint::tool::{DynamicTool, ToolContext};
use holdpoint::{FinishReason, Message, Resume, Role, ScriptedModel, ScriptedTurn};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

/// The parent's model: `start X`, `check ID`, `wait ID`, `abort ID` call
/// the matching tool; a tool's output comes back as the reply text; any
/// other message is answered `"noted"`.
fn parent_model() -> ScriptedModel {
    ScriptedModel::from_fn("scripted/planner", |request, _| {
        let last = request.messages.last()?;
        if last.role == Role::Tool {
            let out = last.content[0].as_tool_response()?.output.clone()?;
            return Some(ScriptedTurn::text(out.to_string()));
        }
        let text = last.text();
        let Some((verb, arg)) = text.split_once(' ') else {
            return Some(ScriptedTurn::text("\"noted\""));
        };
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
    /// The parent's model (it records every request).
    planner: ScriptedModel,
    digs: Arc<AtomicUsize>,
}

/// A researcher whose `dig` takes `dig_time`; "hold" tasks ask for an
/// approved `publish` first.
fn bg_on(store: Arc<dyn SessionStore>, dig_time: Duration) -> Bg {
    bg_gated(store, dig_time, None)
}

/// [`bg_on`] whose `dig` also waits for a permit of `gate` when given.
fn bg_gated(store: Arc<dyn SessionStore>, dig_time: Duration, gate: Option<Arc<Semaphore>>) -> Bg {
    let digs = Arc::new(AtomicUsize::new(0));
    let d = Arc::clone(&digs);
    let dig = DynamicTool::new(
        "dig",
        "digs",
        json!({"type": "object"}),
        move |_c: ToolContext, v: Value| {
            d.fetch_add(1, Ordering::SeqCst);
            let gate = gate.clone();
            async move {
                if let Some(gate) = gate {
                    gate.acquire().await.unwrap().forget();
                }
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
    let planner = parent_model();
    let parent = Agent::builder("planner")
        .model(Arc::new(planner.clone()))
        .background_subagent(child.clone(), Duration::from_secs(20))
        .store(store)
        .build()
        .unwrap();
    Bg {
        parent,
        child,
        planner,
        digs,
    }
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

/// Starts a task in a new conversation: its session and the task id.
async fn start(bg: &Bg, topic: &str) -> (String, String) {
    let first = bg.parent.run_text(format!("start {topic}")).await.unwrap();
    let task = reply(&first)["taskId"].as_str().unwrap().to_owned();
    (first.session_id, task)
}

/// Polls the child's session until its latest row is `want` (bounded).
async fn until(child: &Agent, task: &str, want: impl Fn(&Snapshot) -> bool) {
    for _ in 0..200 {
        let latest = child.latest_snapshot(task, Access::Full).await.unwrap();
        if latest.as_ref().is_some_and(&want) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("task {task} never reached the state waited for");
}

/// Until the task finished (its row completed, not paused).
async fn until_done(child: &Agent, task: &str) {
    until(child, task, |s| {
        s.status == SnapshotStatus::Completed && !s.is_waiting()
    })
    .await;
}

/// A turn with a plain message (no tool call).
async fn note(agent: &Agent, session: &str, text: &str) {
    let out = agent
        .run(AgentInput::text(text), AgentInit::session(session))
        .await
        .unwrap();
    assert_eq!(out.text(), "\"noted\"", "{out:?}");
}

/// The `backgroundTask` metadata of the notices among `messages`.
fn notices(messages: &[Message]) -> Vec<Value> {
    messages
        .iter()
        .filter_map(|m| m.metadata.as_ref()?.get(BACKGROUND_TASK).cloned())
        .collect()
}

/// The messages of the parent model's last request.
fn last_request(bg: &Bg) -> Vec<Message> {
    bg.planner.requests().last().unwrap().messages.clone()
}

/// The messages of the parent session's latest snapshot.
async fn saved(parent: &Agent, session: &str) -> Vec<Message> {
    let latest = parent.latest_snapshot(session, Access::Full).await.unwrap().unwrap();
    latest.state.unwrap().messages
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
    let listed = bg.child.decisions().pending(SnapshotQuery::default()).await.unwrap();
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

/// A task that finishes while the parent is idle is told to the parent's
/// next turn, right before its message, without any check call; the
/// notice is saved with the turn and not told again.
pub async fn a_finished_task_is_told_to_the_next_turn_once(store: Arc<dyn SessionStore>) {
    let bg = bg_on(store, Duration::ZERO);
    let (session, task) = start(&bg, "rust").await;
    until_done(&bg.child, &task).await;
    note(&bg.parent, &session, "hello").await;
    let want = json!({"taskId": task, "agent": "researcher", "status": "done", "answer": "report: found rust"});
    let sent = last_request(&bg);
    let n = sent.len();
    assert_eq!(sent[n - 1].text(), "hello");
    assert_eq!(sent[n - 2].role, Role::User);
    assert_eq!(notices(&sent[n - 2..n - 1]), vec![want.clone()]);
    assert_eq!(
        sent[n - 2].text(),
        format!("Background task {task} (researcher) finished: report: found rust")
    );
    // The model message before the notice is the start call's answer.
    assert_eq!(sent[n - 3].role, Role::Model);
    let kept = saved(&bg.parent, &session).await;
    assert_eq!(notices(&kept), vec![want.clone()]);
    let at = kept.iter().position(|m| m.text() == "hello").unwrap();
    assert_eq!(notices(&kept[at - 1..at]), vec![want.clone()]);
    // Told once: the next turn carries the saved notice, and no new one.
    note(&bg.parent, &session, "again").await;
    assert_eq!(notices(&last_request(&bg)), vec![want.clone()]);
    assert_eq!(notices(&saved(&bg.parent, &session).await), vec![want]);
    assert_eq!(bg.digs.load(Ordering::SeqCst), 1);
}

/// A task whose final status a `wait` already gave the model is not told
/// (the child is held until the wait's turn is past its notice step, so
/// the wait, not a notice, collects it).
pub async fn a_collected_task_is_not_told(store: Arc<dyn SessionStore>) {
    let gate = Arc::new(Semaphore::new(0));
    let bg = bg_gated(store, Duration::ZERO, Some(Arc::clone(&gate)));
    let (session, task) = start(&bg, "rust").await;
    let asked = bg.planner.requests().len();
    let (parent, s, t) = (bg.parent.clone(), session.clone(), task.clone());
    let waiting = tokio::spawn(async move { say(&parent, &s, format!("wait {t}")).await });
    // The wait turn's first model call comes after its notice step.
    for _ in 0..200 {
        if bg.planner.requests().len() > asked {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        bg.planner.requests().len() > asked,
        "the wait turn never called its model"
    );
    gate.add_permits(1);
    let waited = waiting.await.unwrap();
    assert_eq!(waited["status"], "done", "{waited}");
    assert_eq!(notices(&last_request(&bg)), Vec::<Value>::new());
    note(&bg.parent, &session, "hello").await;
    assert_eq!(notices(&last_request(&bg)), Vec::<Value>::new());
    assert_eq!(notices(&saved(&bg.parent, &session).await), Vec::<Value>::new());
}

/// A task that settled before the turn that checks it is told in that
/// turn (before its message), and the check's report then keeps later
/// turns from telling it again.
pub async fn a_checked_task_is_told_at_most_once(store: Arc<dyn SessionStore>) {
    let bg = bg_on(store, Duration::ZERO);
    let (session, task) = start(&bg, "go").await;
    until_done(&bg.child, &task).await;
    let checked = say(&bg.parent, &session, format!("check {task}")).await;
    assert_eq!(checked["status"], "done", "{checked}");
    assert_eq!(notices(&saved(&bg.parent, &session).await).len(), 1);
    note(&bg.parent, &session, "hello").await;
    assert_eq!(notices(&saved(&bg.parent, &session).await).len(), 1);
}

/// A parent rebuilt on the same store (as after a restart) tells a task
/// that finished while no parent was around.
pub async fn a_rebuilt_parent_tells_a_task_that_finished_meanwhile(store: Arc<dyn SessionStore>) {
    let bg = bg_on(Arc::clone(&store), Duration::from_millis(100));
    let (session, task) = start(&bg, "topic").await;
    drop(bg.parent);
    until_done(&bg.child, &task).await;
    let again = bg_on(store, Duration::ZERO);
    note(&again.parent, &session, "back").await;
    let told = notices(&last_request(&again));
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!(told[0]["taskId"], task.as_str());
    assert_eq!(told[0]["answer"], "report: found topic");
    assert_eq!(notices(&saved(&again.parent, &session).await), told);
}

/// A task still running or paused is not told; once the paused one is
/// answered and finishes, it is (and the running one still is not).
pub async fn a_running_or_paused_task_is_not_told(store: Arc<dyn SessionStore>) {
    let bg = bg_on(store, Duration::from_secs(3600));
    let (session, slow) = start(&bg, "slow").await;
    let held = say(&bg.parent, &session, "start hold".into()).await;
    let held = held["taskId"].as_str().unwrap().to_owned();
    until(&bg.child, &held, Snapshot::is_waiting).await;
    until(&bg.child, &slow, |s| s.status == SnapshotStatus::Pending).await;
    note(&bg.parent, &session, "hello").await;
    assert_eq!(notices(&last_request(&bg)), Vec::<Value>::new());
    let listed = bg.child.decisions().pending(SnapshotQuery::default()).await.unwrap();
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
    note(&bg.parent, &session, "now").await;
    let told = notices(&last_request(&bg));
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!(told[0]["taskId"], held.as_str());
    assert_eq!(told[0]["answer"], "report: published");
    bg.child
        .abort(
            &bg.child
                .latest_snapshot(&slow, Access::Full)
                .await
                .unwrap()
                .unwrap()
                .snapshot_id,
            Access::Full,
        )
        .await
        .unwrap();
}

/// A task of another session is never told, even to a conversation whose
/// history names it (here a copy of the starting session's history).
pub async fn another_sessions_task_is_never_told(store: Arc<dyn SessionStore>) {
    let bg = bg_on(Arc::clone(&store), Duration::ZERO);
    let (session, task) = start(&bg, "rust").await;
    until_done(&bg.child, &task).await;
    let mut copy = Snapshot::new(SessionState {
        messages: saved(&bg.parent, &session).await,
        ..SessionState::new("copied")
    });
    copy.agent = Some("planner".into());
    copy.finish_reason = Some(FinishReason::Stop);
    store
        .save_snapshot(None, Box::new(move |_| Ok(Some(copy))))
        .await
        .unwrap()
        .unwrap();
    note(&bg.parent, "copied", "hello").await;
    assert_eq!(notices(&last_request(&bg)), Vec::<Value>::new());
    // A conversation that never started a task gets none either.
    note(&bg.parent, "fresh", "hello").await;
    assert_eq!(notices(&last_request(&bg)), Vec::<Value>::new());
    // The session that started it is told.
    note(&bg.parent, &session, "hello").await;
    assert_eq!(notices(&last_request(&bg)).len(), 1);
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
    a_finished_task_is_told_to_the_next_turn_once,
    a_collected_task_is_not_told,
    a_checked_task_is_told_at_most_once,
    a_rebuilt_parent_tells_a_task_that_finished_meanwhile,
    a_running_or_paused_task_is_not_told,
    another_sessions_task_is_never_told,
);
