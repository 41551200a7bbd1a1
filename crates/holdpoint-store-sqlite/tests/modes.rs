//! On Unix the store's files are private to their owner: the folders it
//! creates `0700`, the database and its `-wal` and `-shm` files `0600`;
//! existing files keep their permissions.
#![cfg(unix)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use holdpoint::session::{SessionState, SessionStore, Snapshot};
use holdpoint_store_sqlite::{SqliteStore, SqliteStoreOptions, Synchronous};

/// The permission bits of `path`, in octal.
fn mode(path: &Path) -> String {
    let bits = std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode();
    format!("{:o}", bits & 0o777)
}

fn sibling(db: &Path, suffix: &str) -> std::path::PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(suffix);
    name.into()
}

async fn write_one(store: &SqliteStore) {
    let row = Snapshot::new(SessionState::new("s-modes"));
    store
        .save_snapshot(Some("snap-1"), Box::new(move |_| Ok(Some(row))))
        .await
        .unwrap()
        .unwrap();
}

/// Through the batching VFS (`FULL`, `EXTRA`) and SQLite's own (`OFF`,
/// `NORMAL`) alike.
#[tokio::test]
async fn a_new_store_creates_owner_only_folders_and_files() {
    for level in [Synchronous::Full, Synchronous::Normal] {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let path = data.join("nested/sessions.db");
        let store = SqliteStore::open_with(SqliteStoreOptions::new(&path).synchronous(level))
            .await
            .unwrap();
        write_one(&store).await;
        // While the store is open the WAL and its index exist.
        for file in [path.clone(), sibling(&path, "-wal"), sibling(&path, "-shm")] {
            assert_eq!(mode(&file), "600", "{} ({level:?})", file.display());
        }
        assert_eq!(mode(&data), "700", "{level:?}");
        assert_eq!(mode(&data.join("nested")), "700", "{level:?}");
        store.close().await;
    }
}

/// A file the operator made (here group-readable) keeps its mode, and the
/// WAL files follow it; an existing folder keeps its mode too.
#[tokio::test]
async fn an_existing_database_file_keeps_its_permissions() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o750)).unwrap();
    let path = dir.path().join("shared.db");
    std::fs::write(&path, b"").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
    let store = SqliteStore::open(&path).await.unwrap();
    write_one(&store).await;
    assert_eq!(mode(&path), "640");
    assert_eq!(mode(&sibling(&path, "-wal")), "640");
    assert_eq!(mode(dir.path()), "750");
    store.close().await;
}
