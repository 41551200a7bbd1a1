use serde_json::json;

use super::*;

fn subject(input: &serde_json::Value) -> Subject {
    Subject::new("bank", "transferMoney", input, Decision::Approve)
        .hold("snap-1", Some("t1"))
        .actor("alice", vec!["finance".into()])
        .rule(
            "large transfers",
            Some(Quorum {
                required: 1,
                reached: 1,
            }),
        )
}

fn expect(input: &serde_json::Value) -> Expect {
    Expect::new("transferMoney", input).hold("snap-1", Some("t1"))
}

#[test]
fn a_receipt_verifies_for_its_call_and_no_other() {
    let signer = ReceiptSigner::ephemeral().unwrap();
    let jwks = signer.jwks();
    let input = json!({"from": "checking", "to": "acct-4471", "amount": 18300.0});
    let token = signer.sign(subject(&input)).unwrap();
    let r = verify(&token, &jwks, &expect(&input)).unwrap();
    assert_eq!(r.subject.actors[0].roles, vec!["finance".to_owned()]);
    assert_eq!(r.subject.rule.as_deref(), Some("large transfers"));
    assert_eq!(r.iss, ISSUER);
    // A client's re-serialisation of the same input still verifies.
    assert!(
        verify(
            &token,
            &jwks,
            &expect(&json!({"amount": 18300, "to": "acct-4471", "from": "checking"}))
        )
        .is_ok()
    );

    let other_input = json!({"from": "checking", "to": "acct-9999", "amount": 18300});
    assert!(matches!(
        verify(&token, &jwks, &expect(&other_input)),
        Err(ReceiptError::OtherInput { .. })
    ));
    assert!(matches!(
        verify(&token, &jwks, &Expect::new("closeAccount", &input)),
        Err(ReceiptError::OtherTool { .. })
    ));
    assert!(matches!(
        verify(
            &token,
            &jwks,
            &Expect::new("transferMoney", &input).hold("snap-2", Some("t1"))
        ),
        Err(ReceiptError::OtherHold { .. })
    ));
    assert!(matches!(
        verify(
            &token,
            &jwks,
            &Expect::new("transferMoney", &input).hold("snap-1", Some("t2"))
        ),
        Err(ReceiptError::OtherHold { .. })
    ));
}

#[test]
fn tampered_claims_or_signature_do_not_verify() {
    let signer = ReceiptSigner::ephemeral().unwrap();
    let jwks = signer.jwks();
    let input = json!({"amount": 100});
    let token = signer.sign(subject(&input)).unwrap();
    let parts: Vec<&str> = token.split('.').collect();

    // Claims rewritten to bind another input, old signature kept.
    let mut claims: serde_json::Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
    let edited = json!({"amount": 100000});
    claims["inputSha256"] = json!(input_sha256(&edited));
    let forged = format!(
        "{}.{}.{}",
        parts[0],
        URL_SAFE_NO_PAD.encode(claims.to_string()),
        parts[2]
    );
    assert!(matches!(
        verify(&forged, &jwks, &expect(&edited)),
        Err(ReceiptError::Signature)
    ));

    // Another signer's key with the same kid.
    let other = ReceiptSigner::new(vec![ReceiptKey::new(signer.current().kid(), [9; 32]).unwrap()]).unwrap();
    let foreign = other.sign(subject(&input)).unwrap();
    assert!(matches!(
        verify(&foreign, &jwks, &expect(&input)),
        Err(ReceiptError::Signature)
    ));

    // `alg: none` and garbage.
    let none = format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(r#"{"alg":"none","kid":"x"}"#),
        parts[1]
    );
    assert!(matches!(
        verify(&none, &jwks, &expect(&input)),
        Err(ReceiptError::Algorithm(_))
    ));
    assert!(matches!(
        verify("abc", &jwks, &expect(&input)),
        Err(ReceiptError::Malformed(_))
    ));
}

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

#[test]
fn expired_and_unknown_keys_do_not_verify() {
    let signer = ReceiptSigner::ephemeral().unwrap();
    let input = json!({"amount": 1});
    let token = signer.sign_at(subject(&input), 1_000, 1_300).unwrap();
    assert!(verify_at(&token, &signer.jwks(), &expect(&input), 1_299).is_ok());
    assert!(matches!(
        verify_at(&token, &signer.jwks(), &expect(&input), 1_300),
        Err(ReceiptError::Expired(1_300))
    ));
    let stranger = ReceiptSigner::ephemeral().unwrap();
    assert!(matches!(
        verify_at(&token, &stranger.jwks(), &expect(&input), 1_000),
        Err(ReceiptError::UnknownKey(_))
    ));
}

#[test]
fn rotation_keeps_earlier_receipts_verifying_until_the_key_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let before = ReceiptSigner::load_or_create(dir.path()).unwrap();
    let again = ReceiptSigner::load_or_create(dir.path()).unwrap();
    assert_eq!(before.kids(), again.kids());
    let input = json!({"amount": 5});
    let old = before.sign(subject(&input)).unwrap();

    let after = ReceiptSigner::rotate_in(dir.path()).unwrap();
    assert_eq!(after.kids().len(), 2);
    assert_ne!(after.current().kid(), before.current().kid());
    let jwks = after.jwks();
    assert_eq!(jwks.keys[0].kid, after.current().kid(), "newest first");
    assert!(
        verify(&old, &jwks, &expect(&input)).is_ok(),
        "the previous key still verifies"
    );
    let new = after.sign(subject(&input)).unwrap();
    assert!(verify(&new, &jwks, &expect(&input)).is_ok());
    assert!(matches!(
        verify(&new, &before.jwks(), &expect(&input)),
        Err(ReceiptError::UnknownKey(_))
    ));
    let dropped = after.retain_newest(1).jwks();
    assert!(matches!(
        verify(&old, &dropped, &expect(&input)),
        Err(ReceiptError::UnknownKey(_))
    ));

    // The JWKS round-trips through its JSON form.
    let text = serde_json::to_string(&jwks).unwrap();
    assert!(
        text.contains(r#""kty":"OKP""#) && text.contains(r#""crv":"Ed25519""#),
        "{text}"
    );
    assert_eq!(Jwks::from_json(&text).unwrap(), jwks);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join(KEY_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "the key file is private");
    }
}

#[test]
fn a_pinned_key_signs_a_pinned_token() {
    // Ed25519 is deterministic: another implementation can check its
    // verifier against this token (reference, "Approval receipts").
    let signer = ReceiptSigner::new(vec![ReceiptKey::new("pin", [7; 32]).unwrap()]).unwrap();
    let jwk = &signer.jwks().keys[0];
    assert_eq!(jwk.x.len(), 43);
    let token = signer.sign_at(subject(&json!({"amount": 1})), 1_000, 1_300).unwrap();
    let header = token.split('.').next().unwrap();
    let header: serde_json::Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(header).unwrap()).unwrap();
    assert_eq!(header, json!({"alg": "EdDSA", "typ": TYP, "kid": "pin"}));
}

/// BENCHMARKS.md ("Approval receipts"): a receipt's size and the cost of
/// signing and verifying one. Prints; asserts nothing about time. Run with
/// `cargo test -p holdpoint-receipt --release -- --ignored --nocapture measure`.
#[test]
#[ignore]
fn measure_receipt_size_and_cost() {
    let signer = ReceiptSigner::ephemeral().unwrap();
    let jwks = signer.jwks();
    let input = json!({"fromAccount": "checking", "toAccount": "acct-4471", "amount": 18300.0, "memo": "invoice 2291"});
    let subject = || {
        Subject::new("bankingAgent", "transferMoney", &input, Decision::Approve)
            .hold("0f8e4a1c-6a2b-4d7e-9b1f-2c3d4e5f6a7b", Some("c2f1d0e9a8b7"))
            .actor("olga@example.com", vec!["finance".into()])
            .rule(
                "large transfers",
                Some(Quorum {
                    required: 1,
                    reached: 1,
                }),
            )
    };
    let n = 2_000u32;
    let start = std::time::Instant::now();
    let mut token = String::new();
    for _ in 0..n {
        token = signer.sign(subject()).unwrap();
    }
    let sign = start.elapsed() / n;
    let expect = expect(&input).hold("0f8e4a1c-6a2b-4d7e-9b1f-2c3d4e5f6a7b", Some("c2f1d0e9a8b7"));
    let start = std::time::Instant::now();
    for _ in 0..n {
        verify(&token, &jwks, &expect).unwrap();
    }
    let check = start.elapsed() / n;
    println!(
        "receipt: {} bytes; sign {sign:?}/receipt; verify {check:?}/receipt",
        token.len()
    );
}
