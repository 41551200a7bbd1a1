//! The typed caller in process (docs/reference.md §5, §10.7): a run, an
//! approver's answer, the listings and the grants all take one
//! [`Caller`], with no hand-built request context.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use holdpoint::agent::{ACTOR, Agent, AgentInit, AgentInput, AgentOutput, Answer, Answered, Caller, RunOptions};
use holdpoint::approval::{GrantQuery, GrantRequest, GrantScope, Policy, ROLES, RuleSpec};
use holdpoint::session::{AuditDecision, AuditQuery, InMemoryStore, SnapshotQuery};
use holdpoint::tool::{DynamicTool, ToolContext};
use holdpoint::{FinishReason, ScriptedModel, ScriptedTurn, Status};
use serde_json::{Value, json};

struct Setup {
    agent: Agent,
    /// Bills really paid.
    paid: Arc<AtomicUsize>,
    /// The request context `payBill` saw on its last run.
    seen: Arc<std::sync::Mutex<Option<Value>>>,
}

/// `payBill` is held for `finance`, never its owner; the user's message is
/// the amount.
fn setup() -> Setup {
    let paid = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(std::sync::Mutex::new(None));
    let (counter, saw) = (Arc::clone(&paid), Arc::clone(&seen));
    let pay = DynamicTool::new(
        "payBill",
        "pays a bill",
        json!({"type": "object"}),
        move |ctx: ToolContext, input: Value| {
            let (counter, saw) = (Arc::clone(&counter), Arc::clone(&saw));
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                *saw.lock().unwrap() = Some(Value::Object(ctx.request_context().clone()));
                Ok(json!({"paid": input["amount"]}))
            }
        },
    )
    .into_tool();
    let model = ScriptedModel::from_fn("scripted/caller", |request, _| {
        let last = request.messages.last()?;
        if last.role == holdpoint::Role::Tool {
            return Some(ScriptedTurn::text("done"));
        }
        let amount: u64 = last.text().trim().parse().ok()?;
        Some(ScriptedTurn::tool_call("payBill", json!({"amount": amount})))
    });
    let policy = Policy::new([RuleSpec {
        name: Some("bills".into()),
        tool: Some("payBill".into()),
        approvers: vec!["finance".into()],
        quorum: 1,
        self_approval: false,
        ..RuleSpec::default()
    }])
    .unwrap();
    let agent = Agent::builder("payer")
        .model(Arc::new(model))
        .tools([pay])
        .approval_policy(policy)
        .store(Arc::new(InMemoryStore::new()))
        .build()
        .unwrap();
    Setup { agent, paid, seen }
}

async fn ask_as(s: &Setup, caller: Caller, amount: u64) -> AgentOutput {
    let options = RunOptions::new(AgentInit::new()).caller(caller);
    s.agent
        .run_with(AgentInput::text(amount.to_string()), options)
        .await
        .unwrap()
}

fn fiona() -> Caller {
    Caller::new("fiona").with_roles(["finance"]).acting_as("Fiona F.")
}

#[tokio::test]
async fn a_typed_caller_runs_lists_answers_and_manages_grants_in_process() {
    let s = setup();
    let alice = Caller::new("alice").with_context("tenant", json!("t1"));
    let out = ask_as(&s, alice.clone(), 50).await;
    assert_eq!(out.finish_reason, FinishReason::Interrupted);
    let id = out.snapshot_id.clone().unwrap();

    // The session is alice's: she reads it with her caller, bob does not.
    let latest = s.agent.latest_snapshot(&out.session_id, &alice).await.unwrap().unwrap();
    assert_eq!(latest.owner.as_deref(), Some("alice"));
    let bob = Caller::new("bob");
    assert!(s.agent.latest_snapshot(&out.session_id, &bob).await.unwrap().is_none());
    assert!(s.agent.snapshot(&id, &bob).await.unwrap().is_none());
    let waited = s.agent.wait_for_snapshot(&id, &alice, Duration::ZERO).await.unwrap();
    assert_eq!(waited.map(|w| w.snapshot_id), Some(id.clone()));
    assert_eq!(s.agent.abort(&id, &bob).await.unwrap(), None, "bob cannot abort it");
    assert!(
        s.agent
            .decisions()
            .in_doubt_for(SnapshotQuery::default(), &fiona())
            .await
            .unwrap()
            .is_empty()
    );

    // Listings with the caller's access: alice (her own), fiona (her
    // rule's), bob (nothing).
    let listed = |c: Caller| {
        let agent = s.agent.clone();
        async move {
            agent
                .decisions()
                .pending_for(SnapshotQuery::default(), &c)
                .await
                .unwrap()
                .into_iter()
                .map(|p| p.snapshot_id)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(listed(alice.clone()).await, [id.as_str()]);
    assert_eq!(listed(fiona()).await, [id.as_str()]);
    assert!(listed(bob.clone()).await.is_empty());

    // The owner is excluded by the rule, whatever her roles.
    let err = s
        .agent
        .decisions()
        .answer(Answer::approve(&id), alice.clone().with_roles(["finance"]))
        .await
        .unwrap_err();
    assert_eq!(err.status(), Status::PermissionDenied, "{err}");
    assert!(err.to_string().contains("bills"), "{err}");
    assert_eq!(s.paid.load(Ordering::SeqCst), 0);

    // Fiona approves, with a standing grant for alice's session.
    let grant = GrantRequest {
        scope: GrantScope::Session,
        when: None,
        ttl: None,
        uses: None,
    };
    let answered = s
        .agent
        .decisions()
        .answer(Answer::approve(&id).grant(grant), &fiona())
        .await
        .unwrap();
    let Answered::Granted { output, grant } = answered else {
        panic!("an approval with a grant resumes and grants")
    };
    assert_eq!(output.finish_reason, FinishReason::Stop);
    assert_eq!(s.paid.load(Ordering::SeqCst), 1);
    assert_eq!(grant.granted_by, "Fiona F.", "the actor grants");

    // The call ran as alice's, with fiona's display name as the actor; the
    // audit trail says the same.
    let ran_with = s.seen.lock().unwrap().clone().unwrap();
    assert_eq!(ran_with["principal"], "alice");
    assert_eq!(ran_with[ACTOR], "Fiona F.");
    assert_eq!(ran_with[ROLES], json!(["finance"]));
    let trail = s
        .agent
        .decisions()
        .audit(AuditQuery {
            session_id: Some(out.session_id.clone()),
            ..AuditQuery::default()
        })
        .await
        .unwrap();
    let approved: Vec<_> = trail.iter().filter(|r| r.decision == AuditDecision::Approve).collect();
    assert_eq!(approved.len(), 1, "{trail:?}");
    assert_eq!(approved[0].actor.as_deref(), Some("Fiona F."));
    assert_eq!(approved[0].principal.as_deref(), Some("alice"));

    // Grants, listed with a caller: fiona (an approver of its rule) sees
    // it, alice (excluded from answering) and bob do not.
    let grants = |c: Caller| {
        let agent = s.agent.clone();
        async move {
            agent
                .decisions()
                .grants(GrantQuery::default(), &c)
                .await
                .unwrap()
                .into_iter()
                .map(|g| g.id)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(grants(fiona()).await, [grant.id.as_str()]);
    assert!(grants(alice.clone()).await.is_empty());
    assert!(grants(bob.clone()).await.is_empty());
    // Bob may not revoke it (it does not exist for him); fiona may.
    let err = s.agent.decisions().revoke_grant(&grant.id, &bob).await.unwrap_err();
    assert_eq!(err.status(), Status::NotFound);
    let revoked = s.agent.decisions().revoke_grant(&grant.id, fiona()).await.unwrap();
    assert_eq!(revoked.revoked_by.as_deref(), Some("Fiona F."));

    // Nothing waits now: the listings are empty for everyone.
    assert!(listed(fiona()).await.is_empty());
    assert!(listed(alice).await.is_empty());
}

#[tokio::test]
async fn run_options_take_roles_and_a_caller_replaces_who_acts() {
    let s = setup();
    // `.roles` beside `.principal`: the same context as the typed caller.
    let pieces = RunOptions::new(AgentInit::new())
        .principal("fiona")
        .roles(["finance"])
        .context;
    assert_eq!(
        Caller::from_context(&pieces),
        Caller::new("fiona").with_roles(["finance"])
    );
    // A caller replaces the principal, roles and actor set before, and
    // keeps other entries.
    let options = RunOptions::new(AgentInit::new())
        .principal("mallory")
        .roles(["operator"])
        .with_context("tenant", json!("t1"))
        .caller(Caller::new("alice"));
    assert_eq!(
        Value::Object(options.context.clone()),
        json!({"tenant": "t1", "principal": "alice"})
    );

    let out = s.agent.run_with(AgentInput::text("70"), options).await.unwrap();
    let latest = s.agent.latest(&out.session_id).await.unwrap().unwrap();
    assert_eq!(latest.owner.as_deref(), Some("alice"));
    assert_eq!(Some(latest.snapshot_id), out.snapshot_id);
    // The short form reads as the agent's own process: every owner's.
    assert!(s.agent.latest("no-such-session").await.unwrap().is_none());

    // An approver resumes the held call with a run of her own, the
    // roles set on the options.
    let part = out.interrupts()[0]
        .restart(Some(json!({"toolApproved": true})))
        .unwrap();
    let resume = RunOptions::new(AgentInit::snapshot(out.snapshot_id.clone().unwrap()))
        .principal("fiona")
        .roles(["finance"]);
    let done = s
        .agent
        .run_with(AgentInput::resume(holdpoint::Resume::from_parts([part])), resume)
        .await
        .unwrap();
    assert_eq!(done.finish_reason, FinishReason::Stop);
    assert_eq!(s.paid.load(Ordering::SeqCst), 1);
    let ran_with = s.seen.lock().unwrap().clone().unwrap();
    assert_eq!(
        (ran_with["principal"].as_str(), ran_with[ACTOR].as_str()),
        (Some("alice"), Some("fiona"))
    );
}
