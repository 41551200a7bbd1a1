//! Micro-benchmarks of the approval cycle's hot paths (divan):
//! `cargo bench -p holdpoint-bench`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs, dead_code)]

#[path = "../src/cycle.rs"]
mod cycle;
#[path = "../src/drive.rs"]
#[allow(dead_code)]
mod drive;

use std::sync::{Arc, LazyLock};

use divan::Bencher;
use holdpoint::Part;
use holdpoint::session::{InMemoryStore, SessionState, SessionStore, Snapshot};
use holdpoint_store_sqlite::{SqliteStore, SqliteStoreOptions, Synchronous};
use tokio::runtime::Runtime;

fn main() {
    divan::main();
}

static RT: LazyLock<Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
});

/// A real paused session of the workload: its interrupt part and state.
struct Sample {
    part: Part,
    state: SessionState,
}

static SAMPLE: LazyLock<Sample> = LazyLock::new(|| {
    RT.block_on(async {
        let store: Arc<dyn SessionStore> = Arc::new(InMemoryStore::new());
        let (agent, _) = cycle::setup(Arc::clone(&store)).unwrap();
        let paused = drive::Driver::Direct(agent).pause().await.unwrap();
        let snap = store.get_latest_snapshot(&paused.session_id).await.unwrap().unwrap();
        Sample {
            part: paused.part,
            state: snap.state.unwrap(),
        }
    })
});

#[divan::bench]
fn part_encode(b: Bencher) {
    let part = &SAMPLE.part;
    b.bench(|| serde_json::to_vec(divan::black_box(part)).unwrap());
}

#[divan::bench]
fn part_decode(b: Bencher) {
    let json = serde_json::to_vec(&SAMPLE.part).unwrap();
    b.bench(|| serde_json::from_slice::<Part>(divan::black_box(&json)).unwrap());
}

#[divan::bench]
fn state_encode(b: Bencher) {
    let state = &SAMPLE.state;
    b.bench(|| serde_json::to_vec(divan::black_box(state)).unwrap());
}

#[divan::bench]
fn state_decode(b: Bencher) {
    let json = serde_json::to_vec(&SAMPLE.state).unwrap();
    b.bench(|| serde_json::from_slice::<SessionState>(divan::black_box(&json)).unwrap());
}

enum Kind {
    Memory,
    SqliteFull,
    SqliteOff,
}

const STORES: [&str; 3] = ["memory", "sqlite-full", "sqlite-off"];

fn open(kind: &str, dir: &tempfile::TempDir) -> Arc<dyn SessionStore> {
    let kind = match kind {
        "memory" => Kind::Memory,
        "sqlite-full" => Kind::SqliteFull,
        _ => Kind::SqliteOff,
    };
    match kind {
        Kind::Memory => Arc::new(InMemoryStore::new()),
        Kind::SqliteFull | Kind::SqliteOff => {
            let sync = if matches!(kind, Kind::SqliteFull) {
                Synchronous::Full
            } else {
                Synchronous::Off
            };
            let options = SqliteStoreOptions::new(dir.path().join("bench.db")).synchronous(sync);
            Arc::new(RT.block_on(SqliteStore::open_with(options)).unwrap())
        }
    }
}

#[divan::bench(args = STORES, sample_count = 30)]
fn snapshot_save(b: Bencher, kind: &str) {
    let dir = tempfile::tempdir().unwrap();
    let store = open(kind, &dir);
    let state = SAMPLE.state.clone();
    b.bench(|| {
        let state = state.clone();
        RT.block_on(store.save_snapshot(None, Box::new(move |_| Ok(Some(Snapshot::new(state))))))
            .unwrap()
    });
}

#[divan::bench(args = STORES, sample_count = 30)]
fn snapshot_load(b: Bencher, kind: &str) {
    let dir = tempfile::tempdir().unwrap();
    let store = open(kind, &dir);
    let state = SAMPLE.state.clone();
    let saved = RT
        .block_on(store.save_snapshot(None, Box::new(move |_| Ok(Some(Snapshot::new(state))))))
        .unwrap()
        .unwrap();
    b.bench(|| RT.block_on(store.get_snapshot(&saved.snapshot_id)).unwrap().unwrap());
}

/// Claiming a paused snapshot for resume (the exactly-once guard).
#[divan::bench(args = STORES, sample_count = 30)]
fn claim(b: Bencher, kind: &str) {
    let dir = tempfile::tempdir().unwrap();
    let store = open(kind, &dir);
    let (agent, _) = cycle::setup(Arc::clone(&store)).unwrap();
    let driver = drive::Driver::Direct(agent);
    b.with_inputs(|| {
        RT.block_on(async {
            let paused = driver.pause().await.unwrap();
            store
                .get_latest_snapshot(&paused.session_id)
                .await
                .unwrap()
                .unwrap()
                .snapshot_id
        })
    })
    .bench_local_values(|id| {
        RT.block_on(store.claim_resume(holdpoint::session::ResumeClaim::new(id), Vec::new()))
            .unwrap()
    });
}
