//! The approval page's session cookie over HTTP (docs/reference.md
//! §12.10): `POST /auth/session` trades a verified key for an `HttpOnly`,
//! `SameSite=Strict` cookie that then authenticates `GET /inbox` and an
//! answer sent from the server's own origin, but not one from another
//! origin; a tampered, foreign or expired cookie is 401; sign-out clears it;
//! a cookie signed in with an API key stops working once that key is no
//! longer configured as it was (removed, rotated, or given other roles).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use axum::http::request::Parts;
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use holdpoint_server::Server;
use holdpoint_server::auth::{ApiKeys, AuthError, ContextProvider, Identity, SessionCookies};
use holdpoint_server::signing::{KeyRing, SigningKey};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::support::{TestServer, memory, read, user};

/// `x-api-key` or `Authorization: Bearer` NAME is NAME; olga is in finance.
pub struct Keys;

#[async_trait]
impl ContextProvider for Keys {
    async fn authenticate(&self, request: &Parts) -> Result<Option<Identity>, AuthError> {
        let header = |n: &str| request.headers.get(n).and_then(|v| v.to_str().ok());
        let name = header("x-api-key").or_else(|| header("authorization").and_then(|v| v.strip_prefix("Bearer ")));
        let Some(name) = name else { return Ok(None) };
        if name == "nobody" {
            return Err(AuthError::Unauthenticated("unknown key".into()));
        }
        let identity = Identity::new(name);
        Ok(Some(match name {
            "olga" => identity.with_roles(["finance"]),
            _ => identity.with_roles(["customer"]),
        }))
    }
}

const SECRET: &[u8] = b"session-cookie-test-secret-0123456789";

fn ring() -> KeyRing {
    KeyRing::new(vec![SigningKey::new("k1", SECRET).unwrap()]).unwrap()
}

async fn start(paid: &Arc<AtomicUsize>) -> TestServer {
    let server = Server::builder()
        .agent(crate::grants::payer(memory(), paid))
        .provider(Arc::new(Keys))
        .signing_keys(ring())
        .build()
        .unwrap();
    TestServer::start(server).await
}

/// The `Set-Cookie` of a response (one expected).
fn set_cookie(response: &reqwest::Response) -> String {
    let all: Vec<_> = response.headers().get_all("set-cookie").iter().collect();
    assert_eq!(all.len(), 1, "{all:?}");
    all[0].to_str().unwrap().to_owned()
}

/// The cookie's `name=value` pair.
fn pair(set_cookie: &str) -> String {
    set_cookie.split(';').next().unwrap().to_owned()
}

async fn sign_in(s: &TestServer, credential: &str) -> reqwest::Response {
    s.client
        .post(s.url("/auth/session"))
        .header("origin", &s.base)
        .json(&json!({"credential": credential}))
        .send()
        .await
        .unwrap()
}

async fn inbox(s: &TestServer, cookie: &str) -> (StatusCode, Value) {
    read(
        s.client
            .get(s.url("/inbox"))
            .header("cookie", cookie)
            .send()
            .await
            .unwrap(),
    )
    .await
}

async fn answer(s: &TestServer, cookie: &str, origin: Option<&str>, held: &Value) -> (StatusCode, Value) {
    let mut r = s
        .client
        .post(s.url("/agents/payer/answer"))
        .header("cookie", cookie)
        .json(&json!({"data": {"snapshotId": held["snapshotId"], "decision": "approve"}}));
    if let Some(origin) = origin {
        r = r.header("origin", origin);
    }
    read(r.send().await.unwrap()).await
}

#[tokio::test]
async fn a_signed_in_cookie_reads_and_answers_from_its_own_origin_only() {
    let paid = Arc::new(AtomicUsize::new(0));
    let s = start(&paid).await;
    let (code, held) = s
        .post("/agents/payer", json!({"data": user("50")}), Some("alice"))
        .await;
    assert_eq!(code, 200, "{held:#}");
    let held = held["result"].clone();
    assert_eq!(held["finishReason"], "interrupted", "{held:#}");

    // Without credentials the server refuses.
    let (code, _) = read(s.client.get(s.url("/inbox")).send().await.unwrap()).await;
    assert_eq!(code, 401);

    let response = sign_in(&s, "olga").await;
    let attributes = set_cookie(&response);
    let (code, body) = read(response).await;
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"]["principal"], "olga");
    assert_eq!(body["result"]["roles"], json!(["finance"]));
    assert!(body["result"]["expiresAt"].is_string(), "{body:#}");
    assert!(attributes.starts_with("holdpoint_session="), "{attributes}");
    for part in ["; HttpOnly", "; SameSite=Strict", "; Path=/", "; Max-Age=43200"] {
        assert!(attributes.contains(part), "{part} missing: {attributes}");
    }
    // Plain HTTP on loopback: Secure would make the browser drop it.
    assert!(!attributes.contains("Secure"), "{attributes}");
    let cookie = pair(&attributes);

    // GET /inbox with the cookie alone: olga, with her roles.
    let (code, page) = inbox(&s, &cookie).await;
    assert_eq!(code, 200, "{page:#}");
    assert_eq!(page["result"]["caller"]["principal"], "olga", "{page:#}");
    assert_eq!(page["result"]["total"], 1, "{page:#}");

    // A state-changing request from another origin, or with no origin at
    // all, is refused: the hold is not answered.
    let (code, body) = answer(&s, &cookie, Some("http://evil.example"), &held).await;
    assert_eq!(code, 403, "{body:#}");
    let (code, body) = answer(&s, &cookie, None, &held).await;
    assert_eq!(code, 403, "{body:#}");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("Origin"),
        "{body:#}"
    );
    assert_eq!(paid.load(Ordering::SeqCst), 0);

    // From the server's own origin it answers, as olga.
    let (code, body) = answer(&s, &cookie, Some(&s.base), &held).await;
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(paid.load(Ordering::SeqCst), 1);

    // A credential in the headers wins over the cookie.
    let (code, page) = read(
        s.client
            .get(s.url("/inbox"))
            .header("cookie", &cookie)
            .header("x-api-key", "bob")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(page["result"]["caller"]["principal"], "bob");
}

#[tokio::test]
async fn tampered_foreign_and_expired_cookies_are_401() {
    let paid = Arc::new(AtomicUsize::new(0));
    let s = start(&paid).await;
    let cookie = pair(&set_cookie(&sign_in(&s, "olga").await));
    assert_eq!(inbox(&s, &cookie).await.0, 200);

    // One changed character of the value.
    let (name, value) = cookie.split_once('=').unwrap();
    let mut bytes = value.as_bytes().to_vec();
    let i = bytes.len() / 2;
    bytes[i] = if bytes[i] == b'A' { b'B' } else { b'A' };
    let tampered = format!("{name}={}", String::from_utf8(bytes).unwrap());
    let (code, body) = inbox(&s, &tampered).await;
    assert_eq!(code, 401, "{body:#}");
    assert_eq!(body["error"]["status"], "UNAUTHENTICATED", "{body:#}");

    // A cookie another server (other keys) issued.
    let foreign = SessionCookies::new(Arc::new(KeyRing::ephemeral().unwrap()));
    let olga = Identity::new("olga").with_roles(["finance"]);
    let value = foreign.seal(&olga, chrono::Utc::now().timestamp() + 600).unwrap();
    assert_eq!(inbox(&s, &format!("holdpoint_session={value}")).await.0, 401);

    // The server's own keys, but expired; and, for contrast, not expired.
    let own = SessionCookies::new(Arc::new(ring()));
    let expired = own.seal(&olga, chrono::Utc::now().timestamp() - 1).unwrap();
    let (code, body) = inbox(&s, &format!("holdpoint_session={expired}")).await;
    assert_eq!(code, 401, "{body:#}");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("expired"),
        "{body:#}"
    );
    let fresh = own.seal(&olga, chrono::Utc::now().timestamp() + 600).unwrap();
    assert_eq!(inbox(&s, &format!("holdpoint_session={fresh}")).await.0, 200);

    // A refused credential is 401 and clears the cookie.
    let response = sign_in(&s, "nobody").await;
    let cleared = set_cookie(&response);
    assert_eq!(response.status(), 401);
    assert!(cleared.starts_with("holdpoint_session=;"), "{cleared}");
    assert!(cleared.contains("Max-Age=0"), "{cleared}");
    // Nothing to sign in with is 401 too; another origin is 403.
    let response = s
        .client
        .post(s.url("/auth/session"))
        .header("origin", &s.base)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    let response = s
        .client
        .post(s.url("/auth/session"))
        .header("origin", "http://evil.example")
        .json(&json!({"credential": "olga"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
}

#[tokio::test]
async fn sign_out_clears_the_cookie() {
    let paid = Arc::new(AtomicUsize::new(0));
    let s = start(&paid).await;
    let cookie = pair(&set_cookie(&sign_in(&s, "olga").await));
    assert_eq!(inbox(&s, &cookie).await.0, 200);
    let response = s
        .client
        .post(s.url("/auth/signout"))
        .header("origin", &s.base)
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    let cleared = set_cookie(&response);
    let (code, body) = read(response).await;
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"]["signedOut"], true);
    assert!(cleared.starts_with("holdpoint_session=;"), "{cleared}");
    for part in ["Max-Age=0", "HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(cleared.contains(part), "{part} missing: {cleared}");
    }
    // What a browser then sends: no cookie, so 401.
    let (code, _) = read(s.client.get(s.url("/inbox")).send().await.unwrap()).await;
    assert_eq!(code, 401);
}

const OLGA_KEY: &str = "k-olga-finance-0123456789";
const OLGA_NEW_KEY: &str = "k-olga-rotated-9876543210";

/// A server of `keys` on the same signing keys as every other server of
/// this test (a restart, or a replica, with another key configuration).
async fn start_with_keys(keys: ApiKeys, paid: &Arc<AtomicUsize>) -> TestServer {
    let server = Server::builder()
        .agent(crate::grants::payer(memory(), paid))
        .api_keys(keys)
        .signing_keys(ring())
        .build()
        .unwrap();
    TestServer::start(server).await
}

#[tokio::test]
async fn a_cookie_stops_working_once_its_api_key_is_no_longer_configured() {
    let paid = Arc::new(AtomicUsize::new(0));
    let mut before = start_with_keys(ApiKeys::new().key_with_roles(OLGA_KEY, "olga", ["finance"]), &paid).await;
    let response = sign_in(&before, OLGA_KEY).await;
    let cookie = pair(&set_cookie(&response));
    assert_eq!(response.status(), 200);
    let (code, page) = inbox(&before, &cookie).await;
    assert_eq!(code, 200, "{page:#}");
    assert_eq!(page["result"]["caller"]["principal"], "olga", "{page:#}");

    // The key is not in the cookie, in clear or as its SHA-256 digest.
    let value = cookie.split_once('=').unwrap().1;
    let decoded = String::from_utf8(URL_SAFE_NO_PAD.decode(value).unwrap()).unwrap();
    let digest = Sha256::digest(OLGA_KEY.as_bytes());
    for secret in [
        OLGA_KEY.to_owned(),
        URL_SAFE_NO_PAD.encode(digest),
        STANDARD.encode(digest),
        digest.iter().map(|b| format!("{b:02x}")).collect::<String>(),
    ] {
        assert!(!decoded.contains(&secret), "{secret} in the cookie: {decoded}");
        assert!(!value.contains(&secret), "{secret} in the cookie: {value}");
    }
    before.shutdown().await;

    // Restarted with the same key: a restart alone does not end the session.
    let mut same = start_with_keys(ApiKeys::new().key_with_roles(OLGA_KEY, "olga", ["finance"]), &paid).await;
    assert_eq!(inbox(&same, &cookie).await.0, 200);
    same.shutdown().await;

    // Restarted with olga's key rotated: the cookie the old key minted
    // still decodes (same signing keys) but is refused, with a JSON body.
    let rotated = start_with_keys(ApiKeys::new().key_with_roles(OLGA_NEW_KEY, "olga", ["finance"]), &paid).await;
    assert!(
        SessionCookies::new(Arc::new(ring())).open(value).is_ok(),
        "the cookie itself is still well signed"
    );
    let response = rotated
        .client
        .get(rotated.url("/inbox"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert!(
        response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json")),
        "{:?}",
        response.headers()
    );
    let (code, body) = read(response).await;
    assert_eq!(code, 401, "{body:#}");
    assert_eq!(body["error"]["status"], "UNAUTHENTICATED", "{body:#}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no longer accepted"),
        "{body:#}"
    );
    // Nor can it answer anything from the page's own origin.
    let (code, body) = answer(&rotated, &cookie, Some(&rotated.base), &json!({"snapshotId": "s"})).await;
    assert_eq!(code, 401, "{body:#}");
    // The new key signs in as before.
    let fresh = pair(&set_cookie(&sign_in(&rotated, OLGA_NEW_KEY).await));
    assert_eq!(inbox(&rotated, &fresh).await.0, 200);
}

#[tokio::test]
async fn a_cookie_stops_working_once_its_key_loses_the_roles_it_was_signed_in_with() {
    let paid = Arc::new(AtomicUsize::new(0));
    let mut before = start_with_keys(ApiKeys::new().key_with_roles(OLGA_KEY, "olga", ["finance"]), &paid).await;
    let cookie = pair(&set_cookie(&sign_in(&before, OLGA_KEY).await));
    assert_eq!(inbox(&before, &cookie).await.0, 200);
    before.shutdown().await;

    // The same key, now without the finance role: the cookie (which says
    // finance) is refused; signing in again gives the key's new identity.
    let demoted = start_with_keys(ApiKeys::new().key(OLGA_KEY, "olga"), &paid).await;
    let (code, body) = inbox(&demoted, &cookie).await;
    assert_eq!(code, 401, "{body:#}");
    assert_eq!(body["error"]["status"], "UNAUTHENTICATED", "{body:#}");
    let response = sign_in(&demoted, OLGA_KEY).await;
    let again = pair(&set_cookie(&response));
    let (code, body) = read(response).await;
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"]["roles"], json!([]), "{body:#}");
    assert_eq!(inbox(&demoted, &again).await.0, 200);
}
