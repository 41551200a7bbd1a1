//! The stock `holdpoint` binary: the operator CLI with no agents of its
//! own (approve, deny and respond go through `--server`).

/// mimalloc (the default feature), for allocation-heavy request handling
/// (BENCHMARKS.md compares it with glibc's malloc).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    holdpoint_cli::run(Vec::new()).await
}
