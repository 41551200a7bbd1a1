//! Property tests (proptest): JSON round trips of the wire types, decoding
//! that never panics on arbitrary JSON, and the snapshot state machine of
//! `InMemoryStore` against a model of it (the machine itself lives in
//! `holdpoint_testkit::state_machine`, so every store can run it).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod decode;
mod round_trip;
mod state_machine;
mod strategies;
