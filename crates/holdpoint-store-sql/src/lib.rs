//! What Holdpoint's SQL session stores share (SQLite in
//! `holdpoint-store-sqlite`, PostgreSQL in `holdpoint-store-postgres`):
//! rows encoded as columns and decoded back, and the listing statements
//! built over them in SQL both dialects take ([`row`], [`outbox`],
//! [`prune`]; what a dialect spells its own way is asked of the driver's
//! [`row::Dialect`]); and the claim of a resume, written once over the
//! small transaction trait [`claim::ClaimTx`] each driver implements.
//! No database driver and no dialect's own SQL: each driver owns its
//! statements, and the core (`holdpoint`) stays free of SQL.

pub mod claim;
pub mod outbox;
pub mod prune;
pub mod row;
