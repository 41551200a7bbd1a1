//! The runner shared by the conformance binaries: store factories, spec
//! loading, and the summary lines.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::{agent_suite, generate_suite, harness, report};

use holdpoint::session::{InMemoryStore, SessionStore};
use serde_json::Value;

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn spec_path(var: &str, default: &str) -> PathBuf {
    let raw = std::env::var(var).unwrap_or_else(|_| default.to_owned());
    let p = PathBuf::from(&raw);
    if p.is_absolute() { p } else { workspace_root().join(p) }
}

pub fn load(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_yaml::from_str(&text).map_err(|e| format!("cannot parse {}: {e}", path.display()))
}

/// Creates database `conformance_<i>` next to the one `base` names and
/// returns its URL, so every scenario starts from an empty store.
pub async fn fresh_database(base: &str, i: usize) -> Result<String, String> {
    use sqlx::Connection;
    let name = format!("conformance_{}_{i}", std::process::id());
    let mut conn = sqlx::PgConnection::connect(base).await.map_err(|e| e.to_string())?;
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut conn)
        .await
        .map_err(|e| e.to_string())?;
    let (prefix, rest) = base.rsplit_once('/').ok_or("database URL without a path")?;
    let query = rest.split_once('?').map(|(_, q)| format!("?{q}")).unwrap_or_default();
    Ok(format!("{prefix}/{name}{query}"))
}

/// Keeps a store's backing resources (temp dir, PostgreSQL) alive.
pub type Guard = (Option<tempfile::TempDir>, Option<holdpoint_testkit::TempPostgres>);

/// The store factory for `kind` (`memory`, `sqlite`, `postgres`); `None`
/// when PostgreSQL is not installed and the run may skip.
pub fn stores(kind: &str) -> Option<(harness::StoreFactory, Guard)> {
    match kind {
        "memory" => Some((
            Arc::new(|_| {
                Box::pin(async { Ok(Arc::new(InMemoryStore::new()) as Arc<dyn SessionStore>) })
                    as futures::future::BoxFuture<'static, _>
            }),
            (None, None),
        )),
        "sqlite" => {
            let dir = tempfile::tempdir().expect("temp dir");
            let root = dir.path().to_owned();
            Some((
                Arc::new(move |i| {
                    let url = format!("sqlite:{}", root.join(format!("scenario-{i}.db")).display());
                    Box::pin(async move { holdpoint_stores::open_store(&url).await.map_err(|e| e.to_string()) })
                }),
                (Some(dir), None),
            ))
        }
        "postgres" => {
            let pg = holdpoint_testkit::TempPostgres::start_or_skip("agent conformance on postgres")?;
            let base = pg.url().to_owned();
            Some((
                Arc::new(move |i| {
                    let base = base.clone();
                    Box::pin(async move {
                        let url = fresh_database(&base, i).await?;
                        holdpoint_stores::open_store(&url).await.map_err(|e| e.to_string())
                    })
                }),
                (None, Some(pg)),
            ))
        }
        other => {
            eprintln!("conformance store {other:?}: use memory, sqlite or postgres");
            std::process::exit(2);
        }
    }
}

/// Runs the generate scenarios; returns how many failed.
pub fn run_generate(runtime: &tokio::runtime::Runtime) -> usize {
    let path = spec_path("HOLDPOINT_GENERATE_SPEC", "../shared/conformance/generate.yaml");
    match load(&path) {
        Ok(doc) => {
            let mut report = report::Report::default();
            runtime.block_on(generate_suite::run(&doc, &mut report));
            report.finish("generate conformance", "")
        }
        Err(e) => {
            eprintln!("generate conformance: {e}");
            1
        }
    }
}

/// Runs the agent scenarios on the `kind` store; returns how many failed.
pub fn run_agents(runtime: &tokio::runtime::Runtime, kind: &str) -> usize {
    let Some((factory, _guard)) = stores(kind) else {
        return 0;
    };
    let path = spec_path("HOLDPOINT_CONFORMANCE_SPEC", "../shared/conformance/agent.yaml");
    match load(&path) {
        Ok(doc) => {
            let mut report = report::Report::default();
            runtime.block_on(agent_suite::run(&doc, &factory, &mut report));
            report.finish("agent conformance", &format!(" [store: {kind}]"))
        }
        Err(e) => {
            eprintln!("agent conformance: {e}");
            1
        }
    }
}

/// A runtime like the one the agents run on in production.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}
