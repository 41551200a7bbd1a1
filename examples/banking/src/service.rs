//! The transfer service `transferMoney` calls: in this example it moves
//! no money, but like a real payment service it refuses a transfer that
//! comes without proof it was approved (docs/reference.md §20).
//!
//! Once [`require_receipts`] gave it the agent's receipt keys (as
//! `banking serve` does), every transfer must carry an approval receipt
//! that verifies for `transferMoney` and exactly the transfer's input: a
//! call that was never approved, or whose input changed after the
//! approval, is refused here, whatever the agent did. Without keys (the
//! chat, the demo) it checks nothing.

use std::sync::OnceLock;

use holdpoint_receipt::{Expect, Jwks, ReceiptError, verify};

use crate::Transfer;

/// The tool whose receipts the service accepts.
const TOOL: &str = "transferMoney";

static KEYS: OnceLock<Jwks> = OnceLock::new();

/// Why the service refused a transfer.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// No receipt came with the transfer.
    #[error("the transfer service refused the transfer: it carries no approval receipt")]
    NoReceipt,
    /// The receipt does not prove this transfer was approved.
    #[error("the transfer service refused the transfer: its approval receipt does not verify ({0})")]
    Invalid(#[from] ReceiptError),
    /// The transfer could not be read as JSON to check it.
    #[error("the transfer service refused the transfer: {0}")]
    Unreadable(#[from] serde_json::Error),
}

/// From now on, transfers need a receipt that `keys` verify. Set once per
/// process; a second call keeps the first keys and returns false.
pub fn require_receipts(keys: Jwks) -> bool {
    KEYS.set(keys).is_ok()
}

/// Whether the service requires receipts.
pub fn requires_receipts() -> bool {
    KEYS.get().is_some()
}

/// Checks `t` before money moves: with keys set, `receipt` must verify for
/// `transferMoney` and `t` as JSON; without keys, anything passes.
pub fn check(t: &Transfer, receipt: Option<&str>) -> Result<(), Refused> {
    let Some(keys) = KEYS.get() else {
        return Ok(());
    };
    let receipt = receipt.ok_or(Refused::NoReceipt)?;
    let input = serde_json::to_value(t)?;
    verify(receipt, keys, &Expect::new(TOOL, &input))?;
    Ok(())
}
