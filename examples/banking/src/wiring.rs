//! Picks the model and opens the store from the command line, with one
//! clear line for each mistake a new user makes.

use std::path::PathBuf;
use std::sync::Arc;

use holdpoint::Model;
use holdpoint::session::SessionStore;

/// The default store: `sqlite:` a file in the platform data directory.
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

/// Opens `url`; [`DEFAULT_STORE`] is a SQLite file in [`data_dir`],
/// created on first use (the folder `0700`, the file `0600` on Unix).
pub async fn open_store(url: &str) -> Result<Arc<dyn SessionStore>, String> {
    let url = if url == DEFAULT_STORE {
        let dir = data_dir()?;
        create_private_dir(&dir).map_err(|e| {
            format!(
                "cannot create {}: {e} (pass --store memory: or another --store)",
                dir.display()
            )
        })?;
        format!("sqlite:{}", dir.join("banking.db").display())
    } else if url == "memory" {
        "memory:".to_owned()
    } else {
        url.to_owned()
    };
    if let Some(path) = url.strip_prefix("sqlite:").map(|p| p.split('?').next().unwrap_or(p))
        && let Some(parent) = std::path::Path::new(path).parent()
        && !parent.as_os_str().is_empty()
        && !parent.exists()
    {
        return Err(format!(
            "store: the directory {} does not exist (create it, or pass another --store)",
            parent.display()
        ));
    }
    holdpoint_stores::open_store(&url).await.map_err(|e| {
        if e.status() == holdpoint::Status::InvalidArgument {
            format!("unsupported store URL: {e}")
        } else {
            format!(
                "store cannot be opened: {e} (is the database running and the URL right? --store memory: needs nothing)"
            )
        }
    })
}
