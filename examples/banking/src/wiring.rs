//! Picks the model and opens the store from the command line, with one
//! clear line for each mistake a new user makes.

use std::path::PathBuf;
use std::sync::Arc;

use holdpoint::Model;
use holdpoint::session::SessionStore;
use holdpoint::session::outbox::OutboxWrites;
use holdpoint_deploy::{Config, StoreOrigin, StoreSetting};

/// `--store default`: `sqlite:` a file in the platform data directory (also
/// what is used when neither `--store` nor the file names a store).
pub const DEFAULT_STORE: &str = "default";

/// `$XDG_DATA_HOME/holdpoint` or `$HOME/.local/share/holdpoint`.
pub fn data_dir() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("XDG_DATA_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir).join("holdpoint"));
    }
    match std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(".local/share/holdpoint")),
        None => Err("neither XDG_DATA_HOME nor HOME is set: pass --store sqlite:PATH or --store memory:".into()),
    }
}

/// The model `requested` names, or the first provider with a key, or the
/// scripted demo model (saying which on standard error).
pub fn pick_model(requested: Option<&str>) -> Result<Arc<dyn Model>, String> {
    let resolve = |name: &str| {
        holdpoint_models::resolve_model(name)
            .map_err(|e| format!("model {name}: {e} (choose another with --model, or omit it for the scripted demo)"))
    };
    match requested {
        Some("scripted") | Some("scripted/banking-demo") => Ok(Arc::new(banking::demo_model())),
        Some(name) => resolve(name),
        None => match holdpoint_models::first_available_provider() {
            Some(name) => {
                eprintln!("using {name} (its key is set; choose another with --model)");
                resolve(&name)
            }
            None => {
                eprintln!(
                    "no provider key set (GEMINI_API_KEY, OPENAI_API_KEY, ANTHROPIC_API_KEY): using the scripted demo model"
                );
                Ok(Arc::new(banking::demo_model()))
            }
        },
    }
}

/// Creates `dir` and its missing parents, each created one owner-only
/// (`0700` on Unix): the data directory holds every conversation, tool
/// input and output, and the state-signing key. Existing folders keep
/// their permissions.
pub fn create_private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

/// The store of the command line and the file, as every deployment chooses
/// it ([`holdpoint_deploy::choose_store`]): `--store` (or
/// `HOLDPOINT_STORE`), else the `--config` file's `[server] store`, else a
/// SQLite file in [`data_dir`]. `--store default` asks for that file by
/// name, `--store memory` means `memory:`.
pub fn choose_store(flag: Option<&str>, config: Option<&Config>) -> Result<StoreSetting, String> {
    let given = |url: &str| StoreSetting::given(StoreOrigin::Flag("--store".into()), url).map_err(|e| e.to_string());
    let flag = match flag.map(str::trim) {
        None => None,
        Some(DEFAULT_STORE) => return default_store(),
        Some("memory") => Some(given("memory:")?),
        Some(url) => Some(given(url)?),
    };
    match holdpoint_deploy::choose_store(flag, config) {
        Some(chosen) => Ok(chosen),
        None => default_store(),
    }
}

/// [`DEFAULT_STORE`]: a SQLite file in [`data_dir`], the folder created
/// now (`0700` on Unix), the file on first use (`0600`).
fn default_store() -> Result<StoreSetting, String> {
    let dir = data_dir()?;
    create_private_dir(&dir).map_err(|e| {
        format!(
            "cannot create {}: {e} (pass --store memory: or another --store)",
            dir.display()
        )
    })?;
    let url = format!("sqlite:{}", dir.join("banking.db").display());
    StoreSetting::given(StoreOrigin::Default, &url).map_err(|e| e.to_string())
}

/// Opens the chosen store; the one line it fails with names where the URL
/// came from (`--store`, or the file's line and key) and never quotes it.
pub async fn open_store(store: &StoreSetting) -> Result<Arc<dyn SessionStore>, String> {
    store.open().await.map_err(|e| e.to_string())
}

/// Opens the chosen store for `banking serve`: with no notification
/// channel in the file (or no file) it writes only the outbox rows that act
/// ([`holdpoint_deploy::Config::outbox_writes`]).
pub async fn open_served_store(store: &StoreSetting, config: Option<&Config>) -> Result<Arc<dyn SessionStore>, String> {
    let writes = config.map_or(OutboxWrites::Timers, Config::outbox_writes);
    store.open_with(writes).await.map_err(|e| e.to_string())
}
