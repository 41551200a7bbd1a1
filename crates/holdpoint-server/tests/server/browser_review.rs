//! What the approval page shows of a hold (docs/reference.md §22), in
//! headless Chromium as an approver uses it: the tool's preview ("What
//! will happen") with the secret masked, and a hold too large to review
//! whose Approve is off with the reason while Deny answers it. Skipped
//! with a loud note when chromedriver is missing, unless `CI=true`.

use std::sync::{Arc, Mutex};

use holdpoint::agent::Agent;
use holdpoint::approval::{Policy, RuleSpec};
use holdpoint::review::{HoldView, Preview};
use holdpoint::tool::{DynamicTool, ToolContext};
use holdpoint::{ScriptedModel, ScriptedTurn};
use holdpoint_server::Server;
use holdpoint_server::auth::ApiKeys;
use serde_json::{Value, json};

use crate::page::Page;
use crate::support::*;

const SECRET: &str = "IBAN-PLANTED-SECRET-7788";
const OWNER: &str = "k-review-owner-0123456789";
const FINANCE: &str = "k-review-finance-012345678";

/// `wire` masks its IBAN and previews the wire; a wire whose memo makes
/// the input larger than 400 bytes is not approvable as is. The user's
/// message is the amount, then `long` for a long memo.
fn wirer(ran: Arc<Mutex<Vec<Value>>>) -> Agent {
    let wire = DynamicTool::new(
        "wire",
        "Wires money",
        json!({"type": "object"}),
        move |_ctx: ToolContext, input: Value| {
            ran.lock().unwrap().push(input);
            async move { Ok(json!({"sent": true})) }
        },
    )
    .hold_view(HoldView::new().redact(["iban"]).unwrap().preview(|input| {
        let amount = input["amount"].as_f64().ok_or("no amount")?;
        Ok(Preview::new(format!("Wire ${amount:.2} to Globex"))
            .field("Beneficiary", "Globex Ltd")
            .field("IBAN", input["iban"].as_str().unwrap_or("?"))
            .touches(1))
    }))
    .into_tool();
    let model = ScriptedModel::from_fn("scripted/wirer", |request, _| {
        let last = request.messages.last()?;
        if last.role == holdpoint::Role::Tool {
            return Some(ScriptedTurn::text("sent"));
        }
        let text = last.text();
        let mut words = text.split_whitespace();
        let amount: f64 = words.next()?.parse().ok()?;
        let memo = if words.next() == Some("long") {
            "invoice ".repeat(80)
        } else {
            "invoice 17".to_owned()
        };
        Some(ScriptedTurn::tool_call(
            "wire",
            json!({"amount": amount, "iban": SECRET, "memo": memo}),
        ))
    });
    let policy = Policy::new([RuleSpec {
        name: Some("wires".into()),
        tool: Some("wire".into()),
        approvers: vec!["finance".into()],
        self_approval: false,
        max_review_bytes: Some(400),
        ..RuleSpec::default()
    }])
    .unwrap();
    Agent::builder("wirer")
        .model(Arc::new(model))
        .tool(wire)
        .approval_policy(policy)
        .store(memory())
        .build()
        .unwrap()
}

async fn ask(s: &TestServer, text: &str) -> Value {
    let (code, body) = s.post("/agents/wirer", json!({"data": user(text)}), Some(OWNER)).await;
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"]["finishReason"], "interrupted", "{body:#}");
    body["result"].clone()
}

fn row(held: &Value) -> String {
    format!("li.item[data-snapshot='{}']", held["snapshotId"].as_str().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approver_reads_the_preview_and_cannot_approve_what_is_too_long_to_review() {
    let Some(page) =
        Page::start_or_skip("an_approver_reads_the_preview_and_cannot_approve_what_is_too_long_to_review").await
    else {
        return;
    };
    let ran = Arc::new(Mutex::new(Vec::new()));
    let s = TestServer::start(
        Server::builder()
            .agent(wirer(Arc::clone(&ran)))
            .api_keys(
                ApiKeys::new()
                    .key(OWNER, "alice")
                    .key_with_roles(FINANCE, "fiona", ["finance"]),
            )
            .signing_keys(holdpoint_server::signing::KeyRing::ephemeral().unwrap())
            .build()
            .unwrap(),
    )
    .await;
    let short = ask(&s, "1200").await;
    let long = ask(&s, "900 long").await;

    page.open(&s.url("/?poll=300"), Some(FINANCE)).await;
    // The list's row and the detail's heading are the preview's summary.
    page.wait_text(&row(&short), &["Wire $1200.00 to Globex"]).await;
    page.click(&row(&short)).await;
    page.wait_text("#detail-title", &["Wire $1200.00 to Globex"]).await;
    let preview = page
        .wait_text(
            "#detail section.preview",
            &[
                "What will happen",
                "Beneficiary",
                "Globex Ltd",
                "IBAN",
                "[redacted]",
                "Touches 1 thing",
            ],
        )
        .await;
    assert!(!preview.contains(SECRET), "{preview}");
    let detail = page.text("#detail").await;
    assert!(!detail.contains(SECRET), "the detail shows the secret: {detail}");
    // Nothing on the page carries it, transcript included.
    page.click("#detail .inline-transcript summary").await;
    page.wait_text("#detail .transcript-body", &["wire"]).await;
    let html = page.js("return document.documentElement.outerHTML;").await;
    assert!(
        !html.as_str().unwrap().contains(SECRET),
        "the page's HTML carries the secret"
    );

    // The long one: Approve is off and says why; Deny answers it.
    page.click(&row(&long)).await;
    page.wait_text("#detail-title", &["Wire $900.00 to Globex"]).await;
    page.wait_text(
        "#detail",
        &["cannot be approved as is", "400 bytes", "Deny it, or edit it"],
    )
    .await;
    page.wait_js("return document.querySelector('#approve').disabled === true;")
        .await;
    assert_eq!(
        page.js("return document.querySelector('#deny').disabled;").await,
        json!(false)
    );
    page.click("#deny").await;
    page.wait_text("#detail #last-answer", &["Wire $900.00 to Globex", "Denied"])
        .await;
    assert!(ran.lock().unwrap().is_empty(), "nothing ran");

    // The short one approves and runs with the real IBAN.
    page.click(&row(&short)).await;
    page.wait_js("return document.querySelector('#approve').disabled === false;")
        .await;
    page.click("#approve").await;
    // The last hold: nothing to move on to, the detail keeps its outcome.
    page.wait_text("#detail-result", &["Approved: the call ran"]).await;
    let ran = ran.lock().unwrap().clone();
    assert_eq!(ran.len(), 1);
    assert_eq!(ran[0]["iban"], SECRET);
    page.close().await;
}
