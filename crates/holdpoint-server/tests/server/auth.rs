//! Authentication (401), agent scopes (403) and session ownership (404 for
//! everyone but the owner), with the principal in the audit trail.

use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn credentials_are_required_and_checked() {
    let f = fixture(true).await;
    let s = &f.server;
    let path = "/agents/bankingAgent";
    let body = json!({"data": user("hello")});

    let r = s.client.post(s.url(path)).json(&body).send().await.unwrap();
    assert_eq!(r.headers()["www-authenticate"], "Bearer");
    assert_error(&read(r).await, 401, "UNAUTHENTICATED", "authentication required");
    assert_error(
        &s.post(path, body.clone(), Some("wrong-key")).await,
        401,
        "UNAUTHENTICATED",
        "unknown API key",
    );

    let bearer = |token: &str| s.client.post(s.url(path)).bearer_auth(token).json(&body).send();
    assert_error(
        &read(bearer("garbage").await.unwrap()).await,
        401,
        "UNAUTHENTICATED",
        "not recognised",
    );
    let forged = holdpoint_server::auth::JwtVerifier::hs256(b"not-the-server-secret-0123456789ab")
        .unwrap()
        .issue(&json!({"sub": "alice", "exp": chrono::Utc::now().timestamp() + 60}))
        .unwrap();
    assert_error(
        &read(bearer(&forged).await.unwrap()).await,
        401,
        "UNAUTHENTICATED",
        "signature",
    );
    let expired = jwt()
        .issue(&json!({"sub": "alice", "exp": chrono::Utc::now().timestamp() - 600}))
        .unwrap();
    assert_error(
        &read(bearer(&expired).await.unwrap()).await,
        401,
        "UNAUTHENTICATED",
        "expired",
    );

    let (code, out) = read(bearer(&token("alice")).await.unwrap()).await;
    assert_eq!(code, 200, "{out:#}");
    let (code, _) = s.post(path, body, Some(ALICE_KEY)).await;
    assert_eq!(code, 200);
    assert!(f.store.len() >= 2);
    // The health check and the page need no credentials.
    assert_eq!(s.get("/healthz", None).await.0, 200);
    assert_eq!(s.client.get(s.url("/")).send().await.unwrap().status(), 200);
}

#[tokio::test]
async fn scoped_credentials_get_403_outside_their_agents() {
    let f = fixture(true).await;
    let s = &f.server;
    let denied = s
        .post("/agents/bankingAgent", json!({"data": user("hi")}), Some(OPS_KEY))
        .await;
    assert_error(&denied, 403, "PERMISSION_DENIED", "bankingAgent");
    assert!(f.store.is_empty());
    let (code, _) = s
        .post("/agents/opsAgent", json!({"data": user("hi")}), Some(OPS_KEY))
        .await;
    assert_eq!(code, 200);
    let (_, agents) = s.get("/agents", Some(OPS_KEY)).await;
    assert_eq!(agents["result"].as_array().unwrap().len(), 1);
    assert_eq!(agents["result"][0]["name"], "opsAgent");
    // A token's `agents` claim scopes it the same way.
    let scoped = jwt()
        .issue(&json!({"sub": "carol", "exp": chrono::Utc::now().timestamp() + 60, "agents": ["opsAgent"]}))
        .unwrap();
    let r = s
        .client
        .post(s.url("/agents/bankingAgent"))
        .bearer_auth(scoped)
        .json(&json!({"data": user("hi")}))
        .send()
        .await
        .unwrap();
    assert_error(&read(r).await, 403, "PERMISSION_DENIED", "carol");
}

#[tokio::test]
async fn sessions_belong_to_their_principal() {
    let f = fixture(true).await;
    let s = &f.server;
    let (code, body) = s
        .post(
            "/agents/bankingAgent",
            json!({"data": user("Transfer $500 to savings")}),
            Some(ALICE_KEY),
        )
        .await;
    assert_eq!(code, 200, "{body:#}");
    let out = body["result"].clone();
    let snapshot = out["snapshotId"].as_str().unwrap().to_owned();
    let session = out["sessionId"].as_str().unwrap().to_owned();
    let part = paused_part(&out);
    let approve = restart(&part, json!({"approved": true}));
    let before = dump(f.store.as_ref()).await;

    // Bob cannot read, resume, abort or list alice's session: 404, as if it did not exist.
    let get = s
        .post(
            "/agents/bankingAgent/getSnapshot",
            json!({"data": {"snapshotId": snapshot}}),
            Some(BOB_KEY),
        )
        .await;
    assert_error(&get, 404, "NOT_FOUND", "not found");
    let get = s
        .post(
            "/agents/bankingAgent/getSnapshot",
            json!({"data": {"sessionId": session}}),
            Some(BOB_KEY),
        )
        .await;
    assert_error(&get, 404, "NOT_FOUND", "not found");
    for init in [json!({"snapshotId": snapshot}), json!({"sessionId": session})] {
        let resume = json!({"data": {"resume": {"restart": [approve.clone()]}}, "init": init});
        assert_error(
            &s.post("/agents/bankingAgent", resume, Some(BOB_KEY)).await,
            404,
            "NOT_FOUND",
            "not found",
        );
    }
    let abort = s
        .post(
            "/agents/bankingAgent/abort",
            json!({"data": {"snapshotId": snapshot}}),
            Some(BOB_KEY),
        )
        .await;
    assert_error(&abort, 404, "NOT_FOUND", "not found");
    let (_, pending) = s.get("/agents/bankingAgent/pending", Some(BOB_KEY)).await;
    assert_eq!(pending["result"], json!([]));
    let audit = s
        .get(
            &format!("/agents/bankingAgent/audit?sessionId={session}"),
            Some(BOB_KEY),
        )
        .await;
    assert_error(&audit, 404, "NOT_FOUND", session.as_str());
    assert_eq!(dump(f.store.as_ref()).await, before, "bob's attempts changed nothing");

    // Alice sees it, from any of her credentials.
    let (_, pending) = s.get("/agents/bankingAgent/pending", Some(ALICE_APPROVER_KEY)).await;
    assert_eq!(pending["result"].as_array().unwrap().len(), 1);
    assert_eq!(pending["result"][0]["owner"], "alice");
    let r = s
        .client
        .post(s.url("/agents/bankingAgent"))
        .bearer_auth(ALICE_APPROVER_KEY)
        .json(&json!({"data": {"resume": {"restart": [approve]}}, "init": {"snapshotId": snapshot}}))
        .send()
        .await
        .unwrap();
    let (code, done) = read(r).await;
    assert_eq!(code, 200, "{done:#}");
    assert_eq!(done["result"]["finishReason"], "stop");

    let (_, audit) = s
        .get(
            &format!("/agents/bankingAgent/audit?sessionId={session}"),
            Some(ALICE_KEY),
        )
        .await;
    assert_eq!(audit["result"][0]["principal"], "alice", "{audit:#}");
    // `Approval { approved }` means yes or no: the restart is an approval.
    assert_eq!(audit["result"][0]["decision"], "approve");
    let (_, mine) = s.get("/agents/bankingAgent/audit", Some(ALICE_APPROVER_KEY)).await;
    assert_eq!(mine["result"].as_array().unwrap().len(), 1);
    let (_, bobs) = s.get("/agents/bankingAgent/audit", Some(BOB_KEY)).await;
    assert_eq!(bobs["result"], json!([]));
}
