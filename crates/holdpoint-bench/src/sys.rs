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

/// What an fsync probe writes before each `fdatasync`.
#[derive(Debug, Clone, Copy)]
pub enum Probe {
    /// 4 KiB appended to a new file: the sync also writes the file's new
    /// size (the floor of every round so far).
    Append,
    /// One 4 KiB block rewritten in place (what `pg_test_fsync` times):
    /// no metadata changes, so on ext4 it is the cheaper of the two.
    Rewrite,
}

/// Median latency of a `probe` write + `fdatasync` in `dir`, over `rounds`
/// rounds.
pub fn fsync_latency(dir: &Path, rounds: usize, probe: Probe) -> std::io::Result<Duration> {
    let path = dir.join(format!(".holdpoint-bench-fsync-{}", std::process::id()));
    let mut file = std::fs::File::create(&path)?;
    let block = [0u8; 4096];
    let mut times = Vec::with_capacity(rounds);
    let mut measure = || -> std::io::Result<()> {
        if let Probe::Rewrite = probe {
            file.write_all_at(&block, 0)?;
            file.sync_all()?;
        }
        for _ in 0..rounds {
            let started = Instant::now();
            match probe {
                Probe::Append => file.write_all(&block)?,
                Probe::Rewrite => file.write_all_at(&block, 0)?,
            }
            file.sync_data()?;
            times.push(started.elapsed());
        }
        Ok(())
    };
    let measured = measure();
    drop(file);
    let _ = std::fs::remove_file(&path);
    measured?;
    times.sort();
    Ok(times.get(times.len() / 2).copied().unwrap_or_default())
}
