//! The transfer service refuses what was not approved (issue 36 item 1):
//! with the agent's receipt keys, an approved transfer verifies and moves,
//! while a transfer with no receipt, or with the receipt of another
//! amount (edited after the approval), is refused by the service itself.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;

use banking::{Transfer, service};
use holdpoint::prelude::*;
use holdpoint_receipt::ReceiptSigner;

fn transfer(amount: f64) -> Transfer {
    serde_json::from_value(serde_json::json!({"amount": amount, "toAccount": "savings"})).unwrap()
}

#[tokio::test]
async fn the_service_moves_money_only_on_a_receipt_of_this_transfer() {
    let signer = Arc::new(ReceiptSigner::ephemeral().unwrap());
    assert!(service::require_receipts(signer.jwks()));
    assert!(service::requires_receipts());
    let agent = banking::builder(Arc::new(banking::demo_model()), Some(Arc::new(InMemoryStore::new())))
        .unwrap()
        .receipts(Arc::clone(&signer) as Arc<dyn holdpoint::receipt::ReceiptIssuer>)
        .build()
        .unwrap();

    // Approved in the ordinary way: the tool runs with a receipt and the
    // service accepts it.
    let held = agent.run_text("Transfer $500 to savings").await.unwrap();
    assert_eq!(held.finish_reason, FinishReason::Interrupted, "{held:?}");
    let call = banking::transfer_money()
        .unwrap()
        .interrupted(&held.interrupts()[0])
        .unwrap();
    let approve = call.restart(Some(banking::Approval::yes())).unwrap();
    let done = agent
        .run(
            AgentInput::resume(Resume::from_parts([approve])),
            AgentInit::snapshot(held.snapshot_id.clone().unwrap()),
        )
        .await
        .unwrap();
    assert!(done.text().contains("txn-"), "{}", done.text());

    // An agent that issues no receipts gets its approved transfer refused
    // by the service: the tool reports the refusal, no money moves.
    let unsigned = banking::builder(Arc::new(banking::demo_model()), Some(Arc::new(InMemoryStore::new())))
        .unwrap()
        .build()
        .unwrap();
    let held = unsigned.run_text("Transfer $500 to savings").await.unwrap();
    let call = banking::transfer_money()
        .unwrap()
        .interrupted(&held.interrupts()[0])
        .unwrap();
    let approve = call.restart(Some(banking::Approval::yes())).unwrap();
    let out = unsigned
        .run(
            AgentInput::resume(Resume::from_parts([approve])),
            AgentInit::snapshot(held.snapshot_id.clone().unwrap()),
        )
        .await
        .unwrap();
    assert!(!out.text().contains("txn-"), "{}", out.text());

    // The service itself refuses a transfer with no receipt ...
    let refused = service::check(&transfer(500.0), None).unwrap_err();
    assert!(refused.to_string().contains("no approval receipt"), "{refused}");
    // ... and one whose amount changed after the approval: a receipt of
    // $500 does not move $5,000.
    let subject = holdpoint_receipt::Subject::new(
        "bankingAgent",
        "transferMoney",
        &serde_json::to_value(transfer(500.0)).unwrap(),
        holdpoint_receipt::Decision::Approve,
    );
    let receipt = signer.sign(subject).unwrap();
    service::check(&transfer(500.0), Some(&receipt)).unwrap();
    let edited = service::check(&transfer(5000.0), Some(&receipt)).unwrap_err();
    assert!(edited.to_string().contains("does not verify"), "{edited}");
    // A receipt signed by anyone else proves nothing.
    let foreign = ReceiptSigner::ephemeral()
        .unwrap()
        .sign(holdpoint_receipt::Subject::new(
            "bankingAgent",
            "transferMoney",
            &serde_json::to_value(transfer(500.0)).unwrap(),
            holdpoint_receipt::Decision::Approve,
        ))
        .unwrap();
    assert!(service::check(&transfer(500.0), Some(&foreign)).is_err());
}
