//! Bearer tokens from a real local OpenID provider (the `oauth2-mock-server`
//! npm package, driven by `tests/oidc/provider.mjs`): keys found by OIDC
//! discovery or a JWKS URL, roles from a claim, rotation without a restart,
//! a rate-limited refetch on unknown key ids, and 401 for tokens for another
//! audience or issuer and for forged ones.
//!
//! Skipped (with a message) when node or the package is missing, unless
//! `CI=true`: `.ci/run` installs it (`npm ci --prefix tests/oidc`).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use holdpoint_server::Server;
use holdpoint_server::auth::{JwksSource, JwtVerifier};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::support::*;

struct Provider {
    issuer: String,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
    _child: Child,
}

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/oidc")
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

impl Provider {
    async fn start_or_skip(test: &str) -> Option<Provider> {
        let installed = dir().join("node_modules/oauth2-mock-server/package.json").is_file();
        let Some(node) = which("node").filter(|_| installed) else {
            assert_ne!(
                std::env::var("CI").as_deref(),
                Ok("true"),
                "{test}: node and oauth2-mock-server are required in CI (npm ci --prefix crates/holdpoint-server/tests/oidc)"
            );
            eprintln!(
                "SKIPPED {test}: install node and the test provider: npm ci --prefix crates/holdpoint-server/tests/oidc"
            );
            return None;
        };
        let mut child = Command::new(node)
            .arg("provider.mjs")
            .current_dir(dir())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = tokio::time::timeout(Duration::from_secs(30), stdout.next_line())
            .await
            .expect("the provider did not start within 30 s")
            .unwrap()
            .expect("the provider exited");
        let issuer = serde_json::from_str::<Value>(&first).unwrap()["issuer"]
            .as_str()
            .unwrap()
            .to_owned();
        Some(Provider {
            issuer,
            stdin,
            stdout,
            _child: child,
        })
    }

    async fn ask(&mut self, command: Value) -> Value {
        self.stdin.write_all(format!("{command}\n").as_bytes()).await.unwrap();
        let line = tokio::time::timeout(Duration::from_secs(30), self.stdout.next_line())
            .await
            .expect("the provider did not answer within 30 s")
            .unwrap()
            .expect("the provider exited");
        serde_json::from_str(&line).unwrap()
    }

    /// A token signed by the provider's key `kid`, with these claims over
    /// its defaults (`iss`, `iat`, `exp`, `nbf`).
    async fn token(&mut self, kid: &str, claims: Value) -> String {
        self.ask(json!({"op": "token", "kid": kid, "claims": claims})).await["token"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    async fn rotate(&mut self, kid: &str, alg: &str) {
        self.ask(json!({"op": "rotate", "kid": kid, "alg": alg})).await;
    }

    async fn jwks_requests(&mut self) -> u64 {
        self.ask(json!({"op": "stats"})).await["jwks"].as_u64().unwrap()
    }
}

fn finance(sub: &str) -> Value {
    json!({"sub": sub, "aud": "holdpoint", "roles": ["finance"]})
}

/// Discovery on the provider's issuer, audience `holdpoint`, roles from `roles`.
fn discovery(p: &Provider, min_refetch: Duration) -> JwtVerifier {
    JwtVerifier::jwks(JwksSource::issuer(&p.issuer).min_refetch_interval(min_refetch))
        .unwrap()
        .issuer(&p.issuer)
        .audience("holdpoint")
        .roles_claim("roles")
}

async fn agents_status(s: &TestServer, token: &str) -> (StatusCode, Value) {
    read(s.client.get(s.url("/agents")).bearer_auth(token).send().await.unwrap()).await
}

#[tokio::test]
async fn an_rs256_token_from_the_provider_authenticates_with_its_roles() {
    let Some(mut p) = Provider::start_or_skip("oidc: roles").await else {
        return;
    };
    let jwt = discovery(&p, Duration::from_secs(10));
    assert_eq!(jwt.refresh_keys().await, 1, "discovery found the provider's key");
    let token = p.token("k1", finance("olga")).await;
    let id = jwt.identify(&token).await.unwrap();
    assert_eq!(id.principal(), Some(format!("jwt:{}#olga", p.issuer).as_str()));
    assert_eq!(id.roles.iter().map(String::as_str).collect::<Vec<_>>(), ["finance"]);
    assert_eq!(id.request_context()["roles"], json!(["finance"]));

    // Over HTTP, through the server's providers.
    let mut s = TestServer::start(Server::builder().agent(bank(memory())).jwt(jwt).build().unwrap()).await;
    let (status, body) = agents_status(&s, &token).await;
    assert_eq!(status, 200, "{body}");
    let (status, _) = agents_status(&s, "not.a.token").await;
    assert_eq!(status, 401);
    s.shutdown().await;
}

#[tokio::test]
async fn a_rotated_key_is_fetched_without_a_restart() {
    let Some(mut p) = Provider::start_or_skip("oidc: rotation").await else {
        return;
    };
    // A JWKS URL rather than discovery; the refresh interval alone would not
    // reread the keys within this test.
    let source = JwksSource::url(format!("{}/jwks", p.issuer))
        .refresh_interval(Duration::from_secs(3_600))
        .min_refetch_interval(Duration::ZERO);
    let jwt = JwtVerifier::jwks(source)
        .unwrap()
        .issuer(&p.issuer)
        .audience("holdpoint")
        .roles_claim("roles");
    let mut s = TestServer::start(Server::builder().agent(bank(memory())).jwt(jwt).build().unwrap()).await;
    let old = p.token("k1", finance("olga")).await;
    assert_eq!(agents_status(&s, &old).await.0, 200);
    let before = p.jwks_requests().await;

    p.rotate("k2", "RS256").await;
    let new = p.token("k2", finance("olga")).await;
    let (status, body) = agents_status(&s, &new).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(p.jwks_requests().await, before + 1, "one refetch for the new kid");
    // An ES256 (P-256) key, an algorithm the cache had no key for yet.
    p.rotate("k3", "ES256").await;
    let ec = p.token("k3", finance("olga")).await;
    let (status, body) = agents_status(&s, &ec).await;
    assert_eq!(status, 200, "{body}");
    let header: Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(ec.split('.').next().unwrap()).unwrap()).unwrap();
    assert_eq!((&header["alg"], &header["kid"]), (&json!("ES256"), &json!("k3")));
    // The old key is still published, so its tokens still verify.
    assert_eq!(agents_status(&s, &old).await.0, 200);
    s.shutdown().await;
}

/// `token` with its header's `kid` replaced (the signature no longer
/// matters: no key answers it).
fn with_kid(token: &str, kid: &str) -> String {
    let (_, rest) = token.split_once('.').unwrap();
    let header = json!({"typ": "JWT", "alg": "RS256", "kid": kid});
    format!("{}.{rest}", URL_SAFE_NO_PAD.encode(header.to_string()))
}

#[tokio::test]
async fn a_flood_of_unknown_kids_does_not_hammer_the_provider() {
    let Some(mut p) = Provider::start_or_skip("oidc: refetch rate limit").await else {
        return;
    };
    let jwt = JwtVerifier::jwks(
        JwksSource::url(format!("{}/jwks", p.issuer)).min_refetch_interval(Duration::from_secs(3_600)),
    )
    .unwrap()
    .audience("holdpoint");
    let token = p.token("k1", finance("olga")).await;
    jwt.identify(&token).await.unwrap();
    let before = p.jwks_requests().await;
    assert_eq!(before, 1);
    for i in 0..50 {
        let forged = with_kid(&token, &format!("kid-{i}"));
        let e = jwt.identify(&forged).await.unwrap_err();
        assert!(e.to_string().contains("unknown key"), "{e}");
    }
    assert_eq!(
        p.jwks_requests().await,
        before,
        "no refetch within the minimum interval"
    );
}

#[tokio::test]
async fn tokens_for_another_audience_or_issuer_and_forged_tokens_are_401() {
    let Some(mut p) = Provider::start_or_skip("oidc: refusals").await else {
        return;
    };
    let jwt = discovery(&p, Duration::from_secs(10));
    let mut s = TestServer::start(Server::builder().agent(bank(memory())).jwt(jwt).build().unwrap()).await;

    let other_audience = p
        .token("k1", json!({"sub": "olga", "aud": "another-app", "roles": ["finance"]}))
        .await;
    assert_error(
        &agents_status(&s, &other_audience).await,
        401,
        "UNAUTHENTICATED",
        "audience",
    );

    let good = p.token("k1", finance("olga")).await;
    let (header, rest) = good.split_once('.').unwrap();
    let (payload, signature) = rest.split_once('.').unwrap();
    let mut claims: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap();
    claims["roles"] = json!(["admin", "finance"]);
    let tampered = format!("{header}.{}.{signature}", URL_SAFE_NO_PAD.encode(claims.to_string()));
    assert_error(&agents_status(&s, &tampered).await, 401, "UNAUTHENTICATED", "signature");
    // The same claims under HS256, keyed with anything: not an accepted algorithm.
    let hs = format!(
        "{}.{}.{signature}",
        URL_SAFE_NO_PAD.encode(r#"{"alg":"HS256","kid":"k1"}"#),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    assert_error(&agents_status(&s, &hs).await, 401, "UNAUTHENTICATED", "algorithm");
    assert_eq!(agents_status(&s, &good).await.0, 200);
    s.shutdown().await;

    // The provider's tokens carry its own `iss`: a verifier expecting
    // another issuer refuses them, though the keys are the same.
    let elsewhere = JwtVerifier::jwks(JwksSource::url(format!("{}/jwks", p.issuer)))
        .unwrap()
        .issuer("https://login.example")
        .audience("holdpoint");
    let mut s = TestServer::start(Server::builder().agent(bank(memory())).jwt(elsewhere).build().unwrap()).await;
    assert_error(&agents_status(&s, &good).await, 401, "UNAUTHENTICATED", "issuer");
    s.shutdown().await;
}

#[tokio::test]
async fn a_config_file_with_a_jwks_url_takes_the_providers_tokens_and_roles() {
    let Some(mut p) = Provider::start_or_skip("oidc: config file").await else {
        return;
    };
    let text = format!(
        "[[auth.api_keys]]\nprincipal = \"alice\"\nkey = \"k-alice-0123456789\"\nroles = [\"customer\"]\n\n\
         [auth]\nroles = [\"finance\"]\n\n\
         [auth.jwt]\njwks_url = \"{0}/jwks\"\nissuer = \"{0}\"\naudience = \"holdpoint\"\nroles_claim = \"roles\"\n",
        p.issuer
    );
    let config = holdpoint_deploy::Config::parse(&text, "holdpoint.toml").unwrap();
    let jwt = config.jwt_verifier().unwrap().unwrap();
    let token = p.token("k1", finance("olga")).await;
    let id = jwt.identify(&token).await.unwrap();
    assert_eq!(id.roles.iter().map(String::as_str).collect::<Vec<_>>(), ["finance"]);

    let builder = config.apply_auth(Server::builder().agent(bank(memory()))).unwrap();
    let mut s = TestServer::start(builder.build().unwrap()).await;
    assert_eq!(agents_status(&s, &token).await.0, 200);
    assert_eq!(
        agents_status(&s, "k-alice-0123456789").await.0,
        200,
        "API keys and tokens side by side"
    );
    let other = p.token("k1", json!({"sub": "olga", "aud": "elsewhere"})).await;
    assert_eq!(agents_status(&s, &other).await.0, 401);
    s.shutdown().await;
}

/// A P-256 public key (generated for these tests).
const GOOD_JWKS: &str = r#"{"keys": [{"kty": "EC", "crv": "P-256", "use": "sig", "kid": "1",
    "x": "vyKXO1Eej9p3ZFGwb8MhlkTOjuQoFPodfxNcyCBtTFo", "y": "_IDUncYI-WNsMg1Bbz0sqSNqx_kjeJWzwjB9OnyZ_dA"}]}"#;

/// A key-set host that misbehaves: a body over the limit, no answer, a
/// redirect to a good key set.
async fn hostile_host() -> String {
    use axum::routing::get;
    let router = axum::Router::new()
        .route(
            "/huge",
            get(|| async { format!("{{\"keys\": [\"{}\"]}}", "x".repeat(300 * 1024)) }),
        )
        .route(
            "/silent",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(30)).await;
                "{}"
            }),
        )
        .route("/good", get(|| async { GOOD_JWKS }))
        .route(
            "/moved",
            get(|| async { (StatusCode::FOUND, [("location", "/good")], "") }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    base
}

#[tokio::test]
async fn key_set_fetches_are_bounded_in_size_and_time_and_follow_no_redirects() {
    let base = hostile_host().await;
    let good = JwtVerifier::jwks(JwksSource::url(format!("{base}/good"))).unwrap();
    assert_eq!(good.refresh_keys().await, 1);
    for path in ["/huge", "/silent", "/moved"] {
        let source = JwksSource::url(format!("{base}{path}")).timeout(Duration::from_millis(300));
        let jwt = JwtVerifier::jwks(source).unwrap();
        let keys = tokio::time::timeout(Duration::from_secs(10), jwt.refresh_keys())
            .await
            .expect("the fetch is bounded by its timeout");
        assert_eq!(keys, 0, "{path}");
    }
}
