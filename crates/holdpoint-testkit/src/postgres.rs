//! [`TempPostgres`]: a throwaway PostgreSQL server for tests.
//!
//! With `HOLDPOINT_TEST_PG_URL` (or else `DATABASE_URL`) set — as `.ci/run`
//! does after `scripts/postgres.sh start` — each value gets a fresh
//! database of its own on that server (made with `psql`, dropped with the
//! value), so tests never see each other's rows. Otherwise, and always for
//! [`TempPostgres::start_private`] (tests that stop the server), a fresh
//! cluster is made with
//! `initdb` in a temporary folder and started with `pg_ctl` on a free port
//! of 127.0.0.1 (as the `postgres` OS user when running as root, since
//! `initdb` refuses root); dropping the value stops it and removes the
//! folder. Binaries are looked up in `HOLDPOINT_PG_BIN`, then in the newest
//! `/usr/lib/postgresql/*/bin` (Debian's layout).

use std::fmt;
use std::net::TcpListener;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tempfile::TempDir;

/// Why no PostgreSQL could be had.
#[derive(Debug)]
pub enum StartError {
    /// No PostgreSQL server binaries on this machine.
    NoBinaries(String),
    /// The binaries are there but the server did not start.
    Failed(String),
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::NoBinaries(why) => write!(f, "no PostgreSQL binaries: {why}"),
            StartError::Failed(why) => write!(f, "PostgreSQL did not start: {why}"),
        }
    }
}

impl std::error::Error for StartError {}

/// A PostgreSQL database for one test: either the one named by
/// `HOLDPOINT_TEST_PG_URL`/`DATABASE_URL`, or a private server that stops
/// when this value is dropped.
pub struct TempPostgres {
    url: String,
    server: Option<Server>,
    /// A database made for this value on a configured server: the psql
    /// binary, the server's URL and the database's name, to drop it.
    created: Option<(PathBuf, String, String)>,
}

struct Server {
    bin: PathBuf,
    data: PathBuf,
    as_postgres: bool,
    /// The `pg_ctl start` arguments: log file and server options.
    log: String,
    opts: String,
    // Dropped after the server is stopped (field order does not matter:
    // `Drop for TempPostgres` stops the server first).
    _dir: TempDir,
}

impl TempPostgres {
    /// A fresh database on the configured server, or a private server.
    pub fn start() -> Result<Self, StartError> {
        for var in ["HOLDPOINT_TEST_PG_URL", "DATABASE_URL"] {
            if let Ok(url) = std::env::var(var)
                && !url.trim().is_empty()
            {
                return Ok(fresh_database(url.trim()));
            }
        }
        Self::start_private()
    }

    /// A private server of this value's own, whatever is configured: for
    /// tests that stop and restart the server.
    pub fn start_private() -> Result<Self, StartError> {
        let bin = find_bin_dir()?;
        let mut last = String::new();
        // A free port can be taken by someone else before the server binds
        // it; try a few.
        for _ in 0..3 {
            match start_server(&bin) {
                Ok((url, server)) => {
                    return Ok(TempPostgres {
                        url,
                        server: Some(server),
                        created: None,
                    });
                }
                Err(why) => last = why,
            }
        }
        Err(StartError::Failed(last))
    }

    /// [`start_private`](Self::start_private), with the skip rule of
    /// [`start_or_skip`](Self::start_or_skip).
    pub fn start_private_or_skip(test: &str) -> Option<Self> {
        skip_or_panic(test, Self::start_private())
    }

    /// [`start`](Self::start), or `None` after saying loudly on stderr why
    /// `test` is skipped, when this machine has no PostgreSQL binaries and
    /// `CI` is not `true`. Panics on any other failure, and under `CI=true`.
    pub fn start_or_skip(test: &str) -> Option<Self> {
        skip_or_panic(test, Self::start())
    }

    /// The connection URL, `postgres://…`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Whether this value runs its own server (rather than a configured one).
    pub fn is_private(&self) -> bool {
        self.server.is_some()
    }

    /// Stops the private server (`pg_ctl -m fast`: every connection is cut
    /// and open transactions roll back, committed ones are kept — the test
    /// servers run with `synchronous_commit=off`, so an immediate stop could
    /// lose acknowledged commits); [`start_again`](Self::start_again) brings
    /// it back on the same port with the same data. Errors for a configured
    /// database, which is not ours to stop.
    pub fn stop(&self) -> Result<(), String> {
        let server = self.server.as_ref().ok_or("a configured database cannot be stopped")?;
        let data = server.data.display().to_string();
        let out = run(server, "pg_ctl", &["-D", &data, "-m", "fast", "-w", "stop"])?;
        check("pg_ctl stop", &out)
    }

    /// Starts the private server again after [`stop`](Self::stop).
    pub fn start_again(&self) -> Result<(), String> {
        let server = self.server.as_ref().ok_or("a configured database cannot be started")?;
        let data = server.data.display().to_string();
        let out = run(
            server,
            "pg_ctl",
            &[
                "-D",
                &data,
                "-l",
                &server.log,
                "-o",
                &server.opts,
                "-w",
                "-t",
                "60",
                "start",
            ],
        )?;
        check("pg_ctl start", &out)
    }

    /// [`stop`](Self::stop), then [`start_again`](Self::start_again).
    pub fn restart(&self) -> Result<(), String> {
        self.stop()?;
        self.start_again()
    }
}

impl Drop for TempPostgres {
    fn drop(&mut self) {
        if let Some((psql, admin, name)) = &self.created {
            let drop = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
            let _ = Command::new(psql)
                .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", admin, "-c", &drop])
                .output();
        }
        if let Some(server) = &self.server {
            let data = server.data.display().to_string();
            let _ = run(server, "pg_ctl", &["-D", &data, "-m", "immediate", "-w", "stop"]);
        }
    }
}

impl fmt::Debug for TempPostgres {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TempPostgres")
            .field("url", &self.url)
            .field("private", &self.is_private())
            .finish()
    }
}

fn skip_or_panic(test: &str, started: Result<TempPostgres, StartError>) -> Option<TempPostgres> {
    match started {
        Ok(pg) => Some(pg),
        Err(StartError::NoBinaries(why)) if std::env::var("CI").as_deref() != Ok("true") => {
            eprintln!(
                "SKIPPED {test}: {why}. Install PostgreSQL (apt-get install postgresql), or run \
                 `eval \"$(scripts/postgres.sh start)\"` to set DATABASE_URL, to run it."
            );
            None
        }
        Err(err) => panic!("{test}: {err}"),
    }
}

/// A fresh database on the server `url` names. When it cannot be made (no
/// psql, no CREATEDB right), `url` itself is used and the reason printed.
fn fresh_database(url: &str) -> TempPostgres {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let shared = |why: String| {
        eprintln!("TempPostgres: using {url} as it is (tests share it): {why}");
        TempPostgres {
            url: url.to_owned(),
            server: None,
            created: None,
        }
    };
    let Some((prefix, rest)) = url.rsplit_once('/') else {
        return shared("the URL names no database".into());
    };
    let query = rest.split_once('?').map(|(_, q)| format!("?{q}")).unwrap_or_default();
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!("holdpoint_test_{}_{n}", std::process::id());
    let psql = find_bin_dir()
        .map(|b| b.join("psql"))
        .ok()
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("psql"));
    let create = format!("CREATE DATABASE {name}");
    match Command::new(&psql)
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", url, "-c", &create])
        .output()
    {
        Ok(out) if out.status.success() => TempPostgres {
            url: format!("{prefix}/{name}{query}"),
            server: None,
            created: Some((psql, url.to_owned(), name)),
        },
        Ok(out) => shared(String::from_utf8_lossy(&out.stderr).trim().to_owned()),
        Err(e) => shared(format!("{}: {e}", psql.display())),
    }
}

fn find_bin_dir() -> Result<PathBuf, StartError> {
    if let Ok(dir) = std::env::var("HOLDPOINT_PG_BIN") {
        let dir = PathBuf::from(dir);
        if dir.join("initdb").is_file() {
            return Ok(dir);
        }
        return Err(StartError::NoBinaries(format!(
            "HOLDPOINT_PG_BIN={} has no initdb",
            dir.display()
        )));
    }
    let root = Path::new("/usr/lib/postgresql");
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir(root)
        .map_err(|e| StartError::NoBinaries(format!("cannot read {}: {e}", root.display())))?
        .filter_map(|entry| entry.ok())
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    found.sort();
    found
        .pop()
        .map(|(_, bin)| bin)
        .ok_or_else(|| StartError::NoBinaries(format!("no {}/*/bin/initdb", root.display())))
}

fn start_server(bin: &Path) -> Result<(String, Server), String> {
    let dir = tempfile::Builder::new()
        .prefix("holdpoint-pg-")
        .tempdir()
        .map_err(|e| format!("temp dir: {e}"))?;
    let as_postgres = running_as_root();
    if as_postgres {
        let out = Command::new("chown")
            .args(["postgres:postgres"])
            .arg(dir.path())
            .output()
            .map_err(|e| format!("chown: {e}"))?;
        check("chown postgres", &out)?;
    }
    let data = dir.path().join("data");
    let mut server = Server {
        bin: bin.to_owned(),
        data: data.clone(),
        as_postgres,
        log: String::new(),
        opts: String::new(),
        _dir: dir,
    };
    let data_s = data.display().to_string();
    let out = run(
        &server,
        "initdb",
        &[
            "-D",
            &data_s,
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--no-sync",
            "--no-instructions",
        ],
    )?;
    check("initdb", &out)?;

    let port = free_port()?;
    let socket_dir = server._dir.path().display().to_string();
    let log = server._dir.path().join("server.log").display().to_string();
    let opts = format!(
        "-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={socket_dir} \
         -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
    );
    server.log = log.clone();
    server.opts = opts.clone();
    let out = run(
        &server,
        "pg_ctl",
        &["-D", &data_s, "-l", &log, "-o", &opts, "-w", "-t", "60", "start"],
    )?;
    if let Err(why) = check("pg_ctl start", &out) {
        let log_text = std::fs::read_to_string(&log).unwrap_or_default();
        return Err(format!("{why}\nserver log:\n{log_text}"));
    }
    Ok((format!("postgres://postgres@127.0.0.1:{port}/postgres"), server))
}

/// Runs a PostgreSQL binary, as the `postgres` user when we are root.
fn run(server: &Server, program: &str, args: &[&str]) -> Result<Output, String> {
    let path = server.bin.join(program);
    let mut cmd = if server.as_postgres {
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", "postgres", "--"]).arg(&path);
        cmd
    } else {
        Command::new(&path)
    };
    cmd.args(args)
        .current_dir(server._dir.path())
        .output()
        .map_err(|e| format!("{}: {e}", path.display()))
}

fn check(what: &str, out: &Output) -> Result<(), String> {
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "{what} exited with {}:\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}

fn running_as_root() -> bool {
    // /proc/self belongs to the effective user.
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

fn free_port() -> Result<u16, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("local_addr: {e}"))
}
