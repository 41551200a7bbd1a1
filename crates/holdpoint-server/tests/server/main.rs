//! The server over real HTTP on loopback: routes, streaming, WebSockets,
//! auth, signed state, rejections, shutdown, replicas and the approval page
//! in a headless browser.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod a2a;
mod adversarial;
mod agui;
mod api;
mod approvers;
mod auth;
mod bank;
mod browser;
mod browser_grants;
mod browser_inbox;
mod browser_review;
mod browser_session;
mod browser_triage;
mod child;
mod csv;
mod cursors;
mod decisions;
mod descriptors;
mod disk;
mod first_hour;
mod grants;
mod hardening;
mod inbox;
mod inbox_round2;
mod jwt;
mod kill;
mod load;
mod notifications;
mod observability;
mod oidc;
mod page;
mod pg_restart;
mod provider;
mod receipts;
mod receivers;
mod redaction;
mod rejections;
mod replicas;
mod session_cookie;
mod shutdown;
mod signing;
mod streaming;
mod support;
mod websocket;
