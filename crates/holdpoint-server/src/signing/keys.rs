//! [`KeyRing`]: the HMAC keys that sign client-held state, and where they
//! are kept (`state-keys.json` in the data directory).

use std::io;
use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};

/// The file in the data directory that holds the keys.
pub const KEY_FILE: &str = "state-keys.json";

/// The shortest secret accepted, in bytes.
pub const MIN_SECRET_LEN: usize = 32;

/// One signing key: an id (written next to every signature) and a secret.
#[derive(Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SigningKey {
    kid: String,
    #[serde(with = "b64")]
    secret: Vec<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    created_at: Option<chrono::DateTime<chrono::Utc>>,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("kid", &self.kid)
            .field("secret", &"<redacted>")
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

impl SigningKey {
    /// A key from configuration. The secret must be at least
    /// [`MIN_SECRET_LEN`] bytes and the id non-empty, without `:`.
    pub fn new(kid: impl Into<String>, secret: impl Into<Vec<u8>>) -> io::Result<Self> {
        let key = SigningKey {
            kid: kid.into(),
            secret: secret.into(),
            created_at: None,
        };
        key.check()?;
        Ok(key)
    }

    /// A fresh random key with a generated id.
    pub fn generate() -> io::Result<Self> {
        let mut secret = vec![0u8; 32];
        getrandom::fill(&mut secret).map_err(|e| io::Error::other(format!("no randomness for a signing key: {e}")))?;
        let mut tag = [0u8; 4];
        getrandom::fill(&mut tag).map_err(|e| io::Error::other(format!("no randomness for a key id: {e}")))?;
        let now = chrono::Utc::now();
        let tag: String = tag.iter().map(|b| format!("{b:02x}")).collect();
        Ok(SigningKey {
            kid: format!("k{}-{tag}", now.format("%Y%m%d")),
            secret,
            created_at: Some(now),
        })
    }

    /// The key id.
    pub fn kid(&self) -> &str {
        &self.kid
    }

    pub(crate) fn secret(&self) -> &[u8] {
        &self.secret
    }

    fn check(&self) -> io::Result<()> {
        if self.kid.is_empty() || self.kid.contains(':') {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("invalid signing key id {:?}: empty or contains ':'", self.kid),
            ));
        }
        if self.secret.len() < MIN_SECRET_LEN {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "signing key {:?} is {} bytes; at least {MIN_SECRET_LEN} are needed",
                    self.kid,
                    self.secret.len()
                ),
            ));
        }
        Ok(())
    }
}

#[derive(Serialize, Deserialize)]
struct KeyFile {
    keys: Vec<SigningKey>,
}

/// The signing keys, oldest first. The newest signs; every key verifies,
/// so state signed before a rotation still loads.
#[derive(Debug, Clone)]
pub struct KeyRing {
    keys: Vec<SigningKey>,
}

impl KeyRing {
    /// A ring of these keys (oldest first; the last one signs). Fails when
    /// empty or when two keys share an id.
    pub fn new(keys: Vec<SigningKey>) -> io::Result<Self> {
        if keys.is_empty() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "a key ring needs a key"));
        }
        for (i, k) in keys.iter().enumerate() {
            k.check()?;
            if keys[..i].iter().any(|o| o.kid == k.kid) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("two signing keys share the id {:?}", k.kid),
                ));
            }
        }
        Ok(KeyRing { keys })
    }

    /// One fresh random key, kept in memory only: state signed with it
    /// does not verify after a restart. Prefer [`load_or_create`](Self::load_or_create).
    pub fn ephemeral() -> io::Result<Self> {
        Self::new(vec![SigningKey::generate()?])
    }

    /// The keys kept in `dir` (see [`KEY_FILE`]), creating the directory and
    /// a first key when there are none.
    pub fn load_or_create(dir: &Path) -> io::Result<Self> {
        let path = dir.join(KEY_FILE);
        match std::fs::read(&path) {
            Ok(bytes) => {
                let file: KeyFile = serde_json::from_slice(&bytes)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {e}", path.display())))?;
                Self::new(file.keys)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let ring = Self::ephemeral()?;
                ring.save(dir)?;
                tracing::info!(path = %path.display(), "generated a state-signing key");
                Ok(ring)
            }
            Err(e) => Err(e),
        }
    }

    /// Adds a fresh key to the ring kept in `dir` (creating it if needed)
    /// and saves it: the new key signs from now on, the old ones still
    /// verify. Restart (or rebuild) servers to pick it up.
    pub fn rotate_in(dir: &Path) -> io::Result<Self> {
        let mut ring = Self::load_or_create(dir)?;
        ring.keys.push(SigningKey::generate()?);
        ring.save(dir)?;
        Ok(ring)
    }

    /// Drops keys other than the newest `keep` (state signed with a dropped
    /// key no longer verifies).
    pub fn retain_newest(mut self, keep: usize) -> Self {
        let keep = keep.max(1);
        if self.keys.len() > keep {
            self.keys.drain(..self.keys.len() - keep);
        }
        self
    }

    /// Writes the ring to `dir` (owner-only permissions, replaced atomically).
    /// Missing folders of `dir` are created owner-only (`0700` on Unix);
    /// an existing `dir` keeps its permissions.
    pub fn save(&self, dir: &Path) -> io::Result<PathBuf> {
        create_private_dir(dir)?;
        let path = dir.join(KEY_FILE);
        let tmp = dir.join(format!(".{KEY_FILE}.tmp"));
        let text = serde_json::to_vec_pretty(&KeyFile {
            keys: self.keys.clone(),
        })
        .map_err(io::Error::other)?;
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
    pub fn current(&self) -> &SigningKey {
        // `new` refuses an empty ring and nothing removes the last key.
        &self.keys[self.keys.len() - 1]
    }

    /// The key with this id.
    pub fn get(&self, kid: &str) -> Option<&SigningKey> {
        self.keys.iter().find(|k| k.kid == kid)
    }

    /// The key ids, oldest first.
    pub fn kids(&self) -> Vec<&str> {
        self.keys.iter().map(|k| k.kid.as_str()).collect()
    }
}

/// Creates `dir` and its missing parents, each created one `0700` on Unix
/// (a data directory holds the signing keys and, often, the store's
/// files); existing folders are left as they are.
fn create_private_dir(dir: &Path) -> io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn a_new_data_directory_is_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().unwrap();
        let data = root.path().join("holdpoint/data");
        KeyRing::load_or_create(&data).unwrap();
        for dir in [root.path().join("holdpoint"), data.clone()] {
            let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
            assert_eq!(format!("{mode:o}"), "700", "{}", dir.display());
        }
        let key = std::fs::metadata(data.join(KEY_FILE)).unwrap().permissions().mode() & 0o777;
        assert_eq!(format!("{key:o}"), "600");
    }

    #[test]
    fn created_once_then_loaded_and_rotated() {
        let dir = tempfile::tempdir().unwrap();
        let first = KeyRing::load_or_create(dir.path()).unwrap();
        let again = KeyRing::load_or_create(dir.path()).unwrap();
        assert_eq!(first.kids(), again.kids());
        let rotated = KeyRing::rotate_in(dir.path()).unwrap();
        assert_eq!(rotated.kids().len(), 2);
        assert_eq!(rotated.kids()[0], first.current().kid());
        assert_ne!(rotated.current().kid(), first.current().kid());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(KEY_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o077, 0, "key file must be private");
        }
        assert_eq!(rotated.retain_newest(1).kids().len(), 1);
    }

    #[test]
    fn rejects_weak_and_duplicate_keys() {
        assert!(SigningKey::new("k1", b"short".to_vec()).is_err());
        assert!(SigningKey::new("", vec![7; 32]).is_err());
        let k = SigningKey::new("k1", vec![7; 32]).unwrap();
        assert!(KeyRing::new(vec![k.clone(), k]).is_err());
        assert!(KeyRing::new(vec![]).is_err());
    }
}
