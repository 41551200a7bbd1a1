//! Two server processes on one PostgreSQL: an interrupt raised through one
//! is resumed through the other, and of concurrent approvals fired at both
//! exactly one wins; the others get 409.

use std::sync::Arc;
use std::time::Duration;

use holdpoint::session::SessionStore;
use holdpoint_testkit::TempPostgres;
use serde_json::{Value, json};
use tokio::sync::Barrier;

use crate::child::ChildServer;
use crate::support::*;

pub async fn open_store(url: &str) -> Arc<dyn SessionStore> {
    holdpoint_stores::open_store(url).await.unwrap()
}

async fn post(client: &reqwest::Client, url: String, body: Value) -> (u16, Value) {
    let r = client
        .post(url)
        .header("x-api-key", ALICE_KEY)
        .json(&body)
        .send()
        .await
        .unwrap();
    let (code, body) = read(r).await;
    (code.as_u16(), body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn raise_on_one_replica_resume_on_the_other_exactly_once() {
    let Some(pg) = TempPostgres::start_or_skip("raise_on_one_replica_resume_on_the_other_exactly_once") else {
        return;
    };
    // Create the schema once, before the replicas connect.
    let store = open_store(pg.url()).await;
    let (a, b) = (
        ChildServer::start("replica", Some(pg.url())),
        ChildServer::start("replica", Some(pg.url())),
    );
    let client = reqwest::Client::new();

    // Raise through A.
    let (code, body) = post(
        &client,
        a.url("/agents/bankingAgent"),
        json!({"data": user("Transfer $500 to savings")}),
    )
    .await;
    assert_eq!(code, 200, "{body:#}");
    let out = body["result"].clone();
    assert_eq!(out["finishReason"], "interrupted");
    let snapshot = out["snapshotId"].as_str().unwrap().to_owned();
    let session = out["sessionId"].as_str().unwrap().to_owned();

    // B lists it and reads it.
    let r = client
        .get(b.url("/agents/bankingAgent/pending"))
        .header("x-api-key", ALICE_APPROVER_KEY)
        .send()
        .await
        .unwrap();
    let (code, pending) = read(r).await;
    assert_eq!(code, 200, "{pending:#}");
    let items = pending["result"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{pending:#}");
    assert_eq!(items[0]["snapshotId"], json!(snapshot));
    let part = items[0]["part"].clone();

    // Eight concurrent approvals, alternating between the replicas.
    let approve = json!({
        "data": {"resume": {"restart": [restart(&part, json!({"approved": true}))]}},
        "init": {"snapshotId": snapshot},
    });
    let barrier = Arc::new(Barrier::new(8));
    let mut tasks = Vec::new();
    for i in 0..8 {
        let url = if i % 2 == 0 {
            a.url("/agents/bankingAgent")
        } else {
            b.url("/agents/bankingAgent")
        };
        let (client, body, barrier) = (client.clone(), approve.clone(), Arc::clone(&barrier));
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            post(&client, url, body).await
        }));
    }
    let mut wins = Vec::new();
    let mut conflicts = 0;
    for t in tasks {
        let (code, body) = t.await.unwrap();
        match code {
            200 => wins.push(body),
            409 => {
                assert_eq!(body["error"]["status"], "ABORTED", "{body:#}");
                assert!(
                    body["error"]["message"].as_str().unwrap().contains("already resumed"),
                    "{body:#}"
                );
                conflicts += 1;
            }
            other => panic!("unexpected {other}: {body:#}"),
        }
    }
    assert_eq!(wins.len(), 1, "exactly one approval wins: {wins:#?}");
    assert_eq!(conflicts, 7);
    assert_eq!(wins[0]["result"]["message"]["content"][0]["text"], "Done: txn-123");

    // The transfer ran once: one tool response in the history, one decision in the audit.
    let latest = store.get_latest_snapshot(&session).await.unwrap().unwrap();
    let responses = latest
        .state
        .unwrap()
        .messages
        .iter()
        .flat_map(|m| m.content.iter())
        .filter(|p| p.as_tool_response().is_some_and(|r| r.name == "transferMoney"))
        .count();
    assert_eq!(responses, 1);
    let r = client
        .get(a.url(&format!("/agents/bankingAgent/audit?sessionId={session}")))
        .header("x-api-key", ALICE_KEY)
        .send()
        .await
        .unwrap();
    let (_, audit) = read(r).await;
    assert_eq!(audit["result"].as_array().unwrap().len(), 1, "{audit:#}");
    assert_eq!(audit["result"][0]["principal"], "alice");

    // Sequentially, through the other replica: an ops hold raised on B, approved on A.
    let (_, body) = post(
        &client,
        b.url("/agents/opsAgent"),
        json!({"data": user("close acct-7")}),
    )
    .await;
    let held = body["result"].clone();
    let approve = json!({
        "data": {"resume": {"restart": [restart(&paused_part(&held), json!({"toolApproved": true}))]}},
        "init": {"snapshotId": held["snapshotId"]},
    });
    let (code, done) = post(&client, a.url("/agents/opsAgent"), approve.clone()).await;
    assert_eq!(code, 200, "{done:#}");
    assert!(
        done["result"]["message"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("acct-7")
    );
    let (code, again) = post(&client, b.url("/agents/opsAgent"), approve).await;
    assert_eq!(code, 409, "{again:#}");

    // Both stop cleanly on SIGTERM.
    let (mut a, mut b) = (a, b);
    a.terminate();
    b.terminate();
    let exits = tokio::task::spawn_blocking(move || (a.wait(Duration::from_secs(15)), b.wait(Duration::from_secs(15))))
        .await
        .unwrap();
    assert_eq!(exits, (Some(0), Some(0)));
}
