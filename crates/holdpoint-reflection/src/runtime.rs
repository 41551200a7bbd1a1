//! The runtime file: how the Genkit CLI finds a running runtime.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde_json::json;

use super::REFLECTION_API_SPEC_VERSION;

/// The files whose directory the Genkit CLI takes for the project root
/// (genkit-tools `findProjectRoot`); a Rust project has none of them, so
/// the CLI falls back to its working directory, as we do.
const PROJECT_MARKERS: [&str; 6] = [
    "package.json",
    "go.mod",
    "pyproject.toml",
    "requirements.txt",
    "pom.xml",
    "build.gradle",
];

/// The project root by the Genkit CLI's rule: the nearest directory, from
/// the working directory up (the filesystem root excluded), that holds one
/// of its marker files, else the working directory itself.
pub fn project_root() -> PathBuf {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    root_from(&cwd)
}

pub(crate) fn root_from(start: &Path) -> PathBuf {
    let mut dir = Some(start);
    while let Some(d) = dir {
        if d.parent().is_none() {
            break;
        }
        if PROJECT_MARKERS.iter().any(|m| d.join(m).is_file()) {
            return d.to_path_buf();
        }
        dir = d.parent();
    }
    start.to_path_buf()
}

/// Writes `<root>/.genkit/runtimes/{id}-{millis}.json` and returns its path.
pub(crate) fn write(root: &Path, runtime_id: &str, addr: SocketAddr) -> Result<PathBuf, (PathBuf, std::io::Error)> {
    let dir = root.join(".genkit").join("runtimes");
    let now = chrono::Utc::now();
    let path = dir.join(format!("{runtime_id}-{}.json", now.timestamp_millis()));
    let body = json!({
        "id": runtime_id,
        "pid": std::process::id(),
        "name": "holdpoint",
        // An address, not `localhost`: the server listens on IPv4 loopback
        // only and `localhost` may resolve to `::1` first.
        "reflectionServerUrl": format!("http://{addr}"),
        "timestamp": now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        "genkitVersion": format!("holdpoint/{}", env!("CARGO_PKG_VERSION")),
        "reflectionApiSpecVersion": REFLECTION_API_SPEC_VERSION,
    });
    std::fs::create_dir_all(&dir).map_err(|e| (dir.clone(), e))?;
    let text = serde_json::to_string_pretty(&body).unwrap_or_default();
    std::fs::write(&path, text).map_err(|e| (path.clone(), e))?;
    Ok(path)
}
