//! Integration tests of the core: parts, tools, the generate loop, resume and
//! middleware, all driven through the public API against the real generate
//! loop with `ScriptedModel`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod budget;
mod generate;
mod middleware;
mod parts;
mod resume;
mod scenario;
mod support;
mod tools;
