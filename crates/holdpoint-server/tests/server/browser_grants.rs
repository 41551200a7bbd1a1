//! Standing grants, confirmation, withdrawal, deny reasons and the audit
//! on the approval page (issue 34 items 11, 12, 14), in headless Chromium
//! over WebDriver, as a person drives them. Skipped with a loud note when
//! chromedriver is missing, unless `CI=true`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use fantoccini::Locator;
use holdpoint_server::Server;
use serde_json::{Value, json};

use crate::inbox_round2::{payer, policy};
use crate::page::{Page, WAIT};
use crate::support::*;

impl Page {
    /// Picks the option with `value` of the select `css`, as a person does.
    async fn choose(&self, css: &str, value: &str) {
        let select = self
            .client
            .wait()
            .at_most(WAIT)
            .for_element(Locator::Css(css))
            .await
            .unwrap();
        select.select_by_value(value).await.unwrap();
    }

    async fn shown(&self, css: &str) -> bool {
        self.js(&format!(
            "const e = document.querySelector(\"{css}\"); return !!e && e.offsetParent !== null;"
        ))
        .await
            == json!(true)
    }
}

/// A bearer token is the principal's name: olga and pete are in finance,
/// everyone else a customer.
struct Names;

#[async_trait::async_trait]
impl holdpoint_server::auth::ContextProvider for Names {
    async fn authenticate(
        &self,
        request: &axum::http::request::Parts,
    ) -> Result<Option<holdpoint_server::auth::Identity>, holdpoint_server::auth::AuthError> {
        let Some(name) = request
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
        else {
            return Ok(None);
        };
        let identity = holdpoint_server::auth::Identity::new(name);
        Ok(Some(match name {
            "olga" | "pete" => identity.with_roles(["finance"]),
            _ => identity.with_roles(["customer"]),
        }))
    }
}

async fn start(paid: &Arc<AtomicUsize>) -> TestServer {
    TestServer::start(
        Server::builder()
            .agent(payer(memory(), paid, policy()))
            .provider(Arc::new(Names))
            .signing_keys(holdpoint_server::signing::KeyRing::ephemeral().unwrap())
            .build()
            .unwrap(),
    )
    .await
}

/// `who` asks to pay `amount`: the turn's result.
async fn pay(s: &TestServer, who: &str, amount: u64) -> Value {
    let (code, body) = read(
        s.client
            .post(s.url("/agents/payer"))
            .bearer_auth(who)
            .json(&json!({"data": user(&amount.to_string())}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(code, 200, "{body:#}");
    body["result"].clone()
}

fn row(held: &Value) -> String {
    format!("li.item[data-snapshot='{}']", held["snapshotId"].as_str().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approver_grants_standing_approval_revokes_it_and_confirms_a_large_amount() {
    let Some(page) =
        Page::start_or_skip("an_approver_grants_standing_approval_revokes_it_and_confirms_a_large_amount").await
    else {
        return;
    };
    let paid = Arc::new(AtomicUsize::new(0));
    let s = start(&paid).await;
    let small = pay(&s, "alice", 40).await;
    let large = pay(&s, "alice", 25_000).await;
    assert_eq!(small["finishReason"], "interrupted");

    page.open(&s.url("/?poll=300"), Some("olga")).await;
    page.click(&row(&small)).await;
    page.wait_text("#detail", &["Approve, and don't ask again"]).await;
    // olga is in finance: every scope the rule allows is offered.
    let offered = page
        .js("return [...document.querySelectorAll('#grant-scope option')].map(o => o.value).join(',');")
        .await;
    assert_eq!(offered, json!(",session,principal,tool"));
    page.choose("#grant-scope", "principal").await;
    page.choose("#grant-ttl", "8h").await;
    page.click("#approve").await;
    // The page moves on to the next hold (the large one) and says on top
    // what the answer did.
    page.wait_text("#detail-title", &["$25,000.00"]).await;
    page.wait_text(
        "#detail #last-answer",
        &[
            "Answered: $40.00",
            "Approved: the call ran.",
            "Later matching calls will not ask",
            "alice's sessions",
            "8 hours",
        ],
    )
    .await;
    assert_eq!(paid.load(Ordering::SeqCst), 1);
    // The grant stands in: alice's next bill runs without a hold.
    let next = pay(&s, "alice", 35).await;
    assert_ne!(next["finishReason"], "interrupted", "{next:#}");
    assert_eq!(paid.load(Ordering::SeqCst), 2);

    // The grants view lists it; revoking holds the next call again.
    page.click("button.tab[data-view='grants']").await;
    page.wait_text(
        ".grant-card",
        &["payBill of payer", "every session of alice", "granted by olga", "bills"],
    )
    .await;
    page.wait_text("#grants-count", &["1"]).await;
    page.click(".grant-card button").await;
    page.wait_text(".grant-card", &["Revoked: later calls are held again."])
        .await;
    let held = pay(&s, "alice", 36).await;
    assert_eq!(held["finishReason"], "interrupted", "{held:#}");

    // The large amount asks for confirmation before anything is sent.
    page.click("button.tab[data-view='inbox']").await;
    page.click(&row(&large)).await;
    page.wait_text("#detail", &["large bills"]).await;
    page.click("#approve").await;
    page.wait_text("#confirm-box", &["Approve", "$25,000.00", "asks you to confirm"])
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        paid.load(Ordering::SeqCst),
        2,
        "nothing is sent before the confirmation"
    );
    page.click("#approve-confirm").await;
    page.wait_text(
        "#detail #last-answer",
        &["Answered: $25,000.00", "Approved: the call ran."],
    )
    .await;
    assert_eq!(paid.load(Ordering::SeqCst), 3);
    page.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_requester_withdraws_and_a_denial_needs_a_preset_reason_and_the_audit_shows_inputs() {
    let Some(page) =
        Page::start_or_skip("the_requester_withdraws_and_a_denial_needs_a_preset_reason_and_the_audit_shows_inputs")
            .await
    else {
        return;
    };
    let paid = Arc::new(AtomicUsize::new(0));
    let s = start(&paid).await;
    let mine = pay(&s, "alice", 50).await;
    let large = pay(&s, "bob", 18_300).await;

    // alice may not approve her own request, but may take it back.
    page.open(&s.url("/?poll=300"), Some("alice")).await;
    page.click(&row(&mine)).await;
    page.wait_text("#detail", &["Withdraw my request"]).await;
    assert_eq!(
        page.js("return document.querySelector('#approve').disabled;").await,
        json!(true)
    );
    page.click("#withdraw").await;
    page.wait_text("#detail-result", &["Withdrawn: you took back your request"])
        .await;
    assert_eq!(paid.load(Ordering::SeqCst), 0);

    // olga: no withdraw button on someone else's hold; a bare denial of
    // the large one asks for a reason; a preset fills it.
    page.open(&s.url("/?poll=300"), Some("olga")).await;
    page.click(&row(&large)).await;
    page.wait_text("#detail", &["large bills", "required to deny"]).await;
    assert!(!page.shown("#withdraw").await);
    page.click("#deny").await;
    page.wait_text("#detail-result", &["A reason is required to deny"])
        .await;
    page.choose("#reason-preset", "Looks like fraud").await;
    page.click("#deny").await;
    page.wait_text("#detail-result", &["Denied with reason \"Looks like fraud\""])
        .await;

    // The audit: what was decided in words, filtered by decision.
    page.click("button.tab[data-view='audit']").await;
    page.wait_text("#audit-table", &["withdraw", "deny"]).await;
    page.wait_text("#audit-table td.audit-input", &["Amount: $18,300.00"])
        .await;
    page.wait_text("#audit-table td.audit-input", &["Amount: $50.00"]).await;
    let hashes = page
        .js("return [...document.querySelectorAll('#audit-table td.audit-input')].some(td => /^input [0-9a-f]/.test(td.textContent));")
        .await;
    assert_eq!(hashes, json!(false), "no hash where the input is known");
    page.choose("#audit-decision", "withdraw").await;
    page.click("#audit-apply").await;
    page.wait_js("const rows = document.querySelectorAll('#audit-table tbody tr'); return rows.length === 1 && rows[0].dataset.decision === 'withdraw';")
        .await;
    // No word of an input is broken across lines, on a phone either.
    page.client.set_window_size(390, 844).await.unwrap();
    page.choose("#audit-decision", "").await;
    page.click("#audit-apply").await;
    page.wait_text("#audit-table td.audit-input", &["Amount: $18,300.00"])
        .await;
    let broken = page
        .js(r#"
            const out = [];
            for (const td of document.querySelectorAll('#audit-table td.audit-input')) {
              const node = td.firstChild;
              if (!node || node.nodeType !== 3) continue;
              const text = node.textContent;
              const re = /\S+/g;
              let m;
              while ((m = re.exec(text))) {
                const r = document.createRange();
                r.setStart(node, m.index);
                r.setEnd(node, m.index + m[0].length);
                const tops = new Set([...r.getClientRects()].map(x => Math.round(x.top)));
                if (tops.size > 1) out.push(m[0]);
              }
            }
            return out;
        "#)
        .await;
    assert_eq!(broken, json!([]), "words broken across lines");
    page.close().await;
}
