//! Budget holds: a limit reached holds the call instead of failing the
//! turn; an approval raises it once, a denial stops the turn.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use holdpoint::middleware::{BUDGET, BUDGET_STOPPED, Budget, Measure, Scope as BudgetScope};
use holdpoint::{GenerateResponse, Message, Part, Role, ScriptedTurn, Usage};
use serde_json::{Value, json};

use crate::scenario::Scenario;
use crate::support::*;

fn three_balances() -> ScriptedTurn {
    calls(&[
        ("balance", json!({"account": "a"})),
        ("balance", json!({"account": "b"})),
        ("balance", json!({"account": "c"})),
    ])
}

/// A model turn that asks for one balance and reports `tokens` used.
fn balance_using(tokens: u64) -> ScriptedTurn {
    let message = Message::new(
        Role::Model,
        vec![Part::tool_request("balance", None, Some(json!({"account": "a"})))],
    );
    let mut response = GenerateResponse::from_message(message);
    response.usage = Usage {
        total_tokens: Some(tokens),
        ..Usage::default()
    };
    ScriptedTurn::response(response)
}

fn approve() -> Value {
    json!({"toolApproved": true})
}

#[tokio::test]
async fn the_call_over_the_limit_is_held_and_an_approval_runs_it_once() {
    let count = Arc::new(AtomicUsize::new(0));
    let s = Scenario::new([three_balances(), ScriptedTurn::text("done")])
        .tool(balance_tool(Arc::clone(&count)))
        .middleware(Budget::new().tool_calls_per_turn(2));
    let paused = s.pause().await;
    // The first two calls ran; the third waits, saying which limit.
    assert_eq!(count.load(Ordering::SeqCst), 2);
    let hold = paused.hold(0);
    assert_eq!(hold.interrupted_by(), Some(BUDGET));
    let budget = &hold.interrupt_data().unwrap()["budget"];
    assert_eq!(budget["measure"], "toolCalls");
    assert_eq!(budget["scope"], "turn");
    assert_eq!(budget["used"], 3.0);
    assert_eq!(budget["limit"], 2.0);

    let done = paused.restart_with(0, approve()).resume().await;
    assert_eq!(done.response.text(), "done");
    assert_eq!(count.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_denial_stops_the_turn_without_asking_again() {
    let count = Arc::new(AtomicUsize::new(0));
    let s = Scenario::new([
        calls(&[
            ("balance", json!({"account": "a"})),
            ("balance", json!({"account": "b"})),
        ]),
        calls(&[("balance", json!({"account": "c"}))]),
        ScriptedTurn::text("stopped"),
    ])
    .tool(balance_tool(Arc::clone(&count)))
    .middleware(Budget::new().tool_calls_per_turn(1));
    let paused = s.pause().await;
    assert_eq!(count.load(Ordering::SeqCst), 1);

    let done = paused
        .restart_with(0, json!({"toolApproved": false, "reason": "enough"}))
        .resume()
        .await;
    assert_eq!(done.response.text(), "stopped");
    // Neither the denied call nor the model's next attempt ran.
    assert_eq!(count.load(Ordering::SeqCst), 1);
    let errors: Vec<String> = done
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .flat_map(responses)
        .map(|p| output(&p))
        .filter_map(|o| o.get("error").and_then(Value::as_str).map(str::to_owned))
        .collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors.iter().all(|e| e.starts_with(BUDGET_STOPPED)), "{errors:?}");
    assert!(errors[0].contains("enough"));
}

#[tokio::test]
async fn tokens_count_from_the_history_and_an_approval_raises_the_limit_once() {
    let count = Arc::new(AtomicUsize::new(0));
    let s = Scenario::new([
        balance_using(600),
        balance_using(300),
        balance_using(300),
        ScriptedTurn::text("done"),
    ])
    .tool(balance_tool(Arc::clone(&count)))
    .middleware(Budget::new().tokens_per_session(500));
    // 600 tokens before the first call: held before it runs.
    let paused = s.pause().await;
    assert_eq!(count.load(Ordering::SeqCst), 0);
    assert_eq!(paused.hold(0).interrupt_data().unwrap()["budget"]["used"], 600.0);
    // Approved: the limit is 1000 now, so 900 runs, and 1200 holds again.
    let again = paused.restart_with(0, approve()).pause().await;
    assert_eq!(count.load(Ordering::SeqCst), 2);
    let budget = &again.hold(0).interrupt_data().unwrap()["budget"];
    assert_eq!(
        (budget["used"].as_f64(), budget["limit"].as_f64()),
        (Some(1200.0), Some(1000.0))
    );
    let done = again.restart_with(0, approve()).resume().await;
    assert_eq!(done.response.text(), "done");
    assert_eq!(count.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_cost_function_prices_tool_calls() {
    let count = Arc::new(AtomicUsize::new(0));
    let s = Scenario::new([three_balances(), ScriptedTurn::text("done")])
        .tool(balance_tool(Arc::clone(&count)))
        .middleware(Budget::new().cost_per_turn(0.25, |spend| match spend {
            holdpoint::middleware::Spend::Tool(call) if call.name == "balance" => 0.1,
            _ => 0.0,
        }));
    let paused = s.pause().await;
    assert_eq!(count.load(Ordering::SeqCst), 2);
    assert_eq!(paused.holds().len(), 1);
    assert_eq!(paused.hold(0).interrupt_data().unwrap()["budget"]["measure"], "cost");
}

/// A budget hold reads in whole counts ("3 tool calls of 2"), has integer
/// counts on the wire, is claimed by a typed `BudgetHold`, and a raise
/// is a count.
#[tokio::test]
async fn a_budget_hold_reads_in_counts_and_is_claimed_typed() {
    let count = Arc::new(AtomicUsize::new(0));
    let s = Scenario::new([three_balances(), ScriptedTurn::text("done")])
        .tool(balance_tool(Arc::clone(&count)))
        .middleware(Budget::new().tool_calls_per_turn(2).raise_by(1));
    let paused = s.pause().await;
    let part = paused.hold(0);
    let data = part.interrupt_data().unwrap();
    let message = data["message"].as_str().unwrap();
    assert!(
        message.starts_with("The budget of 2 tool calls per turn is reached (3 tool calls of 2)"),
        "{message}"
    );
    assert!(message.contains("raise it by 1 once"), "{message}");
    assert_eq!(data["budget"]["used"], json!(3));
    assert!(
        data["budget"]["used"].is_u64() && data["budget"]["limit"].is_u64(),
        "{data:?}"
    );
    assert_eq!(data["budget"]["raiseBy"], json!(1));

    let hold = Budget::interrupted(&part).expect("a budget hold");
    assert_eq!(hold.tool, "balance");
    assert_eq!((hold.measure, hold.scope), (Measure::ToolCalls, BudgetScope::Turn));
    assert_eq!((hold.used, hold.limit, hold.raise_by), (3.0, 2.0, 1.0));
    assert_eq!(hold.message, message);
    // Only a budget's own hold is claimed.
    assert!(Budget::interrupted(&Part::tool_request("balance", None, None)).is_none());

    let done = paused.restart(hold.approve()).resume().await;
    assert_eq!(done.response.text(), "done");
    assert_eq!(count.load(Ordering::SeqCst), 3);
}
