//! What an approver sees of a hold (docs/reference.md §22), in
//! process on a SQLite store: redaction masks a secret everywhere a hold
//! is read while the tool runs with it whole; a tool's preview is the
//! hold's headline and a failing one never stops the hold; a hold too
//! large to review, or one its preview cannot show in full, is answered
//! only by a denial or an edit.

use std::sync::{Arc, Mutex};

use holdpoint::agent::{Agent, AgentInit, AgentInput, AgentOutput, Answer, Answered, Caller, RunOptions};
use holdpoint::approval::{GrantRequest, GrantScope, Policy, RuleSpec};
use holdpoint::receipt::{Expect, ReceiptSigner, verify};
use holdpoint::review::{HoldView, MASK, Preview};
use holdpoint::session::outbox::OutboxQuery;
use holdpoint::session::{AuditQuery, SessionStore, SnapshotQuery};
use holdpoint::tool::{DynamicTool, ToolContext};
use holdpoint::{Error, FinishReason, Resume, ScriptedModel, ScriptedTurn};
use serde_json::{Value, json};

const CARD: &str = "4111-SECRET-CARD-9999";
const MEMO: &str = "SECRET-MEMO-71";
const CVV: &str = "CVV-SECRET-318";

type Seen = Arc<Mutex<Vec<(String, Value, Option<String>)>>>;

struct Setup {
    agent: Agent,
    store: Arc<dyn SessionStore>,
    signer: Arc<ReceiptSigner>,
    seen: Seen,
    _dir: tempfile::TempDir,
}

fn recording(name: &'static str, seen: &Seen, view: Option<HoldView>) -> Arc<dyn holdpoint::Tool> {
    let seen = Arc::clone(seen);
    let tool = DynamicTool::new(
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
    );
    match view {
        Some(v) => tool.hold_view(v).into_tool(),
        None => tool.into_tool(),
    }
}

/// `payVendor` masks its card and previews the payment; its rule masks
/// the memo too. `runScript` is reviewable up to 200 bytes. `purge`
/// previews only part of what it deletes, under a rule that wants a full
/// preview; `tagItems` has a preview that fails.
async fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("review.db").display());
    let store: Arc<dyn SessionStore> = holdpoint_stores::open_store(&url).await.unwrap();
    let seen: Seen = Arc::default();
    let model = ScriptedModel::from_fn("scripted/review", |request, _| {
        let last = request.messages.last()?;
        if last.role == holdpoint::Role::Tool {
            return Some(ScriptedTurn::text("done"));
        }
        let text = last.text();
        let (tool, input) = text.trim().split_once(' ')?;
        Some(ScriptedTurn::tool_call(tool, serde_json::from_str(input).ok()?))
    });
    let rule = |name: &str, tool: &str| RuleSpec {
        name: Some(name.into()),
        tool: Some(tool.into()),
        approvers: vec!["finance".into()],
        self_approval: false,
        ..RuleSpec::default()
    };
    let policy = Policy::new([
        RuleSpec {
            redact: vec!["memo".into()],
            ..rule("vendors", "payVendor")
        },
        RuleSpec {
            max_review_bytes: Some(200),
            ..rule("scripts", "runScript")
        },
        RuleSpec {
            require_preview: true,
            ..rule("purges", "purge")
        },
        RuleSpec {
            require_preview: true,
            ..rule("tags", "tagItems")
        },
    ])
    .unwrap();
    let pay_view = HoldView::new()
        .redact(["card.number", "card.cvv"])
        .unwrap()
        .preview(|input| {
            let amount = input["amount"].as_f64().ok_or("no amount")?;
            Ok(Preview::new(format!(
                "Pay ${amount:.2} to {} with card {}",
                input["vendor"].as_str().unwrap_or("?"),
                input["card"]["number"].as_str().unwrap_or("?")
            ))
            .field("Vendor", input["vendor"].as_str().unwrap_or("?")))
        });
    let purge_view = HoldView::new().preview(|input| {
        Ok(Preview::new(format!("Delete {} rows", input["rows"]))
            .touches(input["rows"].as_u64().unwrap_or(0))
            .unshown("the filter script"))
    });
    let tag_view = HoldView::new().preview(|_| Err("the catalogue is offline".to_owned()));
    let signer = Arc::new(ReceiptSigner::load_or_create(&dir.path().join("keys")).unwrap());
    let agent = Agent::builder("shop")
        .model(Arc::new(model))
        .tools([
            recording("payVendor", &seen, Some(pay_view)),
            recording("runScript", &seen, None),
            recording("purge", &seen, Some(purge_view)),
            recording("tagItems", &seen, Some(tag_view)),
        ])
        .approval_policy(policy)
        .store(Arc::clone(&store))
        .receipts(signer.clone())
        .build()
        .unwrap();
    Setup {
        agent,
        store,
        signer,
        seen,
        _dir: dir,
    }
}

fn finance(name: &str) -> Caller {
    Caller::new(name).with_roles(["finance"])
}

async fn ask(s: &Setup, text: &str) -> AgentOutput {
    s.agent
        .run_with(
            AgentInput::text(text),
            RunOptions::new(AgentInit::new()).principal("alice"),
        )
        .await
        .unwrap()
}

fn pay_input(amount: f64) -> Value {
    json!({"vendor": "acme", "amount": amount, "memo": MEMO, "card": {"number": CARD, "cvv": CVV}})
}

fn assert_no_secret(what: &str, text: &str) {
    for secret in [CARD, MEMO, CVV] {
        assert!(!text.contains(secret), "{what} shows {secret}: {text}");
    }
}

#[tokio::test]
async fn a_secret_is_masked_wherever_the_hold_is_read_and_the_tool_gets_it_whole() {
    let s = setup().await;
    let out = ask(&s, &format!("payVendor {}", pay_input(40.0))).await;
    assert_eq!(out.finish_reason, FinishReason::Interrupted, "{out:?}");
    let snapshot = out.snapshot_id.clone().unwrap();

    // Listings, their one-line form, the preview and the hold's headline.
    let listed = s
        .agent
        .decisions()
        .pending_for(SnapshotQuery::default(), &finance("fiona"))
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    let call = &listed[0];
    assert_no_secret("the listing", &serde_json::to_string(call).unwrap());
    assert_no_secret("the listing's line", &call.to_string());
    assert_eq!(call.input["card"]["number"], json!(MASK));
    assert_eq!(call.input["memo"], json!(MASK), "the rule's own path");
    assert_eq!(call.input["amount"], json!(40.0), "the rest is shown");
    let preview = call.preview.as_ref().expect("the tool previewed the hold");
    assert_eq!(preview.summary, format!("Pay $40.00 to acme with card {MASK}"));
    assert_eq!(call.summary(), preview.summary);
    assert!(call.unapprovable.is_none());

    // The stored notification events carry the masked input too.
    let events = serde_json::to_string(
        &s.store
            .capabilities()
            .outbox()
            .unwrap()
            .list_outbox(&OutboxQuery::default())
            .await
            .unwrap(),
    )
    .unwrap();
    assert!(events.contains("Pay $40.00"), "{events}");
    assert_no_secret("the outbox", &events);

    // Approved by finance: the tool runs with the whole input, and its
    // receipt is of that input.
    let answered = s
        .agent
        .decisions()
        .answer(Answer::approve(snapshot.clone()), &finance("fiona"))
        .await
        .unwrap();
    assert!(matches!(answered, Answered::Resumed(_)), "{answered:?}");
    let seen = s.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    let (_, ran, receipt) = &seen[0];
    assert_eq!(ran, &pay_input(40.0));
    let expect = Expect::new("payVendor", ran);
    verify(receipt.as_deref().unwrap(), &s.signer.jwks(), &expect).unwrap();

    // The audit shows the decision, not the secret.
    let audit = s.agent.decisions().audit(AuditQuery::default()).await.unwrap();
    assert!(!audit.is_empty());
    assert_no_secret("the audit", &serde_json::to_string(&audit).unwrap());
}

#[tokio::test]
async fn an_answer_built_from_the_masked_listing_answers_the_real_call() {
    let s = setup().await;
    let out = ask(&s, &format!("payVendor {}", pay_input(40.0))).await;
    let snapshot = out.snapshot_id.clone().unwrap();
    let listed = s
        .agent
        .decisions()
        .pending_for(SnapshotQuery::default(), &finance("fiona"))
        .await
        .unwrap();
    let masked = listed[0].part.clone();
    assert_eq!(
        masked.as_tool_request().unwrap().input.as_ref().unwrap()["card"]["number"],
        json!(MASK)
    );

    // An edit of the masked input: the amount changes, the masked card
    // and memo stay what they were.
    let mut edited = listed[0].input.clone();
    edited["amount"] = json!(35.0);
    let edit = masked
        .restart_with_input(edited, Some(json!({"toolApproved": true})))
        .unwrap();
    let revised = s
        .agent
        .run_with(
            AgentInput::resume(Resume::from_parts([edit])),
            RunOptions::new(AgentInit::snapshot(snapshot)).caller(finance("fiona")),
        )
        .await
        .unwrap();
    assert_eq!(
        revised.finish_reason,
        FinishReason::Interrupted,
        "held again for the rule"
    );
    assert!(s.seen.lock().unwrap().is_empty());
    let audit = s.agent.decisions().audit(AuditQuery::default()).await.unwrap();
    let edit_row = audit.iter().find(|r| r.decision.as_str() == "edit").unwrap();
    assert_eq!(edit_row.input.as_ref().unwrap()["amount"], json!(35.0));
    assert_no_secret("the edit's audit row", &serde_json::to_string(&audit).unwrap());

    // The revised hold, approved from its masked listing part by hand.
    let listed = s
        .agent
        .decisions()
        .pending_for(SnapshotQuery::default(), &finance("frank"))
        .await
        .unwrap();
    assert_eq!(listed[0].input["amount"], json!(35.0));
    let approve = listed[0].part.restart(Some(json!({"toolApproved": true}))).unwrap();
    let done = s
        .agent
        .run_with(
            AgentInput::resume(Resume::from_parts([approve])),
            RunOptions::new(AgentInit::snapshot(revised.snapshot_id.clone().unwrap())).caller(finance("frank")),
        )
        .await
        .unwrap();
    assert_eq!(done.finish_reason, FinishReason::Stop, "{done:?}");
    let seen = s.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "ran once");
    assert_eq!(
        seen[0].1,
        pay_input(35.0),
        "the edited amount with the real card and memo"
    );
}

#[tokio::test]
async fn a_hold_too_large_to_review_is_answered_only_by_a_denial_or_an_edit() {
    let s = setup().await;
    let script = "x".repeat(500);
    let out = ask(&s, &format!("runScript {}", json!({"script": script}))).await;
    assert_eq!(out.finish_reason, FinishReason::Interrupted);
    let snapshot = out.snapshot_id.clone().unwrap();
    let listed = s
        .agent
        .decisions()
        .pending_for(SnapshotQuery::default(), &finance("fiona"))
        .await
        .unwrap();
    let why = listed[0].unapprovable.clone().expect("too large to review");
    assert!(why.contains("scripts") && why.contains("200 bytes"), "{why}");

    // Approving is refused, whichever way it comes, and changes nothing.
    let refused = s
        .agent
        .decisions()
        .answer(Answer::approve(snapshot.clone()), &finance("fiona"))
        .await
        .unwrap_err();
    assert!(
        matches!(refused, Error::FailedPrecondition(ref m) if m.contains("cannot be approved as is")),
        "{refused}"
    );
    let approve = listed[0].part.restart(Some(json!({"toolApproved": true}))).unwrap();
    let refused = s
        .agent
        .run_with(
            AgentInput::resume(Resume::from_parts([approve])),
            RunOptions::new(AgentInit::snapshot(snapshot.clone())).caller(finance("fiona")),
        )
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("cannot be approved as is"), "{refused}");
    // Nor does a standing grant let such a call through later.
    let granted = s
        .agent
        .decisions()
        .answer(
            Answer::approve(snapshot.clone()).grant(GrantRequest::new(GrantScope::Principal)),
            &finance("fiona"),
        )
        .await;
    assert!(granted.is_err());
    let still = s
        .agent
        .decisions()
        .pending_for(SnapshotQuery::default(), &finance("fiona"))
        .await
        .unwrap();
    assert_eq!(still.len(), 1, "still waiting");
    assert!(s.seen.lock().unwrap().is_empty());

    // An edit to a reviewable size is held again, now approvable.
    let edit = listed[0]
        .part
        .restart_with_input(json!({"script": "echo hi"}), Some(json!({"toolApproved": true})))
        .unwrap();
    let revised = s
        .agent
        .run_with(
            AgentInput::resume(Resume::from_parts([edit])),
            RunOptions::new(AgentInit::snapshot(snapshot)).caller(finance("fiona")),
        )
        .await
        .unwrap();
    assert_eq!(revised.finish_reason, FinishReason::Interrupted);
    let listed = s
        .agent
        .decisions()
        .pending_for(SnapshotQuery::default(), &finance("frank"))
        .await
        .unwrap();
    assert!(listed[0].unapprovable.is_none(), "{:?}", listed[0].unapprovable);
    s.agent
        .decisions()
        .answer(Answer::approve(revised.snapshot_id.clone().unwrap()), &finance("frank"))
        .await
        .unwrap();
    assert_eq!(s.seen.lock().unwrap()[0].1, json!({"script": "echo hi"}));

    // The audit says why the first hold was not approved.
    let audit = s.agent.decisions().audit(AuditQuery::default()).await.unwrap();
    let edit_row = audit.iter().find(|r| r.decision.as_str() == "edit").unwrap();
    assert!(
        edit_row
            .reason
            .as_deref()
            .unwrap_or("")
            .contains("not approvable as is"),
        "{edit_row:?}"
    );
}

#[tokio::test]
async fn a_denial_of_an_unreviewable_hold_records_why_it_could_not_be_approved() {
    let s = setup().await;
    let out = ask(&s, &format!("runScript {}", json!({"script": "y".repeat(300)}))).await;
    let snapshot = out.snapshot_id.clone().unwrap();
    let done = s
        .agent
        .decisions()
        .answer(Answer::deny(snapshot, Some("too long to read")), &finance("fiona"))
        .await
        .unwrap();
    assert!(matches!(done, Answered::Resumed(_)));
    let audit = s.agent.decisions().audit(AuditQuery::default()).await.unwrap();
    let deny = audit.iter().find(|r| r.decision.as_str() == "deny").unwrap();
    let reason = deny.reason.as_deref().unwrap();
    assert!(
        reason.starts_with("too long to read") && reason.contains("not approvable as is"),
        "{reason}"
    );
    assert!(s.seen.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_preview_that_cannot_show_everything_or_fails_leaves_deny_or_edit() {
    let s = setup().await;
    // A preview naming what it cannot show, under `require_preview`.
    let out = ask(&s, &format!("purge {}", json!({"rows": 12, "filter": "DROP ..."}))).await;
    assert_eq!(out.finish_reason, FinishReason::Interrupted);
    let listed = s
        .agent
        .decisions()
        .pending_for(SnapshotQuery::default(), &finance("fiona"))
        .await
        .unwrap();
    let call = &listed[0];
    assert_eq!(call.summary(), "Delete 12 rows");
    assert_eq!(call.preview.as_ref().unwrap().touches, Some(12));
    assert!(
        call.unapprovable
            .as_deref()
            .unwrap()
            .contains("cannot show the filter script"),
        "{:?}",
        call.unapprovable
    );
    let refused = s
        .agent
        .decisions()
        .answer(Answer::approve(out.snapshot_id.clone().unwrap()), &finance("fiona"))
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("cannot be approved as is"), "{refused}");

    // A preview that fails: the hold is made all the same, its headline
    // built from the raw input, and the rule wants a preview.
    let out = ask(&s, &format!("tagItems {}", json!({"tag": "sale", "count": 3}))).await;
    assert_eq!(
        out.finish_reason,
        FinishReason::Interrupted,
        "a failed preview never stops the hold"
    );
    let listed = s
        .agent
        .decisions()
        .pending_for(SnapshotQuery::default(), &finance("fiona"))
        .await
        .unwrap();
    let call = listed.iter().find(|c| c.tool == "tagItems").unwrap();
    assert!(call.preview.is_none());
    assert_eq!(call.summary(), "sale · count 3");
    assert!(
        call.unapprovable
            .as_deref()
            .unwrap()
            .contains("its preview failed (the catalogue is offline)"),
        "{:?}",
        call.unapprovable
    );
}
