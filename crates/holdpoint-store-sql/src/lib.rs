//! The SQL that Holdpoint's SQL session stores share (SQLite in
//! `holdpoint-store-sqlite`, PostgreSQL in `holdpoint-store-postgres`):
//! rows encoded as columns and decoded back ([`row`]), the listing
//! statements built over them, and the first-claim rule of a resume written
//! once per dialect ([`claim`]). No database driver: the stores run the
//! text with theirs, and the core (`holdpoint`) stays free of SQL.

pub mod claim;
pub mod outbox;
pub mod prune;
pub mod row;
