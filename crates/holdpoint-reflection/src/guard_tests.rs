//! The reflection API's defences (issue 32, finding 2): each attack seen
//! against it — a rebound `Host`, a cross-origin `text/plain` run of a
//! gated tool, a cross-origin snapshot read, a `/api/notify` that sends
//! traces away — is refused, a gated tool run from `/api/runAction` is
//! held without running, and what the Genkit CLI and Dev UI send still
//! works.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use holdpoint::agent::{Agent, AgentInit, AgentInput, RunOptions};
use holdpoint::approval::{Policy, RULE_GATE, RuleSpec};
use holdpoint::middleware::{TOOL_APPROVAL, ToolApproval};
use holdpoint::session::InMemoryStore;
use holdpoint::{ResumableTool, ScriptedModel, ScriptedTurn, ToolContext};
use serde_json::{Value, json};
use tower::ServiceExt;

use super::Reflection;
use super::tests::telemetry;

#[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
struct Account {
    account: String,
}

#[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
struct Transfer {
    amount: f64,
}

#[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema, Default)]
struct Approval {
    approved: bool,
}

/// How often each gated tool's side effect ran.
#[derive(Default)]
pub(super) struct SideEffects {
    /// `closeAccount` closed an account.
    pub closed: AtomicUsize,
    /// `wire` sent money.
    pub wired: AtomicUsize,
    /// `transferMoney` moved money (its approved branch).
    pub transferred: AtomicUsize,
}

/// The banking example's gates: `closeAccount` held by ToolApproval (not
/// allowlisted), `wire` allowlisted but held by an approval rule,
/// `transferMoney` asking for approval itself, `getBalance` free. Each
/// gated tool counts its side effect in the returned counters.
pub(super) fn gated_bank() -> (BTreeMap<String, Agent>, ScriptedModel, Arc<SideEffects>) {
    let effects = Arc::new(SideEffects::default());
    let e = Arc::clone(&effects);
    let close = holdpoint::tool(
        "closeAccount",
        "Closes an account for good.",
        move |_ctx: ToolContext, a: Account| {
            let e = Arc::clone(&e);
            async move {
                e.closed.fetch_add(1, Ordering::SeqCst);
                Ok(json!({"closed": a.account}))
            }
        },
    );
    let e = Arc::clone(&effects);
    let wire = holdpoint::tool("wire", "Wires money abroad.", move |_ctx: ToolContext, _a: Account| {
        let e = Arc::clone(&e);
        async move {
            e.wired.fetch_add(1, Ordering::SeqCst);
            Ok(json!("sent"))
        }
    });
    let e = Arc::clone(&effects);
    let transfer: ResumableTool<Transfer, String, Approval> = ResumableTool::define(
        "transferMoney",
        "Transfers money; needs approval",
        move |ctx: ToolContext, _t: Transfer, approval: Option<Approval>| {
            let e = Arc::clone(&e);
            async move {
                match approval {
                    None => Err(ctx.interrupt(json!({"details": "Transfer $500 to savings"}))),
                    Some(_) => {
                        e.transferred.fetch_add(1, Ordering::SeqCst);
                        Ok("txn-1".to_string())
                    }
                }
            }
        },
    )
    .unwrap();
    let balance = holdpoint::tool(
        "getBalance",
        "The balance of an account",
        |_ctx: ToolContext, a: Account| async move { Ok(format!("{}: $1200", a.account)) },
    );
    let policy = Policy::new([RuleSpec {
        name: Some("wires".into()),
        tool: Some("wire".into()),
        approvers: vec!["finance".into()],
        quorum: 1,
        self_approval: false,
        ..RuleSpec::default()
    }])
    .unwrap();
    let model = ScriptedModel::new("scripted");
    let agent = Agent::builder("bankingAgent")
        .model(Arc::new(model.clone()))
        .tool(close)
        .tool(wire)
        .tool(transfer)
        .tool(balance)
        .middleware(ToolApproval::allow(["getBalance", "transferMoney", "wire"]).into_middleware())
        .approval_policy(policy)
        .store(Arc::new(InMemoryStore::new()))
        .build()
        .unwrap();
    (BTreeMap::from([("bankingAgent".to_owned(), agent)]), model, effects)
}

/// Sends a request with exactly these headers; the answer's status and
/// body (JSON when it parses, else a string).
async fn send(
    app: &axum::Router,
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (StatusCode, Value) {
    let mut request = Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = app
        .clone()
        .oneshot(request.body(Body::from(body.to_owned())).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// The Genkit CLI's headers: a loopback Host, a JSON body, no Origin.
const CLI: &[(&str, &str)] = &[("host", "localhost:3100"), ("content-type", "application/json")];

fn close_savings() -> String {
    json!({"key": "/tool/closeAccount", "input": {"account": "savings"}}).to_string()
}

/// The refusal's JSON error message, whichever of the two shapes (the
/// main server's or the reflection API's) it has.
fn message(body: &Value) -> String {
    body["error"]["message"]
        .as_str()
        .or_else(|| body["message"].as_str())
        .unwrap_or_else(|| panic!("no JSON error message in {body}"))
        .to_owned()
}

#[tokio::test]
async fn a_request_for_a_foreign_host_is_refused() {
    let (agents, _, effects) = gated_bank();
    let app = Reflection::new().router(agents, "rt-1");
    // DNS rebinding: the page's own name, now pointing at 127.0.0.1.
    let (status, body) = send(&app, "GET", "/api/actions", &[("host", "evil.example")], "").await;
    assert_eq!(status, StatusCode::MISDIRECTED_REQUEST, "{body}");
    assert!(message(&body).contains("evil.example"), "{body}");
    for host in ["evil.example:3100", "127.0.0.1.nip.io:3100", "10.0.0.1:3100"] {
        let headers = [("host", host), ("content-type", "application/json")];
        let (status, _) = send(&app, "POST", "/api/runAction", &headers, &close_savings()).await;
        assert_eq!(status, StatusCode::MISDIRECTED_REQUEST, "{host}");
    }
    // No Host at all (HTTP/1.0) is no loopback name either.
    let (status, _) = send(&app, "GET", "/api/actions", &[], "").await;
    assert_eq!(status, StatusCode::MISDIRECTED_REQUEST);
    assert_eq!(effects.closed.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_request_from_a_foreign_origin_is_refused() {
    let (agents, model, effects) = gated_bank();
    // Another principal's session, with a snapshot in the store.
    model.push(ScriptedTurn::text("hello alice"));
    let options = RunOptions::new(AgentInit::new()).principal("alice");
    let alice = agents["bankingAgent"]
        .run_with(AgentInput::text("hi"), options)
        .await
        .unwrap();
    let out = alice.snapshot_id.unwrap();
    let app = Reflection::new().router(agents, "rt-1");
    let snapshot = json!({"key": "/agent-snapshot/bankingAgent", "input": {"snapshotId": out}}).to_string();

    for origin in ["https://evil.example", "null", "http://127.0.0.1.evil.example"] {
        let headers = [
            ("host", "127.0.0.1:3100"),
            ("content-type", "application/json"),
            ("origin", origin),
        ];
        let (status, body) = send(&app, "POST", "/api/runAction", &headers, &snapshot).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{origin}: {body}");
        assert!(message(&body).contains("origin"), "{body}");
        let (status, _) = send(&app, "GET", "/api/actions", &headers[..1], "").await;
        assert_eq!(status, StatusCode::OK, "no Origin, no refusal");
        let with_origin = [headers[0], headers[2]];
        let (status, _) = send(&app, "GET", "/api/actions", &with_origin, "").await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{origin}");
    }
    // The observed attack: a "simple" cross-origin POST (text/plain, no
    // preflight) running closeAccount.
    let headers = [
        ("host", "127.0.0.1:3100"),
        ("content-type", "text/plain"),
        ("origin", "https://evil.example"),
    ];
    let (status, body) = send(&app, "POST", "/api/runAction", &headers, &close_savings()).await;
    assert!(status.is_client_error(), "{status}: {body}");
    assert_ne!(body, json!({"result": {"closed": "savings"}}));
    assert_eq!(effects.closed.load(Ordering::SeqCst), 0, "closeAccount ran");

    // The CLI's own read of the same snapshot still works.
    let (status, body) = send(&app, "POST", "/api/runAction", CLI, &snapshot).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["result"]["snapshotId"], out.as_str(), "{body}");
}

#[tokio::test]
async fn a_post_body_not_declared_json_is_415() {
    let (agents, _, effects) = gated_bank();
    let app = Reflection::new().router(agents, "rt-1");
    for content_type in [
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/jsonx",
    ] {
        let headers = [("host", "127.0.0.1:3100"), ("content-type", content_type)];
        let (status, body) = send(&app, "POST", "/api/runAction", &headers, &close_savings()).await;
        assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{content_type}: {body}");
        let said = message(&body);
        assert!(
            said.contains("application/json") && said.contains(content_type),
            "{said}"
        );
        assert_eq!(body["error"]["status"], "INVALID_ARGUMENT", "{body}");
    }
    // No Content-Type at all (a fetch of a Blob with no type).
    let (status, body) = send(
        &app,
        "POST",
        "/api/runAction",
        &[("host", "127.0.0.1:3100")],
        &close_savings(),
    )
    .await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{body}");
    assert!(message(&body).contains("none was sent"), "{body}");
    for route in ["/api/notify", "/api/cancelAction"] {
        let headers = [("host", "127.0.0.1:3100"), ("content-type", "text/plain")];
        let (status, _) = send(&app, "POST", route, &headers, "{}").await;
        assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{route}");
    }
    assert_eq!(effects.closed.load(Ordering::SeqCst), 0, "closeAccount ran");
}

#[tokio::test]
async fn notify_points_traces_at_loopback_servers_only() {
    let (agents, _, _) = gated_bank();
    let (first, first_traces) = telemetry().await;
    let (second, second_traces) = telemetry().await;
    let app = Reflection::new().router(agents, "rt-1");
    let notify = |url: &str| json!({"telemetryServerUrl": url, "reflectionApiSpecVersion": 1}).to_string();
    let (status, _) = send(&app, "POST", "/api/notify", CLI, &notify(&first)).await;
    assert_eq!(status, StatusCode::OK);

    for away in [
        "http://evil.example:4033",
        "http://127.0.0.1.nip.io:4033",
        "http://10.0.0.1:4033",
        "http://0.0.0.0:4033",
        "https://localhost:4033",
        "http://user@127.0.0.1:4033",
        "ftp://localhost",
        "not a url",
    ] {
        let (status, body) = send(&app, "POST", "/api/notify", CLI, &notify(away)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{away}: {body}");
        assert!(message(&body).contains("telemetry server URL"), "{body}");
    }
    // Traces still go where they went: the run's trace reaches `first`.
    let run = json!({"key": "/tool/getBalance", "input": {"account": "checking"}}).to_string();
    let (status, body) = send(&app, "POST", "/api/runAction", CLI, &run).await;
    assert_eq!(
        (status, &body["result"]),
        (StatusCode::OK, &json!("checking: $1200")),
        "{body}"
    );
    let trace_id = body["telemetry"]["traceId"].as_str().unwrap().to_owned();
    assert!(
        first_traces
            .lock()
            .unwrap()
            .iter()
            .any(|t| t["traceId"] == trace_id.as_str())
    );

    // Another loopback server (as the CLI names its own) is taken.
    let (status, _) = send(
        &app,
        "POST",
        "/api/notify",
        CLI,
        &notify(&second.replace("127.0.0.1", "localhost")),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (_, body) = send(&app, "POST", "/api/runAction", CLI, &run).await;
    let trace_id = body["telemetry"]["traceId"].as_str().unwrap().to_owned();
    assert!(
        second_traces
            .lock()
            .unwrap()
            .iter()
            .any(|t| t["traceId"] == trace_id.as_str())
    );
}

#[test]
fn v2_configure_cannot_send_traces_away_either() {
    let (agents, _, _) = gated_bank();
    let shared = Reflection::new().shared(agents, "rt-1".into());
    shared.set_telemetry("http://127.0.0.1:4033".into());
    shared.set_telemetry("http://evil.example:4033".into());
    assert_eq!(shared.telemetry().as_deref(), Some("http://127.0.0.1:4033"));
    for ok in ["http://localhost:4033", "http://[::1]:4033/", "http://app.localhost"] {
        assert!(super::guard::check_telemetry_url(ok).is_ok(), "{ok}");
    }
}

#[tokio::test]
async fn a_gated_tool_run_from_run_action_is_held_and_does_not_run() {
    let (agents, _, effects) = gated_bank();
    let (base, traces) = telemetry().await;
    let app = Reflection::new().telemetry_server(base).router(agents, "rt-1");

    // Not allowlisted by ToolApproval: held by it, as in a turn.
    let (status, body) = send(&app, "POST", "/api/runAction", CLI, &close_savings()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let error = &body["error"];
    assert_eq!(error["code"], 13, "{body}");
    assert_eq!(error["details"]["interruptedBy"], TOOL_APPROVAL, "{body}");
    assert!(error["message"].as_str().unwrap().contains("closeAccount"), "{body}");
    assert!(
        error["details"]["interrupt"]["message"]
            .as_str()
            .unwrap()
            .contains("closeAccount"),
        "{body}"
    );
    assert!(body.get("result").is_none(), "{body}");
    let trace_id = error["details"]["traceId"].as_str().unwrap().to_owned();
    {
        let traces = traces.lock().unwrap();
        let trace = traces.iter().find(|t| t["traceId"] == trace_id.as_str()).unwrap();
        let root = trace["spans"].as_object().unwrap().values().next().unwrap();
        assert!(root["attributes"]["genkit:metadata:interrupt"].is_string(), "{root}");
    }

    // Streamed, the same.
    let (_, body) = send(&app, "POST", "/api/runAction?stream=true", CLI, &close_savings()).await;
    let last: Value = match &body {
        Value::String(lines) => serde_json::from_str(lines.lines().last().unwrap()).unwrap(),
        frame => frame.clone(),
    };
    assert_eq!(last["error"]["details"]["interruptedBy"], TOOL_APPROVAL, "{body}");

    // Allowlisted, but an approval rule covers it: the rule holds it.
    let wire = json!({"key": "/tool/wire", "input": {"account": "abroad"}}).to_string();
    let (_, body) = send(&app, "POST", "/api/runAction", CLI, &wire).await;
    assert_eq!(body["error"]["details"]["interruptedBy"], RULE_GATE, "{body}");
    assert_eq!(
        body["error"]["details"]["interrupt"]["holdpoint:approvalRule"]["rule"], "wires",
        "{body}"
    );

    // A tool that asks for approval itself interrupts, unapproved.
    let transfer = json!({"key": "/tool/transferMoney", "input": {"amount": 500}}).to_string();
    let (_, body) = send(&app, "POST", "/api/runAction", CLI, &transfer).await;
    assert_eq!(
        body["error"]["details"]["interrupt"]["details"], "Transfer $500 to savings",
        "{body}"
    );
    assert!(body["error"]["details"].get("interruptedBy").is_none(), "{body}");

    assert_eq!(effects.closed.load(Ordering::SeqCst), 0, "closeAccount ran");
    assert_eq!(effects.wired.load(Ordering::SeqCst), 0, "wire ran");
    assert_eq!(
        effects.transferred.load(Ordering::SeqCst),
        0,
        "transferMoney moved money"
    );
}

#[tokio::test]
async fn the_genkit_cli_and_dev_ui_requests_still_work() {
    let (agents, model, effects) = gated_bank();
    model.push(ScriptedTurn::tool_call("closeAccount", json!({"account": "savings"})));
    let (base, _) = telemetry().await;
    let app = Reflection::new().router(agents, "rt-1");
    for host in ["localhost:3100", "127.0.0.1:3100", "[::1]:3100", "localhost"] {
        let (status, body) = send(&app, "GET", "/api/actions", &[("host", host)], "").await;
        assert_eq!(status, StatusCode::OK, "{host}");
        assert!(body["/tool/closeAccount"].is_object(), "{body}");
    }
    // Proxied by the CLI's tools server: a loopback Origin.
    for origin in ["http://localhost:4000", "http://127.0.0.1:4000"] {
        let headers = [("host", "127.0.0.1:3100"), ("origin", origin)];
        let (status, _) = send(&app, "GET", "/api/__health?id=rt-1", &headers, "").await;
        assert_eq!(status, StatusCode::OK, "{origin}");
        let headers = [
            headers[0],
            headers[1],
            ("content-type", "application/json; charset=utf-8"),
        ];
        let run = json!({"key": "/tool/getBalance", "input": {"account": "savings"}}).to_string();
        let (status, body) = send(&app, "POST", "/api/runAction", &headers, &run).await;
        assert_eq!(
            (status, &body["result"]),
            (StatusCode::OK, &json!("savings: $1200")),
            "{body}"
        );
    }
    let (status, body) = send(&app, "GET", "/api/envs", &[("host", "localhost:3100")], "").await;
    assert_eq!((status, body), (StatusCode::OK, json!(["dev"])));
    let notify = json!({"telemetryServerUrl": base, "reflectionApiSpecVersion": 1}).to_string();
    let headers = [("host", "localhost:3100"), ("content-type", "Application/JSON")];
    assert_eq!(
        send(&app, "POST", "/api/notify", &headers, &notify).await.0,
        StatusCode::OK
    );

    // A turn of the agent still pauses on the gated call, and approving it
    // there runs it: the Dev UI's way to run closeAccount.
    let turn = json!({"key": "/agent/bankingAgent", "input": {"message": {"role": "user", "content": [{"text": "close savings"}]}}});
    let (status, body) = send(&app, "POST", "/api/runAction", CLI, &turn.to_string()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["result"]["finishReason"], "interrupted", "{body}");
    assert_eq!(effects.closed.load(Ordering::SeqCst), 0);
}
