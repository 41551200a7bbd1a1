//! Integration tests of `PostgresStore` on a throwaway PostgreSQL (see
//! `holdpoint_testkit::TempPostgres`): one binary, a module per area.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod approvers;
mod group;
mod replicas;
mod state_machine;
mod suite;
