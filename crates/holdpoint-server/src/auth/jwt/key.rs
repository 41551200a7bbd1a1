//! [`JwtKey`]: one verification key (an algorithm, its key material, an
//! optional key id), checked usable when it is configured.

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey};

/// The shortest HS256 secret accepted: the hash size (RFC 7518 §3.2).
const MIN_HS256_SECRET_BYTES: usize = 32;

/// Why a key could not be configured or a token could not be issued.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JwtKeyError {
    /// An HS256 secret shorter than 32 bytes (RFC 7518 §3.2 asks for at
    /// least the hash size).
    #[error("an HS256 secret must be at least {MIN_HS256_SECRET_BYTES} bytes; this one has {0}")]
    ShortSecret(usize),
    /// The PEM text is not a public key usable for the algorithm.
    #[error("not a usable {0} public key in PEM form")]
    BadPublicKey(JwtAlgorithm),
    /// No cryptography backend is available to `jsonwebtoken` (the build
    /// enables none, or more than one, and none was installed).
    #[error("no jsonwebtoken crypto provider is available")]
    NoCryptoProvider,
    /// [`JwtVerifier::issue`](super::JwtVerifier::issue) needs an HS256
    /// secret; the verifier has only public keys.
    #[error("this verifier has no HS256 secret to sign with")]
    NoSigningSecret,
    /// The claims could not be signed (they are not a JSON object).
    #[error("the claims could not be signed: {0}")]
    Sign(String),
}

/// The signature algorithms a [`JwtKey`] can verify. Every other `alg`
/// (including `none`) is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum JwtAlgorithm {
    /// HMAC-SHA256 with a shared secret.
    Hs256,
    /// RSASSA-PKCS1-v1_5 with SHA-256, verified with an RSA public key.
    Rs256,
    /// ECDSA on P-256 with SHA-256, verified with an EC public key.
    Es256,
}

impl JwtAlgorithm {
    /// The `jsonwebtoken` algorithm.
    pub(super) fn of(self) -> Algorithm {
        match self {
            JwtAlgorithm::Hs256 => Algorithm::HS256,
            JwtAlgorithm::Rs256 => Algorithm::RS256,
            JwtAlgorithm::Es256 => Algorithm::ES256,
        }
    }

    /// The name in a token's `alg` header.
    pub fn name(self) -> &'static str {
        match self {
            JwtAlgorithm::Hs256 => "HS256",
            JwtAlgorithm::Rs256 => "RS256",
            JwtAlgorithm::Es256 => "ES256",
        }
    }
}

impl std::fmt::Display for JwtAlgorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One verification key: an algorithm, the key material and an optional
/// key id (`kid`). Its `Debug` output names the algorithm and the id only.
#[derive(Clone)]
pub struct JwtKey {
    pub(super) kid: Option<String>,
    pub(super) alg: JwtAlgorithm,
    pub(super) decoding: DecodingKey,
    /// Present for HS256 secrets only: what
    /// [`JwtVerifier::issue`](super::JwtVerifier::issue) signs with.
    pub(super) encoding: Option<EncodingKey>,
}

impl std::fmt::Debug for JwtKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtKey")
            .field("alg", &self.alg)
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

/// Checks that a crypto provider exists and that it accepts `key` for
/// `alg`, so a key that can never verify is refused when configured.
pub(super) fn probe(alg: JwtAlgorithm, key: &DecodingKey) -> Result<(), JwtKeyError> {
    if jsonwebtoken::crypto::CryptoProvider::try_get_default().is_none() {
        return Err(JwtKeyError::NoCryptoProvider);
    }
    // An empty signature never verifies; only an unusable key is an error.
    jsonwebtoken::crypto::verify("", b"", key, alg.of())
        .map(|_| ())
        .map_err(|_| JwtKeyError::BadPublicKey(alg))
}

impl JwtKey {
    /// An HS256 shared secret (at least 32 bytes; use random ones).
    pub fn hs256(secret: impl AsRef<[u8]>) -> Result<Self, JwtKeyError> {
        let secret = secret.as_ref();
        if secret.len() < MIN_HS256_SECRET_BYTES {
            return Err(JwtKeyError::ShortSecret(secret.len()));
        }
        let short = |_| JwtKeyError::ShortSecret(secret.len());
        let decoding = DecodingKey::from_secret(secret).map_err(short)?;
        let encoding = EncodingKey::from_secret(secret).map_err(short)?;
        probe(JwtAlgorithm::Hs256, &decoding)?;
        Ok(JwtKey {
            kid: None,
            alg: JwtAlgorithm::Hs256,
            decoding,
            encoding: Some(encoding),
        })
    }

    /// An RSA public key (`-----BEGIN PUBLIC KEY-----` or
    /// `-----BEGIN RSA PUBLIC KEY-----`) for RS256 tokens.
    pub fn rs256_pem(pem: impl AsRef<[u8]>) -> Result<Self, JwtKeyError> {
        let decoding =
            DecodingKey::from_rsa_pem(pem.as_ref()).map_err(|_| JwtKeyError::BadPublicKey(JwtAlgorithm::Rs256))?;
        Self::public(JwtAlgorithm::Rs256, decoding)
    }

    /// A P-256 public key (`-----BEGIN PUBLIC KEY-----`) for ES256 tokens.
    pub fn es256_pem(pem: impl AsRef<[u8]>) -> Result<Self, JwtKeyError> {
        let decoding =
            DecodingKey::from_ec_pem(pem.as_ref()).map_err(|_| JwtKeyError::BadPublicKey(JwtAlgorithm::Es256))?;
        Self::public(JwtAlgorithm::Es256, decoding)
    }

    fn public(alg: JwtAlgorithm, decoding: DecodingKey) -> Result<Self, JwtKeyError> {
        probe(alg, &decoding)?;
        Ok(JwtKey {
            kid: None,
            alg,
            decoding,
            encoding: None,
        })
    }

    /// The same key under the id `kid`: a token whose `kid` header names
    /// another id is not checked against it.
    pub fn with_kid(mut self, kid: impl Into<String>) -> Self {
        self.kid = Some(kid.into());
        self
    }

    /// The algorithm this key verifies.
    pub fn algorithm(&self) -> JwtAlgorithm {
        self.alg
    }

    /// The key id, if any.
    pub fn kid(&self) -> Option<&str> {
        self.kid.as_deref()
    }

    /// Whether a token with header `alg` and `kid` may be checked against
    /// this key: the algorithm must match exactly (so a public key is never
    /// used as an HMAC secret), and a key with an id only answers tokens
    /// naming that id or none.
    pub(super) fn answers(&self, alg: JwtAlgorithm, kid: Option<&str>) -> bool {
        self.alg == alg && (self.kid.is_none() || kid.is_none() || self.kid.as_deref() == kid)
    }
}
