//! Standing grants (docs/reference.md §10.9): an approver's "approve, and
//! don't ask again" lets later matching calls run without a hold, audited
//! with the grant; its scope, condition, uses and revocation bound it; a
//! quorum rule always holds; only an authorised approver creates one.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use chrono::Utc;
use holdpoint::agent::{Agent, AgentInit, AgentInput, AgentOutput, Answer, Answered, RunOptions};
use holdpoint::approval::{Grant, GrantQuery, GrantRequest, GrantScope, Policy, RuleSpec};
use holdpoint::session::{AuditQuery, InMemoryStore, SessionStore};
use holdpoint::tool::{DynamicTool, ToolContext};
use holdpoint::{Error, FinishReason, ScriptedModel, ScriptedTurn};
use serde_json::{Map, Value, json};

struct Setup {
    agent: Agent,
    store: Arc<InMemoryStore>,
    /// Bills really paid.
    paid: Arc<AtomicUsize>,
}

/// `payBill` is held for `finance` (never its owner); over 10 000 it needs
/// two approvers; under 10 it is `legal`'s. The user's message is the amount.
fn setup() -> Setup {
    let paid = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&paid);
    let pay = DynamicTool::new(
        "payBill",
        "pays a bill",
        json!({"type": "object"}),
        move |_ctx: ToolContext, input: Value| {
            let counter = Arc::clone(&counter);
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                Ok(json!({"paid": input["amount"]}))
            }
        },
    )
    .into_tool();
    let model = ScriptedModel::from_fn("scripted/grants", |request, _| {
        let last = request.messages.last()?;
        if last.role == holdpoint::Role::Tool {
            return Some(ScriptedTurn::text("done"));
        }
        let amount: u64 = last.text().trim().parse().ok()?;
        Some(ScriptedTurn::tool_call("payBill", json!({"amount": amount})))
    });
    let rule = |name: &str, when: Option<&str>, quorum| RuleSpec {
        name: Some(name.into()),
        tool: Some("payBill".into()),
        when: when.map(str::to_owned),
        approvers: vec![if name == "tiny bills" { "legal" } else { "finance" }.into()],
        quorum,
        self_approval: false,
        ..RuleSpec::default()
    };
    let policy = Policy::new([
        rule("tiny bills", Some("input.amount < 10"), 1),
        rule("big bills", Some("input.amount > 10000"), 2),
        rule("bills", None, 1),
    ])
    .unwrap();
    let store = Arc::new(InMemoryStore::new());
    let agent = Agent::builder("payer")
        .model(Arc::new(model))
        .tools([pay])
        .approval_policy(policy)
        .store(store.clone())
        .build()
        .unwrap();
    Setup { agent, store, paid }
}

fn who(principal: &str, roles: &[&str]) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("principal".into(), json!(principal));
    m.insert("roles".into(), json!(roles));
    m
}

/// `owner` says `amount` in `session` (a new one when `None`).
async fn ask(s: &Setup, owner: &str, session: Option<&str>, amount: u64) -> AgentOutput {
    let init = match session {
        Some(id) => AgentInit::session(id),
        None => AgentInit::new(),
    };
    let options = RunOptions::new(init).principal(owner);
    s.agent
        .run_with(AgentInput::text(amount.to_string()), options)
        .await
        .unwrap()
}

fn held(out: &AgentOutput) -> bool {
    out.finish_reason == FinishReason::Interrupted
}

fn request(scope: GrantScope) -> GrantRequest {
    GrantRequest {
        scope,
        when: None,
        ttl: None,
        uses: None,
    }
}

/// Alice's held bill of `amount`, approved by olga (finance) with `grant`.
async fn granted(s: &Setup, amount: u64, grant: GrantRequest) -> (AgentOutput, Grant) {
    let out = ask(s, "alice", None, amount).await;
    assert!(held(&out));
    let id = out.snapshot_id.clone().unwrap();
    let answered = s
        .agent
        .decisions()
        .answer(Answer::approve(id).grant(grant), who("olga", &["finance"]))
        .await
        .unwrap();
    let Answered::Granted { output, grant } = answered else {
        panic!("an approval with a grant resumes and grants")
    };
    assert_eq!(output.finish_reason, FinishReason::Stop);
    (*output, *grant)
}

#[tokio::test]
async fn a_grant_lets_the_next_matching_call_run_without_a_hold_and_is_audited() {
    let s = setup();
    let (first, grant) = granted(&s, 50, request(GrantScope::Session)).await;
    assert_eq!((grant.granted_by.as_str(), grant.scope), ("olga", GrantScope::Session));
    assert_eq!(s.paid.load(Ordering::SeqCst), 1);

    let next = ask(&s, "alice", Some(&first.session_id), 60).await;
    assert_eq!(next.finish_reason, FinishReason::Stop, "no hold: the grant stands in");
    assert_eq!(s.paid.load(Ordering::SeqCst), 2);
    let trail = s
        .store
        .capabilities()
        .audit()
        .unwrap()
        .list_audit(&AuditQuery {
            session_id: Some(first.session_id.clone()),
            ..AuditQuery::default()
        })
        .await
        .unwrap();
    let used: Vec<_> = trail.iter().filter(|r| r.grant.is_some()).collect();
    assert_eq!(used.len(), 1, "{trail:?}");
    let row = used[0];
    assert_eq!(
        row.grant.as_ref().map(|g| (g.id.as_str(), g.granted_by.as_str())),
        Some((grant.id.as_str(), "olga"))
    );
    assert_eq!(row.actor.as_deref(), Some("olga"));
    assert_eq!(row.principal.as_deref(), Some("alice"));
    assert_eq!(row.tool, "payBill");
    let stored = s
        .store
        .capabilities()
        .grants()
        .unwrap()
        .get_grant(&grant.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.used, 1);
}

#[tokio::test]
async fn a_session_grant_does_not_leak_and_a_principal_grant_stays_with_its_principal() {
    let s = setup();
    let (_, _) = granted(&s, 50, request(GrantScope::Session)).await;
    assert!(
        held(&ask(&s, "alice", None, 60).await),
        "another session of alice's is held"
    );

    let s = setup();
    let _ = granted(&s, 50, request(GrantScope::Principal)).await;
    assert!(!held(&ask(&s, "alice", None, 60).await), "alice's other session runs");
    assert!(held(&ask(&s, "bob", None, 60).await), "bob's is held");

    let s = setup();
    let _ = granted(&s, 50, request(GrantScope::Tool)).await;
    assert!(!held(&ask(&s, "bob", None, 60).await), "a tool grant covers everyone's");
}

#[tokio::test]
async fn revoking_a_grant_stops_it_at_once() {
    let s = setup();
    let (first, grant) = granted(&s, 50, request(GrantScope::Session)).await;
    assert!(!held(&ask(&s, "alice", Some(&first.session_id), 60).await));
    s.store
        .capabilities()
        .grants()
        .unwrap()
        .revoke_grant(&grant.id, "pete", Utc::now())
        .await
        .unwrap()
        .unwrap();
    assert!(
        held(&ask(&s, "alice", Some(&first.session_id), 70).await),
        "held again once revoked"
    );
    assert_eq!(s.paid.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn uses_run_out_and_conditions_narrow_a_grant() {
    let s = setup();
    let grant = GrantRequest {
        uses: Some(1),
        when: Some("input.amount < 100".into()),
        ..request(GrantScope::Session)
    };
    let (first, _) = granted(&s, 50, grant).await;
    let session = Some(first.session_id.as_str());
    assert!(held(&ask(&s, "alice", session, 500).await), "the condition is not met");
    let held_id = s
        .agent
        .latest_snapshot(&first.session_id, holdpoint::agent::Access::Full)
        .await
        .unwrap()
        .unwrap();
    let Answered::Resumed(_) = s
        .agent
        .decisions()
        .answer(Answer::deny(held_id.snapshot_id, None), who("olga", &["finance"]))
        .await
        .unwrap()
    else {
        panic!("the denial resumes")
    };
    assert!(!held(&ask(&s, "alice", session, 60).await), "the one use");
    assert!(held(&ask(&s, "alice", session, 70).await), "used up");
    let active = s
        .store
        .capabilities()
        .grants()
        .unwrap()
        .list_grants(&GrantQuery {
            active_at: Some(Utc::now()),
            ..GrantQuery::default()
        })
        .await
        .unwrap();
    assert!(active.is_empty());
}

#[tokio::test]
async fn a_grant_stands_in_only_for_the_rule_it_was_given_under() {
    let s = setup();
    let _ = granted(&s, 50, request(GrantScope::Tool)).await;
    let small = ask(&s, "alice", None, 5).await;
    assert!(held(&small), "legal's rule: finance's grant does not answer for it");
    assert!(!held(&ask(&s, "alice", None, 70).await), "finance's own rule");
}

#[tokio::test]
async fn a_quorum_rule_beats_a_grant() {
    let s = setup();
    let _ = granted(&s, 50, request(GrantScope::Tool)).await;
    assert!(held(&ask(&s, "alice", None, 20_000).await), "two approvers are needed");
    // Nor can a grant be made from a quorum's hold.
    let out = ask(&s, "bob", None, 30_000).await;
    let err = s
        .agent
        .decisions()
        .answer(
            Answer::approve(out.snapshot_id.clone().unwrap()).grant(request(GrantScope::Tool)),
            who("olga", &["finance"]),
        )
        .await
        .expect_err("refused");
    assert!(matches!(err, Error::FailedPrecondition(_)), "{err}");
    let row = s
        .store
        .get_snapshot(out.snapshot_id.as_deref().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert!(row.approvals.is_empty() && row.resumed_at.is_none(), "nothing written");
}

#[tokio::test]
async fn only_an_authorised_approver_creates_a_grant_and_bad_ones_change_nothing() {
    let s = setup();
    let out = ask(&s, "alice", None, 50).await;
    let id = out.snapshot_id.clone().unwrap();
    let grant = || Answer::approve(id.clone()).grant(request(GrantScope::Tool));
    let err = s
        .agent
        .decisions()
        .answer(grant(), who("mallory", &["support"]))
        .await
        .expect_err("no role");
    assert!(matches!(err, Error::NotFound(_)), "a hold mallory may not see: {err}");
    let err = s
        .agent
        .decisions()
        .answer(grant(), who("alice", &["finance"]))
        .await
        .expect_err("the owner");
    assert!(matches!(err, Error::PermissionDenied(_)), "{err}");
    let bad_cel = Answer::approve(id.clone()).grant(GrantRequest {
        when: Some("input.amount <".into()),
        ..request(GrantScope::Tool)
    });
    let err = s
        .agent
        .decisions()
        .answer(bad_cel, who("olga", &["finance"]))
        .await
        .expect_err("bad CEL");
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    // A typed lifetime out of range (a bad string never decodes).
    for ttl in [std::time::Duration::ZERO, std::time::Duration::from_secs(400 * 86_400)] {
        let bad_ttl = Answer::approve(id.clone()).grant(GrantRequest::new(GrantScope::Tool).ttl(ttl));
        let err = s
            .agent
            .decisions()
            .answer(bad_ttl, who("olga", &["finance"]))
            .await
            .expect_err("bad ttl");
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        assert!(err.to_string().contains("grant ttl"), "{err}");
    }
    let mut deny = Answer::deny(id.clone(), None);
    deny.grant = Some(request(GrantScope::Tool));
    let err = s
        .agent
        .decisions()
        .answer(deny, who("olga", &["finance"]))
        .await
        .expect_err("a denial");
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert!(
        s.store
            .capabilities()
            .grants()
            .unwrap()
            .list_grants(&GrantQuery::default())
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(s.paid.load(Ordering::SeqCst), 0);
    let row = s.store.get_snapshot(&id).await.unwrap().unwrap();
    assert!(row.resumed_at.is_none(), "the hold still waits");
}
