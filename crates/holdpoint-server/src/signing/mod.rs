//! Signed client-held state (docs/reference.md §9).
//!
//! A client-managed agent hands its whole conversation to the caller as
//! `AgentOutput.state` and takes it back in `AgentInit.state`. The server
//! installs a [`SigningCodec`] on every such agent: outbound state gets a
//! `signature` member, an HMAC-SHA256 over the canonical JSON form of the
//! rest of the state, with the id of the key that made it:
//!
//! ```json
//! {"sessionId": "…", "messages": […], "artifacts": [], "signature": {"alg": "HS256", "kid": "k20260101-1a2b3c4d", "mac": "…"}}
//! ```
//!
//! The MAC also covers the agent's name, so one agent's state does not
//! load into another. Inbound state that is unsigned, altered, issued by
//! another agent, or signed with a key the server does not know is refused with `PERMISSION_DENIED` (HTTP 403)
//! before the agent sees it. Keys rotate through the [`KeyRing`]: the
//! newest signs, every key in the ring verifies.
//!
//! Signed state is a bearer value, so a resume from it is claimed once: the
//! server records a marker keyed by the MAC in its claims store
//! ([`ServerBuilder::state_claims`](crate::ServerBuilder::state_claims))
//! before any tool runs, and answers a replay of the same state with
//! `ABORTED` (409, "already resumed").

mod keys;

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use holdpoint::session::{JsonStateCodec, SessionState, StateCodec, canonical_json};
use holdpoint::{Error, Result};
use serde_json::{Value, json};
use sha2::Sha256;

pub use keys::{KEY_FILE, KeyRing, MIN_SECRET_LEN, SigningKey};

/// The member of the state object that holds the signature.
pub const SIGNATURE: &str = "signature";

/// Domain separation: these MACs sign Holdpoint state and nothing else.
const CONTEXT: &[u8] = b"holdpoint-state-v1\n";

type HmacSha256 = Hmac<Sha256>;

/// The text the MAC covers: the canonical JSON form (sorted keys, no
/// whitespace, one spelling per number: integral floats in the integer
/// range as integers), so a client that parses and re-serialises the state
/// (JavaScript turns `500.0` into `500` and `1e16` into `10000000000000000`)
/// does not break the signature.
fn signed_form(state: &Value) -> String {
    canonical_json(state)
}

/// A [`StateCodec`] that signs outbound state and verifies inbound state.
///
/// The MAC also covers a scope (the server uses the agent's name), so state
/// one agent handed out does not load into another agent of the server.
#[derive(Debug, Clone)]
pub struct SigningCodec {
    ring: Arc<KeyRing>,
    scope: String,
}

impl SigningCodec {
    /// Signs with the ring's newest key; verifies with any of its keys.
    pub fn new(ring: Arc<KeyRing>) -> Self {
        Self::scoped(ring, "")
    }

    /// [`new`](Self::new), for state that only `scope` may load back.
    pub fn scoped(ring: Arc<KeyRing>, scope: impl Into<String>) -> Self {
        SigningCodec {
            ring,
            scope: scope.into(),
        }
    }

    fn keyed(&self, key: &SigningKey) -> Option<HmacSha256> {
        // HMAC accepts keys of any length: `new_from_slice` does not fail.
        let mut mac = HmacSha256::new_from_slice(key.secret()).ok()?;
        mac.update(CONTEXT);
        mac.update(&(self.scope.len() as u64).to_be_bytes());
        mac.update(self.scope.as_bytes());
        Some(mac)
    }

    fn mac(&self, key: &SigningKey, unsigned: &Value) -> Vec<u8> {
        let Some(mut mac) = self.keyed(key) else {
            // Unreachable; an empty MAC would simply never verify.
            return Vec::new();
        };
        mac.update(signed_form(unsigned).as_bytes());
        mac.finalize().into_bytes().to_vec()
    }

    /// Signs a JSON state object (adds or replaces its `signature`).
    pub fn sign(&self, mut state: Value) -> Result<Value> {
        let Value::Object(map) = &mut state else {
            return Err(Error::Internal("client-held state must be a JSON object".into()));
        };
        map.remove(SIGNATURE);
        let key = self.ring.current();
        let mac = self.mac(key, &state);
        if let Value::Object(map) = &mut state {
            map.insert(
                SIGNATURE.to_owned(),
                json!({"alg": "HS256", "kid": key.kid(), "mac": URL_SAFE_NO_PAD.encode(mac)}),
            );
        }
        Ok(state)
    }

    /// Checks the signature of a JSON state object and returns it without
    /// the `signature` member.
    pub fn verify(&self, mut state: Value) -> Result<Value> {
        let denied = |why: &str| Error::PermissionDenied(format!("client-held state rejected: {why}"));
        let Value::Object(map) = &mut state else {
            return Err(Error::InvalidArgument("init.state must be a JSON object".into()));
        };
        let Some(signature) = map.remove(SIGNATURE) else {
            return Err(denied(
                "it is unsigned; send back the state exactly as the server returned it",
            ));
        };
        let alg = signature.get("alg").and_then(Value::as_str);
        let kid = signature.get("kid").and_then(Value::as_str);
        let mac = signature.get("mac").and_then(Value::as_str);
        let (Some("HS256"), Some(kid), Some(mac)) = (alg, kid, mac) else {
            return Err(denied("its signature is malformed"));
        };
        let Some(key) = self.ring.get(kid) else {
            return Err(denied("it was signed with an unknown key"));
        };
        let Ok(given) = URL_SAFE_NO_PAD.decode(mac) else {
            return Err(denied("its signature is malformed"));
        };
        let Some(mut check) = self.keyed(key) else {
            return Err(denied("its key cannot be used"));
        };
        check.update(signed_form(&state).as_bytes());
        if check.verify_slice(&given).is_err() {
            return Err(denied(
                "it has been altered since the server signed it, or was issued by another agent",
            ));
        }
        Ok(state)
    }
}

impl StateCodec for SigningCodec {
    fn encode(&self, state: &SessionState) -> Result<Value> {
        self.sign(JsonStateCodec.encode(state)?)
    }

    fn decode(&self, value: Value) -> Result<SessionState> {
        JsonStateCodec.decode(self.verify(value)?)
    }

    /// The MAC of the signature, in hex: it names the signed content (in
    /// its canonical form) for this agent, so a replay of the same state
    /// has the same key. Only used once `decode` has verified the MAC.
    fn claim_key(&self, value: &Value) -> Option<String> {
        let mac = value.get(SIGNATURE)?.get("mac")?.as_str()?;
        let bytes = URL_SAFE_NO_PAD.decode(mac).ok()?;
        Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdpoint::Message;

    fn codec(keys: Vec<SigningKey>) -> SigningCodec {
        SigningCodec::new(Arc::new(KeyRing::new(keys).unwrap()))
    }

    fn state() -> SessionState {
        let mut s = SessionState::new("s1");
        s.messages.push(Message::user_text("hi"));
        s.custom = json!({"balance": 500.0, "n": 1});
        s
    }

    #[test]
    fn round_trip_and_rejections() {
        let c = codec(vec![SigningKey::new("a", vec![1; 32]).unwrap()]);
        let signed = c.encode(&state()).unwrap();
        assert_eq!(c.decode(signed.clone()).unwrap(), state());
        // Through text, as a client would keep it; JavaScript writes 500.0 as 500.
        let text = serde_json::to_string(&signed).unwrap().replace("500.0", "500");
        assert!(
            text.contains(r#""balance":500,"#) || text.contains(r#""balance":500}"#),
            "{text}"
        );
        assert!(c.decode(serde_json::from_str(&text).unwrap()).is_ok());

        let mut altered = signed.clone();
        altered["custom"]["balance"] = json!(1_000_000.0);
        let e = c.decode(altered).unwrap_err();
        assert_eq!(e.status(), holdpoint::Status::PermissionDenied);
        assert!(e.to_string().contains("altered"), "{e}");

        let mut unsigned = signed.clone();
        unsigned.as_object_mut().unwrap().remove(SIGNATURE);
        assert!(c.decode(unsigned).unwrap_err().to_string().contains("unsigned"));

        let other = codec(vec![SigningKey::new("b", vec![2; 32]).unwrap()]);
        assert!(
            other
                .decode(signed.clone())
                .unwrap_err()
                .to_string()
                .contains("unknown key")
        );

        let mut forged = signed;
        forged["signature"]["kid"] = json!("b");
        assert_eq!(
            other.decode(forged).unwrap_err().status(),
            holdpoint::Status::PermissionDenied
        );
    }

    #[test]
    fn large_integral_floats_survive_a_javascript_round_trip() {
        let c = codec(vec![SigningKey::new("a", vec![1; 32]).unwrap()]);
        let mut s = state();
        s.custom = json!({"limit": 1e16, "max": 1e19, "min": -1e16, "huge": 2e21, "rate": 0.1});
        let signed = c.encode(&s).unwrap();
        // JSON.stringify writes integral doubles below 1e21 as digits.
        let text = serde_json::to_string(&signed)
            .unwrap()
            .replace("-1e+16", "-10000000000000000")
            .replace("1e+16", "10000000000000000")
            .replace("1e+19", "10000000000000000000");
        assert!(text.contains(r#""limit":10000000000000000"#), "{text}");
        assert!(text.contains(r#""max":10000000000000000000"#), "{text}");
        let back = c.decode(serde_json::from_str(&text).unwrap()).unwrap();
        assert_eq!(back.custom["limit"].as_f64(), Some(1e16));
        assert_eq!(back.custom["huge"].as_f64(), Some(2e21));
    }

    /// A signature made before number canonicalisation changed, pinned:
    /// state signed by earlier releases still verifies.
    #[test]
    fn signatures_of_ordinary_values_are_stable() {
        let c = SigningCodec::scoped(
            Arc::new(KeyRing::new(vec![SigningKey::new("pin", vec![7; 32]).unwrap()]).unwrap()),
            "bank",
        );
        let state = json!({
            "sessionId": "s1",
            "messages": [{"role": "user", "content": [{"text": "Transfer $500.50 to savings"}]}],
            "artifacts": [],
            "custom": {"balance": 500.0, "n": 1, "neg": -3, "rate": 0.25, "big": 1.5e300, "tiny": 1e-7, "ok": true, "none": null},
        });
        let signed = c.sign(state.clone()).unwrap();
        assert_eq!(
            signed["signature"]["mac"],
            json!("ZGtkqm_JUwmn8feIUI9ilFAHi3nzwJcBKmBbmnBzr5Y")
        );
        assert_eq!(c.verify(signed).unwrap(), state);
    }

    #[test]
    fn state_of_one_scope_does_not_load_into_another() {
        let ring = Arc::new(KeyRing::new(vec![SigningKey::new("a", vec![1; 32]).unwrap()]).unwrap());
        let bank = SigningCodec::scoped(ring.clone(), "bank");
        let other = SigningCodec::scoped(ring, "other");
        let signed = bank.encode(&state()).unwrap();
        assert!(bank.decode(signed.clone()).is_ok());
        assert!(other.decode(signed).unwrap_err().to_string().contains("another agent"));
    }

    #[test]
    fn rotation_old_keys_verify_newest_signs() {
        let old = SigningKey::new("old", vec![1; 32]).unwrap();
        let new = SigningKey::new("new", vec![2; 32]).unwrap();
        let before = codec(vec![old.clone()]);
        let after = codec(vec![old, new]);
        let signed_before = before.encode(&state()).unwrap();
        assert!(after.decode(signed_before).is_ok());
        let signed_after = after.encode(&state()).unwrap();
        assert_eq!(signed_after["signature"]["kid"], json!("new"));
        assert!(before.decode(signed_after).is_err());
    }
}
