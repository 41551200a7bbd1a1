//! Integration tests of `SqliteStore`: one binary, a module per area.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod approvers;
mod columns;
mod group;
mod locked;
mod mixed;
mod modes;
mod reopen;
mod replicas;
mod state_machine;
mod suite;
