//! ToolApproval through a store: every decision kind lands in the store's
//! audit trail, and pending approvals are listed from the store with their
//! filters (docs/reference.md §11.1, §11.2).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use holdpoint::agent::{Agent, AgentInit, AgentInput, AgentOutput, PRINCIPAL, RunOptions};
use holdpoint::middleware::{TOOL_APPROVAL, ToolApproval};
use holdpoint::session::{AuditDecision, AuditQuery, SessionStore, SnapshotQuery};
use holdpoint::tool::{DynamicTool, ToolContext};
use holdpoint::{FinishReason, Part, Resume, Role, ScriptedModel, ScriptedTurn};
use serde_json::{Map, Value, json};

use super::capable::audit;
use super::fresh_id;

/// An agent named `name` on `store` whose model asks `closeAccount` to
/// close the account the user names, behind ToolApproval (with `ttl`).
fn gated(name: &str, store: Arc<dyn SessionStore>, ttl: Option<Duration>, runs: &Arc<AtomicUsize>) -> Agent {
    let counter = Arc::clone(runs);
    let close = DynamicTool::new(
        "closeAccount",
        "closes an account",
        json!({"type": "object"}),
        move |_ctx: ToolContext, input: Value| {
            let counter = Arc::clone(&counter);
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                Ok(json!({"closed": input["account"]}))
            }
        },
    )
    .into_tool();
    let model = ScriptedModel::from_fn("scripted/approvals", |request, _| {
        let last = request.messages.last()?;
        if last.role == Role::Tool {
            return Some(ScriptedTurn::text("noted"));
        }
        Some(ScriptedTurn::tool_call("closeAccount", json!({"account": last.text()})))
    });
    let mut gate = ToolApproval::allow(Vec::<String>::new());
    if let Some(ttl) = ttl {
        gate = gate.ttl(ttl);
    }
    Agent::builder(name)
        .model(Arc::new(model))
        .tools([close])
        .middleware(gate.into_middleware())
        .store(store)
        .build()
        .expect("the agent builds")
}

fn as_principal(principal: &str) -> Map<String, Value> {
    let mut context = Map::new();
    context.insert(PRINCIPAL.into(), json!(principal));
    context
}

async fn hold(agent: &Agent, principal: &str, account: &str) -> AgentOutput {
    let out = agent
        .run_with(
            AgentInput::text(account),
            RunOptions::new(AgentInit::new()).context(as_principal(principal)),
        )
        .await
        .expect("the turn runs");
    assert_eq!(out.finish_reason, FinishReason::Interrupted, "{out:?}");
    out
}

async fn answer(agent: &Agent, principal: &str, held: &AgentOutput, part: Part) -> AgentOutput {
    let input = AgentInput::resume(Resume::from_parts([part]));
    let snapshot = held.snapshot_id.clone().expect("a stored snapshot");
    agent
        .run_with(
            input,
            RunOptions::new(AgentInit::snapshot(snapshot)).context(as_principal(principal)),
        )
        .await
        .expect("the resume runs")
}

/// Approve, deny, respond and an answer after expiry each leave one audit
/// row in the store, with principal, tool, ref, input hash and reason;
/// pending approvals are listed from the store per agent, owner and
/// session, and answered ones leave the listing.
pub async fn approval_decisions_are_audited_and_pending_is_listed(store: Arc<dyn SessionStore>) {
    let name = fresh_id("approvals");
    let runs = Arc::new(AtomicUsize::new(0));
    let agent = gated(&name, Arc::clone(&store), None, &runs);

    let a = hold(&agent, "alice", "a-1").await;
    let b = hold(&agent, "alice", "a-2").await;
    let c = hold(&agent, "bob", "b-1").await;
    let all = agent
        .decisions()
        .pending(SnapshotQuery::default())
        .await
        .expect("pending lists");
    assert_eq!(all.len(), 3, "{all:#?}");
    assert!(all.iter().all(|p| p.interrupted_by.as_deref() == Some(TOOL_APPROVAL)));
    let alice = SnapshotQuery {
        owner: Some("alice".into()),
        ..SnapshotQuery::default()
    };
    assert_eq!(agent.decisions().pending(alice).await.expect("pending lists").len(), 2);
    let one = SnapshotQuery {
        session_id: Some(c.session_id.clone()),
        ..SnapshotQuery::default()
    };
    let listed = agent.decisions().pending(one).await.expect("pending lists");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].input, json!({"account": "b-1"}));
    assert_eq!(listed[0].owner.as_deref(), Some("bob"));

    let hold_of = |out: &AgentOutput| ToolApproval::interrupted(&out.interrupts()[0]).expect("our hold");
    let approved = answer(
        &agent,
        "alice",
        &a,
        hold_of(&a).approve(Some("checked")).expect("approve"),
    )
    .await;
    assert_eq!(approved.finish_reason, FinishReason::Stop, "{approved:?}");
    answer(&agent, "alice", &b, hold_of(&b).deny(Some("fraud")).expect("deny")).await;
    answer(
        &agent,
        "bob",
        &c,
        c.interrupts()[0]
            .respond(json!({"closed": "by hand"}))
            .expect("respond"),
    )
    .await;
    assert_eq!(runs.load(Ordering::SeqCst), 1, "only the approved call ran");
    assert!(
        agent
            .decisions()
            .pending(SnapshotQuery::default())
            .await
            .expect("pending lists")
            .is_empty()
    );

    // An answer after the hold expired.
    let late_name = fresh_id("approvals-ttl");
    let late = gated(&late_name, Arc::clone(&store), Some(Duration::from_millis(50)), &runs);
    let d = hold(&late, "carol", "c-1").await;
    assert!(d.interrupts()[0].expires_at().is_some());
    tokio::time::sleep(Duration::from_millis(120)).await;
    let listed = late
        .decisions()
        .pending(SnapshotQuery::default())
        .await
        .expect("pending lists");
    assert!(listed[0].expired, "{listed:#?}");
    answer(&late, "carol", &d, hold_of(&d).approve(None).expect("approve")).await;
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "an expired approval does not run the tool"
    );

    let trail = audit(&*store)
        .list_audit(&AuditQuery {
            agent: Some(name.clone()),
            ..AuditQuery::default()
        })
        .await
        .expect("list_audit");
    let got: Vec<(AuditDecision, Option<&str>, Option<&str>)> = trail
        .iter()
        .map(|r| (r.decision, r.principal.as_deref(), r.reason.as_deref()))
        .collect();
    assert_eq!(
        got,
        [
            (AuditDecision::Respond, Some("bob"), None),
            (AuditDecision::Deny, Some("alice"), Some("fraud")),
            (AuditDecision::Approve, Some("alice"), Some("checked")),
        ],
        "{trail:#?}"
    );
    for r in &trail {
        assert_eq!(r.tool, "closeAccount");
        assert!(r.reference.is_some());
        assert_eq!(r.input_hash.len(), 64);
        assert_eq!(r.agent.as_deref(), Some(name.as_str()));
    }
    let late_trail = audit(&*store)
        .list_audit(&AuditQuery {
            agent: Some(late_name),
            ..AuditQuery::default()
        })
        .await
        .expect("list_audit");
    assert_eq!(late_trail.len(), 1);
    assert_eq!(late_trail[0].decision, AuditDecision::Expired);
    assert_eq!(late_trail[0].principal.as_deref(), Some("carol"));
}
