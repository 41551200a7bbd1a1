use super::*;
use holdpoint::Part;

fn transfer_tool() -> ToolDefinition {
    ToolDefinition {
        name: "transferMoney".into(),
        description: "Transfers money to another account.".into(),
        input_schema: Some(json!({
            "type": "object",
            "properties": {
                "amount": {"description": "Amount in dollars.", "type": "number"},
                "toAccount": {"description": "The destination account.", "type": "string"},
                "memo": {"type": "string", "enum": ["rent", "gift"]}
            },
            "required": ["amount", "toAccount"]
        })),
        output_schema: None,
        metadata: None,
    }
}

#[test]
fn renders_chatml_with_tools_and_history() {
    let mut request = GenerateRequest::new(vec![
        Message::new(Role::System, vec![Part::text("You are a bank.")]),
        Message::user_text("Transfer $500 to savings <|im_end|>"),
        Message::new(
            Role::Model,
            vec![Part::tool_request(
                "transferMoney",
                None,
                Some(json!({"amount": 500, "toAccount": "savings"})),
            )],
        ),
        Message::new(
            Role::Tool,
            vec![
                Part::tool_response("transferMoney", None, Some(json!({"success": true}))),
                Part::tool_response("getBalance", None, Some(json!({"error": "bank offline"}))),
            ],
        ),
    ]);
    request.tools = vec![transfer_tool()].into();
    let prompt = render(&request, &request.tools, false);
    let text = prompt.text();
    let expected = "<|im_start|>system\nYou are a bank.\n\nYou can use these tools:\n\
- transferMoney: Transfers money to another account. Arguments: amount (number, required): Amount in dollars.; \
toAccount (string, required): The destination account.; memo (string: \"rent\", \"gift\", optional).\n\n\
Reply with one JSON object and nothing else: {\"tool\": \"<tool name>\", \"arguments\": {<arguments>}} to call a tool, \
or {\"answer\": \"<your reply>\"} to reply to the user without a tool.<|im_end|>\n\
<|im_start|>user\nTransfer $500 to savings <|im_end|><|im_end|>\n\
<|im_start|>assistant\n{\"tool\": \"transferMoney\", \"arguments\": {\"amount\": 500, \"toAccount\": \"savings\"}}<|im_end|>\n\
<|im_start|>tool\ntransferMoney returned: {\"success\":true}\ngetBalance failed: bank offline<|im_end|>\n\
<|im_start|>assistant\n";
    assert_eq!(text, expected);
    // The user's `<|im_end|>` is text, not a special token.
    assert!(
        prompt
            .segments
            .contains(&Segment::Text("user\nTransfer $500 to savings <|im_end|>".to_owned()))
    );
}

#[test]
fn default_system_prompt_without_tools() {
    let prompt = render(&GenerateRequest::new(vec![Message::user_text("Hi")]), &[], false);
    assert_eq!(
        prompt.text(),
        format!(
            "<|im_start|>system\n{DEFAULT_SYSTEM}<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        )
    );
}

#[test]
fn replies_parse_and_stream() {
    assert_eq!(
        parse_reply(r#"{"tool": "transferMoney", "arguments": {"amount": 500, "toAccount": "savings"}}"#),
        Some(Reply::Call {
            name: "transferMoney".into(),
            input: json!({"amount": 500, "toAccount": "savings"})
        })
    );
    assert_eq!(
        parse_reply(r#"{"answer": "Done.\nBye"}"#),
        Some(Reply::Answer("Done.\nBye".into()))
    );
    assert_eq!(parse_reply(r#"{"answer": "cut"#), None);
    assert_eq!(partial_answer(r#"{"tool": "x"#), None);
    assert_eq!(partial_answer(r#"{"answer": "#), None);
    assert_eq!(partial_answer(r#"{"answer": ""#).as_deref(), Some(""));
    assert_eq!(partial_answer(r#"{"answer": "a\"b\n"#).as_deref(), Some("a\"b\n"));
    assert_eq!(partial_answer(r#"{"answer": "a\"#).as_deref(), Some("a"));
    assert_eq!(partial_answer(r#"{"answer": "\u00e9\u00"#).as_deref(), Some("é"));
    assert_eq!(partial_answer(r#"{"answer": "a\ud83d\ude00b"#).as_deref(), Some("a😀b"));
    assert_eq!(partial_answer(r#"{"answer": "a\ud83d\ude0"#).as_deref(), Some("a"));
    assert_eq!(partial_answer(r#"{"answer": "a\ud83d"#).as_deref(), Some("a"));
    assert_eq!(
        partial_answer(r#"{"answer": "a\ud83dxyzxyz"#).as_deref(),
        Some("a\u{FFFD}xyzxyz")
    );
    assert_eq!(partial_answer(r#"{"answer": "a\ud83d"}"#).as_deref(), Some("a\u{FFFD}"));
    assert_eq!(partial_answer(r#"{"answer": "done"}"#).as_deref(), Some("done"));
    assert_eq!(
        call_json("t", Some(&json!({"a": [1, {"b": null}]}))),
        r#"{"tool": "t", "arguments": {"a": [1, {"b": null}]}}"#
    );
}
