//! The scenario's plan: who holds which key, the server configuration the
//! replicas share, and what each hold is (its account, amount, agent, and
//! whether the approvers approve it). Pure functions: the account a hold
//! was made for decides everything else about it, so the settler and the
//! ledger check agree with the approvers without sharing state.

use std::net::SocketAddr;

/// The operator's API key (settles calls in doubt).
pub const OPERATOR_KEY: &str = "k-operator-cluster-0123456789";
/// Customers creating holds (their keys rotate over the creators).
pub const CUSTOMERS: usize = 3;
/// Approvers answering holds.
pub const APPROVERS: usize = 5;
/// The approver who answers through the `holdpoint` CLI.
pub const CLI_APPROVER: usize = 4;

/// Customer `i`'s API key.
pub fn customer_key(i: usize) -> String {
    format!("k-cust-{i}-0123456789")
}

/// Approver `i`'s API key.
pub fn approver_key(i: usize) -> String {
    format!("k-appr-{i}-0123456789")
}

/// The configuration every replica reads: the store, the keys, rule
/// `large` (quorum 2, finance, over $10,000) and `small` (ops), and the
/// webhook to the receiver at `hook` for finance's holds.
pub fn config(store: &str, hook: SocketAddr) -> String {
    let mut s = format!("[server]\nstore = \"{store}\"\n\n");
    for i in 0..CUSTOMERS {
        s += &format!(
            "[[auth.api_keys]]\nprincipal = \"cust-{i}\"\nkey = \"{}\"\nroles = [\"customer\"]\n\n",
            customer_key(i)
        );
    }
    for i in 0..APPROVERS {
        s += &format!(
            "[[auth.api_keys]]\nprincipal = \"appr-{i}\"\nkey = \"{}\"\nroles = [\"finance\", \"ops\"]\n\n",
            approver_key(i)
        );
    }
    s += r#"[[approval.rules]]
name = "large"
agent = "bankingAgent"
tool = "transferMoney"
when = "input.amount > 10000.0"
approvers = ["finance"]
quorum = 2
self_approval = false

[[approval.rules]]
name = "small"
agent = "bankingAgent"
tool = "transferMoney"
when = "input.amount <= 10000.0"
approvers = ["ops"]
self_approval = false

"#;
    s += &format!(
        "[[notify.webhooks]]\nurl = \"http://{hook}/hook\"\nsecret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"\nroles = [\"finance\"]\n"
    );
    s
}

/// The agent hold `i` is asked of: every fourth through `supportAgent`'s
/// sub-agent.
pub fn agent_of(i: usize) -> &'static str {
    if i % 4 == 3 { "supportAgent" } else { "bankingAgent" }
}

/// The amount of hold `i`: every third over $10,000 (rule `large`,
/// quorum 2), the rest under.
pub fn amount_of(i: usize) -> usize {
    if i.is_multiple_of(3) {
        20_000 + i % 997
    } else {
        50 + i % 9_000
    }
}

/// The account of hold `i`'s `attempt`: `c{i}`, then `c{i}r{attempt}` for
/// a create retried after an unknown outcome (so each request is told
/// apart in the ledger).
pub fn account_of(i: usize, attempt: usize) -> String {
    if attempt == 0 {
        format!("c{i}")
    } else {
        format!("c{i}r{attempt}")
    }
}

/// The hold number an account was made for: `c{n}` or `c{n}r{attempt}`.
pub fn hold_number(account: &str) -> Option<usize> {
    let rest = account.strip_prefix('c')?;
    rest.split('r').next()?.parse().ok()
}

/// Whether the approvers approve (else deny) the transfer to `account`:
/// every tenth is denied.
pub fn approves(account: &str) -> bool {
    hold_number(account).is_none_or(|n| n % 10 != 9)
}

/// The account named in a sub-agent call's input text ("Transfer $N to ACCOUNT").
pub fn account_in_text(text: &str) -> Option<String> {
    text.split(" to ").nth(1)?.split_whitespace().next().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_account_names_its_hold_and_its_fate() {
        assert_eq!(hold_number("c102"), Some(102));
        assert_eq!(hold_number("c102r3"), Some(102));
        assert!(approves("c102"));
        assert!(!approves("c109r1"));
        assert_eq!(account_in_text("Transfer $50 to c7r1").as_deref(), Some("c7r1"));
        assert_eq!(account_of(7, 0), "c7");
        assert_eq!(account_of(7, 2), "c7r2");
    }
}
