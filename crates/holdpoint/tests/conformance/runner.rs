//! The runner shared by the conformance binaries: store factories, spec
//! loading, and the summary lines.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::{agent_suite, generate_suite, harness, report};

use holdpoint::session::{InMemoryStore, SessionStore};
use serde_json::Value;

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The repository's own scenario file `name` (under `tests/specs/` of this
/// crate), found from the manifest, not the working directory.
pub fn in_repo_spec(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/specs").join(name)
}

/// One scenario file to run, and where it came from (for messages).
pub struct SpecFile {
    pub path: PathBuf,
    pub origin: String,
}

/// The scenario files of one suite: the in-repo `name` always, then the
/// file `var` names when it is set and non-empty (a relative path is taken
/// from the workspace root); the same file is not listed twice.
pub fn spec_files(var: &str, name: &str) -> Vec<SpecFile> {
    let own = in_repo_spec(name);
    let mut files = vec![SpecFile {
        origin: "in-repo".into(),
        path: own.clone(),
    }];
    if let Some(raw) = std::env::var_os(var).filter(|v| !v.is_empty()) {
        let p = PathBuf::from(raw);
        let path = if p.is_absolute() { p } else { workspace_root().join(p) };
        let same = match (path.canonicalize(), own.canonicalize()) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        };
        if !same {
            files.push(SpecFile {
                path,
                origin: format!("named by {var}"),
            });
        }
    }
    files
}

/// Reads and parses a scenario file; a file with no scenarios is an error,
/// so a wrong path or an emptied file cannot pass.
pub fn load(file: &SpecFile) -> Result<Value, String> {
    let path = file.path.display();
    let origin = &file.origin;
    let text = std::fs::read_to_string(&file.path).map_err(|e| format!("cannot read {path} ({origin}): {e}"))?;
    let doc: Value = serde_yaml::from_str(&text).map_err(|e| format!("cannot parse {path} ({origin}): {e}"))?;
    match doc["tests"].as_array() {
        Some(tests) if !tests.is_empty() => Ok(doc),
        _ => Err(format!(
            "{path} ({origin}) holds no scenarios (a non-empty `tests` list)"
        )),
    }
}

/// A short name of a scenario file for the summary line: relative to the
/// workspace root when inside it.
fn shown(path: &Path) -> String {
    let root = workspace_root().canonicalize().ok();
    let full = path.canonicalize().unwrap_or_else(|_| path.to_owned());
    match root.as_deref().and_then(|r| full.strip_prefix(r).ok()) {
        Some(rel) => rel.display().to_string(),
        None => full.display().to_string(),
    }
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
/// when PostgreSQL is not installed and the run may skip. Every call of the
/// factory gets a store of its own, also across scenario files (the
/// factory numbers them itself; the scenario index repeats per file).
pub fn stores(kind: &str) -> Option<(harness::StoreFactory, Guard)> {
    let counter = Arc::new(AtomicUsize::new(0));
    let next = move || counter.fetch_add(1, Ordering::Relaxed);
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
                Arc::new(move |_| {
                    let i = next();
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
                Arc::new(move |_| {
                    let i = next();
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

/// Runs the generate scenarios of every file; returns how many failed.
pub fn run_generate(runtime: &tokio::runtime::Runtime) -> usize {
    let mut failed = 0;
    for file in spec_files("HOLDPOINT_GENERATE_SPEC", "generate.yaml") {
        failed += match load(&file) {
            Ok(doc) => {
                let mut report = report::Report::default();
                runtime.block_on(generate_suite::run(&doc, &mut report));
                report.finish("generate conformance", &format!(" [{}]", shown(&file.path)))
            }
            Err(e) => {
                eprintln!("generate conformance: {e}");
                1
            }
        };
    }
    failed
}

/// Runs the agent scenarios of every file on the `kind` store; returns how
/// many failed.
pub fn run_agents(runtime: &tokio::runtime::Runtime, kind: &str) -> usize {
    let Some((factory, _guard)) = stores(kind) else {
        return 0;
    };
    let mut failed = 0;
    for file in spec_files("HOLDPOINT_CONFORMANCE_SPEC", "agent.yaml") {
        failed += match load(&file) {
            Ok(doc) => {
                let mut report = report::Report::default();
                runtime.block_on(agent_suite::run(&doc, &factory, &mut report));
                report.finish("agent conformance", &format!(" [store: {kind}; {}]", shown(&file.path)))
            }
            Err(e) => {
                eprintln!("agent conformance [store: {kind}]: {e}");
                1
            }
        };
    }
    failed
}

/// A runtime like the one the agents run on in production.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}
