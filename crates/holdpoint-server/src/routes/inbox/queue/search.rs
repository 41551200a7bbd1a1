//! The queue's search `q`: the text of a hold, numbers as people type
//! them, and the user's request that led to the call (read once per
//! snapshot: snapshots never change).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use holdpoint::agent::{Access, Agent, PendingApproval};
use holdpoint::message::Role;
use holdpoint::session::outbox::group_thousands;
use serde_json::Value;

/// Whether `call` (with its `summary`) is found by the lowercase search
/// `needle`; every hold is found when there is no search.
pub(super) async fn found(agent: &Agent, call: &PendingApproval, summary: &str, needle: Option<&str>) -> bool {
    match needle {
        None => true,
        Some(n) => matches_text(call, summary, n) || contains(&request_text(agent, call).await, n),
    }
}

fn contains(haystack: &str, needle: &str) -> bool {
    haystack.to_lowercase().contains(needle)
}

fn matches_text(call: &PendingApproval, summary: &str, needle: &str) -> bool {
    let fields = [
        call.tool.as_str(),
        call.agent.as_deref().unwrap_or(""),
        call.owner.as_deref().unwrap_or(""),
        call.session_id.as_str(),
        call.snapshot_id.as_str(),
        summary,
    ];
    fields.iter().any(|f| contains(f, needle))
        || contains(&Value::Object(call.interrupt.clone()).to_string(), needle)
        || contains(&call.input.to_string(), needle)
        || numbers_in(&call.input)
            .iter()
            .any(|n| spellings(n).iter().any(|s| contains(s, needle)))
}

/// The numbers of an input (top level and nested).
fn numbers_in(input: &Value) -> Vec<f64> {
    match input {
        Value::Number(n) => n.as_f64().into_iter().collect(),
        Value::Array(items) => items.iter().flat_map(numbers_in).collect(),
        Value::Object(map) => map.values().flat_map(numbers_in).collect(),
        _ => Vec::new(),
    }
}

/// How people type a number: `25000`, `25,000`, `25,000.00`, `$25,000.00`.
fn spellings(n: &f64) -> [String; 4] {
    let grouped = group_thousands(*n, false);
    let cents = format!("{}{:.2}", if *n < 0.0 { "-" } else { "" }, n.abs());
    let grouped_cents = group_thousands(n.trunc(), false) + &cents[cents.len() - 3..];
    let dollars = format!("${grouped}");
    [cents, grouped, dollars, format!("${grouped_cents}")]
}

/// The user's requests of held snapshots, by agent and snapshot id: a
/// snapshot never changes, so each is read once (bounded; cleared when full).
fn requests() -> &'static Mutex<HashMap<String, Arc<str>>> {
    static REQUESTS: OnceLock<Mutex<HashMap<String, Arc<str>>>> = OnceLock::new();
    REQUESTS.get_or_init(|| Mutex::new(HashMap::new()))
}

/// How many requests [`requests`] keeps.
const REQUESTS_KEPT: usize = 50_000;

/// The user's request that led to a held call: the last user text of its
/// snapshot ("" when there is none or it cannot be read).
async fn request_text(agent: &Agent, call: &PendingApproval) -> Arc<str> {
    let key = format!("{}\u{1f}{}", agent.name(), call.snapshot_id);
    if let Some(text) = requests().lock().ok().and_then(|m| m.get(&key).cloned()) {
        return text;
    }
    // The caller may see the hold (it was listed for it): its snapshot is read whole.
    let Ok(snapshot) = agent.snapshot(&call.snapshot_id, Access::Full).await else {
        return Arc::from("");
    };
    let text: Arc<str> = snapshot
        .and_then(|s| s.state)
        .and_then(|state| {
            state
                .messages
                .iter()
                .rev()
                .filter(|m| m.role == Role::User)
                .map(|m| m.text().trim().to_owned())
                .find(|t| !t.is_empty())
        })
        .unwrap_or_default()
        .into();
    if let Ok(mut map) = requests().lock() {
        if map.len() >= REQUESTS_KEPT {
            map.clear();
        }
        map.insert(key, text.clone());
    }
    text
}
