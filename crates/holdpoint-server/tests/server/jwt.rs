//! Bearer tokens over HTTP: every refusal is a 401 with a JSON error body
//! that echoes neither the token nor the secret, and token principals live
//! apart from API-key principals.
//!
//! Tokens here are signed by hand (HMAC-SHA256 over any header and claims)
//! so a test can say exactly what a hostile issuer would send.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::Sha256;

use crate::support::*;

fn later() -> i64 {
    chrono::Utc::now().timestamp() + 3600
}

/// A compact token with `header` and `claims`, signed with the server's
/// secret whatever the header says.
fn sign(header: Value, claims: Value) -> String {
    sign_with(JWT_SECRET, header, claims)
}

fn sign_with(secret: &[u8], header: Value, claims: Value) -> String {
    let b64 = |v: Value| URL_SAFE_NO_PAD.encode(v.to_string());
    let input = format!("{}.{}", b64(header), b64(claims));
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).unwrap();
    mac.update(input.as_bytes());
    format!("{input}.{}", URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes()))
}

fn signed(claims: Value) -> String {
    sign(json!({"alg": "HS256", "typ": "JWT"}), claims)
}

async fn call(s: &TestServer, agent: &str, token: &str) -> (StatusCode, Value) {
    let r = s
        .client
        .post(s.url(&format!("/agents/{agent}")))
        .bearer_auth(token)
        .json(&json!({"data": user("hi")}))
        .send()
        .await
        .unwrap();
    read(r).await
}

/// A 401 with the error body, naming `part`, and with no piece of the
/// token or the secret in it.
#[track_caller]
fn assert_refused(got: &(StatusCode, Value), token: &str, part: &str) {
    assert_error(got, 401, "UNAUTHENTICATED", part);
    let body = got.1.to_string();
    for piece in token.split('.').filter(|p| p.len() >= 8) {
        assert!(!body.contains(piece), "the body echoes the token: {body}");
    }
    assert!(!body.contains(std::str::from_utf8(JWT_SECRET).unwrap()), "{body}");
}

#[tokio::test]
async fn far_future_and_out_of_range_times_are_refused_with_401() {
    let f = fixture(true).await;
    let s = &f.server;
    for exp in [
        json!(i64::MAX),
        json!(i64::MAX - 10),
        json!(u64::MAX),
        json!(1e300),
        json!(-1e300),
        json!(-1),
    ] {
        let token = signed(json!({"sub": "alice", "exp": exp}));
        assert_refused(&call(s, "bankingAgent", &token).await, &token, "`exp`");
    }
    let early = signed(json!({"sub": "alice", "exp": later(), "nbf": 1e300}));
    assert_refused(&call(s, "bankingAgent", &early).await, &early, "`nbf`");
    assert!(f.store.is_empty());
    // The server is still answering after all of them.
    assert_eq!(call(s, "bankingAgent", &token("alice")).await.0, 200);
}

#[tokio::test]
async fn agents_claim_that_is_not_an_array_of_names_is_refused() {
    let f = fixture(true).await;
    let s = &f.server;
    for agents in [
        json!("opsAgent"),
        json!("*"),
        json!(null),
        json!({"opsAgent": true}),
        json!(["opsAgent", 1]),
    ] {
        let token = signed(json!({"sub": "carol", "exp": later(), "agents": agents}));
        for agent in ["bankingAgent", "opsAgent"] {
            assert_refused(&call(s, agent, &token).await, &token, "`agents`");
        }
    }
    assert!(f.store.is_empty());
    let scoped = signed(json!({"sub": "carol", "exp": later(), "agents": ["opsAgent"]}));
    assert_eq!(call(s, "opsAgent", &scoped).await.0, 200);
    assert_error(
        &call(s, "bankingAgent", &scoped).await,
        403,
        "PERMISSION_DENIED",
        "carol",
    );
}

#[tokio::test]
async fn critical_header_extensions_are_refused() {
    let f = fixture(true).await;
    let s = &f.server;
    let claims = json!({"sub": "alice", "exp": later()});
    for header in [
        json!({"alg": "HS256", "crit": ["exp"], "exp": 1}),
        json!({"alg": "HS256", "crit": ["http://example.com/unknown"], "http://example.com/unknown": true}),
        json!({"alg": "HS256", "crit": ["b64"], "b64": true}),
    ] {
        let token = sign(header, claims.clone());
        assert_refused(&call(s, "bankingAgent", &token).await, &token, "crit");
    }
    assert!(f.store.is_empty());
}

#[tokio::test]
async fn subjects_with_hidden_characters_or_odd_lengths_are_refused() {
    let f = fixture(true).await;
    let s = &f.server;
    let long = "a".repeat(257);
    for sub in [
        "ali\u{202E}ecila",
        "\u{2066}alice\u{2069}",
        "\u{2067}alice",
        "\u{2068}alice",
        "alice\u{200E}",
        "alice\u{200F}",
        "alice\u{0007}",
        "",
        long.as_str(),
    ] {
        let token = signed(json!({"sub": sub, "exp": later()}));
        assert_refused(&call(s, "bankingAgent", &token).await, &token, "`sub`");
    }
    assert!(f.store.is_empty());
}

#[tokio::test]
async fn oversized_tokens_are_refused() {
    let f = fixture(true).await;
    let s = &f.server;
    let token = signed(json!({"sub": "alice", "exp": later(), "pad": "x".repeat(9 * 1024)}));
    assert_refused(&call(s, "bankingAgent", &token).await, &token, "larger than 8192 bytes");
    assert!(f.store.is_empty());
}

#[tokio::test]
async fn unsigned_and_relabelled_tokens_are_refused() {
    let f = fixture(true).await;
    let s = &f.server;
    let claims = json!({"sub": "alice", "exp": later()});
    let b64 = |v: &Value| URL_SAFE_NO_PAD.encode(v.to_string());
    for alg in ["none", "NONE", "RS256", "ES256", "HS512"] {
        let unsigned = format!("{}.{}.", b64(&json!({"alg": alg})), b64(&claims));
        assert_refused(&call(s, "bankingAgent", &unsigned).await, &unsigned, "algorithm");
        let relabelled = sign(json!({"alg": alg}), claims.clone());
        assert_refused(&call(s, "bankingAgent", &relabelled).await, &relabelled, "algorithm");
    }
    let wrong_key = sign_with(b"not-the-server-secret-0123456789ab", json!({"alg": "HS256"}), claims);
    assert_refused(&call(s, "bankingAgent", &wrong_key).await, &wrong_key, "signature");
    assert!(f.store.is_empty());
}

#[tokio::test]
async fn a_token_subject_is_not_the_api_key_principal_of_that_name() {
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
    let snapshot = body["result"]["snapshotId"].as_str().unwrap().to_owned();
    let session = body["result"]["sessionId"].as_str().unwrap().to_owned();
    let before = dump(f.store.as_ref()).await;

    for token in [
        token("alice"),
        signed(json!({"sub": "alice", "exp": later(), "iss": "https://idp.example"})),
    ] {
        for data in [json!({"snapshotId": snapshot}), json!({"sessionId": session})] {
            let r = s
                .client
                .post(s.url("/agents/bankingAgent/getSnapshot"))
                .bearer_auth(&token)
                .json(&json!({"data": data}))
                .send()
                .await
                .unwrap();
            assert_error(&read(r).await, 404, "NOT_FOUND", "not found");
        }
        let r = s
            .client
            .get(s.url("/agents/bankingAgent/pending"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        let (code, pending) = read(r).await;
        assert_eq!(code, 200, "{pending:#}");
        assert_eq!(pending["result"], json!([]));
    }
    assert_eq!(dump(f.store.as_ref()).await, before);

    // The token's own sessions belong to `jwt:#alice`, which alice's API
    // key does not see either.
    let r = s
        .client
        .post(s.url("/agents/bankingAgent"))
        .bearer_auth(token("alice"))
        .json(&json!({"data": user("Transfer $500 to savings")}))
        .send()
        .await
        .unwrap();
    let (code, mine) = read(r).await;
    assert_eq!(code, 200, "{mine:#}");
    let (_, pending) = s.get("/agents/bankingAgent/pending", Some(ALICE_KEY)).await;
    let owners: Vec<&Value> = pending["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| &p["owner"])
        .collect();
    assert_eq!(owners, [&json!("alice")], "{pending:#}");
    let r = s
        .client
        .get(s.url("/agents/bankingAgent/pending"))
        .bearer_auth(token("alice"))
        .send()
        .await
        .unwrap();
    let (_, pending) = read(r).await;
    assert_eq!(pending["result"][0]["owner"], "jwt:#alice", "{pending:#}");
    assert_eq!(pending["result"].as_array().unwrap().len(), 1);
}
