//! What a run measured, and how it is printed: JSON, or a Markdown table
//! with the floor the disk's fsync latency sets.

use std::time::Duration;

use serde_json::json;

use crate::{ALLOCATOR_NAME, Args, sys};

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

pub(crate) struct Floor {
    /// The lower of the two probes: the strictest floor.
    pub(crate) fsync: Duration,
    /// The probe before the cycles (disk idle) and after them.
    pub(crate) fsync_before: Duration,
    pub(crate) fsync_after: Duration,
    pub(crate) cycles_per_sec: f64,
    /// A 4 KiB in-place rewrite + fsync after the cycles, and the floor it
    /// gives: stricter than the append probe (no metadata to write).
    pub(crate) overwrite: Duration,
    pub(crate) overwrite_cycles_per_sec: f64,
}

pub(crate) struct Report {
    pub(crate) cycles: usize,
    pub(crate) elapsed: Duration,
    pub(crate) cycle_times: Vec<Duration>,
    pub(crate) resume_times: Vec<Duration>,
    pub(crate) commits: u64,
    pub(crate) bytes_per_paused: Option<f64>,
    pub(crate) floor: Option<Floor>,
}

/// The times of a run, sorted, and what is derived from them.
struct Summary {
    cycles: Vec<Duration>,
    resumes: Vec<Duration>,
    rate: f64,
    mean: f64,
    commits: f64,
    peak: Option<u64>,
}

impl Summary {
    fn of(r: &Report) -> Self {
        let mut cycles = r.cycle_times.clone();
        cycles.sort();
        let mut resumes = r.resume_times.clone();
        resumes.sort();
        let mean = if cycles.is_empty() {
            0.0
        } else {
            cycles.iter().map(|d| us(*d)).sum::<f64>() / cycles.len() as f64
        };
        Summary {
            rate: r.cycles as f64 / r.elapsed.as_secs_f64(),
            mean,
            commits: r.commits as f64 / r.cycles.max(1) as f64,
            peak: sys::peak_rss_bytes(),
            cycles,
            resumes,
        }
    }
}

/// Prints the run's report: one JSON object with `--json`, else a
/// Markdown table.
pub(crate) fn print(args: &Args, r: &Report) {
    let s = Summary::of(r);
    if args.json {
        print_json(args, r, &s);
    } else {
        print_table(args, r, &s);
    }
}

fn print_json(args: &Args, r: &Report, s: &Summary) {
    let Summary {
        cycles,
        resumes,
        rate,
        mean,
        commits,
        peak,
    } = s;
    let out = json!({
        "store": args.store,
        "http": args.http,
        "subagent": args.subagent,
        "policy": args.policy,
        "quorum": args.quorum,
        "mcp": args.mcp.is_some(),
        "cycles": r.cycles,
        "concurrency": args.concurrency,
        "paused": args.paused,
        "cyclesPerSec": rate,
        "cycleUs": {"mean": mean, "p50": us(percentile(cycles, 0.5)), "p99": us(percentile(cycles, 0.99))},
        "resumeUs": {"p50": us(percentile(resumes, 0.5)), "p99": us(percentile(resumes, 0.99))},
        "commitsPerCycle": commits,
        "bytesPerPausedSession": r.bytes_per_paused,
        "peakRssBytes": peak,
        "fsyncUs": r.floor.as_ref().map(|f| us(f.fsync)),
        "fsyncBeforeUs": r.floor.as_ref().map(|f| us(f.fsync_before)),
        "fsyncAfterUs": r.floor.as_ref().map(|f| us(f.fsync_after)),
        "floorCyclesPerSec": r.floor.as_ref().map(|f| f.cycles_per_sec),
        "fsyncOverwriteUs": r.floor.as_ref().map(|f| us(f.overwrite)),
        "floorOverwriteCyclesPerSec": r.floor.as_ref().map(|f| f.overwrite_cycles_per_sec),
        "allocator": ALLOCATOR_NAME,
    });
    println!("{out}");
}

fn print_table(args: &Args, r: &Report, s: &Summary) {
    let Summary {
        cycles,
        resumes,
        rate,
        mean,
        commits,
        peak,
    } = s;
    println!(
        "holdpoint-bench: store={} cycles={} concurrency={} allocator={ALLOCATOR_NAME}{}",
        args.store,
        r.cycles,
        args.concurrency,
        if args.http {
            " via HTTP (loopback, keep-alive)"
        } else {
            ""
        }
    );
    println!("| metric | value |");
    println!("|---|---|");
    println!("| cycles/s | {rate:.0} |");
    if !cycles.is_empty() {
        println!("| µs per cycle (mean) | {mean:.1} |");
        println!("| µs per cycle (p50) | {:.1} |", us(percentile(cycles, 0.5)));
        println!("| µs per cycle (p99) | {:.1} |", us(percentile(cycles, 0.99)));
    }
    println!("| resume latency p50 (µs) | {:.1} |", us(percentile(resumes, 0.5)));
    println!("| resume latency p99 (µs) | {:.1} |", us(percentile(resumes, 0.99)));
    println!("| store commits per cycle | {commits:.2} |");
    if let Some(b) = r.bytes_per_paused {
        println!("| bytes per paused session | {b:.0} |");
    }
    if let Some(p) = peak {
        println!("| peak RSS (MiB) | {:.1} |", *p as f64 / (1024.0 * 1024.0));
    }
    if let Some(f) = &r.floor {
        print_floor(f, *rate);
    }
}

fn print_floor(f: &Floor, rate: f64) {
    println!(
        "| fsync latency, same disk (µs, p50; lower of before / after the cycles) | {:.0} ({:.0} / {:.0}) |",
        us(f.fsync),
        us(f.fsync_before),
        us(f.fsync_after)
    );
    println!(
        "| floor: cycles/s at one fsync per commit, sequential | {:.0} |",
        f.cycles_per_sec
    );
    println!(
        "| share of the floor reached | {:.0}% |",
        100.0 * rate / f.cycles_per_sec
    );
    println!(
        "| fsync latency of a 4 KiB rewrite in place (µs, p50) and its floor (cycles/s) | {:.0}; {:.0} |",
        us(f.overwrite),
        f.overwrite_cycles_per_sec
    );
}
