//! The `GET /inbox` and `GET /audit` cursors are authenticated (issue 32,
//! finding #12): a cursor the server gave pages on, anything else — an
//! altered one, a made-up one, the other listing's, another server's — is
//! a 400 `INVALID_ARGUMENT` saying the cursor is invalid.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use holdpoint_server::Server;
use holdpoint_server::signing::{KeyRing, SigningKey};
use serde_json::{Value, json};

use crate::support::*;

fn keys(secret: u8) -> KeyRing {
    KeyRing::new(vec![SigningKey::new(format!("k{secret}"), vec![secret; 32]).unwrap()]).unwrap()
}

fn snapshot_ids(body: &Value) -> Vec<String> {
    body["result"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["snapshotId"].as_str().unwrap().to_owned())
        .collect()
}

/// Flips one character of the cursor's payload (before the `.`).
fn altered(cursor: &str) -> String {
    let mut bytes = cursor.as_bytes().to_vec();
    bytes[0] = if bytes[0] == b'A' { b'B' } else { b'A' };
    String::from_utf8(bytes).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_cursors_the_server_gave_page() {
    let store = memory();
    let agent = ops(store, Arc::new(AtomicUsize::new(0)));
    let server = TestServer::start(Server::builder().agent(agent).signing_keys(keys(1)).build().unwrap()).await;
    let mut held = Vec::new();
    for n in 0..5 {
        let (code, body) = server
            .post(
                "/agents/opsAgent",
                json!({"data": user(&format!("close acct-{n}"))}),
                None,
            )
            .await;
        assert_eq!(code, 200, "{body:#}");
        held.push(body["result"]["snapshotId"].as_str().unwrap().to_owned());
    }

    // A real inbox cursor pages on, oldest first, to the end.
    let (code, first) = server.get("/inbox?limit=2", None).await;
    assert_eq!(code, 200, "{first:#}");
    let inbox_cursor = first["result"]["nextCursor"].as_str().unwrap().to_owned();
    let (code, second) = server.get(&format!("/inbox?limit=2&cursor={inbox_cursor}"), None).await;
    assert_eq!(code, 200, "{second:#}");
    let (code, third) = server
        .get(
            &format!(
                "/inbox?limit=2&cursor={}",
                second["result"]["nextCursor"].as_str().unwrap()
            ),
            None,
        )
        .await;
    assert_eq!(code, 200, "{third:#}");
    assert!(third["result"]["nextCursor"].is_null(), "{third:#}");
    let walked: Vec<String> = [&first, &second, &third].into_iter().flat_map(snapshot_ids).collect();
    assert_eq!(walked, held, "each hold once, in order");

    // Decisions for the audit; a real audit cursor pages on too.
    for snapshot in &held {
        let (code, body) = server
            .post(
                "/agents/opsAgent/answer",
                json!({"data": {"snapshotId": snapshot, "decision": "deny", "reason": "no"}}),
                None,
            )
            .await;
        assert_eq!(code, 200, "{body:#}");
    }
    let (code, page) = server.get("/audit?limit=3", None).await;
    assert_eq!(code, 200, "{page:#}");
    let audit_cursor = page["result"]["nextCursor"].as_str().unwrap().to_owned();
    let (code, rest) = server.get(&format!("/audit?limit=3&cursor={audit_cursor}"), None).await;
    assert_eq!(code, 200, "{rest:#}");
    assert_eq!(rest["result"]["items"].as_array().unwrap().len(), 2, "{rest:#}");
    let mut audited: Vec<String> = [&page, &rest].into_iter().flat_map(snapshot_ids).collect();
    audited.reverse();
    assert_eq!(audited, held, "newest first, each once");

    // What was accepted before: a plain base64 position, now made up.
    let made_up = URL_SAFE_NO_PAD.encode("0\u{1e}0\u{1e}opsAgent");
    let (payload, mac) = audit_cursor.split_once('.').unwrap();
    let forged = format!("{}.{mac}", URL_SAFE_NO_PAD.encode("0\u{1e}0\u{1e}opsAgent"));
    let refused = [
        ("audit", altered(&audit_cursor)),
        ("audit", made_up.clone()),
        ("audit", payload.to_owned()),
        ("audit", forged),
        ("audit", format!("{payload}.")),
        ("audit", "!!".to_owned()),
        // One listing's cursor is not the other's.
        ("audit", inbox_cursor.clone()),
        ("inbox", audit_cursor.clone()),
        ("inbox", altered(&inbox_cursor)),
        ("inbox", made_up),
    ];
    for (listing, cursor) in refused {
        let got = server.get(&format!("/{listing}?limit=3&cursor={cursor}"), None).await;
        assert_error(&got, 400, "INVALID_ARGUMENT", "cursor: invalid");
    }

    // Another server (another key) refuses this server's cursor.
    let agent = ops(memory(), Arc::new(AtomicUsize::new(0)));
    let other = TestServer::start(Server::builder().agent(agent).signing_keys(keys(2)).build().unwrap()).await;
    let got = other.get(&format!("/inbox?cursor={inbox_cursor}"), None).await;
    assert_error(&got, 400, "INVALID_ARGUMENT", "cursor: invalid");
}
