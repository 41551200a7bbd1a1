//! What approvers and operators do, through the client, against a real
//! `holdpoint-server` on a loopback port with API keys mapped to principals
//! with roles and an approval policy: list and answer another's hold (a
//! quorum of two), the owner's resume path refused with a message that
//! names the approver's way, grants made, listed and revoked, filtered
//! pending and the inbox's pages, calls in doubt listed and settled by an
//! operator, and the statuses of refused and misfit answers.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use holdpoint::agent::{Agent, AgentInit, AgentInput, Answer, PendingApproval};
use holdpoint::approval::{GrantQuery, GrantRequest, GrantScope, Policy, RuleSpec};
use holdpoint::session::OutboxStore;
use holdpoint::session::{EndpointStop, InMemoryStore, ResumeClaim, SessionStore};
use holdpoint::tool::{DynamicTool, ResumableTool};
use holdpoint::{FinishReason, Part, Resume, ScriptedModel, ScriptedTurn, Status, ToolContext};
use holdpoint_client::{
    AnswerOutcome, AuditFilter, Client, ClientError, InboxQuery, ListQuery, NotificationQuery, RemoteAgent,
};
use holdpoint_server::Server;
use holdpoint_server::auth::ApiKeys;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

const ALICE: &str = "k-alice-approver-0123456789";
const BOB: &str = "k-bob-approver-0123456789";
const OLGA: &str = "k-olga-approver-0123456789";
const PETE: &str = "k-pete-approver-0123456789";
const OPAL: &str = "k-opal-approver-0123456789";

/// `payBill` (the user's message is the amount) is held for finance and
/// never answered by its owner: two approvals above 10 000, one below.
fn payer(store: Arc<dyn SessionStore>, paid: &Arc<AtomicUsize>) -> Agent {
    let paid = Arc::clone(paid);
    let pay = DynamicTool::new(
        "payBill",
        "pays a bill",
        json!({"type": "object"}),
        move |_ctx: ToolContext, input: Value| {
            let paid = Arc::clone(&paid);
            async move {
                paid.fetch_add(1, Ordering::SeqCst);
                Ok(json!({"paid": input["amount"]}))
            }
        },
    )
    .into_tool();
    let model = ScriptedModel::from_fn("scripted/payer", |request, _| {
        let last = request.messages.last()?;
        if last.role == holdpoint::Role::Tool {
            return Some(ScriptedTurn::text("done"));
        }
        let amount: u64 = last.text().trim().parse().ok()?;
        Some(ScriptedTurn::tool_call("payBill", json!({"amount": amount})))
    });
    let policy = Policy::new([
        RuleSpec {
            name: Some("large bills".into()),
            tool: Some("payBill".into()),
            when: Some("input.amount > 10000".into()),
            approvers: vec!["finance".into()],
            quorum: 2,
            self_approval: false,
            ..Default::default()
        },
        RuleSpec {
            name: Some("bills".into()),
            tool: Some("payBill".into()),
            approvers: vec!["finance".into()],
            quorum: 1,
            self_approval: false,
            ..Default::default()
        },
    ])
    .unwrap();
    Agent::builder("payer")
        .model(Arc::new(model))
        .tool(pay)
        .approval_policy(policy)
        .store(store)
        .build()
        .unwrap()
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct Question {
    topic: String,
}

/// A resume type with no yes or no in it: approve and deny cannot answer it.
#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Pick {
    colour: String,
}

/// `pickColour` asks its owner a question of its own (no rule).
fn quiz() -> Agent {
    let pick = ResumableTool::define(
        "pickColour",
        "asks which colour",
        |ctx: ToolContext, q: Question, pick: Option<Pick>| async move {
            match pick {
                None => Err(ctx.interrupt(json!({"ask": format!("which colour for {}?", q.topic)}))),
                Some(p) => Ok(p.colour),
            }
        },
    )
    .unwrap();
    let model = ScriptedModel::from_fn("scripted/quiz", |request, _| {
        let last = request.messages.last()?;
        if last.role == holdpoint::Role::Tool {
            return Some(ScriptedTurn::text("noted"));
        }
        Some(ScriptedTurn::tool_call("pickColour", json!({"topic": last.text()})))
    });
    Agent::builder("quiz")
        .model(Arc::new(model))
        .tool(pick)
        .store(Arc::new(InMemoryStore::new()))
        .build()
        .unwrap()
}

struct Bank {
    base: String,
    store: Arc<InMemoryStore>,
    paid: Arc<AtomicUsize>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

async fn bank() -> Bank {
    let paid = Arc::new(AtomicUsize::new(0));
    let store = Arc::new(InMemoryStore::new());
    let server = Server::builder()
        .agent(payer(store.clone(), &paid))
        .agent(quiz())
        .notifications(store.clone())
        .api_keys(
            ApiKeys::new()
                .key_with_roles(ALICE, "alice", ["customer"])
                .key_with_roles(BOB, "bob", ["customer"])
                .key_with_roles(OLGA, "olga", ["finance"])
                .key_with_roles(PETE, "pete", ["finance"])
                .key_with_roles(OPAL, "opal", [holdpoint::agent::OPERATOR_ROLE]),
        )
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
        base,
        store,
        paid,
        _stop: stop,
    }
}

impl Bank {
    fn client(&self, key: &str) -> Client {
        Client::new(self.base.clone()).api_key(key)
    }

    fn payer(&self, key: &str) -> RemoteAgent {
        self.client(key).agent("payer")
    }

    fn paid(&self) -> usize {
        self.paid.load(Ordering::SeqCst)
    }
}

/// The one listed call of `snapshot_id` in `calls`.
fn call_of(calls: &[PendingApproval], snapshot_id: &str) -> PendingApproval {
    let found: Vec<&PendingApproval> = calls.iter().filter(|c| c.snapshot_id == snapshot_id).collect();
    assert_eq!(found.len(), 1, "{calls:#?}");
    found[0].clone()
}

fn server_error(err: &ClientError) -> (u16, Status, &str) {
    match err {
        ClientError::Server { http, status, message } => (*http, *status, message.as_str()),
        other => panic!("not a server error: {other:?}"),
    }
}

#[tokio::test]
async fn a_finance_approver_lists_anothers_hold_and_answers_it_with_a_quorum_of_two() {
    let b = bank().await;
    let alice = b.payer(ALICE);
    let olga = b.payer(OLGA);
    let pete = b.payer(PETE);
    let held = alice.run_text("50000").await.unwrap();
    assert_eq!(held.finish_reason, FinishReason::Interrupted);
    let id = held.snapshot_id.clone().unwrap();

    // The approver lists the customer's hold and reads the held snapshot.
    let call = call_of(&olga.pending(10).await.unwrap(), &id);
    let rule = call.rule.clone().expect("held under a rule");
    assert_eq!(rule.rule, "large bills");
    assert_eq!(rule.quorum, 2);
    assert_eq!(call.owner.as_deref(), Some("alice"));
    assert_eq!(olga.snapshot(&id).await.unwrap().session_id, held.session_id);
    assert_eq!(olga.snapshot_metadata(&id).await.unwrap().state, None);

    // The owner's resume path is not the approver's: by the session's id
    // it is 404, saying what to use instead; by the snapshot's id a resume
    // cannot meet a quorum of two (a failed turn that says so). Nothing ran.
    let directive = call.part.restart(Some(json!({"toolApproved": true}))).unwrap();
    let resume = || AgentInput::resume(Resume::from_parts([directive.clone()]));
    let err = olga
        .run(resume(), AgentInit::session(held.session_id.clone()))
        .await
        .unwrap_err();
    let (http, status, message) = server_error(&err);
    assert_eq!((http, status), (404, Status::NotFound), "{err}");
    assert!(message.contains("RemoteAgent::answer"), "{err}");
    assert!(message.contains("/agents/payer/answer"), "{err}");
    let err = olga.run(resume(), AgentInit::snapshot(id.clone())).await.unwrap_err();
    assert!(matches!(err, ClientError::TurnFailed(_)), "{err:?}");
    assert_eq!(err.status(), Some(Status::FailedPrecondition), "{err}");
    assert!(err.to_string().contains("answer"), "{err}");
    assert_eq!(b.paid(), 0);

    // The owner may not answer under this rule (403 naming it), a stranger
    // does not see it (404); nothing ran.
    let err = alice.approve(&call).await.unwrap_err();
    let (http, status, message) = server_error(&err);
    assert_eq!((http, status), (403, Status::PermissionDenied), "{err}");
    assert!(message.contains("large bills"), "{err}");
    assert_eq!(err.status(), Some(Status::PermissionDenied));
    let err = b.payer(BOB).approve(&call).await.unwrap_err();
    assert_eq!(err.status(), Some(Status::NotFound), "{err}");

    // The first approval is recorded, once.
    match olga.approve(&call).await.unwrap() {
        AnswerOutcome::Recorded {
            counted,
            quorum,
            approvals,
        } => {
            assert!(counted);
            assert_eq!(quorum, Some(2));
            let actors: Vec<&str> = approvals.iter().map(|a| a.actor.as_str()).collect();
            assert_eq!(actors, ["olga"]);
        }
        other => panic!("decided early: {other:?}"),
    }
    let again = olga.approve(&call).await.unwrap();
    assert!(
        matches!(again, AnswerOutcome::Recorded { counted: false, .. }),
        "{again:?}"
    );
    assert!(!again.is_decided());
    assert_eq!(b.paid(), 0);

    // The second approver sees the first's approval and decides.
    let listed = call_of(&pete.pending(10).await.unwrap(), &id);
    assert_eq!(listed.approvals.len(), 1);
    let done = pete.approve(&listed).await.unwrap();
    assert!(done.is_decided());
    let out = done.output().expect("the resumed turn");
    assert_eq!(out.finish_reason, FinishReason::Stop);
    assert_eq!(out.text(), "done");
    assert_eq!(b.paid(), 1);

    // Decided: a late answer lost (409), and nothing ran again.
    let err = olga.approve(&call).await.unwrap_err();
    assert_eq!(server_error(&err).0, 409, "{err}");
    assert_eq!(err.status(), Some(Status::Aborted));
    assert_eq!(b.paid(), 1);

    // The audit names both approvers: on the owner's session, and across
    // agents for an approver of the hold.
    let trail = alice
        .audit(ListQuery::new().session(held.session_id.clone()))
        .await
        .unwrap();
    let mut actors: Vec<String> = trail.iter().filter_map(|r| r.actor.clone()).collect();
    actors.sort();
    actors.dedup();
    assert_eq!(actors, ["olga", "pete"]);
    let page = b
        .client(OLGA)
        .audit(AuditFilter::new().snapshot(id.clone()))
        .await
        .unwrap();
    assert!(page.total >= 2, "{page:#?}");
    assert!(page.items.iter().all(|r| r.snapshot_id == id));
    let err = b
        .client(BOB)
        .audit(AuditFilter::new().snapshot(id.clone()))
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(Status::NotFound), "{err}");
}

#[tokio::test]
async fn an_approval_makes_a_grant_that_is_listed_and_revoked() {
    let b = bank().await;
    let alice = b.payer(ALICE);
    let olga = b.payer(OLGA);
    let held = alice.run_text("500").await.unwrap();
    let id = held.snapshot_id.clone().unwrap();
    let call = call_of(&olga.pending(10).await.unwrap(), &id);

    let grant = GrantRequest {
        scope: GrantScope::Principal,
        when: None,
        ttl: None,
        uses: None,
    };
    let mut answer = Answer::approve(id.clone()).grant(grant);
    answer.reference = call.reference.clone();
    let done = olga.answer(answer).await.unwrap();
    let grant = match &done {
        AnswerOutcome::Granted { output, grant } => {
            assert_eq!(output.finish_reason, FinishReason::Stop);
            grant.as_ref().clone()
        }
        other => panic!("no grant: {other:?}"),
    };
    assert_eq!(done.grant().map(|g| g.id.as_str()), Some(grant.id.as_str()));
    assert_eq!(grant.granted_by, "olga");
    assert_eq!(grant.scope, GrantScope::Principal);
    assert_eq!(b.paid(), 1);

    // Alice's next bill runs on the grant, with no hold.
    let next = alice.run_text("600").await.unwrap();
    assert_eq!(next.finish_reason, FinishReason::Stop, "{next:?}");
    assert_eq!(b.paid(), 2);

    // Listed for the approver (across agents, on the agent, active now);
    // a customer manages none and cannot revoke it.
    let active = GrantQuery {
        active_at: Some(chrono::Utc::now()),
        ..GrantQuery::default()
    };
    let listed = b.client(OLGA).grants(active.clone()).await.unwrap();
    assert_eq!(
        listed.iter().map(|g| g.id.as_str()).collect::<Vec<_>>(),
        [grant.id.as_str()]
    );
    assert_eq!(listed[0].used, 1);
    assert_eq!(olga.grants(GrantQuery::default()).await.unwrap().len(), 1);
    assert!(b.client(BOB).grants(GrantQuery::default()).await.unwrap().is_empty());
    let err = b.client(BOB).revoke_grant(&grant.id).await.unwrap_err();
    assert_eq!(server_error(&err).0, 404, "{err}");

    // Revoked at once: not active, and the next bill is held again.
    let revoked = olga.revoke_grant(&grant.id).await.unwrap();
    assert_eq!(revoked.revoked_by.as_deref(), Some("olga"));
    assert!(revoked.revoked_at.is_some());
    assert!(b.client(OLGA).grants(active).await.unwrap().is_empty());
    assert_eq!(b.client(OLGA).grants(GrantQuery::default()).await.unwrap().len(), 1);
    let held = alice.run_text("700").await.unwrap();
    assert_eq!(held.finish_reason, FinishReason::Interrupted);
    assert_eq!(b.paid(), 2);
}

#[tokio::test]
async fn pending_filters_by_session_and_the_inbox_pages_on_a_cursor() {
    let b = bank().await;
    let alice = b.payer(ALICE);
    let olga = b.payer(OLGA);
    let first = alice.run_text("500").await.unwrap();
    let second = alice.run_text("800").await.unwrap();
    let bobs = b.payer(BOB).run_text("900").await.unwrap();

    // Existing callers: `pending(limit)` as before.
    assert_eq!(alice.pending(10).await.unwrap().len(), 2);
    assert_eq!(olga.pending(10).await.unwrap().len(), 3);
    assert_eq!(olga.pending(1).await.unwrap().len(), 1);

    // One session's, for its owner and for an approver; another's is 404.
    let only = alice
        .pending_where(ListQuery::new().session(first.session_id.clone()))
        .await
        .unwrap();
    assert_eq!(only.len(), 1);
    assert_eq!(only[0].snapshot_id, first.snapshot_id.clone().unwrap());
    let only = olga
        .pending_where(ListQuery::new().session(bobs.session_id.clone()).limit(5))
        .await
        .unwrap();
    assert_eq!(only.len(), 1);
    assert_eq!(only[0].owner.as_deref(), Some("bob"));
    let err = alice
        .pending_where(ListQuery::new().session(bobs.session_id.clone()))
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(Status::NotFound), "{err}");

    // The inbox: two pages on a cursor, every hold once, the true total.
    let inbox = b.client(OLGA);
    let page = inbox.inbox(InboxQuery::new().limit(2)).await.unwrap();
    assert_eq!((page.items.len(), page.total), (2, 3));
    assert_eq!(page.counts.waiting, 3);
    assert_eq!(page.caller.principal.as_deref(), Some("olga"));
    assert!(page.items.iter().all(|i| i.for_me && i.refused.is_none()));
    let cursor = page.next_cursor.clone().expect("a second page");
    let rest = inbox.inbox(InboxQuery::new().limit(2).after(cursor)).await.unwrap();
    assert_eq!(rest.items.len(), 1);
    assert_eq!(rest.next_cursor, None);
    let mut seen: Vec<String> = page
        .items
        .iter()
        .chain(&rest.items)
        .map(|i| i.call.snapshot_id.clone())
        .collect();
    seen.sort();
    let mut all = vec![
        first.snapshot_id.clone().unwrap(),
        second.snapshot_id.clone().unwrap(),
        bobs.snapshot_id.clone().unwrap(),
    ];
    all.sort();
    assert_eq!(seen, all);

    // Filters: text, and the owner's view (its own, not for it to answer).
    let found = olga.inbox(InboxQuery::new().text("900")).await.unwrap();
    assert_eq!(found.total, 1);
    assert_eq!(found.items[0].call.owner.as_deref(), Some("bob"));
    let own = b.client(ALICE).inbox(InboxQuery::new().mine(false)).await.unwrap();
    assert_eq!(own.total, 2);
    assert!(own.items.iter().all(|i| i.refused.is_some()));

    // An inbox item is answered like a listed call.
    let done = olga.approve(&found.items[0].call).await.unwrap();
    assert!(done.is_decided());
    assert_eq!(b.paid(), 1);
    assert_eq!(inbox.inbox(InboxQuery::new()).await.unwrap().total, 2);
}

#[tokio::test]
async fn an_operator_lists_and_settles_a_call_left_in_doubt() {
    let b = bank().await;
    let alice = b.payer(ALICE);
    let opal = b.payer(OPAL);
    let held = alice.run_text("500").await.unwrap();
    let id = held.snapshot_id.clone().unwrap();
    // A resume claimed it and its process died: the claim lapsed.
    b.store
        .claim_resume(
            ResumeClaim {
                snapshot_id: id.clone(),
                lease_until: chrono::Utc::now() - chrono::Duration::seconds(1),
                takeover: false,
            },
            Vec::new(),
        )
        .await
        .unwrap();

    assert!(
        alice.in_doubt(ListQuery::new()).await.unwrap().is_empty(),
        "the rule excludes her"
    );
    assert!(b.payer(BOB).in_doubt(ListQuery::new()).await.unwrap().is_empty());
    let listed = opal.in_doubt(ListQuery::new()).await.unwrap();
    let call = call_of(&listed, &id);
    assert!(call.in_doubt);
    let by_session = b
        .payer(OLGA)
        .in_doubt(ListQuery::new().session(held.session_id.clone()))
        .await
        .unwrap();
    assert_eq!(call_of(&by_session, &id).tool, "payBill");

    // The bill was in fact paid: settle with what happened.
    let respond = || Resume {
        respond: vec![call.part.respond(json!({"paid": 500})).unwrap()],
        ..Resume::default()
    };
    let err = alice.settle(&id, respond()).await.unwrap_err();
    assert_eq!(server_error(&err).0, 403, "{err}");
    assert_eq!(err.status(), Some(Status::PermissionDenied));
    let out = opal.settle(&id, respond()).await.unwrap();
    assert_eq!(out.finish_reason, FinishReason::Stop);
    assert_eq!(out.text(), "done");
    assert_eq!(b.paid(), 0, "settled with what happened, not run again");
    assert!(opal.in_doubt(ListQuery::new()).await.unwrap().is_empty());
    let err = opal.settle(&id, respond()).await.unwrap_err();
    assert!(err.status().is_some(), "{err}");
}

/// A `?` in a function that mixes the core's calls and the client's.
async fn approve_by_hand(agent: &RemoteAgent, part: &Part, session: &str) -> holdpoint_client::Result<String> {
    let directive = part.restart(Some(json!({"colour": "teal"})))?;
    let out = agent
        .run(
            AgentInput::resume(Resume::from_parts([directive])),
            AgentInit::session(session),
        )
        .await?;
    Ok(out.text())
}

#[tokio::test]
async fn a_misfit_answer_is_invalid_argument_and_core_errors_pass_through_question_mark() {
    let b = bank().await;
    let quiz = b.client(ALICE).agent("quiz");
    let held = quiz.run_text("the door").await.unwrap();
    let call = quiz.pending(5).await.unwrap().pop().expect("the question");

    // Approve cannot answer a question whose resume type has no yes or no.
    let err = quiz.approve(&call).await.unwrap_err();
    let (http, status, message) = server_error(&err);
    assert_eq!((http, status), (400, Status::InvalidArgument), "{err}");
    assert!(message.contains("ApprovalReply"), "{err}");
    assert_eq!(quiz.pending(5).await.unwrap().len(), 1, "still answerable");

    // A core error through `?` keeps its status; the real answer resumes.
    let text_part = Part::text("not a paused call");
    let err = approve_by_hand(&quiz, &text_part, &held.session_id).await.unwrap_err();
    assert!(matches!(err, ClientError::Core(_)), "{err:?}");
    assert_eq!(err.status(), Some(Status::InvalidArgument), "{err}");
    let said = approve_by_hand(&quiz, &call.part, &held.session_id).await.unwrap();
    assert_eq!(said, "noted");
}

#[tokio::test]
async fn an_operator_reads_and_steers_the_notification_pipe() {
    let b = bank().await;
    let held = b.payer(ALICE).run_text("500").await.unwrap();
    let opal = b.client(OPAL);

    let page = opal.notifications(NotificationQuery::new()).await.unwrap();
    let row = page
        .notifications
        .iter()
        .find(|n| n.snapshot_id == held.snapshot_id.clone().unwrap())
        .unwrap_or_else(|| panic!("{page:#?}"))
        .clone();
    assert_eq!(row.state, "pending");
    assert_eq!(row.tool.as_deref(), Some("payBill"));
    let err = b
        .client(OLGA)
        .notifications(NotificationQuery::new())
        .await
        .unwrap_err();
    assert_eq!(server_error(&err).0, 403, "{err}");
    assert!(
        opal.notifications(NotificationQuery::new().state("dead"))
            .await
            .unwrap()
            .notifications
            .is_empty()
    );

    let retried = opal.retry_notification(&row.id).await.unwrap();
    assert_eq!((retried.id.as_str(), retried.attempts), (row.id.as_str(), 0));
    let err = opal.retry_notification("no-such-row").await.unwrap_err();
    assert_eq!(err.status(), Some(Status::NotFound), "{err}");

    b.store
        .stop_endpoint(EndpointStop {
            channel: "webhook:0".into(),
            fingerprint: "f".into(),
            reason: "410 Gone".into(),
            stopped_at: chrono::Utc::now(),
        })
        .await
        .unwrap();
    let page = opal.notifications(NotificationQuery::new().limit(1)).await.unwrap();
    assert_eq!(page.endpoints.len(), 1);
    assert_eq!(page.endpoints[0].channel, "webhook:0");
    opal.enable_endpoint("webhook:0").await.unwrap();
    let err = opal.enable_endpoint("webhook:0").await.unwrap_err();
    assert_eq!(err.status(), Some(Status::NotFound), "{err}");
    assert!(
        opal.notifications(NotificationQuery::new())
            .await
            .unwrap()
            .endpoints
            .is_empty()
    );
}
