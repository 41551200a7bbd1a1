//! Which session store a deployment runs on, and opening it.
//!
//! Precedence ([`choose_store`]): a command-line flag (`--store`, or the
//! environment variable standing for it), else the file's `[server] store`,
//! else the binary's own default. Every URL goes through `holdpoint-stores`
//! (`memory:`, `sqlite:PATH`, `postgres://…`): it is checked when it is
//! given (the file's when the file is loaded, as a
//! [`ConfigError`](crate::ConfigError) at its line and key; a flag's by
//! [`StoreSetting::given`]) and opened by [`StoreSetting::open`]. Every
//! error names where the URL came from ([`StoreOrigin`]) and none quotes it
//! (a PostgreSQL URL may hold a password).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use holdpoint::session::SessionStore;
use holdpoint::session::outbox::OutboxWrites;
use holdpoint_stores::{StoreUrl, parse_store_url};

use crate::config::{Config, StoreOrigin, StoreSetting};

/// Why a store URL cannot be used. The message starts with where the URL
/// was given (`--store: …`, ``FILE:LINE:COLUMN: `server.store`: …``).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// Not a URL `holdpoint-stores` knows (an unknown scheme, a `sqlite:`
    /// without a path, an unknown parameter).
    #[error("{origin}: {source}")]
    Url {
        /// Where it was given.
        origin: StoreOrigin,
        /// What is wrong (`INVALID_ARGUMENT`).
        source: holdpoint::Error,
    },
    /// A `sqlite:` file in a folder that does not exist (the file is
    /// created on first use, its folder is not).
    #[error("{origin}: the directory {} does not exist (create it, or give another store)", .dir.display())]
    MissingDir {
        /// Where it was given.
        origin: StoreOrigin,
        /// The missing folder.
        dir: PathBuf,
    },
    /// The store could not be opened (a database not running, a file that
    /// cannot be written).
    #[error(
        "{origin}: store cannot be opened: {source} (is the database running and the URL right? memory: needs nothing)"
    )]
    Open {
        /// Where it was given.
        origin: StoreOrigin,
        /// The store's own error.
        source: holdpoint::Error,
    },
}

impl StoreSetting {
    /// `url` given at `origin` (a flag, or the binary's default), checked.
    pub fn given(origin: StoreOrigin, url: &str) -> Result<Self, StoreError> {
        match parse_store_url(url) {
            Ok(_) => Ok(StoreSetting::checked(url, origin)),
            Err(source) => Err(StoreError::Url { origin, source }),
        }
    }

    /// Opens the store (a `sqlite:` file is created on first use, its
    /// folder must exist), writing every outbox row.
    pub async fn open(&self) -> Result<Arc<dyn SessionStore>, StoreError> {
        self.open_with(OutboxWrites::All).await
    }

    /// Opens the store as [`open`](Self::open) does, writing the outbox
    /// rows `writes` keeps (a server passes [`Config::outbox_writes`]).
    ///
    /// [`Config::outbox_writes`]: crate::Config::outbox_writes
    pub async fn open_with(&self, writes: OutboxWrites) -> Result<Arc<dyn SessionStore>, StoreError> {
        let url = self.url().expose();
        let origin = || self.origin().clone();
        // Parsed when this value was made; parsed again for its parts.
        let parsed = parse_store_url(url).map_err(|source| StoreError::Url {
            origin: origin(),
            source,
        })?;
        if let StoreUrl::Sqlite { path, .. } = &parsed
            && let Some(dir) = Path::new(path).parent()
            && !dir.as_os_str().is_empty()
            && !dir.exists()
        {
            return Err(StoreError::MissingDir {
                origin: origin(),
                dir: dir.to_owned(),
            });
        }
        holdpoint_stores::open_store_with(url, writes).await.map_err(|source| {
            if source.status() == holdpoint::Status::InvalidArgument {
                StoreError::Url {
                    origin: origin(),
                    source,
                }
            } else {
                StoreError::Open {
                    origin: origin(),
                    source,
                }
            }
        })
    }
}

/// The store a deployment runs on: `flag` when given, else the file's
/// `[server] store`, else `None` (the caller's default).
pub fn choose_store(flag: Option<StoreSetting>, config: Option<&Config>) -> Option<StoreSetting> {
    flag.or_else(|| config.and_then(|c| c.server().store.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flag(url: &str) -> Result<StoreSetting, StoreError> {
        StoreSetting::given(StoreOrigin::Flag("--store".into()), url)
    }

    #[test]
    fn a_flag_wins_over_the_file_which_wins_over_the_default() {
        let config = Config::parse("[server]\nstore = \"sqlite:file.db\"\n", "holdpoint.toml").unwrap();
        let from_file = choose_store(None, Some(&config)).unwrap();
        assert_eq!(from_file.url().expose(), "sqlite:file.db");
        assert_eq!(from_file.origin().to_string(), "holdpoint.toml:2:9: `server.store`");
        let chosen = choose_store(Some(flag("memory:").unwrap()), Some(&config)).unwrap();
        assert!(chosen.is_memory());
        assert_eq!(chosen.origin(), &StoreOrigin::Flag("--store".into()));
        let empty = Config::parse("", "holdpoint.toml").unwrap();
        assert!(choose_store(None, Some(&empty)).is_none());
        assert!(choose_store(None, None).is_none());
    }

    #[test]
    fn a_bad_flag_names_the_flag_and_not_the_url() {
        let e = flag("redis://user:pw-123@host").unwrap_err().to_string();
        assert!(e.starts_with("--store: unsupported store URL scheme"), "{e}");
        assert!(!e.contains("pw-123"), "{e}");
    }

    #[tokio::test]
    async fn opening_names_where_the_url_came_from() {
        let dir = tempfile::tempdir().unwrap();
        let missing = format!("sqlite:{}", dir.path().join("no/such/s.db").display());
        let text = format!("[server]\nstore = {missing:?}\n");
        let config = Config::parse(&text, "holdpoint.toml").unwrap();
        let e = choose_store(None, Some(&config)).unwrap().open().await.err().unwrap();
        assert!(matches!(e, StoreError::MissingDir { .. }), "{e}");
        assert!(
            e.to_string()
                .starts_with("holdpoint.toml:2:9: `server.store`: the directory"),
            "{e}"
        );
        let ok = format!("sqlite:{}", dir.path().join("s.db").display());
        let store = flag(&ok).unwrap().open().await.unwrap();
        assert!(store.get_snapshot("nope").await.unwrap().is_none());
        assert!(flag("memory:").unwrap().open().await.is_ok());
    }
}
