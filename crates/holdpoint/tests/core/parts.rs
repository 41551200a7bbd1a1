//! Parts and directives: wire shapes, interrupt data, and the untyped
//! directives on `Part` building the same parts as the typed ones.

use holdpoint::message::{InterruptAsError, metadata};
use holdpoint::{Message, Part, Status};
use serde_json::{Value, json};

use crate::support::*;

/// A paused `transfer` request as the generate loop leaves it.
async fn paused_transfer() -> (Part, holdpoint::tool::Interrupted<Transfer, Receipt, Approval>) {
    let tool = transfer_tool(log());
    let m = model([calls(&[("transfer", json!({"to": "bob", "amount": 5.0}))])]);
    let g = start(&m, vec![tool.clone().into_tool()], "pay bob").await.unwrap();
    let part = g.response.interrupts().pop().unwrap();
    let call = tool.interrupted(&part).unwrap();
    (part, call)
}

#[tokio::test]
async fn untyped_restart_builds_the_same_part_as_typed_restart() {
    let (part, call) = paused_transfer().await;
    let res = Approval {
        approved: true,
        level: 2,
    };
    let typed = call.restart(Some(res.clone())).unwrap();
    let untyped = part.restart(Some(serde_json::to_value(&res).unwrap())).unwrap();
    assert_eq!(typed, untyped);
    assert_eq!(
        serde_json::to_value(&typed).unwrap(),
        json!({
            "toolRequest": {"name": "transfer", "ref": reference(&part), "input": {"to": "bob", "amount": 5.0}},
            "metadata": {"resumed": {"approved": true, "level": 2}}
        })
    );
}

#[tokio::test]
async fn untyped_bare_restart_builds_the_same_part_as_typed_bare_restart() {
    let (part, call) = paused_transfer().await;
    let typed = call.restart(None).unwrap();
    assert_eq!(typed, part.restart(None).unwrap());
    assert_eq!(typed.meta(metadata::RESUMED), Some(&json!(true)));
    // The directive does not carry the paused state along.
    assert!(typed.meta(metadata::INTERRUPT).is_none());
}

#[tokio::test]
async fn untyped_restart_with_input_builds_the_same_part_as_typed() {
    let (part, call) = paused_transfer().await;
    let new_input = Transfer {
        to: "bob".into(),
        amount: 2.5,
    };
    let typed = call.restart_with_input(new_input.clone(), None).unwrap();
    let untyped = part
        .restart_with_input(serde_json::to_value(&new_input).unwrap(), None)
        .unwrap();
    assert_eq!(typed, untyped);
    assert_eq!(
        typed.as_tool_request().unwrap().input,
        Some(json!({"to": "bob", "amount": 2.5}))
    );
    assert_eq!(
        typed.meta(metadata::REPLACED_INPUT),
        Some(&json!({"to": "bob", "amount": 5.0}))
    );
}

#[tokio::test]
async fn untyped_respond_builds_the_same_part_as_typed_respond() {
    let (part, call) = paused_transfer().await;
    let typed = call.respond(Receipt { id: "manual".into() }).unwrap();
    let untyped = part.respond(json!({"id": "manual"})).unwrap();
    assert_eq!(typed, untyped);
    assert_eq!(
        serde_json::to_value(&typed).unwrap(),
        json!({
            "toolResponse": {"name": "transfer", "ref": reference(&part), "output": {"id": "manual"}},
            "metadata": {"interruptResponse": true}
        })
    );
}

#[tokio::test]
async fn typed_respond_accepts_valid_output_and_untyped_respond_defers_the_check() {
    // A typed `Out` always satisfies its own schema, so check the untyped
    // side of the same tool: a string where an object is expected.
    let (part, call) = paused_transfer().await;
    assert!(call.respond(Receipt { id: "x".into() }).is_ok());
    // The untyped builder does not know the schema; the check happens at
    // resume time (see resume::respond_with_bad_output_is_rejected_at_resume_time).
    assert!(part.respond(json!("not a receipt")).is_ok());
}

#[tokio::test]
async fn interrupt_as_decodes_the_interrupt_data() {
    let (part, call) = paused_transfer().await;
    let ask: Ask = part.interrupt_as().unwrap();
    assert_eq!(ask.details, "send 5 to bob");
    assert_eq!(call.interrupt_as::<Ask>().unwrap(), ask);
    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Wrong {
        missing: u32,
    }
    let err = part.interrupt_as::<Wrong>().unwrap_err();
    assert!(
        matches!(&err, InterruptAsError::Decode { tool, .. } if tool == "transfer"),
        "{err:?}"
    );
    // `?` into the core's error: INVALID_ARGUMENT, naming the tool and the field.
    let err = holdpoint::Error::from(err);
    assert_eq!(err.status(), Status::InvalidArgument);
    let msg = err.to_string();
    assert!(
        msg.contains("interrupt data of tool \"transfer\" does not decode") && msg.contains("missing"),
        "{msg}"
    );
}

#[test]
fn interrupt_as_says_not_an_interrupt_for_parts_that_are_not_paused() {
    let not_paused = |p: &Part| match p.interrupt_as::<Value>() {
        Err(InterruptAsError::NotAnInterrupt { what }) => what,
        other => panic!("expected NotAnInterrupt, got {other:?}"),
    };
    assert_eq!(not_paused(&Part::text("hi")), "a text part");
    let request = Part::tool_request("t", Some("1".into()), None);
    assert!(not_paused(&request).contains("tool request \"t\" is not paused"));
    let mut resolved = Part::tool_request("t", Some("1".into()), None);
    resolved.set_meta(metadata::RESOLVED_INTERRUPT, json!({"details": "x"}));
    assert!(not_paused(&resolved).contains("already answered"));
    let err = holdpoint::Error::from(Part::text("hi").interrupt_as::<Value>().unwrap_err());
    assert_eq!(err.status(), Status::InvalidArgument);
    assert_eq!(err.to_string(), "not a paused tool request: a text part");
}

#[test]
fn bare_interrupt_flag_decodes_as_an_empty_object() {
    let mut p = Part::tool_request("t", Some("1".into()), None);
    p.set_meta(metadata::INTERRUPT, json!(true));
    assert!(p.is_interrupt());
    assert_eq!(p.interrupt_data(), Some(serde_json::Map::new()));
}

#[test]
fn absent_null_and_false_interrupt_mean_not_paused() {
    for v in [Value::Null, json!(false)] {
        let mut p = Part::tool_request("t", Some("1".into()), None);
        p.set_meta(metadata::INTERRUPT, v);
        assert!(!p.is_interrupt());
    }
    assert!(!Part::tool_request("t", None, None).is_interrupt());
}

#[test]
fn non_object_resume_data_is_rejected_by_the_untyped_restart() {
    let mut p = Part::tool_request("t", Some("1".into()), Some(json!({})));
    p.set_meta(metadata::INTERRUPT, json!(true));
    for bad in [json!(5), json!("yes"), json!([1]), json!(false), Value::Null] {
        let err = p.restart(Some(bad.clone())).unwrap_err();
        assert_eq!(err.status(), Status::InvalidArgument, "{bad}");
        assert!(err.to_string().contains("\"resumed\" must be a JSON object"), "{err}");
    }
    let err = p.restart_with_input(json!({}), Some(json!(1))).unwrap_err();
    assert!(err.to_string().contains("\"resumed\""), "{err}");
}

#[test]
fn directives_need_a_tool_request_part() {
    let err = Part::text("x").restart(None).unwrap_err();
    assert!(
        err.to_string().contains("needs a toolRequest part, got a text part"),
        "{err}"
    );
    let err = Part::tool_response("t", None, None).respond(json!(1)).unwrap_err();
    assert!(err.to_string().contains("got a toolResponse part"), "{err}");
}

#[test]
fn decoding_rejects_non_object_interrupt_and_resume_data() {
    for (key, val) in [("interrupt", "5"), ("resumed", "\"yes\""), ("interruptResponse", "[1]")] {
        let text = format!(r#"{{"toolRequest":{{"name":"t"}},"metadata":{{"{key}":{val}}}}}"#);
        let err = Part::from_json(&text).unwrap_err();
        assert_eq!(err.status(), Status::InvalidArgument);
        assert!(
            err.to_string().contains(&format!("\"{key}\" must be a JSON object")),
            "{err}"
        );
    }
    // `true` and objects are fine.
    Part::from_json(r#"{"toolRequest":{"name":"t"},"metadata":{"interrupt":true,"resumed":{"a":1}}}"#).unwrap();
}

#[test]
fn a_part_with_two_kinds_is_rejected() {
    let err = Part::from_json(r#"{"text":"a","data":{"x":1}}"#).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(
        err.to_string().contains("text") && err.to_string().contains("data"),
        "{err}"
    );
    let err =
        Message::from_json(r#"{"role":"model","content":[{"toolRequest":{"name":"t"},"toolResponse":{"name":"t"}}]}"#)
            .unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
}

/// Key order is the order the model produced (serde_json's
/// `preserve_order`), so a paused request round-trips byte for byte.
#[tokio::test]
async fn paused_generation_serialises_in_genkit_shape() {
    let (part, _) = paused_transfer().await;
    let r = reference(&part);
    assert_eq!(
        serde_json::to_string(&part).unwrap(),
        format!(
            r#"{{"toolRequest":{{"name":"transfer","ref":"{r}","input":{{"to":"bob","amount":5.0}}}},"metadata":{{"interrupt":{{"details":"send 5 to bob"}}}}}}"#
        )
    );
    let back = Part::from_json(&serde_json::to_string(&part).unwrap()).unwrap();
    assert_eq!(back, part);
}

/// Forward-compatible wire (docs/reference.md §1.2): an input whose
/// message, parts and resume carry keys Holdpoint does not know runs, and
/// the keys are not kept; a known key of the wrong type is still refused,
/// and so is an unknown key of the input or init themselves.
#[tokio::test]
async fn unknown_wire_fields_are_ignored_and_dropped_known_ones_stay_typed() {
    use std::sync::Arc;

    use holdpoint::agent::{Agent, AgentInit, AgentInput};
    use holdpoint::session::InMemoryStore;
    use holdpoint::{ScriptedModel, ScriptedTurn};

    let model = ScriptedModel::new("scripted");
    model.push(ScriptedTurn::text("hello"));
    let agent = Agent::builder("a")
        .model(Arc::new(model))
        .store(Arc::new(InMemoryStore::new()))
        .build()
        .unwrap();
    let input: AgentInput = serde_json::from_value(json!({
        "message": {"role": "user", "content": [{"text": "hi", "newPartField": 1}], "newMessageField": true}
    }))
    .unwrap();
    let out = agent.run(input, AgentInit::new()).await.unwrap();
    assert_eq!(out.text(), "hello");
    let snapshot = agent.latest(&out.session_id).await.unwrap().unwrap();
    let stored = serde_json::to_string(&snapshot.state).unwrap();
    assert!(stored.contains("\"hi\""), "{stored}");
    assert!(
        !stored.contains("newPartField") && !stored.contains("newMessageField"),
        "{stored}"
    );

    let resume: holdpoint::Resume = serde_json::from_value(json!({"respond": [], "newResumeField": 1})).unwrap();
    assert_eq!(resume, holdpoint::Resume::default());

    for bad in [
        json!({"message": {"role": "user", "content": [{"text": 1}]}}),
        json!({"message": {"role": "user", "content": {"text": "hi"}}}),
        json!({"message": "hi"}),
        json!({"detach": "yes"}),
        json!({"mesage": {"role": "user", "content": []}}),
    ] {
        let err = serde_json::from_value::<AgentInput>(bad.clone()).unwrap_err();
        assert!(!err.to_string().is_empty(), "{bad}");
    }
    assert!(serde_json::from_value::<AgentInit>(json!({"sesionId": "typo"})).is_err());
}
