use std::time::Duration;

use holdpoint::session::SessionState;

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_queued_while_a_read_holds_the_connection_still_runs() {
    let dir = tempfile::tempdir().unwrap();
    let options = SqliteStoreOptions::new(dir.path().join("held.db"));
    let writer = Arc::new(Writer::start(&options, Arc::default()).await.unwrap());
    let runtime = tokio::runtime::Handle::current();
    let writing = writer
        .try_read(|_conn| {
            let queued = Arc::clone(&writer);
            let task = runtime.spawn(async move {
                let update: SnapshotUpdate = Box::new(|_| Ok(Some(Snapshot::new(SessionState::new("s")))));
                queued.write(Op::Save { id: "w".into(), update }).await
            });
            // The write finds the connection taken and leaves itself
            // in the queue for whoever holds it: this read.
            while writer.shared.queue().is_empty() {
                std::thread::sleep(Duration::from_millis(1));
            }
            task
        })
        .expect("the connection is free");
    let written = tokio::time::timeout(Duration::from_secs(10), writing)
        .await
        .expect("the queued write should run once the read lets go")
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(written.snapshot_id, "w");
}
