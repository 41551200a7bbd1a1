//! Conformance runner: executes Genkit-format generate and agent scenarios
//! against Holdpoint (SPEC §10).
//!
//! - `HOLDPOINT_GENERATE_SPEC`: generate scenarios (default
//!   `../shared/conformance/generate.yaml`, relative to the workspace root).
//! - `HOLDPOINT_CONFORMANCE_SPEC`: agent scenarios (default
//!   `../shared/conformance/agent.yaml`).
//! - `HOLDPOINT_CONFORMANCE_STORE`: the store of server-managed agents:
//!   `memory` (default), `sqlite` (a fresh file per scenario) or `postgres`
//!   (a throwaway server, a fresh database per scenario).
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod agent_suite;
mod generate_suite;
mod harness;
mod matcher;
mod report;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use holdpoint::session::{InMemoryStore, SessionStore};
use serde_json::Value;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn spec_path(var: &str, default: &str) -> PathBuf {
    let raw = std::env::var(var).unwrap_or_else(|_| default.to_owned());
    let p = PathBuf::from(&raw);
    if p.is_absolute() { p } else { workspace_root().join(p) }
}

fn load(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_yaml::from_str(&text).map_err(|e| format!("cannot parse {}: {e}", path.display()))
}

/// Creates database `conformance_<i>` next to the one `base` names and
/// returns its URL, so every scenario starts from an empty store.
async fn fresh_database(base: &str, i: usize) -> Result<String, String> {
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

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let store_kind = std::env::var("HOLDPOINT_CONFORMANCE_STORE").unwrap_or_else(|_| "memory".into());
    let _guards: (Option<tempfile::TempDir>, Option<holdpoint_testkit::TempPostgres>);
    let stores: harness::StoreFactory = match store_kind.as_str() {
        "memory" => {
            _guards = (None, None);
            Arc::new(|_| {
                Box::pin(async { Ok(Arc::new(InMemoryStore::new()) as Arc<dyn SessionStore>) })
                    as futures::future::BoxFuture<'static, _>
            })
        }
        "sqlite" => {
            let dir = tempfile::tempdir().expect("temp dir");
            let root = dir.path().to_owned();
            _guards = (Some(dir), None);
            Arc::new(move |i| {
                let url = format!("sqlite:{}", root.join(format!("scenario-{i}.db")).display());
                Box::pin(async move { holdpoint_stores::open_store(&url).await.map_err(|e| e.to_string()) })
            })
        }
        "postgres" => {
            let Some(pg) = holdpoint_testkit::TempPostgres::start_or_skip("agent conformance on postgres") else {
                return;
            };
            let base = pg.url().to_owned();
            _guards = (None, Some(pg));
            Arc::new(move |i| {
                let base = base.clone();
                Box::pin(async move {
                    let url = fresh_database(&base, i).await?;
                    holdpoint_stores::open_store(&url).await.map_err(|e| e.to_string())
                })
            })
        }
        other => {
            eprintln!("HOLDPOINT_CONFORMANCE_STORE={other}: use memory, sqlite or postgres");
            std::process::exit(2);
        }
    };

    let mut failed = 0;
    let generate_path = spec_path("HOLDPOINT_GENERATE_SPEC", "../shared/conformance/generate.yaml");
    match load(&generate_path) {
        Ok(doc) => {
            let mut report = report::Report::default();
            runtime.block_on(generate_suite::run(&doc, &mut report));
            failed += report.finish("generate conformance", "");
        }
        Err(e) => {
            eprintln!("generate conformance: {e}");
            failed += 1;
        }
    }
    let agent_path = spec_path("HOLDPOINT_CONFORMANCE_SPEC", "../shared/conformance/agent.yaml");
    match load(&agent_path) {
        Ok(doc) => {
            let mut report = report::Report::default();
            runtime.block_on(agent_suite::run(&doc, &stores, &mut report));
            failed += report.finish("agent conformance", &format!(" [store: {store_kind}]"));
        }
        Err(e) => {
            eprintln!("agent conformance: {e}");
            failed += 1;
        }
    }
    if failed > 0 {
        std::process::exit(1);
    }
}
