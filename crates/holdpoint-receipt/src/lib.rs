//! Approval receipts (docs/reference.md, "Approval receipts").
//!
//! A call that runs after a hold carries a **receipt**: a compact JWS
//! (`header.payload.signature`, EdDSA over Ed25519) whose claims bind the
//! hold, the agent, the tool, the SHA-256 of the canonical input that
//! runs, the decision, who decided (and their roles), the rule, the quorum
//! reached, the time and an expiry. The tool reads it from its context
//! and may hand it to the service it calls; the service checks it offline
//! with [`verify`] against the issuer's public keys (a JWKS).
//!
//! This crate has no server or runtime dependency: a service that only
//! verifies needs this crate, the JWKS and the token.
//!
//! ```
//! use holdpoint_receipt::{Decision, Expect, ReceiptSigner, Subject, verify};
//! use serde_json::json;
//!
//! let signer = ReceiptSigner::ephemeral()?;
//! let input = json!({"to": "acct-4471", "amount": 18300});
//! let token = signer.sign(Subject::new("bank", "transferMoney", &input, Decision::Approve).hold("snap-1", Some("t1")))?;
//! let jwks = signer.jwks();
//! let receipt = verify(&token, &jwks, &Expect::new("transferMoney", &input))?;
//! assert_eq!(receipt.subject.decision, Decision::Approve);
//! // The same token never verifies for another input.
//! assert!(verify(&token, &jwks, &Expect::new("transferMoney", &json!({"to": "acct-4471", "amount": 99999}))).is_err());
//! # Ok::<(), holdpoint_receipt::ReceiptError>(())
//! ```

mod canonical;
mod claims;
mod keys;
mod verify;

pub use canonical::{canonical_json, input_sha256};
pub use claims::{Actor, Decision, Quorum, Receipt, Subject};
pub use keys::{DEFAULT_TTL, Jwk, Jwks, KEY_FILE, ReceiptKey, ReceiptSigner};
pub use verify::{Expect, HoldRef, verify, verify_at, verify_unbound};

/// The JWS algorithm of every receipt (RFC 8037: Ed25519).
pub const ALG: &str = "EdDSA";

/// The JWS `typ` header of a receipt.
pub const TYP: &str = "holdpoint-receipt+jwt";

/// The issuer claim (`iss`) of receipts signed by [`ReceiptSigner`].
pub const ISSUER: &str = "holdpoint";

/// The path under which the Holdpoint server serves its receipt keys.
pub const JWKS_PATH: &str = "/.well-known/holdpoint-receipts.json";

/// Issues receipts: the seam between the runtime, which knows what was
/// decided, and the keys that sign it. [`ReceiptSigner`] is the
/// implementation; a test or an HSM-backed signer may provide another.
pub trait ReceiptIssuer: Send + Sync + std::fmt::Debug {
    /// Signs a receipt for `subject`, adding the time, expiry and id.
    fn issue(&self, subject: Subject) -> Result<String, ReceiptError>;
}

/// Why a receipt was not issued, or does not verify.
#[derive(Debug, thiserror::Error)]
pub enum ReceiptError {
    /// The token is not a compact JWS of a receipt.
    #[error("malformed receipt: {0}")]
    Malformed(String),
    /// The token is signed with another algorithm than EdDSA.
    #[error("unsupported receipt algorithm {0:?} (receipts are EdDSA)")]
    Algorithm(String),
    /// No key of the JWKS has the token's `kid`.
    #[error("the receipt was signed with an unknown key {0:?}")]
    UnknownKey(String),
    /// The signature does not match the header and claims.
    #[error("the receipt's signature does not verify")]
    Signature,
    /// The receipt's `exp` is past.
    #[error("the receipt expired at {0} (unix seconds)")]
    Expired(i64),
    /// The receipt is for another tool.
    #[error("the receipt is for tool {actual:?}, not {expected:?}")]
    OtherTool {
        /// The tool the caller expected.
        expected: String,
        /// The tool the receipt names.
        actual: String,
    },
    /// The receipt binds another input.
    #[error("the receipt binds another input (sha256 {actual}, the call's is {expected})")]
    OtherInput {
        /// The SHA-256 of the input the caller is about to act on.
        expected: String,
        /// The SHA-256 the receipt binds.
        actual: String,
    },
    /// The receipt is for another hold.
    #[error("the receipt is for hold {actual}, not {expected}")]
    OtherHold {
        /// The hold the caller expected.
        expected: String,
        /// The hold the receipt names.
        actual: String,
    },
    /// A key could not be made, read or written.
    #[error("receipt keys: {0}")]
    Key(String),
    /// Reading or writing key files failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
