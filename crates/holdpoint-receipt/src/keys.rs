//! The keys that sign receipts, kept like the server's state-signing keys
//! (`receipt-keys.json` in the data directory, newest signs, every kept
//! key is published), and their public form, a JWKS.

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ed25519_dalek::Signer as _;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::claims::{Receipt, Subject};
use crate::{ALG, ISSUER, ReceiptError, ReceiptIssuer, TYP};

/// The file in the data directory that holds the receipt keys.
pub const KEY_FILE: &str = "receipt-keys.json";

/// How long a receipt is valid after it is issued, unless configured.
pub const DEFAULT_TTL: Duration = Duration::from_secs(300);

/// One Ed25519 signing key and its id.
#[derive(Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReceiptKey {
    kid: String,
    /// The 32-byte Ed25519 seed, base64.
    #[serde(with = "b64")]
    seed: Vec<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    created_at: Option<String>,
}

impl std::fmt::Debug for ReceiptKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReceiptKey")
            .field("kid", &self.kid)
            .field("seed", &"<redacted>")
            .finish()
    }
}

mod b64 {
    use super::*;
    pub fn serialize<S: serde::Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(bytes))
    }
    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        STANDARD.decode(text.trim()).map_err(serde::de::Error::custom)
    }
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

fn random<const N: usize>() -> Result<[u8; N], ReceiptError> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).map_err(|e| ReceiptError::Key(format!("no randomness: {e}")))?;
    Ok(bytes)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl ReceiptKey {
    /// A key from a 32-byte seed; the id must be non-empty.
    pub fn new(kid: impl Into<String>, seed: [u8; 32]) -> Result<Self, ReceiptError> {
        let key = ReceiptKey {
            kid: kid.into(),
            seed: seed.to_vec(),
            created_at: None,
        };
        key.check()?;
        Ok(key)
    }

    /// A fresh random key with a generated id (`r` + unix day + random tag).
    pub fn generate() -> Result<Self, ReceiptError> {
        let now = unix_now();
        Ok(ReceiptKey {
            kid: format!("r{}-{}", now / 86_400, hex(&random::<4>()?)),
            seed: random::<32>()?.to_vec(),
            created_at: Some(now.to_string()),
        })
    }

    /// The key id (the JWS `kid`).
    pub fn kid(&self) -> &str {
        &self.kid
    }

    fn check(&self) -> Result<(), ReceiptError> {
        if self.kid.is_empty() {
            return Err(ReceiptError::Key("a receipt key needs an id".into()));
        }
        if self.seed.len() != 32 {
            return Err(ReceiptError::Key(format!(
                "receipt key {:?} is {} bytes; an Ed25519 seed is 32",
                self.kid,
                self.seed.len()
            )));
        }
        Ok(())
    }

    fn signing_key(&self) -> ed25519_dalek::SigningKey {
        let mut seed = [0u8; 32];
        seed.copy_from_slice(&self.seed[..32.min(self.seed.len())]);
        ed25519_dalek::SigningKey::from_bytes(&seed)
    }

    /// The public key as a JWK (`{"kty":"OKP","crv":"Ed25519","x",…}`).
    pub fn jwk(&self) -> Jwk {
        Jwk {
            kty: "OKP".into(),
            crv: "Ed25519".into(),
            x: URL_SAFE_NO_PAD.encode(self.signing_key().verifying_key().to_bytes()),
            kid: self.kid.clone(),
            alg: Some(ALG.into()),
            key_use: Some("sig".into()),
        }
    }
}

/// One public key of a JWKS (RFC 7517, RFC 8037 for `OKP`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Jwk {
    /// Key type: `OKP`.
    pub kty: String,
    /// Curve: `Ed25519`.
    #[serde(default)]
    pub crv: String,
    /// The public key, base64url without padding.
    #[serde(default)]
    pub x: String,
    /// The key id.
    #[serde(default)]
    pub kid: String,
    /// `EdDSA`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alg: Option<String>,
    /// `sig`.
    #[serde(rename = "use", default, skip_serializing_if = "Option::is_none")]
    pub key_use: Option<String>,
}

/// A JSON Web Key Set: the public keys receipts verify against.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Jwks {
    /// The keys.
    pub keys: Vec<Jwk>,
}

impl Jwks {
    /// Parses a JWKS document.
    pub fn from_json(text: &str) -> Result<Self, ReceiptError> {
        serde_json::from_str(text).map_err(|e| ReceiptError::Key(format!("not a JWKS: {e}")))
    }

    /// The key with this id.
    pub fn get(&self, kid: &str) -> Option<&Jwk> {
        self.keys.iter().find(|k| k.kid == kid)
    }
}

#[derive(Serialize, Deserialize)]
struct KeyFile {
    keys: Vec<ReceiptKey>,
}

/// Signs receipts: the newest key signs, every kept key is published in
/// [`jwks`](Self::jwks), so receipts signed before a rotation still verify
/// until they expire (and their key is dropped).
#[derive(Debug, Clone)]
pub struct ReceiptSigner {
    keys: Vec<ReceiptKey>,
    ttl: Duration,
}

impl ReceiptSigner {
    /// A signer with these keys (oldest first; the last signs). Fails when
    /// empty, when a key is malformed or two share an id.
    pub fn new(keys: Vec<ReceiptKey>) -> Result<Self, ReceiptError> {
        if keys.is_empty() {
            return Err(ReceiptError::Key("a receipt signer needs a key".into()));
        }
        for (i, k) in keys.iter().enumerate() {
            k.check()?;
            if keys[..i].iter().any(|o| o.kid == k.kid) {
                return Err(ReceiptError::Key(format!("two receipt keys share the id {:?}", k.kid)));
            }
        }
        Ok(ReceiptSigner { keys, ttl: DEFAULT_TTL })
    }

    /// One fresh key kept in memory only: receipts it signed stop
    /// verifying once the process is gone. Prefer
    /// [`load_or_create`](Self::load_or_create).
    pub fn ephemeral() -> Result<Self, ReceiptError> {
        Self::new(vec![ReceiptKey::generate()?])
    }

    /// The keys kept in `dir` ([`KEY_FILE`]), creating the directory and a
    /// first key when there are none.
    pub fn load_or_create(dir: &Path) -> Result<Self, ReceiptError> {
        let path = dir.join(KEY_FILE);
        match std::fs::read(&path) {
            Ok(bytes) => {
                let file: KeyFile = serde_json::from_slice(&bytes)
                    .map_err(|e| ReceiptError::Key(format!("{}: {e}", path.display())))?;
                Self::new(file.keys)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let signer = Self::ephemeral()?;
                signer.save(dir)?;
                Ok(signer)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Adds a fresh key to the keys kept in `dir` and saves them: the new
    /// key signs from now on, the old ones stay in the JWKS.
    pub fn rotate_in(dir: &Path) -> Result<Self, ReceiptError> {
        let mut signer = Self::load_or_create(dir)?;
        signer.keys.push(ReceiptKey::generate()?);
        signer.save(dir)?;
        Ok(signer)
    }

    /// Drops keys other than the newest `keep` (receipts they signed no
    /// longer verify).
    pub fn retain_newest(mut self, keep: usize) -> Self {
        let keep = keep.max(1);
        if self.keys.len() > keep {
            self.keys.drain(..self.keys.len() - keep);
        }
        self
    }

    /// With receipts valid for `ttl` after they are issued (default
    /// [`DEFAULT_TTL`], five minutes).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// Writes the keys to `dir` (owner-only, replaced atomically).
    pub fn save(&self, dir: &Path) -> Result<PathBuf, ReceiptError> {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::DirBuilderExt;
            builder.mode(0o700);
        }
        builder.create(dir)?;
        let path = dir.join(KEY_FILE);
        let tmp = dir.join(format!(".{KEY_FILE}.tmp"));
        let text = serde_json::to_vec_pretty(&KeyFile {
            keys: self.keys.clone(),
        })
        .map_err(|e| ReceiptError::Key(e.to_string()))?;
        {
            use std::io::Write;
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create(true).truncate(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt;
                options.mode(0o600);
            }
            let mut f = options.open(&tmp)?;
            f.write_all(&text)?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, &path)?;
        Ok(path)
    }

    /// The key that signs.
    pub fn current(&self) -> &ReceiptKey {
        // `new` refuses an empty list and nothing removes the last key.
        &self.keys[self.keys.len() - 1]
    }

    /// The key ids, oldest first.
    pub fn kids(&self) -> Vec<&str> {
        self.keys.iter().map(|k| k.kid.as_str()).collect()
    }

    /// The public keys of every kept key, newest first: what
    /// `GET /.well-known/holdpoint-receipts.json` serves.
    pub fn jwks(&self) -> Jwks {
        Jwks {
            keys: self.keys.iter().rev().map(ReceiptKey::jwk).collect(),
        }
    }

    /// Signs a receipt for `subject`, issued now and valid for the TTL.
    pub fn sign(&self, subject: Subject) -> Result<String, ReceiptError> {
        let iat = unix_now();
        let ttl = i64::try_from(self.ttl.as_secs()).unwrap_or(i64::MAX);
        self.sign_at(subject, iat, iat.saturating_add(ttl))
    }

    /// Signs a receipt with explicit `iat` and `exp` (unix seconds).
    pub fn sign_at(&self, subject: Subject, iat: i64, exp: i64) -> Result<String, ReceiptError> {
        let key = self.current();
        let receipt = Receipt {
            iss: ISSUER.into(),
            jti: hex(&random::<16>()?),
            iat,
            exp,
            subject,
        };
        let header = json!({"alg": ALG, "typ": TYP, "kid": key.kid});
        let payload = serde_json::to_vec(&receipt).map_err(|e| ReceiptError::Malformed(e.to_string()))?;
        let signing_input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(payload)
        );
        let signature = key.signing_key().sign(signing_input.as_bytes());
        Ok(format!(
            "{signing_input}.{}",
            URL_SAFE_NO_PAD.encode(signature.to_bytes())
        ))
    }
}

impl ReceiptIssuer for ReceiptSigner {
    fn issue(&self, subject: Subject) -> Result<String, ReceiptError> {
        self.sign(subject)
    }
}
