//! Tools: definition checks, the claim, and the three non-success outcomes
//! (interrupt, soft failure, hard error) as the generate loop sees them.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use holdpoint::message::metadata;
use holdpoint::tool::{DynamicTool, Tool, ToolCall, ToolContext, ToolError, ToolOutcome};
use holdpoint::{Error, FinishReason, Part, ResumableTool, ScriptedTurn, Status, TypedTool, tool};
use serde_json::{Map, Value, json};

use crate::support::*;

#[test]
fn define_rejects_a_resume_type_that_is_not_an_object() {
    let err = ResumableTool::<Transfer, Receipt, u32>::define("t", "d", |_ctx: ToolContext, _t, _r| async move {
        Ok(Receipt { id: "x".into() })
    })
    .err()
    .unwrap();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(err.to_string().contains("resume type must be a struct or map"), "{err}");
    let err = ResumableTool::<Transfer, Receipt, String>::define("t", "d", |_ctx: ToolContext, _t, _r| async move {
        Ok(Receipt { id: "x".into() })
    })
    .err()
    .unwrap();
    assert!(err.to_string().contains("\"t\""), "{err}");
    // Maps are fine.
    assert!(
        ResumableTool::<Transfer, Receipt, std::collections::HashMap<String, bool>>::define(
            "t",
            "d",
            |_ctx: ToolContext, _t, _r| async move { Ok(Receipt { id: "x".into() }) },
        )
        .is_ok()
    );
}

#[test]
fn typed_tool_definition_carries_schemas_from_the_rust_types() {
    let t = transfer_tool(log());
    let def = t.definition();
    assert_eq!(def.name, "transfer");
    assert_eq!(def.description, "Moves money; needs approval");
    let input = def.input_schema.as_ref().unwrap();
    assert_eq!(input["type"], json!("object"));
    assert_eq!(input["$schema"], json!("https://json-schema.org/draft/2020-12/schema"));
    assert!(input["properties"]["amount"].is_object());
    let required: Vec<&str> = input["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(required.contains(&"to") && required.contains(&"amount"));
    assert!(def.output_schema.as_ref().unwrap()["properties"]["id"].is_object());
}

async fn paused_pair() -> (Vec<Part>, ResumableTool<Transfer, Receipt, Approval>) {
    let transfer = transfer_tool(log());
    let refund = ResumableTool::<Transfer, Receipt, Approval>::define(
        "refund",
        "Refunds; needs approval",
        |ctx: ToolContext, _t, res| async move {
            match res {
                None => Err(ctx.interrupt(json!({"details": "refund?"}))),
                Some(_) => Ok(Receipt { id: "r".into() }),
            }
        },
    )
    .unwrap();
    let m = model([calls(&[
        ("transfer", json!({"to": "bob", "amount": 1.0})),
        ("refund", json!({"to": "ann", "amount": 2.0})),
    ])]);
    let g = start(&m, vec![transfer.clone().into_tool(), refund.into_tool()], "go")
        .await
        .unwrap();
    assert!(g.is_interrupted());
    (g.response.interrupts(), transfer)
}

#[tokio::test]
async fn claim_returns_typed_input_of_own_interrupt() {
    let (parts, transfer) = paused_pair().await;
    let call = transfer.interrupted(&parts[0]).unwrap();
    assert_eq!(
        call.input,
        Transfer {
            to: "bob".into(),
            amount: 1.0
        }
    );
    assert_eq!(call.part(), &parts[0]);
}

#[tokio::test]
async fn claim_refuses_another_tools_interrupt() {
    let (parts, transfer) = paused_pair().await;
    assert_eq!(parts[1].as_tool_request().unwrap().name, "refund");
    assert!(parts[1].is_interrupt());
    assert!(transfer.interrupted(&parts[1]).is_none());
}

#[tokio::test]
async fn claim_refuses_a_resolved_interrupt() {
    let (parts, transfer) = paused_pair().await;
    let mut resolved = parts[0].clone();
    let data = resolved.remove_meta(metadata::INTERRUPT).unwrap();
    resolved.set_meta(metadata::RESOLVED_INTERRUPT, data);
    assert!(transfer.interrupted(&resolved).is_none());
}

#[tokio::test]
async fn claim_refuses_a_middleware_hold() {
    let (parts, transfer) = paused_pair().await;
    let mut held = parts[0].clone();
    held.set_meta(metadata::INTERRUPTED_BY, json!("approval"));
    assert!(transfer.interrupted(&held).is_none());
}

#[test]
fn claim_refuses_non_request_and_unpaused_parts() {
    let transfer = transfer_tool(log());
    assert!(transfer.interrupted(&Part::text("transfer")).is_none());
    let mut resp = Part::tool_response("transfer", Some("1".into()), Some(json!({"id": "x"})));
    resp.set_meta(metadata::INTERRUPT, json!(true));
    assert!(transfer.interrupted(&resp).is_none());
    let plain = Part::tool_request("transfer", Some("1".into()), Some(json!({"to": "a", "amount": 1.0})));
    assert!(transfer.interrupted(&plain).is_none());
}

#[test]
fn claim_refuses_an_interrupt_whose_input_does_not_decode() {
    let transfer = transfer_tool(log());
    let mut p = Part::tool_request("transfer", Some("1".into()), Some(json!({"to": 5})));
    p.set_meta(metadata::INTERRUPT, json!(true));
    assert!(transfer.interrupted(&p).is_none());
    let mut ok = Part::tool_request("transfer", Some("1".into()), Some(json!({"to": "x", "amount": 3})));
    ok.set_meta(metadata::INTERRUPT, json!(true));
    assert_eq!(transfer.interrupted(&ok).unwrap().input.amount, 3.0);
}

fn pausing_with(data: Value) -> TypedTool<Account, String> {
    tool("odd", "pauses with odd data", move |ctx: ToolContext, _a: Account| {
        let data = data.clone();
        async move { Err::<String, _>(ctx.interrupt(data)) }
    })
}

#[tokio::test]
async fn non_object_interrupt_data_fails_the_generation_clearly() {
    for (data, shown) in [
        (json!(5), "got 5"),
        (json!("wait"), "got \"wait\""),
        (json!([1]), "got [1]"),
    ] {
        let m = model([calls(&[("odd", json!({"account": "a"}))])]);
        let err = start(&m, vec![pausing_with(data).into_tool()], "go").await.unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("tool \"odd\" failed: "), "{msg}");
        assert!(msg.contains("interrupt data must be a JSON object"), "{msg}");
        assert!(msg.contains(shown), "{msg}");
    }
}

#[test]
fn interrupt_data_must_be_an_object_at_the_context() {
    let ctx = ToolContext::new("t");
    assert_eq!(
        ctx.interrupt(json!({"a": 1})),
        ToolError::Interrupt(json!({"a": 1}).as_object().cloned().unwrap())
    );
    assert_eq!(ctx.interrupt(true), ToolError::Interrupt(Map::new()));
    assert!(matches!(ctx.interrupt(5), ToolError::Error(m) if m.contains("must be a JSON object")));
    assert!(matches!(ctx.interrupt(false), ToolError::Error(_)));
}

#[tokio::test]
async fn bare_interrupt_is_stored_as_true() {
    let m = model([calls(&[("odd", json!({"account": "a"}))])]);
    let g = start(&m, vec![pausing_with(json!(true)).into_tool()], "go")
        .await
        .unwrap();
    let p = g.response.interrupts().pop().unwrap();
    assert_eq!(p.meta(metadata::INTERRUPT), Some(&json!(true)));
}

#[tokio::test]
async fn soft_failure_is_shown_to_the_model_and_the_loop_goes_on() {
    let t = tool("flaky", "fails softly", |ctx: ToolContext, _a: Account| async move {
        Err::<String, _>(ctx.fail("account is locked"))
    });
    let m = model([
        calls(&[("flaky", json!({"account": "a"}))]),
        ScriptedTurn::text("sorry"),
    ]);
    let g = start(&m, vec![t.into_tool()], "go").await.unwrap();
    assert_eq!(g.response.finish_reason, Some(FinishReason::Stop));
    assert_eq!(g.response.text(), "sorry");
    let shown = last_request_responses(&m);
    assert_eq!(shown.len(), 1);
    assert_eq!(output(&shown[0]), json!({"error": "account is locked"}));
    assert_eq!(m.requests().len(), 2);
}

#[tokio::test]
async fn plain_error_fails_the_whole_generation_naming_the_tool() {
    let t = tool("broken", "errors", |_ctx: ToolContext, _a: Account| async move {
        Err::<String, ToolError>("disk on fire".into())
    });
    let m = model([
        calls(&[("broken", json!({"account": "a"}))]),
        ScriptedTurn::text("never"),
    ]);
    let err = start(&m, vec![t.into_tool()], "go").await.unwrap_err();
    assert!(matches!(&err, Error::ToolFailed { tool, .. } if tool == "broken"));
    assert_eq!(err.to_string(), "tool \"broken\" failed: disk on fire");
    // The model is not called again.
    assert_eq!(m.requests().len(), 1);
    assert_eq!(m.remaining(), 1);
}

#[tokio::test]
async fn question_mark_on_any_error_is_a_hard_failure() {
    let t = tool("parse", "parses", |_ctx: ToolContext, a: Account| async move {
        let n: u32 = a.account.parse()?;
        Ok(n)
    });
    let m = model([calls(&[("parse", json!({"account": "abc"}))])]);
    let err = start(&m, vec![t.into_tool()], "go").await.unwrap_err();
    assert!(
        err.to_string().starts_with("tool \"parse\" failed: invalid digit"),
        "{err}"
    );
}

#[tokio::test]
async fn invalid_model_arguments_go_back_to_the_model_naming_the_field() {
    let count = Arc::new(AtomicUsize::new(0));
    let log = log();
    let m = model([
        calls(&[
            ("transfer", json!({"to": "bob", "amount": "lots"})),
            ("balance", json!({})),
        ]),
        ScriptedTurn::text("let me fix that"),
    ]);
    let g = start(
        &m,
        vec![
            transfer_tool(log.clone()).into_tool(),
            balance_tool(count.clone()).into_tool(),
        ],
        "go",
    )
    .await
    .unwrap();
    assert_eq!(g.response.text(), "let me fix that");
    // Neither function ran.
    assert!(seen(&log).is_empty());
    assert_eq!(count.load(Ordering::SeqCst), 0);
    let shown = last_request_responses(&m);
    assert_eq!(shown.len(), 2);
    let bad_type = output(&shown[0])["error"].as_str().unwrap().to_owned();
    assert!(bad_type.contains("tool \"transfer\""), "{bad_type}");
    assert!(bad_type.contains("/amount"), "{bad_type}");
    let missing = output(&shown[1])["error"].as_str().unwrap().to_owned();
    assert!(missing.contains("tool \"balance\""), "{missing}");
    assert!(missing.contains("account"), "{missing}");
}

#[tokio::test]
async fn dynamic_tool_validates_input_and_output_schemas() {
    let t = DynamicTool::new(
        "echo",
        "echoes",
        json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
        |_ctx, input| async move { Ok(input) },
    )
    .with_output_schema(json!({"type": "object"}));
    let ok = t
        .call(ToolCall {
            input: json!({"n": 1}),
            context: ToolContext::new("echo"),
        })
        .await
        .unwrap();
    assert_eq!(ok, ToolOutcome::output(json!({"n": 1})));
    let bad = t
        .call(ToolCall {
            input: json!({"n": "x"}),
            context: ToolContext::new("echo"),
        })
        .await
        .unwrap();
    assert!(matches!(bad, ToolOutcome::Failed(m) if m.contains("/n")));
    assert!(t.check_output(&json!({})).is_ok());
    assert_eq!(t.check_output(&json!(3)).unwrap_err().status(), Status::InvalidArgument);
}

#[tokio::test]
async fn direct_call_with_resumed_context_delivers_resume_data() {
    let log = log();
    let t = transfer_tool(log.clone());
    let mut resumed = Map::new();
    resumed.insert("approved".into(), json!(true));
    resumed.insert("level".into(), json!(1));
    let out = t
        .call(ToolCall {
            input: json!({"to": "a", "amount": 1.0}),
            context: ToolContext::new("transfer").with_resumed(Some(resumed), None),
        })
        .await
        .unwrap();
    assert_eq!(out, ToolOutcome::output(json!({"id": "txn-a-1"})));
    assert_eq!(
        seen(&log)[0].resume,
        Some(Approval {
            approved: true,
            level: 1
        })
    );
}

#[tokio::test]
async fn attached_parts_become_the_response_content() {
    let chart = tool("chart", "draws a chart", |ctx: ToolContext, a: Account| async move {
        ctx.attach(Part::text(format!("chart of {}", a.account)));
        ctx.attach(Part::data(json!({"points": [1, 2]})));
        Ok("drawn".to_owned())
    });
    let plain = DynamicTool::new(
        "plain",
        "no attachments",
        json!({"type": "object"}),
        |ctx, _input| async move {
            ctx.attach(Part::text("dynamic extra"));
            Ok(json!(1))
        },
    );
    let m = model([
        calls(&[("chart", json!({"account": "a"})), ("plain", json!({}))]),
        ScriptedTurn::text("ok"),
    ]);
    let g = start(&m, vec![chart.into_tool(), plain.into_tool()], "go")
        .await
        .unwrap();
    let resps = responses(&g.messages[2]);
    let chart_resp = resps[0].as_tool_response().unwrap();
    assert_eq!(chart_resp.output, Some(json!("drawn")));
    assert_eq!(
        chart_resp.content,
        Some(vec![Part::text("chart of a"), Part::data(json!({"points": [1, 2]}))])
    );
    assert_eq!(
        resps[1].as_tool_response().unwrap().content,
        Some(vec![Part::text("dynamic extra")])
    );
    // The model sees them too.
    assert_eq!(last_request_responses(&m), resps);
}

#[tokio::test]
async fn parts_attached_before_a_soft_failure_are_dropped() {
    let t = tool(
        "half",
        "fails after attaching",
        |ctx: ToolContext, _a: Account| async move {
            ctx.attach(Part::text("draft"));
            Err::<String, _>(ctx.fail("gave up"))
        },
    );
    let m = model([calls(&[("half", json!({"account": "a"}))]), ScriptedTurn::text("ok")]);
    let g = start(&m, vec![t.into_tool()], "go").await.unwrap();
    let resp = responses(&g.messages[2])[0].as_tool_response().unwrap().clone();
    assert_eq!(resp.output, Some(json!({"error": "gave up"})));
    assert_eq!(resp.content, None);
}

/// Typed tools go into `tools(..)` as they are (no `.into_tool()`), for an
/// agent and for a generation, and so do `Arc<dyn Tool>`s and `Arc<T>`s.
#[tokio::test]
async fn typed_tools_are_taken_as_they_are() {
    use holdpoint::agent::Agent;
    use holdpoint::generate::{GenerateOptions, generate};

    let count = Arc::new(AtomicUsize::new(0));
    let m = model([calls(&[("balance", json!({"account": "a"}))]), ScriptedTurn::text("ok")]);
    let agent = Agent::builder("a")
        .model(Arc::new(m.clone()))
        .tools([balance_tool(Arc::clone(&count))])
        .tools([Arc::new(DynamicTool::new(
            "echo",
            "Echoes",
            json!({"type": "object"}),
            |_ctx, v| async move { Ok(v) },
        ))])
        .build()
        .unwrap();
    assert_eq!(agent.run_text("balance?").await.unwrap().text(), "ok");
    assert_eq!(count.load(Ordering::SeqCst), 1);

    let m = model([
        calls(&[("balance", json!({"account": "b"}))]),
        ScriptedTurn::text("done"),
    ]);
    let g = generate(
        GenerateOptions::new(Arc::new(m))
            .tools([balance_tool(Arc::clone(&count))])
            .messages(vec![holdpoint::Message::user_text("go")]),
    )
    .await
    .unwrap();
    assert_eq!(g.response.text(), "done");
    assert_eq!(count.load(Ordering::SeqCst), 2);
}
