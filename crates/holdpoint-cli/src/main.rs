//! The stock `holdpoint` binary: the operator CLI with no agents of its
//! own (approve, deny and respond go through `--server`).

#[tokio::main]
async fn main() -> std::process::ExitCode {
    holdpoint_cli::run(Vec::new()).await
}
