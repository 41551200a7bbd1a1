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
fn empty_and_unknown_fields_are_rejected() {
    assert!(Part::from_json("{}").unwrap_err().to_string().contains("needs one of"));
    assert!(
        Part::from_json(r#"{"txt":"a"}"#)
            .unwrap_err()
            .to_string()
            .contains("txt")
    );
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
