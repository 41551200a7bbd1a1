//! `GET /inbox` and `GET /audit` (docs/reference.md §12.8): the true total,
//! the orders, the filters and the cursor, over 10 000 holds.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use holdpoint::agent::{AgentInit, AgentInput};
use holdpoint_server::Server;
use serde_json::{Value, json};

use crate::support::*;

/// Every item of `path` (which has no cursor yet), following the cursor.
async fn walk(s: &TestServer, path: &str) -> (Vec<Value>, usize) {
    let mut out = Vec::new();
    let mut cursor = String::new();
    let mut pages = 0;
    loop {
        pages += 1;
        assert!(pages <= 100, "the cursor must end");
        let sep = if path.contains('?') { '&' } else { '?' };
        let url = if cursor.is_empty() {
            path.to_owned()
        } else {
            format!("{path}{sep}cursor={cursor}")
        };
        let (code, body) = s.get(&url, None).await;
        assert_eq!(code, 200, "{body:#}");
        out.extend(body["result"]["items"].as_array().unwrap().iter().cloned());
        match body["result"]["nextCursor"].as_str() {
            Some(next) => cursor = next.to_owned(),
            None => return (out, pages),
        }
    }
}

fn ids(items: &[Value]) -> Vec<String> {
    items
        .iter()
        .map(|i| i["snapshotId"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_holds_page_to_the_oldest_with_the_true_total_and_filters() {
    let store = memory();
    let runs = Arc::new(AtomicUsize::new(0));
    let agent = ops(store.clone(), runs.clone());
    let server = TestServer::start(Server::builder().agent(agent.clone()).build().unwrap()).await;
    let mut order = Vec::new();
    for n in 0..10_000 {
        let out = agent
            .run(AgentInput::text(format!("close acct-{n}")), AgentInit::new())
            .await
            .unwrap();
        order.push(out.snapshot_id.unwrap());
    }

    // The first page knows the whole: 10 000, not the listing limit.
    let (code, body) = server.get("/inbox?limit=25", None).await;
    assert_eq!(code, 200, "{body:#}");
    let first = &body["result"];
    assert_eq!(first["total"], 10_000);
    assert_eq!(first["counts"]["waiting"], 10_000);
    assert_eq!(first["truncated"], false);
    assert_eq!(first["items"].as_array().unwrap().len(), 25);
    assert_eq!(
        first["items"][0]["snapshotId"],
        json!(order[0]),
        "oldest first by default"
    );
    assert_eq!(first["items"][0]["agent"], "opsAgent");
    assert_eq!(
        first["tools"]["opsAgent"]["closeAccount"]["description"],
        "Closes an account"
    );
    assert!(first["tools"]["opsAgent"]["closeAccount"]["inputSchema"].is_object());
    assert_eq!(first["agents"], json!({"opsAgent": ["closeAccount"]}));

    // Walking the cursor reaches every hold once, in order, down to the newest.
    let (all, pages) = walk(&server, "/inbox?limit=1000").await;
    assert_eq!(pages, 10);
    assert_eq!(ids(&all), order, "every hold once, oldest first");

    // Newest first is the reverse.
    let (code, body) = server.get("/inbox?order=newest&limit=3", None).await;
    assert_eq!(code, 200);
    assert_eq!(body["result"]["items"][0]["snapshotId"], json!(order[9_999]));

    // Text search and filters count what they keep.
    let (_, body) = server.get("/inbox?q=ACCT-777&limit=1000", None).await;
    assert_eq!(body["result"]["total"], 11, "acct-777 and acct-7770…7779");
    let (_, body) = server.get("/inbox?tool=transferMoney", None).await;
    assert_eq!(body["result"]["total"], 0);
    let (_, body) = server.get("/inbox?expired=true", None).await;
    assert_eq!(body["result"]["total"], 0);
    let (_, body) = server.get("/inbox?expired=false&mine=true&limit=1", None).await;
    assert_eq!(
        body["result"]["total"], 10_000,
        "an anonymous caller answers unowned holds"
    );
    let (_, body) = server.get("/inbox?partial=true", None).await;
    assert_eq!(body["result"]["total"], 0);

    // A page boundary survives holds coming and going: the second page
    // starts after the first page's last hold, whatever happened between.
    let (_, body) = server.get("/inbox?limit=100", None).await;
    let cursor = body["result"]["nextCursor"].as_str().unwrap().to_owned();
    agent
        .run(AgentInput::text("close acct-new"), AgentInit::new())
        .await
        .unwrap();
    let (_, body) = server.get(&format!("/inbox?limit=100&cursor={cursor}"), None).await;
    assert_eq!(body["result"]["items"][0]["snapshotId"], json!(order[100]));
    assert_eq!(body["result"]["total"], 10_001);

    // A cursor the server did not give is a clear 400.
    assert_error(
        &server.get("/inbox?cursor=%21%21", None).await,
        400,
        "INVALID_ARGUMENT",
        "cursor",
    );
    assert_error(
        &server.get("/inbox?order=sideways", None).await,
        400,
        "INVALID_ARGUMENT",
        "order",
    );
    assert_error(
        &server.get("/inbox?agent=nobody", None).await,
        404,
        "NOT_FOUND",
        "nobody",
    );
}

#[tokio::test]
async fn the_audit_is_filtered_and_paged_newest_first() {
    let store = memory();
    let runs = Arc::new(AtomicUsize::new(0));
    let agent = ops(store.clone(), runs.clone());
    let server = TestServer::start(Server::builder().agent(agent.clone()).build().unwrap()).await;
    let mut held = Vec::new();
    for n in 0..7 {
        let (code, body) = server
            .post(
                "/agents/opsAgent",
                json!({"data": user(&format!("close acct-{n}"))}),
                None,
            )
            .await;
        assert_eq!(code, 200, "{body:#}");
        held.push(body["result"]["snapshotId"].clone());
    }
    for (n, snapshot) in held.iter().enumerate() {
        let decision = if n % 2 == 0 { "deny" } else { "approve" };
        let (code, body) = server
            .post(
                "/agents/opsAgent/answer",
                json!({"data": {"snapshotId": snapshot, "decision": decision, "reason": format!("r{n}")}}),
                None,
            )
            .await;
        assert_eq!(code, 200, "{body:#}");
    }
    let (all, _) = walk(&server, "/audit?limit=3").await;
    assert_eq!(all.len(), 7);
    let reasons: Vec<&str> = all.iter().map(|r| r["reason"].as_str().unwrap()).collect();
    assert_eq!(
        reasons,
        ["r6", "r5", "r4", "r3", "r2", "r1", "r0"],
        "newest first, each once"
    );
    let (code, body) = server.get("/audit?decision=deny&limit=2", None).await;
    assert_eq!(code, 200);
    assert_eq!(body["result"]["total"], 4);
    assert_eq!(body["result"]["items"].as_array().unwrap().len(), 2);
    assert!(body["result"]["nextCursor"].is_string());
    let (_, body) = server.get("/audit?tool=closeAccount&decision=approve", None).await;
    assert_eq!(body["result"]["total"], 3);
    let (_, body) = server.get("/audit?since=2999-01-01T00:00:00Z", None).await;
    assert_eq!(body["result"]["total"], 0);
    // One hold's decisions, by its snapshot; an unknown one is 404.
    let (_, body) = server
        .get(&format!("/audit?snapshotId={}", held[0].as_str().unwrap()), None)
        .await;
    assert_eq!(body["result"]["total"], 1);
    assert_eq!(body["result"]["items"][0]["reason"], "r0");
    assert_error(
        &server.get("/audit?snapshotId=nope", None).await,
        404,
        "NOT_FOUND",
        "nope",
    );
    let sessions: BTreeSet<&str> = all.iter().map(|r| r["sessionId"].as_str().unwrap()).collect();
    assert_eq!(sessions.len(), 7);
    assert_eq!(
        runs.load(std::sync::atomic::Ordering::SeqCst),
        3,
        "only the approved ran"
    );
}
