//! `banking serve` as the integration tests start it: a child process on a
//! free loopback port, its base URL read from its first line, killed on
//! drop.
#![allow(dead_code)]

use std::io::BufRead;
use std::process::{Child, Command, Stdio};

/// A running `banking serve`, killed (and waited for) on drop.
pub struct Served {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    _data: tempfile::TempDir,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `banking serve --addr 127.0.0.1:0` with its data in `data` and no
/// provider key or `HOLDPOINT_*` setting from the environment: a test adds
/// the arguments and variables it means.
pub fn serve_command(data: &tempfile::TempDir) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_banking"));
    cmd.args(["serve", "--addr", "127.0.0.1:0"])
        .env("XDG_DATA_HOME", data.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for var in [
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "HOLDPOINT_MODEL",
        "HOLDPOINT_STORE",
        "HOLDPOINT_API_KEY",
        "HOLDPOINT_CONFIG",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

/// Starts `cmd` (from [`serve_command`]) and waits for the line that says
/// where it serves; `data` lives as long as the server.
pub fn start(mut cmd: Command, data: tempfile::TempDir) -> Served {
    let mut child = cmd.spawn().unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let url = first.split_whitespace().find(|w| w.starts_with("http://")).unwrap();
    let base = url.split("/agents").next().unwrap().to_owned();
    std::thread::spawn(move || for _ in lines {});
    Served {
        child,
        base,
        _data: data,
    }
}

/// `banking serve` with `extra` arguments.
pub fn serve(extra: &[&str]) -> Served {
    let data = tempfile::tempdir().unwrap();
    let mut cmd = serve_command(&data);
    cmd.args(extra);
    start(cmd, data)
}
