//! A full disk under a SQLite store: write errors injected at the store
//! boundary, and a small tmpfs made for the test when this process may
//! mount one (root; skipped with a note where mounting is not allowed). Turns fail with a clear `UNAVAILABLE`, nothing already
//! acknowledged is lost, and once space is back everything works.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use async_trait::async_trait;
use futures::stream::BoxStream;
use holdpoint::session::{
    AuditQuery, AuditRecord, AuditStore, Capabilities, ResumeClaim, SessionStore, Snapshot, SnapshotStatus,
    SnapshotUpdate,
};
use holdpoint::{Error, Result};
use holdpoint_server::Server;
use serde_json::{Value, json};

use crate::support::*;

/// Fails every write while `full` is set, as SQLite does on a full disk.
#[derive(Clone)]
struct FullDisk {
    inner: Arc<dyn SessionStore>,
    full: Arc<AtomicBool>,
}

impl FullDisk {
    fn check(&self) -> Result<()> {
        if self.full.load(Ordering::SeqCst) {
            return Err(Error::Unavailable(
                "sqlite store: save snapshot: database or disk is full (injected)".into(),
            ));
        }
        Ok(())
    }
}

#[async_trait]
impl SessionStore for FullDisk {
    async fn get_snapshot(&self, id: &str) -> Result<Option<Snapshot>> {
        self.inner.get_snapshot(id).await
    }
    async fn get_latest_snapshot(&self, session_id: &str) -> Result<Option<Snapshot>> {
        self.inner.get_latest_snapshot(session_id).await
    }
    async fn save_snapshot(&self, id: Option<&str>, update: SnapshotUpdate) -> Result<Option<Snapshot>> {
        self.check()?;
        self.inner.save_snapshot(id, update).await
    }
    async fn insert_snapshot(&self, id: &str, row: Snapshot) -> Result<Snapshot> {
        self.check()?;
        self.inner.insert_snapshot(id, row).await
    }
    async fn insert_snapshots(&self, rows: Vec<(String, Snapshot)>) -> Result<Vec<Snapshot>> {
        self.check()?;
        self.inner.insert_snapshots(rows).await
    }
    async fn watch_status(&self, id: &str) -> Result<BoxStream<'static, SnapshotStatus>> {
        self.inner.watch_status(id).await
    }
    async fn claim_resume(&self, claim: ResumeClaim, audit: Vec<AuditRecord>) -> Result<()> {
        self.check()?;
        self.inner.claim_resume(claim, audit).await
    }
    /// The inner store's capabilities, its audit trail behind the same
    /// full disk.
    fn capabilities(&self) -> Capabilities {
        let inner = self.inner.capabilities();
        Capabilities {
            audit: inner
                .audit
                .is_some()
                .then(|| Arc::new(self.clone()) as Arc<dyn AuditStore>),
            ..inner
        }
    }
}

#[async_trait]
impl AuditStore for FullDisk {
    async fn append_audit(&self, records: Vec<AuditRecord>) -> Result<()> {
        self.check()?;
        self.inner.capabilities().audit()?.append_audit(records).await
    }
    async fn list_audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>> {
        self.inner.capabilities().audit()?.list_audit(query).await
    }
    async fn save_snapshot_audited(
        &self,
        id: &str,
        update: SnapshotUpdate,
        audit: Vec<AuditRecord>,
    ) -> Result<Option<Snapshot>> {
        self.check()?;
        let trail = self.inner.capabilities().audit()?.clone();
        trail.save_snapshot_audited(id, update, audit).await
    }
}

/// A small tmpfs, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path) -> Option<Tmpfs> {
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=4m", "tmpfs"])
            .arg(dir)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(dir.to_owned()))
    }

    /// Writes a filler file until the filesystem refuses.
    fn fill(&self) {
        use std::io::Write as _;
        let mut f = std::fs::File::create(self.0.join("filler")).unwrap();
        let block = vec![0u8; 16 * 1024];
        while f.write_all(&block).and_then(|()| f.flush()).is_ok() {}
        let small = [0u8; 512];
        while f.write_all(&small).and_then(|()| f.flush()).is_ok() {}
        let _ = f.sync_all();
    }

    fn free(&self) {
        std::fs::remove_file(self.0.join("filler")).unwrap();
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_errors_at_the_store_boundary_give_clear_errors_and_lose_nothing_acknowledged() {
    full_disk(false).await;
}

/// A real full filesystem under SQLite.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_tmpfs_under_sqlite_gives_clear_errors_and_loses_nothing_acknowledged() {
    full_disk(true).await;
}

async fn full_disk(real: bool) {
    let dir = tempfile::tempdir().unwrap();
    let tmpfs = if real { Tmpfs::mount(dir.path()) } else { None };
    if real && tmpfs.is_none() {
        println!("skipped: cannot mount a tmpfs here (needs root)");
        return;
    }
    let full = Arc::new(AtomicBool::new(false));
    let url = format!("sqlite:{}", dir.path().join("sessions.db").display());
    let sqlite = crate::replicas::open_store(&url).await;
    let store: Arc<dyn SessionStore> = match &tmpfs {
        Some(_) => sqlite.clone(),
        None => Arc::new(FullDisk {
            inner: sqlite.clone(),
            full: full.clone(),
        }),
    };
    let runs = Arc::new(AtomicUsize::new(0));
    let s = TestServer::start(Server::builder().agent(ops(store, runs.clone())).build().unwrap()).await;
    let path = "/agents/opsAgent";
    let pause = |account: String| json!({"data": user(&format!("close {account}"))});
    let approve = |out: &Value| {
        json!({"data": {"resume": {"restart": [restart(&paused_part(out), json!({"toolApproved": true}))]}},
               "init": {"snapshotId": out["snapshotId"]}})
    };
    let mut paused = Vec::new();
    for i in 0..3 {
        let (code, body) = s.post(path, pause(format!("a-{i}")), None).await;
        assert_eq!(code, 200, "{body:#}");
        paused.push(body["result"].clone());
    }
    let before = dump(sqlite.as_ref()).await;

    // The disk fills up.
    match &tmpfs {
        Some(fs) => fs.fill(),
        None => full.store(true, Ordering::SeqCst),
    }
    let mut acknowledged = Vec::new();
    let mut refused = 0;
    for i in 0..40 {
        let (code, body) = s.post(path, pause(format!("b-{i}-{}", "x".repeat(4000))), None).await;
        let failed = code != 200 || body["result"]["finishReason"] == "failed";
        if failed {
            refused += 1;
            let error = if code == 200 {
                &body["result"]["error"]
            } else {
                &body["error"]
            };
            assert_eq!(error["status"], "UNAVAILABLE", "{code} {body:#}");
            assert!(
                error["message"].as_str().unwrap().contains("full"),
                "the error says why: {body:#}"
            );
            assert!(code == 200 || code == 503, "{code} {body:#}");
        } else {
            acknowledged.push(body["result"]["snapshotId"].as_str().unwrap().to_owned());
        }
    }
    // An approval while full: refused clearly, or it went through.
    let (code, body) = s.post(path, approve(&paused[0]), None).await;
    let approval_failed = code != 200 || body["result"]["finishReason"] == "failed";
    println!(
        "full disk ({}): {refused} of 40 turns refused, approval {}",
        if tmpfs.is_some() { "tmpfs" } else { "injected" },
        if approval_failed { "refused" } else { "accepted" }
    );
    assert!(refused > 0, "a full disk refuses some writes");

    // Space comes back: everything acknowledged is there, untouched.
    match &tmpfs {
        Some(fs) => fs.free(),
        None => full.store(false, Ordering::SeqCst),
    }
    let after = dump(sqlite.as_ref()).await;
    for row in &before.0 {
        let now = after.0.iter().find(|r| r.snapshot_id == row.snapshot_id);
        let now = now.unwrap_or_else(|| panic!("snapshot {} lost", row.snapshot_id));
        if row.snapshot_id != paused[0]["snapshotId"] {
            assert_eq!(now, row, "an acknowledged snapshot changed");
        }
    }
    for id in &acknowledged {
        assert!(
            after.0.iter().any(|r| &r.snapshot_id == id),
            "acknowledged turn {id} lost"
        );
    }
    // The refused approval consumed nothing; an accepted one is settled.
    let first = sqlite
        .get_snapshot(paused[0]["snapshotId"].as_str().unwrap())
        .await
        .unwrap()
        .unwrap();
    if approval_failed && first.resumed_at.is_none() {
        let (code, body) = s.post(path, approve(&paused[0]), None).await;
        assert_eq!(code, 200, "{body:#}");
        assert_eq!(body["result"]["finishReason"], "stop", "{body:#}");
    }
    // The next requests succeed.
    let (code, body) = s.post(path, approve(&paused[1]), None).await;
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"]["finishReason"], "stop", "{body:#}");
    let (code, body) = s.post(path, pause("c-1".into()), None).await;
    assert_eq!(code, 200, "{body:#}");
    drop(s);
}
