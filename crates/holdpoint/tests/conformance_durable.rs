//! The agent conformance scenarios on the durable stores: SQLite (a fresh
//! file per scenario) and PostgreSQL (a throwaway server, a fresh database
//! per scenario). The crate's own `tests/specs/agent.yaml` always runs;
//! `HOLDPOINT_CONFORMANCE_SPEC` names one more file to run after it.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

#[path = "conformance/agent_suite.rs"]
mod agent_suite;
#[path = "conformance/generate_suite.rs"]
#[allow(dead_code)]
mod generate_suite;
#[path = "conformance/harness.rs"]
mod harness;
#[path = "conformance/matcher.rs"]
mod matcher;
#[path = "conformance/report.rs"]
mod report;
#[path = "conformance/runner.rs"]
#[allow(dead_code)]
mod runner;

fn main() {
    let runtime = runner::runtime();
    let failed = runner::run_agents(&runtime, "sqlite") + runner::run_agents(&runtime, "postgres");
    if failed > 0 {
        std::process::exit(1);
    }
}
