//! The approval page at volume in headless Chromium (issue 34 items 5, 6,
//! 7 and 10): rows that say what is at stake, filters and search that find
//! what people type, views in the URL, bulk answers, auto-advance, `j`
//! past the window, new rows held back, and the phone. Skipped with a loud
//! note when chromedriver is missing, unless `CI=true`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use fantoccini::Locator;
use fantoccini::key::Key;
use holdpoint::agent::Agent;
use holdpoint::message::Role;
use holdpoint::session::SessionStore;
use holdpoint::{ScriptedModel, ScriptedTurn};
use holdpoint_server::Server;
use serde_json::{Value, json};

use crate::page::{Page, WAIT};
use crate::support::*;

/// A bearer token is the principal's name: fiona, frank and pete are in
/// finance, cora is the CFO, everyone else a customer.
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
            "fiona" | "frank" | "pete" => identity.with_roles(["finance"]),
            "cora" => identity.with_roles(["cfo"]),
            "opal" => identity.with_roles(["operator"]),
            _ => identity.with_roles(["customer"]),
        }))
    }
}

/// "… $2,400 to acct-77 …" anywhere in the user's words: the amount and
/// the account; the rest of the sentence stays in the request only.
fn parse(text: &str) -> Option<(f64, String)> {
    let (_, rest) = text.split_once('$')?;
    let number: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',' || *c == '.')
        .collect();
    let amount = number.trim_end_matches('.').replace(',', "").parse().ok()?;
    let (_, after) = rest.split_once(" to ")?;
    let to = after.split_whitespace().next()?.trim_end_matches(['.', ',']);
    Some((amount, to.to_owned()))
}

/// The bank under two rules: over 10 000 two of finance (never the
/// owner), anything else one of finance.
fn bank(store: Arc<dyn SessionStore>) -> Agent {
    let policy = holdpoint::approval::Policy::new([
        holdpoint::approval::RuleSpec {
            name: Some("large transfers".into()),
            agent: Some("bankingAgent".into()),
            tool: Some("transferMoney".into()),
            when: Some("input.amount > 10000".into()),
            approvers: vec!["finance".into()],
            quorum: 2,
            self_approval: false,
            ..Default::default()
        },
        holdpoint::approval::RuleSpec {
            name: Some("transfers".into()),
            agent: Some("bankingAgent".into()),
            tool: Some("transferMoney".into()),
            approvers: vec!["finance".into()],
            quorum: 1,
            self_approval: false,
            ..Default::default()
        },
    ])
    .unwrap();
    let model = ScriptedModel::from_fn("scripted/triage", |request, _| {
        let last = request.messages.last()?;
        if last.role == Role::Tool {
            return Some(ScriptedTurn::text("transfer done"));
        }
        let (amount, to) = parse(&last.text())?;
        Some(ScriptedTurn::tool_call(
            "transferMoney",
            json!({"amount": amount, "toAccount": to}),
        ))
    });
    Agent::builder("bankingAgent")
        .description("Moves money after finance approves")
        .model(Arc::new(model))
        .tool(crate::bank::transfer_money())
        .approval_policy(policy)
        .store(store)
        .build()
        .unwrap()
}

async fn server() -> TestServer {
    TestServer::start(
        Server::builder()
            .agent(bank(memory()))
            .provider(Arc::new(Names))
            .build()
            .unwrap(),
    )
    .await
}

async fn raise(s: &TestServer, text: &str, who: &str) -> Value {
    let (code, body) = read(
        s.client
            .post(s.url("/agents/bankingAgent"))
            .bearer_auth(who)
            .json(&json!({"data": user(text)}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"]["finishReason"], "interrupted", "{body:#}");
    body["result"].clone()
}

fn row(hold: &Value) -> String {
    format!("li.item[data-session='{}']", hold["sessionId"].as_str().unwrap())
}

/// The sessions of the rows shown, in order.
async fn shown(page: &Page) -> Vec<String> {
    let v = page
        .js("return [...document.querySelectorAll('#queue li.item')].filter(e => !e.hidden).map(e => e.dataset.session);")
        .await;
    serde_json::from_value(v).unwrap()
}

async fn wait_shown(page: &Page, want: &[&Value]) {
    let want: Vec<String> = want
        .iter()
        .map(|h| h["sessionId"].as_str().unwrap().to_owned())
        .collect();
    let deadline = Instant::now() + WAIT;
    loop {
        let now = shown(page).await;
        if now == want {
            return;
        }
        assert!(Instant::now() < deadline, "rows {now:?}, want {want:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn type_into(page: &Page, css: &str, text: &str) {
    let input = page.client.find(Locator::Css(css)).await.unwrap();
    input.clear().await.unwrap();
    input.send_keys(text).await.unwrap();
}

async fn select(page: &Page, css: &str, value: &str) {
    page.client
        .find(Locator::Css(css))
        .await
        .unwrap()
        .select_by_value(value)
        .await
        .unwrap();
}

async fn url(page: &Page) -> String {
    page.client.current_url().await.unwrap().to_string()
}

/// Item 5: a row says what is at stake, who asks and how far along it is;
/// its heading, its checkbox's label and the detail are built from the
/// hold's summary, and the detail names the requester.
/// Item 6: search finds what people type (formatted amounts, the user's
/// words), filters by amount, requester and rule, views live in the URL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_say_what_is_at_stake_and_filters_find_what_people_type() {
    let Some(page) = Page::start_or_skip("rows_say_what_is_at_stake_and_filters_find_what_people_type").await else {
        return;
    };
    let s = server().await;
    let rent = raise(&s, "Pay the rent please: $2,400 to acct-77", "alice").await;
    let big = raise(&s, "Transfer $18,300 to acct-4471", "bob").await;
    let bigger = raise(&s, "Transfer $25,000 to acct-9", "carl").await;
    page.open(&s.url("/?poll=300"), Some("fiona")).await;
    let text = page
        .wait_text(&row(&big), &["$18,300.00 → acct-4471", "bob", "0/2", "waiting"])
        .await;
    assert!(!text.contains("transferMoney · bankingAgent\n$"), "{text}");
    let heading = page.text(&format!("{} .item-title", row(&big))).await;
    assert_eq!(heading, "$18,300.00 → acct-4471");
    let label = page
        .js(&format!(
            "return document.querySelector(\"{} .pick-box\").getAttribute('aria-label');",
            row(&big)
        ))
        .await;
    assert_eq!(label, json!("Pick for a bulk answer: $18,300.00 → acct-4471, bob"));
    page.wait_text(&row(&rent), &["$2,400.00 → acct-77", "alice"]).await;
    page.click(&row(&big)).await;
    page.wait_text("#detail-title", &["$18,300.00 → acct-4471"]).await;
    page.wait_text("#detail", &["Requested by bob", "transferMoney"]).await;

    // Search as people type it: grouped, with cents and a dollar sign, and
    // the user's own words (not in the input).
    wait_shown(&page, &[&rent, &big, &bigger]).await;
    type_into(&page, "#f-q", "25,000").await;
    wait_shown(&page, &[&bigger]).await;
    type_into(&page, "#f-q", "$25,000.00").await;
    wait_shown(&page, &[&bigger]).await;
    type_into(&page, "#f-q", "rent").await;
    wait_shown(&page, &[&rent]).await;
    assert!(url(&page).await.contains("q=rent"), "the search is in the URL");
    page.client
        .find(Locator::Css("#f-q"))
        .await
        .unwrap()
        .clear()
        .await
        .unwrap();
    page.js("document.getElementById('f-q').dispatchEvent(new Event('input'));")
        .await;
    wait_shown(&page, &[&rent, &big, &bigger]).await;

    // By amount ("10k"), then requester, then rule.
    type_into(&page, "#f-min", "10k").await;
    wait_shown(&page, &[&big, &bigger]).await;
    assert!(url(&page).await.contains("minAmount=10000"), "{}", url(&page).await);
    select(&page, "#f-requester", "bob").await;
    wait_shown(&page, &[&big]).await;
    assert!(url(&page).await.contains("requester=bob"));
    select(&page, "#f-requester", "").await;
    page.client
        .find(Locator::Css("#f-min"))
        .await
        .unwrap()
        .clear()
        .await
        .unwrap();
    page.js("document.getElementById('f-min').dispatchEvent(new Event('change', {bubbles: true}));")
        .await;
    wait_shown(&page, &[&rent, &big, &bigger]).await;
    select(&page, "#f-rule", "transfers").await;
    wait_shown(&page, &[&rent]).await;
    select(&page, "#f-rule", "").await;
    wait_shown(&page, &[&rent, &big, &bigger]).await;

    // A view is a link: "Waiting for me, over $10k", and it reopens as such.
    page.client
        .find(Locator::LinkText("Waiting for me, over $10k"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_shown(&page, &[&big, &bigger]).await;
    let there = url(&page).await;
    assert!(
        there.contains("mine=true") && there.contains("minAmount=10000"),
        "{there}"
    );
    page.open(&s.url("/?mine=true&minAmount=10000&poll=300"), None).await;
    wait_shown(&page, &[&big, &bigger]).await;
    assert_eq!(
        page.js("return document.getElementById('f-mine').checked;").await,
        json!(true)
    );
    assert_eq!(
        page.js("return document.getElementById('f-min').value;").await,
        json!("10000")
    );
    // Saved under a name, it is listed with the others.
    type_into(&page, "#view-name", "big ones").await;
    page.click("#save-view").await;
    page.wait_text("#views", &["big ones"]).await;
    page.close().await;
}

/// Item 7: picked holds answered in bulk, each its own decision and audit
/// row with its own result; "row n of N"; `j` loads past the window;
/// auto-advance; a hold arriving above the cursor waits behind "1 new".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn triage_at_volume_bulk_answers_advance_and_new_rows_wait() {
    let Some(page) = Page::start_or_skip("triage_at_volume_bulk_answers_advance_and_new_rows_wait").await else {
        return;
    };
    let s = server().await;
    let a1 = raise(&s, "Transfer $100 to a1", "alice").await;
    let a2 = raise(&s, "Transfer $200 to a2", "alice").await;
    let a3 = raise(&s, "Transfer $300 to a3", "alice").await;
    let large = raise(&s, "Transfer $50,000 to big", "bob").await;
    // A window of two: j at its end loads the next page and moves into it.
    page.open(&s.url("/?poll=300&page=2"), Some("fiona")).await;
    wait_shown(&page, &[&a1, &a2]).await;
    page.wait_text("#row-position", &["Row 1 of 4"]).await;
    let body = page.client.find(Locator::Css("body")).await.unwrap();
    body.send_keys("j").await.unwrap();
    page.wait_text("#row-position", &["Row 2 of 4"]).await;
    body.send_keys("j").await.unwrap();
    page.wait_text("#row-position", &["Row 3 of 4"]).await;
    page.wait_text(&format!("{}.selected", row(&a3)), &["$300.00 → a3"])
        .await;

    // Pick three (one needs two approvers), approve them in one go.
    for hold in [&a1, &a2, &large] {
        page.click(&format!("{} .pick-box", row(hold))).await;
    }
    page.wait_text("#bulk-count", &["3 holds picked"]).await;
    page.press("//section[@id='bulk']", "Approve 3").await;
    page.wait_text("#bulk-summary", &["Approved 3 of 3"]).await;
    let results = page.text("#bulk-results").await;
    assert!(
        results.contains("$100.00 → a1 · alice — Approved: the call ran."),
        "{results}"
    );
    assert!(
        results.contains("$200.00 → a2 · alice — Approved: the call ran."),
        "{results}"
    );
    assert!(
        results.contains("$50,000.00 → big · bob — 1 of 2: fiona — recorded"),
        "{results}"
    );
    page.wait_text(&row(&a1), &["Approved: the call ran"]).await;
    page.wait_text(&row(&large), &["1/2"]).await;
    // Each hold its own decision and audit row: one approval each, by fiona.
    let (code, audit) = read(
        s.client
            .get(s.url("/audit?agent=bankingAgent&limit=100"))
            .bearer_auth("fiona")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(code, 200, "{audit:#}");
    let approvals: Vec<&Value> = audit["result"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["decision"] == "approve")
        .collect();
    assert_eq!(approvals.len(), 3, "{audit:#}");
    for hold in [&a1, &a2, &large] {
        let n = approvals
            .iter()
            .filter(|r| r["snapshotId"] == hold["snapshotId"])
            .count();
        assert_eq!(n, 1, "one approval of {hold}");
    }

    // Auto-advance (on by default): a3 answered with the keyboard, the next
    // open hold is selected.
    assert_eq!(
        page.js("return document.getElementById('f-advance').checked;").await,
        json!(true)
    );
    page.click(&row(&a3)).await;
    page.wait_text("#detail-title", &["$300.00 → a3"]).await;
    body.send_keys("a").await.unwrap();
    page.wait_js("return document.activeElement && document.activeElement.id === 'approve';")
        .await;
    page.client
        .active_element()
        .await
        .unwrap()
        .send_keys(&char::from(Key::Enter).to_string())
        .await
        .unwrap();
    page.wait_text(&row(&a3), &["Approved: the call ran"]).await;
    page.wait_text(&format!("{}.selected", row(&large)), &["$50,000.00 → big"])
        .await;
    page.wait_text("#detail-title", &["$50,000.00 → big"]).await;
    page.wait_text(
        "#detail #last-answer",
        &["Answered: $300.00 → a3", "Approved: the call ran"],
    )
    .await;
    page.wait_text("#row-position", &["Row 4 of"]).await;

    // Newest first: a hold that arrives above the cursor waits behind "1 new — show".
    let b1 = raise(&s, "Transfer $400 to b1", "carl").await;
    let b2 = raise(&s, "Transfer $500 to b2", "carl").await;
    select(&page, "#f-order", "newest").await;
    // A window of two (page=2): the newest two.
    wait_shown(&page, &[&b2, &b1]).await;
    page.click(&row(&b1)).await;
    page.wait_text("#row-position", &["Row 2 of 3"]).await;
    let fresh = raise(&s, "Transfer $700 to a7", "carl").await;
    page.wait_text("#new-rows", &["1 new — show"]).await;
    assert_eq!(shown(&page).await.len(), 2, "nothing moved under the cursor");
    page.wait_text(&format!("{}.selected", row(&b1)), &["b1"]).await;
    page.click("#new-rows").await;
    wait_shown(&page, &[&fresh, &b2, &b1]).await;
    page.wait_text("#row-position", &["Row 3 of 4"]).await;
    page.close().await;
}

/// Item 7: answering a hold in the detail pane shows the next waiting hold
/// by default, with what the answer did on top and a way back; "Next hold
/// after answering" turns it off, and the page remembers that choice (a
/// preference in localStorage, next to no credential).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answering_a_hold_shows_the_next_one_unless_turned_off() {
    let Some(page) = Page::start_or_skip("answering_a_hold_shows_the_next_one_unless_turned_off").await else {
        return;
    };
    let s = server().await;
    let h1 = raise(&s, "Transfer $100 to n1", "alice").await;
    let h2 = raise(&s, "Transfer $200 to n2", "alice").await;
    let h3 = raise(&s, "Transfer $300 to n3", "alice").await;
    page.open(&s.url("/?poll=300"), Some("fiona")).await;
    wait_shown(&page, &[&h1, &h2, &h3]).await;
    assert_eq!(
        page.js("return document.getElementById('f-advance').checked;").await,
        json!(true),
        "on by default"
    );

    // Approve the first: the second is shown, the first's outcome on top.
    page.click(&row(&h1)).await;
    page.wait_text("#detail-title", &["$100.00 → n1"]).await;
    page.press("//section[@id='detail']", "Approve").await;
    page.wait_text(&format!("{}.selected", row(&h2)), &["$200.00 → n2"])
        .await;
    page.wait_text("#detail-title", &["$200.00 → n2"]).await;
    page.wait_text(
        "#detail #last-answer",
        &["Answered: $100.00 → n1", "Approved: the call ran", "next hold"],
    )
    .await;
    page.wait_text(&row(&h1), &["Approved: the call ran"]).await;
    page.wait_text("#row-position", &["Row 2 of"]).await;
    // The next hold's own Approve is live, and it is a different hold.
    let approve_enabled = page
        .js("const b = document.getElementById('approve'); return !!b && !b.disabled;")
        .await;
    assert_eq!(approve_enabled, json!(true));

    // Deny the second with a reason: the third is shown.
    let reason = page.client.find(Locator::Css("#detail .reason")).await.unwrap();
    reason.send_keys("wrong account").await.unwrap();
    page.press("//section[@id='detail']", "Deny").await;
    page.wait_text("#detail-title", &["$300.00 → n3"]).await;
    page.wait_text("#detail #last-answer", &["Answered: $200.00 → n2", "Denied"])
        .await;

    // "Show it" goes back to the answered hold.
    page.press("//p[@id='last-answer']", "Show it").await;
    page.wait_text("#detail-title", &["$200.00 → n2"]).await;
    page.wait_text("#detail-result", &["Denied"]).await;
    assert_eq!(
        page.js("return !document.getElementById('last-answer');").await,
        json!(true)
    );

    // Turned off, and remembered across a reload (a preference, no credential).
    page.click("#f-advance").await;
    page.client.refresh().await.unwrap();
    page.wait_text(&row(&h3), &["$300.00 → n3"]).await;
    assert_eq!(
        page.js("return document.getElementById('f-advance').checked;").await,
        json!(false)
    );
    let stored = page
        .js("return Object.keys(localStorage).map(k => k + '=' + localStorage.getItem(k));")
        .await;
    assert_eq!(stored, json!(["holdpoint.advance=0"]), "{stored}");

    // Off: the answered hold stays shown with its outcome.
    let h4 = raise(&s, "Transfer $400 to n4", "alice").await;
    page.wait_text(&row(&h4), &["$400.00 → n4"]).await;
    page.click(&row(&h3)).await;
    page.wait_text("#detail-title", &["$300.00 → n3"]).await;
    page.press("//section[@id='detail']", "Approve").await;
    page.wait_text("#detail-result", &["Approved: the call ran"]).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(page.text("#detail-title").await.contains("$300.00 → n3"));
    assert_eq!(
        page.js("return !document.getElementById('last-answer');").await,
        json!(true)
    );
    page.close().await;
}

/// Item 10: on a phone the filters are folded away, the list does not
/// scroll inside the page, a tapped row opens its detail with Approve and
/// Deny on screen, and targets are at least 44 px.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_phone_a_tapped_row_shows_approve_and_deny_in_reach() {
    let Some(page) = Page::start_or_skip("on_a_phone_a_tapped_row_shows_approve_and_deny_in_reach").await else {
        return;
    };
    let s = server().await;
    let mut holds = Vec::new();
    for n in 0..12 {
        holds.push(raise(&s, &format!("Transfer ${} to acct-{n}", 100 + n), "alice").await);
    }
    page.client.set_window_size(390, 844).await.unwrap();
    page.open(&s.url("/?poll=500"), Some("fiona")).await;
    page.wait_text(&row(&holds[11]), &["$111.00 → acct-11"]).await;
    assert_eq!(
        page.js("return document.getElementById('filter-fold').open;").await,
        json!(false)
    );
    assert_eq!(
        page.js("return document.getElementById('f-q').checkVisibility();")
            .await,
        json!(false),
        "the filters are folded away"
    );
    let inner = page
        .js("const q = document.getElementById('queue'); return [getComputedStyle(q).overflowY, q.scrollHeight <= q.clientHeight + 1];")
        .await;
    assert_eq!(
        inner,
        json!(["visible", true]),
        "the list does not scroll inside the page"
    );

    // Tap the last row: its detail, with Approve and Deny on screen.
    page.js(&format!(
        "document.querySelector(\"{}\").scrollIntoView();",
        row(&holds[11])
    ))
    .await;
    page.click(&format!("{} .item-title", row(&holds[11]))).await;
    page.wait_text("#detail-title", &["$111.00 → acct-11"]).await;
    page.wait_js("return document.getElementById('detail').classList.contains('sheet');")
        .await;
    for id in ["approve", "deny", "sheet-back"] {
        let fits = page
            .js(&format!(
                "const r = document.getElementById('{id}').getBoundingClientRect(); return [r.top >= 0 && r.bottom <= innerHeight && r.left >= 0 && r.right <= innerWidth, r.height >= 44];"
            ))
            .await;
        assert_eq!(fits, json!([true, true]), "#{id} on screen and 44 px");
    }
    let small = page
        .js("return [...document.querySelectorAll('.tab, #queue .pick, #load-more:not([hidden])')].filter(e => { const r = e.getBoundingClientRect(); return r.height > 0 && (r.height < 44 || r.width < 44); }).map(e => e.className);")
        .await;
    assert_eq!(small, json!([]), "targets of at least 44 px");
    page.press("//section[@id='detail']", "Approve").await;
    // The sheet moves on to the next hold and says what the answer did.
    page.wait_text("#detail-title", &["$110.00 → acct-10"]).await;
    page.wait_text(
        "#detail.sheet #last-answer",
        &["$111.00 → acct-11", "Approved: the call ran"],
    )
    .await;
    page.click("#sheet-back").await;
    page.wait_js("return !document.getElementById('detail').classList.contains('sheet');")
        .await;
    // Unfolded on demand.
    page.click("#filter-fold > summary").await;
    page.wait_js("return document.getElementById('f-q').checkVisibility() && document.getElementById('f-q').getBoundingClientRect().height >= 44;")
        .await;
    page.close().await;
}
