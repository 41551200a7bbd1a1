use rusqlite::{Connection, OpenFlags};

use super::*;

fn open(path: &std::path::Path) -> Connection {
    register().unwrap();
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE;
    let conn = Connection::open_with_flags_and_vfs(path, flags, NAME).unwrap();
    conn.pragma_update_and_check(None, "journal_mode", "wal", |r| r.get::<_, String>(0))
        .unwrap();
    conn.pragma_update(None, "synchronous", "FULL").unwrap();
    conn
}

/// A connection on the default VFS, as another process would read.
fn plain(path: &std::path::Path) -> Connection {
    Connection::open(path).unwrap()
}

#[test]
fn every_commit_is_readable_by_a_connection_on_the_default_vfs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v.db");
    let writer = open(&path);
    writer
        .execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)", [])
        .unwrap();
    let reader = plain(&path);
    for k in 0..300i64 {
        let value = format!("{k}-{}", "x".repeat((k as usize * 37) % 3000));
        writer
            .execute("INSERT INTO t (k, v) VALUES (?1, ?2)", (k, &value))
            .unwrap();
        let read: String = reader
            .query_row("SELECT v FROM t WHERE k = ?1", [k], |r| r.get(0))
            .unwrap();
        assert_eq!(read, value);
    }
    let check: String = reader.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(check, "ok");
}

/// Row `k`'s value: 1 KiB of one nonzero byte that depends on `k`.
fn byte_row(k: i64) -> Vec<u8> {
    vec![(k % 250 + 1) as u8; 1024]
}

#[test]
fn a_transaction_larger_than_the_cache_and_the_buffer_reads_its_own_writes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.db");
    let mut writer = open(&path);
    // A tiny page cache makes SQLite spill pages to the WAL mid
    // transaction, read them back and write some of them again.
    writer.pragma_update(None, "cache_size", 8).unwrap();
    writer
        .execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB NOT NULL)", [])
        .unwrap();
    let tx = writer.transaction().unwrap();
    // 3 MiB: more than MAX_PENDING, written in several MAX_WRITE chunks.
    for k in 0..3000i64 {
        tx.execute("INSERT INTO t (k, v) VALUES (?1, ?2)", (k, byte_row(k)))
            .unwrap();
    }
    tx.execute("UPDATE t SET v = zeroblob(1024) WHERE k % 3 = 0", [])
        .unwrap();
    // Read back inside the transaction: spilled pages come from the WAL.
    let mut stmt = tx.prepare("SELECT k, v FROM t ORDER BY k").unwrap();
    let rows: Vec<(i64, Vec<u8>)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    drop(stmt);
    assert_eq!(rows.len(), 3000);
    for (k, v) in &rows {
        let expected = if k % 3 == 0 { vec![0; 1024] } else { byte_row(*k) };
        assert_eq!(v, &expected, "row {k}");
    }
    tx.commit().unwrap();
    drop(writer);
    let reader = plain(&path);
    let (n, zeros): (i64, i64) = reader
        .query_row("SELECT count(*), sum(v = zeroblob(1024)) FROM t", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!((n, zeros), (3000, 1000));
    let last: Vec<u8> = reader
        .query_row("SELECT v FROM t WHERE k = 2999", [], |r| r.get(0))
        .unwrap();
    assert_eq!(last, byte_row(2999));
    let check: String = reader.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(check, "ok");
}

/// Every commit after a WAL's first sync is `fdatasync` on Linux, whatever
/// SQLite was compiled with; the first is SQLite's own (it syncs the
/// directory of a new WAL). Elsewhere every sync is SQLite's own.
#[test]
fn commits_sync_the_wal_with_fdatasync_after_sqlites_first_sync() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sync.db");
    take_syncs();
    let writer = open(&path);
    writer.execute("CREATE TABLE t (k INTEGER PRIMARY KEY)", []).unwrap();
    // A new WAL's first commit syncs its header, then its frames.
    let [sqlite, _] = take_syncs();
    assert_eq!(sqlite, 1, "the WAL's first sync is SQLite's own");
    for k in 0..10i64 {
        writer.execute("INSERT INTO t (k) VALUES (?1)", [k]).unwrap();
    }
    let [sqlite, later] = take_syncs();
    if cfg!(target_os = "linux") {
        assert_eq!(sqlite, 0);
        assert!(later >= 10, "one fdatasync per commit at least, got {later}");
    } else {
        assert_eq!(later, 0);
        assert!(sqlite >= 10);
    }
    // A second connection syncs its own WAL handle: SQLite's first.
    let other = open(&path);
    other.execute("INSERT INTO t (k) VALUES (100)", []).unwrap();
    other.execute("INSERT INTO t (k) VALUES (101)", []).unwrap();
    let [sqlite, data_only] = take_syncs();
    assert_eq!(sqlite, 1);
    assert_eq!(data_only >= 1, cfg!(target_os = "linux"), "{data_only}");
    let n: i64 = plain(&path)
        .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 12);
}

#[test]
fn a_checkpoint_and_a_reopen_keep_every_row() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ck.db");
    let writer = open(&path);
    writer.pragma_update(None, "wal_autocheckpoint", 20).unwrap();
    writer
        .execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)", [])
        .unwrap();
    for k in 0..500i64 {
        writer
            .execute("INSERT INTO t (k, v) VALUES (?1, ?2)", (k, "y".repeat(900)))
            .unwrap();
    }
    drop(writer);
    let again = open(&path);
    let n: i64 = again.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).unwrap();
    assert_eq!(n, 500);
    let check: String = again.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(check, "ok");
}
