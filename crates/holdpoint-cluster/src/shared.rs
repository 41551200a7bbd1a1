//! What the customers, approvers, chaos and settler share while the run
//! goes on: the proxy's address, the HTTP client, the accounts known to
//! have a hold, and the counts the summary reports.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize};

/// Counts of what the clients saw.
#[derive(Default)]
pub struct Stats {
    /// Creates answered "interrupted" (the hold is saved).
    pub create_ok: AtomicUsize,
    /// Creates whose outcome is unknown (an error or a cut connection).
    pub create_uncertain: AtomicUsize,
    /// Answers by outcome (`decided`, `counted`, `http409`, `error`, …).
    pub answers: Mutex<BTreeMap<String, usize>>,
    /// Answers given through the CLI.
    pub cli_answers: AtomicUsize,
}

impl Stats {
    /// Counts one answer's outcome.
    pub fn answer(&self, outcome: &str) {
        if let Ok(mut a) = self.answers.lock() {
            *a.entry(outcome.to_owned()).or_default() += 1;
        }
    }
}

/// The run's shared state. Invariant: an account is in `confirmed` or
/// `seen` only if a hold for it was saved (a create said so, or an
/// approver or the settler saw it listed).
pub struct Shared {
    /// `http://127.0.0.1:PORT` of the round-robin proxy.
    pub proxy: String,
    /// The HTTP client (no pooled connections: each request is balanced).
    pub http: reqwest::Client,
    /// The `holdpoint` CLI binary.
    pub holdpoint: PathBuf,
    /// Accounts whose create answered "interrupted".
    pub confirmed: Mutex<HashSet<String>>,
    /// Accounts an approver or the settler saw held.
    pub seen: Mutex<HashSet<String>>,
    /// Counts for the summary.
    pub stats: Stats,
    /// Holds whose creation finished (saved or given up).
    pub created: AtomicUsize,
    /// Set when creating stops early (the time budget ran out).
    pub stop_creating: AtomicBool,
    /// Set when the approvers should stop.
    pub stop_approvers: AtomicBool,
}

impl Shared {
    /// Shared state for a run behind `proxy`.
    pub fn new(proxy: String, http: reqwest::Client, holdpoint: PathBuf) -> Shared {
        Shared {
            proxy,
            http,
            holdpoint,
            confirmed: Mutex::new(HashSet::new()),
            seen: Mutex::new(HashSet::new()),
            stats: Stats::default(),
            created: AtomicUsize::new(0),
            stop_creating: AtomicBool::new(false),
            stop_approvers: AtomicBool::new(false),
        }
    }

    /// Records that a hold for `account` exists.
    pub fn saw(&self, account: &str) {
        if let Ok(mut s) = self.seen.lock() {
            s.insert(account.to_owned());
        }
    }
}
