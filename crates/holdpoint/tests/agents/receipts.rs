//! Approval receipts (docs/reference.md, "Approval receipts") on a SQLite
//! store: a call that runs after an approval (or by a standing grant)
//! reads a receipt from its context that verifies for exactly the input
//! it runs with; denied calls do not run, and calls that never held have
//! none.

use std::sync::{Arc, Mutex};

use holdpoint::agent::{Agent, AgentInit, AgentInput, AgentOutput, Answer, Answered, RunOptions};
use holdpoint::approval::{GrantRequest, GrantScope, Policy, RuleSpec};
use holdpoint::receipt::{Decision, Expect, ReceiptError, ReceiptSigner, verify};
use holdpoint::session::SessionStore;
use holdpoint::tool::{DynamicTool, ToolContext};
use holdpoint::{FinishReason, Resume, ScriptedModel, ScriptedTurn};
use serde_json::{Map, Value, json};

/// What each tool call saw: its tool, input and receipt.
type Seen = Arc<Mutex<Vec<(String, Value, Option<String>)>>>;

struct Setup {
    agent: Agent,
    signer: Arc<ReceiptSigner>,
    seen: Seen,
    _dir: tempfile::TempDir,
}

fn recording(name: &'static str, seen: &Seen) -> Arc<dyn holdpoint::Tool> {
    let seen = Arc::clone(seen);
    DynamicTool::new(
        name,
        "records its call",
        json!({"type": "object"}),
        move |ctx: ToolContext, input: Value| {
            let seen = Arc::clone(&seen);
            async move {
                let receipt = ctx.receipt().map(str::to_owned);
                seen.lock()
                    .unwrap()
                    .push((ctx.name().to_owned(), input.clone(), receipt));
                Ok(json!({"ok": true}))
            }
        },
    )
    .into_tool()
}

/// `transferMoney` is held for `finance` (never its owner); `getBalance`
/// runs freely. The user's message is `TOOL JSON`.
async fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("receipts.db").display());
    let store: Arc<dyn SessionStore> = holdpoint_stores::open_store(&url).await.unwrap();
    let seen: Seen = Arc::default();
    let model = ScriptedModel::from_fn("scripted/receipts", |request, _| {
        let last = request.messages.last()?;
        if last.role == holdpoint::Role::Tool {
            return Some(ScriptedTurn::text("done"));
        }
        let text = last.text();
        let (tool, input) = text.trim().split_once(' ')?;
        Some(ScriptedTurn::tool_call(tool, serde_json::from_str(input).ok()?))
    });
    let policy = Policy::new([RuleSpec {
        name: Some("transfers".into()),
        tool: Some("transferMoney".into()),
        approvers: vec!["finance".into()],
        quorum: 1,
        self_approval: false,
        ..RuleSpec::default()
    }])
    .unwrap();
    let signer = Arc::new(ReceiptSigner::load_or_create(&dir.path().join("keys")).unwrap());
    let agent = Agent::builder("teller")
        .model(Arc::new(model))
        .tools([recording("transferMoney", &seen), recording("getBalance", &seen)])
        .approval_policy(policy)
        .store(store)
        .receipts(signer.clone())
        .build()
        .unwrap();
    Setup {
        agent,
        signer,
        seen,
        _dir: dir,
    }
}

fn who(principal: &str, roles: &[&str]) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("principal".into(), json!(principal));
    m.insert("roles".into(), json!(roles));
    m
}

async fn ask(s: &Setup, session: Option<&str>, text: &str) -> AgentOutput {
    let init = session.map_or_else(AgentInit::new, AgentInit::session);
    s.agent
        .run_with(AgentInput::text(text), RunOptions::new(init).principal("alice"))
        .await
        .unwrap()
}

fn seen(s: &Setup) -> Vec<(String, Value, Option<String>)> {
    s.seen.lock().unwrap().clone()
}

#[tokio::test]
async fn an_approved_call_reads_a_receipt_for_its_own_input() {
    let s = setup().await;
    let input = json!({"amount": 18300.0, "toAccount": "acct-4471"});
    let out = ask(&s, None, &format!("transferMoney {input}")).await;
    assert_eq!(out.finish_reason, FinishReason::Interrupted);
    assert!(seen(&s).is_empty(), "held: nothing ran");
    let snapshot = out.snapshot_id.clone().unwrap();
    let reference = out.interrupts()[0].as_tool_request().unwrap().reference.clone();

    let answered = s
        .agent
        .decisions()
        .answer(Answer::approve(snapshot.clone()), who("olga", &["finance"]))
        .await
        .unwrap();
    assert!(matches!(answered, Answered::Resumed(_)), "{answered:?}");
    let calls = seen(&s);
    assert_eq!(calls.len(), 1);
    let (tool, ran, token) = &calls[0];
    assert_eq!(tool, "transferMoney");
    let token = token.as_deref().expect("an approved call carries a receipt");

    let jwks = s.signer.jwks();
    let expect = Expect::new("transferMoney", ran).hold(snapshot.clone(), reference.as_deref());
    let receipt = verify(token, &jwks, &expect).unwrap();
    let claims = &receipt.subject;
    assert_eq!(claims.decision, Decision::Approve);
    assert_eq!(claims.agent, "teller");
    assert_eq!(claims.rule.as_deref(), Some("transfers"));
    let quorum = claims.quorum.unwrap();
    assert_eq!((quorum.required, quorum.reached), (1, 1));
    assert_eq!(claims.actors.len(), 1);
    assert_eq!(claims.actors[0].id, "olga");
    assert_eq!(claims.actors[0].roles, vec!["finance".to_owned()]);
    assert!(receipt.exp > receipt.iat);
    // Its hash is the audit record's.
    let rows = s
        .agent
        .decisions()
        .audit(holdpoint::session::AuditQuery::default())
        .await
        .unwrap();
    assert!(rows.iter().any(|r| r.input_hash == claims.input_sha256), "{rows:?}");

    // Never for another input, tool or hold.
    let more = json!({"amount": 99999, "toAccount": "acct-4471"});
    assert!(matches!(
        verify(token, &jwks, &Expect::new("transferMoney", &more)),
        Err(ReceiptError::OtherInput { .. })
    ));
    assert!(matches!(
        verify(token, &jwks, &Expect::new("getBalance", ran)),
        Err(ReceiptError::OtherTool { .. })
    ));
    assert!(matches!(
        verify(
            token,
            &jwks,
            &Expect::new("transferMoney", ran).hold("another-snapshot", reference.as_deref())
        ),
        Err(ReceiptError::OtherHold { .. })
    ));
}

#[tokio::test]
async fn an_edited_call_binds_the_edited_input_and_not_the_original() {
    let s = setup().await;
    let original = json!({"amount": 25000, "toAccount": "x"});
    let out = ask(&s, None, &format!("transferMoney {original}")).await;
    let part = &out.interrupts()[0];
    let edited_input = json!({"amount": 400, "toAccount": "x"});
    let edited = part
        .restart_with_input(edited_input.clone(), Some(json!({"toolApproved": true})))
        .unwrap();
    // The rule holds the revised call again: nothing runs on the edit.
    let again = s
        .agent
        .run_with(
            AgentInput::resume(Resume::from_parts([edited])),
            RunOptions::new(AgentInit::snapshot(out.snapshot_id.clone().unwrap())).context(who("olga", &["finance"])),
        )
        .await
        .unwrap();
    assert_eq!(again.finish_reason, FinishReason::Interrupted);
    assert!(seen(&s).is_empty());
    let snapshot = again.snapshot_id.clone().unwrap();
    let reference = again.interrupts()[0].as_tool_request().unwrap().reference.clone();
    s.agent
        .decisions()
        .answer(Answer::approve(snapshot.clone()), who("fiona", &["finance"]))
        .await
        .unwrap();
    let calls = seen(&s);
    assert_eq!(calls.len(), 1);
    let (_, ran, token) = &calls[0];
    assert_eq!(ran, &edited_input);
    let token = token.as_deref().unwrap();
    let jwks = s.signer.jwks();
    let receipt = verify(
        token,
        &jwks,
        &Expect::new("transferMoney", &edited_input).hold(snapshot, reference.as_deref()),
    )
    .unwrap();
    assert_eq!(receipt.subject.actors[0].id, "fiona");
    assert!(matches!(
        verify(token, &jwks, &Expect::new("transferMoney", &original)),
        Err(ReceiptError::OtherInput { .. })
    ));
}

#[tokio::test]
async fn denied_and_never_held_calls_have_no_receipt() {
    let s = setup().await;
    let out = ask(&s, None, r#"transferMoney {"amount": 5, "toAccount": "x"}"#).await;
    s.agent
        .decisions()
        .answer(
            Answer::deny(out.snapshot_id.clone().unwrap(), Some("no")),
            who("olga", &["finance"]),
        )
        .await
        .unwrap();
    assert!(seen(&s).is_empty(), "a denied call does not run");

    let out = ask(&s, None, r#"getBalance {"account": "checking"}"#).await;
    assert_eq!(out.finish_reason, FinishReason::Stop);
    let calls = seen(&s);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].0, "getBalance");
    assert_eq!(calls[0].2, None, "a call that never held has no receipt");
}

#[tokio::test]
async fn a_call_a_standing_grant_lets_through_names_the_grant() {
    let s = setup().await;
    let out = ask(&s, None, r#"transferMoney {"amount": 5, "toAccount": "x"}"#).await;
    let session = out.session_id.clone();
    let grant = GrantRequest {
        scope: GrantScope::Session,
        when: None,
        ttl: None,
        uses: None,
    };
    let answered = s
        .agent
        .decisions()
        .answer(
            Answer::approve(out.snapshot_id.clone().unwrap()).grant(grant),
            who("olga", &["finance"]),
        )
        .await
        .unwrap();
    let Answered::Granted { grant, .. } = answered else {
        panic!("granted: {answered:?}")
    };
    let input = json!({"amount": 7, "toAccount": "y"});
    let out = ask(&s, Some(&session), &format!("transferMoney {input}")).await;
    assert_eq!(out.finish_reason, FinishReason::Stop, "the grant lets it run");
    let calls = seen(&s);
    assert_eq!(calls.len(), 2);
    let token = calls[1].2.as_deref().expect("a granted call carries a receipt");
    let receipt = verify(token, &s.signer.jwks(), &Expect::new("transferMoney", &input)).unwrap();
    assert_eq!(receipt.subject.decision, Decision::Grant);
    assert_eq!(receipt.subject.grant.as_deref(), Some(grant.id.as_str()));
    assert_eq!(receipt.subject.actors[0].id, "olga");
    assert_eq!(receipt.subject.rule.as_deref(), Some("transfers"));
}
