use super::*;

fn outcome(text: &str, hit_limit: bool) -> Outcome {
    Outcome {
        text: text.to_owned(),
        hit_limit,
        ..Outcome::default()
    }
}

#[test]
fn stop_sequences_cut_and_hold_back() {
    let stops = vec!["END".to_owned()];
    assert_eq!(stop_cut("abc END def", &stops), Some(4));
    assert_eq!(safe_len("abc EN", &stops), 4);
    assert_eq!(safe_len("abc E", &stops), 4);
    assert_eq!(safe_len("abc", &stops), 3);
    let sent = Arc::new(std::sync::Mutex::new(String::new()));
    let seen = Arc::clone(&sent);
    let mut s = Streamer {
        chunks: ChunkSink::new(move |c| seen.lock().unwrap().push_str(&c.text())),
        shape: Shape::Text,
        stops,
        sent: 0,
    };
    assert!(s.update("Hi E").is_continue());
    assert_eq!(*sent.lock().unwrap(), "Hi ");
    assert!(s.update("Hi EN").is_continue());
    assert!(s.update("Hi ENS").is_continue());
    assert!(s.update("Hi ENS END").is_break());
    assert_eq!(*sent.lock().unwrap(), "Hi ENS ");
}

#[test]
fn tool_replies_stream_only_answers() {
    let sent = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = Arc::clone(&sent);
    let mut s = Streamer {
        chunks: ChunkSink::new(move |c| seen.lock().unwrap().push(c.text())),
        shape: Shape::Tools,
        stops: Vec::new(),
        sent: 0,
    };
    for t in [
        r#"{"answer": "#,
        r#"{"answer": "Hel"#,
        r#"{"answer": "Hello\"#,
        r#"{"answer": "Hello\n"}"#,
    ] {
        assert!(s.update(t).is_continue());
    }
    assert_eq!(*sent.lock().unwrap(), vec!["Hel", "lo", "\n"]);
}

#[test]
fn finishes_map_replies_to_parts() {
    let r = finish(
        Shape::Tools,
        &outcome(r#"{"tool": "t", "arguments": {"a": 1}}"#, false),
        &[],
    )
    .unwrap();
    let part = r
        .message
        .as_ref()
        .unwrap()
        .tool_requests()
        .next()
        .unwrap()
        .as_tool_request()
        .unwrap()
        .clone();
    assert_eq!((part.name.as_str(), part.input), ("t", Some(json!({"a": 1}))));
    assert_eq!(r.finish_reason, Some(FinishReason::Stop));
    let r = finish(Shape::Tools, &outcome(r#"{"answer": "hi"}"#, false), &[]).unwrap();
    assert_eq!(r.text(), "hi");
    let r = finish(Shape::Tools, &outcome(r#"{"answer": "cut sho"#, true), &[]).unwrap();
    assert_eq!(
        (r.text().as_str(), r.finish_reason),
        ("cut sho", Some(FinishReason::Length))
    );
    let r = finish(Shape::Tools, &outcome(r#"{"tool": "t", "argu"#, true), &[]).unwrap();
    assert_eq!(r.finish_reason, Some(FinishReason::Length));
    assert!(r.message.unwrap().content.is_empty());
    assert_eq!(
        finish(Shape::Tools, &outcome("nonsense", false), &[])
            .unwrap_err()
            .status(),
        Status::Internal
    );
    let stops = vec!["\n\n".to_owned()];
    let r = finish(Shape::Text, &outcome("one\n\ntwo", true), &stops).unwrap();
    assert_eq!((r.text().as_str(), r.finish_reason), ("one", Some(FinishReason::Stop)));
    let r = finish(Shape::Text, &outcome("one", true), &stops).unwrap();
    assert_eq!(r.finish_reason, Some(FinishReason::Length));
}

#[test]
fn missing_files_say_how_to_fetch_them() {
    let err = LocalModel::smollm2(LocalConfig::new("/nonexistent/holdpoint-models")).unwrap_err();
    assert_eq!(err.status(), Status::FailedPrecondition);
    let msg = err.to_string();
    assert!(msg.contains("scripts/fetch-smollm2.sh"), "{msg}");
    assert!(
        msg.contains("/nonexistent/holdpoint-models/SmolLM2-135M-Instruct.Q4_1.gguf"),
        "{msg}"
    );
}
