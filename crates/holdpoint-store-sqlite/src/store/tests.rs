use super::*;
use crate::options::Synchronous;

async fn settings(store: &SqliteStore) -> (String, i64) {
    store
        .inner
        .readers
        .run("read settings", |conn| {
            let journal: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
            let sync: i64 = conn.query_row("PRAGMA synchronous", [], |r| r.get(0)).unwrap();
            let checkpoint: i64 = conn.query_row("PRAGMA wal_autocheckpoint", [], |r| r.get(0)).unwrap();
            assert_eq!(checkpoint, crate::conn::CHECKPOINT_PAGES);
            Ok((journal, sync))
        })
        .unwrap()
}

#[tokio::test]
async fn wal_and_full_sync_by_default_and_configurable() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("a.db")).await.unwrap();
    assert_eq!(settings(&store).await, ("wal".to_owned(), 2));
    let options = SqliteStoreOptions::new(dir.path().join("b.db")).synchronous(Synchronous::Normal);
    let store = SqliteStore::open_with(options).await.unwrap();
    assert_eq!(settings(&store).await, ("wal".to_owned(), 1));
}
