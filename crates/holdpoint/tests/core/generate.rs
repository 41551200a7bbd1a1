//! The generate loop: turns, limits, refs, ordering, streaming and the
//! scripted model.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use holdpoint::generate::{DEFAULT_MAX_TURNS, INTERRUPTED_MESSAGE};
use holdpoint::message::metadata;
use holdpoint::tool::ToolContext;
use holdpoint::{
    Error, FinishReason, GenerateChunk, GenerateOptions, GenerateRequest, Message, Model, Part, Role, ScriptedModel,
    ScriptedTurn, Status, generate, tool,
};
use serde_json::{Value, json};

use crate::support::*;

#[tokio::test]
async fn text_only_generation_stops_after_one_model_call() {
    let m = model([ScriptedTurn::text("hello")]);
    let g = start(&m, vec![], "hi").await.unwrap();
    assert_eq!(g.response.text(), "hello");
    assert_eq!(g.response.finish_reason, Some(FinishReason::Stop));
    assert!(!g.is_interrupted());
    assert_eq!(g.messages.len(), 2);
    assert_eq!(g.messages[0], Message::user_text("hi"));
    assert_eq!(g.messages[1].role, Role::Model);
    assert_eq!(g.response.request.as_ref().unwrap(), &m.requests()[0]);
}

#[tokio::test]
async fn tool_round_appends_model_and_tool_messages_then_calls_the_model_again() {
    let count = Arc::new(AtomicUsize::new(0));
    let m = model([
        calls(&[("balance", json!({"account": "chk"}))]),
        ScriptedTurn::text("you have $100"),
    ]);
    let g = start(&m, vec![balance_tool(count.clone()).into_tool()], "balance?")
        .await
        .unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 1);
    let roles: Vec<Role> = g.messages.iter().map(|m| m.role).collect();
    assert_eq!(roles, [Role::User, Role::Model, Role::Tool, Role::Model]);
    let resp = &responses(&g.messages[2])[0];
    assert_eq!(output(resp), json!("chk: $100"));
    assert_eq!(reference(resp), reference(&requests(&g.messages[1])[0]));
    assert_eq!(g.response.text(), "you have $100");
    assert_eq!(m.requests().len(), 2);
    // The second request carries the whole history so far.
    assert_eq!(m.requests()[1].messages, g.messages[..3].to_vec());
}

#[tokio::test]
async fn model_request_carries_system_prompt_tools_and_config() {
    let m = model([ScriptedTurn::text("ok")]);
    let mut opts = options(
        &m,
        vec![
            balance_tool(Arc::default()).into_tool(),
            transfer_tool(log()).into_tool(),
        ],
        vec![Message::user_text("hi")],
    )
    .config(json!({"temperature": 0.1}));
    opts.system = Some(Message::new(Role::System, vec![Part::text("be brief")]));
    let g = generate(opts).await.unwrap();
    let req = &m.requests()[0];
    assert_eq!(req.messages[0].role, Role::System);
    assert_eq!(req.messages[1], Message::user_text("hi"));
    let names: Vec<&str> = req.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["balance", "transfer"]);
    assert!(req.tools[0].input_schema.is_some());
    assert_eq!(req.config, Some(json!({"temperature": 0.1})));
    // The system prompt is not part of the history.
    assert!(g.messages.iter().all(|m| m.role != Role::System));
}

fn always_calls_balance() -> ScriptedModel {
    ScriptedModel::from_fn("loop", |_req, _i| Some(calls(&[("balance", json!({"account": "a"}))])))
}

#[tokio::test]
async fn exceeding_max_turns_fails_with_the_limit() {
    let m = always_calls_balance();
    let count = Arc::new(AtomicUsize::new(0));
    let opts = options(
        &m,
        vec![balance_tool(count.clone()).into_tool()],
        vec![Message::user_text("go")],
    )
    .max_turns(2);
    let err = generate(opts).await.unwrap_err();
    assert!(matches!(err, Error::MaxTurnsExceeded(2)));
    assert_eq!(err.to_string(), "exceeded maximum tool call iterations (2)");
    assert_eq!(count.load(Ordering::SeqCst), 2);
    assert_eq!(m.requests().len(), 3);
}

#[tokio::test]
async fn default_max_turns_is_five() {
    assert_eq!(DEFAULT_MAX_TURNS, 5);
    let m = always_calls_balance();
    let count = Arc::new(AtomicUsize::new(0));
    let err = start(&m, vec![balance_tool(count.clone()).into_tool()], "go")
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "exceeded maximum tool call iterations (5)");
    assert_eq!(count.load(Ordering::SeqCst), 5);
}

#[tokio::test]
async fn max_turns_allows_exactly_that_many_tool_rounds() {
    let count = Arc::new(AtomicUsize::new(0));
    let m = model([
        calls(&[("balance", json!({"account": "a"}))]),
        calls(&[("balance", json!({"account": "b"}))]),
        ScriptedTurn::text("done"),
    ]);
    let opts = options(
        &m,
        vec![balance_tool(count.clone()).into_tool()],
        vec![Message::user_text("go")],
    )
    .max_turns(2);
    let g = generate(opts).await.unwrap();
    assert_eq!(g.response.text(), "done");
    assert_eq!(count.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn missing_tool_fails_the_generation_without_running_siblings() {
    let count = Arc::new(AtomicUsize::new(0));
    let m = model([calls(&[("balance", json!({"account": "a"})), ("nope", json!({}))])]);
    let err = start(&m, vec![balance_tool(count.clone()).into_tool()], "go")
        .await
        .unwrap_err();
    assert!(matches!(&err, Error::ToolNotFound(n) if n == "nope"));
    assert_eq!(err.status(), Status::NotFound);
    assert_eq!(err.to_string(), "tool \"nope\" not found");
    assert_eq!(
        count.load(Ordering::SeqCst),
        0,
        "a sibling ran before the missing tool was noticed"
    );
}

#[tokio::test]
async fn refs_are_assigned_to_requests_lacking_one_and_unique_in_the_message() {
    let count = Arc::new(AtomicUsize::new(0));
    let input = json!({"account": "a"});
    let m = model([
        turn(vec![
            Part::text("calling"),
            Part::tool_request("balance", None, Some(input.clone())),
            Part::tool_request("balance", Some("given".into()), Some(input.clone())),
            Part::tool_request("balance", None, Some(input.clone())),
            Part::tool_request("balance", None, Some(input)),
        ]),
        ScriptedTurn::text("done"),
    ]);
    let g = start(&m, vec![balance_tool(count).into_tool()], "go").await.unwrap();
    let refs: Vec<String> = requests(&g.messages[1]).iter().map(reference).collect();
    assert_eq!(refs.len(), 4);
    assert_eq!(refs[1], "given");
    let mut unique = refs.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 4, "{refs:?}");
    // The responses answer the same refs, in order.
    let resp_refs: Vec<String> = responses(&g.messages[2]).iter().map(reference).collect();
    assert_eq!(resp_refs, refs);
    // The model sees its message with the refs filled in.
    assert_eq!(m.requests()[1].messages[1], g.messages[1]);
}

#[tokio::test(start_paused = true)]
async fn responses_follow_request_order_when_the_first_tool_finishes_last() {
    let finished: Arc<Mutex<Vec<String>>> = Arc::default();
    let f = Arc::clone(&finished);
    let sleepy = tool("sleepy", "sleeps", move |_ctx: ToolContext, a: Account| {
        let f = Arc::clone(&f);
        async move {
            let ms = if a.account == "slow" { 300 } else { 10 };
            tokio::time::sleep(Duration::from_millis(ms)).await;
            f.lock().unwrap().push(a.account.clone());
            Ok(a.account)
        }
    });
    let m = model([
        calls(&[
            ("sleepy", json!({"account": "slow"})),
            ("sleepy", json!({"account": "medium"})),
            ("sleepy", json!({"account": "fast"})),
        ]),
        ScriptedTurn::text("done"),
    ]);
    let started = tokio::time::Instant::now();
    let g = start(&m, vec![sleepy.into_tool()], "go").await.unwrap();
    // All three ran concurrently: the round took as long as the slowest call.
    assert!(
        started.elapsed() < Duration::from_millis(400),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(finished.lock().unwrap().first().map(String::as_str), Some("medium"));
    assert_eq!(finished.lock().unwrap().last().map(String::as_str), Some("slow"));
    let outs: Vec<Value> = responses(&g.messages[2]).iter().map(output).collect();
    assert_eq!(outs, [json!("slow"), json!("medium"), json!("fast")]);
}

#[tokio::test]
async fn streams_model_chunks_then_tool_chunk_then_next_model_chunks_in_order() {
    let count = Arc::new(AtomicUsize::new(0));
    let m = model([
        calls(&[("balance", json!({"account": "a"}))]).with_chunks(vec![GenerateChunk {
            index: None,
            role: None,
            content: vec![Part::text("checking")],
            custom: None,
        }]),
        ScriptedTurn::text("you have $100").with_chunks(vec![
            GenerateChunk::new(Role::Model, vec![Part::text("you have ")]),
            GenerateChunk::new(Role::Model, vec![Part::text("$100")]),
        ]),
    ]);
    let (sink, chunks) = collector();
    let opts = options(
        &m,
        vec![balance_tool(count).into_tool()],
        vec![Message::user_text("go")],
    )
    .chunks(sink);
    let g = generate(opts).await.unwrap();
    let chunks = chunks.lock().unwrap().clone();
    let shape: Vec<(Option<Role>, Option<u32>)> = chunks.iter().map(|c| (c.role, c.index)).collect();
    assert_eq!(
        shape,
        [
            (Some(Role::Model), Some(0)),
            (Some(Role::Tool), Some(1)),
            (Some(Role::Model), Some(2)),
            (Some(Role::Model), Some(2)),
        ]
    );
    assert_eq!(chunks[0].text(), "checking");
    assert_eq!(chunks[1].content, g.messages[2].content);
    let streamed: String = chunks[2..].iter().map(GenerateChunk::text).collect();
    assert_eq!(streamed, g.response.text());
}

#[tokio::test]
async fn partial_tool_results_stream_marked_partial_and_never_enter_history() {
    let t = tool(
        "progress",
        "reports progress",
        |ctx: ToolContext, a: Account| async move {
            ctx.send_partial(json!({"progress": 50}));
            ctx.send_partial(json!({"progress": 90}));
            Ok(a.account)
        },
    );
    let m = model([
        calls(&[("progress", json!({"account": "a"}))]),
        ScriptedTurn::text("done"),
    ]);
    let (sink, chunks) = collector();
    let g = generate(options(&m, vec![t.into_tool()], vec![Message::user_text("go")]).chunks(sink))
        .await
        .unwrap();
    let chunks = chunks.lock().unwrap().clone();
    let tool_chunks: Vec<&GenerateChunk> = chunks.iter().filter(|c| c.role == Some(Role::Tool)).collect();
    assert_eq!(tool_chunks.len(), 3);
    let call_ref = reference(&requests(&g.messages[1])[0]);
    for (chunk, progress) in tool_chunks[..2].iter().zip([50, 90]) {
        let part = &chunk.content[0];
        assert_eq!(part.meta(metadata::PARTIAL), Some(&json!(true)));
        assert_eq!(output(part), json!({"progress": progress}));
        assert_eq!(reference(part), call_ref);
        assert_eq!(chunk.index, Some(1));
    }
    // The final tool chunk is the real response, not partial.
    assert!(tool_chunks[2].content[0].meta(metadata::PARTIAL).is_none());
    let partial_in_history = g
        .messages
        .iter()
        .flat_map(|m| &m.content)
        .any(|p| p.meta(metadata::PARTIAL).is_some());
    assert!(!partial_in_history);
    assert!(
        m.requests()
            .iter()
            .flat_map(|r| &r.messages)
            .flat_map(|m| &m.content)
            .all(|p| p.meta(metadata::PARTIAL).is_none())
    );
}

#[tokio::test]
async fn interrupted_generation_reports_interrupted_and_does_not_call_the_model_again() {
    let m = model([
        calls(&[("transfer", json!({"to": "bob", "amount": 5.0}))]),
        ScriptedTurn::text("unused"),
    ]);
    let g = start(&m, vec![transfer_tool(log()).into_tool()], "pay").await.unwrap();
    assert!(g.is_interrupted());
    assert_eq!(g.response.finish_reason, Some(FinishReason::Interrupted));
    assert_eq!(g.response.finish_message.as_deref(), Some(INTERRUPTED_MESSAGE));
    assert_eq!(INTERRUPTED_MESSAGE, "One or more tool calls resulted in interrupts.");
    assert_eq!(m.requests().len(), 1);
    assert_eq!(m.remaining(), 1);
    // The history ends with the paused model message; no tool message yet.
    assert_eq!(g.messages.last().unwrap().role, Role::Model);
    assert_eq!(g.response.message.as_ref(), g.messages.last());
    assert_eq!(g.response.interrupts().len(), 1);
}

#[tokio::test]
async fn scripted_model_records_requests_and_fails_clearly_when_out_of_responses() {
    let m = model([ScriptedTurn::text("one")]);
    let first = start(&m, vec![], "a").await.unwrap();
    assert_eq!(first.response.text(), "one");
    let err = start(&m, vec![], "b").await.unwrap_err();
    assert_eq!(err.status(), Status::FailedPrecondition);
    let msg = err.to_string();
    assert!(
        msg.contains("scripted model \"scripted\" has no response left for call 2"),
        "{msg}"
    );
    assert!(msg.contains("given 1"), "{msg}");
    // Both requests were recorded, including the failed one.
    let reqs = m.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[1].messages, vec![Message::user_text("b")]);
}

#[tokio::test]
async fn scripted_model_running_out_mid_loop_fails_the_generation() {
    let count = Arc::new(AtomicUsize::new(0));
    let m = model([calls(&[("balance", json!({"account": "a"}))])]);
    let err = start(&m, vec![balance_tool(count.clone()).into_tool()], "go")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no response left for call 2"), "{err}");
    assert_eq!(count.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn scripted_model_error_turn_fails_with_its_status() {
    let m = ScriptedModel::new("m");
    m.push(ScriptedTurn {
        chunks: vec![],
        response: Err(holdpoint::ErrorBody {
            status: Status::Unavailable,
            message: "provider down".into(),
        }),
        chunk_delay: std::time::Duration::ZERO,
    });
    let err = start(&m, vec![], "a").await.unwrap_err();
    assert_eq!(err.status(), Status::Unavailable);
    assert_eq!(err.to_string(), "provider down");
}

#[tokio::test]
async fn scripted_model_from_fn_sees_the_request_and_call_index() {
    let m = ScriptedModel::from_fn("fn", |req: &GenerateRequest, i| {
        Some(ScriptedTurn::text(format!(
            "call {i}: {}",
            req.messages.last().unwrap().text()
        )))
    });
    let r = m
        .generate(GenerateRequest::new(vec![Message::user_text("x")]), Default::default())
        .await
        .unwrap();
    assert_eq!(r.text(), "call 0: x");
    let r = m
        .generate(GenerateRequest::new(vec![Message::user_text("y")]), Default::default())
        .await
        .unwrap();
    assert_eq!(r.text(), "call 1: y");
}

#[tokio::test]
async fn scripted_model_reset_replaces_the_queue_and_forgets_requests() {
    let m = model([ScriptedTurn::text("old")]);
    start(&m, vec![], "a").await.unwrap();
    m.reset([ScriptedTurn::text("new1"), ScriptedTurn::text("new2")]);
    assert!(m.requests().is_empty());
    assert_eq!(m.remaining(), 2);
    assert_eq!(start(&m, vec![], "b").await.unwrap().response.text(), "new1");
}

#[tokio::test]
async fn model_message_role_is_forced_to_model() {
    let m = model([holdpoint::ScriptedTurn::response(
        holdpoint::GenerateResponse::from_message(Message::new(Role::User, vec![Part::text("sneaky")])),
    )]);
    let g = start(&m, vec![], "a").await.unwrap();
    assert_eq!(g.messages[1].role, Role::Model);
}

#[tokio::test]
async fn model_response_without_message_fails_clearly() {
    let mut empty = holdpoint::GenerateResponse::from_message(Message::model_text("x"));
    empty.message = None;
    let m = model([ScriptedTurn::response(empty)]);
    let err = start(&m, vec![], "a").await.unwrap_err();
    assert!(err.to_string().contains("returned no message"), "{err}");
}

#[tokio::test]
async fn usage_is_summed_over_model_calls() {
    let mut first = calls(&[("balance", json!({"account": "a"}))]);
    if let Ok(r) = &mut first.response {
        r.usage.input_tokens = Some(10);
    }
    let mut second = ScriptedTurn::text("done");
    if let Ok(r) = &mut second.response {
        r.usage.input_tokens = Some(5);
        r.usage.output_tokens = Some(2);
    }
    let m = model([first, second]);
    let g = start(&m, vec![balance_tool(Arc::default()).into_tool()], "go")
        .await
        .unwrap();
    assert_eq!(g.response.usage.input_tokens, Some(15));
    assert_eq!(g.response.usage.output_tokens, Some(2));
}

#[tokio::test]
async fn request_context_is_visible_to_tools() {
    let seen: Arc<Mutex<Option<Value>>> = Arc::default();
    let s = Arc::clone(&seen);
    let t = tool("whoami", "who", move |ctx: ToolContext, _a: Account| {
        let s = Arc::clone(&s);
        async move {
            *s.lock().unwrap() = ctx.request_context().get("principal").cloned();
            Ok(ctx.reference().unwrap_or_default().to_owned())
        }
    });
    let m = model([calls(&[("whoami", json!({"account": "a"}))]), ScriptedTurn::text("ok")]);
    let mut opts: GenerateOptions = options(&m, vec![t.into_tool()], vec![Message::user_text("go")]);
    let mut ctx = serde_json::Map::new();
    ctx.insert("principal".into(), json!("alice"));
    opts.context = Arc::new(ctx);
    let g = generate(opts).await.unwrap();
    assert_eq!(*seen.lock().unwrap(), Some(json!("alice")));
    // The tool saw its own ref.
    let r = reference(&requests(&g.messages[1])[0]);
    assert_eq!(output(&responses(&g.messages[2])[0]), json!(r));
}
