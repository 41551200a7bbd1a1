//! The customers: each takes the next hold number and asks for its
//! transfer through the proxy until a create says the hold is saved.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::plan::{self, CUSTOMERS};
use crate::shared::Shared;

/// Tries a create this many times (a new account each time) before giving
/// the hold up.
const ATTEMPTS: usize = 8;

/// Creates holds `next..holds` (shared with the other customers) as
/// customer `c % CUSTOMERS`, until they are all taken or
/// [`Shared::stop_creating`] is set.
pub async fn creator(shared: Arc<Shared>, next: Arc<AtomicUsize>, holds: usize, c: usize) {
    while !shared.stop_creating.load(Ordering::SeqCst) {
        let i = next.fetch_add(1, Ordering::SeqCst);
        if i >= holds {
            return;
        }
        for attempt in 0..ATTEMPTS {
            let account = plan::account_of(i, attempt);
            if create(&shared, i, &account, c).await {
                shared.stats.create_ok.fetch_add(1, Ordering::SeqCst);
                if let Ok(mut s) = shared.confirmed.lock() {
                    s.insert(account);
                }
                break;
            }
            // Unknown whether it was saved: a new account from here on, and
            // the approvers will find this one in the inbox if it exists.
            shared.stats.create_uncertain.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        shared.created.fetch_add(1, Ordering::SeqCst);
    }
}

/// One create of hold `i` to `account`; true when it answered "interrupted".
async fn create(shared: &Shared, i: usize, account: &str, c: usize) -> bool {
    let text = format!("Transfer ${} to {account}", plan::amount_of(i));
    let body = json!({"data": {"message": {"role": "user", "content": [{"text": text}]}}});
    let sent = shared
        .http
        .post(format!("{}/agents/{}", shared.proxy, plan::agent_of(i)))
        .header("x-api-key", plan::customer_key(c % CUSTOMERS))
        .json(&body)
        .send()
        .await;
    match sent {
        Ok(r) if r.status().is_success() => r
            .json::<Value>()
            .await
            .is_ok_and(|b| b["result"]["finishReason"] == json!("interrupted")),
        _ => false,
    }
}
