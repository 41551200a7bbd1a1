//! `holdpoint-bench`: the approval cycle, measured against the floor.
//!
//! ```text
//! cargo run --release -p holdpoint-bench -- --store memory --n 20000
//! cargo run --release -p holdpoint-bench -- --store memory --paused 10000
//! cargo run --release -p holdpoint-bench -- --concurrency 64 --n 20000
//! cargo run --release -p holdpoint-bench -- --http --concurrency 64 --n 20000
//! ```

mod cycle;
#[cfg(test)]
mod cycle_tests;
mod drive;
mod report;
mod run;
mod scale;
mod sys;

/// mimalloc, as a deployment of the server would run (the default
/// feature); without it, the system allocator. The table names which.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The allocator this build measures with.
const ALLOCATOR_NAME: &str = if cfg!(feature = "mimalloc") {
    "mimalloc"
} else {
    "system"
};

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use clap::Parser;
use holdpoint::session::outbox::OutboxWrites;
use holdpoint::session::{InMemoryStore, SessionStore};

use cycle::counting;
use report::{Floor, Report, print};
use run::{run_cycles, run_paused};

/// Benchmark the pause → approve → resume cycle.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Session store: `memory`, `sqlite:PATH` or `postgres://…`.
    #[arg(long, default_value = "memory")]
    store: String,
    /// Cycles to run.
    #[arg(long, default_value_t = 10_000)]
    n: usize,
    /// Sessions in flight at once.
    #[arg(long, default_value_t = 1)]
    concurrency: usize,
    /// Hold this many sessions paused, then resume them all (overrides --n).
    #[arg(long)]
    paused: Option<usize>,
    /// Warm-up cycles before measuring.
    #[arg(long, default_value_t = 200)]
    warmup: usize,
    /// Drive the cycle through the HTTP server on loopback (keep-alive).
    #[arg(long)]
    http: bool,
    /// Run the cycle through one sub-agent level: `supportAgent` delegates
    /// to `bankingAgent`, whose hold surfaces and is answered at the root.
    #[arg(long)]
    subagent: bool,
    /// Govern the agent with a one-rule approval policy: a CEL condition
    /// over the transfer's input that matches every call (the rule's
    /// metadata rides on each hold and the claim checks it).
    #[arg(long)]
    policy: bool,
    /// Govern the agent with a one-rule policy of quorum 2: two distinct
    /// approvers answer each hold through `Decisions::answer`, the first
    /// answer recorded as a partial approval, the second resuming.
    #[arg(long)]
    quorum: bool,
    /// Hold an MCP tool instead: `everything_echo` of the reference server
    /// `@modelcontextprotocol/server-everything` over stdio (`node PATH
    /// stdio`; PATH defaults to $HOLDPOINT_MCP_EVERYTHING or the npm
    /// prefix .ci/run installs it under), held by a one-rule policy and
    /// answered through `Decisions::answer`.
    #[arg(long, value_name = "PATH", num_args = 0..=1, default_missing_value = "")]
    mcp: Option<String>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// PostgreSQL: connections in the store's pool (default: the store's
    /// default, 10).
    #[arg(long)]
    pool: Option<u32>,
    /// Fill the store to each of these sizes in turn (comma-separated,
    /// ascending) and measure there (see `scale`): one JSON line per size.
    /// --n cycles per cycle measurement, at 1 and at --concurrency.
    #[arg(long, value_delimiter = ',')]
    scale: Vec<usize>,
    /// Samples per latency measurement of --scale.
    #[arg(long, default_value_t = 200)]
    samples: usize,
}

async fn open_store(url: &str, pool: Option<u32>) -> Result<Arc<dyn SessionStore>, String> {
    match url {
        // No notification channel runs here: the store writes only the
        // timers that act (what a server without `[notify]` could build;
        // no deployment switches to it yet).
        "memory" | "memory:" => Ok(Arc::new(InMemoryStore::with_outbox_writes(OutboxWrites::Timers))),
        pg if pool.is_some() && (pg.starts_with("postgres://") || pg.starts_with("postgresql://")) => {
            let mut options =
                holdpoint_stores::PostgresStoreOptions::new(pg).map_err(|e| format!("store {pg}: {e}"))?;
            if let Some(n) = pool {
                options = options.max_connections(n);
            }
            let store = holdpoint_stores::PostgresStore::connect_with(options)
                .await
                .map_err(|e| format!("store {pg}: {e}"))?;
            Ok(Arc::new(store))
        }
        other => holdpoint_stores::open_store(other)
            .await
            .map_err(|e| format!("store {other}: {e}")),
    }
}

/// Where the store's data lands, for measuring that disk's fsync latency.
fn durable_dir(url: &str) -> Option<std::path::PathBuf> {
    if let Some(path) = url.strip_prefix("sqlite://").or_else(|| url.strip_prefix("sqlite:")) {
        let p = std::path::Path::new(path);
        return Some(match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
            _ => std::path::PathBuf::from("."),
        });
    }
    if url.starts_with("postgres") {
        return Some(std::env::temp_dir());
    }
    None
}

/// The fsync latency of the disk holding `dir` (median of 200 rounds).
fn probe_fsync(dir: &std::path::Path, probe: sys::Probe) -> Result<Duration, String> {
    sys::fsync_latency(dir, 200, probe).map_err(|e| format!("fsync probe ({probe:?}) in {}: {e}", dir.display()))
}

/// Serves `agent` on 127.0.0.1:0 on this runtime; a client with a
/// keep-alive pool of `concurrency` connections. Dropping the sender stops
/// the server.
async fn start_http(
    agent: holdpoint::agent::Agent,
    concurrency: usize,
) -> Result<(drive::Driver, tokio::sync::oneshot::Sender<()>), String> {
    let name = agent.name().to_owned();
    let server = holdpoint_server::Server::builder()
        .agent(agent)
        .allow_anonymous(true)
        .build()
        .map_err(|e| format!("server: {e}"))?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("bind: {e}"))?;
    let addr = listener.local_addr().map_err(|e| format!("bind: {e}"))?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let signal = async move {
            let _ = stopped.await;
        };
        if let Err(e) = holdpoint_server::serve(listener, &server, signal).await {
            eprintln!("server: {e}");
        }
    });
    // Parsed once: a string would be parsed again on every request.
    let uri: http::Uri = format!("http://{addr}/agents/{name}")
        .parse()
        .map_err(|e| format!("uri: {e}"))?;
    let client = drive::HttpClient::new(uri, concurrency.max(1));
    Ok((drive::Driver::Http(client), stop))
}

async fn main_async(args: Args) -> Result<(), String> {
    if !args.scale.is_empty() {
        return scale::run(scale::ScaleRun {
            store: args.store,
            sizes: args.scale,
            cycles: args.n,
            samples: args.samples,
            concurrency: args.concurrency,
        })
        .await;
    }
    // The disk's fsync latency is probed before the store opens (nothing of
    // the run pending) and after the cycles; the floor takes the lower.
    let fsync_before = durable_dir(&args.store)
        .map(|dir| probe_fsync(&dir, sys::Probe::Append))
        .transpose()?;
    let counting = Arc::new(counting(open_store(&args.store, args.pool).await?));
    let store = Arc::clone(&counting) as Arc<dyn SessionStore>;
    let Setup {
        agent,
        tool,
        _mcp_server,
        _server,
    } = setup(&args, store).await?;
    let mut report = measure(&args, &agent, &tool, &counting).await?;
    if let (Some(dir), Some(fsync_before)) = (durable_dir(&args.store), fsync_before) {
        report.floor = Some(floor(&dir, fsync_before, &report)?);
    }
    print(&args, &report);
    Ok(())
}

/// The agent a run drives and what must live as long as it.
struct Setup {
    agent: drive::Driver,
    tool: cycle::TransferTool,
    /// The MCP server's process lives as long as this handle.
    _mcp_server: Option<holdpoint_mcp::McpServer>,
    /// The HTTP server stops when this is dropped.
    _server: Option<tokio::sync::oneshot::Sender<()>>,
}

/// Builds the agent the flags ask for on `store`: plain, with a policy,
/// a quorum, a sub-agent or an MCP tool, in process or over HTTP.
async fn setup(args: &Args, store: Arc<dyn SessionStore>) -> Result<Setup, String> {
    let answered = args.quorum || args.mcp.is_some();
    if answered && (args.http || args.subagent || args.policy) {
        return Err("--quorum and --mcp run in process, without --http, --subagent or --policy".into());
    }
    let mut mcp_server = None;
    let (agent, tool) = if let Some(path) = &args.mcp {
        let path = match path.as_str() {
            "" => std::env::var("HOLDPOINT_MCP_EVERYTHING").unwrap_or_else(|_| cycle::EVERYTHING_JS.into()),
            given => given.to_owned(),
        };
        let (agent, server) = cycle::setup_mcp(store, &path).await.map_err(|e| e.to_string())?;
        mcp_server = Some(server);
        let expect = format!("Done: Echo: {}", cycle::ECHOED);
        let driver = drive::Driver::Answered(drive::Answerers::new(agent, vec!["olga"], expect));
        (driver, cycle::transfer_tool().map_err(|e| e.to_string())?)
    } else {
        let built = if args.subagent {
            cycle::setup_subagent(store)
        } else if args.policy {
            cycle::setup_with_policy(store)
        } else if args.quorum {
            cycle::setup_with_quorum(store)
        } else {
            cycle::setup(store)
        };
        let (agent, tool) = built.map_err(|e| e.to_string())?;
        (drive::Driver::Direct(agent), tool)
    };
    let (agent, server) = match agent {
        drive::Driver::Direct(agent) if args.http => {
            let (driver, stop) = start_http(agent, args.concurrency).await?;
            (driver, Some(stop))
        }
        drive::Driver::Direct(agent) if args.quorum => (
            drive::Driver::Answered(drive::Answerers::new(agent, vec!["olga", "pete"], "Done: txn-123")),
            None,
        ),
        driver => (driver, None),
    };
    Ok(Setup {
        agent,
        tool,
        _mcp_server: mcp_server,
        _server: server,
    })
}

/// Warms up, then runs the cycles (or holds `--paused` calls) and
/// reports their times and the store's commits.
async fn measure(
    args: &Args,
    agent: &drive::Driver,
    tool: &cycle::TransferTool,
    counting: &cycle::CountingStore,
) -> Result<Report, String> {
    if args.warmup > 0 && args.paused.is_none() {
        run_cycles(agent, tool, args.warmup, args.concurrency)
            .await
            .map_err(|e| format!("warm-up failed: {e}"))?;
    }
    counting.observer().commits.store(0, Ordering::Relaxed);
    let started = Instant::now();
    Ok(match args.paused {
        Some(k) => {
            let (resumes, per) = run_paused(agent, tool, k, args.concurrency)
                .await
                .map_err(|e| e.to_string())?;
            Report {
                cycles: k,
                elapsed: started.elapsed(),
                cycle_times: Vec::new(),
                resume_times: resumes,
                commits: counting.observer().commits.load(Ordering::Relaxed),
                bytes_per_paused: Some(per),
                floor: None,
            }
        }
        None => {
            let (cycles, resumes) = run_cycles(agent, tool, args.n, args.concurrency)
                .await
                .map_err(|e| e.to_string())?;
            Report {
                cycles: cycles.len(),
                elapsed: started.elapsed(),
                cycle_times: cycles,
                resume_times: resumes,
                commits: counting.observer().commits.load(Ordering::Relaxed),
                bytes_per_paused: None,
                floor: None,
            }
        }
    })
}

/// The fsync floor: the cycles per second the disk allows at the run's
/// commits per cycle, probed again after the run.
fn floor(dir: &std::path::Path, fsync_before: Duration, report: &Report) -> Result<Floor, String> {
    let fsync_after = probe_fsync(dir, sys::Probe::Append)?;
    let fsync = fsync_before.min(fsync_after);
    let overwrite = probe_fsync(dir, sys::Probe::Rewrite)?;
    let commits = report.commits as f64 / report.cycles.max(1) as f64;
    let floor = |latency: Duration| 1.0 / (commits * latency.as_secs_f64()).max(1e-9);
    Ok(Floor {
        fsync,
        fsync_before,
        fsync_after,
        cycles_per_sec: floor(fsync),
        overwrite,
        overwrite_cycles_per_sec: floor(overwrite),
    })
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(main_async(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
