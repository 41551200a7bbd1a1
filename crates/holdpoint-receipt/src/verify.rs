//! Checking a receipt offline against a JWKS.

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::Value;

use crate::canonical::input_sha256;
use crate::claims::Receipt;
use crate::keys::Jwks;
use crate::{ALG, ReceiptError};

/// A hold: the snapshot that held the call and the call's ref.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldRef {
    /// The snapshot id.
    pub snapshot_id: String,
    /// The call's ref, when it has one.
    pub reference: Option<String>,
}

/// What the verifier is about to act on: the receipt must be for this
/// tool and this input (and this hold, when given).
#[derive(Debug, Clone)]
pub struct Expect {
    /// The tool.
    pub tool: String,
    /// SHA-256 of the canonical input.
    pub input_sha256: String,
    /// The hold, when the verifier knows it.
    pub hold: Option<HoldRef>,
}

impl Expect {
    /// Expect a receipt for `tool` with `input`.
    pub fn new(tool: impl Into<String>, input: &Value) -> Self {
        Expect {
            tool: tool.into(),
            input_sha256: input_sha256(input),
            hold: None,
        }
    }

    /// And for this hold.
    pub fn hold(mut self, snapshot_id: impl Into<String>, reference: Option<&str>) -> Self {
        self.hold = Some(HoldRef {
            snapshot_id: snapshot_id.into(),
            reference: reference.map(str::to_owned),
        });
        self
    }
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Checks `token` against `jwks` and `expected`, now: a valid EdDSA
/// signature by a key of the JWKS, not expired, for the expected tool,
/// input and (when given) hold. Returns the receipt's claims.
pub fn verify(token: &str, jwks: &Jwks, expected: &Expect) -> Result<Receipt, ReceiptError> {
    verify_at(token, jwks, expected, now())
}

/// [`verify`] at `now` (unix seconds).
pub fn verify_at(token: &str, jwks: &Jwks, expected: &Expect, now: i64) -> Result<Receipt, ReceiptError> {
    let receipt = verify_signature(token, jwks)?;
    if receipt.exp <= now {
        return Err(ReceiptError::Expired(receipt.exp));
    }
    let s = &receipt.subject;
    if s.tool != expected.tool {
        return Err(ReceiptError::OtherTool {
            expected: expected.tool.clone(),
            actual: s.tool.clone(),
        });
    }
    if s.input_sha256 != expected.input_sha256 {
        return Err(ReceiptError::OtherInput {
            expected: expected.input_sha256.clone(),
            actual: s.input_sha256.clone(),
        });
    }
    if let Some(hold) = &expected.hold
        && (s.snapshot_id.as_deref() != Some(hold.snapshot_id.as_str()) || s.reference != hold.reference)
    {
        let name = |id: Option<&str>, r: &Option<String>| match (id, r) {
            (Some(id), Some(r)) => format!("{id}#{r}"),
            (Some(id), None) => id.to_owned(),
            (None, _) => "(none)".to_owned(),
        };
        return Err(ReceiptError::OtherHold {
            expected: name(Some(&hold.snapshot_id), &hold.reference),
            actual: name(s.snapshot_id.as_deref(), &s.reference),
        });
    }
    Ok(receipt)
}

/// Checks only the signature and expiry of `token`, not what it binds:
/// for inspecting a receipt (`holdpoint receipt verify` without
/// `--tool`/`--input`). A service about to act must use [`verify`].
pub fn verify_unbound(token: &str, jwks: &Jwks) -> Result<Receipt, ReceiptError> {
    let receipt = verify_signature(token, jwks)?;
    if receipt.exp <= now() {
        return Err(ReceiptError::Expired(receipt.exp));
    }
    Ok(receipt)
}

/// The claims of `token` once its signature verifies against `jwks`,
/// without checking expiry or what it binds.
fn verify_signature(token: &str, jwks: &Jwks) -> Result<Receipt, ReceiptError> {
    let malformed = |why: &str| ReceiptError::Malformed(why.to_owned());
    let mut parts = token.trim().split('.');
    let (Some(h), Some(p), Some(sig), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return Err(malformed("not three dot-separated parts"));
    };
    let header: Value = URL_SAFE_NO_PAD
        .decode(h)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| malformed("the header is not base64url JSON"))?;
    let alg = header.get("alg").and_then(Value::as_str).unwrap_or_default();
    if alg != ALG {
        return Err(ReceiptError::Algorithm(alg.to_owned()));
    }
    let kid = header
        .get("kid")
        .and_then(Value::as_str)
        .ok_or_else(|| malformed("the header has no kid"))?;
    let jwk = jwks.get(kid).ok_or_else(|| ReceiptError::UnknownKey(kid.to_owned()))?;
    if jwk.kty != "OKP" || jwk.crv != "Ed25519" {
        return Err(ReceiptError::Key(format!("key {kid:?} is not an Ed25519 key")));
    }
    let x: [u8; 32] = URL_SAFE_NO_PAD
        .decode(&jwk.x)
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| ReceiptError::Key(format!("key {kid:?} has a malformed x")))?;
    let public = ed25519_dalek::VerifyingKey::from_bytes(&x)
        .map_err(|_| ReceiptError::Key(format!("key {kid:?} is not a valid Ed25519 point")))?;
    let signature: [u8; 64] = URL_SAFE_NO_PAD
        .decode(sig)
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| malformed("the signature is not 64 base64url bytes"))?;
    let signature = ed25519_dalek::Signature::from_bytes(&signature);
    let signing_input = &token.trim()[..h.len() + 1 + p.len()];
    public
        .verify_strict(signing_input.as_bytes(), &signature)
        .map_err(|_| ReceiptError::Signature)?;
    let payload = URL_SAFE_NO_PAD
        .decode(p)
        .map_err(|_| malformed("the payload is not base64url"))?;
    serde_json::from_slice(&payload).map_err(|e| ReceiptError::Malformed(format!("claims: {e}")))
}
