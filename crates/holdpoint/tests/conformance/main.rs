//! Conformance runner: executes Genkit-format generate and agent scenarios
//! against Holdpoint (docs/reference.md §14).
//!
//! The repository's own scenarios, `tests/specs/generate.yaml` and
//! `tests/specs/agent.yaml` of this crate, always run. Each variable below
//! names one more file to run after them (a relative path is taken from the
//! workspace root); a named file that cannot be read or holds no scenarios
//! fails the run, naming the file.
//!
//! - `HOLDPOINT_GENERATE_SPEC`: more generate scenarios.
//! - `HOLDPOINT_CONFORMANCE_SPEC`: more agent scenarios.
//! - `HOLDPOINT_CONFORMANCE_STORE`: the store(s) of server-managed agents,
//!   comma-separated: `memory` (default), `sqlite` (a fresh file per
//!   scenario), `postgres` (a throwaway server, a fresh database per
//!   scenario). The `conformance-durable` binary runs sqlite and postgres.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod agent_suite;
mod generate_suite;
mod harness;
mod matcher;
mod report;
mod runner;

fn main() {
    let runtime = runner::runtime();
    let kinds = std::env::var("HOLDPOINT_CONFORMANCE_STORE").unwrap_or_else(|_| "memory".into());
    let mut failed = runner::run_generate(&runtime);
    for kind in kinds.split(',').map(str::trim).filter(|k| !k.is_empty()) {
        failed += runner::run_agents(&runtime, kind);
    }
    if failed > 0 {
        std::process::exit(1);
    }
}
