//! Opens a Holdpoint [`SessionStore`] from a URL: the one parser every
//! binary uses, so `--store`, config files and environment variables all
//! accept the same spellings.
//!
//! | URL | store |
//! |---|---|
//! | `memory:` | [`InMemoryStore`]: gone with the process |
//! | `sqlite:PATH`, `sqlite://PATH` | [`SqliteStore`] on the file `PATH` (created on first use); `?synchronous=off\|normal\|full\|extra` |
//! | `postgres://…`, `postgresql://…` | [`PostgresStore`]; libpq-style URL |
//!
//! `sqlite:` paths are taken literally: `sqlite:data/sessions.db` and
//! `sqlite://data/sessions.db` are relative, `sqlite:///var/lib/x.db` and
//! `sqlite:/var/lib/x.db` absolute.
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let store = holdpoint_stores::open_store("memory:").await?;
//! assert!(store.get_snapshot("nope").await?.is_none());
//! let err = holdpoint_stores::open_store("redis://localhost").await.err().unwrap();
//! assert_eq!(err.status(), holdpoint::Status::InvalidArgument);
//! # Ok::<(), holdpoint::Error>(())
//! # }).unwrap();
//! ```
#![deny(missing_docs)]

use std::sync::Arc;

use holdpoint::session::outbox::OutboxWrites;
use holdpoint::session::{InMemoryStore, SessionStore};
use holdpoint::{Error, Result};
pub use holdpoint_store_postgres::{PostgresStore, PostgresStoreOptions};
pub use holdpoint_store_sqlite::{SqliteStore, SqliteStoreOptions, Synchronous};

/// The store kinds [`parse_store_url`] recognises, with what each needs.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreUrl {
    /// `memory:`
    Memory,
    /// `sqlite:PATH` or `sqlite://PATH`, with an optional `synchronous`.
    Sqlite {
        /// The database file.
        path: String,
        /// `?synchronous=…`, when given.
        synchronous: Option<Synchronous>,
    },
    /// `postgres://…` or `postgresql://…`, kept whole.
    Postgres(String),
}

/// Parses a store URL without opening anything.
///
/// Errors are `INVALID_ARGUMENT` and never repeat a URL (it may hold a
/// password), only its scheme.
pub fn parse_store_url(url: &str) -> Result<StoreUrl> {
    let url = url.trim();
    let Some((scheme, rest)) = url.split_once(':') else {
        return Err(Error::InvalidArgument(format!("store URL has no scheme; {}", EXPECTED)));
    };
    match scheme.to_ascii_lowercase().as_str() {
        "memory" if rest.is_empty() || rest == "//" => Ok(StoreUrl::Memory),
        "memory" => Err(Error::InvalidArgument(format!(
            "memory: takes nothing after the colon; {EXPECTED}"
        ))),
        "sqlite" => parse_sqlite(rest),
        "postgres" | "postgresql" => Ok(StoreUrl::Postgres(url.to_owned())),
        other => Err(Error::InvalidArgument(format!(
            "unsupported store URL scheme \"{}\"; {EXPECTED}",
            other.chars().take(32).collect::<String>()
        ))),
    }
}

const EXPECTED: &str = "use memory:, sqlite:PATH or postgres://USER@HOST/DB";

fn parse_sqlite(rest: &str) -> Result<StoreUrl> {
    let rest = rest.strip_prefix("//").unwrap_or(rest);
    let (path, query) = match rest.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (rest, None),
    };
    if path.is_empty() {
        return Err(Error::InvalidArgument(format!("sqlite: needs a file path; {EXPECTED}")));
    }
    let mut synchronous = None;
    for pair in query.into_iter().flat_map(|q| q.split('&')).filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("synchronous", value)) => {
                synchronous = Some(Synchronous::parse(value).ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "sqlite: synchronous must be off, normal, full or extra, not \"{value}\""
                    ))
                })?);
            }
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "sqlite: unknown parameter \"{pair}\"; the only one is synchronous"
                )));
            }
        }
    }
    Ok(StoreUrl::Sqlite {
        path: path.to_owned(),
        synchronous,
    })
}

/// Opens the store `url` names (see the [crate docs](crate) for the forms).
///
/// Fails with `INVALID_ARGUMENT` for a URL it does not understand, and
/// with the store's own errors (`UNAVAILABLE` when the file or server
/// cannot be reached) otherwise.
pub async fn open_store(url: &str) -> Result<Arc<dyn SessionStore>> {
    open_store_with(url, OutboxWrites::All).await
}

/// Opens the store `url` names, writing the outbox rows `writes` keeps:
/// [`OutboxWrites::Timers`] for a deployment that configures no
/// notification channel (see [`OutboxWrites`]). Fails as [`open_store`].
pub async fn open_store_with(url: &str, writes: OutboxWrites) -> Result<Arc<dyn SessionStore>> {
    Ok(match parse_store_url(url)? {
        StoreUrl::Memory => Arc::new(InMemoryStore::with_outbox_writes(writes)),
        StoreUrl::Sqlite { path, synchronous } => {
            let mut options = SqliteStoreOptions::new(path).outbox_writes(writes);
            if let Some(sync) = synchronous {
                options = options.synchronous(sync);
            }
            Arc::new(SqliteStore::open_with(options).await?)
        }
        StoreUrl::Postgres(url) => {
            let options = PostgresStoreOptions::new(&url)?.outbox_writes(writes);
            Arc::new(PostgresStore::connect_with(options).await?)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdpoint::Status;

    #[test]
    fn forms() {
        assert_eq!(parse_store_url("memory:").unwrap(), StoreUrl::Memory);
        assert_eq!(parse_store_url(" MEMORY: ").unwrap(), StoreUrl::Memory);
        let sqlite = |path: &str, synchronous| StoreUrl::Sqlite {
            path: path.into(),
            synchronous,
        };
        assert_eq!(parse_store_url("sqlite:data/s.db").unwrap(), sqlite("data/s.db", None));
        assert_eq!(
            parse_store_url("sqlite://data/s.db").unwrap(),
            sqlite("data/s.db", None)
        );
        assert_eq!(
            parse_store_url("sqlite:///var/s.db").unwrap(),
            sqlite("/var/s.db", None)
        );
        assert_eq!(parse_store_url("sqlite:/var/s.db").unwrap(), sqlite("/var/s.db", None));
        assert_eq!(
            parse_store_url("sqlite:s.db?synchronous=NORMAL").unwrap(),
            sqlite("s.db", Some(Synchronous::Normal))
        );
        let pg = "postgres://u:p@localhost:5432/db?sslmode=disable";
        assert_eq!(parse_store_url(pg).unwrap(), StoreUrl::Postgres(pg.into()));
        let pg = "postgresql://localhost/db";
        assert_eq!(parse_store_url(pg).unwrap(), StoreUrl::Postgres(pg.into()));
    }

    #[test]
    fn bad_urls_are_invalid_arguments_without_secrets() {
        for url in [
            "",
            "sessions.db",
            "redis://u:secret@host",
            "mysql://u:secret@host/db",
            "memory:x",
            "sqlite:",
            "sqlite://",
            "sqlite:x.db?synchronous=sometimes",
            "sqlite:x.db?mode=ro",
        ] {
            let err = parse_store_url(url).unwrap_err();
            assert_eq!(err.status(), Status::InvalidArgument, "{url}: {err}");
            assert!(!err.to_string().contains("secret"), "{url}: {err}");
        }
        let err = parse_store_url("redis://u:secret@host").unwrap_err();
        assert!(err.to_string().contains("\"redis\""), "{err}");
        assert!(err.to_string().contains("sqlite:PATH"), "{err}");
    }

    #[tokio::test]
    async fn opens_each_kind() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_store("memory:").await.unwrap();
        assert!(store.get_snapshot("x").await.unwrap().is_none());
        let path = dir.path().join("s.db");
        let store = open_store(&format!("sqlite://{}?synchronous=full", path.display()))
            .await
            .unwrap();
        assert!(store.get_snapshot("x").await.unwrap().is_none());
        assert!(path.is_file());
    }
}
