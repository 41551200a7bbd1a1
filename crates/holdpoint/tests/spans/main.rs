//! Tracing spans of agents, in a test binary of their own: tracing's
//! callsite interest cache is process-wide, and with the other agent tests
//! running beside them on threads without a subscriber, these tests saw no
//! spans at all in about one run out of six.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../agents/bank.rs"]
mod bank;
mod spans;

pub use bank::*;
