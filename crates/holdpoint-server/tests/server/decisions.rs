//! The one decision path over HTTP on SQLite (issue 32): every answer is
//! validated and authorised before anything is claimed, and a refusal
//! leaves the store exactly as it was (snapshots, audit, grants).
//!
//! Roles: alice and bob are customers, fiona and frank finance, mia a
//! manager, opal an operator. Rules: `bills` holds `payBill` for finance
//! (no self-approval); `close` holds `closeAccount` for managers (the
//! owner may answer their own).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use axum::http::request::Parts;
use holdpoint::agent::Agent;
use holdpoint::approval::{GrantQuery, Policy, RuleSpec};
use holdpoint::middleware::ToolApproval;
use holdpoint::session::{SessionStore, Snapshot};
use holdpoint::tool::{ResumableTool, ToolContext, ToolError, tool};
use holdpoint::{ScriptedModel, ScriptedTurn};
use holdpoint_server::Server;
use holdpoint_server::auth::{AuthError, ContextProvider, Identity};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::support::{TestServer, assert_error, dump, paused_part, restart, user};

struct Keys;

#[async_trait]
impl ContextProvider for Keys {
    async fn authenticate(&self, request: &Parts) -> Result<Option<Identity>, AuthError> {
        let Some(name) = request.headers.get("x-api-key").and_then(|v| v.to_str().ok()) else {
            return Ok(None);
        };
        let role = match name {
            "fiona" | "frank" => "finance",
            "mia" => "manager",
            "opal" => "operator",
            _ => "customer",
        };
        Ok(Some(Identity::new(name).with_roles([role])))
    }
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct Bill {
    amount: u64,
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct Paid {
    paid: u64,
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct Account {
    account: String,
}

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Field {
    value: String,
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct Closed {
    closed: String,
}

/// Side effects, counted.
#[derive(Default)]
struct Effects {
    paid: AtomicUsize,
    closed: AtomicUsize,
}

fn policy() -> Policy {
    Policy::new([
        RuleSpec {
            name: Some("bills".into()),
            tool: Some("payBill".into()),
            approvers: vec!["finance".into()],
            quorum: 1,
            self_approval: false,
            ..Default::default()
        },
        RuleSpec {
            name: Some("big".into()),
            tool: Some("payBig".into()),
            approvers: vec!["finance".into()],
            quorum: 2,
            self_approval: false,
            ..Default::default()
        },
        RuleSpec {
            name: Some("close".into()),
            tool: Some("closeAccount".into()),
            approvers: vec!["manager".into()],
            quorum: 1,
            self_approval: true,
            ..Default::default()
        },
    ])
    .unwrap()
}

/// `desk`: "pay N" calls payBill, "close X" calls closeAccount.
fn desk(store: Arc<dyn SessionStore>, effects: &Arc<Effects>) -> Agent {
    let e = Arc::clone(effects);
    let pay = tool("payBill", "pays a bill", move |_ctx: ToolContext, b: Bill| {
        let e = Arc::clone(&e);
        async move {
            e.paid.fetch_add(1, Ordering::SeqCst);
            Ok::<_, ToolError>(Paid { paid: b.amount })
        }
    });
    let e = Arc::clone(effects);
    let close = tool(
        "closeAccount",
        "closes an account",
        move |_ctx: ToolContext, a: Account| {
            let e = Arc::clone(&e);
            async move {
                e.closed.fetch_add(1, Ordering::SeqCst);
                Ok::<_, ToolError>(Closed { closed: a.account })
            }
        },
    );
    let e = Arc::clone(effects);
    let big = tool("payBig", "pays a big bill", move |_ctx: ToolContext, b: Bill| {
        let e = Arc::clone(&e);
        async move {
            e.paid.fetch_add(1, Ordering::SeqCst);
            Ok::<_, ToolError>(Paid { paid: b.amount })
        }
    });
    let e = Arc::clone(effects);
    let wire = tool("wire", "wires money abroad", move |_ctx: ToolContext, b: Bill| {
        let e = Arc::clone(&e);
        async move {
            e.paid.fetch_add(1, Ordering::SeqCst);
            Ok::<_, ToolError>(Paid { paid: b.amount })
        }
    });
    // A tool's own question, no rule: the missing field, answered as data.
    let ask = ResumableTool::<Account, String, Field>::define(
        "askField",
        "asks for a missing field",
        |ctx: ToolContext, a: Account, field: Option<Field>| async move {
            match field {
                None => Err(ctx.interrupt(json!({"question": format!("which {}?", a.account)}))),
                Some(f) => Ok(f.value),
            }
        },
    )
    .unwrap();
    let model = ScriptedModel::from_fn("scripted/desk", |request, _| {
        let last = request.messages.last()?;
        if last.role == holdpoint::Role::Tool {
            return Some(ScriptedTurn::text("done"));
        }
        let text = last.text();
        let (verb, arg) = text.trim().split_once(' ')?;
        match verb {
            "pay" => Some(ScriptedTurn::tool_call(
                "payBill",
                json!({"amount": arg.parse::<u64>().ok()?}),
            )),
            "close" => Some(ScriptedTurn::tool_call("closeAccount", json!({"account": arg}))),
            "big" => Some(ScriptedTurn::tool_call(
                "payBig",
                json!({"amount": arg.parse::<u64>().ok()?}),
            )),
            "ask" => Some(ScriptedTurn::tool_call("askField", json!({"account": arg}))),
            "wire" => Some(ScriptedTurn::tool_call(
                "wire",
                json!({"amount": arg.parse::<u64>().ok()?}),
            )),
            _ => None,
        }
    });
    Agent::builder("desk")
        .model(Arc::new(model))
        .tool(pay)
        .tool(close)
        .tool(big)
        .tool(ask)
        .tool(wire)
        // ToolApproval holds `wire` (no rule): its owner answers.
        .middleware(ToolApproval::allow(["payBill", "closeAccount", "payBig", "askField"]).into_middleware())
        .approval_policy(policy())
        .store(store)
        .build()
        .unwrap()
}

/// `support`: hands every message to `desk` as a sub-agent.
fn support(store: Arc<dyn SessionStore>, effects: &Arc<Effects>) -> Agent {
    let model = ScriptedModel::from_fn("scripted/support", |request, _| {
        let last = request.messages.last()?;
        if last.role == holdpoint::Role::Tool {
            return Some(ScriptedTurn::text("handled"));
        }
        Some(ScriptedTurn::tool_call("desk", json!({"input": last.text()})))
    });
    Agent::builder("support")
        .model(Arc::new(model))
        .subagent(desk(Arc::clone(&store), effects))
        .approval_policy(policy())
        .store(store)
        .build()
        .unwrap()
}

struct Bank {
    server: TestServer,
    store: Arc<dyn SessionStore>,
    effects: Arc<Effects>,
    _dir: tempfile::TempDir,
}

async fn start() -> Bank {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = holdpoint_stores::SqliteStore::open(dir.path().join("decisions.db"))
        .await
        .unwrap();
    let store: Arc<dyn SessionStore> = Arc::new(sqlite);
    let effects = Arc::new(Effects::default());
    let server = Server::builder()
        .agent(desk(Arc::clone(&store), &effects))
        .agent(support(Arc::clone(&store), &effects))
        .provider(Arc::new(Keys))
        .signing_keys(holdpoint_server::signing::KeyRing::ephemeral().unwrap())
        .build()
        .unwrap();
    Bank {
        server: TestServer::start(server).await,
        store,
        effects,
        _dir: dir,
    }
}

/// Everything a refusal must leave as it was.
#[derive(Debug, PartialEq)]
struct State {
    snapshots: Vec<Snapshot>,
    audit: usize,
    grants: usize,
}

async fn state(store: &dyn SessionStore) -> State {
    let (snapshots, audit) = dump(store).await;
    let grants = store
        .capabilities()
        .grants()
        .unwrap()
        .list_grants(&GrantQuery {
            limit: Some(10_000),
            ..GrantQuery::default()
        })
        .await
        .unwrap()
        .len();
    State {
        snapshots,
        audit,
        grants,
    }
}

impl Bank {
    async fn ask(&self, agent: &str, who: &str, text: &str) -> Value {
        let (code, body) = self
            .server
            .post(&format!("/agents/{agent}"), json!({"data": user(text)}), Some(who))
            .await;
        assert_eq!(code, 200, "{body:#}");
        body["result"].clone()
    }

    async fn answer(&self, agent: &str, who: &str, data: Value) -> (reqwest::StatusCode, Value) {
        self.server
            .post(&format!("/agents/{agent}/answer"), json!({"data": data}), Some(who))
            .await
    }

    /// Runs `request`, expecting a refusal with `code`/`status`/`part`
    /// (code 200: Genkit's failed output of a resume that does not fit),
    /// and checks that the store is exactly as before.
    async fn refused<F>(&self, request: F, code: u16, status: &str, part: &str)
    where
        F: std::future::Future<Output = (reqwest::StatusCode, Value)>,
    {
        let before = state(self.store.as_ref()).await;
        let got = request.await;
        if code == 200 {
            assert_eq!(got.0, 200, "{:#}", got.1);
            assert_eq!(got.1["result"]["finishReason"], "failed", "{:#}", got.1);
            assert_eq!(got.1["result"]["error"]["status"], status, "{:#}", got.1);
            let message = got.1["result"]["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains(part), "{message}");
        } else {
            assert_error(&got, code, status, part);
        }
        assert_eq!(state(self.store.as_ref()).await, before, "a refusal changed the store");
    }
}

#[tokio::test]
async fn an_owners_grant_never_lets_another_persons_call_through() {
    let bank = start().await;
    let held = bank.ask("desk", "alice", "close savings").await;
    assert_eq!(held["finishReason"], "interrupted", "{held:#}");
    let snapshot = held["snapshotId"].clone();

    // As owner under self-approval, alice may not grant for everyone's calls.
    bank.refused(
        bank.answer(
            "desk",
            "alice",
            json!({"snapshotId": snapshot, "decision": "approve", "grant": {"scope": "tool"}}),
        ),
        403,
        "PERMISSION_DENIED",
        "manager",
    )
    .await;
    // Her own sessions: yes.
    let (code, done) = bank
        .answer(
            "desk",
            "alice",
            json!({"snapshotId": snapshot, "decision": "approve", "grant": {"scope": "principal"}}),
        )
        .await;
    assert_eq!(code, 200, "{done:#}");
    assert_eq!(done["result"]["grant"]["grantedBy"], "alice");
    assert_eq!(bank.effects.closed.load(Ordering::SeqCst), 1);

    // bob's closure is held for a manager: alice's grant is not his.
    let bobs = bank.ask("desk", "bob", "close checking").await;
    assert_eq!(bobs["finishReason"], "interrupted", "{bobs:#}");
    assert_eq!(bank.effects.closed.load(Ordering::SeqCst), 1);
    // alice's next one runs on her grant.
    let hers = bank.ask("desk", "alice", "close checking").await;
    assert_eq!(hers["finishReason"], "stop", "{hers:#}");
    assert_eq!(bank.effects.closed.load(Ordering::SeqCst), 2);

    // A manager's tool-wide grant covers bob's call.
    let (code, body) = bank
        .answer(
            "desk",
            "mia",
            json!({"snapshotId": bobs["snapshotId"], "decision": "approve", "grant": {"scope": "tool"}}),
        )
        .await;
    assert_eq!(code, 200, "{body:#}");
    let next = bank.ask("desk", "bob", "close brokerage").await;
    assert_eq!(next["finishReason"], "stop", "{next:#}");
    assert_eq!(bank.effects.closed.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn a_malformed_answer_is_refused_before_the_claim_and_the_hold_stays_answerable() {
    let bank = start().await;
    let held = bank.ask("desk", "alice", "pay 250").await;
    let id = held["snapshotId"].clone();
    let part = paused_part(&held);
    let resume =
        |directive: Value, key: &str| json!({"data": {"resume": {key: [directive]}}, "init": {"snapshotId": id}});

    // A respond output that breaks payBill's output schema.
    let bad_output =
        json!({"toolResponse": {"name": "payBill", "ref": part["toolRequest"]["ref"], "output": {"paid": "lots"}}});
    bank.refused(
        bank.server
            .post("/agents/desk", resume(bad_output, "respond"), Some("fiona")),
        200,
        "INVALID_ARGUMENT",
        "/paid",
    )
    .await;
    // A replaced input that breaks its input schema.
    let mut edited = restart(&part, json!({"toolApproved": true}));
    edited["toolRequest"]["input"] = json!({"amount": -5});
    edited["metadata"]["replacedInput"] = part["toolRequest"]["input"].clone();
    bank.refused(
        bank.server
            .post("/agents/desk", resume(edited, "restart"), Some("fiona")),
        200,
        "INVALID_ARGUMENT",
        "replaced input",
    )
    .await;
    // An approval that is not a boolean.
    bank.refused(
        bank.server.post(
            "/agents/desk",
            resume(restart(&part, json!({"toolApproved": "yes"})), "restart"),
            Some("fiona"),
        ),
        200,
        "INVALID_ARGUMENT",
        "toolApproved",
    )
    .await;
    assert_eq!(bank.effects.paid.load(Ordering::SeqCst), 0);

    // The correct answer still works.
    let good = json!({"toolResponse": {"name": "payBill", "ref": part["toolRequest"]["ref"], "output": {"paid": 0}}});
    let (code, body) = bank
        .server
        .post("/agents/desk", resume(good, "respond"), Some("fiona"))
        .await;
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"]["finishReason"], "stop", "{body:#}");
}

#[tokio::test]
async fn approvers_edit_and_respond_others_refused_with_the_rule() {
    let bank = start().await;
    let held = bank.ask("desk", "alice", "pay 900").await;
    let id = held["snapshotId"].clone();
    let part = paused_part(&held);
    let respond = json!({"data": {"resume": {"respond": [{"toolResponse": {"name": "payBill", "ref": part["toolRequest"]["ref"], "output": {"paid": 0}}}]}}, "init": {"snapshotId": id}});

    // The owner is excluded by the rule: 403 naming it, nothing changes.
    bank.refused(
        bank.server.post("/agents/desk", respond.clone(), Some("alice")),
        403,
        "PERMISSION_DENIED",
        "bills",
    )
    .await;
    // Another role cannot even see it.
    bank.refused(
        bank.server.post("/agents/desk", respond.clone(), Some("mia")),
        404,
        "NOT_FOUND",
        "not found",
    )
    .await;

    // finance edits it: the revised call is held again by the rule.
    let mut edited = restart(&part, json!({"toolApproved": true}));
    edited["toolRequest"]["input"] = json!({"amount": 90});
    edited["metadata"]["replacedInput"] = part["toolRequest"]["input"].clone();
    let (code, body) = bank
        .server
        .post(
            "/agents/desk",
            json!({"data": {"resume": {"restart": [edited]}}, "init": {"snapshotId": id}}),
            Some("fiona"),
        )
        .await;
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"]["finishReason"], "interrupted", "{body:#}");
    assert_eq!(bank.effects.paid.load(Ordering::SeqCst), 0);
    // The revised snapshot is still alice's, and frank may respond instead.
    let revised = body["result"].clone();
    let stored = bank
        .store
        .get_snapshot(revised["snapshotId"].as_str().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.owner.as_deref(), Some("alice"));
    let part = paused_part(&revised);
    let (code, body) = bank
        .server
        .post(
            "/agents/desk",
            json!({"data": {"resume": {"respond": [{"toolResponse": {"name": "payBill", "ref": part["toolRequest"]["ref"], "output": {"paid": 0}}}]}}, "init": {"snapshotId": revised["snapshotId"]}}),
            Some("frank"),
        )
        .await;
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"]["finishReason"], "stop", "{body:#}");
    assert_eq!(bank.effects.paid.load(Ordering::SeqCst), 0, "responded, never run");
}

#[tokio::test]
async fn a_sub_agents_hold_is_answered_at_the_root_by_the_rules_approvers_only() {
    let bank = start().await;
    let held = bank.ask("support", "alice", "pay 5000").await;
    assert_eq!(held["finishReason"], "interrupted", "{held:#}");
    let root = held["snapshotId"].as_str().unwrap().to_owned();

    // finance reads the root and sees the surfaced hold listed.
    let (code, snap) = bank
        .server
        .post(
            "/agents/support/getSnapshot",
            json!({"data": {"snapshotId": root}}),
            Some("fiona"),
        )
        .await;
    assert_eq!(code, 200, "{snap:#}");
    let (code, _) = bank
        .server
        .post(
            "/agents/support/getSnapshot",
            json!({"data": {"snapshotId": root}}),
            Some("mia"),
        )
        .await;
    assert_eq!(code, 404, "another role does not see it");
    let (code, listed) = bank.server.get("/agents/support/pending", Some("fiona")).await;
    assert_eq!(code, 200, "{listed:#}");
    let call = listed["result"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["snapshotId"] == json!(root))
        .cloned()
        .unwrap_or_else(|| panic!("not listed: {listed:#}"));
    let data = json!({"snapshotId": root, "ref": call["ref"], "decision": "approve"});

    // The owner's approval is refused at the root: nothing claimed at any level.
    bank.refused(
        bank.answer("support", "alice", data.clone()),
        403,
        "PERMISSION_DENIED",
        "bills",
    )
    .await;
    // Another role does not see it at all.
    bank.refused(
        bank.answer("support", "mia", data.clone()),
        404,
        "NOT_FOUND",
        "not found",
    )
    .await;
    assert_eq!(bank.effects.paid.load(Ordering::SeqCst), 0);

    let (code, done) = bank.answer("support", "fiona", data).await;
    assert_eq!(code, 200, "{done:#}");
    assert_eq!(done["result"]["output"]["finishReason"], "stop", "{done:#}");
    assert_eq!(bank.effects.paid.load(Ordering::SeqCst), 1);
}

/// Finding 9: a rule's approvers read each other's decisions on the holds
/// they may see; a customer reads only their own; `operator` reads all.
#[tokio::test]
async fn approvers_read_their_teams_decisions_and_operators_read_all() {
    let bank = start().await;
    for (who, approver) in [("alice", "fiona"), ("bob", "frank")] {
        let held = bank.ask("desk", who, "pay 70").await;
        let (code, body) = bank
            .answer(
                "desk",
                approver,
                json!({"snapshotId": held["snapshotId"], "decision": "approve"}),
            )
            .await;
        assert_eq!(code, 200, "{body:#}");
    }
    let actors = |body: &Value| -> Vec<String> {
        let mut a: Vec<String> = body["result"]["items"]
            .as_array()
            .unwrap_or_else(|| panic!("{body:#}"))
            .iter()
            .filter_map(|r| r["actor"].as_str().map(str::to_owned))
            .collect();
        a.sort();
        a.dedup();
        a
    };
    let (code, fiona) = bank.server.get("/audit", Some("fiona")).await;
    assert_eq!(code, 200, "{fiona:#}");
    assert_eq!(actors(&fiona), ["fiona", "frank"], "the team's work: {fiona:#}");
    let (_, alice) = bank.server.get("/audit", Some("alice")).await;
    assert_eq!(actors(&alice), ["fiona"], "her own hold only: {alice:#}");
    let (_, mia) = bank.server.get("/audit", Some("mia")).await;
    assert_eq!(actors(&mia), Vec::<String>::new(), "another role: {mia:#}");
    let (_, opal) = bank.server.get("/audit", Some("opal")).await;
    assert_eq!(actors(&opal), ["fiona", "frank"], "operator: {opal:#}");
}

/// A hold of the matrix (docs/reference.md §10.10): how to raise it and
/// the respond output that fits its tool.
#[derive(Debug, Clone, Copy)]
enum Hold {
    /// `bills`: finance, self-approval off.
    Bills,
    /// `close`: managers, self-approval on.
    Close,
    /// `big`: two finance approvals, self-approval off.
    Quorum,
    /// The tool's own question, no rule.
    Direct,
    /// `bills`, raised inside the `desk` sub-agent of `support`.
    Surfaced,
    /// ToolApproval's hold, no rule.
    Gated,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Action {
    Approve,
    Deny,
    Respond,
    Read,
    List,
    /// An approval asking for a `session` grant.
    GrantSession,
    /// An approval asking for a `tool` grant.
    GrantTool,
    /// A new message on the held session.
    Abandon,
}

/// What a cell comes to.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Outcome {
    /// 200, the hold decided (or read, or listed).
    Done,
    /// 200, one approval recorded toward the quorum.
    Recorded,
    /// The answer does not decode for the tool: 400 `INVALID_ARGUMENT`
    /// (a 200 failed output from `POST /agents/{name}`), nothing written.
    Misfit,
    /// 400 `FAILED_PRECONDITION`: no grant stands in for this hold.
    Precondition,
    /// 403 naming the rule, nothing written.
    Denied,
    /// 404 (read, answer) or absent from the listing, nothing written.
    Hidden,
}

impl Hold {
    fn agent(self) -> &'static str {
        match self {
            Hold::Surfaced => "support",
            _ => "desk",
        }
    }

    fn message(self) -> &'static str {
        match self {
            Hold::Bills | Hold::Surfaced => "pay 40",
            Hold::Close => "close savings",
            Hold::Quorum => "big 40000",
            Hold::Direct => "ask branch",
            Hold::Gated => "wire 40",
        }
    }

    fn output(self) -> Value {
        match self {
            Hold::Close => json!({"closed": "by hand"}),
            Hold::Direct => json!("north"),
            _ => json!({"paid": 0}),
        }
    }

    /// Who may answer it: the roles the rule names; the owner alice only
    /// under self-approval, or when no rule governs it.
    fn answers(self, actor: &str) -> Outcome {
        let (approvers, self_approval): (&[&str], bool) = match self {
            Hold::Bills | Hold::Quorum | Hold::Surfaced => (&["fiona", "frank"], false),
            Hold::Close => (&["mia"], true),
            Hold::Direct | Hold::Gated => (&[], true),
        };
        if actor == "alice" {
            return if self_approval { Outcome::Done } else { Outcome::Denied };
        }
        if approvers.contains(&actor) {
            Outcome::Done
        } else {
            Outcome::Hidden
        }
    }

    fn expect(self, actor: &str, action: Action) -> Outcome {
        let answers = self.answers(actor);
        let sees = actor == "alice" || answers == Outcome::Done;
        match action {
            Action::Read | Action::List => {
                if sees {
                    Outcome::Done
                } else {
                    Outcome::Hidden
                }
            }
            // A rule-less tool question decodes only its own resume type:
            // an approval's `toolApproved` does not fit it.
            Action::Approve | Action::Deny if matches!(self, Hold::Direct) && answers == Outcome::Done => {
                Outcome::Misfit
            }
            Action::Approve if matches!(self, Hold::Quorum) && answers == Outcome::Done => Outcome::Recorded,
            // A grant is checked after the answer itself: only a rule's
            // quorum-1 hold takes one, and a tool-wide one needs a role.
            Action::GrantSession | Action::GrantTool if answers == Outcome::Done => match self {
                Hold::Direct => Outcome::Misfit,
                Hold::Gated | Hold::Quorum => Outcome::Precondition,
                _ if action == Action::GrantTool && actor == "alice" => Outcome::Denied,
                _ => Outcome::Done,
            },
            // Only the owner's own messages go on in a session.
            Action::Abandon => {
                if actor == "alice" {
                    Outcome::Done
                } else {
                    Outcome::Hidden
                }
            }
            _ => answers,
        }
    }
}

/// Every cell of the matrix's answerable rows, over HTTP on SQLite: each
/// on a fresh hold of alice's, each refusal leaving the store as it was.
#[tokio::test]
async fn the_decision_matrix_cell_by_cell() {
    let bank = start().await;
    let holds = [
        Hold::Bills,
        Hold::Close,
        Hold::Quorum,
        Hold::Direct,
        Hold::Surfaced,
        Hold::Gated,
    ];
    let actors = ["alice", "fiona", "mia", "opal", "bob"];
    let actions = [
        Action::Approve,
        Action::Deny,
        Action::Respond,
        Action::Read,
        Action::List,
        Action::GrantSession,
        Action::GrantTool,
        Action::Abandon,
    ];
    let mut cells = 0;
    for hold in holds {
        for actor in actors {
            for action in actions {
                let held = bank.ask(hold.agent(), "alice", hold.message()).await;
                assert_eq!(held["finishReason"], "interrupted", "{hold:?}: {held:#}");
                let id = held["snapshotId"].as_str().unwrap().to_owned();
                let agent = hold.agent();
                // The paused call as its listing shows it (the compound ref
                // of a surfaced hold).
                let (_, owner_list) = bank
                    .server
                    .get(&format!("/agents/{agent}/pending"), Some("alice"))
                    .await;
                let call = owner_list["result"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|c| c["snapshotId"] == json!(id))
                    .cloned()
                    .unwrap_or_else(|| panic!("{hold:?} not listed for its owner: {owner_list:#}"));
                let before = state(bank.store.as_ref()).await;
                let want = hold.expect(actor, action);
                let cell = format!("{hold:?} × {actor} × {action:?} (want {want:?})");
                let got: Outcome = match action {
                    Action::Read => {
                        let (code, _) = bank
                            .server
                            .post(
                                &format!("/agents/{agent}/getSnapshot"),
                                json!({"data": {"snapshotId": id}}),
                                Some(actor),
                            )
                            .await;
                        match code.as_u16() {
                            200 => Outcome::Done,
                            404 => Outcome::Hidden,
                            other => panic!("{cell}: {other}"),
                        }
                    }
                    Action::List => {
                        let (code, body) = bank.server.get(&format!("/agents/{agent}/pending"), Some(actor)).await;
                        assert_eq!(code, 200, "{cell}: {body:#}");
                        let listed = body["result"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .any(|c| c["snapshotId"] == json!(id));
                        if listed { Outcome::Done } else { Outcome::Hidden }
                    }
                    Action::Approve | Action::Deny | Action::GrantSession | Action::GrantTool => {
                        let mut data = json!({"snapshotId": id, "ref": call["ref"], "decision": "approve"});
                        match action {
                            Action::Deny => data["decision"] = json!("deny"),
                            Action::GrantSession => data["grant"] = json!({"scope": "session"}),
                            Action::GrantTool => data["grant"] = json!({"scope": "tool"}),
                            _ => {}
                        }
                        let (code, body) = bank.answer(agent, actor, data).await;
                        match code.as_u16() {
                            200 if body["result"]["decided"] == json!(false) => Outcome::Recorded,
                            200 => Outcome::Done,
                            400 if body["error"]["status"] == "FAILED_PRECONDITION" => Outcome::Precondition,
                            400 => {
                                let message = body["error"]["message"].as_str().unwrap_or_default();
                                assert!(message.contains("ApprovalReply"), "{cell}: says what to add: {message}");
                                Outcome::Misfit
                            }
                            403 => Outcome::Denied,
                            404 => Outcome::Hidden,
                            other => panic!("{cell}: {other} {body:#}"),
                        }
                    }
                    Action::Abandon => {
                        let (code, body) = bank
                            .server
                            .post(
                                &format!("/agents/{agent}"),
                                json!({"data": user("close checking"), "init": {"sessionId": held["sessionId"]}}),
                                Some(actor),
                            )
                            .await;
                        match code.as_u16() {
                            200 => Outcome::Done,
                            404 => Outcome::Hidden,
                            other => panic!("{cell}: {other} {body:#}"),
                        }
                    }
                    Action::Respond => {
                        let part = json!({"toolResponse": {"name": call["tool"], "ref": call["ref"], "output": hold.output()}});
                        let (code, body) = bank
                            .server
                            .post(
                                &format!("/agents/{agent}"),
                                json!({"data": {"resume": {"respond": [part]}}, "init": {"snapshotId": id}}),
                                Some(actor),
                            )
                            .await;
                        match code.as_u16() {
                            200 if body["result"]["finishReason"] == "failed" => Outcome::Misfit,
                            200 => Outcome::Done,
                            403 => Outcome::Denied,
                            404 => Outcome::Hidden,
                            other => panic!("{cell}: {other} {body:#}"),
                        }
                    }
                };
                assert_eq!(got, want, "{cell}");
                let after = state(bank.store.as_ref()).await;
                match got {
                    Outcome::Done if matches!(action, Action::Read | Action::List) => {
                        assert_eq!(after, before, "{cell}: a read wrote")
                    }
                    Outcome::Done | Outcome::Recorded => assert_ne!(after, before, "{cell}: nothing recorded"),
                    _ => assert_eq!(after, before, "{cell}: a refusal changed the store"),
                }
                // Each cell starts without standing grants: a tool-wide one
                // would let the next cell's call through.
                for grant in bank
                    .store
                    .capabilities()
                    .grants()
                    .unwrap()
                    .list_grants(&GrantQuery::default())
                    .await
                    .unwrap()
                {
                    if grant.revoked_at.is_none() {
                        bank.store
                            .capabilities()
                            .grants()
                            .unwrap()
                            .revoke_grant(&grant.id, "test", chrono::Utc::now())
                            .await
                            .unwrap();
                    }
                }
                cells += 1;
            }
        }
    }
    assert_eq!(cells, 240);
}

/// A sub-agent's hold under a quorum rule with self-approval off: the
/// approvals are recorded at the root, the owner is refused, the second
/// approver decides it, and the call runs once.
#[tokio::test]
async fn a_surfaced_hold_under_a_quorum_rule_needs_two_approvers_at_the_root() {
    let bank = start().await;
    let held = bank.ask("support", "alice", "big 40000").await;
    assert_eq!(held["finishReason"], "interrupted", "{held:#}");
    let root = held["snapshotId"].as_str().unwrap().to_owned();
    let (_, listed) = bank.server.get("/agents/support/pending", Some("fiona")).await;
    let call = listed["result"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["snapshotId"] == json!(root))
        .cloned()
        .unwrap_or_else(|| panic!("{listed:#}"));
    assert_eq!(call["rule"]["quorum"], 2, "{call:#}");
    let data = json!({"snapshotId": root, "ref": call["ref"], "decision": "approve"});

    bank.refused(
        bank.answer("support", "alice", data.clone()),
        403,
        "PERMISSION_DENIED",
        "big",
    )
    .await;
    let (code, first) = bank.answer("support", "fiona", data.clone()).await;
    assert_eq!(code, 200, "{first:#}");
    assert_eq!(first["result"]["decided"], false, "{first:#}");
    assert_eq!(bank.effects.paid.load(Ordering::SeqCst), 0);
    // A hand-written resume cannot complete it short of the quorum.
    let part = json!({"toolRequest": {"name": call["tool"], "ref": call["ref"], "input": call["input"]}, "metadata": {"resumed": {"toolApproved": true}}});
    bank.refused(
        bank.server.post(
            "/agents/support",
            json!({"data": {"resume": {"restart": [part]}}, "init": {"snapshotId": root}}),
            Some("fiona"),
        ),
        200,
        "FAILED_PRECONDITION",
        "2 distinct approvals",
    )
    .await;

    let (code, done) = bank.answer("support", "frank", data).await;
    assert_eq!(code, 200, "{done:#}");
    assert_eq!(done["result"]["decided"], true, "{done:#}");
    assert_eq!(done["result"]["output"]["finishReason"], "stop", "{done:#}");
    assert_eq!(bank.effects.paid.load(Ordering::SeqCst), 1);
}

/// A standing grant given at the root for a sub-agent's hold is the
/// child's: alice's later payment through `support` runs on it, bob's is
/// still held for finance.
#[tokio::test]
async fn a_grant_from_a_surfaced_hold_covers_the_childs_later_calls_of_that_owner() {
    let bank = start().await;
    let held = bank.ask("support", "alice", "pay 40").await;
    let root = held["snapshotId"].as_str().unwrap().to_owned();
    let (_, listed) = bank.server.get("/agents/support/pending", Some("fiona")).await;
    let call = listed["result"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["snapshotId"] == json!(root))
        .cloned()
        .unwrap_or_else(|| panic!("{listed:#}"));
    let (code, done) = bank
        .answer(
            "support",
            "fiona",
            json!({"snapshotId": root, "ref": call["ref"], "decision": "approve", "grant": {"scope": "principal", "uses": 1}}),
        )
        .await;
    assert_eq!(code, 200, "{done:#}");
    assert_eq!(done["result"]["grant"]["agent"], "desk", "{done:#}");
    assert_eq!(bank.effects.paid.load(Ordering::SeqCst), 1);

    let bobs = bank.ask("support", "bob", "pay 41").await;
    assert_eq!(bobs["finishReason"], "interrupted", "not bob's grant: {bobs:#}");
    let hers = bank.ask("support", "alice", "pay 42").await;
    assert_eq!(hers["finishReason"], "stop", "her grant: {hers:#}");
    assert_eq!(bank.effects.paid.load(Ordering::SeqCst), 2);
    let again = bank.ask("support", "alice", "pay 43").await;
    assert_eq!(again["finishReason"], "interrupted", "one use only: {again:#}");
}

/// Finding 7 over HTTP: after a crash mid-resume, finance and the operator
/// list the call in doubt and finance settles it; the owner the rule
/// excluded neither lists nor settles it (403 naming the rule, nothing
/// written), another role sees nothing.
#[tokio::test]
async fn calls_in_doubt_go_to_the_rules_approvers_and_operators() {
    let bank = start().await;
    let held = bank.ask("desk", "alice", "pay 60").await;
    let id = held["snapshotId"].as_str().unwrap().to_owned();
    let part = paused_part(&held);
    // A resume claimed it and its process died: the claim lapsed.
    bank.store
        .claim_resume(
            holdpoint::session::ResumeClaim {
                snapshot_id: id.clone(),
                lease_until: chrono::Utc::now() - chrono::Duration::seconds(1),
                takeover: false,
            },
            Vec::new(),
        )
        .await
        .unwrap();
    let listed = |who: &'static str| {
        let server = &bank.server;
        let id = id.clone();
        async move {
            let (code, body) = server.get("/agents/desk/inDoubt", Some(who)).await;
            assert_eq!(code, 200, "{body:#}");
            body["result"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|c| c["snapshotId"] == json!(id))
                .count()
        }
    };
    assert_eq!(listed("alice").await, 0, "the rule excluded her");
    assert_eq!(listed("mia").await, 0, "another role");
    assert_eq!(listed("fiona").await, 1);
    assert_eq!(listed("opal").await, 1, "operator");

    let settle = json!({"data": {"snapshotId": id, "resume": {"respond": [{"toolResponse": {"name": "payBill", "ref": part["toolRequest"]["ref"], "output": {"paid": 60}}}]}}});
    bank.refused(
        bank.server.post("/agents/desk/settle", settle.clone(), Some("alice")),
        403,
        "PERMISSION_DENIED",
        "bills",
    )
    .await;
    bank.refused(
        bank.server.post("/agents/desk/settle", settle.clone(), Some("mia")),
        404,
        "NOT_FOUND",
        "not found",
    )
    .await;
    let (code, body) = bank.server.post("/agents/desk/settle", settle, Some("fiona")).await;
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"]["finishReason"], "stop", "{body:#}");
    assert_eq!(
        bank.effects.paid.load(Ordering::SeqCst),
        0,
        "settled with what happened, not re-run"
    );
    assert_eq!(listed("fiona").await, 0);
}
