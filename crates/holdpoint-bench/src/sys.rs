//! Process memory readings (Linux `/proc`), and the fsync latency of a disk.

use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Resident set size now, in bytes (0 when unknown).
pub fn rss_bytes() -> u64 {
    status_kib("VmRSS:").map(|k| k * 1024).unwrap_or(0)
}

/// Peak resident set size, in bytes.
pub fn peak_rss_bytes() -> Option<u64> {
    status_kib("VmHWM:").map(|k| k * 1024)
}

/// Median latency of a 4 KiB write + fsync in `dir`, over `rounds` rounds.
pub fn fsync_latency(dir: &Path, rounds: usize) -> std::io::Result<Duration> {
    let path = dir.join(format!(".holdpoint-bench-fsync-{}", std::process::id()));
    let mut file = std::fs::File::create(&path)?;
    let block = [0u8; 4096];
    let mut times = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let started = Instant::now();
        file.write_all(&block)?;
        file.sync_data()?;
        times.push(started.elapsed());
    }
    drop(file);
    let _ = std::fs::remove_file(&path);
    times.sort();
    Ok(times.get(times.len() / 2).copied().unwrap_or_default())
}

/// Median latency of rewriting one 4 KiB block in place + fsync in `dir`,
/// over `rounds` rounds (what `pg_test_fsync` times). Cheaper than
/// [`fsync_latency`]'s append on ext4: the file's size and blocks do not
/// change, so no metadata goes to disk.
pub fn fsync_overwrite_latency(dir: &Path, rounds: usize) -> std::io::Result<Duration> {
    let path = dir.join(format!(".holdpoint-bench-overwrite-{}", std::process::id()));
    let file = std::fs::File::create(&path)?;
    let block = [0u8; 4096];
    file.write_all_at(&block, 0)?;
    file.sync_all()?;
    let mut times = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let started = Instant::now();
        file.write_all_at(&block, 0)?;
        file.sync_data()?;
        times.push(started.elapsed());
    }
    drop(file);
    let _ = std::fs::remove_file(&path);
    times.sort();
    Ok(times.get(times.len() / 2).copied().unwrap_or_default())
}
