use super::*;
use serde_json::json;

#[test]
fn round_trips_genkit_shapes_byte_for_byte() {
    for text in [
        r#"{"text":"hi"}"#,
        r#"{"toolRequest":{"name":"t","ref":"1","input":{"a":1}},"metadata":{"interrupt":{"x":true}}}"#,
        r#"{"toolResponse":{"name":"t","ref":"1","output":"ok"},"metadata":{"interruptResponse":true}}"#,
        r#"{"media":{"contentType":"image/png","url":"data:x"}}"#,
        r#"{"data":[1,2]}"#,
        r#"{"resource":{"uri":"file:///a"}}"#,
        r#"{"custom":{"k":1}}"#,
        r#"{"reasoning":"hmm"}"#,
        r#"{"toolRequest":{"name":"t"}}"#,
    ] {
        let part: Part = serde_json::from_str(text).unwrap();
        assert_eq!(serde_json::to_string(&part).unwrap(), text);
    }
}

#[test]
fn two_kinds_are_rejected_naming_both() {
    let err = Part::from_json(r#"{"text":"a","toolRequest":{"name":"t"}}"#).unwrap_err();
    assert_eq!(err.status(), crate::Status::InvalidArgument);
    let msg = err.to_string();
    assert!(msg.contains("text") && msg.contains("toolRequest"), "{msg}");
}

#[test]
fn a_part_without_a_known_kind_is_rejected() {
    assert!(Part::from_json("{}").unwrap_err().to_string().contains("needs one of"));
    // An unknown field is no kind: still nothing to decode.
    assert!(
        Part::from_json(r#"{"txt":"a"}"#)
            .unwrap_err()
            .to_string()
            .contains("needs one of")
    );
}

/// Forward-compatible wire: a field Holdpoint does not know is ignored and
/// dropped, at every level of a part; a known one of the wrong type is
/// still refused.
#[test]
fn unknown_fields_are_dropped_and_known_ones_stay_typed() {
    let part = Part::from_json(r#"{"text":"hi","partial":true,"index":3,"metadata":{"x":1}}"#).unwrap();
    assert_eq!(part.as_text(), Some("hi"));
    assert_eq!(
        serde_json::to_string(&part).unwrap(),
        r#"{"text":"hi","metadata":{"x":1}}"#
    );
    let part = Part::from_json(r#"{"toolRequest":{"name":"t","ref":"1","input":{},"partial":true}}"#).unwrap();
    assert_eq!(
        serde_json::to_string(&part).unwrap(),
        r#"{"toolRequest":{"name":"t","ref":"1","input":{}}}"#
    );
    let part = Part::from_json(r#"{"toolResponse":{"name":"t","output":1,"extra":"x"}}"#).unwrap();
    assert_eq!(
        serde_json::to_string(&part).unwrap(),
        r#"{"toolResponse":{"name":"t","output":1}}"#
    );
    let part = Part::from_json(r#"{"media":{"url":"u","size":3}}"#).unwrap();
    assert_eq!(serde_json::to_string(&part).unwrap(), r#"{"media":{"url":"u"}}"#);
    let message: crate::Message =
        serde_json::from_str(r#"{"role":"user","content":[{"text":"hi","future":{}}],"future":1}"#).unwrap();
    assert_eq!(
        serde_json::to_string(&message).unwrap(),
        r#"{"role":"user","content":[{"text":"hi"}]}"#
    );

    for bad in [
        r#"{"text":5}"#,
        r#"{"text":"a","metadata":[1]}"#,
        r#"{"toolRequest":{"name":7}}"#,
        r#"{"toolRequest":{"name":"t","ref":1}}"#,
        r#"{"toolResponse":{"name":"t","content":"x"}}"#,
        r#"{"media":{"url":false}}"#,
    ] {
        let err = Part::from_json(bad).unwrap_err();
        assert_eq!(err.status(), crate::Status::InvalidArgument, "{bad}");
    }
    assert!(serde_json::from_str::<crate::Message>(r#"{"role":"user","content":"hi"}"#).is_err());
}

#[test]
fn non_object_interrupt_data_is_rejected() {
    let err = Part::from_json(r#"{"toolRequest":{"name":"t"},"metadata":{"interrupt":5}}"#).unwrap_err();
    assert!(err.to_string().contains("\"interrupt\" must be a JSON object"), "{err}");
    let err = Part::from_json(r#"{"toolRequest":{"name":"t"},"metadata":{"resumed":[1]}}"#).unwrap_err();
    assert!(err.to_string().contains("\"resumed\""), "{err}");
}

#[test]
fn untyped_directives_build_expected_parts() {
    let mut paused = Part::tool_request("t", Some("r".into()), Some(json!({"a": 1})));
    paused.set_meta(metadata::INTERRUPT, json!({"why": "ask"}));
    let restart = paused.restart(Some(json!({"ok": true}))).unwrap();
    assert_eq!(
        serde_json::to_value(&restart).unwrap(),
        json!({"toolRequest": {"name": "t", "ref": "r", "input": {"a": 1}}, "metadata": {"resumed": {"ok": true}}})
    );
    let bare = paused.restart(None).unwrap();
    assert_eq!(bare.meta(metadata::RESUMED), Some(&json!(true)));
    let replaced = paused.restart_with_input(json!({"a": 2}), None).unwrap();
    assert_eq!(replaced.meta(metadata::REPLACED_INPUT), Some(&json!({"a": 1})));
    assert_eq!(replaced.as_tool_request().unwrap().input, Some(json!({"a": 2})));
    let respond = paused.respond(json!("out")).unwrap();
    assert_eq!(
        serde_json::to_value(&respond).unwrap(),
        json!({"toolResponse": {"name": "t", "ref": "r", "output": "out"}, "metadata": {"interruptResponse": true}})
    );
    assert!(paused.restart(Some(json!("not an object"))).is_err());
    assert!(Part::text("x").respond(json!(1)).is_err());
}

#[test]
fn interrupt_as_decodes_data() {
    #[derive(Deserialize)]
    struct Ask {
        why: String,
    }
    let mut p = Part::tool_request("t", None, None);
    assert!(matches!(
        p.interrupt_as::<Ask>(),
        Err(InterruptAsError::NotAnInterrupt { .. })
    ));
    p.set_meta(metadata::INTERRUPT, json!({"why": "ask"}));
    assert_eq!(p.interrupt_as::<Ask>().unwrap().why, "ask");
    p.set_meta(metadata::RESOLVED_INTERRUPT, json!(true));
    p.remove_meta(metadata::INTERRUPT);
    assert!(matches!(
        p.interrupt_as::<Ask>(),
        Err(InterruptAsError::NotAnInterrupt { .. })
    ));
}
