//! The seed's banking agent, defined once: `transferMoney` pauses for the
//! person's approval, `getBalance` runs freely, and an offline scripted
//! model plays the bank's assistant when no provider key is set.

pub mod ledger;
mod scripted;
pub mod service;
mod support;

use std::sync::Arc;

use holdpoint::agent::{Agent, AgentBuilder};
use holdpoint::approval::{ApprovalReply, Policy};
use holdpoint::middleware::ToolApproval;
use holdpoint::review::{HoldView, Preview};
use holdpoint::session::SessionStore;
use holdpoint::session::outbox::group_thousands;
use holdpoint::tool::{ResumableTool, TypedTool, tool};
use holdpoint::{Model, ToolContext};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use scripted::streamed;
pub use scripted::{DEMO_WORD_DELAY, demo_model, parse_amount};
pub use support::{SUPPORT_AGENT_NAME, SUPPORT_PROMPT, support_agent, support_demo_model, support_model_for};

/// The agent's name, as served over HTTP.
pub const AGENT_NAME: &str = "bankingAgent";

/// The system prompt.
pub const SYSTEM_PROMPT: &str = "You are a helpful banking assistant. Use getBalance to look up balances \
and transferMoney to move money. Every transfer needs the account holder's approval.";

/// The most one transfer may move, in dollars.
pub const MAX_TRANSFER: f64 = 100_000.0;

/// The longest account id `transferMoney` accepts (an IBAN's length).
pub const MAX_ACCOUNT_LEN: usize = 34;

/// What an account id looks like: a letter or digit, then letters, digits,
/// `-`, `_` or `.` (no spaces or control characters, which could make the
/// approval text say something else).
pub const ACCOUNT_PATTERN: &str = "^[A-Za-z0-9][A-Za-z0-9_.-]*$";

/// Arguments of `transferMoney`.
///
/// The schema the model sees states the rules (`minimum`, `maximum`,
/// `minLength`, `maxLength`, `pattern`), the tool checks them again on
/// every call with [`Transfer::validate`], and a transfer that breaks one
/// fails before anyone is asked to approve it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Transfer {
    /// Amount in dollars, in whole cents: at least 0.01, at most 100000.
    #[schemars(range(min = 0.01, max = MAX_TRANSFER))]
    pub amount: f64,
    /// The destination account id: 1 to 34 letters, digits, `-`, `_` or
    /// `.`, starting with a letter or digit.
    #[schemars(length(min = 1, max = MAX_ACCOUNT_LEN), pattern(ACCOUNT_PATTERN))]
    pub to_account: String,
}

/// Why `transferMoney` refused a transfer; the model sees the message.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TransferRejected {
    /// The amount is not a finite number (NaN or infinite).
    #[error("amount must be a finite number of dollars, got {0}")]
    NotFinite(f64),
    /// The amount is zero or negative.
    #[error("amount must be more than 0 dollars, got {0}")]
    NotPositive(f64),
    /// The amount is more than [`MAX_TRANSFER`].
    #[error("amount must be at most {max} dollars per transfer, got {0}", max = MAX_TRANSFER)]
    TooLarge(f64),
    /// The amount has a fraction of a cent.
    #[error("amount must be in whole cents, got {0}")]
    FractionOfCent(f64),
    /// `toAccount` is empty.
    #[error("toAccount must name an account, got an empty string")]
    NoAccount,
    /// `toAccount` is longer than [`MAX_ACCOUNT_LEN`] characters.
    #[error("toAccount must be at most {max} characters, got {0}", max = MAX_ACCOUNT_LEN)]
    AccountTooLong(usize),
    /// `toAccount` has a character outside [`ACCOUNT_PATTERN`].
    #[error("toAccount may hold only letters, digits, '-', '_' and '.', starting with a letter or digit, got {0:?}")]
    AccountCharacters(String),
}

impl Transfer {
    /// Checks the rules the schema states, for values that did not come
    /// through it (NaN and infinities have no JSON form, so only Rust code
    /// can make them).
    pub fn validate(&self) -> Result<(), TransferRejected> {
        let amount = self.amount;
        if !amount.is_finite() {
            return Err(TransferRejected::NotFinite(amount));
        }
        if amount <= 0.0 {
            return Err(TransferRejected::NotPositive(amount));
        }
        if amount > MAX_TRANSFER {
            return Err(TransferRejected::TooLarge(amount));
        }
        // Within the limit `amount * 100` is exact to far below a cent.
        let cents = amount * 100.0;
        if (cents - cents.round()).abs() > 1e-6 {
            return Err(TransferRejected::FractionOfCent(amount));
        }
        let account = self.to_account.as_str();
        let len = account.chars().count();
        if len == 0 {
            return Err(TransferRejected::NoAccount);
        }
        if len > MAX_ACCOUNT_LEN {
            return Err(TransferRejected::AccountTooLong(len));
        }
        let mut chars = account.chars();
        let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
        if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')) {
            return Err(TransferRejected::AccountCharacters(account.to_owned()));
        }
        Ok(())
    }
}

/// Result of `transferMoney`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TransferResult {
    /// Whether the money moved.
    pub success: bool,
    /// The bank's transaction id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transaction_id: Option<String>,
}

/// What the person answers when a transfer pauses.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Approval {
    /// Approve (true) or decline (false).
    pub approved: bool,
    /// Why, when declined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `approved` means yes or no, `reason` is the reason: so `holdpoint
/// approve` / `deny`, the page and `POST /agents/bankingAgent/answer`
/// answer a paused transfer without hand-written JSON, and the audit
/// records `approve` or `deny`.
impl ApprovalReply for Approval {
    fn approve(reason: Option<String>) -> Self {
        Approval { approved: true, reason }
    }

    fn deny(reason: Option<String>) -> Self {
        Approval::no(reason)
    }
}

impl Approval {
    /// An approval.
    pub fn yes() -> Self {
        Approval {
            approved: true,
            reason: None,
        }
    }

    /// A refusal with an optional reason.
    pub fn no(reason: Option<String>) -> Self {
        Approval {
            approved: false,
            reason,
        }
    }
}

/// The interrupt data a paused transfer shows the person.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TransferDetails {
    /// A sentence describing the transfer.
    pub details: String,
}

/// Arguments of `closeAccount`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CloseAccount {
    /// The account to close.
    pub account: String,
}

/// `closeAccount`: runs only once ToolApproval's hold is approved.
pub fn close_account() -> TypedTool<CloseAccount, Value> {
    tool(
        "closeAccount",
        "Closes an account for good.",
        |_ctx: ToolContext, c: CloseAccount| async move { Ok(json!({ "closed": c.account })) },
    )
    .hold_view(close_view())
}

/// The approval gate: `getBalance` runs freely, `transferMoney` asks for
/// approval itself, everything else (`closeAccount`) waits for a person.
pub fn approval_gate() -> ToolApproval {
    ToolApproval::allow(["getBalance", "transferMoney"])
}

/// Arguments of `getBalance`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BalanceQuery {
    /// The account, e.g. `checking`.
    pub account: String,
}

/// `transferMoney`: checks the transfer ([`Transfer::validate`]), pauses
/// for approval, then moves the money (in this example, pretends to). A
/// transfer that breaks a rule is a tool failure the model sees, on the
/// first call and on a restart (whose input may have been replaced).
pub fn transfer_money() -> holdpoint::Result<ResumableTool<Transfer, TransferResult, Approval>> {
    ResumableTool::define(
        "transferMoney",
        "Transfers money to another account: more than $0 and at most $100,000, in whole cents. Requires approval (the account holder's, or finance's for large amounts when an approval policy says so).",
        |ctx: ToolContext, t: Transfer, approval: Option<Approval>| async move {
            if let Err(why) = t.validate() {
                return Err(ctx.fail(format!("the transfer was refused: {why}")));
            }
            match approval {
                None => Err(ctx.interrupt(TransferDetails {
                    details: format!("Transfer ${:.2} to {}", t.amount, t.to_account),
                })),
                Some(a) if a.approved => {
                    // The transfer service moves money only on a receipt
                    // of this approval, when it requires them (`banking serve`).
                    service::check(&t, ctx.receipt()).map_err(|e| ctx.fail(e))?;
                    // The money moves here: with BANKING_LEDGER_URL set, one row per execution.
                    ledger::record(&t).await.map_err(|e| ctx.fail(e))?;
                    Ok(TransferResult {
                        success: true,
                        transaction_id: Some("txn-123".into()),
                    })
                }
                Some(a) => Err(ctx.fail(match a.reason {
                    Some(r) => format!("the account holder declined the transfer: {r}"),
                    None => "the account holder declined the transfer".to_owned(),
                })),
            }
        },
    )?
    .approval_reply()
    .map(|t| t.hold_view(transfer_view()))
}

/// What an approver sees of a held transfer: "Transfer $18,300.00 to
/// acct-4471", the amount and the account as labelled fields, one account
/// touched (docs/reference.md §22.2). Made from the input approvers may
/// see; a transfer whose amount is not a number shows its raw input.
pub fn transfer_view() -> HoldView {
    HoldView::new().preview(|input| {
        let amount = input
            .get("amount")
            .and_then(Value::as_f64)
            .ok_or("the transfer has no amount")?;
        let to = input.get("toAccount").and_then(Value::as_str).unwrap_or("?");
        let money = format!("${}", group_thousands(amount, true));
        Ok(Preview::new(format!("Transfer {money} to {to}"))
            .field("Amount", money)
            .field("To account", to)
            .touches(1))
    })
}

/// What an approver sees of a held account closure: "Close account
/// acct-1 for good".
pub fn close_view() -> HoldView {
    HoldView::new().preview(|input| {
        let account = input
            .get("account")
            .and_then(Value::as_str)
            .ok_or("the closure names no account")?;
        Ok(Preview::new(format!("Close account {account} for good"))
            .field("Account", account)
            .touches(1))
    })
}

/// `getBalance`: runs freely.
pub fn get_balance() -> TypedTool<BalanceQuery, Value> {
    tool(
        "getBalance",
        "Returns the balance of an account.",
        |_ctx: ToolContext, q: BalanceQuery| async move {
            let balance = match q.account.as_str() {
                "savings" => 5_400.00,
                _ => 1_250.00,
            };
            Ok(json!({ "account": q.account, "balance": balance }))
        },
    )
}

/// The agent, on any model and (optionally) a store.
pub fn banking_agent(model: Arc<dyn Model>, store: Option<Arc<dyn SessionStore>>) -> holdpoint::Result<Agent> {
    builder(model, store)?.build()
}

/// The agent on any model and store, its calls governed by `policy` (the
/// `[[approval.rules]]` of a configuration file): e.g. transfers over
/// $10,000 held for two of finance, never the account holder.
pub fn banking_agent_with_policy(
    model: Arc<dyn Model>,
    store: Option<Arc<dyn SessionStore>>,
    policy: Option<Policy>,
) -> holdpoint::Result<Agent> {
    with_policy(builder(model, store)?, policy).build()
}

/// Applies an approval `policy` (if any) to a banking agent's builder.
pub fn with_policy(builder: AgentBuilder, policy: Option<Policy>) -> AgentBuilder {
    match policy {
        Some(policy) => builder.approval_policy(policy),
        None => builder,
    }
}

/// The agent's builder, for adding middleware or a state codec.
pub fn builder(model: Arc<dyn Model>, store: Option<Arc<dyn SessionStore>>) -> holdpoint::Result<AgentBuilder> {
    let mut b = Agent::builder(AGENT_NAME)
        .description("A banking assistant whose transfers pause for approval")
        .model(model)
        .system(SYSTEM_PROMPT)
        .tool(transfer_money()?)
        .tool(get_balance())
        .tool(close_account())
        .middleware(approval_gate().into_middleware());
    if let Some(store) = store {
        b = b.store(store);
    }
    Ok(b)
}

/// The README's Rust blocks, compiled and run as doc tests.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeExamples;
