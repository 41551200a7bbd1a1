//! The stock `holdpoint` binary: the operator CLI with no agents of its
//! own (approve, deny and respond go through `--server`).

/// mimalloc (the default feature): allocation-heavy request handling runs
/// markedly faster on it than on glibc's malloc (see BENCHMARKS.md).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    holdpoint_cli::run(Vec::new()).await
}
