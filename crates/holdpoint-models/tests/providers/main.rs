//! Provider adapters against loopback servers that speak each provider's
//! wire format. No live network.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

#[cfg(any(feature = "gemini", feature = "openai", feature = "anthropic"))]
mod support;

#[cfg(feature = "anthropic")]
mod anthropic;
#[cfg(all(feature = "gemini", feature = "openai", feature = "anthropic"))]
mod errors;
#[cfg(feature = "gemini")]
mod gemini;
#[cfg(feature = "openai")]
mod openai;
