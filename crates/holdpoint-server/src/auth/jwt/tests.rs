//! Unit tests of [`JwtVerifier`]: keys, algorithms, claims, principals.

use std::path::Path;
use std::process::Command;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use jsonwebtoken::EncodingKey;
use sha2::Sha256;

use super::*;
use crate::auth::AgentScope;

const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";

fn jwt() -> JwtVerifier {
    JwtVerifier::hs256(SECRET).unwrap()
}

fn far() -> i64 {
    chrono::Utc::now().timestamp() + 3600
}

fn b64(bytes: impl AsRef<[u8]>) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// A token with any header, HMAC-SHA256-signed with `secret` whatever the
/// header says.
fn hs256_raw(secret: &[u8], header: &Value, claims: &Value) -> String {
    let input = format!("{}.{}", b64(header.to_string()), b64(claims.to_string()));
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).unwrap();
    mac.update(input.as_bytes());
    format!("{input}.{}", b64(mac.finalize().into_bytes()))
}

fn refused(j: &JwtVerifier, token: &str) -> String {
    match j.verify(token) {
        Err(AuthError::Unauthenticated(m)) => m,
        other => panic!("expected a 401 refusal, got {other:?}"),
    }
}

#[test]
fn round_trip_and_tampering() {
    let j = jwt();
    let token = j.issue(&json!({"sub": "alice", "exp": far()})).unwrap();
    assert_eq!(j.verify(&token).unwrap()["sub"], json!("alice"));

    let other = JwtVerifier::hs256(b"another-secret-another-secret-xx").unwrap();
    assert!(refused(&other, &token).contains("signature"));

    let mut parts: Vec<&str> = token.split('.').collect();
    let forged = b64(json!({"sub": "mallory", "exp": far()}).to_string());
    parts[1] = &forged;
    assert!(refused(&j, &parts.join(".")).contains("signature"));
    assert!(refused(&j, "a.b.c").contains("malformed"));
}

#[test]
fn none_and_other_algorithms_are_refused() {
    let j = jwt();
    let claims = b64(json!({"sub": "a", "exp": far()}).to_string());
    for alg in ["none", "None", "HS512", "RS256", "ES256", ""] {
        let header = b64(json!({"alg": alg}).to_string());
        let m = refused(&j, &format!("{header}.{claims}."));
        assert!(m.contains("algorithm is not accepted; accepted: HS256"), "{alg}: {m}");
    }
    let no_alg = b64(json!({"typ": "JWT"}).to_string());
    assert!(refused(&j, &format!("{no_alg}.{claims}.")).contains("header"));
}

#[test]
fn critical_header_extensions_are_refused() {
    let j = jwt();
    let claims = json!({"sub": "a", "exp": far()});
    for header in [
        json!({"alg": "HS256", "crit": ["exp"], "exp": 1}),
        json!({"alg": "HS256", "crit": ["b64"], "b64": true}),
        json!({"alg": "HS256", "crit": []}),
        json!({"alg": "HS256", "crit": "x"}),
    ] {
        let token = hs256_raw(SECRET, &header, &claims);
        assert!(refused(&j, &token).contains("crit"), "{header}");
    }
    // The same token without `crit` verifies: the refusal is the header's.
    assert!(j.verify(&hs256_raw(SECRET, &json!({"alg": "HS256"}), &claims)).is_ok());
}

#[test]
fn time_claims_out_of_range_are_refused_without_overflow() {
    let j = jwt();
    for exp in [
        json!(i64::MAX),
        json!(i64::MAX - 1),
        json!(u64::MAX),
        json!(1e300),
        json!(-1e300),
        json!(f64::MAX),
        json!(-1),
        json!(i64::MIN),
        json!("4102444800"),
        json!(null),
        json!([1]),
    ] {
        let token = j.issue(&json!({"sub": "a", "exp": exp})).unwrap();
        assert!(j.verify(&token).is_err(), "exp {exp}");
    }
    let m = refused(&j, &j.issue(&json!({"sub": "a", "exp": i64::MAX})).unwrap());
    assert!(m.contains("`exp` is out of range"), "{m}");
    let last = j.issue(&json!({"sub": "a", "exp": MAX_TIME_SECS})).unwrap();
    assert!(j.verify(&last).is_ok());
    let last = j.issue(&json!({"sub": "a", "exp": MAX_TIME_SECS as f64})).unwrap();
    assert!(j.verify(&last).is_ok());
    let past = j.issue(&json!({"sub": "a", "exp": MAX_TIME_SECS + 1})).unwrap();
    assert!(j.verify(&past).is_err());
    for nbf in [
        json!(u64::MAX),
        json!(MAX_TIME_SECS + 1),
        json!(1e300),
        json!(-1),
        json!("0"),
    ] {
        let token = j.issue(&json!({"sub": "a", "exp": far(), "nbf": nbf})).unwrap();
        assert!(j.verify(&token).is_err(), "nbf {nbf}");
    }
    let m = refused(&j, &j.issue(&json!({"sub": "a", "exp": 1e300})).unwrap());
    assert!(m.contains("no valid `exp` claim"), "{m}");
}

#[test]
fn registered_claims() {
    let j = jwt();
    let expired = j
        .issue(&json!({"sub": "a", "exp": chrono::Utc::now().timestamp() - 120}))
        .unwrap();
    assert!(refused(&j, &expired).contains("expired"));
    assert!(refused(&j, &j.issue(&json!({"sub": "a"})).unwrap()).contains("`exp`"));
    assert!(refused(&j, &j.issue(&json!({"exp": far()})).unwrap()).contains("`sub`"));
    let early = j.issue(&json!({"sub": "a", "exp": far(), "nbf": far()})).unwrap();
    assert!(refused(&j, &early).contains("not valid yet"));
    // A token meant for some audience is refused by a verifier that names none.
    let aimed = j.issue(&json!({"sub": "a", "exp": far(), "aud": "elsewhere"})).unwrap();
    assert!(refused(&j, &aimed).contains("audience"));

    let strict = jwt().issuer("me").audience("api");
    let bare = strict.issue(&json!({"sub": "a", "exp": far()})).unwrap();
    assert!(strict.verify(&bare).is_err());
    let wrong_iss = strict
        .issue(&json!({"sub": "a", "exp": far(), "iss": "you", "aud": "api"}))
        .unwrap();
    assert!(refused(&strict, &wrong_iss).contains("issuer"));
    let good = strict
        .issue(&json!({"sub": "a", "exp": far(), "iss": "me", "aud": ["x", "api"]}))
        .unwrap();
    assert!(strict.verify(&good).is_ok());
    let iss_list = strict
        .issue(&json!({"sub": "a", "exp": far(), "iss": ["me"], "aud": "api"}))
        .unwrap();
    assert!(strict.verify(&iss_list).is_err(), "`iss` must be one string");
}

#[test]
fn key_ids_pick_the_key() {
    let k1 = b"first-secret-first-secret-012345";
    let k2 = b"second-secret-second-secret-0123";
    let claims = json!({"sub": "a", "exp": far()});
    let token = hs256_raw(k2, &json!({"alg": "HS256", "kid": "k2"}), &claims);
    let both = JwtVerifier::with_keys([
        JwtKey::hs256(k1).unwrap().with_kid("k1"),
        JwtKey::hs256(k2).unwrap().with_kid("k2"),
    ]);
    assert!(both.verify(&token).is_ok());
    let only_k1 = JwtVerifier::with_keys([JwtKey::hs256(k1).unwrap().with_kid("k1")]);
    assert!(refused(&only_k1, &token).contains("unknown key"));
    // k1's secret under the id k2 does not verify k2's token.
    let mislabelled = JwtVerifier::with_keys([JwtKey::hs256(k1).unwrap().with_kid("k2")]);
    assert!(refused(&mislabelled, &token).contains("signature"));
    // A key without an id answers every token; issue() signs under the id.
    let rotated = JwtVerifier::hs256(k1)
        .unwrap()
        .key(JwtKey::hs256(k2).unwrap().with_kid("k2"));
    assert!(rotated.verify(&token).is_ok());
    let issued = JwtVerifier::with_keys([JwtKey::hs256(k2).unwrap().with_kid("k2")])
        .issue(&claims)
        .unwrap();
    assert!(both.verify(&issued).is_ok());
    assert!(JwtVerifier::with_keys([]).verify(&issued).is_err());
}

#[test]
fn agents_claim_must_be_an_array_of_names() {
    let j = jwt();
    let scope = |agents: Value| {
        let token = j.issue(&json!({"sub": "a", "exp": far(), "agents": agents})).unwrap();
        j.check_static(&token).map(|v| v.scope)
    };
    assert_eq!(scope(json!(["x", "y"])).unwrap(), AgentScope::only(["x", "y"]));
    assert_eq!(scope(json!([])).unwrap(), AgentScope::only(Vec::<String>::new()));
    for bad in [
        json!("x"),
        json!("*"),
        json!(null),
        json!(true),
        json!(1),
        json!({"x": true}),
        json!(["x", 1]),
        json!([["x"]]),
    ] {
        let e = scope(bad.clone()).unwrap_err();
        assert!(e.to_string().contains("`agents`"), "{bad}: {e}");
    }
    let none = j.issue(&json!({"sub": "a", "exp": far()})).unwrap();
    assert_eq!(j.check_static(&none).unwrap().scope, AgentScope::All);
}

#[test]
fn subjects_must_be_plain_visible_text() {
    let j = jwt().principal_as_subject();
    let principal = |sub: Value| {
        let token = j.issue(&json!({"sub": sub, "exp": far()})).unwrap();
        j.check_static(&token).map(|v| v.principal)
    };
    assert_eq!(principal(json!("alice@example.com")).unwrap(), "alice@example.com");
    assert_eq!(principal(json!("Zoë 李")).unwrap(), "Zoë 李");
    assert_eq!(
        principal(json!("x".repeat(MAX_SUBJECT_BYTES))).unwrap().len(),
        MAX_SUBJECT_BYTES
    );
    for bad in [
        "ali\u{202E}ecila",
        "\u{2066}alice\u{2069}",
        "\u{2067}a",
        "\u{2068}a",
        "alice\u{200E}",
        "alice\u{200F}",
        "a\u{200B}lice",
        "\u{FEFF}alice",
        "alice\n",
        "alice\r\nx-admin: 1",
        "a\u{0}",
        "a\u{7F}",
        "a\u{85}",
        "a\u{2028}",
        "a\u{E0041}",
        "a\u{061C}",
    ] {
        let e = principal(json!(bad)).unwrap_err();
        assert!(e.to_string().contains("`sub`"), "{bad:?}: {e}");
    }
    assert!(principal(json!("")).unwrap_err().to_string().contains("empty"));
    let long = principal(json!("x".repeat(MAX_SUBJECT_BYTES + 1))).unwrap_err();
    assert!(long.to_string().contains("longer"), "{long}");
    assert!(principal(json!(7)).is_err());
    assert!(principal(json!(["alice"])).is_err());
}

#[test]
fn principals_carry_their_issuer_unless_told_otherwise() {
    let j = jwt();
    let principal = |j: &JwtVerifier, claims: Value| j.check_static(&j.issue(&claims).unwrap()).map(|v| v.principal);
    assert_eq!(
        principal(&j, json!({"sub": "alice", "exp": far()})).unwrap(),
        "jwt:#alice"
    );
    assert_eq!(
        principal(
            &j,
            json!({"sub": "alice#x", "exp": far(), "iss": "https://idp.example"})
        )
        .unwrap(),
        "jwt:https://idp.example#alice#x"
    );
    let e = principal(&j, json!({"sub": "x", "exp": far(), "iss": "https://a#b"})).unwrap_err();
    assert!(e.to_string().contains("`iss`"), "{e}");
    let e = principal(&j, json!({"sub": "x", "exp": far(), "iss": "a\u{202E}"})).unwrap_err();
    assert!(e.to_string().contains("`iss`"), "{e}");
    let raw = jwt().principal_as_subject();
    assert_eq!(raw.naming(), PrincipalNaming::Subject);
    assert_eq!(
        principal(
            &raw,
            json!({"sub": "alice", "exp": far(), "iss": "https://idp.example"})
        )
        .unwrap(),
        "alice"
    );
}

#[test]
fn oversized_tokens_are_refused_before_decoding() {
    let j = jwt();
    let big = j
        .issue(&json!({"sub": "a", "exp": far(), "pad": "x".repeat(MAX_TOKEN_BYTES)}))
        .unwrap();
    assert!(refused(&j, &big).contains("larger than 8192 bytes"));
    // Not even valid base64: the length alone refuses it.
    let junk = format!("{}.{}.x", "!".repeat(MAX_TOKEN_BYTES), "!");
    assert!(refused(&j, &junk).contains("larger than"));
    let fits = j
        .issue(&json!({"sub": "a", "exp": far(), "pad": "x".repeat(6000)}))
        .unwrap();
    assert!(j.verify(&fits).is_ok());
}

#[test]
fn keys_are_checked_when_configured_and_never_shown() {
    assert_eq!(JwtKey::hs256(b"short").unwrap_err(), JwtKeyError::ShortSecret(5));
    assert_eq!(
        JwtKey::rs256_pem(b"not a pem").unwrap_err(),
        JwtKeyError::BadPublicKey(JwtAlgorithm::Rs256)
    );
    assert_eq!(
        JwtKey::es256_pem(b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n").unwrap_err(),
        JwtKeyError::BadPublicKey(JwtAlgorithm::Es256)
    );
    let j = jwt().key(
        JwtKey::hs256(b"rotation-secret-rotation-secret!")
            .unwrap()
            .with_kid("r"),
    );
    let shown = format!("{j:?} {:?}", j.keys[0]);
    for secret in [SECRET, b"rotation-secret-rotation-secret!"] {
        let secret = std::str::from_utf8(secret).unwrap();
        assert!(!shown.contains(secret), "{shown}");
        assert!(!shown.contains(&format!("{:?}", secret.as_bytes())), "{shown}");
    }
    assert!(shown.contains("Hs256") && shown.contains("\"r\""), "{shown}");
    let public_only = JwtVerifier::with_keys([]);
    assert_eq!(public_only.issue(&json!({})).unwrap_err(), JwtKeyError::NoSigningSecret);
}

/// RSA and P-256 key pairs from the `openssl` command, in `dir`; `None`
/// when it is not installed.
fn openssl_keys(dir: &Path) -> Option<[(Vec<u8>, Vec<u8>); 2]> {
    let run = |args: &[&str]| {
        Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    };
    let mut pairs = Vec::new();
    for (name, algorithm, options) in [
        ("rsa", "RSA", ["-pkeyopt", "rsa_keygen_bits:2048"]),
        ("ec", "EC", ["-pkeyopt", "ec_paramgen_curve:P-256"]),
    ] {
        let private = format!("{name}.pem");
        let public = format!("{name}.pub.pem");
        let generated = run(&[
            "genpkey",
            "-algorithm",
            algorithm,
            options[0],
            options[1],
            "-out",
            &private,
        ]);
        if !generated || !run(&["pkey", "-in", &private, "-pubout", "-out", &public]) {
            eprintln!("skipping: the openssl command is not available");
            return None;
        }
        pairs.push((
            std::fs::read(dir.join(&private)).ok()?,
            std::fs::read(dir.join(&public)).ok()?,
        ));
    }
    pairs.try_into().ok()
}

#[test]
fn rs256_and_es256_public_keys_and_no_algorithm_confusion() {
    let dir = tempfile::tempdir().unwrap();
    let Some([(rsa_private, rsa_public), (ec_private, ec_public)]) = openssl_keys(dir.path()) else {
        return;
    };
    let claims = json!({"sub": "svc", "exp": far()});
    let rs = jsonwebtoken::encode(
        &Header::new(Algorithm::RS256),
        &claims,
        &EncodingKey::from_rsa_pem(&rsa_private).unwrap(),
    )
    .unwrap();
    let es = jsonwebtoken::encode(
        &Header::new(Algorithm::ES256),
        &claims,
        &EncodingKey::from_ec_pem(&ec_private).unwrap(),
    )
    .unwrap();
    let j = JwtVerifier::with_keys([
        JwtKey::rs256_pem(&rsa_public).unwrap(),
        JwtKey::es256_pem(&ec_public).unwrap().with_kid("ec"),
    ]);
    assert_eq!(j.verify(&rs).unwrap()["sub"], "svc");
    assert_eq!(j.verify(&es).unwrap()["sub"], "svc");
    assert!(format!("{j:?}").contains("Rs256"));

    // Keys of the wrong kind are refused when configured.
    assert!(JwtKey::rs256_pem(&ec_public).is_err());
    assert!(JwtKey::es256_pem(&rsa_public).is_err());

    // The public key used as an HMAC secret (the classic confusion): no
    // HS256 key is configured, so HS256 is not accepted at all.
    for public in [&rsa_public, &ec_public] {
        let forged = hs256_raw(public, &json!({"alg": "HS256"}), &claims);
        assert!(refused(&j, &forged).contains("algorithm is not accepted"));
    }
    // An RS256 token relabelled ES256 (or HS256) verifies with no key.
    let mut parts: Vec<String> = rs.split('.').map(str::to_owned).collect();
    for alg in ["ES256", "HS256", "none"] {
        parts[0] = b64(json!({"alg": alg}).to_string());
        assert!(j.verify(&parts.join(".")).is_err(), "{alg}");
    }
    // Beside an HS256 secret, the public key still is not an HMAC key.
    let mixed = jwt().key(JwtKey::rs256_pem(&rsa_public).unwrap());
    let forged = hs256_raw(&rsa_public, &json!({"alg": "HS256"}), &claims);
    assert!(refused(&mixed, &forged).contains("signature"));
    assert!(mixed.verify(&rs).is_ok());
    // An HS256-only verifier refuses RS256 tokens outright.
    assert!(refused(&jwt(), &rs).contains("algorithm is not accepted"));
}

#[test]
fn mutated_tokens_never_verify_and_never_panic() {
    let j = jwt().issuer("me");
    let token = j
        .issue(&json!({"sub": "alice", "exp": far(), "iss": "me", "agents": ["x"]}))
        .unwrap();
    assert!(j.verify(&token).is_ok());
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/ \x00";
    // A fixed xorshift sequence: the same mutations on every run.
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move |bound: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % bound as u64) as usize
    };
    for _ in 0..3000 {
        let mut bytes = token.clone().into_bytes();
        for _ in 0..=next(3) {
            let at = next(bytes.len());
            match next(3) {
                0 => bytes[at] = alphabet[next(alphabet.len())],
                1 => {
                    bytes.remove(at);
                }
                _ => bytes.insert(at, alphabet[next(alphabet.len())]),
            }
        }
        let Ok(mutated) = String::from_utf8(bytes) else {
            continue;
        };
        if mutated != token {
            // Base64url has no canonical form for the last character's
            // spare bits, so a mutated token may still decode to the same
            // signed bytes; anything that verifies must say the same thing.
            if let Ok(claims) = j.verify(&mutated) {
                assert_eq!(claims, j.verify(&token).unwrap(), "{mutated}");
            }
        }
    }
}
