//! Resume: the typed round trip, restart/respond directives, pending
//! outputs, re-pauses and validation of directives against the history.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use holdpoint::generate::validate_resume;
use holdpoint::message::metadata;
use holdpoint::tool::{Tool, ToolContext};
use holdpoint::{Error, FinishReason, Message, Part, ResumableTool, Resume, Role, ScriptedTurn, Status, generate};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::scenario::{Scenario, outputs};
use crate::support::*;

#[tokio::test]
async fn typed_round_trip_pauses_claims_and_restart_delivers_resume_data() {
    let (s, transfer, log) = pay_bob("sent");
    let paused = s.pause().await;
    let call = paused.claim(&transfer, 0);
    assert_eq!(call.input, transfer_of(5.0, "bob"));
    assert_eq!(call.interrupt_as::<Ask>().unwrap().details, "send 5 to bob");

    let done = paused.restart(call.restart(Some(approval(3)))).resume().await;
    assert_eq!(done.response.finish_reason, Some(FinishReason::Stop));
    assert_eq!(done.response.text(), "sent");
    let calls = seen(&log);
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].resume, None);
    assert_eq!(calls[1].resume, Some(approval(3)));
    assert_eq!(calls[1].original_input, None);

    // History: the request is resolved, a resumed tool message follows.
    let roles: Vec<Role> = done.messages.iter().map(|m| m.role).collect();
    assert_eq!(roles, [Role::User, Role::Model, Role::Tool, Role::Model]);
    let req = &requests(&done.messages[1])[0];
    assert!(!req.is_interrupt());
    assert_eq!(
        req.meta(metadata::RESOLVED_INTERRUPT),
        Some(&json!({"details": "send 5 to bob"}))
    );
    assert!(transfer.interrupted(req).is_none());
    let tool_msg = &done.messages[2];
    assert_eq!(tool_msg.metadata.as_ref().unwrap().get("resumed"), Some(&json!(true)));
    let resp = &responses(tool_msg)[0];
    assert_eq!(output(resp), json!({"id": "txn-bob-5"}));
    assert_eq!(reference(resp), reference(req));
    // The model saw the result.
    assert_eq!(last_request_responses(&s.model), vec![resp.clone()]);
}

#[tokio::test]
async fn bare_restart_delivers_default_resume() {
    let (s, transfer, log) = pay_bob("denied, sorry");
    let paused = s.pause().await;
    let done = paused.restart(paused.claim(&transfer, 0).restart(None)).resume().await;
    // `Approval::default()` has level 7: only `Res::default()` gives that.
    assert_eq!(seen(&log)[1].resume, Some(Approval::default()));
    assert_eq!(seen(&log)[1].resume.as_ref().unwrap().level, 7);
    // Not approved: the tool failed softly and the model was told.
    assert_eq!(outputs(&done)[0], json!({"error": "denied"}));
    assert_eq!(done.response.text(), "denied, sorry");
}

#[tokio::test]
async fn bare_restart_of_a_typed_tool_gives_an_empty_resume_map() {
    type Seen = std::sync::Mutex<Vec<Option<serde_json::Map<String, Value>>>>;
    let got: Arc<Seen> = Arc::default();
    let g2 = Arc::clone(&got);
    let confirm = holdpoint::tool("confirm", "confirms", move |ctx: ToolContext, a: Account| {
        let g2 = Arc::clone(&g2);
        async move {
            g2.lock().unwrap().push(ctx.resumed().cloned());
            if ctx.is_resumed() {
                Ok(a.account)
            } else {
                Err(ctx.interrupt(json!({"q": "sure?"})))
            }
        }
    });
    let s =
        Scenario::new([calls(&[("confirm", json!({"account": "a"}))]), ScriptedTurn::text("ok")]).tool(confirm.clone());
    let paused = s.pause().await;
    paused.restart(paused.claim(&confirm, 0).restart(None)).resume().await;
    assert_eq!(*got.lock().unwrap(), vec![None, Some(serde_json::Map::new())]);
}

#[tokio::test]
async fn restart_with_input_runs_new_input_and_exposes_the_original() {
    let (s, transfer, log) = pay_bob("sent less");
    let paused = s.pause().await;
    let smaller = transfer_of(2.0, "bob");
    let revised = paused
        .claim(&transfer, 0)
        .restart_with_input(smaller.clone(), Some(approval(3)));
    let done = paused.restart(revised).resume().await;
    let calls = seen(&log);
    assert_eq!(calls[1].input, smaller);
    assert_eq!(calls[1].original_input, Some(BOB()));
    assert_eq!(calls[1].resume, Some(approval(3)));
    // The history records the change.
    let req = &requests(&done.messages[1])[0];
    assert_eq!(
        req.as_tool_request().unwrap().input,
        Some(json!({"to": "bob", "amount": 2.0}))
    );
    assert_eq!(req.meta(metadata::REPLACED_INPUT), Some(&BOB()));
    assert!(req.meta(metadata::RESOLVED_INTERRUPT).is_some());
    assert_eq!(outputs(&done)[0], json!({"id": "txn-bob-2"}));
}

#[tokio::test]
async fn respond_answers_without_running_the_tool() {
    let (s, transfer, log) = pay_bob("ok");
    let paused = s.pause().await;
    let answer = paused.claim(&transfer, 0).respond(Receipt { id: "manual".into() });
    let done = paused.respond(answer).resume().await;
    assert_eq!(seen(&log).len(), 1, "respond must not re-run the tool");
    let resp = &responses(&done.messages[2])[0];
    assert_eq!(output(resp), json!({"id": "manual"}));
    assert_eq!(resp.meta(metadata::INTERRUPT_RESPONSE), Some(&json!(true)));
    assert!(
        requests(&done.messages[1])[0]
            .meta(metadata::RESOLVED_INTERRUPT)
            .is_some()
    );
    assert_eq!(done.response.text(), "ok");
}

#[tokio::test]
async fn respond_with_bad_output_is_rejected_at_resume_time() {
    let (s, _, _) = pay_bob("unused");
    let err = s.pause().await.respond_with(0, json!({"id": 42})).resume_fails().await;
    assert_eq!(err.status(), Status::InvalidArgument);
    let msg = err.to_string();
    assert!(msg.contains("output for tool \"transfer\""), "{msg}");
    assert!(msg.contains("/id"), "{msg}");
    assert_eq!(s.model.requests().len(), 1, "the model must not be called");
}

#[tokio::test]
async fn non_object_resume_data_in_a_directive_is_rejected() {
    let (s, _, log) = pay_bob("unused");
    let paused = s.pause().await;
    let mut directive = paused.hold(0).restart(None).unwrap();
    directive.set_meta(metadata::RESUMED, json!(5));
    let err = paused.restart(directive.clone()).resume_fails().await;
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(err.to_string().contains("\"resumed\" must be a JSON object"), "{err}");
    assert_eq!(seen(&log).len(), 1);
    // And it cannot come in over the wire either.
    let text = serde_json::to_string(&directive).unwrap();
    assert!(Part::from_json(&text).is_err());
}

#[tokio::test]
async fn undecodable_resume_fails_the_call_with_a_clear_error() {
    let (s, _, log) = pay_bob("unused");
    let paused = s.pause().await;
    let err = paused
        .restart_with(0, json!({"approved": "yes please"}))
        .resume_fails()
        .await;
    assert_eq!(err.status(), Status::InvalidArgument);
    let msg = err.to_string();
    assert!(msg.contains("tool \"transfer\""), "{msg}");
    assert!(msg.contains("resume data does not decode"), "{msg}");
    assert_eq!(
        seen(&log).len(),
        1,
        "the tool must not run with undecodable resume data"
    );
}

#[tokio::test]
async fn undecodable_resume_fails_before_any_sibling_restart_runs() {
    let (s, transfer, log) = pay_ann_and_bob("unused");
    let paused = s.pause().await;
    let err = paused
        .restart(paused.claim(&transfer, 0).restart(Some(approval(3))))
        .restart_with(1, json!({"level": "high"}))
        .resume_fails()
        .await;
    assert!(err.to_string().contains("resume data does not decode"), "{err}");
    // The approved transfer must not have run: the resume failed as a whole.
    assert_eq!(
        seen(&log).len(),
        2,
        "a sibling restart ran before the bad resume data was noticed"
    );
}

#[tokio::test]
async fn mixed_restart_and_respond_in_one_resume() {
    let (s, transfer, log) = pay_ann_and_bob("both handled");
    let paused = s.pause().await;
    let holds = paused.holds();
    assert_eq!(holds.len(), 2);
    let ann = paused.claim(&transfer, 0);
    let bob = paused.claim(&transfer, 1);
    assert_eq!(ann.input.to, "ann");
    let done = paused
        .restart(ann.restart(Some(approval(3))))
        .respond(bob.respond(Receipt { id: "by-hand".into() }))
        .resume()
        .await;
    let runs = seen(&log);
    assert_eq!(runs.len(), 3, "two first calls and one restart");
    assert_eq!(runs[2].input.to, "ann");
    let resps = responses(&done.messages[2]);
    assert_eq!(resps.len(), 2);
    assert_eq!(output(&resps[0]), json!({"id": "txn-ann-1"}));
    assert!(resps[0].meta(metadata::INTERRUPT_RESPONSE).is_none());
    assert_eq!(output(&resps[1]), json!({"id": "by-hand"}));
    assert_eq!(resps[1].meta(metadata::INTERRUPT_RESPONSE), Some(&json!(true)));
    assert_eq!(reference(&resps[0]), reference(&holds[0]));
    assert_eq!(reference(&resps[1]), reference(&holds[1]));
    assert!(
        requests(&done.messages[1])
            .iter()
            .all(|p| !p.is_interrupt() && p.meta(metadata::RESOLVED_INTERRUPT).is_some())
    );
}

/// The model calls `sibling` for `account` and pays bob 5 in one turn,
/// then says "done".
fn beside_bob(sibling: impl Tool + 'static, account: &str) -> (Scenario, TransferTool, Log) {
    let name = sibling.definition().name.clone();
    let (s, transfer, log) = pay(
        calls(&[(&name, json!({"account": account})), ("transfer", BOB())]),
        "done",
    );
    (s.tool(sibling), transfer, log)
}

#[tokio::test]
async fn finished_sibling_is_stored_as_pending_output_and_replayed_not_rerun() {
    let count = Arc::new(AtomicUsize::new(0));
    let (s, transfer, _) = beside_bob(balance_tool(count.clone()), "chk");
    let paused = s.pause().await;
    assert_eq!(count.load(Ordering::SeqCst), 1);
    let reqs = paused.requests();
    assert_eq!(reqs[0].meta(metadata::PENDING_OUTPUT), Some(&json!("chk: $100")));
    assert!(!reqs[0].is_interrupt());
    assert!(reqs[1].is_interrupt());
    assert!(reqs[1].meta(metadata::PENDING_OUTPUT).is_none());

    let call = transfer.interrupted(&reqs[1]).unwrap();
    let done = paused.restart(call.restart(Some(approval(3)))).resume().await;
    assert_eq!(count.load(Ordering::SeqCst), 1, "the finished sibling ran twice");
    let resps = responses(&done.messages[2]);
    assert_eq!(output(&resps[0]), json!("chk: $100"));
    assert_eq!(resps[0].meta(metadata::SOURCE), Some(&json!("pending")));
    assert_eq!(reference(&resps[0]), reference(&reqs[0]));
    assert!(resps[1].meta(metadata::SOURCE).is_none());
    assert_eq!(output(&resps[1]), json!({"id": "txn-bob-5"}));
    // pendingOutput is consumed once replayed.
    assert!(requests(&done.messages[1])[0].meta(metadata::PENDING_OUTPUT).is_none());
}

#[tokio::test]
async fn soft_failure_beside_a_pause_is_kept_as_pending_output() {
    let flaky = holdpoint::tool("flaky", "fails", |ctx: ToolContext, _a: Account| async move {
        Err::<String, _>(ctx.fail("locked"))
    });
    let (s, transfer, _) = beside_bob(flaky, "a");
    let paused = s.pause().await;
    let reqs = paused.requests();
    assert_eq!(
        reqs[0].meta(metadata::PENDING_OUTPUT),
        Some(&json!({"error": "locked"}))
    );
    let call = transfer.interrupted(&reqs[1]).unwrap();
    let done = paused.restart(call.restart(Some(approval(3)))).resume().await;
    assert_eq!(outputs(&done)[0], json!({"error": "locked"}));
}

#[tokio::test]
async fn unanswered_interrupt_is_rejected() {
    let (s, transfer, log) = pay_ann_and_bob("unused");
    let paused = s.pause().await;
    let only_ann = paused.claim(&transfer, 0).restart(Some(approval(3)));
    let err = paused.restart(only_ann).resume_fails().await;
    match &err {
        Error::UnresolvedToolRequest { name, reference: r } => {
            assert_eq!(name, "transfer");
            assert_eq!(r, &reference(&paused.hold(1)));
        }
        other => panic!("expected UnresolvedToolRequest, got {other:?}"),
    }
    assert!(err.to_string().contains("every interrupt must be answered"), "{err}");
    assert_eq!(seen(&log).len(), 2, "no tool may run when a resume is incomplete");
    // An empty resume is rejected too.
    let err = paused.decide().resume_fails().await;
    assert!(matches!(err, Error::UnresolvedToolRequest { .. }), "{err:?}");
    assert_eq!(s.model.requests().len(), 1);
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
struct Step {
    step: u32,
}

/// `wizard`: pauses on the first call and again on step 1; finishes on step 2.
fn wizard(count: Arc<AtomicUsize>) -> ResumableTool<Account, String, Step> {
    ResumableTool::define(
        "wizard",
        "multi-step",
        move |ctx: ToolContext, a: Account, res: Option<Step>| {
            let count = Arc::clone(&count);
            async move {
                count.fetch_add(1, Ordering::SeqCst);
                match res {
                    None => Err(ctx.interrupt(json!({"ask": "step 1"}))),
                    Some(Step { step: 1 }) => Err(ctx.interrupt(json!({"ask": "step 2"}))),
                    Some(s) => Ok(format!("{} finished at {}", a.account, s.step)),
                }
            }
        },
    )
    .unwrap()
}

#[tokio::test]
async fn restarted_call_that_pauses_again_returns_a_normal_interrupted_result() {
    let runs = Arc::new(AtomicUsize::new(0));
    let count = Arc::new(AtomicUsize::new(0));
    let w = wizard(runs.clone());
    let s = Scenario::new([
        calls(&[
            ("wizard", json!({"account": "a"})),
            ("balance", json!({"account": "b"})),
        ]),
        ScriptedTurn::text("all done"),
    ])
    .tool(w.clone())
    .tool(balance_tool(count.clone()));
    let mut g = s.run().await.unwrap();
    let mut answers = vec![Step { step: 1 }, Step { step: 2 }].into_iter();
    let mut rounds = 0;
    let mut asks = Vec::new();
    // Callers loop until the finish reason is no longer `interrupted`.
    while g.is_interrupted() {
        rounds += 1;
        let paused = s.paused(g);
        assert_eq!(
            paused.response.finish_message.as_deref(),
            Some(holdpoint::generate::INTERRUPTED_MESSAGE)
        );
        let holds = paused.holds();
        assert_eq!(holds.len(), 1);
        asks.push(holds[0].interrupt_as::<Value>().unwrap());
        // The finished sibling stays pending across re-pauses.
        let sibling = &paused.requests()[1];
        assert_eq!(sibling.meta(metadata::PENDING_OUTPUT), Some(&json!("b: $100")));
        let call = w.interrupted(&holds[0]).expect("re-paused call must be claimable");
        g = paused.restart(call.restart(answers.next())).resume().await;
    }
    assert_eq!(rounds, 2);
    assert_eq!(asks, [json!({"ask": "step 1"}), json!({"ask": "step 2"})]);
    assert_eq!(runs.load(Ordering::SeqCst), 3);
    assert_eq!(count.load(Ordering::SeqCst), 1);
    assert_eq!(g.response.text(), "all done");
    // The model was called only twice: at the start and after the last resume.
    assert_eq!(s.model.requests().len(), 2);
    let resps = responses(&g.messages[2]);
    assert_eq!(output(&resps[0]), json!("a finished at 2"));
    assert_eq!(output(&resps[1]), json!("b: $100"));
    assert_eq!(resps[1].meta(metadata::SOURCE), Some(&json!("pending")));
    let req = &requests(&g.messages[1])[0];
    assert!(!req.is_interrupt());
    assert_eq!(req.meta(metadata::RESOLVED_INTERRUPT), Some(&json!({"ask": "step 2"})));
}

#[tokio::test]
async fn re_pause_keeps_a_responded_sibling_as_pending_output() {
    let runs = Arc::new(AtomicUsize::new(0));
    let w = wizard(runs.clone());
    let s = Scenario::new([
        calls(&[("wizard", json!({"account": "a"})), ("wizard", json!({"account": "b"}))]),
        ScriptedTurn::text("done"),
    ])
    .tool(w.clone());
    let paused = s.pause().await;
    let (a, b) = (paused.claim(&w, 0), paused.claim(&w, 1));
    let again = paused
        .restart(a.restart(Some(Step { step: 1 })))
        .respond(b.respond("b by hand".into()))
        .pause()
        .await;
    assert_eq!(again.response.finish_reason, Some(FinishReason::Interrupted));
    let reqs = again.requests();
    assert!(reqs[0].is_interrupt());
    assert!(!reqs[1].is_interrupt());
    assert_eq!(reqs[1].meta(metadata::PENDING_OUTPUT), Some(&json!("b by hand")));
    // Only the re-paused call needs an answer now.
    let a2 = w.interrupted(&reqs[0]).unwrap();
    let done = again.restart(a2.restart(Some(Step { step: 2 }))).resume().await;
    assert_eq!(outputs(&done), [json!("a finished at 2"), json!("b by hand")]);
    assert_eq!(runs.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn resume_streams_the_tool_message_before_the_next_model_call() {
    let (s, transfer, _) = pay_bob("sent");
    let paused = s.pause().await;
    let (sink, chunks) = collector();
    let done = paused
        .restart(paused.claim(&transfer, 0).restart(Some(approval(3))))
        .chunks(sink)
        .resume()
        .await;
    let chunks = chunks.lock().unwrap().clone();
    assert_eq!(chunks.len(), 1);
    assert_eq!(chunks[0].role, Some(Role::Tool));
    assert_eq!(chunks[0].content, done.messages[2].content);
}

// --- validation against the history -------------------------------------

fn paused_request(name: &str, r: &str, input: Value) -> Part {
    let mut p = Part::tool_request(name, Some(r.into()), Some(input));
    p.set_meta(metadata::INTERRUPT, json!({"details": "?"}));
    p
}

/// user, model(t#old resolved), tool, model(t#new paused)
fn two_turn_history() -> Vec<Message> {
    let mut old = Part::tool_request("transfer", Some("old".into()), Some(BOB()));
    old.set_meta(metadata::RESOLVED_INTERRUPT, json!(true));
    vec![
        Message::user_text("pay"),
        Message::new(Role::Model, vec![old]),
        Message::new(
            Role::Tool,
            vec![Part::tool_response(
                "transfer",
                Some("old".into()),
                Some(json!({"id": "1"})),
            )],
        ),
        Message::new(Role::Model, vec![paused_request("transfer", "new", BOB())]),
    ]
}

fn restart_of(name: &str, r: &str, input: Value) -> Part {
    paused_request(name, r, input).restart(None).unwrap()
}

/// A bare response `{"id": "x"}` to the transfer with ref `r`.
fn answer_to(r: &str) -> Part {
    Part::tool_response("transfer", Some(r.into()), Some(json!({"id": "x"})))
}

/// A resume with only restart directives.
fn restarting(restart: Vec<Part>) -> Resume {
    Resume {
        restart,
        respond: vec![],
        metadata: None,
    }
}

/// A resume with only respond directives.
fn responding(respond: Vec<Part>) -> Resume {
    Resume {
        restart: vec![],
        respond,
        metadata: None,
    }
}

/// Why `resume` does not fit the two-turn history.
fn rejection(resume: &Resume) -> Error {
    validate_resume(&two_turn_history(), resume).unwrap_err()
}

#[test]
fn validate_accepts_a_matching_restart_and_respond() {
    let h = two_turn_history();
    validate_resume(&h, &restarting(vec![restart_of("transfer", "new", BOB())])).unwrap();
    let answer = paused_request("transfer", "new", BOB())
        .respond(json!({"id": "x"}))
        .unwrap();
    validate_resume(&h, &responding(vec![answer])).unwrap();
}

#[test]
fn validate_rejects_an_unknown_ref() {
    for resume in [
        restarting(vec![restart_of("transfer", "ghost", BOB())]),
        responding(vec![answer_to("ghost")]),
        // Same ref, other name: matched by name AND ref.
        restarting(vec![restart_of("refund", "new", BOB())]),
    ] {
        let err = rejection(&resume);
        assert_eq!(err.status(), Status::InvalidArgument);
        assert!(err.to_string().contains("not found in session history"), "{err}");
    }
}

#[test]
fn validate_rejects_a_request_from_an_older_message() {
    let err = rejection(&restarting(vec![restart_of("transfer", "old", BOB())]));
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(err.to_string().contains("no longer pending"), "{err}");
    let err = rejection(&responding(vec![answer_to("old")]));
    assert!(err.to_string().contains("no longer pending"), "{err}");
}

#[test]
fn validate_rejects_modified_input_without_declaration() {
    let modified = restart_of("transfer", "new", json!({"to": "eve", "amount": 5.0}));
    let err = rejection(&restarting(vec![modified]));
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(err.to_string().contains("modified inputs"), "{err}");
}

#[test]
fn validate_accepts_a_declared_replaced_input() {
    let declared = paused_request("transfer", "new", BOB())
        .restart_with_input(json!({"to": "bob", "amount": 1.0}), None)
        .unwrap();
    validate_resume(&two_turn_history(), &restarting(vec![declared.clone()])).unwrap();
    // A declaration that lies about the original is rejected.
    let mut lying = declared;
    lying.set_meta(metadata::REPLACED_INPUT, json!({"to": "bob", "amount": 1.0}));
    let err = rejection(&restarting(vec![lying]));
    assert!(err.to_string().contains("replacedInput"), "{err}");
}

#[test]
fn validate_rejects_answering_a_call_twice_or_a_call_that_is_not_paused() {
    let twice = Resume {
        metadata: None,
        restart: vec![restart_of("transfer", "new", BOB())],
        respond: vec![
            paused_request("transfer", "new", BOB())
                .respond(json!({"id": "x"}))
                .unwrap(),
        ],
    };
    assert!(rejection(&twice).to_string().contains("answered twice"));
    let mut h2 = two_turn_history();
    let last = h2.last_mut().unwrap();
    last.content[0].remove_meta(metadata::INTERRUPT);
    last.content[0].set_meta(metadata::PENDING_OUTPUT, json!({"id": "done"}));
    let err = validate_resume(&h2, &restarting(vec![restart_of("transfer", "new", BOB())])).unwrap_err();
    assert!(err.to_string().contains("not waiting for an answer"), "{err}");
}

#[test]
fn validate_rejects_directives_of_the_wrong_kind() {
    let err = rejection(&restarting(vec![Part::text("restart please")]));
    assert!(err.to_string().contains("must be a toolRequest part"), "{err}");
    let err = rejection(&responding(vec![restart_of("transfer", "new", BOB())]));
    assert!(err.to_string().contains("must be a toolResponse part"), "{err}");
}

#[tokio::test]
async fn generate_validates_resume_against_the_history_before_running_anything() {
    let (s, _, log) = pay_bob("unused");
    let paused = s.pause().await;
    let hold = paused.hold(0);
    let mut tampered = hold.restart(Some(json!({"approved": true, "level": 1}))).unwrap();
    tampered.as_tool_request_mut().unwrap().input = Some(json!({"to": "eve", "amount": 5000.0}));
    let err = paused.restart(tampered).resume_fails().await;
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(err.to_string().contains("modified inputs"), "{err}");
    let ghost = restart_of("transfer", &format!("{}-ghost", reference(&hold)), BOB());
    let err = paused.restart(ghost).resume_fails().await;
    assert!(err.to_string().contains("not found in session history"), "{err}");
    assert_eq!(seen(&log).len(), 1);
    assert_eq!(s.model.requests().len(), 1);
}

#[tokio::test]
async fn resume_needs_the_history_to_end_with_the_paused_model_message() {
    let (s, transfer, log) = pay_bob("unused");
    let mut paused = s.pause().await;
    let directive = paused.claim(&transfer, 0).restart(Some(approval(3)));
    paused.messages.push(Message::user_text("and another thing"));
    let err = paused.restart(directive).resume_fails().await;
    assert_eq!(err.status(), Status::FailedPrecondition);
    assert!(
        err.to_string().contains("last message must be a model message"),
        "{err}"
    );
    assert_eq!(seen(&log).len(), 1);
}

#[tokio::test]
async fn resume_without_any_model_message_is_rejected() {
    let m = model([ScriptedTurn::text("unused")]);
    let opts = options(&m, vec![], vec![Message::user_text("hi")]).resume(restarting(vec![restart_of(
        "transfer",
        "x",
        BOB(),
    )]));
    let err = generate(opts).await.unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(err.to_string().contains("no model message"), "{err}");
}

#[tokio::test]
async fn genkit_style_directives_with_extra_or_missing_markers_are_accepted() {
    let (s, _, log) = pay_ann_and_bob("ok");
    let paused = s.pause().await;
    // A restart that still carries its `interrupt` key next to `resumed`.
    let mut restart = paused.hold(0);
    restart.set_meta(metadata::RESUMED, json!({"approved": true, "level": 1}));
    // A respond without `interruptResponse`.
    let respond = Part::tool_response(
        "transfer",
        Some(reference(&paused.hold(1))),
        Some(json!({"id": "hand"})),
    );
    let done = paused.restart(restart).respond(respond).resume().await;
    assert_eq!(seen(&log)[2].resume, Some(approval(1)));
    let resps = responses(&done.messages[2]);
    assert_eq!(output(&resps[0]), json!({"id": "txn-ann-1"}));
    assert_eq!(output(&resps[1]), json!({"id": "hand"}));
    assert_eq!(resps[1].meta(metadata::INTERRUPT_RESPONSE), Some(&json!(true)));
}

#[test]
fn resume_decodes_from_json_and_sorts_parts_by_kind() {
    let restart = restart_of("transfer", "new", BOB());
    let respond = Part::tool_response("transfer", Some("b".into()), Some(json!(1)));
    let r = Resume::from_parts([respond.clone(), restart.clone()]);
    assert_eq!(r.restart, vec![restart.clone()]);
    assert_eq!(r.respond, vec![respond]);
    let text = serde_json::to_string(&r).unwrap();
    assert_eq!(serde_json::from_str::<Resume>(&text).unwrap(), r);
    // Forward-compatible: an unknown key is dropped, a known one stays typed.
    assert_eq!(
        serde_json::from_str::<Resume>(r#"{"restart":[],"extra":1}"#).unwrap(),
        Resume::default()
    );
    assert!(serde_json::from_str::<Resume>(r#"{"restart":{}}"#).is_err());
    assert!(Resume::default().is_empty());
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
struct Options {
    #[serde(default)]
    verbose: bool,
}

#[tokio::test]
async fn request_without_input_is_claimed_and_restarted_like_an_empty_object() {
    let inputs: Arc<std::sync::Mutex<Vec<Options>>> = Arc::default();
    let i2 = Arc::clone(&inputs);
    let confirm = ResumableTool::<Options, String, Step>::define(
        "confirm",
        "asks first",
        move |ctx: ToolContext, o: Options, res: Option<Step>| {
            let i2 = Arc::clone(&i2);
            async move {
                i2.lock().unwrap().push(o);
                match res {
                    None => Err(ctx.interrupt(json!({"ask": "sure?"}))),
                    Some(_) => Ok("confirmed".to_owned()),
                }
            }
        },
    )
    .unwrap();
    // The model omits `input` altogether.
    let s = Scenario::new([
        turn(vec![Part::tool_request("confirm", None, None)]),
        ScriptedTurn::text("ok"),
    ])
    .tool(confirm.clone());
    let paused = s.pause().await;
    let call = confirm
        .interrupted(&paused.hold(0))
        .expect("a request without input must be claimable when {} decodes");
    assert_eq!(call.input, Options::default());
    let done = paused.restart(call.restart(None)).resume().await;
    assert_eq!(outputs(&done)[0], json!("confirmed"));
    assert_eq!(inputs.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn finished_sibling_with_a_null_output_is_replayed_on_resume() {
    let runs = Arc::new(AtomicUsize::new(0));
    let r2 = Arc::clone(&runs);
    let lookup = holdpoint::tool("lookup", "may find nothing", move |_ctx: ToolContext, _a: Account| {
        let r2 = Arc::clone(&r2);
        async move {
            r2.fetch_add(1, Ordering::SeqCst);
            Ok(None::<String>)
        }
    });
    let (s, transfer, _) = beside_bob(lookup, "a");
    let paused = s.pause().await;
    let reqs = paused.requests();
    assert_eq!(reqs[0].meta(metadata::PENDING_OUTPUT), Some(&Value::Null));
    // The null survives the wire.
    let wire: Vec<Message> = serde_json::from_str(&serde_json::to_string(&paused.messages).unwrap()).unwrap();
    assert_eq!(wire, paused.messages);
    let call = transfer.interrupted(&reqs[1]).unwrap();
    let done = paused.restart(call.restart(Some(approval(3)))).resume().await;
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let resps = responses(&done.messages[2]);
    assert_eq!(resps[0].as_tool_response().unwrap().output, Some(Value::Null));
    assert_eq!(resps[0].meta(metadata::SOURCE), Some(&json!("pending")));
}

#[tokio::test]
async fn revised_call_that_pauses_again_can_be_restarted_with_its_new_input() {
    let runs = Arc::new(AtomicUsize::new(0));
    let w = wizard(runs.clone());
    let s = Scenario::new([calls(&[("wizard", json!({"account": "a"}))]), ScriptedTurn::text("ok")]).tool(w.clone());
    let paused = s.pause().await;
    let revised = paused
        .claim(&w, 0)
        .restart_with_input(Account { account: "b".into() }, Some(Step { step: 1 }));
    let again = paused.restart(revised).pause().await;
    let hold = again.hold(0);
    // The paused request now carries the revised input and remembers the original.
    assert_eq!(hold.as_tool_request().unwrap().input, Some(json!({"account": "b"})));
    assert_eq!(hold.meta(metadata::REPLACED_INPUT), Some(&json!({"account": "a"})));
    let call = again.claim(&w, 0);
    assert_eq!(call.input.account, "b");
    let done = again.restart(call.restart(Some(Step { step: 2 }))).resume().await;
    assert_eq!(outputs(&done)[0], json!("b finished at 2"));
    assert_eq!(runs.load(Ordering::SeqCst), 3);
}
